package verify

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"kjoin.dev/kjoin/etcd"
	"kjoin.dev/kjoin/etcd/etcdtest"
	"kjoin.dev/kjoin/pki"
)

var now = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

type fixedClock struct{ t time.Time }

func (c *fixedClock) Now() time.Time                  { return c.t }
func (c *fixedClock) Since(t time.Time) time.Duration { return c.t.Sub(t) }
func (c *fixedClock) After(d time.Duration) <-chan time.Time {
	c.t = c.t.Add(d)
	ch := make(chan time.Time, 1)
	ch <- c.t
	return ch
}

func node(name string, ready corev1.ConditionStatus, cp bool) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}, CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))},
		Spec:   corev1.NodeSpec{PodCIDR: "10.244.1.0/24"},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready, Reason: "KubeletReady"}}}}
	if cp {
		n.Labels[labelControlPlane] = ""
	}
	return n
}

func lease(name string, age time.Duration) *coordinationv1.Lease {
	t := metav1.NewMicroTime(now.Add(-age))
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "kube-node-lease"}, Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), RenewTime: &t}}
}

func staticPods(nodeName, apiEndpoint string) []runtime.Object {
	var out []runtime.Object
	for _, c := range Components {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: c + "-" + nodeName, Namespace: "kube-system", Labels: map[string]string{"component": c, "tier": "control-plane"}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
		switch c {
		case "etcd":
			p.Annotations = map[string]string{"kubeadm.kubernetes.io/etcd.advertise-client-urls": "https://10.0.0.11:2379"}
		case "kube-apiserver":
			p.Annotations = map[string]string{"kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint": apiEndpoint}
		case "kube-controller-manager":
			p.Spec.Containers = []corev1.Container{{Name: c, Command: []string{c, "--allocate-node-cidrs=true"}}}
		}
		out = append(out, p)
	}
	return out
}

func byID(r *Report, node, id string) Check {
	for _, c := range r.Checks {
		if c.ID == id && c.Node == node {
			return c
		}
	}
	return Check{Status: "missing"}
}

// cluster: cp1 (control plane, healthy API server over TLS) and w1 (worker).
func cluster(t *testing.T, objs ...runtime.Object) (Options, *etcdtest.Cluster, *httptest.Server) {
	t.Helper()
	return clusterOn(t, nil, objs...)
}

// clusterOn is cluster with cp1's API server on listener l (nil: IPv4 loopback).
func clusterOn(t *testing.T, l net.Listener, objs ...runtime.Object) (Options, *etcdtest.Cluster, *httptest.Server) {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/livez" {
			_, _ = w.Write([]byte("ok"))
			return
		}
		http.NotFound(w, r)
	}))
	if l != nil {
		srv.Listener.Close()
		srv.Listener = l
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	base := []runtime.Object{node("cp1", corev1.ConditionTrue, true), lease("cp1", 3*time.Second), node("w1", corev1.ConditionTrue, false), lease("w1", 5*time.Second)}
	base = append(base, staticPods("cp1", strings.TrimPrefix(srv.URL, "https://"))...)
	e := etcdtest.New()
	o := Options{
		Client: fake.NewClientset(append(base, objs...)...),
		Etcd:   func([]string) (etcd.Conn, error) { return e, nil },
		HTTP: func(roots *x509.CertPool) *http.Client {
			return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
		},
		CA: pool, Clock: &fixedClock{t: now},
	}
	return o, e, srv
}

func TestHealthyClusterPasses(t *testing.T) {
	o, _, _ := cluster(t)
	dials, dial := 0, o.Etcd
	o.Etcd = func(eps []string) (etcd.Conn, error) { dials++; return dial(eps) }
	r, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if r.Failed != 0 || r.Warned != 0 {
		t.Errorf("failed %d warned %d: %+v", r.Failed, r.Warned, r.Checks)
	}
	for _, id := range []string{"node.ready", "node.lease", "node.podcidr", "node.csr", "etcd.member", "pod.kube-apiserver", "apiserver.livez"} {
		if c := byID(r, "cp1", id); c.Status != Pass {
			t.Errorf("cp1 %s: %+v", id, c)
		}
	}
	if c := byID(r, "", "etcd.count"); c.Status != Pass {
		t.Errorf("etcd.count: %+v", c)
	}
	if dials != 1 {
		t.Errorf("etcd dialled %d times, want once per run", dials)
	}
}

