// Command genman writes kjoin's man pages (section 1, one per command: kjoin.1,
// kjoin-join.1, ...) from the cobra command tree into a directory, for the .deb.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra/doc"

	"kjoin.dev/kjoin/cmd/kjoin/app"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: genman DIR VERSION")
		os.Exit(2)
	}
	root := app.NewRootCmd(&app.Deps{Streams: app.Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr}})
	root.DisableAutoGenTag = true // reproducible pages: no generation date
	header := &doc.GenManHeader{Title: "KJOIN", Section: "1", Source: "kjoin " + os.Args[2], Manual: "kjoin manual"}
	if err := os.MkdirAll(os.Args[1], 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := doc.GenManTree(root, header, os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "genman:", err)
		os.Exit(1)
	}
}
