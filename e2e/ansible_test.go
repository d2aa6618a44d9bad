//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kjoin.dev/kjoin/e2e/framework"
	"kjoin.dev/kjoin/e2e/lab"
)

var recapRE = regexp.MustCompile(`(?m)^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)`)

// hexRunRE finds runs of hex digits: one of 64 not after "sha256:" (a CA pin) has a
// certificate key's shape.
var hexRunRE = regexp.MustCompile(`[0-9a-fA-F]+`)

type recap struct{ ok, changed, failed string }

// runPlaybook runs examples/ansible/site.yml against lab hosts (with extra ansible-playbook
// arguments, such as --check) and returns the recap per host; wantFail expects the run to fail.
func runPlaybook(t *testing.T, c *framework.Cluster, inventory string, wantFail bool, extra ...string) (map[string]recap, string) {
	t.Helper()
	return runPlaybookFile(t, c, "site.yml", inventory, wantFail, extra...)
}

// runPlaybookFile is runPlaybook for another playbook of examples/ansible.
func runPlaybookFile(t *testing.T, c *framework.Cluster, name, inventory string, wantFail bool, extra ...string) (map[string]recap, string) {
	t.Helper()
	playbook, err := filepath.Abs("../examples/ansible/" + name)
	if err != nil {
		t.Fatal(err)
	}
	// -vvv prints every task's arguments and environment: the secrets must not be among them.
	cmd := exec.Command("ansible-playbook", append([]string{"-vvv", "-i", inventory, playbook}, extra...)...)
	cmd.Env = append(os.Environ(), "ANSIBLE_NOCOLOR=1", "ANSIBLE_STDOUT_CALLBACK=default", "ANSIBLE_LOCAL_TEMP="+t.TempDir())
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("ansible-playbook %v (%s):\n%s", extra, time.Since(start).Round(time.Millisecond), framework.Tail(string(out), 40))
	if (err != nil) != wantFail {
		t.Fatalf("ansible-playbook %v: %v (want failure: %v)", extra, err, wantFail)
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
	return res, string(out)
}

// clusterMarks are what a run may not change for joined hosts: the bootstrap tokens and the
// uploaded control-plane certificates (kube-system/kubeadm-certs, its resourceVersion).
func clusterMarks(t *testing.T, c *framework.Cluster) (tokens int, certs string) {
	t.Helper()
	ss, err := c.Client.CoreV1().Secrets("kube-system").List(context.Background(), metav1.ListOptions{FieldSelector: "type=bootstrap.kubernetes.io/token"})
	if err != nil {
		t.Fatal(err)
	}
	certs = "none"
	if s, err := c.Client.CoreV1().Secrets("kube-system").Get(context.Background(), "kubeadm-certs", metav1.GetOptions{}); err == nil {
		certs = s.ResourceVersion
	}
	return len(ss.Items), certs
}

// TestAnsiblePlaybook runs the example playbook with Debian's ansible-core (over SSH, become
// via su) against lab hosts, systemd hosts like any node: --check on fresh hosts reports would-change and changes nothing; the
// first run joins w1 and cp2; the second changes nothing and mints no token; after kjoin
// reset on w1 a third run joins it again without re-uploading certificates, and so does a run
// under --limit w1 (cp1, outside the limit, still makes the token); a run whose join fails
// leaves no secret behind.
func TestAnsiblePlaybook(t *testing.T) {
	if _, err := exec.LookPath("ansible-playbook"); err != nil {
		t.Fatal("ansible-playbook is not installed (e2e/scripts/install-deps.sh installs ansible-core)")
	}
	c := framework.Get(t)
	c.Host(t, "w1")
	c.Host(t, "cp2")
	dir := t.TempDir()
	line := func(h string) string {
		return fmt.Sprintf("%s ansible_become_method=su %s", h, c.AnsibleHost(h))
	}
	inventory := func(name, workers string) string {
		inv := filepath.Join(dir, name)
		content := fmt.Sprintf("[first_control_plane]\n%s\n\n[control_planes]\n%s kjoin_advertise_address=%s\n\n[workers]\n%s\n",
			line("cp1"), line("cp2"), c.Hosts["cp2"].IP, workers)
		if err := os.WriteFile(inv, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return inv
	}
	inv := inventory("inventory.ini", line("w1"))

	tokens, certs := clusterMarks(t, c)
	check, _ := runPlaybook(t, c, inv, false, "--check")
	if recapOf(t, check, "w1").changed == "0" || recapOf(t, check, "cp2").changed == "0" {
		t.Errorf("--check on fresh hosts should report would-change: %+v", check)
	}
	if tk, ce := clusterMarks(t, c); tk != tokens || ce != certs {
		t.Errorf("--check changed the cluster: tokens %d → %d, kubeadm-certs %s → %s", tokens, tk, certs, ce)
	}
	for _, h := range []string{"w1", "cp2"} {
		for _, f := range []string{"/etc/kubernetes/kubelet.conf", "/var/lib/kjoin/journal.json"} {
			if _, err := os.Stat(c.HostPath(h, f)); err == nil {
				t.Errorf("--check wrote %s on %s", f, h)
			}
		}
	}

	first, _ := runPlaybook(t, c, inv, false)
	if recapOf(t, first, "w1").changed == "0" || recapOf(t, first, "cp2").changed == "0" || recapOf(t, first, "w1").failed != "0" || recapOf(t, first, "cp2").failed != "0" {
		t.Errorf("first run should join w1 and cp2 (changed): %+v", first)
	}
	c.WaitNodeCondition(t, "w1", corev1.NodeReady, corev1.ConditionTrue, time.Minute)
	assertEtcdVoters(t, c, 2)

	tokens, certs = clusterMarks(t, c)
	second, _ := runPlaybook(t, c, inv, false)
	// cp1 only makes the token, by delegation from the hosts being joined: it is no play's host.
	if len(second) != 2 {
		t.Errorf("second run: want a recap for w1 and cp2 only: %+v", second)
	}
	for _, h := range []string{"w1", "cp2"} {
		if r, ok := second[h]; !ok || r.changed != "0" || r.failed != "0" {
			t.Errorf("second run: %s should be ok/unchanged: %+v", h, second[h])
		}
	}
	if tk, ce := clusterMarks(t, c); tk != tokens || ce != certs {
		t.Errorf("a run with every host joined minted a token or re-uploaded certificates: tokens %d → %d, kubeadm-certs %s → %s", tokens, tk, certs, ce)
	}

	c.MustRun(t, "w1", "kjoin", "reset")
	third, _ := runPlaybook(t, c, inv, false)
	if recapOf(t, third, "w1").changed == "0" || recapOf(t, third, "cp2").changed != "0" {
		t.Errorf("after reset on w1 only w1 should change: %+v", third)
	}
	if _, ce := clusterMarks(t, c); ce != certs {
		t.Errorf("joining only a worker re-uploaded the control-plane certificates (kubeadm-certs %s → %s)", certs, ce)
	}
	c.WaitNodeCondition(t, "w1", corev1.NodeReady, corev1.ConditionTrue, time.Minute)

	// --limit to one worker: only it is probed and joined; the token still comes from cp1,
	// which is outside the limit (delegation).
	c.MustRun(t, "w1", "kjoin", "reset", "-f") // removes the join journal
	limited, _ := runPlaybook(t, c, inv, false, "--limit", "w1")
	if len(limited) != 1 || recapOf(t, limited, "w1").changed == "0" || recapOf(t, limited, "w1").failed != "0" {
		t.Errorf("--limit w1 should join w1 and touch no other host: %+v", limited)
	}
	if _, err := os.Stat(c.HostPath("w1", "/var/lib/kjoin/journal.json")); err != nil {
		t.Errorf("--limit w1 reported a join, but w1 has no join journal: %v", err)
	}
	if _, ce := clusterMarks(t, c); ce != certs {
		t.Errorf("--limit to a worker re-uploaded the control-plane certificates (kubeadm-certs %s → %s)", certs, ce)
	}
	c.WaitNodeCondition(t, "w1", corev1.NodeReady, corev1.ConditionTrue, time.Minute)

	// A join that fails (a node name kjoin refuses): the run fails, the secrets are gone.
	c.Host(t, "w2")
	bad := inventory("inventory-bad.ini", line("w1")+"\n"+line("w2")+` kjoin_extra_args='["--node-name", "Not_A_Name"]'`)
	failed, log := runPlaybook(t, c, bad, true)
	if recapOf(t, failed, "w2").failed == "0" || recapOf(t, failed, "w1").failed != "0" {
		t.Errorf("the bad join should fail on w2 only: %+v", failed)
	}
	made := regexp.MustCompile(`"path": "(/tmp/kjoin-join-secrets-[^"]+)"`).FindStringSubmatch(log)
	if made == nil {
		t.Fatal("the failed run's log does not show the secrets directory the role made")
	}
	if r := c.Run(t, "w2", "test", "-e", made[1]); r.ExitCode == 0 {
		t.Errorf("the failed join left its secrets directory %s on w2", made[1])
	}
	if r := c.Run(t, "w2", "sh", "-c", "ls -d /tmp/kjoin-join-secrets-* 2>/dev/null"); strings.TrimSpace(r.Stdout) != "" {
		t.Errorf("a run left secrets directories behind:\n%s", r.Stdout)
	}
}

// recapOf is host's line of a play recap; a host without one fails the test.
func recapOf(t *testing.T, res map[string]recap, host string) recap {
	t.Helper()
	r, ok := res[host]
	if !ok {
		t.Errorf("the play recap has no line for %s: %+v", host, res)
	}
	return r
}
