package phases

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"kjoin.dev/kjoin/discovery"
	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/joinrequest"
	"kjoin.dev/kjoin/operr"
	"kjoin.dev/kjoin/pki"
)

// Preflight checks the host before anything is changed, and reports every failure at once.
//
//	Reads:  s.Opts (NodeName, CRISocket, IgnorePreflight); host files under env.Paths
//	Writes: s.Warnings
var Preflight = Phase{ReadOnly: true, Name: "preflight", Short: "Check that this host can join", Run: runPreflight}

// knownCRISockets are tried, in order, when --cri-socket is not given (as kubeadm).
var knownCRISockets = []string{
	"unix:///var/run/containerd/containerd.sock",
	"unix:///var/run/crio/crio.sock",
	"unix:///var/run/cri-dockerd.sock",
}

// check is one kubeadm-style preflight check: its name (for --ignore-preflight-errors) and
// its run, which returns a warning, an error, or neither.
type check struct {
	name string
	run  func() (warning string, err error)
}

// runChecks runs checks and reports every failure at once (exit 3), sorted, after printing
// their warnings; a failure of a check --ignore-preflight-errors names becomes a warning.
func runChecks(e *host.Env, s *State, phase string, checks []check) error {
	var failed []string
	for _, c := range checks {
		warning, err := c.run()
		if warning != "" {
			s.Warn(e, phase, "[%s]: %s", c.name, warning)
		}
		if err == nil {
			continue
		}
		if ignored(s, c.name) {
			s.Warn(e, phase, "[%s]: %v (ignored)", c.name, err)
			continue
		}
		failed = append(failed, fmt.Sprintf("[ERROR %s]: %v", c.name, err))
	}
	if len(failed) == 0 {
		return nil
	}
	// Sorted, but root first: as another user most other checks fail for that reason alone.
	sort.SliceStable(failed, func(i, j int) bool {
		ri, rj := strings.HasPrefix(failed[i], "[ERROR IsPrivilegedUser]"), strings.HasPrefix(failed[j], "[ERROR IsPrivilegedUser]")
		if ri != rj {
			return ri
		}
		return failed[i] < failed[j]
	})
	return &operr.Error{
		Code: operr.Preflight,
		What: fmt.Sprintf("%d preflight check(s) failed:\n\t%s", len(failed), strings.Join(failed, "\n\t")),
		Hint: "fix them, or make a check non-fatal with --ignore-preflight-errors=<name>,... ('all' ignores every check)",
	}
}

// ignored reports whether a preflight check is made non-fatal by --ignore-preflight-errors.
func ignored(s *State, check string) bool {
	return s.Opts.IgnorePreflight["all"] || s.Opts.IgnorePreflight[strings.ToLower(check)]
}

func runPreflight(ctx context.Context, e *host.Env, s *State) error {
	if s.probes == nil && s.Opts.CRISocket != "" {
		s.probes = startHostProbes(ctx, e, s) // version-check's local questions, meanwhile
	}
	if err := checkOwnership(e, s); err != nil {
		return err
	}
	checks := []check{
		{"IsPrivilegedUser", func() (string, error) {
			if e.Geteuid() != 0 {
				return "", fmt.Errorf("user is not running as root")
			}
			return "", nil
		}},
		{"Hostname", func() (string, error) {
			if errs := validation.IsDNS1123Subdomain(s.Opts.NodeName); len(errs) > 0 {
				return "", fmt.Errorf("node name %q is not a valid DNS-1123 subdomain: %s", s.Opts.NodeName, strings.Join(errs, "; "))
			}
			return "", nil
		}},
		{"Port-10250", func() (string, error) {
			if e.PortInUse(10250) && !s.Own {
				return "", fmt.Errorf("port 10250 is in use: a kubelet is probably running already (kjoin reset removes a previous join)")
			}
			return "", nil
		}},
		{"CRI", func() (string, error) { return "", checkCRI(e, s) }},
		{"Swap", func() (string, error) {
			b, err := e.ReadFile(host.ProcSwaps)
			if err == nil && len(strings.Split(strings.TrimSpace(string(b)), "\n")) > 1 {
				return "swap is on; the kubelet must then run with failSwapOn: false (set in the cluster's kubelet-config)", nil
			}
			return "", nil
		}},
		{"FileContent--proc-sys-net-ipv4-ip_forward", func() (string, error) {
			b, err := e.ReadFile(host.ProcIPForward)
			if err != nil {
				return "", fmt.Errorf("%s: %w", host.ProcIPForward, err)
			}
			if strings.TrimSpace(string(b)) != "1" {
				return "", fmt.Errorf("%s contents are not set to 1 (sysctl -w net.ipv4.ip_forward=1)", host.ProcIPForward)
			}
			return "", nil
		}},
	}
	if s.Opts.ControlPlane {
		for _, port := range []int{s.Opts.BindPort, 2379, 2380, 10257, 10259} {
			checks = append(checks, check{fmt.Sprintf("Port-%d", port), func() (string, error) {
				if e.PortInUse(port) && !s.Own {
					return "", fmt.Errorf("port %d is in use", port)
				}
				return "", nil
			}})
		}
		checks = append(checks, check{"DirAvailable--etc-kubernetes-manifests", func() (string, error) {
			if entries, err := os.ReadDir(e.Paths.Of(host.ManifestsDir)); err == nil && len(entries) > 0 && !s.Own {
				return "", fmt.Errorf("%s is not empty", host.ManifestsDir)
			}
			return "", nil
		}})
	}
	for _, f := range []string{host.KubeletKubeconfig, host.BootstrapKubeconfig, host.CACertPath} {
		checks = append(checks, check{"FileAvailable-" + strings.ReplaceAll(f, "/", "-"), func() (string, error) {
			if e.Exists(f) && !s.Own {
				return "", fmt.Errorf("%s already exists (this host was joined before? kjoin reset cleans it up)", f)
			}
			return "", nil
		}})
	}

	if err := runChecks(e, s, "preflight", checks); err != nil {
		return err
	}
	e.Logf("preflight", "node %q, container runtime %s: checks passed", s.Opts.NodeName, s.Opts.CRISocket)
	if s.Own {
		e.Logf("preflight", "this node already holds (part of) this join: finishing it, changing only what is missing")
	}
	return nil
}

