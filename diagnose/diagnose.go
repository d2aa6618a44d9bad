// Package diagnose explains why a node is NotReady, run as root on the node itself. It walks
// the reporting path from the cluster inward: the Node's conditions, taints, Lease and pod CIDR;
// the kubelet (service, /healthz, its last errors); its client certificate; connectivity to
// the API server named in kubelet.conf (DNS, TCP, TLS, an authenticated request, clock skew);
// the container runtime over the CRI API; the CNI configuration; and resources against the
// kubelet's eviction thresholds. Then it names the most likely cause and the next step. It
// works when the API server is unreachable (the local checks still run). It reads only; it
// knows nothing of the command line.
package diagnose

import (
	"context"
	"crypto/x509"
	"fmt"
	"net"
	"time"

	"k8s.io/client-go/kubernetes"

	"kjoin.dev/kjoin/cri"
	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/verify"
)

// Check is verify's check shape: stable id, pass/warn/fail, summary and evidence.
type Check = verify.Check

// Verdict names the most likely cause and what to do next.
type Verdict struct {
	Healthy bool
	Cause   string
	CheckID string
	Next    string
}

// Report is a diagnosis.
type Report struct {
	Node    string
	Checks  []Check
	Verdict Verdict
}

// Runtime is the part of the CRI runtime service a diagnosis asks.
type Runtime interface {
	// Status reports the runtime's RuntimeReady and NetworkReady conditions.
	Status(ctx context.Context) (runtimeReady, networkReady bool, detail string, err error)
	// RunningContainers counts the containers still running.
	RunningContainers(ctx context.Context) (int, error)
	// Describe says what the runtime is (name, version, sandbox image, RuntimeConfig).
	Describe(ctx context.Context) (cri.Info, error)
	Close() error
}

// Deps are the diagnosis's view of the node.
type Deps struct {
	// Host gives paths (under its root), the command runner, the clock and clients.
	Host *host.Env
	// Runtime connects to the CRI endpoint (unix:///...).
	Runtime func(ctx context.Context, endpoint string) (Runtime, error)
	// Statfs reports available and total bytes of the filesystem holding path.
	Statfs func(path string) (avail, total uint64, err error)
	// LookupHost resolves a name; Dial opens a TCP connection.
	LookupHost func(ctx context.Context, host string) ([]string, error)
	Dial       func(ctx context.Context, network, addr string) (net.Conn, error)
	// NodeName overrides the node name (default: from the kubelet's client certificate).
	NodeName string
}

// Thresholds of the kubelet's default hard eviction, used when config.yaml sets none.
var defaultEviction = map[string]string{"memory.available": "100Mi", "nodefs.available": "10%", "imagefs.available": "15%", "pid.available": "10%"}

// Run diagnoses the node.
func Run(ctx context.Context, d Deps) *Report {
	g := &diagnosis{d: d, e: d.Host, r: &Report{Checks: []Check{}}}
	g.r.Node = d.NodeName
	if g.r.Node == "" {
		g.r.Node = host.NodeNameFromCert(d.Host)
	}
	if g.r.Node == "" {
		if h, err := d.Host.Hostname(); err == nil {
			g.r.Node = h
		}
	}
	g.loadKubeletFiles()
	g.joinedCheck()
	g.kubeletChecks(ctx)
	g.certChecks()
	apiOK := g.connectivityChecks(ctx)
	g.nodeChecks(ctx, apiOK)
	g.runtimeChecks(ctx)
	g.resourceChecks()
	g.etcdChecks(ctx)
	g.listSkipped()
	g.r.Verdict = g.verdict()
	return g.r
}

// requires names each check's precondition: when that did not pass, the check does not run
// and is listed as skipped with the reason, not dropped.
var requires = []struct{ id, needs string }{
	{"cert.node", "cert.validity"}, {"cert.rotation", "cert.validity"},
	{"api.dns", "api.config"}, {"api.tcp", "api.config"}, {"api.tls", "api.tcp"}, {"api.clock", "api.tls"}, {"api.auth", "api.tls"},
	{"node.registered", "api.auth"}, {"node.pressure", "node.registered"}, {"node.taints", "node.registered"},
	{"node.lease", "node.registered"}, {"node.podcidr", "node.registered"}, {"cert.csr", "node.registered"},
	{"cri.runtime", "cri.reachable"}, {"cri.network", "cri.reachable"}, {"cri.containers", "cri.reachable"},
	{"cri.version", "cri.reachable"}, {"cri.runtimeconfig", "cri.version"}, {"cri.sandbox", "cri.version"},
}

// listSkipped adds a skipped check for each check that did not run because its precondition
// did not pass, naming it (a check whose precondition passed and that is absent does not
// apply here: api.dns for an API server named by its IP).
func (g *diagnosis) listSkipped() {
	for _, r := range requires {
		if _, ran := g.status[r.id]; ran {
			continue
		}
		st, ok := g.status[r.needs]
		if !ok || st == verify.Pass {
			if !ok {
				g.skip(r.id, "not checked", "needs "+r.needs+", which did not run")
			}
			continue
		}
		why := map[verify.Status]string{verify.Fail: "failed", verify.Warn: "could not tell", verify.Skip: "was not checked"}[st]
		g.skip(r.id, "not checked", "needs "+r.needs+", which "+why)
	}
}

type diagnosis struct {
	d Deps
	e *host.Env
	r *Report
	// from the node's files
	server     string
	caPool     *x509.CertPool
	caPEM      []byte
	certPEM    []byte
	cert       *x509.Certificate
	kubeletCfg map[string]any
	// kube is the API client, built once (client)
	kube kubernetes.Interface
	// from the checks
	status map[string]verify.Status
	// kubeletExited: the kubelet is not running because it exited on its own (systemd is
	// restarting it, or gave up), not because it was stopped.
	kubeletExited bool
}

func (g *diagnosis) add(c Check) {
	if g.status == nil {
		g.status = map[string]verify.Status{}
	}
	if c.Node == "" {
		c.Node = g.r.Node
	}
	g.status[c.ID] = c.Status
	g.r.Checks = append(g.r.Checks, c)
}

func (g *diagnosis) pass(id, summary, evidence string) {
	g.add(Check{ID: id, Status: verify.Pass, Summary: summary, Evidence: evidence})
}
func (g *diagnosis) warn(id, summary, evidence string) {
	g.add(Check{ID: id, Status: verify.Warn, Summary: summary, Evidence: evidence})
}
func (g *diagnosis) fail(id, summary, evidence string) {
	g.add(Check{ID: id, Status: verify.Fail, Summary: summary, Evidence: evidence})
}

func (g *diagnosis) skip(id, summary, reason string) {
	g.add(Check{ID: id, Status: verify.Skip, Summary: summary, Evidence: reason})
}

func (g *diagnosis) failed(id string) bool { return g.status[id] == verify.Fail }

func ago(now, t time.Time) string { return fmt.Sprintf("%s ago", now.Sub(t).Round(time.Second)) }
