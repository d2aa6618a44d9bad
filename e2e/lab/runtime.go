package lab

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// StopContainerd stops a host's containerd (its shims and containers keep running, as on a
// real node) and removes its socket, so the host has no container runtime to find.
func (l *Lab) StopContainerd(host string) error {
	ns := nsName(host)
	pids := hostPIDs(host, filepath.Join("/run/netns", ns), filepath.Join(hostsDir, ns+".mnt"))
	var stopped []int
	for _, p := range pids {
		comm, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p), "comm"))
		if strings.TrimSpace(string(comm)) == "containerd" {
			_ = syscall.Kill(p, syscall.SIGTERM)
			stopped = append(stopped, p)
		}
	}
	deadline := time.Now().Add(15 * time.Second)
	for _, p := range stopped {
		for syscall.Kill(p, 0) == nil {
			if time.Now().After(deadline) {
				return fmt.Errorf("containerd (pid %d) of %s did not stop", p, host)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	_ = os.Remove(l.HostPath(host, "/run/containerd/containerd.sock"))
	return nil
}

// StartContainerd starts a host's containerd again and waits until it answers.
func (l *Lab) StartContainerd(ctx context.Context, host string) error {
	h := l.Hosts[host]
	if h == nil {
		return fmt.Errorf("no host %s", host)
	}
	return l.startContainerd(ctx, h)
}
