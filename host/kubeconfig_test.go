package host

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
)

const execKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://10.0.0.1:6443", insecure-skip-tls-verify: true}
users:
- name: u
  user:
    exec: {apiVersion: client.authentication.k8s.io/v1, command: /tmp/plugin, interactiveMode: Never}
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
`

// A kubeconfig with an exec plugin that other users may write is refused when it was found
// (KUBECONFIG, ~/.kube/config) and runs with a warning when named with --kubeconfig: kjoin
// runs as root, and the plugin would run as root too.
func TestExecPluginFromAWritableKubeconfig(t *testing.T) {
	root := t.TempDir()
	var out bytes.Buffer
	e := &Env{Paths: Paths{Root: root}, Out: &out, Clock: clock.RealClock{},
		NewClient: func(*rest.Config) (kubernetes.Interface, error) { return fake.NewClientset(), nil }}
	p := "/home/alice/.kube/config"
	if err := os.MkdirAll(filepath.Join(root, "/home/alice/.kube"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, p), []byte(execKubeconfig), 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(root, p), 0o666); err != nil {
		t.Fatal(err)
	}
	_, _, err := e.ClientFor(Kubeconfig{Paths: []string{p}, From: "KUBECONFIG"})
	if err == nil || !strings.Contains(err.Error(), `exec plugin "/tmp/plugin"`) || !strings.Contains(err.Error(), "writable by other users (mode 0666)") {
		t.Errorf("found through KUBECONFIG: %v", err)
	}
	if _, _, err := e.ClientFor(Kubeconfig{Paths: []string{p}, From: "--kubeconfig"}); err != nil || !strings.Contains(out.String(), "WARNING") {
		t.Errorf("named with --kubeconfig: %v, output %q", err, out.String())
	}
	if err := os.Chmod(filepath.Join(root, p), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.ClientFor(Kubeconfig{Paths: []string{p}, From: "~/.kube/config"}); err != nil {
		t.Errorf("a private kubeconfig: %v", err)
	}
	if err := os.Chmod(filepath.Join(root, "/home/alice/.kube"), 0o777); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.ClientFor(Kubeconfig{Paths: []string{p}, From: "~/.kube/config"}); err == nil || !strings.Contains(err.Error(), "its directory /home/alice/.kube") {
		t.Errorf("a writable directory: %v", err)
	}
}
