package diagnose

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"kjoin.dev/kjoin/cri"
	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/versions"
)

// runtimeChecks ask the container runtime over the CRI API, and look for a CNI config.
func (g *diagnosis) runtimeChecks(ctx context.Context) {
	endpoint := host.RuntimeEndpoint(g.e)
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rt, err := g.d.Runtime(cctx, endpoint)
	if err == nil {
		defer rt.Close()
		var runtimeReady, networkReady bool
		var detail string
		runtimeReady, networkReady, detail, err = rt.Status(cctx)
		if err == nil {
			g.pass("cri.reachable", "the container runtime answers the CRI API", endpoint)
			if runtimeReady {
				g.pass("cri.runtime", "RuntimeReady", detail)
			} else {
				g.fail("cri.runtime", "the runtime reports RuntimeReady=false", detail)
			}
			if networkReady {
				g.pass("cri.network", "NetworkReady", detail)
			} else {
				g.fail("cri.network", "the runtime reports NetworkReady=false: the pod network (CNI) is not configured", detail)
			}
			if n, err := rt.RunningContainers(cctx); err == nil {
				g.pass("cri.containers", fmt.Sprintf("%d container(s) running", n), "the workloads may still be serving while the node is NotReady")
			}
			g.describeRuntime(cctx, rt)
		}
	}
	if err != nil {
		g.fail("cri.reachable", "the container runtime does not answer", fmt.Sprintf("%s: %v", endpoint, err))
	}
	if ev, ok := g.cniConfig(); ok {
		g.pass("cni.config", "a CNI configuration is present", ev)
	} else {
		g.fail("cni.config", "no CNI configuration: pods cannot get a network and the node stays NotReady", ev)
	}
}

// describeRuntime reports what the runtime is, whether it answers the RuntimeConfig call
// kubelets from v1.38 require, and its sandbox image against the one the cluster's version
// of kubeadm expects (when the API server says its version).
func (g *diagnosis) describeRuntime(ctx context.Context, rt Runtime) {
	info, err := rt.Describe(ctx)
	if err != nil {
		g.warn("cri.version", "the runtime does not say what it is", err.Error())
		return
	}
	g.pass("cri.version", fmt.Sprintf("%s %s", info.Name, info.Version), "CRI Version")
	if info.RuntimeConfig {
		g.pass("cri.runtimeconfig", "the runtime implements the CRI RuntimeConfig call", "cgroup driver "+info.CgroupDriver)
	} else {
		g.warn("cri.runtimeconfig", fmt.Sprintf("the runtime does not implement the CRI RuntimeConfig call, which kubelets from v1.%d require: upgrade it (containerd 2.0 or newer)", versions.RuntimeConfigRequired),
			fmt.Sprintf("%s %s: RuntimeConfig is Unimplemented", info.Name, info.Version))
	}
	want := ""
	if c, err := g.client(); err == nil {
		if v, err := c.Discovery().ServerVersion(); err == nil {
			if m, err := versions.Minor(v.GitVersion); err == nil {
				want = versions.PauseImage(m)
			}
		}
	}
	switch {
	case info.SandboxImage == "":
		g.warn("cri.sandbox", "the runtime does not report its sandbox image", "expected "+dashIfEmpty(want))
	case want == "":
		g.pass("cri.sandbox", "sandbox image "+info.SandboxImage, "read from "+info.SandboxImageFrom+"; the cluster's version is unknown, not compared")
	case !cri.SandboxMatches(info.SandboxImage, want):
		g.warn("cri.sandbox", fmt.Sprintf("the runtime's sandbox image %s is not %s, the one this cluster's kubeadm uses", info.SandboxImage, want), "read from "+info.SandboxImageFrom)
	default:
		g.pass("cri.sandbox", "sandbox image "+info.SandboxImage, "read from "+info.SandboxImageFrom+"; the cluster's kubeadm uses "+want)
	}
}

func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// resourceChecks compare free disk, memory and PIDs with the kubelet's hard eviction thresholds.
func (g *diagnosis) resourceChecks() {
	evict := map[string]string{}
	for k, v := range defaultEviction {
		evict[k] = v
	}
	if m, ok := g.kubeletCfg["evictionHard"].(map[string]any); ok {
		for k, v := range m {
			if s, ok := v.(string); ok {
				evict[k] = s
			}
		}
	}
	for _, fs := range []struct{ id, signal, path string }{
		{"res.nodefs", "nodefs.available", "/var/lib/kubelet"},
		{"res.imagefs", "imagefs.available", "/var/lib/containerd"},
	} {
		avail, total, err := g.d.Statfs(g.e.Paths.Of(fs.path))
		if err != nil {
			g.warn(fs.id, "not checked", err.Error())
			continue
		}
		min := threshold(evict[fs.signal], total)
		ev := fmt.Sprintf("%s: %s free of %s; eviction below %s", fs.path, human(avail), human(total), evict[fs.signal])
		if avail < min {
			g.fail(fs.id, fs.signal+" is below the eviction threshold (DiskPressure)", ev)
		} else {
			g.pass(fs.id, "enough free disk", ev)
		}
	}
	if b, err := os.ReadFile(g.e.Paths.Of("/proc/meminfo")); err == nil {
		var availKB, totalKB uint64
		for _, l := range strings.Split(string(b), "\n") {
			f := strings.Fields(l)
			if len(f) >= 2 {
				v, _ := strconv.ParseUint(f[1], 10, 64)
				switch f[0] {
				case "MemAvailable:":
					availKB = v
				case "MemTotal:":
					totalKB = v
				}
			}
		}
		min := threshold(evict["memory.available"], totalKB*1024)
		ev := fmt.Sprintf("%s available of %s; eviction below %s", human(availKB*1024), human(totalKB*1024), evict["memory.available"])
		if availKB*1024 < min {
			g.fail("res.memory", "memory.available is below the eviction threshold (MemoryPressure)", ev)
		} else {
			g.pass("res.memory", "enough memory", ev)
		}
	}
	if b, err := os.ReadFile(g.e.Paths.Of("/proc/sys/kernel/pid_max")); err == nil {
		max, _ := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
		entries, _ := os.ReadDir(g.e.Paths.Of("/proc"))
		var used uint64
		for _, e := range entries {
			if _, err := strconv.Atoi(e.Name()); err == nil {
				used++
			}
		}
		ev := fmt.Sprintf("%d of %d process IDs in use", used, max)
		if max > 0 && max-used < threshold(evict["pid.available"], max) {
			g.fail("res.pids", "pid.available is below the eviction threshold (PIDPressure)", ev)
		} else {
			g.pass("res.pids", "enough process IDs", ev)
		}
	}
}

// threshold turns "10%" (of total) or a quantity ("100Mi") into an amount.
func threshold(s string, total uint64) uint64 {
	if p, ok := strings.CutSuffix(s, "%"); ok {
		f, err := strconv.ParseFloat(p, 64)
		if err != nil {
			return 0
		}
		return uint64(float64(total) * f / 100)
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return 0
	}
	return uint64(q.Value())
}

func human(b uint64) string {
	const gi, mi = 1 << 30, 1 << 20
	if b >= gi {
		return fmt.Sprintf("%.1fGi", float64(b)/gi)
	}
	return fmt.Sprintf("%dMi", b/mi)
}
