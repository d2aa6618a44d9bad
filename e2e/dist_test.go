//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"kjoin.dev/kjoin/e2e/framework"
	"kjoin.dev/kjoin/e2e/lab"
)

// distOnce builds the release once for the tests that need its package.
var distOnce struct {
	sync.Once
	repo, deb, describe, version string
	err                          error
}

// runIn returns a runner of machine commands that fails the test with their output.
func runIn(t *testing.T) func(dir, name string, args ...string) string {
	return func(dir, name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "MANPAGER=cat", "MANWIDTH=100")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
}

// buildDeb runs make dist (once per test binary) and returns the repository, the amd64
// .deb, the git description and the package version.
func buildDeb(t *testing.T) (repo, deb, describe, version string) {
	t.Helper()
	distOnce.Do(func() {
		d := &distOnce
		if d.repo, d.err = filepath.Abs(".."); d.err != nil {
			return
		}
		out := func(name string, args ...string) string {
			if d.err != nil {
				return ""
			}
			cmd := exec.Command(name, args...)
			cmd.Dir = d.repo
			b, err := cmd.CombinedOutput()
			if err != nil {
				d.err = fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, b)
			}
			return string(b)
		}
		d.describe = strings.TrimSpace(out("git", "describe", "--tags", "--match", "v[0-9]*", "--always", "--dirty"))
		d.version = strings.TrimSpace(out("packaging/debversion.sh", d.describe))
		out("make", "--no-print-directory", "dist", "DIST_ARCHES=amd64") // the lab installs amd64 only
		d.deb = filepath.Join(d.repo, "dist", "kjoin_"+d.version+"_amd64.deb")
	})
	if distOnce.err != nil {
		t.Fatal(distOnce.err)
	}
	return distOnce.repo, distOnce.deb, distOnce.describe, distOnce.version
}

