//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kjoin.dev/kjoin/e2e/framework"
	"kjoin.dev/kjoin/e2e/lab"
)

// TestBenchWorkerJoin (make bench) joins workers with kubeadm and kjoin alternately in one lab
// and writes the medians of the join command's wall time and of start→Node Ready.
func TestBenchWorkerJoin(t *testing.T) {
	if os.Getenv("KJOIN_BENCH") == "" {
		t.Skip("set KJOIN_BENCH=1 (make bench) to run the benchmark")
	}
	rounds := envInt("KJOIN_BENCH_ROUNDS", 5)
	c := framework.Get(t)
	tools := []struct {
		name string
		argv func() []string
	}{
		{"kubeadm join", func() []string {
			return []string{"kubeadm", "join", lab.Endpoint(), "--token", lab.Token, "--discovery-token-ca-cert-hash", c.CAHash, "--ignore-preflight-errors=all"}
		}},
		{"kjoin join", func() []string {
			return []string{"kjoin", "join", lab.Endpoint(), "--token-file", "/run/lab/token", "--discovery-token-ca-cert-hash", c.CAHash}
		}},
		{"kjoin join --wait=false", func() []string {
			return []string{"kjoin", "join", lab.Endpoint(), "--token-file", "/run/lab/token", "--discovery-token-ca-cert-hash", c.CAHash, "--wait=false"}
		}},
	}
	wall := map[string][]time.Duration{}
	ready := map[string][]time.Duration{}
	for i := 0; i < rounds; i++ {
		for j, tool := range tools {
			host := fmt.Sprintf("w%d", 1+j)
			if _, err := c.AddHost(context.Background(), host, t.Logf); err != nil {
				t.Fatal(err)
			}
			writeToken(t, c, host, lab.Token)
			readyCh := watchReady(c, host)
			start := time.Now()
			r := c.Run(t, host, tool.argv()...)
			if r.Err != nil {
				c.DumpLogs(t, host, "cp1")
				t.Fatalf("%s on %s: %v", tool.name, host, r.Error())
			}
			at := <-readyCh
			if at.IsZero() {
				c.DumpLogs(t, host, "cp1")
				t.Fatalf("%s: node %s never became Ready", tool.name, host)
			}
			wall[tool.name] = append(wall[tool.name], r.Duration)
			ready[tool.name] = append(ready[tool.name], at.Sub(start))
			t.Logf("round %d %-24s wall %-10s start->Ready %s", i+1, tool.name, r.Duration.Round(time.Millisecond), at.Sub(start).Round(time.Millisecond))
			c.Forget(t, host)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| tool | runs | join wall time (median) | start → Node Ready (median) |\n|---|---|---|---|\n")
	for _, tool := range tools {
		fmt.Fprintf(&b, "| `%s` | %d | %s | %s |\n", tool.name, len(wall[tool.name]), median(wall[tool.name]), median(ready[tool.name]))
	}
	kw, jw, jf := median(wall["kubeadm join"]), median(wall["kjoin join"]), median(wall["kjoin join --wait=false"])
	kr, jr := median(ready["kubeadm join"]), median(ready["kjoin join --wait=false"])
	fmt.Fprintf(&b, "\nRatios (kjoin / kubeadm): wall %.2f (default, waits for the Node to be Ready), wall %.2f (--wait=false, returns once the kubelet has its identity, as kubeadm does); start→Ready %.2f (--wait=false run), %.2f (default run).\n",
		ratio(jw, kw), ratio(jf, kw), ratio(jr, kr), ratio(median(ready["kjoin join"]), kr))
	fmt.Println(b.String())
	if out := os.Getenv("KJOIN_BENCH_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// watchReady polls (every 50 ms) until the Node is Ready and sends the time it first saw it.
func watchReady(c *framework.Cluster, name string) <-chan time.Time {
	ch := make(chan time.Time, 1)
	go func() {
		deadline := time.Now().Add(3 * time.Minute)
		for time.Now().Before(deadline) {
			n, err := c.Client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
			if err == nil {
				for _, cond := range n.Status.Conditions {
					if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
						ch <- time.Now()
						return
					}
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		ch <- time.Time{}
	}()
	return ch
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration{}, d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2].Round(time.Millisecond)
}

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}
