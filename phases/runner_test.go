package phases

import (
	"context"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/operr"
)

func TestDryRunChangesNothing(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	s := &State{Opts: h.options(t)}
	s.Opts.DryRun = true
	results, err := Run(context.Background(), h.env, s, Join, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	assertNothingWritten(t, h)
	for _, c := range h.runner.calls { // only the read-only probes
		if c != "kubelet --version" && c != "systemctl is-active --quiet systemd-resolved" {
			t.Errorf("dry run ran %q (all: %v)", c, h.runner.calls)
		}
	}
	for _, a := range h.client.Actions() {
		if a.GetVerb() != "get" && a.GetVerb() != "list" && a.GetVerb() != "watch" {
			t.Errorf("dry run made an API write: %s %s", a.GetVerb(), a.GetResource().Resource)
		}
	}
	var paths []string
	for _, w := range s.PlannedWrites() {
		paths = append(paths, w.Path)
	}
	for _, want := range []string{host.KubeletKubeconfig, host.CACertPath, host.KubeletConfigPath, host.KubeletFlagsPath} {
		if !strings.Contains(strings.Join(paths, " "), want) {
			t.Errorf("dry run does not list %s: %v", want, paths)
		}
	}
	if results[len(results)-1].Status != "skipped" {
		t.Errorf("wait-ready should be skipped in a dry run: %+v", results)
	}
	// A dry run reports what it would change as such, and never says it wrote anything.
	want := map[string]string{"preflight": "ran", "discovery": "ran", "tls-bootstrap": "would change", "replace-node": "unchanged",
		"kubelet-config": "would change", "kubelet-start": "would change"}
	for _, r := range results {
		if w, ok := want[r.Name]; ok && r.Status != w {
			t.Errorf("dry run: %s %s, want %s", r.Name, r.Status, w)
		}
	}
	if out := h.out.String(); strings.Contains(out, "] wrote ") || !strings.Contains(out, "[kubelet-config] would write") {
		t.Errorf("dry run progress:\n%s", out)
	}
}

func TestSkipAndOnlyPhases(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	s := &State{Opts: h.options(t)}
	results, err := Run(context.Background(), h.env, s, Join, RunOptions{Only: []string{"kubelet-config"}})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range results {
		names = append(names, r.Name+"="+r.Status)
	}
	if strings.Join(names, ",") != "discovery=ran,kubelet-config=ran" {
		t.Errorf("phase kubelet-config ran %v; want discovery (needed) then kubelet-config", names)
	}
	if _, err := Run(context.Background(), h.env, &State{Opts: h.options(t)}, Join, RunOptions{Skip: []string{"nope"}}); operr.CodeOf(err) != operr.Usage {
		t.Errorf("unknown phase: %v", err)
	}
}

func TestRerunConvergesWithoutWriting(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	if _, err := Run(context.Background(), h.env, &State{Opts: h.options(t)}, Join, RunOptions{}); err != nil {
		t.Fatal(err)
	}
	mtimes := map[string]time.Time{}
	for _, p := range []string{host.KubeletKubeconfig, host.CACertPath, host.KubeletConfigPath, host.KubeletFlagsPath, host.KubeletInstancePath} {
		st, _ := os.Stat(h.env.Paths.Of(p))
		mtimes[p] = st.ModTime()
	}
	h.runner.calls = nil
	h.env.PortInUse = func(int) bool { return true } // our kubelet holds 10250 now
	s := &State{Opts: h.options(t)}
	results, err := Run(context.Background(), h.env, s, Join, RunOptions{})
	if err != nil {
		t.Fatalf("re-run: %v\n%s", err, h.out)
	}
	if s.Changed() {
		t.Error("re-run reports changed")
	}
	for _, r := range results {
		if r.Status == "ran" && r.Name != "preflight" && r.Name != "discovery" && r.Name != "version-check" && r.Name != "wait-ready" {
			t.Errorf("phase %s %s on a joined node", r.Name, r.Status)
		}
	}
	for p, m := range mtimes {
		if st, _ := os.Stat(h.env.Paths.Of(p)); !st.ModTime().Equal(m) {
			t.Errorf("%s rewritten", p)
		}
	}
	for _, c := range h.runner.calls {
		if strings.Contains(c, "restart") {
			t.Errorf("re-run restarted the kubelet: %v", h.runner.calls)
		}
	}
}

// A write that found the disk full fails the join with exit 3, naming the path and ENOSPC.
func TestDiskFullIsExit3NamingThePath(t *testing.T) {
	h := newTestHost(t)
	full := Phase{Name: "full", Run: func(context.Context, *host.Env, *State) error {
		return fmt.Errorf("write kubelet configuration: %w", &os.PathError{Op: "write", Path: "/var/lib/kubelet/.config.yaml.tmp-1", Err: syscall.ENOSPC})
	}}
	_, err := Run(context.Background(), h.env, &State{Opts: h.options(t)}, []Phase{full}, RunOptions{})
	if operr.CodeOf(err) != operr.Preflight || !strings.Contains(err.Error(), "/var/lib/kubelet/.config.yaml.tmp-1") || !strings.Contains(err.Error(), "no space left on device") {
		t.Errorf("got %v (code %d)", err, operr.CodeOf(err))
	}
}
