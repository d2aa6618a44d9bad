package app

import (
	"fmt"
	"io"
	"strings"

	"kjoin.dev/kjoin/operr"
	"kjoin.dev/kjoin/output"
	"kjoin.dev/kjoin/token"
)

// reportedError is an error already reported (in JSON); only its exit code remains to apply.
type reportedError struct {
	code operr.Code
	err  error
}

func (r *reportedError) Error() string { return r.err.Error() }
func (r *reportedError) Unwrap() error { return r.err }

// Render prints err for an operator ("error: ..." then "hint: ...") and returns its exit code.
func Render(w io.Writer, err error) operr.Code {
	code := operr.CodeOf(err)
	msg := token.Redact(err.Error())
	fmt.Fprintf(w, "error: %s\n", strings.TrimSpace(msg))
	if hint := operr.HintOf(err); hint != "" {
		fmt.Fprintf(w, "hint: %s\n", token.Redact(hint))
	}
	return code
}

// NewErrorJSON describes err for machines (nil for no error).
func NewErrorJSON(err error) *output.Error {
	if err == nil {
		return nil
	}
	code := operr.CodeOf(err)
	out := &output.Error{Code: int(code), Reason: code.Reason(), Message: token.Redact(err.Error()), Hint: token.Redact(operr.HintOf(err))}
	if e, ok := operr.As(err); ok {
		out.Retryable = e.Retryable || code == operr.Busy || code == operr.Timeout
	}
	return out
}
