//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"kjoin.dev/kjoin/e2e/framework"
	"kjoin.dev/kjoin/e2e/lab"
)

// unit is the part of a systemd unit the test plays: its conditions, environment file and
// commands.
type unit struct {
	conditions           []string // ConditionPathExists values ("!path": must not exist)
	envFile              string
	execStart, startPost []string
}

func parseUnit(t *testing.T, text string) unit {
	t.Helper()
	var u unit
	for _, l := range strings.Split(text, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(l), "=")
		if !ok || strings.HasPrefix(k, "#") {
			continue
		}
		switch k {
		case "ConditionPathExists":
			u.conditions = append(u.conditions, v)
		case "EnvironmentFile":
			u.envFile = strings.TrimPrefix(v, "-")
		case "ExecStart":
			u.execStart = append(u.execStart, v)
		case "ExecStartPost":
			u.startPost = append(u.startPost, v)
		}
	}
	if len(u.execStart) != 1 || u.envFile == "" {
		t.Fatalf("the unit has no single ExecStart with an EnvironmentFile: %+v", u)
	}
	return u
}

// runs reports whether systemd would start the unit on host (its path conditions).
func (u unit) runs(c *framework.Cluster, host string) bool {
	for _, cond := range u.conditions {
		p, negate := strings.CutPrefix(cond, "!")
		_, err := os.Stat(c.HostPath(host, p))
		if (err == nil) == negate {
			return false
		}
	}
	return true
}

var envRef = regexp.MustCompile(`\$\{([A-Z_]+)\}`)

// TestCloudInitFirstBoot plays examples/cloud-init/user-data on a fresh lab host as cloud-init
// and systemd would: its files are written (the placeholders filled with this lab's join
// parameters), the oneshot unit's ExecStart runs with its EnvironmentFile, then ExecStartPost.
// The node joins, the token is gone, the unit would not run again, and kjoin verify --wait
// passes for the node.
func TestCloudInitFirstBoot(t *testing.T) {
	c := framework.Get(t)
	const h = "w8"
	c.Host(t, h)
	b, err := os.ReadFile("../examples/cloud-init/user-data")
	if err != nil {
		t.Fatal(err)
	}
	var ud struct {
		WriteFiles []struct {
			Path, Permissions, Content string
		} `json:"write_files"`
	}
	if err := yaml.Unmarshal(b, &ud); err != nil {
		t.Fatalf("user-data is not YAML: %v", err)
	}
	fill := strings.NewReplacer("REPLACE_WITH_TOKEN", lab.Token, "REPLACE_WITH_ENDPOINT", lab.Endpoint(), "REPLACE_WITH_CA_CERT_HASH", c.CAHash)
	var unitText string
	for _, f := range ud.WriteFiles {
		mode, err := strconv.ParseUint(f.Permissions, 8, 32)
		if err != nil {
			t.Fatalf("%s: permissions %q", f.Path, f.Permissions)
		}
		p := c.HostPath(h, f.Path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(fill.Replace(f.Content)), os.FileMode(mode)); err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(f.Path, ".service") {
			unitText = f.Content
		}
	}
	u := parseUnit(t, unitText)
	if !u.runs(c, h) {
		t.Fatal("the unit would not start on a fresh host")
	}
	env := map[string]string{}
	envB, err := os.ReadFile(c.HostPath(h, u.envFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(envB), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			env[k] = v
		}
	}
	expand := func(cmd string) string {
		// The lab's kjoin is first on every host's PATH, not in /usr/bin (the package's place).
		cmd = strings.Replace(cmd, "/usr/bin/kjoin ", "kjoin ", 1)
		return envRef.ReplaceAllStringFunc(cmd, func(m string) string { return env[envRef.FindStringSubmatch(m)[1]] })
	}
	r := c.Run(t, h, "sh", "-c", expand(u.execStart[0]))
	if r.Err != nil {
		t.Fatalf("the unit's ExecStart failed: %v", r.Error())
	}
	var out struct {
		Kind    string `json:"kind"`
		Changed bool   `json:"changed"`
		Node    string `json:"node"`
	}
	if err := json.Unmarshal([]byte(r.Stdout), &out); err != nil || out.Kind != "JoinResult" || !out.Changed || out.Node != h {
		t.Fatalf("the unit's join answered %+v (%v):\n%s", out, err, r.Stdout)
	}
	for _, post := range u.startPost {
		c.MustRun(t, h, "sh", "-c", expand(post))
	}
	if _, err := os.Stat(c.HostPath(h, "/etc/kjoin/token")); err == nil {
		t.Error("the token is still on the node after the first-boot join")
	}
	if u.runs(c, h) {
		t.Error("the unit would run again on the joined node")
	}
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