func TestFaultsAreNamed(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(o *Options, e *etcdtest.Cluster)
		objs  []runtime.Object
		node  string
		id    string
		want  string
	}{
		{name: "not ready", node: "w2", id: "node.ready", want: "not Ready",
			objs: []runtime.Object{node("w2", corev1.ConditionUnknown, false), lease("w2", time.Second)}},
		{name: "unreachable taint", node: "w2", id: "node.taints", want: "unreachable",
			objs: []runtime.Object{func() *corev1.Node {
				n := node("w2", corev1.ConditionTrue, false)
				n.Spec.Taints = []corev1.Taint{{Key: taintUnreachable, Effect: corev1.TaintEffectNoExecute}}
				return n
			}(), lease("w2", time.Second)}},
		{name: "lease not renewing", node: "w2", id: "node.lease", want: "not renewing",
			objs: []runtime.Object{node("w2", corev1.ConditionTrue, false), lease("w2", 2*time.Minute)}},
		{name: "lease held by another", node: "w2", id: "node.lease", want: "not held by the node",
			objs: []runtime.Object{node("w2", corev1.ConditionTrue, false), func() *coordinationv1.Lease {
				l := lease("w2", time.Second)
				l.Spec.HolderIdentity = ptr.To("w9")
				return l
			}()}},
		{name: "no lease", node: "w2", id: "node.lease", want: "no Lease",
			objs: []runtime.Object{node("w2", corev1.ConditionTrue, false)}},
		{name: "no pod CIDR", node: "w2", id: "node.podcidr", want: "no pod CIDR",
			objs: []runtime.Object{func() *corev1.Node { n := node("w2", corev1.ConditionTrue, false); n.Spec.PodCIDR = ""; return n }(), lease("w2", time.Second)}},
		{name: "pending CSR", node: "w1", id: "node.csr", want: "kjoin-w1-0123456789ab",
			objs: []runtime.Object{nodeCSR(t, "kjoin-w1-0123456789ab", "system:node:w1", certificatesv1.KubeAPIServerClientKubeletSignerName)}},
		{name: "not registered", node: "w9", id: "node.registered", want: "no Node"},
		{name: "etcd member missing", node: "cp2", id: "etcd.member", want: "no started etcd member",
			objs: append([]runtime.Object{node("cp2", corev1.ConditionTrue, true), lease("cp2", time.Second)}, staticPods("cp2", "127.0.0.1:1")...)},
		{name: "learner", node: "cp1", id: "etcd.member", want: "learner", setup: func(o *Options, e *etcdtest.Cluster) { e.Members[0].IsLearner = true }},
		{name: "member unhealthy", node: "", id: "etcd.health", want: "connection refused", setup: func(o *Options, e *etcdtest.Cluster) { e.Unhealthy["https://10.0.0.11:2379"] = true }},
		{name: "member count", node: "", id: "etcd.count", want: "2 etcd members for 1", setup: func(o *Options, e *etcdtest.Cluster) {
			e.Members = append(e.Members, &etcdserverpb.Member{ID: 2, Name: "cpX", ClientURLs: []string{"https://10.0.0.19:2379"}})
		}},
		{name: "learner left by a failed join", node: "", id: "etcd.stale", want: "member 77 (no name, https://10.0.0.99:2380, learner never started)", setup: func(o *Options, e *etcdtest.Cluster) {
			e.Members = append(e.Members, &etcdserverpb.Member{ID: 0x77, PeerURLs: []string{"https://10.0.0.99:2380"}, IsLearner: true})
			e.Started = func() bool { return false } // the fake names unstarted members once "started"
		}},
		{name: "voter whose peer URL is silent", node: "", id: "etcd.stale", want: "member 2 (cpX, https://10.0.0.19:2380, voter started, peer URL silent)", setup: func(o *Options, e *etcdtest.Cluster) {
			e.Members = append(e.Members, &etcdserverpb.Member{ID: 2, Name: "cpX", PeerURLs: []string{"https://10.0.0.19:2380"}, ClientURLs: []string{"https://10.0.0.19:2379"}})
			o.EtcdPeer = func(_ context.Context, u string) bool { return u != "https://10.0.0.19:2380" }
		}},
		{name: "apiserver pod not ready", node: "cp1", id: "pod.kube-apiserver", want: "not running", setup: func(o *Options, e *etcdtest.Cluster) {
			p, _ := o.Client.CoreV1().Pods("kube-system").Get(context.Background(), "kube-apiserver-cp1", metav1.GetOptions{})
			p.Status.Phase = corev1.PodPending
			_, _ = o.Client.CoreV1().Pods("kube-system").UpdateStatus(context.Background(), p, metav1.UpdateOptions{})
		}},
		{name: "apiserver pod running but not ready", node: "cp1", id: "pod.kube-apiserver", want: "ready false", setup: func(o *Options, e *etcdtest.Cluster) {
			p, _ := o.Client.CoreV1().Pods("kube-system").Get(context.Background(), "kube-apiserver-cp1", metav1.GetOptions{})
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
			_, _ = o.Client.CoreV1().Pods("kube-system").UpdateStatus(context.Background(), p, metav1.UpdateOptions{})
		}},
		{name: "livez with another CA", node: "cp1", id: "apiserver.livez", want: "certificate", setup: func(o *Options, e *etcdtest.Cluster) { o.CA = x509.NewCertPool() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, e, _ := cluster(t, tc.objs...)
			if tc.setup != nil {
				tc.setup(&o, e)
			}
			if tc.node != "" {
				o.Nodes = []string{tc.node}
				if tc.id == "etcd.health" || tc.id == "etcd.count" || tc.id == "etcd.stale" {
					o.Nodes = nil
				}
			}
			r, err := Run(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			c := byID(r, tc.node, tc.id)
			if c.Status != Fail || !strings.Contains(c.Summary+" "+c.Evidence, tc.want) {
				t.Errorf("%s: %+v; want fail naming %q", tc.id, c, tc.want)
			}
			if r.Failed == 0 {
				t.Error("report counts no failure")
			}
		})
	}
}

