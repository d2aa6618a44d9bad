package phases

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	k8stesting "k8s.io/client-go/testing"

	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/operr"
	"kjoin.dev/kjoin/pki"
)

const adminConf = "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {server: 'https://cp.example:6443'}\nusers:\n- name: u\n  user: {token: admin}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n"

// podOn is a pod bound to node, owned by kind (empty: no controller).
func podOn(name, node, kind string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	if kind != "" {
		yes := true
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: name + "-owner", Controller: &yes}}
	}
	return p
}

// joinedForLeave is a worker w1 joined in a fake cluster that also runs pods: web-1 (a
// ReplicaSet's) and agent-1 (a DaemonSet's) on w1, other-1 on w2. Evictions delete the pod.
func joinedForLeave(t *testing.T, extra ...runtime.Object) *testHost {
	t.Helper()
	objs := append([]runtime.Object{podOn("web-1", "w1", "ReplicaSet"), podOn("agent-1", "w1", "DaemonSet"), podOn("other-1", "w2", "ReplicaSet"),
		&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Name: "agent-1-owner", Namespace: "default"}}}, extra...)
	h := newTestHost(t, objs...)
	asAPIServer(h)
	if _, err := Run(context.Background(), h.env, &State{Opts: h.options(t)}, Join, RunOptions{}); err != nil {
		t.Fatal(err)
	}
	return h
}

// asAPIServer makes the fake cluster answer as an API server does where leave depends on it:
// it offers the eviction subresource, honours server-side dry runs and field selectors on
// pods, and an eviction deletes its pod.
func asAPIServer(h *testHost) {
	// The API server offers the eviction subresource (policy/v1), as every supported one does.
	h.client.Discovery().(*fakediscovery.FakeDiscovery).Resources = []*metav1.APIResourceList{{GroupVersion: "v1",
		APIResources: []metav1.APIResource{{Name: "pods"}, {Name: "pods/eviction", Kind: "Eviction", Group: "policy", Version: "v1"}}}}
	// A server-side dry-run delete checks and changes nothing (the fake tracker would delete).
	h.client.PrependReactor("delete", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		d, ok := a.(k8stesting.DeleteActionImpl)
		if !ok || len(d.DeleteOptions.DryRun) == 0 {
			return false, nil, nil
		}
		_, err := h.client.Tracker().Get(d.GetResource(), d.GetNamespace(), d.Name)
		return true, nil, err
	})
	// The API server filters pods by spec.nodeName (the fake tracker ignores field selectors).
	h.client.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		fs := a.(k8stesting.ListActionImpl).GetListRestrictions().Fields
		if fs == nil || fs.Empty() {
			return false, nil, nil
		}
		obj, err := h.client.Tracker().List(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, a.GetNamespace())
		if err != nil {
			return true, nil, err
		}
		list := obj.(*corev1.PodList)
		var keep []corev1.Pod
		for _, p := range list.Items {
			if fs.Matches(fields.Set{"spec.nodeName": p.Spec.NodeName}) {
				keep = append(keep, p)
			}
		}
		list.Items = keep
		return true, list, nil
	})
	h.client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "eviction" {
			return false, nil, nil
		}
		name := a.(k8stesting.CreateAction).GetObject().(metav1.Object).GetName()
		return true, nil, h.client.Tracker().Delete(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, a.GetNamespace(), name)
	})
}

func leaveOpts() LeaveOptions {
	return LeaveOptions{IgnoreDaemonSets: true, GracePeriod: -1, DrainTimeout: 5 * time.Second, EvictRetry: 20 * time.Millisecond}
}

