// Command matrixreport writes COMPATIBILITY.md from the raw results of make matrix
// (COMPATIBILITY.results.jsonl): one row per cell with pass or fail, the versions read from
// the running programs, and what failed. Nothing in the report is typed by hand.
package main

import (
	"flag"
	"fmt"
	"os"

	"kjoin.dev/kjoin/e2e/matrix"
)

func main() {
	in := flag.String("results", "COMPATIBILITY.results.jsonl", "raw results")
	out := flag.String("out", "COMPATIBILITY.md", "report")
	command := flag.String("command", "make matrix", "the command that produced the results")
	flag.Parse()
	rs, err := matrix.Read(*in)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := os.WriteFile(*out, []byte(matrix.Render(rs, *command)), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
