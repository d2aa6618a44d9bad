// Package lab runs a multi-host Kubernetes lab on one Linux machine: each host is its own
// network, mount and UTS namespace on a lab bridge, with its own containerd and kubelet, and
// the first control plane is made by real kubeadm. It needs root.
package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Fixed facts of the lab network and cluster.
const (
	Bridge           = "kjlab0"
	BridgeAddr       = "10.77.0.1"
	netPrefix        = "10.77.0."
	nsPrefix         = "kjlab-"
	ControlPlaneName = "control-plane.lab"
	APIPort          = 6443
	PodSubnet        = "10.244.0.0/16"
	ServiceSubnet    = "10.96.0.0/12"
	// The IPv6 unique-local side of the same network (every bridge and host carries it; a
	// lab's Family chooses what the cluster uses).
	BridgeAddr6    = "fd77::1"
	netPrefix6     = "fd77::"
	PodSubnet6     = "fd77:244::/48"
	ServiceSubnet6 = "fd77:96::/112"
	// Token is the bootstrap token kubeadm init creates on cp1.
	Token = "abcdef.0123456789abcdef"
	// DefaultRoot holds the lab's state, per-host directories and tool links.
	DefaultRoot = "/var/lib/kjoin-lab"
)

// Lab is a running lab. Its state is kept in Root/state.json so that separate processes
// (make lab-up, then a test or the lab command) act on the same lab.
type Lab struct {
	Root string `json:"root"`
	// BinDir holds the real Kubernetes and etcd programs.
	BinDir string `json:"binDir"`
	// ImageDir holds the docker-archive image tarballs.
	ImageDir string `json:"imageDir"`
	// K8sVersion is the Kubernetes version of the components (their kubeadm's own version).
	K8sVersion string `json:"k8sVersion"`
	// PauseImage is the sandbox image that version's kubeadm asks for.
	PauseImage string `json:"pauseImage"`
	// Images are the images kubeadm config images list names for the lab's configuration
	// (every one left to kubeadm's defaults): the lab builds exactly these.
	Images []string `json:"images"`
	// CAHash is the sha256 SPKI pin of the cluster CA, once cp1 is initialised.
	CAHash string           `json:"caHash,omitempty"`
	Hosts  map[string]*Host `json:"hosts"`
	// Family is the cluster's address family: "ipv4" (default), "ipv6" (single-stack) or
	// "dual" (dual-stack, IPv4 first).
	Family string `json:"family,omitempty"`
	// Runtimes are the runtimes hosts not yet up will run (UseRuntime), by host name.
	Runtimes map[string]string `json:"runtimes,omitempty"`
	// Rootfs is the Debian root filesystem every host boots (e2e/rootfs/build.sh).
	Rootfs string `json:"rootfs"`

	mu sync.Mutex
}

// Host is one lab host.
type Host struct {
	Name string `json:"name"`
	// IP is the host's address in the cluster's primary family (its node IP, advertise
	// address); IP4 and IP6 are both of its addresses on the lab bridge.
	IP      string `json:"ip"`
	IP4     string `json:"ip4"`
	IP6     string `json:"ip6"`
	PodCIDR string `json:"podCIDR"`
	// Runtime is the container runtime build the host runs (bin/runtimes/NAME, UseRuntime);
	// empty: the machine's containerd package.
	Runtime string `json:"runtime,omitempty"`
	// PID is the machine's process ID of the host's systemd (its PID 1).
	PID int `json:"pid,omitempty"`
}

// Options configure Up.
type Options struct {
	Root string
	// BinDir with etcd, kube-apiserver, ..., kubectl; empty builds them with e2e/components/build.sh.
	BinDir string
	// ExtraBins are linked into the hosts' PATH by name (e.g. "kjoin": "/path/to/kjoin").
	ExtraBins map[string]string
	// Family of a new lab: "ipv4" (default), "ipv6" or "dual".
	Family string
	// Log receives progress lines.
	Log func(format string, args ...any)
}

// HostIP returns the fixed address of a lab host: cpN → .10+N, wN → .100+N.
func HostIP(name string) (string, error) {
	n, role, err := parseName(name)
	if err != nil {
		return "", err
	}
	if role == "cp" {
		return netPrefix + strconv.Itoa(10+n), nil
	}
	return netPrefix + strconv.Itoa(100+n), nil
}

// HostIP6 returns a lab host's IPv6 address: cpN → fd77::1N, wN → fd77::10N (the IPv4
// address's last number, as hex digits).
func HostIP6(name string) (string, error) {
	ip, err := HostIP(name)
	if err != nil {
		return "", err
	}
	return netPrefix6 + strings.TrimPrefix(ip, netPrefix), nil
}

// families are the lab's address families, each with the cluster subnets kubeadm init gets.
var families = map[string]struct{ pods, services string }{
	"ipv4": {PodSubnet, ServiceSubnet},
	"ipv6": {PodSubnet6, ServiceSubnet6},
	"dual": {PodSubnet + "," + PodSubnet6, ServiceSubnet + "," + ServiceSubnet6},
}

