package phases

import (
	"context"
	"errors"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"kjoin.dev/kjoin/cri"
	"kjoin.dev/kjoin/host"
)

// fakePods is a container runtime's pod sandboxes; it records whether the kubelet still ran
// when a pod was removed.
type fakePods struct {
	mu       sync.Mutex
	runner   *fakeRunner
	pods     []cri.Sandbox
	removed  []string
	endpoint string
	// whileKubeletRan names pods removed while the fake kubelet was active.
	whileKubeletRan []string
	dialErr         error
}

func (f *fakePods) dial(endpoint string) (cri.Sandboxes, error) {
	f.endpoint = endpoint
	if f.dialErr != nil {
		return nil, f.dialErr
	}
	return f, nil
}

func (f *fakePods) PodSandboxes(context.Context) ([]cri.Sandbox, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.pods), nil
}

func (f *fakePods) RemovePodSandbox(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.runner.mu.Lock()
	active := f.runner.active
	f.runner.mu.Unlock()
	for i, p := range f.pods {
		if p.ID == id {
			if active {
				f.whileKubeletRan = append(f.whileKubeletRan, p.Name)
			}
			f.removed = append(f.removed, p.Name)
			f.pods = slices.Delete(f.pods, i, i+1)
			return nil
		}
	}
	return nil
}

func (f *fakePods) Close() error { return nil }

func joinedWorkerWithPods(t *testing.T) (*testHost, *fakePods) {
	t.Helper()
	h := newTestHost(t)
	if _, err := Run(context.Background(), h.env, &State{Opts: h.options(t)}, Join, RunOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := &fakePods{runner: h.runner, pods: []cri.Sandbox{
		{ID: "0123456789abcdef0123", Name: "default/web-0"},
		{ID: "fedcba9876543210fedc", Name: "kube-system/kube-proxy-x1"},
	}}
	h.env.Sandboxes = pods.dial
	return h, pods
}

// Reset removes the pods the kubelet left in the runtime (kubeadm removes them too), only
// after the kubelet stopped, through the endpoint the kubelet was configured with.
func TestResetRemovesPodsOnceTheKubeletStopped(t *testing.T) {
	t.Parallel()
	h, pods := joinedWorkerWithPods(t)
	rep, err := Reset(context.Background(), h.env, ResetOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"default/web-0", "kube-system/kube-proxy-x1"}; !slices.Equal(rep.RemovedPods, want) || !slices.Equal(pods.removed, want) {
		t.Errorf("removed %v (report %v), want %v", pods.removed, rep.RemovedPods, want)
	}
	if len(pods.whileKubeletRan) > 0 {
		t.Errorf("pods removed while the kubelet still ran (it would start them again): %v", pods.whileKubeletRan)
	}
	if want := h.options(t).CRISocket; pods.endpoint != want {
		t.Errorf("runtime dialed at %q, the join configured %q", pods.endpoint, want)
	}
	// A second reset has no join left and leaves the runtime alone.
	pods.pods = []cri.Sandbox{{ID: "aaaa", Name: "default/not-kubelets"}}
	h.runner.active = false
	if rep, err := Reset(context.Background(), h.env, ResetOptions{}, nil); err != nil || len(rep.RemovedPods) > 0 || len(pods.pods) != 1 {
		t.Errorf("second reset: %+v %v; pods %v", rep, err, pods.pods)
	}
}

// A kubelet that did not stop would start the pods again: they are left, with a warning.
func TestResetLeavesPodsWhileTheKubeletRuns(t *testing.T) {
	t.Parallel()
	h, pods := joinedWorkerWithPods(t)
	h.env.Exec = stubbornKubelet{h.runner}
	rep, err := Reset(context.Background(), h.env, ResetOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.removed) > 0 || len(rep.RemovedPods) > 0 {
		t.Errorf("pods removed while the kubelet ran: %v", pods.removed)
	}
	if w := strings.Join(rep.Warnings, "\n"); !strings.Contains(w, "the kubelet still runs") || !strings.Contains(w, "could not stop the kubelet") {
		t.Errorf("warnings %q", w)
	}
}

// stubbornKubelet is a kubelet whose stop fails.
type stubbornKubelet struct{ *fakeRunner }

func (s stubbornKubelet) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	if strings.Join(append([]string{name}, args...), " ") == "systemctl stop kubelet" {
		return nil, errors.New("Job for kubelet.service canceled")
	}
	return s.fakeRunner.Run(ctx, name, args...)
}

