//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"kjoin.dev/kjoin/e2e/framework"
	"kjoin.dev/kjoin/e2e/lab"
)

var recapRE = regexp.MustCompile(`(?m)^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)`)

// hexRunRE finds runs of hex digits: one of 64 not after "sha256:" (a CA pin) has a
// certificate key's shape.
var hexRunRE = regexp.MustCompile(`[0-9a-fA-F]+`)

type recap struct{ ok, changed, failed string }

// runPlaybook runs examples/ansible/site.yml against lab hosts and returns the recap per host.
func runPlaybook(t *testing.T, c *framework.Cluster, inventory string) map[string]recap {
	t.Helper()
	playbook, err := filepath.Abs("../examples/ansible/site.yml")
	if err != nil {
		t.Fatal(err)
	}
	// -vvv prints every task's arguments and environment: the secrets must not be among them.
	cmd := exec.Command("ansible-playbook", "-vvv", "-i", inventory, playbook)
	cmd.Env = append(os.Environ(), "ANSIBLE_NOCOLOR=1", "ANSIBLE_STDOUT_CALLBACK=default", "ANSIBLE_LOCAL_TEMP="+t.TempDir())
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("ansible-playbook (%s):\n%s", time.Since(start).Round(time.Millisecond), tail(string(out), 40))
	if err != nil {
		t.Fatalf("ansible-playbook: %v", err)
	}
	if strings.Contains(string(out), strings.Split(lab.Token, ".")[1]) {
		t.Error("the token secret appears in Ansible's output")
	}
	for _, ix := range hexRunRE.FindAllStringIndex(string(out), -1) {
		if ix[1]-ix[0] == 64 && !strings.HasSuffix(string(out[:ix[0]]), "sha256:") {
			t.Errorf("something shaped like a certificate key (64 hex digits) appears in Ansible's -vvv output: %s…", out[ix[0]:ix[0]+8])
		}
	}
	res := map[string]recap{}
	for _, m := range recapRE.FindAllStringSubmatch(string(out), -1) {
		res[m[1]] = recap{ok: m[2], changed: m[3], failed: m[5]}
		fmt.Printf("RECAP %s\n", m[0])
	}
	return res
}

// TestAnsiblePlaybook runs the example playbook with Debian's ansible-core against lab hosts:
// the first run joins w1 and cp2, the second changes nothing, and after kjoin reset on w1 a
// third run joins it again.
func TestAnsiblePlaybook(t *testing.T) {
	if _, err := exec.LookPath("ansible-playbook"); err != nil {
		t.Fatal("ansible-playbook is not installed (e2e/scripts/install-deps.sh installs ansible-core)")
	}
	c := framework.Get(t)
	c.Host(t, "w1")
	c.Host(t, "cp2")
	inv := filepath.Join(t.TempDir(), "inventory.ini")
	line := func(h string) string {
		return fmt.Sprintf("%s ansible_connection=local ansible_python_interpreter=%s", h, c.PythonPath(h))
	}
	content := fmt.Sprintf("[first_control_plane]\n%s\n\n[control_planes]\n%s kjoin_advertise_address=%s\n\n[workers]\n%s\n",
		line("cp1"), line("cp2"), c.Hosts["cp2"].IP, line("w1"))
	if err := os.WriteFile(inv, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}

	first := runPlaybook(t, c, inv)
	if first["w1"].changed == "0" || first["cp2"].changed == "0" || first["w1"].failed != "0" || first["cp2"].failed != "0" {
		t.Errorf("first run should join w1 and cp2 (changed): %+v", first)
	}
	c.WaitNodeCondition(t, "w1", corev1.NodeReady, corev1.ConditionTrue, time.Minute)
	assertEtcdVoters(t, c, 2)

	second := runPlaybook(t, c, inv)
	for _, h := range []string{"cp1", "w1", "cp2"} {
		if second[h].changed != "0" || second[h].failed != "0" {
			t.Errorf("second run: %s should be ok/unchanged: %+v", h, second[h])
		}
	}

	c.MustRun(t, "w1", "kjoin", "reset")
	third := runPlaybook(t, c, inv)
	if third["w1"].changed == "0" || third["cp2"].changed != "0" {
		t.Errorf("after reset on w1 only w1 should change: %+v", third)
	}
	c.WaitNodeCondition(t, "w1", corev1.NodeReady, corev1.ConditionTrue, time.Minute)

}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
