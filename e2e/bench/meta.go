// Package bench describes a make bench run as it starts: the machine, the versions of every
// program measured, the release binary's sizes, the order seed and the command, recorded in
// the samples so the report states what ran rather than what is installed when it is written.
package bench

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// Meta is the run's description, keyed for the report ("machine", "kjoin", "kubeadm", ...,
// "binary linux/amd64", "seed", "command", "started").
type Meta map[string]string

// Describe reads the machine and the programs: kjoin is the measured binary, components the
// directory of the Kubernetes and etcd programs, repo the source tree (for the release build's
// sizes).
func Describe(kjoin, components, repo string) Meta {
	m := Meta{"machine": Machine()}
	var kv struct{ Version, Commit, GoVersion string }
	if out, err := exec.Command(kjoin, "version", "-o", "json").Output(); err == nil {
		_ = json.Unmarshal(out, &kv)
	}
	m["kjoin"] = fmt.Sprintf("%s (commit %.12s, %s)", kv.Version, kv.Commit, kv.GoVersion)
	c := func(n string) string { return filepath.Join(components, n) }
	m["kubeadm"] = first(c("kubeadm"), "version", "-o", "short")
	m["kubelet"] = first(c("kubelet"), "--version")
	m["kube-apiserver"] = first(c("kube-apiserver"), "--version")
	m["etcd"] = first(c("etcd"), "--version")
	m["containerd"] = first("containerd", "--version")
	for _, arch := range []string{"amd64", "arm64"} {
		m["binary linux/"+arch] = BinarySize(repo, arch)
	}
	return m
}

// Programs are Meta's version keys, in the report's order.
var Programs = []string{"kjoin", "kubeadm", "kubelet", "kube-apiserver", "etcd", "containerd"}

// Machine is the cores, memory and platform of this machine.
func Machine() string {
	mem := "?"
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		fmt.Sscanf(strings.TrimPrefix(strings.SplitN(string(b), "\n", 2)[0], "MemTotal:"), "%d", &kb)
		mem = fmt.Sprintf("%d GiB", kb/1048576)
	}
	return fmt.Sprintf("%d cores, %s, %s/%s", runtime.NumCPU(), mem, runtime.GOOS, runtime.GOARCH)
}

// BinarySize builds kjoin as make dist does (static, stripped) for linux/arch and says its size.
func BinarySize(repo, arch string) string {
	tmp, err := os.MkdirTemp("", "bench")
	if err != nil {
		return "unknown"
	}
	defer os.RemoveAll(tmp)
	p := filepath.Join(tmp, "kjoin")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", p, "./cmd/kjoin")
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "build failed: " + strings.TrimSpace(string(out))
	}
	st, err := os.Stat(p)
	if err != nil {
		return "unknown"
	}
	return fmt.Sprintf("%.1f MiB (%d bytes)", float64(st.Size())/(1<<20), st.Size())
}

func first(name string, args ...string) string {
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	return strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
}
