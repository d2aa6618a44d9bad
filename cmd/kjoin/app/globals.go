package app

import (
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"kjoin.dev/kjoin/operr"
	"kjoin.dev/kjoin/output"
)

// Globals are the root command's persistent flags: every command takes them.
type Globals struct {
	Output *output.Flags
	// Verbosity is klog-style: 0 operator messages, 1–5 kjoin's debug lines, 6 and up also
	// client-go's request log (capped at 6: higher levels print request bodies, secrets).
	Verbosity int
	// Root is the host root directory every host path is under (tests).
	Root string

	outputErr string
}

// isJoin reports kjoin join and kjoin join phase NAME.
func isJoin(cmd *cobra.Command) bool {
	for c := cmd; c != nil; c = c.Parent() {
		if c.Name() == "join" && c.HasParent() && !c.Parent().HasParent() {
			return true
		}
	}
	return false
}

func newGlobals() *Globals { return &Globals{Output: output.NewFlags(), Root: "/"} }

// AddFlags binds the persistent flags.
func (g *Globals) AddFlags(fs *pflag.FlagSet) {
	g.Output.AddFlags(fs)
	fs.IntVarP(&g.Verbosity, "v", "v", 0, "log level: 0 operator messages, 1-5 debug lines, 6 also the API requests")
	fs.StringVar(&g.Root, "root", "/", "host root directory (for tests)")
	_ = fs.MarkHidden("root")
}

// complete checks the persistent flags (the output format against what the command prints)
// and routes client-go's klog to stderr at -v 6.
func (g *Globals) complete(cmd *cobra.Command, deps *Deps) error {
	var bad []string
	if err := g.Output.Validate(cmd.Annotations[wideTable] == "true"); err != nil {
		if !isJoin(cmd) {
			bad = append(bad, err.Error())
		}
		g.outputErr = err.Error() // the join reports it with its other flags' problems
	}
	if g.Verbosity < 0 {
		bad = append(bad, fmt.Sprintf("-v %d: the log level is 0 or more", g.Verbosity))
	}
	if len(bad) > 0 {
		return operr.Invalid(cmd.CommandPath(), bad...)
	}
	if g.Verbosity >= 6 {
		fs := flag.NewFlagSet("klog", flag.ContinueOnError)
		klog.InitFlags(fs)
		_ = fs.Set("v", "6")
		klog.SetOutput(deps.Err)
		klog.LogToStderr(false)
	}
	return nil
}

// wideTable is the annotation of a command whose table has a wider form (-o wide).
const wideTable = "kjoin.dev/wide-table"

// formatFromArgs finds -o/--output in args when flag parsing failed before it (a flag error
// is printed in the format asked for too): pflag parses the output flags alone, every other
// flag ignored.
func formatFromArgs(args []string) string {
	f := output.NewFlags()
	fs := pflag.NewFlagSet("output", pflag.ContinueOnError)
	fs.ParseErrorsWhitelist.UnknownFlags = true
	fs.SetOutput(io.Discard)
	f.AddFlags(fs)
	_ = fs.Parse(args)
	return f.Format
}

// reportFailure prints a failure that the command has not reported itself: in JSON or YAML
// mode as an ErrorResult on stdout, else as text on stderr. It returns the exit code.
func reportFailure(deps *Deps, g *Globals, args []string, err error) operr.Code {
	var reported *reportedError
	if errors.As(err, &reported) {
		return reported.code
	}
	f := *g.Output
	if f.Format == "" {
		f.Format = formatFromArgs(args)
	}
	if f.Structured() {
		code := operr.CodeOf(err)
		if perr := f.Print(deps.Out, &output.ErrorResult{Error: *NewErrorJSON(err)}); perr == nil {
			return code
		}
	}
	return Render(deps.Err, err)
}

// printResult prints a machine-readable answer, then returns failure (already reported in
// the answer, so only its exit code remains).
func printResult(deps *Deps, g *Globals, obj output.Object, failure error) error {
	if err := g.Output.Print(deps.Out, obj); err != nil {
		return err
	}
	if failure != nil {
		return &reportedError{code: operr.CodeOf(failure), err: failure}
	}
	return nil
}
