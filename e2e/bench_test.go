//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kjoin.dev/kjoin/e2e/bench"
	"kjoin.dev/kjoin/e2e/framework"
	"kjoin.dev/kjoin/e2e/lab"
)

// Sample is one benchmark measurement, one JSON line in the samples file (make bench keeps
// them all beside BENCHMARKS.md, which e2e/cmd/benchreport generates from them).
type Sample struct {
	Section string `json:"section"` // worker, control-plane, parallel-control-plane, nine-workers, storm
	Tool    string `json:"tool"`
	Round   int    `json:"round"`
	Warmup  bool   `json:"warmup,omitempty"`
	Order   int    `json:"order,omitempty"` // position in its round (randomised)
	Host    string `json:"host,omitempty"`
	OK      bool   `json:"ok"`
	// Milliseconds from the command's start.
	WallMs  int64 `json:"wallMs"`
	ReadyMs int64 `json:"readyMs,omitempty"` // Node Ready (polled every 50 ms)
	VoterMs int64 `json:"voterMs,omitempty"` // etcd member started and voting (polled every 100 ms)
	// KubeletStartedMs is the sum of kjoin's phases up to and including kubelet-start.
	KubeletStartedMs int64            `json:"kubeletStartedMs,omitempty"`
	Phases           map[string]int64 `json:"phases,omitempty"` // kjoin's own, from -o json
	ImagePulls       int              `json:"imagePulls,omitempty"`
	// EtcdRestarted: kjoin restarted its stalled etcd learner (see etcd-join).
	EtcdRestarted bool               `json:"etcdRestarted,omitempty"`
	Extra         map[string]float64 `json:"extra,omitempty"`
	Error         string             `json:"error,omitempty"`
	// Meta describes the run (section "meta", the first sample): machine, versions, seed.
	Meta bench.Meta `json:"meta,omitempty"`
}

var sampleMu sync.Mutex

// recordSample appends s to $KJOIN_BENCH_SAMPLES (if set).
func recordSample(t *testing.T, s Sample) {
	p := framework.Env().BenchSamples
	if p == "" {
		return
	}
	sampleMu.Lock()
	defer sampleMu.Unlock()
	if !metaWritten {
		// The run's description, as it runs: the report states it rather than reading what
		// is installed when it is generated.
		metaWritten = true
		repo, _ := filepath.Abs("..")
		m := bench.Describe(framework.Env().Bin, framework.Env().Components, repo)
		m["seed"] = strconv.FormatUint(runSeed(t), 10)
		m["command"] = framework.Env().BenchCommand
		m["started"] = time.Now().UTC().Format(time.RFC3339)
		appendSample(t, p, Sample{Section: "meta", Meta: m})
	}
	appendSample(t, p, s)
}

func appendSample(t *testing.T, p string, s Sample) {
	b, _ := json.Marshal(s)
	f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(append(b, '\n')); err != nil {
		t.Fatal(err)
	}
}

var (
	metaWritten bool
	seedOnce    sync.Once
	seed        uint64
)

// runSeed is the run's order seed: KJOIN_BENCH_SEED, else one drawn once per run, so one
// number repeats the whole run's order.
func runSeed(t *testing.T) uint64 {
	seedOnce.Do(func() {
		var err error
		if seed, err = strconv.ParseUint(framework.Env().BenchSeed, 10, 64); err != nil {
			seed = uint64(time.Now().UnixNano())
		}
	})
	return seed
}