// With admin credentials a worker leaves: cordoned, its ReplicaSet pod evicted (not the
// DaemonSet's, not another node's), then its Node, Lease and CSR deleted after the kubelet
// stopped, and its files removed. A second run changes nothing.
func TestLeaveDrainsAndDeletesTheNode(t *testing.T) {
	t.Parallel()
	h := joinedForLeave(t)
	writeHost(t, h.env, "/root/admin.conf", adminConf, 0o600)
	o := leaveOpts()
	o.Kubeconfig = "/root/admin.conf"
	csrs, _ := h.client.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{})
	if len(csrs.Items) != 1 {
		t.Fatalf("the join made %d CSRs", len(csrs.Items))
	}
	csrName := csrs.Items[0].Name
	h.client.ClearActions()
	rep, err := Leave(context.Background(), h.env, ResetOptions{}, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	l := rep.Leave
	if !l.Cordoned || !slices.Equal(l.EvictedPods, []string{"default/web-1"}) || !rep.NodeDeleted || !l.LeaseDeleted ||
		!slices.Equal(l.DeletedCSRs, []string{csrName}) || len(l.Left) != 0 || l.Credentials != "admin (/root/admin.conf)" {
		t.Errorf("leave report %+v %+v", rep, l)
	}
	ctx := context.Background()
	if _, err := h.client.CoreV1().Pods("default").Get(ctx, "agent-1", metav1.GetOptions{}); err != nil {
		t.Errorf("the DaemonSet's pod was evicted: %v", err)
	}
	if _, err := h.client.CoreV1().Pods("default").Get(ctx, "other-1", metav1.GetOptions{}); err != nil {
		t.Errorf("another node's pod was evicted: %v", err)
	}
	for what, err := range map[string]error{
		"Node":  get(h.client.CoreV1().Nodes().Get(ctx, "w1", metav1.GetOptions{})),
		"Lease": get(h.client.CoordinationV1().Leases("kube-node-lease").Get(ctx, "w1", metav1.GetOptions{})),
		"CSR":   get(h.client.CertificatesV1().CertificateSigningRequests().Get(ctx, csrName, metav1.GetOptions{})),
	} {
		if !apierrors.IsNotFound(err) {
			t.Errorf("the %s survived leave: %v", what, err)
		}
	}
	// Order: cordon (a patch of the Node) before any eviction; the Node deleted after the
	// kubelet stopped (its last systemctl call).
	var order []string
	for _, a := range h.client.Actions() {
		switch {
		case a.GetVerb() == "patch" && a.GetResource().Resource == "nodes":
			order = append(order, "cordon")
		case a.GetSubresource() == "eviction":
			order = append(order, "evict")
		case a.GetVerb() == "delete" && a.GetResource().Resource == "nodes":
			order = append(order, "delete-node")
		}
	}
	if !slices.Equal(order, []string{"cordon", "evict", "delete-node"}) {
		t.Errorf("cluster calls in order %v", order)
	}
	if stop := slices.Index(h.runner.calls, "systemctl stop kubelet"); stop < 0 {
		t.Errorf("the kubelet was not stopped: %q", h.runner.calls)
	}
	if _, err := h.env.ReadFile(host.KubeletKubeconfig); err == nil {
		t.Error("kubelet.conf survived leave")
	}
	h.runner.active = false
	rep, err = Leave(context.Background(), h.env, ResetOptions{}, o, nil)
	if err != nil || rep.Changed {
		t.Errorf("second leave: changed %v, %v: %+v", rep.Changed, err, rep.Phases)
	}
}

func get[T any](_ T, err error) error { return err }

// The dry run runs the checks and lists every step, changing nothing.
func TestLeaveDryRunChangesNothing(t *testing.T) {
	t.Parallel()
	h := joinedForLeave(t)
	writeHost(t, h.env, host.AdminKubeconfig, adminConf, 0o600)
	rep, err := Leave(context.Background(), h.env, ResetOptions{DryRun: true}, leaveOpts(), nil)
	if err != nil {
		t.Fatal(err)
	}
	plan := strings.Join(rep.PlannedActions, "\n")
	for _, want := range []string{`cordon Node "w1"`, "evict pod default/web-1", `delete Node "w1"`, "delete Lease kube-node-lease/w1", "delete CSR "} {
		if !strings.Contains(plan, want) {
			t.Errorf("plan lacks %q:\n%s", want, plan)
		}
	}
	if strings.Contains(plan, "agent-1") {
		t.Errorf("plan evicts the DaemonSet's pod:\n%s", plan)
	}
	n, err := h.client.CoreV1().Nodes().Get(context.Background(), "w1", metav1.GetOptions{})
	if err != nil || n.Spec.Unschedulable {
		t.Errorf("the dry run touched the Node: %v unschedulable=%v", err, n.Spec.Unschedulable)
	}
	if _, err := h.client.CoreV1().Pods("default").Get(context.Background(), "web-1", metav1.GetOptions{}); err != nil {
		t.Errorf("the dry run evicted web-1: %v", err)
	}
	if _, err := h.env.ReadFile(host.KubeletKubeconfig); err != nil {
		t.Errorf("the dry run removed kubelet.conf: %v", err)
	}
}

