// Package host is kjoin's view of the machine it runs on: every host path under one injected
// root, the command runner, the processes, the clock, clients built from the node's
// kubeconfigs and the progress output. The join and reset phases, diagnose, verify and the
// commands all reach the machine through it; it knows nothing of any workflow.
package host

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/clock"

	"kjoin.dev/kjoin/cri"
	"kjoin.dev/kjoin/etcd"
	"kjoin.dev/kjoin/pki"
)

// Host paths as the node's programs see them. Every file access goes through Paths.Of, which
// puts them under the injected root (tests use t.TempDir()).
const (
	KubernetesDir        = "/etc/kubernetes"
	PKIDir               = "/etc/kubernetes/pki"
	CACertPath           = "/etc/kubernetes/pki/ca.crt"
	KubeletKubeconfig    = "/etc/kubernetes/kubelet.conf"
	BootstrapKubeconfig  = "/etc/kubernetes/bootstrap-kubelet.conf"
	AdminKubeconfig      = "/etc/kubernetes/admin.conf"
	ManifestsDir         = "/etc/kubernetes/manifests"
	KubeletDir           = "/var/lib/kubelet"
	KubeletConfigPath    = "/var/lib/kubelet/config.yaml"
	KubeletInstancePath  = "/var/lib/kubelet/instance-config.yaml"
	KubeletFlagsPath     = "/var/lib/kubelet/kubeadm-flags.env"
	KubeletPKIDir        = "/var/lib/kubelet/pki"
	KubeletClientCurrent = "/var/lib/kubelet/pki/kubelet-client-current.pem"
	ProcIPForward        = "/proc/sys/net/ipv4/ip_forward"
	ProcSwaps            = "/proc/swaps"
)

// Paths maps host paths under one root.
type Paths struct{ Root string }

// Of returns where a host path lives under the root.
func (p Paths) Of(hostPath string) string {
	if p.Root == "" || p.Root == "/" {
		return hostPath
	}
	return filepath.Join(p.Root, hostPath)
}

// CommandRunner runs host commands (systemctl). Output is returned for error messages.
type CommandRunner interface {
	Run(ctx context.Context, name string, args ...string) ([]byte, error)
}

// ExecRunner runs commands with os/exec.
type ExecRunner struct{}

// Run runs name with args and returns its combined output.
func (ExecRunner) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return out, nil
}

// Env holds everything the phases get from outside: paths, clients, clock, runner, output.
type Env struct {
	Paths Paths
	// Out receives "[phase] message" progress lines (stderr in the CLI).
	Out io.Writer
	// Verbosity: 0 operator messages, 1+ debug.
	Verbosity int
	Clock     clock.Clock
	Exec      CommandRunner
	// NewClient builds a Kubernetes client (fake in tests).
	NewClient func(*rest.Config) (kubernetes.Interface, error)
	// DialEtcd connects to etcd (etcd.Dial; a fake cluster in tests).
	DialEtcd func(endpoints []string, tlsCfg *tls.Config) (etcd.Conn, error)
	// HTTPClient builds the client of a local health probe: TLS verified by roots, or
	// unverified when roots is nil (a localhost-only component).
	HTTPClient func(roots *x509.CertPool) *http.Client
	// Hostname returns the machine's hostname.
	Hostname func() (string, error)
	// Geteuid returns the effective user id.
	Geteuid func() int
	// PortInUse reports whether a local TCP port is taken.
	PortInUse func(port int) bool
	// DescribeRuntime asks the container runtime at a CRI endpoint what it is (cri.Client.Describe).
	DescribeRuntime func(ctx context.Context, endpoint string) (cri.Info, error)
	// Sandboxes connects to the container runtime at a CRI endpoint for its pod sandboxes
	// (reset removes them, as kubeadm reset does). Nil: not available.
	Sandboxes func(endpoint string) (cri.Sandboxes, error)
	// SocketReachable reports whether a unix socket accepts connections.
	SocketReachable func(path string) bool
	// LocalAddressFor returns this host's IP on the route to endpoint (host:port).
	LocalAddressFor func(endpoint string) (string, error)
	// Status shows what the phases wait for (nil: nothing is shown).
	Status *Status
	// Fault is the lab's fault point: called at named points inside phases ("tls-bootstrap/
	// csr-created", "etcd-join/locked", …) so a test can pause, kill or disturb the join
	// exactly there. Nil in release builds.
	Fault func(point string)
	// Processes lists the host's processes; Signal signals one (etcd-join restarts a stalled
	// etcd learner with them). Nil: not available.
	Processes func() ([]Process, error)
	Signal    func(pid int, sig syscall.Signal) error
	// Environ is the process environment (os.Environ; nil: empty): control-plane manifests
	// carry its *_proxy variables, as kubeadm's do.
	Environ func() []string
	// EtcdPeer reports whether something answers at an etcd peer URL (etcd.DialPeer; nil:
	// the same). Joins and diagnose use it to prove a member dead.
	EtcdPeer etcd.PeerProbe
	// PeerCertificates returns the certificate chain a TLS server presents at addr (host:port),
	// unverified: the caller verifies it (verify checks kubelets' serving certificates). Nil:
	// not available.
	PeerCertificates func(ctx context.Context, addr string) ([]*x509.Certificate, error)
	// Effects is how a workflow changes the node (Fx; nil: applied to this host, no hook).
	Effects Effects
}

