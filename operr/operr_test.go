package operr

import (
	"errors"
	"fmt"
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