func (l *Lab) family() string {
	if l.Family == "" {
		return "ipv4"
	}
	return l.Family
}

// nodeIPs are a host's node IPs in the lab's family (dual: IPv4 first).
func (l *Lab) nodeIPs(h *Host) []string {
	switch l.family() {
	case "ipv6":
		return []string{h.IP6}
	case "dual":
		return []string{h.IP4, h.IP6}
	}
	return []string{h.IP4}
}

func parseName(name string) (int, string, error) {
	for _, role := range []string{"cp", "w"} {
		if rest, ok := strings.CutPrefix(name, role); ok {
			if n, err := strconv.Atoi(rest); err == nil && n >= 1 && n <= 9 {
				return n, role, nil
			}
		}
	}
	return 0, "", fmt.Errorf("lab host name %q is not cp1..cp9 or w1..w9", name)
}

// IsControlPlane reports whether a host name is a control-plane host (cpN).
func IsControlPlane(name string) bool {
	_, role, err := parseName(name)
	return err == nil && role == "cp"
}

func podCIDR(name string) string {
	n, role, _ := parseName(name)
	if role == "w" {
		n += 100
	}
	return fmt.Sprintf("10.244.%d.0/24", n)
}

func podCIDR6(name string) string {
	n, role, _ := parseName(name)
	if role == "w" {
		n += 100
	}
	return fmt.Sprintf("fd77:244:0:%d::/64", n)
}

// Load returns the lab recorded under root, or an error when no lab is up.
func Load(root string) (*Lab, error) {
	if root == "" {
		root = DefaultRoot
	}
	b, err := os.ReadFile(filepath.Join(root, "state.json"))
	if err != nil {
		return nil, fmt.Errorf("no lab is up under %s (run make lab-up): %w", root, err)
	}
	l := &Lab{}
	if err := json.Unmarshal(b, l); err != nil {
		return nil, fmt.Errorf("read lab state: %w", err)
	}
	return l, nil
}

func (l *Lab) save() error {
	b, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(l.Root, ".state.json.tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(l.Root, "state.json"))
}

// HostNames lists the lab's hosts, sorted.
func (l *Lab) HostNames() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	names := make([]string, 0, len(l.Hosts))
	for n := range l.Hosts {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Up creates the lab network, builds what is missing and brings up the named hosts.
// It does not run kubeadm; see InitControlPlane.
func Up(ctx context.Context, o Options, hosts ...string) (*Lab, error) {
	if o.Root == "" {
		o.Root = DefaultRoot
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("the lab needs root (network, mount and UTS namespaces)")
	}
	if err := runScript(ctx, o.Log, "install-deps.sh"); err != nil {
		return nil, fmt.Errorf("install lab packages: %w", err)
	}
	l, err := Load(o.Root)
	if err != nil {
		l = &Lab{Root: o.Root, Hosts: map[string]*Host{}}
	}
	if o.Family != "" {
		if _, ok := families[o.Family]; !ok {
			return nil, fmt.Errorf("lab family %q is not ipv4, ipv6 or dual", o.Family)
		}
		if len(l.Hosts) > 0 && l.family() != o.Family {
			return nil, fmt.Errorf("the lab is up as %s; bring it down before an %s lab", l.family(), o.Family)
		}
		l.Family = o.Family
	}
	if l.BinDir == "" || o.BinDir != "" {
		bin := o.BinDir
		if bin == "" {
			start := time.Now()
			o.Log("building the Kubernetes and etcd components (cached after the first run)")
			if bin, err = buildComponents(ctx); err != nil {
				return nil, err
			}
			o.Log("components ready in %s: %s", time.Since(start).Round(time.Second), bin)
		}
		l.BinDir = bin
	}
	if l.Rootfs == "" {
		start := time.Now()
		if l.Rootfs, err = buildRootfs(ctx); err != nil {
			return nil, err
		}
		o.Log("hosts' root filesystem ready in %s: %s", time.Since(start).Round(time.Second), l.Rootfs)
	}
	if err := os.MkdirAll(filepath.Join(l.Root, "hosts"), 0o755); err != nil {
		return nil, err
	}
	if err := l.ensureSSHKey(ctx); err != nil {
		return nil, fmt.Errorf("lab SSH key: %w", err)
	}
	if err := l.save(); err != nil {
		return nil, fmt.Errorf("save lab state: %w", err)
	}
	if err := l.readVersions(ctx); err != nil {
		return nil, err
	}
	if l.ImageDir, err = l.buildImages(ctx, o.Log); err != nil {
		return nil, fmt.Errorf("build images: %w", err)
	}
	if err := l.linkTools(o.ExtraBins); err != nil {
		return nil, fmt.Errorf("link lab tools: %w", err)
	}
	if err := setupNetwork(ctx); err != nil {
		return nil, fmt.Errorf("lab network: %w", err)
	}
	if err := l.save(); err != nil {
		return nil, fmt.Errorf("save lab state: %w", err)
	}
	for _, h := range hosts {
		if _, err := l.AddHost(ctx, h, o.Log); err != nil {
			return l, err
		}
	}
	return l, nil
}
