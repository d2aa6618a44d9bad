//go:build e2e

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDistPackage builds the release (make dist) and checks the .deb as a distribution would:
// its version follows the v0.x.y tag scheme, its control fields, lintian finds no error or
// warning (the static binary's override is in the package), and installed into a scratch
// root with dpkg it runs (kjoin version) and its man pages read (man -l).
func TestDistPackage(t *testing.T) {
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	run := func(dir, name string, args ...string) string {
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
	describe := strings.TrimSpace(run(repo, "git", "describe", "--tags", "--match", "v[0-9]*", "--always", "--dirty"))
	want := strings.TrimSpace(run(repo, "packaging/debversion.sh", describe))
	if regexp.MustCompile(`^v\d+\.\d+\.\d+`).MatchString(describe) && !strings.HasPrefix(want, strings.TrimPrefix(strings.SplitN(describe, "-", 2)[0], "v")) {
		t.Fatalf("debversion of %s is %s", describe, want)
	}
	run(repo, "make", "--no-print-directory", "dist")
	deb := filepath.Join(repo, "dist", "kjoin_"+want+"_amd64.deb")
	info := run(repo, "dpkg-deb", "-I", deb)
	for _, field := range []string{"Package: kjoin", "Version: " + want, "Architecture: amd64", "Recommends: kubelet, containerd | cri-o", "Section: admin"} {
		if !strings.Contains(info, field) {
			t.Errorf("control lacks %q:\n%s", field, info)
		}
	}
	contents := run(repo, "dpkg-deb", "-c", deb)
	for _, f := range []string{"./usr/bin/kjoin", "./usr/share/man/man1/kjoin-join.1.gz", "./usr/share/doc/kjoin/copyright", "./usr/share/doc/kjoin/changelog.gz",
		"./usr/lib/systemd/system/kubelet.service.d/10-kjoin.conf", "./usr/share/kjoin/kubelet.service", "./etc/kubernetes/manifests/"} {
		if !strings.Contains(contents, f) {
			t.Errorf("the package lacks %s", f)
		}
	}
	if _, err := exec.LookPath("lintian"); err != nil {
		t.Fatal("no lintian: e2e/scripts/install-deps.sh installs it")
	}
	lint, _ := exec.Command("lintian", "--tag-display-limit", "0", deb).CombinedOutput()
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