// A pod no controller manages stops the drain before anything is evicted, naming the
// option, unless --drain-force.
func TestLeaveRefusesToLoseAnUnmanagedPod(t *testing.T) {
	t.Parallel()
	h := joinedForLeave(t, podOn("lonely", "w1", ""))
	writeHost(t, h.env, host.AdminKubeconfig, adminConf, 0o600)
	_, err := Leave(context.Background(), h.env, ResetOptions{}, leaveOpts(), nil)
	if operr.CodeOf(err) != operr.Preflight || !strings.Contains(err.Error(), "lonely") {
		t.Fatalf("err %v", err)
	}
	if _, err := h.client.CoreV1().Pods("default").Get(context.Background(), "web-1", metav1.GetOptions{}); err != nil {
		t.Errorf("web-1 was evicted before the refusal: %v", err)
	}
	if _, err := h.env.ReadFile(host.KubeletKubeconfig); err != nil {
		t.Error("the refused leave went on to remove the node's files")
	}
	o := leaveOpts()
	o.Force = true
	rep, err := Leave(context.Background(), h.env, ResetOptions{}, o, nil)
	if err != nil || !slices.Contains(rep.Leave.EvictedPods, "default/lonely") {
		t.Errorf("with --drain-force: %v %+v", err, rep.Leave)
	}
}

// An eviction a PodDisruptionBudget refuses (429) is retried until the drain timeout, then
// reported with the budget named; the node's files stay, and a later run continues.
func TestLeaveDrainBlockedByABudget(t *testing.T) {
	t.Parallel()
	h := joinedForLeave(t)
	writeHost(t, h.env, host.AdminKubeconfig, adminConf, 0o600)
	blocked, refused := true, 0
	h.client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "eviction" && (blocked || refused < 2) {
			refused++
			return true, nil, apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 1)
		}
		return false, nil, nil
	})
	o := leaveOpts()
	o.DrainTimeout = 300 * time.Millisecond
	_, err := Leave(context.Background(), h.env, ResetOptions{}, o, nil)
	if operr.CodeOf(err) != operr.Timeout || !strings.Contains(err.Error(), "last refusal: error when evicting pods/\"web-1\"") || !strings.Contains(err.Error(), "disruption budget") {
		t.Fatalf("err %v", err)
	}
	if _, err := h.env.ReadFile(host.KubeletKubeconfig); err != nil {
		t.Error("a drain that did not finish went on to remove the node's files")
	}
	// The budget allows it after two more refusals: each refusal the drain retried is counted.
	blocked, refused = false, 0
	rep, err := Leave(context.Background(), h.env, ResetOptions{}, leaveOpts(), nil)
	if err != nil || !rep.NodeDeleted || !slices.Equal(rep.Leave.EvictedPods, []string{"default/web-1"}) || rep.Leave.EvictionRefusals != 2 {
		t.Errorf("the run after the budget allowed it: %v %+v (want 2 eviction refusals)", err, rep.Leave)
	}
}

