// Package operr defines the errors kjoin shows operators: what failed, why, what to do next,
// and a stable exit code that automation can branch on. It knows nothing of the command line:
// the app package renders these errors, once.
package operr

import (
	"errors"
	"fmt"
)

// Code is a documented, stable process exit code.
type Code int

// Exit codes (documented in README.md; never renumber).
const (
	OK        Code = 0
	Other     Code = 1
	Usage     Code = 2
	Preflight Code = 3
	Trust     Code = 4 // discovery / CA trust
	Auth      Code = 5 // token / authentication / authorization
	Timeout   Code = 6
	Busy      Code = 7 // retryable: another joiner holds the lock, the cluster is busy
	Verify    Code = 8 // kjoin verify: a check failed; kjoin diagnose: the node is not healthy
)

// Reason returns the short machine name of a code, used in JSON output.
func (c Code) Reason() string {
	switch c {
	case OK:
		return "ok"
	case Usage:
		return "usage"
	case Preflight:
		return "preflight"
	case Trust:
		return "trust"
	case Auth:
		return "auth"
	case Timeout:
		return "timeout"
	case Busy:
		return "busy"
	case Verify:
		return "verify"
	}
	return "other"
}

// Error is an operator-facing error.
type Error struct {
	Code Code
	// What failed, in operator terms ("node \"w1\" is already registered and Ready").
	What string
	// Hint is the next step ("delete the Node with kubectl delete node w1 or pick another --node-name").
	Hint string
	// Retryable reports whether the same command may succeed if simply run again later.
	Retryable bool
	Err       error
}

func (e *Error) Error() string {
	if e.Err == nil {
		return e.What
	}
	if e.What == "" {
		return e.Err.Error()
	}
	return e.What + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// New returns an operator error.
func New(code Code, what, hint string) *Error { return &Error{Code: code, What: what, Hint: hint} }

// Wrap returns an operator error with a cause.
func Wrap(code Code, err error, what, hint string) *Error {
	return &Error{Code: code, What: what, Hint: hint, Err: err}
}

// Newf returns an operator error with a formatted What; add the next step with WithHint.
func Newf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, What: fmt.Sprintf(format, args...)}
}

// WithHint sets the next step for the operator and returns e.
func (e *Error) WithHint(hint string) *Error {
	e.Hint = hint
	return e
}

// As finds the outermost operator error in err's chain.
func As(err error) (*Error, bool) {
	var e *Error
	ok := errors.As(err, &e)
	return e, ok
}

// CodeOf returns the exit code for err: the operator error's code, Other for plain errors.
func CodeOf(err error) Code {
	if err == nil {
		return OK
	}
	if e, ok := As(err); ok {
		return e.Code
	}
	return Other
}

// HintOf returns the first hint in err's chain.
func HintOf(err error) string {
	for err != nil {
		if e, ok := err.(*Error); ok && e.Hint != "" {
			return e.Hint
		}
		err = errors.Unwrap(err)
	}
	return ""
}
