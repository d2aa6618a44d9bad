// Command matrixreport writes COMPATIBILITY.md from the raw results of make matrix
// (COMPATIBILITY.results.jsonl): one row per cell with pass or fail, the versions read from
// the running programs, and what failed. Nothing in the report is typed by hand. With -into,
// a run's results replace those cells' rows in the committed results and the others stay.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"kjoin.dev/kjoin/e2e/matrix"
)

func main() {
	in := flag.String("results", "COMPATIBILITY.results.jsonl", "raw results of this run")
	into := flag.String("into", "", "committed results to merge this run into (rewritten); empty: the report is of this run alone")
	out := flag.String("out", "COMPATIBILITY.md", "report")
	command := flag.String("command", "", "the command that produced this run's results (recorded in rows without one)")
	flag.Parse()
	if err := run(*in, *into, *out, *command); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(in, into, out, command string) error {
	rs, err := matrix.Read(in)
	if err != nil {
		return err
	}
	for i := range rs {
		if rs[i].Command == "" {
			rs[i].Command = command
		}
	}
	if into != "" {
		old, err := matrix.Read(into)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		rs = matrix.Merge(old, rs)
		var b strings.Builder
		for _, r := range rs {
			line, err := json.Marshal(r)
			if err != nil {
				return err
			}
			b.Write(append(line, '\n'))
		}
		if err := os.WriteFile(into, []byte(b.String()), 0o644); err != nil {
			return err
		}
	}
	return os.WriteFile(out, []byte(matrix.Render(rs)), 0o644)
}
