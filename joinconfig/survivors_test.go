package joinconfig

import (
	"testing"
	"time"
)

// --apiserver-bind-port takes 1 and 65535 and refuses 0 and 65536.
func TestBindPortBounds(t *testing.T) {
	for port, ok := range map[int]bool{1: true, 65535: true, 0: false, 65536: false} {
		f := base()
		f.ControlPlane, f.CertificateKey, f.BindPort = true, goodKey, port
		if _, err := resolve(t, f, nil); (err == nil) != ok {
			t.Errorf("--apiserver-bind-port %d: %v", port, err)
		}
	}
}

// --ignore-preflight-errors=all alone is fine; "all" beside another name is refused.
func TestIgnoreAllAlone(t *testing.T) {
	f := base()
	f.IgnorePreflightErrors = []string{"all"}
	if _, err := resolve(t, f, nil); err != nil {
		t.Errorf("all alone: %v", err)
	}
	f.IgnorePreflightErrors = []string{"all", "Swap"}
	if _, err := resolve(t, f, nil); err == nil {
		t.Error("all beside Swap was accepted")
	}
}

// Without --wait-ready, a join waits 15 s for Ready before it warns (what --help says).
func TestReadyGraceIsFifteenSeconds(t *testing.T) {
	res, err := resolve(t, base(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Options.ReadyGrace != 15*time.Second {
		t.Errorf("ReadyGrace %s", res.Options.ReadyGrace)
	}
}