// checkOwnership decides whether files already on the node belong to this very join (an
// interrupted or finished earlier run, or a node already joined to this cluster by kubeadm),
// and refuses a node that belongs to another cluster.
func checkOwnership(e *host.Env, s *State) error {
	j := s.Journal
	if j != nil && j.Node == s.Opts.NodeName && (j.CAPin == "" || len(s.Opts.Pins) == 0 || s.Opts.Pins[j.CAPin]) {
		s.Own = len(j.Phases) > 0 || len(j.Files) > 0
	}
	caPEM, err := e.ReadFile(host.CACertPath)
	if err != nil {
		return nil
	}
	cas, err := pki.ParseCerts(caPEM)
	if err != nil {
		return nil
	}
	pin := discovery.Pin(cas[0])
	if len(s.Opts.Pins) > 0 && !s.Opts.Pins[pin] && e.Exists(host.KubeletKubeconfig) {
		var asked []string
		for p := range s.Opts.Pins {
			asked = append(asked, p)
		}
		sort.Strings(asked)
		s.Own = false
		return operr.Newf(operr.Trust,
			"this node is already joined to another cluster: its CA is %s, but this join pins %s", pin, strings.Join(asked, ", ")).
			WithHint("run kjoin reset on this node to leave the other cluster, then join again")
	}
	if len(s.Opts.Pins) > 0 && e.Exists(host.KubeletKubeconfig) {
		if j != nil && !s.Own && !j.Adopted {
			// Joined before this journal began (by kubeadm): reset removes kubeadm's files too.
			j.Adopted = true
		}
		s.Own = true
	}
	return nil
}

// Defaults fills the options a join derives from the host: the node name (hostname,
// lower-cased) and the CRI socket (the one known socket present), as kubeadm does.
func Defaults(e *host.Env, o *joinrequest.Options) error {
	if o.NodeName == "" {
		h, err := e.Hostname()
		if err != nil {
			return operr.Wrap(operr.Preflight, err, "cannot read this host's name", "pass --node-name")
		}
		o.NodeName = strings.ToLower(strings.TrimSpace(h))
	}
	if o.CRISocket == "" {
		var found []string
		for _, sock := range knownCRISockets {
			if e.Exists(strings.TrimPrefix(sock, "unix://")) {
				found = append(found, sock)
			}
		}
		switch len(found) {
		case 0:
			// As kubeadm: its default socket, which preflight's CRI check then reports (with
			// every other failure, and ignorable with --ignore-preflight-errors=CRI).
			o.CRISocket = knownCRISockets[0]
		case 1:
			o.CRISocket = found[0]
		default:
			return operr.Newf(operr.Preflight, "found several container runtime sockets: %s", strings.Join(found, ", ")).
				WithHint("choose one with --cri-socket")
		}
	}
	if !strings.Contains(o.CRISocket, "://") {
		o.CRISocket = "unix://" + o.CRISocket
	}
	if o.ControlPlane {
		if o.BindPort == 0 {
			o.BindPort = 6443
		}
		if o.AdvertiseAddress == "" {
			ip, err := e.LocalAddressFor(o.Endpoint)
			if err != nil {
				return operr.Wrap(operr.Preflight, err, "cannot choose this node's advertise address", "pass --apiserver-advertise-address")
			}
			o.AdvertiseAddress = ip
		}
		if err := joinrequest.CheckAdvertiseAddress(o.AdvertiseAddress); err != nil {
			return operr.Wrap(operr.Usage, err, "cannot use this node's advertise address", "pass --apiserver-advertise-address with an IP address of this node")
		}
	}
	return nil
}

// RequireRoot refuses to change a host as another user (reset's first check; a join's is
// preflight's IsPrivilegedUser, reported first among its failures).
func RequireRoot(e *host.Env, what string) error {
	if e.Geteuid != nil && e.Geteuid() != 0 {
		return operr.Newf(operr.Preflight, "%s must run as root (user id %d)", what, e.Geteuid()).WithHint("run it with sudo, or as root")
	}
	return nil
}

func checkCRI(e *host.Env, s *State) error {
	path := strings.TrimPrefix(s.Opts.CRISocket, "unix://")
	if !e.Exists(path) && slices.Contains(knownCRISockets, s.Opts.CRISocket) {
		return fmt.Errorf("no container runtime socket at %s (looked for %s): start the container runtime, or pass --cri-socket", path, strings.Join(knownCRISockets, ", "))
	}
	if !e.SocketReachable(e.Paths.Of(path)) {
		return fmt.Errorf("container runtime is not answering on %s", s.Opts.CRISocket)
	}
	return nil
}
