package lab

import (
	"context"
	_ "embed"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

func nsName(host string) string { return nsPrefix + host }

// hostDir is a host's private state in the root filesystem.
func (l *Lab) hostDir(host string) string { return filepath.Join(l.Root, "hosts", host) }

// HostPath maps a path inside a running host to the same file as the machine reaches it
// (through the host's PID 1: /proc/PID/root/...). A host that is not up has no files.
func (l *Lab) HostPath(host, p string) string {
	return filepath.Join(fmt.Sprintf("/proc/%d/root", l.pid1(host)), p)
}

// pid1 is the machine's PID of a host's systemd (0 for a host the lab does not know).
func (l *Lab) pid1(host string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if h := l.Hosts[host]; h != nil {
		return h.PID
	}
	return 0
}

// inotifyLimits are what several systemd hosts need of the machine's kernel (each host's
// systemd, journald, dbus, containerd and kubelet hold inotify instances, all as root): with
// the default 128 instances a kubelet fails with "inotify_init: too many open files" (kind
// asks the same of its machines). They are only ever raised.
var inotifyLimits = map[string]int{"fs/inotify/max_user_instances": 8192, "fs/inotify/max_user_watches": 524288}

func raiseInotifyLimits() error {
	for k, want := range inotifyLimits {
		p := filepath.Join("/proc/sys", k)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if cur, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && cur >= want {
			continue
		}
		if err := os.WriteFile(p, []byte(strconv.Itoa(want)), 0o644); err != nil {
			return fmt.Errorf("raise %s to %d: %w", k, want, err)
		}
	}
	return nil
}

func setupNetwork(ctx context.Context) error {
	if err := raiseInotifyLimits(); err != nil {
		return err
	}
	if _, err := os.Stat("/sys/class/net/" + Bridge); err != nil {
		if err := run(ctx, "ip", "link", "add", Bridge, "type", "bridge"); err != nil {
			return err
		}
		if err := run(ctx, "ip", "addr", "add", BridgeAddr+"/24", "dev", Bridge); err != nil {
			return err
		}
	}
	if out, _ := exec.CommandContext(ctx, "ip", "-6", "addr", "show", "dev", Bridge).Output(); !strings.Contains(string(out), BridgeAddr6+"/64") {
		_ = run(ctx, "sysctl", "-q", "-w", "net.ipv6.conf."+Bridge+".disable_ipv6=0")
		if err := run(ctx, "ip", "-6", "addr", "add", BridgeAddr6+"/64", "dev", Bridge, "nodad"); err != nil {
			return err
		}
	}
	if err := run(ctx, "ip", "link", "set", Bridge, "up"); err != nil {
		return err
	}
	// Lab traffic stays on this machine: never forward from the lab bridge to anything else.
	// The same rule for IPv6.
	rule := []string{"FORWARD", "-i", Bridge, "!", "-o", Bridge, "-j", "DROP"}
	for _, ipt := range []string{"iptables", "ip6tables"} {
		if run(ctx, ipt, append([]string{"-C"}, rule...)...) != nil {
			if err := run(ctx, ipt, append([]string{"-I"}, rule...)...); err != nil {
				return err
			}
		}
	}
	return nil
}

// AddHost creates a host (namespaces, bind mounts, cgroups, containerd, images) if it is not
// already up. It is idempotent.
func (l *Lab) AddHost(ctx context.Context, name string, logf func(string, ...any)) (*Host, error) {
	return l.AddHostWith(ctx, name, HostSetup{}, logf)
}

// AddHostWith is AddHost for a host set up differently from the lab's usual one.
func (l *Lab) AddHostWith(ctx context.Context, name string, setup HostSetup, logf func(string, ...any)) (*Host, error) {
	ip, err := HostIP(name)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	h, ok := l.Hosts[name]
	l.mu.Unlock()
	if ok && h.alive() {
		return h, nil
	}
	start := time.Now()
	ip6, _ := HostIP6(name)
	h = &Host{Name: name, IP: ip, IP4: ip, IP6: ip6, PodCIDR: podCIDR(name), Runtime: l.Runtimes[name]}
	h.IP = l.nodeIPs(h)[0]
	l.mu.Lock()
	l.Hosts[name] = h
	l.mu.Unlock()
	if err := l.createHost(ctx, h, setup); err != nil {
		return nil, fmt.Errorf("create host %s: %w", name, err)
	}
	l.mu.Lock()
	err = l.save()
	l.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if err := l.waitContainerd(ctx, h); err != nil {
		return nil, fmt.Errorf("host %s: %w", name, err)
	}
	// A first-boot host (cloud-init) may be joining already: its containerd is not stopped.
	if setup.CloudInit == nil {
		if err := l.saveContainerdTemplate(ctx, h); err != nil {
			return nil, fmt.Errorf("host %s: %w", name, err)
		}
	}
	logf("host %s up (%s, pods %s) in %s", name, ip, h.PodCIDR, time.Since(start).Round(100*time.Millisecond))
	return h, nil
}

// importImages imports the image archives of imageDir into a host's containerd: the pause
// image everywhere, the control-plane images on control planes.
func (l *Lab) importImages(ctx context.Context, host, imageDir string) error {
	images := []string{"pause.tar"}
	if IsControlPlane(host) {
		images = append(images, "control-plane.tar")
	}
	for _, img := range images {
		if r := l.Exec(ctx, host, "ctr", "-n", "k8s.io", "images", "import", "--all-platforms", filepath.Join(imageDir, img)); r.Err != nil {
			return fmt.Errorf("host %s: import %s: %w", host, filepath.Join(imageDir, img), r.Error())
		}
	}
	return nil
}

// UseKubelet makes a host run another kubelet version (a skewed worker): the build's
// kubelet-<version> comes first on the host's PATH. Call it before the host's kubelet starts.
func (l *Lab) UseKubelet(host, version string) error {
	bin := filepath.Join(l.BinDir, "kubelet-"+version)
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("no kubelet %s in the component build (e2e/components/build.sh SKEW_KUBELETS): %w", version, err)
	}
	return l.UseProgram(host, "kubelet", bin)
}

