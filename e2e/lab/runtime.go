package lab

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// UseRuntime makes a host that is not up yet run another container runtime build
// (e2e/components/build.sh KJOIN_RUNTIMES, e.g. "containerd-v2.4.2") instead of the machine's
// containerd package.
func (l *Lab) UseRuntime(host, name string) error {
	if l.HostUp(host) {
		return fmt.Errorf("host %s is up already: its runtime is chosen before it is created", host)
	}
	if _, err := os.Stat(filepath.Join(l.BinDir, "runtimes", name, "containerd")); err != nil {
		return fmt.Errorf("no runtime %s in the component build (KJOIN_RUNTIMES=%s e2e/components/build.sh): %w", name, name, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.Runtimes == nil {
		l.Runtimes = map[string]string{}
	}
	l.Runtimes[host] = name
	return l.save()
}

// linkRuntime puts the host's runtime build (containerd, its shim, ctr) first on its PATH.
func (l *Lab) linkRuntime(h *Host) error {
	if h.Runtime == "" {
		return nil
	}
	for _, p := range []string{"containerd", "containerd-shim-runc-v2", "ctr"} {
		if err := l.UseProgram(h.Name, p, filepath.Join(l.BinDir, "runtimes", h.Runtime, p)); err != nil {
			return err
		}
	}
	return nil
}

// StopContainerd stops a host's containerd service (its shims and containers keep running:
// KillMode=process, as the package's unit), so the host has no container runtime to talk to.
func (l *Lab) StopContainerd(host string) error {
	if r := l.Exec(context.Background(), host, "systemctl", "stop", "containerd"); r.Err != nil {
		return r.Error()
	}
	return nil
}

// StartContainerd starts a host's containerd service again and waits until it answers.
func (l *Lab) StartContainerd(ctx context.Context, host string) error {
	h := l.Hosts[host]
	if h == nil {
		return fmt.Errorf("no host %s", host)
	}
	if r := l.Exec(ctx, host, "systemctl", "start", "containerd"); r.Err != nil {
		return r.Error()
	}
	return l.waitContainerd(ctx, h)
}

// Pids returns the pids of a host's processes whose command name (comm, which the kernel
// cuts to 15 bytes) is name, e.g. the kube-apiserver or etcd of a control plane's static pods.
func (l *Lab) Pids(host, name string) []int {
	ns := nsName(host)
	name = name[:min(len(name), 15)]
	var out []int
	for _, p := range hostPIDs(host, filepath.Join("/run/netns", ns)) {
		comm, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p), "comm"))
		if strings.TrimSpace(string(comm)) == name {
			out = append(out, p)
		}
	}
	return out
}

// Signal sends sig to every process of a host named name and returns their pids; it fails
// when there is none.
func (l *Lab) Signal(host, name string, sig syscall.Signal) ([]int, error) {
	pids := l.Pids(host, name)
	if len(pids) == 0 {
		return nil, fmt.Errorf("%s runs no %s", host, name)
	}
	for _, p := range pids {
		if err := syscall.Kill(p, sig); err != nil {
			return nil, fmt.Errorf("signal %s of %s (pid %d): %w", name, host, p, err)
		}
	}
	return pids, nil
}

// Partition drops every packet between host and peer (in host's network namespace) until
// the returned heal is called.
func (l *Lab) Partition(ctx context.Context, host, peer string) (heal func() error, err error) {
	ip := l.Hosts[peer].IP
	rules := [][]string{{"OUTPUT", "-d", ip, "-j", "DROP"}, {"INPUT", "-s", ip, "-j", "DROP"}}
	for _, r := range rules {
		if res := l.Exec(ctx, host, append([]string{"iptables", "-I"}, r...)...); res.Err != nil {
			return nil, res.Error()
		}
	}
	return func() error {
		for _, r := range rules {
			if res := l.Exec(context.Background(), host, append([]string{"iptables", "-D"}, r...)...); res.Err != nil {
				return res.Error()
			}
		}
		return nil
	}, nil
}

// ImagePulls returns the image pulls a host's containerd was asked for (its log's PullImage
// lines) and how many pod sandboxes it was asked to run (RunPodSandbox lines: containerd logs
// both at the same level, so a log that shows sandboxes would show a pull). A log that cannot
// be read is an error.
func (l *Lab) ImagePulls(host string) (pulls []string, sandboxes int, err error) {
	p := l.HostPath(host, "/run/lab/containerd.log")
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, 0, fmt.Errorf("%s's containerd log: %w", host, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.Contains(line, `msg="PullImage`):
			pulls = append(pulls, line)
		case strings.Contains(line, `msg="RunPodSandbox`):
			sandboxes++
		}
	}
	return pulls, sandboxes, nil
}

// MachinePID translates the PID of a process as a host sees it (its PID namespace, e.g. what
// a program there writes down as its own PID) into the machine's PID of that process.
func (l *Lab) MachinePID(host string, pid int) (int, error) {
	l.mu.Lock()
	h := l.Hosts[host]
	l.mu.Unlock()
	if !h.alive() {
		return 0, fmt.Errorf("host %s is not up", host)
	}
	var want syscall.Stat_t
	if err := syscall.Stat(fmt.Sprintf("/proc/%d/ns/pid", h.PID), &want); err != nil {
		return 0, err
	}
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		mp, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		var st syscall.Stat_t
		if syscall.Stat(filepath.Join("/proc", p.Name(), "ns", "pid"), &st) != nil || st.Ino != want.Ino {
			continue
		}
		b, _ := os.ReadFile(filepath.Join("/proc", p.Name(), "status"))
		for _, line := range strings.Split(string(b), "\n") {
			if f, ok := strings.CutPrefix(line, "NSpid:"); ok {
				if ids := strings.Fields(f); len(ids) > 0 && ids[len(ids)-1] == strconv.Itoa(pid) {
					return mp, nil
				}
			}
		}
	}
	return 0, fmt.Errorf("no process %d in host %s", pid, host)
}
