package lab

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A lab host is a systemd host (kind's node-container model, see docs/LAB.md): the Debian
// root filesystem e2e/rootfs/build.sh makes, an overlay per host, systemd as PID 1 in the
// host's own PID, mount, UTS, IPC and cgroup namespaces, and the host's network namespace on
// the lab bridge. The machine reaches a host's files through /proc/PID1/root and runs
// commands in it with nsenter.

// CgroupDriver is the cgroup driver of every lab kubelet and containerd: kubeadm's default,
// the one a systemd host's runtime uses.
const CgroupDriver = "systemd"

// The kubelet unit and kubeadm's drop-in, as the kubelet and kubeadm packages of
// pkgs.k8s.io install them: a host is a node prepared the way kubeadm's documentation says.
const (
	upstreamKubeletUnit = `[Unit]
Description=kubelet: The Kubernetes Node Agent
Documentation=https://kubernetes.io/docs/
Wants=network-online.target
After=network-online.target

[Service]
ExecStart=/usr/bin/kubelet
Restart=always
StartLimitInterval=0
RestartSec=10

[Install]
WantedBy=multi-user.target
`
	kubeadmDropIn = `# Note: This dropin only works with kubeadm and kubelet v1.11+
[Service]
Environment="KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf"
Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"
# This is a file that "kubeadm init" and "kubeadm join" generates at runtime, populating the KUBELET_KUBEADM_ARGS variable dynamically
EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
# This is a file that the user can use for overrides of the kubelet args as a last resort. Preferably, the user should use
# the .NodeRegistration.KubeletExtraArgs object in the configuration files instead. KUBELET_EXTRA_ARGS should be sourced from this file.
EnvironmentFile=-/etc/default/kubelet
ExecStart=
ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS
`
	// containerdUnit runs the host's containerd (the machine's package or a runtime build,
	// first on /run/lab/bin) with its per-host configuration, like the package's unit.
	containerdUnit = `[Unit]
Description=containerd container runtime
Documentation=https://containerd.io
After=network.target local-fs.target

[Service]
Environment=PATH=/run/lab/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
ExecStart=/run/lab/bin/containerd --config /run/lab/containerd.toml
Type=notify
Delegate=yes
KillMode=process
Restart=always
RestartSec=5
LimitNPROC=infinity
LimitCORE=infinity
LimitNOFILE=infinity
TasksMax=infinity
OOMScoreAdjust=-999
StandardOutput=append:/run/lab/containerd.log
StandardError=append:/run/lab/containerd.log

[Install]
WantedBy=multi-user.target
`
)

// buildRootfs makes (once, cached) the root filesystem hosts boot and returns its directory.
func buildRootfs(ctx context.Context) (string, error) {
	return buildWith(ctx, "e2e/rootfs/build.sh", "build the hosts' root filesystem")
}

// hostDirs of a host on the machine: its overlay's upper and work directories, the mount
// point its root is built on, its containerd state (on the machine's filesystem: containerd's
// snapshots cannot live on an overlay) and /run/lab.
func (l *Lab) upperDir(host string) string  { return filepath.Join(l.hostDir(host), "upper") }
func (l *Lab) runLabDir(host string) string { return filepath.Join(l.hostDir(host), "run-lab") }

// HostSetup is how a new host differs from the lab's usual one (a node prepared as kubeadm's
// install page says: the kubelet and kubeadm packages' units, the kubelet enabled).
type HostSetup struct {
	// CloudInit, when set, seeds the NoCloud datasource and lets cloud-init run at first boot;
	// /usr/bin/kjoin is then the lab's kjoin (an image with the package baked in).
	CloudInit *CloudInitSeed
	// BareKubelet: a kubelet binary without a unit (no kubelet or kubeadm package).
	BareKubelet bool
	// DropAtBoot are TCP addresses (IP:port) the host cannot reach from before it boots
	// until DropRule(..., "-D") removes the rule in its network namespace.
	DropAtBoot []string
	// BootTimeout bounds the wait for the host's default target (60 s when zero).
	BootTimeout time.Duration
}

// CloudInitSeed is a NoCloud seed (/var/lib/cloud/seed/nocloud).
type CloudInitSeed struct{ UserData, MetaData string }

// DropRule is the iptables arguments (after the command, -I or -D) that drop a host's TCP
// traffic to ip:port.
func DropRule(ip, port, op string) []string {
	return []string{op, "OUTPUT", "-p", "tcp", "-d", ip, "--dport", port, "-j", "DROP"}
}

// writeUpper seeds a new host's overlay: its name, machine ID and /etc/hosts; the kubelet
// binary and the package units a node prepared for kubeadm has; containerd's unit.
func (l *Lab) writeUpper(h *Host, setup HostSetup) error {
	up := l.upperDir(h.Name)
	id := make([]byte, 16)
	if _, err := rand.Read(id); err != nil {
		return err
	}
	bin := filepath.Join(l.BinDir, "kubelet")
	files := map[string]string{
		"etc/hostname":   h.Name + "\n",
		"etc/machine-id": hex.EncodeToString(id) + "\n",
		"etc/hosts":      l.etcHosts(),
		// The lab's addresses: the only last-resort flag a lab host needs.
		"etc/default/kubelet":                                     fmt.Sprintf("KUBELET_EXTRA_ARGS=--node-ip=%s\n", strings.Join(l.nodeIPs(h), ",")),
		"etc/systemd/system/containerd.service":                   containerdUnit,
		"etc/systemd/system/containerd.service.d/lab-images.conf": l.imagesDropIn(h),
		// A lab host reaches no Debian mirror (lab traffic stays on the machine).
		"etc/apt/sources.list": "# a lab host reaches no mirror; its packages are the root filesystem's\n",
	}
	links := map[string]string{
		"usr/bin/kubelet": "/run/lab/bin/kubelet",
		"etc/systemd/system/multi-user.target.wants/containerd.service": "/etc/systemd/system/containerd.service",
	}
	if !setup.BareKubelet {
		files["usr/lib/systemd/system/kubelet.service"] = upstreamKubeletUnit
		files["usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf"] = kubeadmDropIn
		// Enabled, as kubeadm's install page has it (systemctl enable --now kubelet): until a
		// join configures it the kubelet exits and systemd restarts it every 10 s.
		links["etc/systemd/system/multi-user.target.wants/kubelet.service"] = "/usr/lib/systemd/system/kubelet.service"
	}
	if seed := setup.CloudInit; seed != nil {
		files["var/lib/cloud/seed/nocloud/user-data"] = seed.UserData
		files["var/lib/cloud/seed/nocloud/meta-data"] = seed.MetaData
		// The image's own cloud-init settings: its network is set up before boot, and the
		// minbase root filesystem has no locales for cloud-init's locale module to generate.
		files["etc/cloud/cloud.cfg.d/99-lab.cfg"] = "network: {config: disabled}\ndatasource_list: [NoCloud, None]\nlocale: false\n"
		links["usr/bin/kjoin"] = filepath.Join(l.Root, "bin", "kjoin")
	}
	pub, err := os.ReadFile(l.SSHKey() + ".pub")
	if err != nil {
		return fmt.Errorf("the lab's SSH key: %w", err)
	}
	files["root/.ssh/authorized_keys"] = string(pub)
	for rel, content := range files {
		p := filepath.Join(up, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		_ = os.Remove(p) // the root filesystem masks containerd.service with a link
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return err
		}
	}
	for _, d := range []string{"root", "root/.ssh"} {
		if err := os.Chmod(filepath.Join(up, d), 0o700); err != nil {
			return err
		}
	}
	if !setup.BareKubelet {
		// The kubelet package makes the static-pod directory.
		if err := os.MkdirAll(filepath.Join(up, "etc/kubernetes/manifests"), 0o755); err != nil {
			return err
		}
	}
	if setup.CloudInit != nil {
		// The root filesystem keeps cloud-init off; an overlay whiteout removes that file.
		if err := syscall.Mknod(filepath.Join(up, "etc/cloud/cloud-init.disabled"), syscall.S_IFCHR, 0); err != nil {
			return fmt.Errorf("enable cloud-init: %w", err)
		}
	}
	// The lab's tools (kjoin, kubeadm, kubectl...) where a login shell, a unit or Ansible
	// finds them without the lab's PATH.
	tools, err := os.ReadDir(filepath.Join(l.Root, "bin"))
	if err != nil {
		return err
	}
	for _, t := range tools {
		if t.Name() == "kubelet" || strings.HasSuffix(t.Name(), ".tmp") {
			continue // the kubelet is /usr/bin/kubelet, the packages' path
		}
		links["usr/local/bin/"+t.Name()] = filepath.Join(l.Root, "bin", t.Name())
	}
	for rel, target := range links {
		p := filepath.Join(up, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		_ = os.Remove(p)
		if err := os.Symlink(target, p); err != nil {
			return err
		}
	}
	runBin := filepath.Join(l.runLabDir(h.Name), "bin")
	if err := os.MkdirAll(runBin, 0o755); err != nil {
		return err
	}
	containerd := "/usr/bin/containerd"
	if h.Runtime != "" {
		containerd = filepath.Join(l.BinDir, "runtimes", h.Runtime, "containerd")
	}
	for name, target := range map[string]string{"kubelet": bin, "containerd": containerd} {
		p := filepath.Join(runBin, name)
		if _, err := os.Lstat(p); err == nil {
			continue // UseKubelet or UseRuntime chose another
		}
		if err := os.Symlink(target, p); err != nil {
			return err
		}
	}
	return nil
}

// cgroupMount is one cgroup hierarchy of the machine: where it is mounted under
// /sys/fs/cgroup, its type and its options (the controllers or name= of a v1 hierarchy).
type cgroupMount struct{ dir, fstype, opts string }

// machineCgroups lists the machine's cgroup hierarchies, and the links (cpu → cpu,cpuacct)
// beside them.
func machineCgroups() (mounts []cgroupMount, links map[string]string, err error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		i := 6
		for i < len(fields) && fields[i] != "-" {
			i++
		}
		if i+3 >= len(fields) || !strings.HasPrefix(fields[4], "/sys/fs/cgroup/") {
			continue
		}
		fstype, super := fields[i+1], fields[i+3]
		if fstype != "cgroup" && fstype != "cgroup2" {
			continue
		}
		var opts []string
		for _, o := range strings.Split(super, ",") {
			if o != "rw" && o != "ro" {
				opts = append(opts, o)
			}
		}
		mounts = append(mounts, cgroupMount{dir: filepath.Base(fields[4]), fstype: fstype, opts: strings.Join(opts, ",")})
	}
	links = map[string]string{}
	entries, _ := os.ReadDir("/sys/fs/cgroup")
	for _, e := range entries {
		if t, err := os.Readlink(filepath.Join("/sys/fs/cgroup", e.Name())); err == nil {
			links[e.Name()] = t
		}
	}
	return mounts, links, s.Err()
}

// bootScript is PID 1's first program in a new host: it builds the host's root (overlay,
// proc, a read-only sysfs, the host's own cgroup subtrees read-write, a minimal /dev, /run),
// binds in the lab's shared directories, pivots into the root and executes systemd.
func (l *Lab) bootScript(h *Host, rootfs string, shared []string) (string, error) {
	mounts, links, err := machineCgroups()
	if err != nil {
		return "", err
	}
	dir := l.hostDir(h.Name)
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format+"\n", a...) }
	w("#!/bin/sh")
	w("set -eu")
	w("R=%q", filepath.Join(dir, "root"))
	w("mount -t overlay overlay -o lowerdir=%s,upperdir=%s,workdir=%s \"$R\"", rootfs, l.upperDir(h.Name), filepath.Join(dir, "work"))
	w("mount -t proc proc \"$R/proc\"")
	w("mount -t sysfs -o ro,nosuid,nodev,noexec sysfs \"$R/sys\"")
	w("mount -t tmpfs -o nosuid,nodev,noexec,mode=755 tmpfs \"$R/sys/fs/cgroup\"")
	for _, m := range mounts {
		w("mkdir -p \"$R/sys/fs/cgroup/%s\"", m.dir)
		if m.fstype == "cgroup2" {
			w("mount -t cgroup2 -o nosuid,nodev,noexec cgroup2 \"$R/sys/fs/cgroup/%s\"", m.dir)
		} else {
			w("mount -t cgroup -o nosuid,nodev,noexec,%s cgroup \"$R/sys/fs/cgroup/%s\"", m.opts, m.dir)
		}
	}
	for name, target := range links {
		w("ln -s %q \"$R/sys/fs/cgroup/%s\"", target, name)
	}
	w("mount -t tmpfs -o nosuid,mode=755 tmpfs \"$R/dev\"")
	w("for d in null zero full random urandom tty kmsg fuse; do [ -e /dev/$d ] || continue; touch \"$R/dev/$d\"; mount --bind /dev/$d \"$R/dev/$d\"; done")
	w("mkdir -p \"$R/dev/pts\" \"$R/dev/shm\"")
	w("mount -t devpts -o newinstance,ptmxmode=0666,mode=620 devpts \"$R/dev/pts\"")
	w("ln -s pts/ptmx \"$R/dev/ptmx\"")
	w("mount -t tmpfs -o nosuid,nodev,mode=1777 tmpfs \"$R/dev/shm\"")
	w("ln -s /proc/self/fd \"$R/dev/fd\"; ln -s /proc/self/fd/0 \"$R/dev/stdin\"; ln -s /proc/self/fd/1 \"$R/dev/stdout\"; ln -s /proc/self/fd/2 \"$R/dev/stderr\"")
	w("touch \"$R/dev/console\"; mount --bind %q \"$R/dev/console\"", filepath.Join(dir, "console.log"))
	w("mount -t tmpfs -o nosuid,nodev,mode=755 tmpfs \"$R/run\"")
	w("mkdir -p \"$R/run/lock\" \"$R/run/lab\" \"$R/var/lib/containerd\"")
	w("mount -t tmpfs -o nosuid,nodev,mode=1777 tmpfs \"$R/tmp\"")
	w("mount --bind %q \"$R/run/lab\"", l.runLabDir(h.Name))
	w("mount --bind %q \"$R/var/lib/containerd\"", filepath.Join(dir, "containerd"))
	for _, d := range shared {
		w("mkdir -p \"$R%s\"; mount --bind %q \"$R%s\"; mount -o remount,bind,ro \"$R%s\"", d, d, d, d)
	}
	w("hostname %q", h.Name)
	w("cd \"$R\"")
	w("mkdir -p .oldroot")
	w("pivot_root . .oldroot")
	// systemd leaves / private in a container; the kubelet's volumes need it shared.
	w("exec /bin/sh -c 'umount -l /.oldroot && rmdir /.oldroot && mount --make-rshared / && exec env -i container=docker /lib/systemd/systemd'")
	return b.String(), nil
}

