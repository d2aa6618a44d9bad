//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"kjoin.dev/kjoin/discovery/discoverytest"
	"kjoin.dev/kjoin/e2e/framework"
	"kjoin.dev/kjoin/e2e/lab"
	"kjoin.dev/kjoin/output"
)

// joinDirs are where a join writes on a host.
var joinDirs = []string{"/etc/kubernetes", "/var/lib/kubelet", "/var/lib/kjoin"}

// hostFiles lists every file under the join directories of a lab host.
func hostFiles(t *testing.T, c *framework.Cluster, host string) []string {
	t.Helper()
	var out []string
	for _, d := range joinDirs {
		root := c.HostPath(host, d)
		_ = filepath.WalkDir(root, func(p string, e os.DirEntry, err error) error {
			if err == nil && p != root {
				out = append(out, d+strings.TrimPrefix(p, root))
			}
			return nil
		})
	}
	sort.Strings(out)
	return out
}

// recorder keeps what a lying discovery server received.
type recorder struct {
	mu       sync.Mutex
	requests []*http.Request
}

func (r *recorder) record(req *http.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests = append(r.requests, req.Clone(context.Background()))
}

// assertNoToken proves the server was contacted and never saw the token: no Authorization
// header, the secret in no header, and nothing but anonymous GETs of cluster-info.
func (r *recorder) assertNoToken(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.requests) == 0 {
		t.Fatal("the lying server was never contacted: the test proves nothing")
	}
	secret := strings.SplitN(lab.Token, ".", 2)[1]
	for _, req := range r.requests {
		if req.Header.Get("Authorization") != "" {
			t.Errorf("request %s %s carried credentials", req.Method, req.URL)
		}
		for k, vs := range req.Header {
			for _, v := range vs {
				if strings.Contains(v, secret) {
					t.Errorf("header %s carried the token secret", k)
				}
			}
		}
		if req.Method != http.MethodGet || req.URL.Path != "/api/v1/namespaces/kube-public/configmaps/cluster-info" || strings.Contains(req.URL.RawQuery, secret) {
			t.Errorf("unexpected request %s %s", req.Method, req.URL)
		}
	}
}

// TestLyingDiscoveryServers puts three impostors on the lab bridge. Each knows the real
// token (as anyone holding a leaked join command would) and the real cluster's public
// cluster-info. The join pins the real CA: each must be refused with exit 4 at its first
// answer, the token never sent, nothing written on the host.
func TestLyingDiscoveryServers(t *testing.T) {
	c := framework.Get(t)
	c.Host(t, "w5")
	ctx := context.Background()
	real, err := c.Client.CoreV1().ConfigMaps("kube-public").Get(ctx, "cluster-info", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kc, err := clientcmd.Load([]byte(real.Data["kubeconfig"]))
	if err != nil {
		t.Fatal(err)
	}
	var server string
	var realCA []byte
	for _, cl := range kc.Clusters {
		server, realCA = cl.Server, cl.CertificateAuthorityData
	}
	before := hostFiles(t, c, "w5")

	for _, tc := range []struct {
		name string
		// answer builds the impostor's cluster-info from its own CA.
		answer func(attackerCA []byte) any
		want   string
	}{
		{"bundle of the pinned CA and the attacker's, signed with the token", func(attackerCA []byte) any {
			return discoverytest.ClusterInfo(t, append(append([]byte{}, realCA...), attackerCA...), server, lab.Token)
		}, "no --discovery-token-ca-cert-hash pins"},
		{"foreign CA, no signatures", func(attackerCA []byte) any {
			return discoverytest.ClusterInfo(t, attackerCA, server)
		}, "does not match any --discovery-token-ca-cert-hash"},
		{"the real CA and signed cluster-info over the attacker's TLS", func([]byte) any {
			return real
		}, "not signed by the pinned CA"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			var answer any
			addr, attackerCA := hostileServerCA(t, func(w http.ResponseWriter, r *http.Request) {
				rec.record(r)
				_ = json.NewEncoder(w).Encode(answer)
			})
			answer = tc.answer(attackerCA)
			writeToken(t, c, "w5", lab.Token)
			r := c.Run(t, "w5", "kjoin", "join", addr, "--token-file", "/run/lab/token", "--discovery-token-ca-cert-hash", c.CAHash, "-o", "json")
			out := framework.Answer[output.JoinResult](t, r)
			if r.ExitCode != 4 || out.Error == nil || !strings.Contains(out.Error.Message, tc.want) {
				t.Errorf("exit %d, error %+v; want exit 4 with %q", r.ExitCode, out.Error, tc.want)
			}
			rec.assertNoToken(t)
			if n := len(rec.requests); n != 1 {
				t.Errorf("the impostor got %d requests; it must be refused at its first answer", n)
			}
			t.Logf("refused after %s", r.Duration)
			if after := hostFiles(t, c, "w5"); strings.Join(after, ",") != strings.Join(before, ",") {
				t.Errorf("a refused join wrote on the host: before %v, after %v", before, after)
			}
			// Listed first before the genuine API server, the impostor ends the join just
			// the same: a list does not weaken the pin (going on to the next would join).
			rec.mu.Lock()
			rec.requests = nil
			rec.mu.Unlock()
			r = c.Run(t, "w5", "kjoin", "join", addr, lab.Endpoint(), "--token-file", "/run/lab/token", "--discovery-token-ca-cert-hash", c.CAHash, "-o", "json")
			out = framework.Answer[output.JoinResult](t, r)
			if r.ExitCode != 4 || out.Error == nil || !strings.Contains(out.Error.Message, tc.want) {
				t.Errorf("impostor listed first: exit %d, error %+v; want exit 4 with %q", r.ExitCode, out.Error, tc.want)
			}
			rec.assertNoToken(t)
			if after := hostFiles(t, c, "w5"); strings.Join(after, ",") != strings.Join(before, ",") {
				t.Errorf("a refused join with the impostor first wrote on the host: before %v, after %v", before, after)
			}
		})
	}
}

