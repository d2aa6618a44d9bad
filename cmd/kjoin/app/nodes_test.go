package app

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	k8stesting "k8s.io/client-go/testing"
)

// kjoin nodes takes names and a label selector; an unknown name or a bad selector is a usage
// error (exit 2) naming it; the table keeps its columns whatever the names' lengths.
func TestNodesSelection(t *testing.T) {
	deps, client, root := adminHost(t)
	ctx := context.Background()
	for _, n := range []*corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "cp1", Labels: map[string]string{"node-role.kubernetes.io/control-plane": ""}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "a-worker-with-a-very-long-name", Labels: map[string]string{"zone": "b"}}},
	} {
		createNode(t, client, n)
	}
	run := func(args ...string) (int, string, string) {
		return runArgs(ctx, deps, append([]string{"nodes", "--root", root}, args...)...)
	}
	code, out, errs := run("-l", "zone=b")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[1], "a-worker-with-a-very-long-name  ") {
		t.Fatalf("-l zone=b: exit %d\n%s%s", code, out, errs)
	}
	if strings.Index(lines[0], "ROLES") != strings.Index(lines[1], "  worker")+2 {
		t.Errorf("columns shifted:\n%s", out)
	}
	if code, out, _ := run("cp1"); code != 0 || !strings.Contains(out, "cp1") || strings.Contains(out, "a-worker") {
		t.Errorf("kjoin nodes cp1: exit %d\n%s", code, out)
	}
	if code, _, errs := run("w9"); code != 2 || !strings.Contains(errs, "no node w9") {
		t.Errorf("unknown node: exit %d %s", code, errs)
	}
	if code, _, errs := run("-l", "zone in (a"); code != 2 || !strings.Contains(errs, "--selector") {
		t.Errorf("bad selector: exit %d %s", code, errs)
	}
}

// --sort-by orders the table and the JSON items by a JSONPath over the items (as kubectl's);
// a bad expression is reported with a bad selector at once, before the cluster is asked; the
// flag's values complete.
func TestNodesSortBy(t *testing.T) {
	deps, client, root := adminHost(t)
	ctx := context.Background()
	base := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for i, name := range []string{"b", "c", "a"} {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(base.Add(time.Duration(i) * time.Hour))},
			Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KubeletVersion: []string{"v1.37.2", "v1.35.4", "v1.36.3"}[i]}}}
		createNode(t, client, n)
	}
	run := func(args ...string) (int, string, string) {
		return runArgs(ctx, deps, append([]string{"nodes", "--root", root}, args...)...)
	}
	for expr, want := range map[string]string{".joinedAt": "b c a", "{.kubeletVersion}": "c a b", "": "a b c"} {
		args := []string{"-o", "jsonpath={.items[*].name}"}
		if expr != "" {
			args = append(args, "--sort-by", expr)
		}
		if code, out, errs := run(args...); code != 0 || out != want {
			t.Errorf("--sort-by %q: exit %d %q (want %q) %s", expr, code, out, want, errs)
		}
	}
	code, out, _ := run("--sort-by", ".kubeletVersion")
	if lines := strings.Split(strings.TrimSpace(out), "\n"); code != 0 || len(lines) != 4 || !strings.HasPrefix(lines[1], "c ") || !strings.HasPrefix(lines[3], "b ") {
		t.Errorf("table sorted by kubeletVersion: exit %d\n%s", code, out)
	}
	client.ClearActions()
	code, _, errs := run("--sort-by", "{.name", "-l", "zone in (a")
	if code != 2 || !strings.Contains(errs, "--sort-by") || !strings.Contains(errs, "--selector") {
		t.Errorf("bad --sort-by and -l: exit %d, want 2 naming both:\n%s", code, errs)
	}
	if acts := client.Actions(); len(acts) != 0 {
		t.Errorf("the cluster was asked before the flags were checked: %v", acts)
	}
	_, out, _ = runArgs(ctx, deps, "__complete", "nodes", "--sort-by", "")
	if !strings.Contains(out, ".joinedAt") || !strings.Contains(out, ".leaseAge.seconds") {
		t.Errorf("--sort-by completions:\n%s", out)
	}
	_, out, _ = runArgs(ctx, deps, "__complete", "token", "list", "--sort-by", "")
	if !strings.Contains(out, ".expires") {
		t.Errorf("token list --sort-by completions:\n%s", out)
	}
}

