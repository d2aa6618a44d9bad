//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"kjoin.dev/kjoin/e2e/framework"
	"kjoin.dev/kjoin/output"
)

func runVerify(t *testing.T, c *framework.Cluster, nodes ...string) (output.VerifyReport, int) {
	t.Helper()
	r := c.Run(t, "cp1", append([]string{"kjoin", "verify", "-o", "json"}, nodes...)...)
	var out output.VerifyReport
	if err := json.Unmarshal([]byte(r.Stdout), &out); err != nil {
		t.Fatalf("kjoin verify output is not JSON: %v\n%s\n%s", err, r.Stdout, r.Stderr)
	}
	return out, r.ExitCode
}

// assertVerified runs kjoin verify on cp1 for nodes until every check passes (a join returns
// once the Node is Ready; the Lease, the static pods' readiness and the lifecycle controller's
// taint removal follow within seconds). For control planes, etcd.count must say members ==
// control-plane nodes (wantMembers, when above 0).
func assertVerified(t *testing.T, c *framework.Cluster, wantMembers int, nodes ...string) {
	t.Helper()
	var out output.VerifyReport
	var code int
	start := time.Now()
	for {
		out, code = runVerify(t, c, nodes...)
		if code == 0 && out.Failed == 0 || time.Since(start) > 2*time.Minute {
			break
		}
		time.Sleep(2 * time.Second)
	}
	t.Logf("kjoin verify %v: exit %d after %s", nodes, code, time.Since(start).Round(time.Second))
	seen := map[string]bool{}
	for _, ch := range out.Checks {
		seen[ch.Node+"/"+ch.ID] = true
		if ch.Status == "fail" {
			t.Errorf("kjoin verify: %s %s failed: %s (%s)", ch.Node, ch.ID, ch.Summary, ch.Evidence)
		}
		if ch.ID == "etcd.count" && wantMembers > 0 && !strings.HasPrefix(ch.Summary, fmt.Sprintf("%d etcd members", wantMembers)) {
			t.Errorf("etcd.count: %s, want %d members", ch.Summary, wantMembers)
		}
	}
	if code != 0 || out.Failed != 0 {
		t.Errorf("kjoin verify %v: exit %d, %d failed", nodes, code, out.Failed)
	}
	for _, n := range nodes {
		for _, id := range []string{"node.ready", "node.lease", "node.csr", "node.podcidr"} {
			if !seen[n+"/"+id] {
				t.Errorf("kjoin verify did not check %s of %s", id, n)
			}
		}
	}
	if wantMembers > 0 && !seen["/etcd.count"] {
		t.Error("kjoin verify did not count etcd members")
	}
}

// assertVerifyFails waits until kjoin verify fails node's check id, and returns its evidence.
func assertVerifyFails(t *testing.T, c *framework.Cluster, node, id string, timeout time.Duration) string {
	t.Helper()
	var last output.VerifyReport
	var evidence string
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		out, code := runVerify(t, c, node)
		last = out
		for _, ch := range out.Checks {
			if ch.ID == id && ch.Status == "fail" {
				if code != 8 {
					t.Errorf("verify failed %s but exited %d, want 8", id, code)
				}
				evidence = ch.Summary + " (" + ch.Evidence + ")"
				t.Logf("kjoin verify %s: %s failed: %s", node, id, evidence)
				return evidence
			}
		}
		time.Sleep(2 * time.Second)
	}
	t.Fatalf("kjoin verify never failed %s for %s within %s; last: %+v", id, node, timeout, last)
	return ""
}