// HostUp reports whether a host's systemd runs (it may still be booting).
func (l *Lab) HostUp(name string) bool {
	l.mu.Lock()
	h := l.Hosts[name]
	l.mu.Unlock()
	return h.alive()
}

// createHost prepares a host's files, cgroups and network namespace, then boots it.
func (l *Lab) createHost(ctx context.Context, h *Host, setup HostSetup) error {
	ns := nsName(h.Name)
	l.mu.Lock()
	h.PID = 0
	l.mu.Unlock()
	if err := l.writeUpper(h, setup); err != nil {
		return err
	}
	if err := l.linkRuntime(h); err != nil {
		return err
	}
	if err := l.writeContainerdConfig(ctx, h); err != nil {
		return err
	}
	cni := filepath.Join(l.upperDir(h.Name), "etc/cni/net.d")
	if err := os.MkdirAll(cni, 0o755); err != nil {
		return err
	}
	if err := l.writeCNIConfig(cni, h); err != nil {
		return err
	}
	if err := makeCgroups(h.Name); err != nil {
		return fmt.Errorf("cgroups: %w", err)
	}

	// Network namespace with a veth on the lab bridge.
	if _, err := os.Stat(filepath.Join("/run/netns", ns)); err != nil {
		if err := run(ctx, "ip", "netns", "add", ns); err != nil {
			return err
		}
	}
	veth := "kjv-" + h.Name
	if _, err := os.Stat("/sys/class/net/" + veth); err != nil {
		steps := [][]string{
			{"ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns},
			{"ip", "link", "set", veth, "master", Bridge, "up"},
			{"ip", "-n", ns, "addr", "add", h.IP4 + "/24", "dev", "eth0"},
			{"ip", "-n", ns, "-6", "addr", "add", h.IP6 + "/64", "dev", "eth0", "nodad"},
			{"ip", "-n", ns, "link", "set", "eth0", "up"},
			{"ip", "-n", ns, "link", "set", "lo", "up"},
			{"ip", "-n", ns, "route", "add", "default", "via", BridgeAddr},
			{"ip", "-n", ns, "-6", "route", "add", "default", "via", BridgeAddr6},
		}
		for _, s := range steps {
			if err := run(ctx, s[0], s[1:]...); err != nil {
				return err
			}
		}
	}
	for _, s := range []string{"net.ipv4.ip_forward=1", "net.ipv4.conf.all.route_localnet=1", "net.ipv6.conf.all.forwarding=1"} {
		_ = run(ctx, "ip", "netns", "exec", ns, "sysctl", "-q", "-w", s)
	}
	for _, addr := range setup.DropAtBoot {
		ip, port, err := net.SplitHostPort(addr)
		if err != nil {
			return fmt.Errorf("DropAtBoot %q: %w", addr, err)
		}
		if err := run(ctx, "ip", append([]string{"netns", "exec", ns, "iptables"}, DropRule(ip, port, "-I")...)...); err != nil {
			return err
		}
	}
	return l.boot(ctx, h, setup)
}

// etcHosts names every possible lab host, so lookups never leave the machine: by their
// address of the lab's primary family.
func (l *Lab) etcHosts() string {
	addr := HostIP
	if l.family() == "ipv6" {
		addr = HostIP6
	}
	var b strings.Builder
	b.WriteString("127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n")
	ip, _ := addr("cp1")
	fmt.Fprintf(&b, "%s %s\n", ip, ControlPlaneName)
	for _, role := range []string{"cp", "w"} {
		for n := 1; n <= 9; n++ {
			name := fmt.Sprintf("%s%d", role, n)
			ip, _ := addr(name)
			fmt.Fprintf(&b, "%s %s\n", ip, name)
		}
	}
	return b.String()
}

var (
	reOOM     = regexp.MustCompile(`restrict_oom_score_adj = false`)
	reSandbox = regexp.MustCompile(`sandbox_image = ".*"`)
	reCNIBin  = regexp.MustCompile(`bin_dir = ".*"`)
	reSystemd = regexp.MustCompile(`SystemdCgroup = (true|false)`)
	// containerd 2 (config version 3)
	rePinnedSandbox = regexp.MustCompile(`(?m)^(\s*)sandbox = ['"].*['"]`)
	reCNIBinDirs    = regexp.MustCompile(`bin_dirs = \[.*\]`)
)

// writeContainerdConfig writes the host's containerd configuration: that containerd's own
// defaults, with the cluster's pause image as the sandbox image (containerd 1.x: the CRI
// plugin's sandbox_image; 2.x: the images plugin's pinned_images sandbox), Debian's CNI
// plugins, cgroupfs and the OOM score restriction a namespace without CAP_SYS_RESOURCE needs.
func (l *Lab) writeContainerdConfig(ctx context.Context, h *Host) error {
	bin := "containerd"
	if h.Runtime != "" {
		bin = filepath.Join(l.BinDir, "runtimes", h.Runtime, "containerd")
	}
	out, err := exec.CommandContext(ctx, bin, "config", "default").Output()
	if err != nil {
		return fmt.Errorf("%s config default: %w", bin, err)
	}
	cfg := string(out)
	cfg = reOOM.ReplaceAllString(cfg, "restrict_oom_score_adj = true")
	cfg = reSandbox.ReplaceAllString(cfg, fmt.Sprintf("sandbox_image = %q", l.PauseImage))
	cfg = reCNIBin.ReplaceAllString(cfg, `bin_dir = "/usr/lib/cni"`)
	cfg = reSystemd.ReplaceAllString(cfg, fmt.Sprintf("SystemdCgroup = %t", CgroupDriver == "systemd"))
	cfg = rePinnedSandbox.ReplaceAllString(cfg, fmt.Sprintf("${1}sandbox = %q", l.PauseImage))
	cfg = reCNIBinDirs.ReplaceAllString(cfg, `bin_dirs = ["/usr/lib/cni"]`)
	if h.Runtime != "" && !strings.Contains(cfg, l.PauseImage) {
		return fmt.Errorf("%s config default: no sandbox image setting to point at %s", bin, l.PauseImage)
	}
	return os.WriteFile(filepath.Join(l.runLabDir(h.Name), "containerd.toml"), []byte(cfg), 0o644)
}

// writeCNIConfig writes the host's bridge network: a pod range per family of the lab (dual:
// both, so a pod gets an address of each).
func (l *Lab) writeCNIConfig(dir string, h *Host) error {
	v4 := fmt.Sprintf(`[{"subnet": %q}]`, h.PodCIDR)
	v6 := fmt.Sprintf(`[{"subnet": %q}]`, podCIDR6(h.Name))
	ranges, routes := "["+v4+"]", `[{"dst": "0.0.0.0/0"}]`
	switch l.family() {
	case "ipv6":
		ranges, routes = "["+v6+"]", `[{"dst": "::/0"}]`
	case "dual":
		ranges, routes = "["+v4+", "+v6+"]", `[{"dst": "0.0.0.0/0"}, {"dst": "::/0"}]`
	}
	conf := fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "lab",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": %s, "routes": %s}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`, ranges, routes)
	return os.WriteFile(filepath.Join(dir, "10-lab.conflist"), []byte(conf), 0o644)
}

// waitContainerd waits until a host's containerd (a systemd service) answers.
func (l *Lab) waitContainerd(ctx context.Context, h *Host) error {
	sock := l.HostPath(h.Name, "/run/containerd/containerd.sock")
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		// ctr waits up to 10s for a socket that is not there: look for the socket first.
		if _, err := os.Stat(sock); err == nil && l.Exec(ctx, h.Name, "ctr", "version").Err == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	st := l.Exec(ctx, h.Name, "systemctl", "status", "--no-pager", "containerd")
	logPath := filepath.Join(l.runLabDir(h.Name), "containerd.log")
	return fmt.Errorf("containerd did not answer within 30s:\n%s\nlog %s:\n%s", st.Stdout, logPath, tailFile(logPath, 20))
}

// cgroupHierarchies lists the mounted cgroup v1 hierarchies (and the v2 root if unified).
func cgroupHierarchies() []string {
	entries, _ := os.ReadDir("/sys/fs/cgroup")
	var out []string
	seen := map[string]bool{}
	for _, e := range entries {
		p := filepath.Join("/sys/fs/cgroup", e.Name())
		real, err := filepath.EvalSymlinks(p)
		if err != nil || seen[real] || !isMountPoint(real) {
			continue
		}
		seen[real] = true
		out = append(out, real)
	}
	if len(out) == 0 {
		out = []string{"/sys/fs/cgroup"}
	}
	return out
}

// makeCgroups creates the host's cgroup (host-NAME) in every hierarchy: its launcher joins it
// before unsharing the cgroup namespace, so the host's systemd sees that subtree as its tree.
func makeCgroups(host string) error {
	for _, h := range cgroupHierarchies() {
		p := filepath.Join(h, "host-"+host)
		if err := os.MkdirAll(p, 0o755); err != nil {
			return err
		}
		if filepath.Base(h) == "cpuset" {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				v, err := os.ReadFile(filepath.Join(h, f))
				if err != nil {
					return err
				}
				cur, _ := os.ReadFile(filepath.Join(p, f))
				if strings.TrimSpace(string(cur)) == "" {
					if err := os.WriteFile(filepath.Join(p, f), v, 0o644); err != nil {
						return err
					}
				}
			}
		}
	}
	return nil
}

// SSHKey is the private key the lab's hosts accept for root (Root/ssh/id_ed25519).
func (l *Lab) SSHKey() string { return filepath.Join(l.Root, "ssh", "id_ed25519") }

// ensureSSHKey makes the lab's SSH key pair once.
func (l *Lab) ensureSSHKey(ctx context.Context) error {
	if _, err := os.Stat(l.SSHKey() + ".pub"); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(l.SSHKey()), 0o700); err != nil {
		return err
	}
	return run(ctx, "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "kjoin-lab", "-f", l.SSHKey())
}

// AnsibleHost is an inventory line's connection variables for a lab host: SSH as root to the
// host's address, with the lab's key (a lab host's key is not worth remembering).
func (l *Lab) AnsibleHost(host string) string {
	ip := ""
	if h := l.Hosts[host]; h != nil {
		ip = h.IP4
	}
	return fmt.Sprintf("ansible_host=%s ansible_user=root ansible_ssh_private_key_file=%s ansible_ssh_common_args='-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR' ansible_python_interpreter=/usr/bin/python3", ip, l.SSHKey())
}