// With only the node's own credentials, a drain that is forbidden fails naming the
// credentials; skipping it, what the node may not delete is reported with the command that
// does, and the node is still cleaned up.
func TestLeaveWithTheNodesOwnCredentials(t *testing.T) {
	t.Parallel()
	h := joinedForLeave(t)
	forbid := func(verb, resource string) {
		h.client.PrependReactor(verb, resource, func(a k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: resource}, "", nil)
		})
	}
	forbid("list", "pods")
	_, err := Leave(context.Background(), h.env, ResetOptions{}, leaveOpts(), nil)
	if operr.CodeOf(err) != operr.Auth || !strings.Contains(err.Error(), "node (/etc/kubernetes/kubelet.conf) credentials may not") {
		t.Fatalf("err %v", err)
	}
	forbid("delete", "nodes")
	forbid("list", "certificatesigningrequests")
	rep, err := Leave(context.Background(), h.env, ResetOptions{}, leaveOpts(), []string{"drain"})
	if err != nil {
		t.Fatal(err)
	}
	left := strings.Join(rep.Leave.Left, "\n")
	if rep.NodeDeleted || !strings.Contains(left, "kubectl delete node w1") || !strings.Contains(left, "kubectl get csr") || !rep.Leave.LeaseDeleted {
		t.Errorf("report %+v, left:\n%s", rep.Leave, left)
	}
	if _, err := h.env.ReadFile(host.KubeletKubeconfig); err == nil {
		t.Error("kubelet.conf survived leave")
	}
}