func TestLeaseSeenToAdvancePasses(t *testing.T) {
	o, _, _ := cluster(t, node("w2", corev1.ConditionTrue, false), lease("w2", 30*time.Second))
	o.Nodes = []string{"w2"}
	// The kubelet renews while verify watches.
	go func() {
		time.Sleep(10 * time.Millisecond)
		l := lease("w2", 0)
		_, _ = o.Client.CoordinationV1().Leases("kube-node-lease").Update(context.Background(), l, metav1.UpdateOptions{})
	}()
	o.Clock = &slowClock{fixedClock{t: now}}
	r, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if c := byID(r, "w2", "node.lease"); c.Status != Pass || !strings.Contains(c.Evidence, "advanced") {
		t.Errorf("%+v", c)
	}
}

// slowClock advances like fixedClock but lets real time pass, so a concurrent update lands.
type slowClock struct{ fixedClock }

func (c *slowClock) After(d time.Duration) <-chan time.Time {
	time.Sleep(20 * time.Millisecond)
	return c.fixedClock.After(d)
}

func TestWithoutEtcdCertificatesEtcdIsAWarning(t *testing.T) {
	o, _, _ := cluster(t)
	o.Etcd = nil
	r, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if c := byID(r, "cp1", "etcd.member"); c.Status != Warn || !strings.Contains(c.Evidence, "control-plane node") {
		t.Errorf("%+v", c)
	}
	if r.Failed != 0 {
		t.Errorf("failed %d", r.Failed)
	}
}

func TestNodeMap(t *testing.T) {
	o, _, _ := cluster(t)
	rows, err := NodeMap(context.Background(), o.Client, o.Clock, Selection{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].Name != "cp1" || rows[0].Role != "control-plane" || rows[1].Role != "worker" || rows[0].LeaseAge != 3*time.Second || !rows[0].HasLease || rows[1].Ready != "True" {
		t.Errorf("%+v", rows)
	}
}

// nodeCSR is a pending CSR with a real request for cn.
func nodeCSR(t *testing.T, name, cn, signer string) *certificatesv1.CertificateSigningRequest {
	t.Helper()
	key, _ := pki.NewECKey()
	der, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{Subject: pkix.Name{CommonName: cn, Organization: []string{"system:nodes"}}}, key)
	if err != nil {
		t.Fatal(err)
	}
	return &certificatesv1.CertificateSigningRequest{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: certificatesv1.CertificateSigningRequestSpec{SignerName: signer, Username: "system:bootstrap:abcdef",
			Request: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})}}
}

// node.csr counts only the node's own kubelet client CSRs: not another node's whose name
// starts the same (w1-db), not a token holder's forgery named after the node, not a CSR for
// another identity or signer.
func TestPendingCSRsOfOthersDoNotFailTheNode(t *testing.T) {
	kubelet := certificatesv1.KubeAPIServerClientKubeletSignerName
	o, _, _ := cluster(t,
		nodeCSR(t, "kjoin-w1-db-0123456789ab", "system:node:w1-db", kubelet),
		nodeCSR(t, "kjoin-w1-x", "system:node:w1", kubelet),
		nodeCSR(t, "kjoin-w1-abcdefabcdef", "system:node:w2", kubelet),
		nodeCSR(t, "kjoin-w1-fedcbafedcba", "system:node:w1", "kubernetes.io/kube-apiserver-client"),
	)
	o.Nodes = []string{"w1"}
	r, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if c := byID(r, "w1", "node.csr"); c.Status != Pass {
		t.Errorf("node.csr of w1: %+v; others' CSRs must not count", c)
	}
}