// benchRand is a random order from the run's seed (logged, and recorded in the samples' meta,
// so a run can be repeated in the same order with KJOIN_BENCH_SEED).
func benchRand(t *testing.T) *rand.Rand {
	seed := runSeed(t)
	t.Logf("order seed %d (KJOIN_BENCH_SEED)", seed)
	return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

// kjoinPhases reads the phase durations of a kjoin -o json report.
func kjoinPhases(stdout string) (map[string]int64, int64) {
	var out struct {
		Phases []struct {
			Name     string `json:"name"`
			Duration struct {
				Seconds float64 `json:"seconds"`
			} `json:"duration"`
		} `json:"phases"`
	}
	if json.Unmarshal([]byte(stdout), &out) != nil {
		return nil, 0
	}
	m := map[string]int64{}
	var untilKubelet int64
	seenStart := false
	for _, p := range out.Phases {
		ms := int64(math.Round(p.Duration.Seconds * 1000))
		m[p.Name] = ms
		if !seenStart {
			untilKubelet += ms
		}
		if p.Name == "kubelet-start" {
			seenStart = true
		}
	}
	return m, untilKubelet
}

// watchVoter polls etcd every 100 ms until host's member has started and votes.
func watchVoter(c *framework.Cluster, host string) <-chan time.Time {
	ch := make(chan time.Time, 1)
	go func() {
		deadline := time.Now().Add(4 * time.Minute)
		for time.Now().Before(deadline) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			ms, err := c.EtcdMembers(ctx)
			cancel()
			if err == nil {
				for _, m := range ms {
					for _, u := range m.PeerURLs {
						if strings.Contains(u, "//"+c.Hosts[host].IP+":") && m.Started && !m.Learner {
							ch <- time.Now()
							return
						}
					}
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		ch <- time.Time{}
	}()
	return ch
}

type benchTool struct {
	name string
	argv func(host, key string) []string
}

// TestBench (make bench) measures worker and control-plane joins, kubeadm beside kjoin in the
// same lab and run: every round runs each tool once, in a random order, on rotated hosts;
// round 0 is a warm-up, recorded but left out of the figures.
func TestBench(t *testing.T) {
	if !framework.Env().Bench {
		t.Skip("set KJOIN_BENCH=1 (make bench) to run the benchmark")
	}
	c := framework.Get(t)
	rng := benchRand(t)
	kjoinArgs := func(host, key string, extra ...string) []string {
		return joinArgs(c, host, key, append([]string{"-o", "json", "-v", "1"}, extra...)...) // -v: progress (the etcd restart) on stderr
	}
	kubeadmArgs := func(host, key string) []string {
		a := []string{"kubeadm", "join", lab.Endpoint(), "--token", lab.Token, "--discovery-token-ca-cert-hash", c.CAHash, "--ignore-preflight-errors=all"}
		if key != "" {
			a = append(a, "--control-plane", "--certificate-key", key, "--apiserver-advertise-address", c.Hosts[host].IP)
		}
		return a
	}

	t.Run("worker", func(t *testing.T) {
		tools := []benchTool{
			{"kubeadm join", func(h, _ string) []string { return kubeadmArgs(h, "") }},
			{"kjoin join", func(h, _ string) []string { return kjoinArgs(h, "") }},
			{"kjoin join --wait=kubelet", func(h, _ string) []string { return kjoinArgs(h, "", "--wait=kubelet") }},
			{"kjoin join --wait=false", func(h, _ string) []string { return kjoinArgs(h, "", "--wait=false") }},
		}
		hosts := []string{"w1", "w2", "w3", "w4"}
		benchRounds(t, c, rng, "worker", tools, hosts, "", framework.Env().BenchRounds)
	})
	t.Run("control-plane", func(t *testing.T) {
		key, err := c.UploadCerts(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		tools := []benchTool{
			{"kubeadm join --control-plane", func(h, k string) []string { return kubeadmArgs(h, k) }},
			{"kjoin join --control-plane", func(h, k string) []string { return kjoinArgs(h, k) }},
		}
		benchRounds(t, c, rng, "control-plane", tools, []string{"cp2", "cp3"}, key, framework.Env().BenchCPRounds)
	})
	// What a worker join costs the control plane: the joining side's API requests and writes
	// until the Node is Ready, from cp1's audit log.
	t.Run("cost", func(t *testing.T) {
		benchCost(t, c, []benchTool{
			{"kubeadm join", func(h, _ string) []string { return kubeadmArgs(h, "") }},
			{"kjoin join", func(h, _ string) []string { return kjoinArgs(h, "") }},
		}, framework.Env().BenchCostRounds)
	})
	// A control plane joining a cluster of three voters, where kubeadm's etcd retry step and
	// kjoin's learner restart behave otherwise than beside one voter: cp2 and cp3 are joined
	// once (with kjoin, not measured), then each round's joins are measured on cp4 and cp5 and
	// removed again (Forget removes the member), so every join meets three voters.
	t.Run("control-plane-into-three", func(t *testing.T) {
		key, err := c.UploadCerts(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range []string{"cp2", "cp3"} {
			c.Host(t, h)
			if r := kjoinControlPlane(t, c, h, key); r.Err != nil {
				t.Fatalf("setting up the three voters: %v", r.Error())
			}
		}
		assertEtcdVoters(t, c, 3)
		tools := []benchTool{
			{"kubeadm join --control-plane", func(h, k string) []string { return kubeadmArgs(h, k) }},
			{"kjoin join --control-plane", func(h, k string) []string { return kjoinArgs(h, k) }},
		}
		benchRounds(t, c, rng, "control-plane-3", tools, []string{"cp4", "cp5"}, key, framework.Env().BenchCPRounds)
		assertEtcdVoters(t, c, 3)
	})
}

// benchRounds runs rounds+1 rounds (the first a warm-up) of every tool, one join at a time on
// a fresh host (rotated per tool and round), and records a sample per join.
func benchRounds(t *testing.T, c *framework.Cluster, rng *rand.Rand, section string, tools []benchTool, hosts []string, key string, rounds int) {
	for round := 0; round <= rounds; round++ {
		order := rng.Perm(len(tools))
		for pos, ti := range order {
			tool := tools[ti]
			// The host follows the tool and the round, never the (random) order: each tool
			// runs on each host equally often, whoever goes first.
			host := hosts[(ti+round)%len(hosts)]
			if _, err := c.AddHost(context.Background(), host, t.Logf); err != nil {
				t.Fatal(err)
			}
			writeToken(t, c, host, lab.Token)
			readyCh := watchReady(c, host)
			var voterCh <-chan time.Time
			if key != "" {
				voterCh = watchVoter(c, host)
			}
			start := time.Now()
			r := c.Exec(context.Background(), host, tool.argv(host, key)...)
			s := Sample{Section: section, Tool: tool.name, Round: round, Warmup: round == 0, Order: pos + 1, Host: host,
				OK: r.Err == nil, WallMs: r.Duration.Milliseconds()}
			if r.Err != nil {
				c.DumpLogs(t, host, "cp1")
				t.Fatalf("%s on %s: %v", tool.name, host, r.Error())
			}
			if at := <-readyCh; !at.IsZero() {
				s.ReadyMs = at.Sub(start).Milliseconds()
			} else {
				t.Fatalf("%s: node %s never became Ready", tool.name, host)
			}
			if voterCh != nil {
				if at := <-voterCh; !at.IsZero() {
					s.VoterMs = at.Sub(start).Milliseconds()
				} else {
					t.Fatalf("%s: %s's etcd member never voted", tool.name, host)
				}
			}
			if strings.HasPrefix(tool.name, "kjoin") {
				s.Phases, s.KubeletStartedMs = kjoinPhases(r.Stdout)
				s.EtcdRestarted = strings.Contains(r.Stderr, "restarting it (a learner holds no vote)")
			}
			pulls, _, perr := c.ImagePulls(host)
			s.ImagePulls = len(pulls)
			if perr != nil || s.ImagePulls > 0 {
				t.Errorf("%s on %s pulled images: %v %v", tool.name, host, pulls, perr)
			}
			recordSample(t, s)
			t.Logf("round %d #%d %-30s on %s: wall %6dms ready %6dms voter %6dms", round, pos+1, tool.name, host, s.WallMs, s.ReadyMs, s.VoterMs)
			c.Forget(t, host)
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