// TestBadInputsTouchNothing runs kjoin join with bad values on a host that has no container
// runtime: each must be refused as a usage error naming the flag (not "no container runtime
// socket", not a hang in discovery), with nothing written.
func TestBadInputsTouchNothing(t *testing.T) {
	c := framework.Get(t)
	c.Host(t, "w6")
	if err := c.StopContainerd("w6"); err != nil {
		t.Fatal(err)
	}
	// No runtime at all: not even a stale socket file.
	if err := os.Remove(c.HostPath("w6", "/run/containerd/containerd.sock")); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	writeToken(t, c, "w6", lab.Token)
	base := []string{"kjoin", "join", "--token-file", "/run/lab/token", "--discovery-token-ca-cert-hash", c.CAHash}
	// The host really has no runtime: a valid command line fails preflight's runtime lookup.
	r := c.Run(t, "w6", append(base, lab.Endpoint())...)
	if r.ExitCode != 3 || !strings.Contains(r.Stderr, "no container runtime socket") {
		t.Fatalf("exit %d, stderr %s; want exit 3 naming the missing runtime (the test's premise)", r.ExitCode, r.Stderr)
	}
	before := hostFiles(t, c, "w6")
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"10.77.0.11:99999"}, "10.77.0.11:99999"},
		{[]string{":6443"}, `":6443"`},
		{[]string{lab.Endpoint(), "--control-plane", "--certificate-key", "abc123"}, "--certificate-key"},
		{[]string{lab.Endpoint(), "--control-plane", "--apiserver-bind-port", "0"}, "--apiserver-bind-port"},
		{[]string{lab.Endpoint(), "--control-plane", "--apiserver-bind-port", "70000"}, "--apiserver-bind-port"},
		{[]string{lab.Endpoint(), "--patches", "/nonexistent/patches"}, "--patches"},
		{[]string{lab.Endpoint(), "--discovery-token-ca-cert-hash", "sha256:abc"}, "sha256:abc"},
	} {
		r := c.Run(t, "w6", append(append([]string{}, base...), tc.args...)...)
		if r.ExitCode != 2 || !strings.Contains(r.Stderr, tc.flag) || strings.Contains(r.Stderr, "container runtime") {
			t.Errorf("%v: exit %d, stderr %s; want exit 2 naming %s", tc.args, r.ExitCode, r.Stderr, tc.flag)
		}
	}
	// All at once: every bad value in one report.
	r = c.Run(t, "w6", append(append([]string{}, base...), "10.77.0.11:99999", "--control-plane", "--certificate-key", "abc", "--apiserver-bind-port", "70000", "--patches", "/nonexistent")...)
	for _, want := range []string{"4 invalid inputs", "99999", "--certificate-key", "--apiserver-bind-port", "--patches"} {
		if r.ExitCode != 2 || !strings.Contains(r.Stderr, want) {
			t.Errorf("combined: exit %d, stderr lacks %q:\n%s", r.ExitCode, want, r.Stderr)
		}
	}
	if after := hostFiles(t, c, "w6"); strings.Join(after, ",") != strings.Join(before, ",") {
		t.Errorf("bad inputs wrote on the host: before %v, after %v", before, after)
	}
}