// TestDistPackage builds the release (make dist) and checks the .deb as a distribution would:
// its version follows the v0.x.y tag scheme, its control fields, lintian finds no error or
// warning (the static binary's override is in the package), and installed into a scratch
// root with dpkg it runs (kjoin version) and its man pages read (man -l).
func TestDistPackage(t *testing.T) {
	repo, deb, describe, want := buildDeb(t)
	run := runIn(t)
	if regexp.MustCompile(`^v\d+\.\d+\.\d+`).MatchString(describe) && !strings.HasPrefix(want, strings.TrimPrefix(strings.SplitN(describe, "-", 2)[0], "v")) {
		t.Fatalf("debversion of %s is %s", describe, want)
	}
	info := run(repo, "dpkg-deb", "-I", deb)
	for _, field := range []string{"Package: kjoin", "Version: " + want, "Architecture: amd64", "Recommends: kubelet, containerd | cri-o", "Section: admin"} {
		if !strings.Contains(info, field) {
			t.Errorf("control lacks %q:\n%s", field, info)
		}
	}
	contents := run(repo, "dpkg-deb", "-c", deb)
	for _, f := range []string{"./usr/bin/kjoin", "./usr/share/man/man1/kjoin-join.1.gz", "./usr/share/doc/kjoin/copyright", "./usr/share/doc/kjoin/changelog.gz",
		"./usr/lib/systemd/system/kubelet.service.d/10-kjoin.conf", "./usr/share/kjoin/kubelet.service", "./usr/lib/systemd/system/kjoin-approver.service", "./etc/kubernetes/manifests/"} {
		if !strings.Contains(contents, f) {
			t.Errorf("the package lacks %s", f)
		}
	}
	if _, err := exec.LookPath("lintian"); err != nil {
		t.Fatal("no lintian: e2e/scripts/install-deps.sh installs it")
	}
	// --fail-on none: the tags are judged below, so a failure is lintian not checking the
	// package. --show-overrides proves it read it: the package's own override shows.
	lint, err := exec.Command("lintian", "--fail-on", "none", "--tag-display-limit", "0", "--show-overrides", deb).CombinedOutput()
	if err != nil {
		t.Fatalf("lintian did not check %s: %v\n%s", deb, err, lint)
	}
	if !strings.Contains(string(lint), "O: kjoin: statically-linked-binary") {
		t.Errorf("lintian's output does not show the package's own override, so it did not read the package:\n%s", lint)
	}
	for _, l := range strings.Split(string(lint), "\n") {
		if strings.HasPrefix(l, "E:") || strings.HasPrefix(l, "W:") {
			t.Errorf("lintian: %s", l)
		}
	}

	root := t.TempDir()
	for _, d := range []string{"var/lib/dpkg/info", "var/lib/dpkg/updates"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "var/lib/dpkg/status"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	run(repo, "dpkg", "--root", root, "--log", "/dev/null", "--force-script-chrootless", "-i", deb)
	if v := run(root, filepath.Join(root, "usr/bin/kjoin"), "version"); !strings.Contains(v, "kjoin "+describe) {
		t.Errorf("the installed kjoin says %q, want version %s", v, describe)
	}
	page := run(root, "man", "-l", filepath.Join(root, "usr/share/man/man1/kjoin-join.1.gz"))
	for _, want := range []string{"kjoin-join", "--discovery-token-ca-cert-hash", "EXAMPLE"} {
		if !strings.Contains(page, want) {
			t.Errorf("man kjoin-join lacks %q:\n%.600s", want, page)
		}
	}
	if st, err := os.Stat(filepath.Join(root, "etc/kubernetes/manifests")); err != nil || !st.IsDir() {
		t.Errorf("no static-pod directory after dpkg -i: %v", err)
	}
}

// installDeb installs kjoin's .deb (make dist) on host with dpkg -i and checks that its
// /usr/bin/kjoin is this build.
func installDeb(t *testing.T, c *framework.Cluster, h string) {
	t.Helper()
	_, deb, describe, _ := buildDeb(t)
	pkg, err := os.ReadFile(deb)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.HostPath(h, "/root/kjoin.deb"), pkg, 0o644); err != nil {
		t.Fatal(err)
	}
	c.MustRun(t, h, "dpkg", "-i", "/root/kjoin.deb")
	if v := c.MustRun(t, h, "/usr/bin/kjoin", "version").Stdout; !strings.Contains(v, "kjoin "+describe) {
		t.Fatalf("%s: the packaged kjoin says %q, want %s", h, v, describe)
	}
}