// On an IPv6 control plane the advertise-address annotation is bracketed ("[fd77::11]:6443",
// as kubeadm writes it): the livez probe URL is built from it as it is.
func TestLivezOverIPv6(t *testing.T) {
	l, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback here: %v", err)
	}
	o, _, srv := clusterOn(t, l)
	if !strings.HasPrefix(srv.URL, "https://[::1]:") {
		t.Fatalf("server %s", srv.URL)
	}
	r, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if c := byID(r, "cp1", "apiserver.livez"); c.Status != Pass {
		t.Errorf("livez over IPv6: %+v", c)
	}
}

// The node map's selection (names, label selector), roles from the node-role labels, every
// InternalIP (both families on a dual-stack node), OS image and kernel.
func TestNodeMapSelection(t *testing.T) {
	w2 := node("w2", corev1.ConditionTrue, false)
	w2.Labels["node-role.kubernetes.io/ingress"] = ""
	w2.Labels["zone"] = "b"
	w2.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.102"}, {Type: corev1.NodeInternalIP, Address: "fd00::102"}}
	w2.Status.NodeInfo.OSImage, w2.Status.NodeInfo.KernelVersion = "Debian GNU/Linux 12 (bookworm)", "6.1.0-40-amd64"
	o, _, _ := cluster(t, w2)
	ctx := context.Background()
	rows, err := NodeMap(ctx, o.Client, o.Clock, Selection{Selector: "zone=b"})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Name != "w2" || strings.Join(rows[0].Roles, ",") != "ingress" || strings.Join(rows[0].InternalIPs, ",") != "10.0.0.102,fd00::102" ||
		rows[0].InternalIPs[0] != "10.0.0.102" || rows[0].OSImage != "Debian GNU/Linux 12 (bookworm)" || rows[0].KernelVersion != "6.1.0-40-amd64" {
		t.Errorf("-l zone=b: %+v", rows)
	}
	rows, err = NodeMap(ctx, o.Client, o.Clock, Selection{Names: []string{"w2", "cp1"}})
	if err != nil || len(rows) != 2 || rows[0].Name != "cp1" || strings.Join(rows[0].Roles, ",") != "control-plane" || rows[1].Name != "w2" {
		t.Errorf("names cp1 w2: %v %+v", err, rows)
	}
	var missing *NoNodeError
	if _, err := NodeMap(ctx, o.Client, o.Clock, Selection{Names: []string{"w9", "w1", "w8"}}); !errors.As(err, &missing) || err.Error() != "no node w8, w9" {
		t.Errorf("unknown names: %v", err)
	}
}

// Joined by: kjoin's node label names kjoin; in a cluster kubeadm made (kubeadm-config
// present) a Node without it was joined by kubeadm; elsewhere the Node does not tell.
func TestNodeMapJoinedBy(t *testing.T) {
	ctx := context.Background()
	node := func(name string, labels map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	}
	objs := []runtime.Object{node("a", map[string]string{"kjoin.dev/joined-by": "kjoin"}), node("b", nil)}
	for _, tc := range []struct {
		name    string
		kubeadm bool
		want    map[string]string
	}{
		{"a kubeadm cluster", true, map[string]string{"a": "kjoin", "b": "kubeadm"}},
		{"another cluster", false, map[string]string{"a": "kjoin", "b": ""}},
	} {
		all := append([]runtime.Object{}, objs...)
		if tc.kubeadm {
			all = append(all, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kubeadm-config", Namespace: "kube-system"}})
		}
		rows, err := NodeMap(ctx, fake.NewClientset(all...), &fixedClock{t: time.Now()}, Selection{})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if r.JoinedBy != tc.want[r.Name] {
				t.Errorf("%s: %s joined by %q, want %q", tc.name, r.Name, r.JoinedBy, tc.want[r.Name])
			}
		}
	}
	// When every Node carries the label, kubeadm-config is not asked for.
	client := fake.NewClientset(objs[0], &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kubeadm-config", Namespace: "kube-system"}})
	if _, err := NodeMap(ctx, client, &fixedClock{t: time.Now()}, Selection{}); err != nil {
		t.Fatal(err)
	}
	for _, a := range client.Actions() {
		if a.GetResource().Resource == "configmaps" {
			t.Errorf("read %s although every Node is labelled", a.GetResource().Resource)
		}
	}
}