func runArgs(ctx context.Context, deps *Deps, args ...string) (int, string, string) {
	out, errb := &bytes.Buffer{}, &bytes.Buffer{}
	deps.Out, deps.Err = out, errb
	return Run(ctx, deps, args), out.String(), errb.String()
}

func createNode(t *testing.T, client kubernetes.Interface, n *corev1.Node) {
	t.Helper()
	if _, err := client.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// A kubelet writes its own Node's status: terminal escapes there reach the table escaped, in
// every column, so no node can hide a row or rewrite the operator's screen.
func TestNodesTableEscapesNodeData(t *testing.T) {
	deps, client, root := adminHost(t)
	createNode(t, client, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "w1"},
		Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.37.2\x1b[2K\x1b[1A\rcp1", OSImage: "Debian\x1b]0;owned\x07",
			ContainerRuntimeVersion: "containerd://2.4\nw9  worker  Ready"}}})
	code, out, errs := runArgs(context.Background(), deps, "nodes", "--root", root, "-o", "wide")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if strings.ContainsAny(out, "\x1b\r\x07") || len(strings.Split(strings.TrimSpace(out), "\n")) != 2 {
		t.Errorf("raw control characters or an extra row in the table:\n%q", out)
	}
	if !strings.Contains(out, `v1.37.2\x1b[2K\x1b[1A\rcp1`) {
		t.Errorf("the version is not shown escaped:\n%s", out)
	}
}

// --sort-by with a path that matches nothing exits 2 naming it and the fields, before the
// cluster is asked (kubectl refuses such a path too).
func TestSortByPathThatMatchesNothing(t *testing.T) {
	deps, client, root := adminHost(t)
	client.ClearActions()
	code, _, errs := runArgs(context.Background(), deps, "nodes", "--root", root, "--sort-by", ".metadata.name")
	if code != 2 || !strings.Contains(errs, `".metadata.name" matches nothing`) || !strings.Contains(errs, ".joinedAt") {
		t.Errorf("exit %d:\n%s", code, errs)
	}
	if acts := client.Actions(); len(acts) != 0 {
		t.Errorf("the cluster was asked: %v", acts)
	}
	if code, _, errs := runArgs(context.Background(), deps, "token", "list", "--root", root, "--sort-by", ".nmae"); code != 2 || !strings.Contains(errs, ".expires") {
		t.Errorf("token list: exit %d:\n%s", code, errs)
	}
}

// An expired token is marked so in text and JSON (the API server no longer accepts it).
func TestTokenListMarksExpiredTokens(t *testing.T) {
	deps, client, root := adminHost(t)
	ctx := context.Background()
	for id, exp := range map[string]time.Time{"aaaaaa": time.Now().Add(-time.Hour), "bbbbbb": time.Now().Add(time.Hour)} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bootstrap-token-" + id, Namespace: "kube-system"}, Type: "bootstrap.kubernetes.io/token",
			StringData: nil, Data: map[string][]byte{"token-id": []byte(id), "token-secret": []byte("0123456789abcdef"), "expiration": []byte(exp.UTC().Format(time.RFC3339)),
				"usage-bootstrap-authentication": []byte("true"), "usage-bootstrap-signing": []byte("true")}}
		if _, err := client.CoreV1().Secrets("kube-system").Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	code, out, errs := runArgs(ctx, deps, "token", "list", "--root", root)
	if code != 0 || strings.Count(out, "(expired)") != 1 || !strings.Contains(out, "aaaaaa.") {
		t.Fatalf("exit %d:\n%s%s", code, out, errs)
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "(expired)") && !strings.HasPrefix(l, "aaaaaa.") {
			t.Errorf("the wrong token is marked expired: %s", l)
		}
	}
	_, out, _ = runArgs(ctx, deps, "token", "list", "--root", root, "-o", "json")
	if strings.Count(out, `"expired": true`) != 1 {
		t.Errorf("JSON:\n%s", out)
	}
}

// A failed list names the call once ("list nodes: list nodes:" was doubled).
func TestNodesListErrorNamedOnce(t *testing.T) {
	deps, client, root := adminHost(t)
	client.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("etcdserver: request timed out")
	})
	code, _, errs := runArgs(context.Background(), deps, "nodes", "--root", root)
	if code == 0 || strings.Count(errs, "list nodes") != 1 || !strings.Contains(errs, "request timed out") {
		t.Errorf("exit %d:\n%s", code, errs)
	}
}
