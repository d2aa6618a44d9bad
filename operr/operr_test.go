package operr

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
)

func TestCodesHintsAndWrapping(t *testing.T) {
	base := errors.New("connection refused")
	e := Wrap(Trust, base, "cannot reach the API server", "check the network")
	wrapped := fmt.Errorf("phase discovery: %w", e)
	if CodeOf(wrapped) != Trust || HintOf(wrapped) != "check the network" || !errors.Is(wrapped, base) {
		t.Errorf("code %d hint %q", CodeOf(wrapped), HintOf(wrapped))
	}
	if got := e.Error(); got != "cannot reach the API server: connection refused" {
		t.Errorf("Error() = %q", got)
	}
	if CodeOf(nil) != OK || CodeOf(base) != Other {
		t.Error("plain errors are Other, nil is OK")
	}
	f := Newf(Usage, "bad %s", "flag").WithHint("see --help")
	if f.What != "bad flag" || f.Hint != "see --help" || f.Code.Reason() != "usage" {
		t.Errorf("%+v", f)
	}
	if got, ok := As(wrapped); !ok || got != e {
		t.Error("As does not find the operator error")
	}
	for c, r := range map[Code]string{Preflight: "preflight", Auth: "auth", Timeout: "timeout", Busy: "busy", Other: "other"} {
		if c.Reason() != r {
			t.Errorf("%d.Reason() = %q", c, c.Reason())
		}
	}
}

// The exit codes are a documented contract (README's table): never renumbered.
func TestExitCodesArePinned(t *testing.T) {
	for code, want := range map[Code]int{OK: 0, Other: 1, Usage: 2, Preflight: 3, Trust: 4, Auth: 5, Timeout: 6, Busy: 7, Verify: 8} {
		if int(code) != want {
			t.Errorf("%s is %d, documented as %d", code.Reason(), code, want)
		}
	}
	for code, reason := range map[Code]string{OK: "ok", Other: "other", Usage: "usage", Preflight: "preflight", Trust: "trust", Auth: "auth", Timeout: "timeout", Busy: "busy", Verify: "verify"} {
		if code.Reason() != reason {
			t.Errorf("code %d reason %q, want %q", code, code.Reason(), reason)
		}
	}
}

// The README's exit-code table is operr's (one source for it and kjoin help exit-codes).
func TestREADMEExitCodes(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "## Exit codes\n\n"+MarkdownTable()+"\n") {
		t.Errorf("README's exit-code table is not operr.MarkdownTable():\n%s", MarkdownTable())
	}
	for _, c := range Codes {
		if Meanings[c] == "" {
			t.Errorf("exit code %d has no meaning", c)
		}
	}
}