// With the node's own credentials the drain evicts the node's pod and waits for it to go; the
// Node authorizer answers a read of a pod no longer bound to the node "forbidden", not "not
// found" (found in the lab), and that is the pod gone, not a failed drain. With admin
// credentials a forbidden read stays an error.
func TestLeaveWithTheNodesOwnCredentialsDrains(t *testing.T) {
	t.Parallel()
	for _, admin := range []bool{false, true} {
		h := joinedForLeave(t)
		if admin {
			writeHost(t, h.env, host.AdminKubeconfig, adminConf, 0o600)
		}
		h.client.PrependReactor("get", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
			name := a.(k8stesting.GetAction).GetName()
			if _, err := h.client.Tracker().Get(schema.GroupVersionResource{Version: "v1", Resource: "pods"}, a.GetNamespace(), name); apierrors.IsNotFound(err) {
				return true, nil, apierrors.NewForbidden(corev1.Resource("pods"), name, errors.New("node: no relationship found between node 'w1' and this object"))
			}
			return false, nil, nil
		})
		rep, err := Leave(context.Background(), h.env, ResetOptions{}, leaveOpts(), nil)
		if admin {
			if err == nil || !strings.Contains(err.Error(), "forbidden") {
				t.Errorf("admin credentials: a forbidden read of the pod must stay an error, got %v", err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if rep.Leave.Credentials != "node (/etc/kubernetes/kubelet.conf)" || !slices.Equal(rep.Leave.EvictedPods, []string{"default/web-1"}) {
			t.Errorf("node credentials: %+v", rep.Leave)
		}
	}
}

// A pod with emptyDir data stops the drain (its data would be lost) unless
// --delete-emptydir-data.
func TestLeaveRefusesToLoseEmptyDirData(t *testing.T) {
	t.Parallel()
	cache := podOn("cache-1", "w1", "ReplicaSet")
	cache.Spec.Volumes = []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	h := joinedForLeave(t, cache)
	writeHost(t, h.env, host.AdminKubeconfig, adminConf, 0o600)
	_, err := Leave(context.Background(), h.env, ResetOptions{}, leaveOpts(), nil)
	if operr.CodeOf(err) != operr.Preflight || !strings.Contains(err.Error(), "cache-1") || !strings.Contains(err.Error(), "delete-emptydir-data") {
		t.Fatalf("err %v", err)
	}
	o := leaveOpts()
	o.DeleteEmptyDirData = true
	rep, err := Leave(context.Background(), h.env, ResetOptions{}, o, nil)
	if err != nil || !slices.Contains(rep.Leave.EvictedPods, "default/cache-1") {
		t.Errorf("with --delete-emptydir-data: %v %+v", err, rep.Leave)
	}
}

// A control plane leaves: its API server, controller-manager and scheduler stop before its
// etcd member is removed, etcd after; then the Node goes, with the admin.conf the join wrote.
func TestLeaveControlPlaneStopsItsAPIServerBeforeItsMember(t *testing.T) {
	t.Parallel()
	c := newCPHost(t)
	asAPIServer(c.testHost)
	if _, err := Run(context.Background(), c.env, &State{Opts: c.options(t)}, Join, RunOptions{}); err != nil {
		t.Fatal(err)
	}
	rep, err := Leave(context.Background(), c.env, ResetOptions{}, leaveOpts(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.etcd.Member("https://10.0.0.12:2380") != nil || rep.EtcdMemberRemoved == "" || !rep.NodeDeleted || rep.Role != "control-plane" ||
		rep.Leave.Credentials != "admin (/etc/kubernetes/admin.conf)" {
		t.Errorf("report %+v %+v", rep, rep.Leave)
	}
	var phases []string
	for _, p := range rep.Phases {
		phases = append(phases, p.Name+":"+string(p.Status))
	}
	want := []string{"stop-control-plane:ran", "remove-etcd-member:ran", "remove-static-pods:ran"}
	if i := slices.Index(phases, want[0]); i < 0 || !slices.Equal(phases[i:i+3], want) {
		t.Errorf("phases %v, want %v in a row", phases, want)
	}
	etcdAt := slices.Index(rep.RemovedFiles, "/etc/kubernetes/manifests/etcd.yaml")
	for _, m := range []string{"kube-apiserver.yaml", "kube-controller-manager.yaml", "kube-scheduler.yaml"} {
		if i := slices.Index(rep.RemovedFiles, "/etc/kubernetes/manifests/"+m); i < 0 || i > etcdAt {
			t.Errorf("%s removed at %d, etcd.yaml at %d: %v", m, i, etcdAt, rep.RemovedFiles)
		}
	}
}

// A control plane whose etcd member leads hands the leadership to a healthy voter before the
// member is removed (a leader removing itself leaves the cluster leaderless until an
// election); one that does not lead hands nothing. A hand-off etcd refuses is a warning, and
// the member is removed all the same.
func TestLeaveControlPlaneHandsOffEtcdLeadership(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name          string
		leads, refuse bool
	}{{"leads", true, false}, {"follows", false, false}, {"leads, hand-off refused", true, true}} {
		c := newCPHost(t)
		asAPIServer(c.testHost)
		if _, err := Run(context.Background(), c.env, &State{Opts: c.options(t)}, Join, RunOptions{}); err != nil {
			t.Fatal(err)
		}
		self := c.etcd.Member("https://10.0.0.12:2380")
		if tc.leads {
			c.etcd.Leader = self.ID
		}
		if tc.refuse {
			c.etcd.MoveLeaderError = errors.New("etcdserver: request timed out, leader transfer took too long")
		}
		c.out.Reset()
		rep, err := Leave(context.Background(), c.env, ResetOptions{}, leaveOpts(), nil)
		if err != nil {
			t.Fatal(err)
		}
		want, leaderRemoved := []uint64(nil), 0
		if tc.leads && !tc.refuse {
			want = []uint64{1} // cp1, the one healthy other voter
		}
		if tc.refuse {
			leaderRemoved = 1
		}
		if !slices.Equal(c.etcd.MovedTo, want) || c.etcd.LeaderRemoved != leaderRemoved || !slices.Equal(c.etcd.Removed, []uint64{self.ID}) {
			t.Errorf("%s: leadership moved to %x (want %x), leader removed %d times, removed %x", tc.name, c.etcd.MovedTo, want, c.etcd.LeaderRemoved, c.etcd.Removed)
		}
		warned := strings.Contains(strings.Join(rep.Warnings, "\n"), "could not hand etcd's leadership to member 1")
		handed := strings.Contains(c.out.String(), fmt.Sprintf("handed etcd leadership from %x to 1", self.ID))
		if warned != tc.refuse || handed != (tc.leads && !tc.refuse) {
			t.Errorf("%s: warned %v, logged the hand-off %v; warnings %q\n%s", tc.name, warned, handed, rep.Warnings, c.out)
		}
	}
}

// A control plane's dry run plans each static pod manifest's removal once, though three
// phases reach the manifests (stop-control-plane, remove-static-pods, remove-files).
func TestLeaveControlPlaneDryRunPlansEachRemovalOnce(t *testing.T) {
	t.Parallel()
	c := newCPHost(t)
	asAPIServer(c.testHost)
	if _, err := Run(context.Background(), c.env, &State{Opts: c.options(t)}, Join, RunOptions{}); err != nil {
		t.Fatal(err)
	}
	rep, err := Leave(context.Background(), c.env, ResetOptions{DryRun: true}, leaveOpts(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"etcd.yaml", "kube-apiserver.yaml", "kube-controller-manager.yaml", "kube-scheduler.yaml"} {
		n := 0
		for _, a := range rep.PlannedActions {
			if strings.HasPrefix(a, "remove /etc/kubernetes/manifests/"+m) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%s planned %d times:\n%s", m, n, strings.Join(rep.PlannedActions, "\n"))
		}
	}
}

// kubeletCSR is a kubelet client CSR for CN system:node:<cn> sent by user, as an API server
// records it.
func kubeletCSR(t *testing.T, name, cn, user string) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	key, err := pki.NewECKey()
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: "system:node:" + cn, Organization: []string{"system:nodes"}}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: certificatesv1.CertificateSigningRequestSpec{SignerName: certificatesv1.KubeAPIServerClientKubeletSignerName, Username: user,
			Request: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})}}
}

