package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Down tears the whole lab down: every host's processes, namespaces, mounts and cgroups, the
// bridge and the forwarding rule, and the lab's state directory. It works on a half-built lab
// and is idempotent.
func Down(ctx context.Context, root string) error {
	if root == "" {
		root = DefaultRoot
	}
	l := &Lab{Root: root, Hosts: map[string]*Host{}}
	if loaded, err := Load(root); err == nil {
		l = loaded
	}
	// Hosts that the state file may not know of (a crash mid-AddHost) are found by name.
	names := map[string]bool{}
	for n := range l.Hosts {
		names[n] = true
	}
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		if n, ok := strings.CutPrefix(e.Name(), nsPrefix); ok {
			names[n] = true
		}
	}
	entries, _ = os.ReadDir(filepath.Join(root, "hosts"))
	for _, e := range entries {
		names[e.Name()] = true
	}
	var errs []error
	for n := range names {
		if err := l.RemoveHost(ctx, n); err != nil {
			errs = append(errs, err)
		}
	}
	rule := []string{"FORWARD", "-i", Bridge, "!", "-o", Bridge, "-j", "DROP"}
	for run(ctx, "iptables", append([]string{"-D"}, rule...)...) == nil {
	}
	if _, err := os.Stat("/sys/class/net/" + Bridge); err == nil {
		if err := run(ctx, "ip", "link", "del", Bridge); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		if err := os.RemoveAll(root); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// RemoveHost kills everything running on a host and removes its namespaces, mounts, cgroups,
// veth and files. It does not touch the cluster (see the tests' helpers for that).
func (l *Lab) RemoveHost(ctx context.Context, name string) error {
	ns := nsName(name)
	netns := filepath.Join("/run/netns", ns)
	l.mu.Lock()
	h := l.Hosts[name]
	l.mu.Unlock()
	// The host's PID 1 first: with it the kernel kills every process of its PID namespace and
	// the pods' namespaces below it (a lab host is thrown away, not shut down).
	h.kill()
	if err := killHost(name, netns); err != nil {
		return fmt.Errorf("host %s: %w", name, err)
	}
	if _, err := os.Stat(netns); err == nil {
		if err := run(ctx, "ip", "netns", "del", ns); err != nil {
			return fmt.Errorf("host %s: %w", name, err)
		}
	}
	if _, err := os.Stat("/sys/class/net/kjv-" + name); err == nil {
		_ = run(ctx, "ip", "link", "del", "kjv-"+name)
	}
	if err := removeCgroups(name); err != nil {
		return fmt.Errorf("host %s: cgroups: %w", name, err)
	}
	var err error
	for i := 0; i < 20; i++ {
		if err = os.RemoveAll(l.hostDir(name)); err == nil {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("host %s: remove files: %w", name, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.Hosts, name)
	if _, statErr := os.Stat(l.Root); statErr == nil {
		return l.save()
	}
	return nil
}

// hostPIDs finds a host's processes: those in its network namespace (host-network pods,
// commands entered with nsenter) and those in its cgroups (systemd and all it started,
// every container).
func hostPIDs(name, netns string) []int {
	want := map[uint64]bool{}
	var st syscall.Stat_t
	if syscall.Stat(netns, &st) == nil {
		want[st.Ino] = true
	}
	pids := map[int]bool{}
	self := os.Getpid()
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid == self {
			continue
		}
		var st syscall.Stat_t
		if syscall.Stat(filepath.Join("/proc", p.Name(), "ns", "net"), &st) == nil && want[st.Ino] {
			pids[pid] = true
		}
	}
	for _, h := range cgroupHierarchies() {
		_ = filepath.WalkDir(filepath.Join(h, "host-"+name), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			b, _ := os.ReadFile(p)
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					pids[pid] = true
				}
			}
			return nil
		})
	}
	out := make([]int, 0, len(pids))
	for p := range pids {
		out = append(out, p)
	}
	return out
}

func killHost(name, netns string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		pids := hostPIDs(name, netns)
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes still alive after SIGKILL: %v", pids)
		}
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func removeCgroups(host string) error {
	var errs []error
	for _, h := range cgroupHierarchies() {
		root := filepath.Join(h, "host-"+host)
		if _, err := os.Stat(root); err != nil {
			continue
		}
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		// Deepest first; a cgroup empties a moment after its last process dies.
		for i := len(dirs) - 1; i >= 0; i-- {
			var err error
			for try := 0; try < 50; try++ {
				if err = syscall.Rmdir(dirs[i]); err == nil || errors.Is(err, syscall.ENOENT) {
					err = nil
					break
				}
				time.Sleep(100 * time.Millisecond)
			}
			if err != nil {
				errs = append(errs, fmt.Errorf("rmdir %s: %w", dirs[i], err))
			}
		}
	}
	return errors.Join(errs...)
}