// An unreachable runtime is a warning; the reset goes on.
func TestResetWithoutARuntimeWarnsAndGoesOn(t *testing.T) {
	t.Parallel()
	h, pods := joinedWorkerWithPods(t)
	pods.dialErr = errors.New("connection refused")
	rep, err := Reset(context.Background(), h.env, ResetOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if w := strings.Join(rep.Warnings, "\n"); !strings.Contains(w, "cannot reach the container runtime at unix:///var/run/containerd/containerd.sock") || !strings.Contains(w, "crictl rmp -fa") {
		t.Errorf("warnings %q", w)
	}
	if h.env.Exists(host.KubeletKubeconfig) || h.env.Exists(JournalPath) {
		t.Error("the reset stopped at the runtime: the join's files are still there")
	}
}

// A dry run runs the checks, changes nothing (files, kubelet, pods, Node) and lists each step
// it would take; the reset that follows does exactly those.
func TestResetDryRunChangesNothing(t *testing.T) {
	t.Parallel()
	h, pods := joinedWorkerWithPods(t)
	writeHost(t, h.env, host.AdminKubeconfig, "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://cp.example:6443'}\nusers:\n- name: u\n  user: {token: admin}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n", 0o600)
	var files []string
	for _, p := range append(slices.Clone(kubeadmFiles), JournalPath) {
		if h.env.Exists(p) {
			files = append(files, p)
		}
	}
	node, err := h.client.CoreV1().Nodes().Get(context.Background(), "w1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The API server's dry run: the request is checked, nothing is deleted.
	h.client.PrependReactor("delete", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return slices.Equal(a.(k8stesting.DeleteAction).GetDeleteOptions().DryRun, []string{metav1.DryRunAll}), nil, nil
	})
	h.runner.calls = nil
	h.client.ClearActions()
	rep, err := Reset(context.Background(), h.env, ResetOptions{DryRun: true, DeleteNode: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range h.runner.calls {
		if !strings.HasPrefix(c, "systemctl is-active") {
			t.Errorf("a dry run ran %q", c)
		}
	}
	for _, p := range files {
		if !h.env.Exists(p) {
			t.Errorf("a dry run removed %s", p)
		}
	}
	if len(pods.removed) > 0 || !h.runner.active {
		t.Errorf("a dry run removed pods %v or stopped the kubelet", pods.removed)
	}
	for _, a := range h.client.Actions() {
		if d, ok := a.(k8stesting.DeleteAction); ok {
			if opts := d.GetDeleteOptions(); !slices.Equal(opts.DryRun, []string{metav1.DryRunAll}) {
				t.Errorf("a dry run deleted %s without dryRun=All: %+v", d.GetName(), opts)
			}
		} else if a.GetVerb() != "get" {
			t.Errorf("a dry run made a %s call", a.GetVerb())
		}
	}
	if rep.Changed || !rep.DryRun || rep.NodeDeleted || rep.KubeletStopped || len(rep.RemovedFiles) > 0 || len(rep.RemovedPods) > 0 {
		t.Errorf("a dry run reports a change: %+v", rep)
	}
	var statuses []string
	for _, p := range rep.Phases {
		statuses = append(statuses, p.Name+"="+p.Status)
	}
	if want := "delete-node=would change remove-etcd-member=skipped remove-static-pods=unchanged stop-approver=unchanged stop-kubelet=would change remove-containers=would change mark-node=skipped remove-files=would change"; strings.Join(statuses, " ") != want {
		t.Errorf("phases %s\nwant   %s", strings.Join(statuses, " "), want)
	}
	// The kubelet's client certificate is named by the time it was issued.
	plan := regexp.MustCompile(`kubelet-client-[0-9-]+\.pem`).ReplaceAllString(strings.Join(rep.PlannedActions, "\n"), "kubelet-client-TIME.pem")
	golden(t, "reset-dry-run.txt", []byte(plan+"\n"))
	if !strings.Contains(h.out.String(), "[remove-files] would remove /etc/kubernetes/kubelet.conf") {
		t.Errorf("the dry run's log does not say what it would do:\n%s", h.out)
	}

	if n, err := h.client.CoreV1().Nodes().Get(context.Background(), "w1", metav1.GetOptions{}); err != nil || n.UID != node.UID || !ready(n) {
		t.Errorf("the dry run changed Node w1: %v", err)
	}

	// The reset that follows does what the dry run listed.
	rep2, err := Reset(context.Background(), h.env, ResetOptions{DeleteNode: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	removed := append(slices.Clone(rep2.RemovedFiles), JournalPath)
	var planned []string
	for _, a := range rep.PlannedActions {
		if p, ok := strings.CutPrefix(a, "remove "); ok && strings.HasPrefix(p, "/") {
			planned = append(planned, p)
		}
	}
	planned = append(planned, JournalPath)
	if !slices.Equal(removed, planned) || !rep2.NodeDeleted || !rep2.KubeletStopped || len(rep2.RemovedPods) != 2 {
		t.Errorf("the reset did not do what its dry run planned:\nremoved %v\nplanned %v\n%+v", removed, planned, rep2)
	}
	if _, err := h.client.CoreV1().Nodes().Get(context.Background(), "w1", metav1.GetOptions{}); err == nil {
		t.Errorf("Node %s (uid %s) survived the reset", node.Name, node.UID)
	}
}