// servingCSR makes csr a kubelet serving request.
func servingCSR(csr *certificatesv1.CertificateSigningRequest) *certificatesv1.CertificateSigningRequest {
	csr.Spec.SignerName = certificatesv1.KubeletServingSignerName
	return csr
}

// A node kubeadm joined: the kubelet's first CSR (sent with the bootstrap token), its renewal
// and its serving certificate's request are the node's and deleted; a CSR another user (or
// another node) sent for the node's name is not.
// The Lease goes before the Node: the garbage collector deletes a Lease whose Node is gone,
// and leave would then report a Lease it did not delete.
func TestLeaveDeletesTheKubeletsCSRsAndTheLeaseFirst(t *testing.T) {
	t.Parallel()
	h := joinedForLeave(t)
	writeHost(t, h.env, host.AdminKubeconfig, adminConf, 0o600)
	ctx := context.Background()
	for _, c := range []*certificatesv1.CertificateSigningRequest{
		kubeletCSR(t, "csr-first", "w1", "system:bootstrap:abcdef"),
		kubeletCSR(t, "csr-renewal", "w1", "system:node:w1"),
		kubeletCSR(t, "csr-alice", "w1", "alice"),
		kubeletCSR(t, "csr-w2", "w2", "system:bootstrap:abcdef"),
		servingCSR(kubeletCSR(t, "csr-serving", "w1", "system:node:w1")),
		servingCSR(kubeletCSR(t, "csr-serving-w2", "w1", "system:node:w2")),
		servingCSR(kubeletCSR(t, "csr-serving-alice", "w1", "alice")),
	} {
		if _, err := h.client.CertificatesV1().CertificateSigningRequests().Create(ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The garbage collector: the Node's Lease goes with it.
	h.client.PrependReactor("delete", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		_ = h.client.Tracker().Delete(schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}, "kube-node-lease", "w1")
		return false, nil, nil
	})
	rep, err := Leave(ctx, h.env, ResetOptions{}, leaveOpts(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Leave.LeaseDeleted || !rep.NodeDeleted {
		t.Errorf("leave reports Lease deleted %v, Node deleted %v; want both", rep.Leave.LeaseDeleted, rep.NodeDeleted)
	}
	for _, name := range []string{"csr-first", "csr-renewal", "csr-serving"} {
		if !slices.Contains(rep.Leave.DeletedCSRs, name) {
			t.Errorf("%s was not deleted: %v", name, rep.Leave.DeletedCSRs)
		}
	}
	for _, name := range []string{"csr-alice", "csr-w2", "csr-serving-w2", "csr-serving-alice"} {
		if _, err := h.client.CertificatesV1().CertificateSigningRequests().Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("%s is not the node's, yet it went: %v", name, err)
		}
	}
}