// Process is a host process: its ID and command line.
type Process struct {
	PID  int
	Args []string
}

// ProcProcesses lists the processes in /proc (the real host's Env.Processes).
func ProcProcesses() ([]Process, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []Process
	for _, d := range entries {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + d.Name() + "/cmdline")
		if err != nil || len(b) == 0 {
			continue // gone, or a kernel thread
		}
		out = append(out, Process{PID: pid, Args: strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")})
	}
	return out, nil
}

// At marks a named point inside a phase for the lab's fault injection (a no-op without it).
func (e *Env) At(point string) {
	if e.Fault != nil {
		e.Fault(point)
	}
}

// logMu keeps progress lines whole when a phase logs from several goroutines.
var logMu sync.Mutex

// Logf prints a progress line for a phase.
func (e *Env) Logf(phase, format string, args ...any) {
	if e.Out == nil {
		return
	}
	logMu.Lock()
	defer logMu.Unlock()
	if e.Status != nil && e.Status.Terminal {
		clearLive(e.Status.Out) // the live status line is redrawn at its next update
	}
	fmt.Fprintf(e.Out, "["+phase+"] "+format+"\n", args...)
}

// Debugf prints a progress line at -v 1 and above.
func (e *Env) Debugf(phase, format string, args ...any) {
	if e.Verbosity >= 1 {
		e.Logf(phase, format, args...)
	}
}

// ClientFromKubeconfig builds a client from a kubeconfig file on the host (admin.conf and the
// like): the one place commands and phases turn a kubeconfig into a client.
func (e *Env) ClientFromKubeconfig(hostPath string) (kubernetes.Interface, *rest.Config, error) {
	return e.ClientFor(Kubeconfig{Paths: []string{hostPath}, From: hostPath})
}

// Kubeconfig is the kubeconfig a command uses and how it was chosen.
type Kubeconfig struct {
	// Paths are host paths; more than one (from KUBECONFIG) are merged as kubectl merges them.
	Paths []string
	// From says where the choice came from, for errors ("--kubeconfig", "KUBECONFIG", ...).
	From string
	// Context overrides the current context (--context).
	Context string
}

func (k Kubeconfig) String() string {
	s := strings.Join(k.Paths, ":") + " (" + k.From + ")"
	if k.Context != "" {
		s += ", context " + k.Context
	}
	return s
}

// KubeconfigLookup is what ChooseKubeconfig looks at, in kubectl's order.
type KubeconfigLookup struct {
	// Explicit is --kubeconfig.
	Explicit string
	// Env is $KUBECONFIG (a colon-separated list).
	Env string
	// Home is $HOME: ~/.kube/config is used when it exists.
	Home string
	// Fallbacks are tried in order when none of the above applies (the first that exists,
	// else the first): /etc/kubernetes/admin.conf on a control plane.
	Fallbacks []string
	Context   string
}

// ChooseKubeconfig picks the kubeconfig as kubectl loads it (--kubeconfig, then KUBECONFIG,
// then ~/.kube/config), then kubeadm's default files.
func (e *Env) ChooseKubeconfig(l KubeconfigLookup) Kubeconfig {
	k := Kubeconfig{Context: l.Context}
	switch {
	case l.Explicit != "":
		k.Paths, k.From = []string{l.Explicit}, "--kubeconfig"
	case strings.Trim(l.Env, ":") != "":
		for _, p := range strings.Split(l.Env, ":") {
			if p != "" {
				k.Paths = append(k.Paths, p)
			}
		}
		k.From = "KUBECONFIG"
	case l.Home != "" && e.Exists(path.Join(l.Home, ".kube", "config")):
		k.Paths, k.From = []string{path.Join(l.Home, ".kube", "config")}, "~/.kube/config"
	default:
		k.From = "default"
		for _, f := range l.Fallbacks {
			if e.Exists(f) {
				k.Paths = []string{f}
				break
			}
		}
		if k.Paths == nil && len(l.Fallbacks) > 0 {
			k.Paths = l.Fallbacks[:1]
		}
	}
	return k
}

// ClientFor builds a client from a chosen kubeconfig; its errors name the files.
func (e *Env) ClientFor(k Kubeconfig) (kubernetes.Interface, *rest.Config, error) {
	if len(k.Paths) == 1 { // one named file must exist (merged KUBECONFIG lists may skip some)
		if _, err := os.Stat(e.Paths.Of(k.Paths[0])); err != nil {
			return nil, nil, fmt.Errorf("kubeconfig %s: %w", k, err)
		}
	}
	rules := &clientcmd.ClientConfigLoadingRules{}
	for _, p := range k.Paths {
		rules.Precedence = append(rules.Precedence, e.Paths.Of(p))
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: k.Context}).ClientConfig()
	if err != nil {
		return nil, nil, fmt.Errorf("kubeconfig %s is not usable: %w", k, err)
	}
	if cfg.ExecProvider != nil {
		if loose := othersMayWrite(e, k.Paths); loose != "" {
			if k.From != "--kubeconfig" {
				return nil, nil, fmt.Errorf("kubeconfig %s runs the exec plugin %q, and %s: kjoin runs as root and will not run what another user may have put there; fix the modes (chmod go-w), or name the file with --kubeconfig to run it anyway", k, cfg.ExecProvider.Command, loose)
			}
			e.Logf("kubeconfig", "WARNING: %s runs the exec plugin %q as root, and %s (named with --kubeconfig: running it anyway)", k, cfg.ExecProvider.Command, loose)
		}
	}
	if len(cfg.CAData) == 0 && cfg.CAFile != "" { // callers pin and verify with the CA's bytes
		if cfg.CAData, err = os.ReadFile(cfg.CAFile); err != nil {
			return nil, nil, fmt.Errorf("kubeconfig %s: %w", k, err)
		}
	}
	cfg.Timeout = 15 * time.Second
	c, err := e.Client(cfg)
	if err != nil {
		return nil, nil, err
	}
	return c, cfg, nil
}

