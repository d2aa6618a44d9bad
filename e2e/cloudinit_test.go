//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kjoin.dev/kjoin/e2e/framework"
	"kjoin.dev/kjoin/e2e/lab"
)

// TestCloudInitFirstBoot boots a fresh systemd host with Debian's cloud-init, the NoCloud
// datasource seeded with examples/cloud-init/user-data as written (its three placeholders
// filled with this lab's join parameters), while the host cannot reach the API server: the
// join starts from cloud-init's runcmd through the unit, waits, and joins once the API
// answers. The Node is Ready, the token is gone, systemd will not run the unit again, and
// kjoin verify --wait passes for the node.
func TestCloudInitFirstBoot(t *testing.T) {
	c := framework.Get(t)
	const h = "w8"
	b, err := os.ReadFile("../examples/cloud-init/user-data")
	if err != nil {
		t.Fatal(err)
	}
	fill := strings.NewReplacer("REPLACE_WITH_TOKEN", lab.Token, "REPLACE_WITH_ENDPOINT", lab.Endpoint(), "REPLACE_WITH_CA_CERT_HASH", c.CAHash)
	seed := &lab.CloudInitSeed{UserData: fill.Replace(string(b)), MetaData: "instance-id: lab-" + h + "\nlocal-hostname: " + h + "\n"}
	api := c.Hosts["cp1"].IP // control-plane.lab in every host's /etc/hosts

	// Until the join is seen waiting for the API server, the host cannot reach it; then the
	// rule goes and the same join goes on.
	unblocked := make(chan string, 1)
	go func() {
		deadline := time.Now().Add(4 * time.Minute)
		for time.Now().Before(deadline) {
			time.Sleep(time.Second)
			if !c.HostUp(h) {
				continue
			}
			r := c.Exec(context.Background(), h, "journalctl", "-u", "kjoin-join", "--no-pager", "-o", "cat")
			if strings.Contains(r.Stdout, "waiting for cluster-info") {
				rm := c.Exec(context.Background(), h, append([]string{"iptables"}, lab.DropRule(api, "6443", "-D")...)...)
				unblocked <- r.Stdout + rm.Stderr
				return
			}
		}
		unblocked <- ""
	}()
	start := time.Now()
	c.HostWith(t, h, lab.HostSetup{CloudInit: seed, DropAtBoot: []string{net.JoinHostPort(api, "6443")}, BootTimeout: 5 * time.Minute})
	t.Logf("booted, joined from cloud-init, in %s", time.Since(start).Round(100*time.Millisecond))
	if waited := <-unblocked; waited == "" {
		t.Fatal("the first-boot join was never seen waiting for the unreachable API server: the fault was not proven")
	} else {
		t.Logf("the join waited while the API server was unreachable:\n%s", framework.Tail(waited, 5))
	}

	// cloud-init ran to its end, from the NoCloud seed, without errors.
	st := c.Run(t, h, "cloud-init", "status", "--long")
	if !strings.Contains(st.Stdout, "status: done") || !strings.Contains(st.Stdout, "DataSourceNoCloud") {
		t.Errorf("cloud-init status --long:\n%s%s", st.Stdout, st.Stderr)
	}
	// The unit joined once, through systemd, and printed kjoin's answer to its journal.
	show := c.MustRun(t, h, "systemctl", "show", "kjoin-join", "--property", "ActiveState,Result,ExecMainStatus")
	if !strings.Contains(show.Stdout, "ActiveState=active") || !strings.Contains(show.Stdout, "Result=success") {
		t.Errorf("kjoin-join.service after the first boot:\n%s", show.Stdout)
	}
	journal := c.MustRun(t, h, "journalctl", "-u", "kjoin-join", "--no-pager", "-o", "cat").Stdout
	var out struct {
		Kind    string `json:"kind"`
		Changed bool   `json:"changed"`
		Node    string `json:"node"`
	}
	// kjoin's answer is the JSON document on stdout (indented): from the line that opens it.
	if i := strings.Index(journal, "\n{\n"); i >= 0 {
		_ = json.NewDecoder(strings.NewReader(journal[i+1:])).Decode(&out)
	}
	if out.Kind != "JoinResult" || !out.Changed || out.Node != h {
		t.Errorf("no JoinResult for %s in the unit's journal (got %+v):\n%s", h, out, framework.Tail(journal, 20))
	}
	if strings.Contains(journal, strings.Split(lab.Token, ".")[1]) {
		t.Error("the token secret is in the unit's journal")
	}
	if _, err := os.Stat(c.HostPath(h, "/etc/kjoin/token")); err == nil {
		t.Error("the token is still on the node after the first-boot join")
	}
	// systemd itself will not run the unit again: its conditions fail on the joined node.
	c.MustRun(t, h, "systemctl", "restart", "kjoin-join")
	if cond := c.MustRun(t, h, "systemctl", "show", "kjoin-join", "--property", "ConditionResult").Stdout; !strings.Contains(cond, "ConditionResult=no") {
		t.Errorf("kjoin-join.service would run again on the joined node: %s", cond)
	}
	c.WaitNodeCondition(t, h, corev1.NodeReady, corev1.ConditionTrue, 2*time.Minute)
	if r := c.Run(t, "cp1", "kjoin", "verify", h, "--wait=3m"); r.Err != nil {
		t.Errorf("kjoin verify --wait after the first-boot join: %v", r.Error())
	}

	// The node map on the lab: -o wide shows the node's OS and kernel, -l selects by label.
	wide := c.MustRun(t, "cp1", "kjoin", "nodes", "-o", "wide", h)
	lines := strings.Split(strings.TrimSpace(wide.Stdout), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "OS-IMAGE") || !strings.HasPrefix(lines[1], h+" ") || !strings.Contains(lines[1], "Ready") {
		t.Errorf("kjoin nodes -o wide %s:\n%s", h, wide.Stdout)
	}
	uname := strings.TrimSpace(c.MustRun(t, h, "uname", "-r").Stdout)
	if !strings.Contains(lines[len(lines)-1], uname) {
		t.Errorf("kjoin nodes -o wide does not show %s's kernel %s:\n%s", h, uname, wide.Stdout)
	}
	sel := c.MustRun(t, "cp1", "kjoin", "nodes", "-l", "node-role.kubernetes.io/control-plane", "-o", "jsonpath={.items[*].name}")
	if names := strings.Fields(sel.Stdout); len(names) == 0 || strings.Contains(sel.Stdout, h) || !strings.Contains(sel.Stdout, "cp1") {
		t.Errorf("kjoin nodes -l node-role.kubernetes.io/control-plane: %q", sel.Stdout)
	}
	// Joined by: the Node kjoin's unit joined carries kjoin's label from its registration, and
	// the node map tells it from cp1, which kubeadm init made.
	node, err := c.Client.CoreV1().Nodes().Get(context.Background(), h, metav1.GetOptions{})
	if err != nil || node.Labels["kjoin.dev/joined-by"] != "kjoin" {
		t.Errorf("Node %s labels %v (%v): want kjoin.dev/joined-by=kjoin", h, node.GetLabels(), err)
	}
	by := c.MustRun(t, "cp1", "kjoin", "nodes", "cp1", h, "-o", "jsonpath={range .items[*]}{.name}={.joinedBy} {end}")
	if got, want := strings.TrimSpace(by.Stdout), "cp1=kubeadm "+h+"=kjoin"; got != want {
		t.Errorf("kjoin nodes joinedBy: %q, want %q", got, want)
	}
	if !strings.Contains(lines[0], "JOINED-BY") || !strings.Contains(lines[1], " kjoin ") {
		t.Errorf("kjoin nodes -o wide does not show who joined %s:\n%s", h, wide.Stdout)
	}
	// --sort-by .joinedBy: "kjoin" before "kubeadm", so the worker comes before cp1, the
	// reverse of the default order (control planes first).
	sorted := c.MustRun(t, "cp1", "kjoin", "nodes", h, "cp1", "--sort-by", ".joinedBy", "-o", "jsonpath={.items[*].name}")
	if got, want := strings.TrimSpace(sorted.Stdout), h+" cp1"; got != want {
		t.Errorf("kjoin nodes --sort-by .joinedBy: %q, want %q", got, want)
	}
	c.MustRun(t, h, "kjoin", "reset", "-f")
}