// TestPackageOnSystemdHosts installs kjoin's .deb for real (dpkg -i) on systemd hosts and
// joins with the packaged /usr/bin/kjoin. On w9, a kubelet binary without a unit: the README's
// step (copy /usr/share/kjoin/kubelet.service, daemon-reload) gives it one, the package's
// drop-in makes the kubelet read the join's files (its command line carries kubeadm-flags.env
// and config.yaml), the join enables the unit, and reset stops and disables it but leaves the
// unit the operator installed. On w8, prepared as kubeadm's install page says (the kubelet
// package's unit, enabled), reset leaves the unit enabled.
func TestPackageOnSystemdHosts(t *testing.T) {
	c := framework.Get(t)
	install := func(h string) { installDeb(t, c, h) }
	join := func(h string) {
		t.Helper()
		writeToken(t, c, h, lab.Token)
		r := c.Run(t, h, "/usr/bin/kjoin", "join", c.JoinEndpoint(), "--token-file", "/run/lab/token", "--discovery-token-ca-cert-hash", c.CAHash, "-o", "json")
		if r.Err != nil {
			t.Fatalf("%s: the packaged kjoin's join: %v", h, r.Error())
		}
		c.WaitNodeCondition(t, h, corev1.NodeReady, corev1.ConditionTrue, 2*time.Minute)
	}
	reset := func(h string) (stopped, disabled bool) {
		t.Helper()
		r := c.MustRun(t, h, "/usr/bin/kjoin", "reset", "-f", "-o", "json")
		var out struct{ KubeletStopped, KubeletDisabled bool }
		if err := json.Unmarshal([]byte(r.Stdout), &out); err != nil {
			t.Fatalf("%s: reset -o json: %v\n%s", h, err, r.Stdout)
		}
		return out.KubeletStopped, out.KubeletDisabled
	}
	unitState := func(h string) string {
		return strings.TrimSpace(c.Run(t, h, "systemctl", "is-enabled", "kubelet").Stdout)
	}

	const bare = "w9"
	c.HostWith(t, bare, lab.HostSetup{BareKubelet: true})
	if r := c.Run(t, bare, "systemctl", "cat", "kubelet"); r.ExitCode == 0 {
		t.Fatalf("%s should have a kubelet without a unit:\n%s", bare, r.Stdout)
	}
	install(bare)
	c.MustRun(t, bare, "cp", "/usr/share/kjoin/kubelet.service", "/etc/systemd/system/")
	c.MustRun(t, bare, "systemctl", "daemon-reload")
	cat := c.MustRun(t, bare, "systemctl", "cat", "kubelet").Stdout
	for _, want := range []string{"# /etc/systemd/system/kubelet.service", "# /usr/lib/systemd/system/kubelet.service.d/10-kjoin.conf"} {
		if !strings.Contains(cat, want) {
			t.Errorf("systemctl cat kubelet lacks %q:\n%s", want, cat)
		}
	}
	if s := unitState(bare); s != "disabled" {
		t.Fatalf("the copied unit is %q before the join, want disabled", s)
	}
	join(bare)
	if s := unitState(bare); s != "enabled" {
		t.Errorf("after the join the kubelet unit is %q, want enabled", s)
	}
	// The kubelet systemd started carries what the join wrote for it, through the drop-in.
	pid := strings.TrimSpace(c.MustRun(t, bare, "systemctl", "show", "kubelet", "--property", "MainPID", "--value").Stdout)
	cmdline, err := os.ReadFile(c.HostPath(bare, "/proc/"+pid+"/cmdline"))
	if err != nil {
		t.Fatal(err)
	}
	args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	flags, err := os.ReadFile(c.HostPath(bare, "/var/lib/kubelet/kubeadm-flags.env"))
	if err != nil {
		t.Fatal(err)
	}
	wantArgs := []string{"--config=/var/lib/kubelet/config.yaml", "--kubeconfig=/etc/kubernetes/kubelet.conf"}
	env := strings.Trim(strings.TrimPrefix(strings.TrimSpace(string(flags)), "KUBELET_KUBEADM_ARGS="), `"`)
	wantArgs = append(wantArgs, strings.Fields(env)...)
	for _, w := range wantArgs {
		if !slicesContains(args, w) {
			t.Errorf("the kubelet (pid %s) runs without %s: %q", pid, w, args)
		}
	}
	stopped, disabled := reset(bare)
	if !stopped || !disabled {
		t.Errorf("reset on %s: kubeletStopped %v, kubeletDisabled %v; want both", bare, stopped, disabled)
	}
	if s := unitState(bare); s != "disabled" {
		t.Errorf("after reset the unit the join enabled is %q, want disabled", s)
	}
	if r := c.Run(t, bare, "systemctl", "is-active", "kubelet"); r.ExitCode == 0 {
		t.Error("the kubelet still runs after reset")
	}
	if _, err := os.Stat(c.HostPath(bare, "/etc/systemd/system/kubelet.service")); err != nil {
		t.Errorf("reset removed the kubelet unit the operator installed: %v", err)
	}

	const prepared = "w8"
	c.Host(t, prepared)
	install(prepared)
	if s := unitState(prepared); s != "enabled" {
		t.Fatalf("%s's kubelet package unit is %q, want enabled (kubeadm's install page)", prepared, s)
	}
	join(prepared)
	if stopped, disabled := reset(prepared); !stopped || disabled {
		t.Errorf("reset on %s: kubeletStopped %v, kubeletDisabled %v; want stopped, not disabled", prepared, stopped, disabled)
	}
	if s := unitState(prepared); s != "enabled" {
		t.Errorf("reset disabled the kubelet unit it did not enable: %q", s)
	}
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
