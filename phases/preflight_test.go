package phases

import (
	"context"
	"os"
	"strings"
	"testing"

	"kjoin.dev/kjoin/discovery"
	"kjoin.dev/kjoin/discovery/discoverytest"
	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/operr"
)

func TestPreflightReportsAllFailuresAtOnce(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	h.env.Geteuid = func() int { return 1000 }
	h.env.PortInUse = func(int) bool { return true }
	_ = os.WriteFile(h.env.Paths.Of(host.ProcIPForward), []byte("0\n"), 0o644)
	s := &State{Opts: h.options(t)}
	_, err := Run(context.Background(), h.env, s, Join, RunOptions{})
	if operr.CodeOf(err) != operr.Preflight {
		t.Fatalf("got %v", err)
	}
	for _, name := range []string{"IsPrivilegedUser", "Port-10250", "FileContent--proc-sys-net-ipv4-ip_forward"} {
		if !strings.Contains(err.Error(), "[ERROR "+name+"]") {
			t.Errorf("error does not report %s: %v", name, err)
		}
	}
	// Ignoring them turns them into warnings and the join proceeds.
	s = &State{Opts: h.options(t)}
	s.Opts.IgnorePreflight = map[string]bool{"isprivilegeduser": true, "port-10250": true, "filecontent--proc-sys-net-ipv4-ip_forward": true}
	if _, err := Run(context.Background(), h.env, s, Join, RunOptions{}); err != nil {
		t.Fatalf("with ignores: %v", err)
	}
	if len(s.Warnings) < 3 {
		t.Errorf("want the ignored checks as warnings, got %v", s.Warnings)
	}
}

func TestJoinedToAnotherClusterIsRefused(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	if _, err := Run(context.Background(), h.env, &State{Opts: h.options(t)}, Join, RunOptions{}); err != nil {
		t.Fatal(err)
	}
	other := discoverytest.New(t, "https://other:6443", testToken)
	o := h.options(t)
	o.Endpoint = other.Endpoint()
	o.Pins, _ = discovery.ParsePins([]string{other.Pin})
	_, err := Run(context.Background(), h.env, &State{Opts: o}, Join, RunOptions{})
	if operr.CodeOf(err) != operr.Trust || !strings.Contains(err.Error(), h.server.Pin) || !strings.Contains(err.Error(), other.Pin) || !strings.Contains(operr.HintOf(err), "kjoin reset") {
		t.Fatalf("got %v (hint %q)", err, operr.HintOf(err))
	}
}
