package app

import (
	"bytes"
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
		if _, err := client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) (int, string, string) {
		out, errb := &bytes.Buffer{}, &bytes.Buffer{}
		deps.Out, deps.Err = out, errb
		return Run(ctx, deps, append([]string{"nodes", "--root", root}, args...)), out.String(), errb.String()
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