// othersMayWrite names the first kubeconfig file, or its directory, that users other than
// its owner may write (group or others write bit; a sticky directory such as /tmp counts for
// the file only); "" when none.
func othersMayWrite(e *Env, paths []string) string {
	for _, p := range paths {
		if st, err := os.Stat(e.Paths.Of(p)); err == nil && st.Mode().Perm()&0o022 != 0 {
			return fmt.Sprintf("%s is writable by other users (mode %04o)", p, st.Mode().Perm())
		}
		dir := path.Dir(p)
		if st, err := os.Stat(e.Paths.Of(dir)); err == nil && st.Mode().Perm()&0o022 != 0 && st.Mode()&os.ModeSticky == 0 {
			return fmt.Sprintf("its directory %s is writable by other users (mode %04o)", dir, st.Mode().Perm())
		}
	}
	return ""
}

// Poll calls cond at once and then every interval on e.Clock, until it reports done, returns
// an error, ctx ends (ctx.Err()) or timeout has passed on e.Clock (context.DeadlineExceeded).
// It is the phases' one wait loop, so tests drive every wait with a fake clock; not
// wait.PollUntilContextTimeout, whose timer is the real clock.
func (e *Env) Poll(ctx context.Context, interval, timeout time.Duration, cond func(context.Context) (bool, error)) error {
	start := e.Clock.Now()
	for {
		done, err := cond(ctx)
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		if e.Clock.Since(start) >= timeout {
			return context.DeadlineExceeded
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-e.Clock.After(interval):
		}
	}
}

// ReadFile reads a host file.
func (e *Env) ReadFile(hostPath string) ([]byte, error) { return os.ReadFile(e.Paths.Of(hostPath)) }

// Exists reports whether a host path exists (a dangling symlink counts).
func (e *Env) Exists(hostPath string) bool {
	_, err := os.Lstat(e.Paths.Of(hostPath))
	return err == nil
}

// NodeNameFromCert is the node name in the kubelet's current client certificate ("" if none).
func NodeNameFromCert(e *Env) string {
	b, err := e.ReadFile(KubeletClientCurrent)
	if err != nil {
		return ""
	}
	c, err := pki.ParseCert(b)
	if err != nil {
		return ""
	}
	return strings.TrimPrefix(c.Subject.CommonName, "system:node:")
}

// EtcdClientTLS is the etcd client TLS of this node: etcd CA and healthcheck-client certificate.
func EtcdClientTLS(e *Env, certificatesDir string) (*tls.Config, error) {
	dir := path.Join(certificatesDir, "etcd")
	ca, err := e.ReadFile(path.Join(dir, "ca.crt"))
	if err != nil {
		return nil, err
	}
	pair, err := tls.LoadX509KeyPair(e.Paths.Of(path.Join(dir, "healthcheck-client.crt")), e.Paths.Of(path.Join(dir, "healthcheck-client.key")))
	if err != nil {
		return nil, fmt.Errorf("load etcd client certificate: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}}, nil
}

// JoinHostPort is net.JoinHostPort for an int port ("[fd77::11]:6443" for IPv6).
func JoinHostPort(h string, port int) string { return net.JoinHostPort(h, strconv.Itoa(port)) }