// sharedDirs are the machine's directories every host sees read-only at the same path: the
// lab's root (its tools) and the component and image caches.
func (l *Lab) sharedDirs() []string {
	cache := SettingsFromEnv().Cache
	var out []string
	for _, d := range []string{l.Root, cache, l.BinDir, l.ImageDir} {
		if d == "" {
			continue
		}
		covered := false
		for _, o := range out {
			if d == o || strings.HasPrefix(d, o+"/") {
				covered = true
			}
		}
		if _, err := os.Stat(d); err == nil && !covered {
			out = append(out, d)
		}
	}
	return out
}

// boot starts a host's systemd and waits until it reached its default target.
func (l *Lab) boot(ctx context.Context, h *Host, setup HostSetup) error {
	dir := l.hostDir(h.Name)
	for _, d := range []string{"upper", "work", "root", "containerd", "run-lab"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	if err := l.seedContainerd(h, filepath.Join(dir, "containerd")); err != nil {
		return fmt.Errorf("seed containerd's images: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "console.log"), nil, 0o644); err != nil {
		return err
	}
	script, err := l.bootScript(h, l.Rootfs, l.sharedDirs())
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "boot.sh"), []byte(script), 0o755); err != nil {
		return err
	}
	// The launcher joins the host's cgroup in every hierarchy first: with its own cgroup
	// namespace the host then sees that subtree as its whole tree.
	var moves []string
	for _, c := range cgroupHierarchies() {
		moves = append(moves, fmt.Sprintf("echo $$ > %s", filepath.Join(c, "host-"+h.Name, "cgroup.procs")))
	}
	launcher := strings.Join(moves, "\n") + fmt.Sprintf("\nexec nsenter --net=%s -- unshare --pid --fork --mount --uts --ipc --cgroup --propagation private /bin/sh %s\n",
		filepath.Join("/run/netns", nsName(h.Name)), filepath.Join(dir, "boot.sh"))
	logf, err := os.OpenFile(filepath.Join(dir, "launch.log"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command("sh", "-ec", launcher)
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("launch: %w", err)
	}
	go func() { _ = cmd.Wait() }()
	wait := setup.BootTimeout
	if wait == 0 {
		wait = 60 * time.Second
	}
	deadline := time.Now().Add(wait)
	for pid := 0; pid == 0; {
		if time.Now().After(deadline) || cmd.ProcessState != nil {
			return fmt.Errorf("no PID 1 appeared; launch log:\n%s", tailFile(filepath.Join(dir, "launch.log"), 20))
		}
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", cmd.Process.Pid, cmd.Process.Pid))
		if f := strings.Fields(string(b)); len(f) == 1 {
			pid, _ = strconv.Atoi(f[0])
			if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.TrimSpace(string(comm)) == "systemd" {
				l.mu.Lock()
				h.PID = pid
				l.mu.Unlock()
			} else {
				pid = 0
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	var state string
	for time.Now().Before(deadline) {
		r := l.Exec(ctx, h.Name, "systemctl", "is-system-running")
		state = strings.TrimSpace(r.Stdout)
		switch state {
		case "running":
			return nil
		case "degraded":
			failed := l.Exec(ctx, h.Name, "systemctl", "--failed", "--no-legend", "--plain")
			return fmt.Errorf("host %s booted degraded: %s", h.Name, strings.TrimSpace(failed.Stdout))
		}
		time.Sleep(100 * time.Millisecond)
	}
	jobs := l.Exec(ctx, h.Name, "systemctl", "list-jobs", "--no-legend", "--plain")
	return fmt.Errorf("host %s: systemd did not reach its default target in %s (state %q); jobs:\n%s", h.Name, wait, state, jobs.Stdout)
}

// alive reports whether a host's systemd runs: its PID 1 is a systemd whose root names it.
func (h *Host) alive() bool {
	if h == nil || h.PID == 0 {
		return false
	}
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", h.PID))
	if err != nil || strings.TrimSpace(string(comm)) != "systemd" {
		return false
	}
	name, err := os.ReadFile(fmt.Sprintf("/proc/%d/root/etc/hostname", h.PID))
	return err == nil && strings.TrimSpace(string(name)) == h.Name
}

// kill ends a host's systemd (SIGKILL) and waits a moment for it to go. An orderly halt
// (SIGRTMIN+3) is not worth its wait for a host that is thrown away.
func (h *Host) kill() {
	if !h.alive() {
		return
	}
	_ = syscall.Kill(h.PID, syscall.SIGKILL)
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && syscall.Kill(h.PID, 0) == nil {
		time.Sleep(20 * time.Millisecond)
	}
}

// imagesDropIn imports the lab's images into a host's containerd when it first starts (like
// a node image with its images preloaded): the pause image everywhere, the control-plane
// images on control planes; before any unit ordered after containerd starts.
func (l *Lab) imagesDropIn(h *Host) string {
	images := []string{"pause.tar"}
	if IsControlPlane(h.Name) {
		images = append(images, "control-plane.tar")
	}
	var cmds []string
	for _, img := range images {
		cmds = append(cmds, fmt.Sprintf("ctr -n k8s.io images import --all-platforms %s", filepath.Join(l.ImageDir, img)))
	}
	done := "/var/lib/containerd/" + templateMarker
	return fmt.Sprintf("[Service]\nExecStartPost=/bin/sh -ec '[ -e %s ] && exit 0; %s; touch %s'\n", done, strings.Join(cmds, "; "), done)
}
