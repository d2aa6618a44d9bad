package phases

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"kjoin.dev/kjoin/discovery"
	"kjoin.dev/kjoin/discovery/discoverytest"
	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/joinrequest"
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

// Failures are listed root first, then by name.
func TestPreflightListsFailuresRootFirstThenByName(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	h.env.Geteuid = func() int { return 1000 }
	h.env.PortInUse = func(int) bool { return true }
	_ = os.WriteFile(h.env.Paths.Of(host.ProcIPForward), []byte("0\n"), 0o644)
	err := runPhase(Preflight, h.env, &State{Opts: h.options(t)})
	var order []int
	for _, name := range []string{"IsPrivilegedUser", "FileContent--proc-sys-net-ipv4-ip_forward", "Port-10250"} {
		order = append(order, strings.Index(fmt.Sprint(err), "[ERROR "+name+"]"))
	}
	if order[0] < 0 || !(order[0] < order[1] && order[1] < order[2]) {
		t.Errorf("failures at %v, want root first then by name:\n%v", order, err)
	}
}

// Swap is a warning when /proc/swaps lists a device under its header; none when it lists
// none or cannot be read.
func TestPreflightWarnsOfSwap(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		swaps string // "" : no /proc/swaps
		warn  bool
	}{
		{"a swap file", "Filename\tType\tSize\tUsed\tPriority\n/swapfile file 1048572 0 -2\n", true},
		{"header only", "Filename\tType\tSize\tUsed\tPriority\n", false},
		{"unreadable", "", false},
	} {
		h := newTestHost(t)
		if tc.swaps != "" {
			if err := os.WriteFile(h.env.Paths.Of(host.ProcSwaps), []byte(tc.swaps), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		s := &State{Opts: h.options(t)}
		if err := runPhase(Preflight, h.env, s); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := strings.Contains(strings.Join(s.Warnings, "\n"), "[Swap]: swap is on"); got != tc.warn {
			t.Errorf("%s: swap warned %v, want %v: %q", tc.name, got, tc.warn, s.Warnings)
		}
	}
}

// A control plane needs an empty manifests directory, unless the manifests are this join's.
func TestPreflightControlPlaneManifestsDir(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		manifest bool
		own      bool
		fails    bool
	}{
		{"empty", false, false, false},
		{"another's manifest", true, false, true},
		{"this join's manifest", true, true, false},
	} {
		c := newCPHost(t)
		dir := c.env.Paths.Of(host.ManifestsDir)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if tc.manifest {
			if err := os.WriteFile(filepath.Join(dir, "etcd.yaml"), []byte("kind: Pod\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		s := &State{Opts: c.options(t)}
		if tc.own {
			s.Journal = &Journal{Node: "cp2", CAPin: c.server.Pin, Phases: []string{"kubelet-start"}}
		}
		err := runPhase(Preflight, c.env, s)
		if got := strings.Contains(fmt.Sprint(err), "[ERROR DirAvailable--etc-kubernetes-manifests]"); got != tc.fails {
			t.Errorf("%s: manifests dir refused %v, want %v: %v", tc.name, got, tc.fails, err)
		}
	}
}

// A journal makes the files on the node this join's own when it is this node's, under this
// join's pins (or any, unpinned), and records some progress.
func TestOwnershipFromTheJournal(t *testing.T) {
	t.Parallel()
	const other = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
	h := newTestHost(t)
	pinned := h.options(t)
	unpinned := h.options(t)
	unpinned.Pins = nil
	for _, tc := range []struct {
		name string
		o    joinrequest.Options
		j    Journal
		own  bool
	}{
		{"this node, this CA, phases", pinned, Journal{Node: "w1", CAPin: h.server.Pin, Phases: []string{"preflight"}}, true},
		{"this node, this CA, files", pinned, Journal{Node: "w1", CAPin: h.server.Pin, Files: []string{host.KubeletConfigPath}}, true},
		{"this node, this CA, nothing done", pinned, Journal{Node: "w1", CAPin: h.server.Pin}, false},
		{"this node, no CA recorded", pinned, Journal{Node: "w1", Phases: []string{"preflight"}}, true},
		{"another node", pinned, Journal{Node: "w2", CAPin: h.server.Pin, Phases: []string{"preflight"}}, false},
		{"another CA", pinned, Journal{Node: "w1", CAPin: other, Phases: []string{"preflight"}}, false},
		{"unpinned", unpinned, Journal{Node: "w1", CAPin: other, Phases: []string{"preflight"}}, true},
	} {
		j := tc.j
		s := &State{Opts: tc.o, Journal: &j}
		if err := checkOwnership(h.env, s); err != nil || s.Own != tc.own {
			t.Errorf("%s: own %v (%v), want %v", tc.name, s.Own, err, tc.own)
		}
	}
}

// Unpinned, a join cannot tell which cluster a node's existing CA is: it neither refuses the
// node as another cluster's nor takes its files as its own (FileAvailable then reports them).
func TestUnpinnedJoinDoesNotJudgeAnExistingCA(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	other := discoverytest.New(t, "https://other:6443", testToken)
	for p, b := range map[string][]byte{host.CACertPath: other.CAPEM, host.KubeletKubeconfig: []byte("apiVersion: v1\nkind: Config\n")} {
		if err := os.MkdirAll(filepath.Dir(h.env.Paths.Of(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(h.env.Paths.Of(p), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	o := h.options(t)
	o.Pins = nil
	s := &State{Opts: o, Journal: &Journal{}}
	if err := checkOwnership(h.env, s); err != nil || s.Own || s.Journal.Adopted {
		t.Errorf("unpinned: %v, own %v, adopted %v; want no error, not own", err, s.Own, s.Journal.Adopted)
	}
	err := runPhase(Preflight, h.env, &State{Opts: o})
	if !strings.Contains(fmt.Sprint(err), "[ERROR FileAvailable--etc-kubernetes-kubelet.conf]") {
		t.Errorf("unpinned preflight: %v, want kubelet.conf reported", err)
	}
}

// A control plane's defaults: the API server port 6443 unless given, the advertise address
// on the route to the endpoint unless given, and that address checked; a worker gets neither.
func TestDefaultsForAControlPlane(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	h.env.LocalAddressFor = func(string) (string, error) { return "10.0.0.12", nil }
	o := joinrequest.Options{NodeName: "cp2", Endpoint: "cp.example:6443", ControlPlane: true}
	if err := Defaults(h.env, &o); err != nil || o.BindPort != 6443 || o.AdvertiseAddress != "10.0.0.12" {
		t.Errorf("defaults: port %d address %q (%v), want 6443 and the routed address", o.BindPort, o.AdvertiseAddress, err)
	}
	o = joinrequest.Options{NodeName: "cp2", Endpoint: "cp.example:6443", ControlPlane: true, BindPort: 7443, AdvertiseAddress: "10.0.0.99"}
	if err := Defaults(h.env, &o); err != nil || o.BindPort != 7443 || o.AdvertiseAddress != "10.0.0.99" {
		t.Errorf("given: port %d address %q (%v), want them kept", o.BindPort, o.AdvertiseAddress, err)
	}
	w := joinrequest.Options{NodeName: "w1", Endpoint: "cp.example:6443"}
	if err := Defaults(h.env, &w); err != nil || w.BindPort != 0 || w.AdvertiseAddress != "" {
		t.Errorf("worker: port %d address %q (%v), want neither", w.BindPort, w.AdvertiseAddress, err)
	}
	h.env.LocalAddressFor = func(string) (string, error) { return "", errors.New("no route") }
	o = joinrequest.Options{NodeName: "cp2", Endpoint: "cp.example:6443", ControlPlane: true}
	if err := Defaults(h.env, &o); operr.CodeOf(err) != operr.Preflight || !strings.Contains(operr.HintOf(err), "--apiserver-advertise-address") {
		t.Errorf("no route: %v, want a preflight error naming the flag", err)
	}
	o = joinrequest.Options{NodeName: "cp2", Endpoint: "cp.example:6443", ControlPlane: true, AdvertiseAddress: "cp2.example"}
	if err := Defaults(h.env, &o); operr.CodeOf(err) != operr.Usage {
		t.Errorf("a name for the advertise address: %v, want a usage error", err)
	}
}
