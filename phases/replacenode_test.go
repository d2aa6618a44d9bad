package phases

import (
	"context"
	"crypto/x509"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/kubelet"
	"kjoin.dev/kjoin/operr"
	"kjoin.dev/kjoin/pki"
)

// formerW1 is the Node a machine named w1 left behind before it was reinstalled: NotReady
// for two hours, with an operator's label, taint and annotation beside the system's own.
func formerW1() (*corev1.Node, *coordinationv1.Lease) {
	old := metav1.NewTime(time.Now().Add(-2 * time.Hour))
	renew := metav1.NewMicroTime(old.Time)
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "w1", UID: "uid-of-the-former-w1", CreationTimestamp: metav1.NewTime(time.Now().Add(-48 * time.Hour)),
			Labels:      map[string]string{"kubernetes.io/hostname": "w1", "kubernetes.io/os": "linux", "team": "blue", kubelet.JoinedByLabel: "kjoin"},
			Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0", "example.com/owner": "alice"}},
		Spec: corev1.NodeSpec{Unschedulable: true, Taints: []corev1.Taint{
			{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule},
			{Key: "node.kubernetes.io/unreachable", Effect: corev1.TaintEffectNoExecute}}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown, Reason: "NodeStatusUnknown", LastTransitionTime: old}}},
	}
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "w1", Namespace: "kube-node-lease"}, Spec: coordinationv1.LeaseSpec{RenewTime: &renew}}
	return n, l
}

func deletes(h *testHost) []string {
	var out []string
	for _, a := range h.client.Actions() {
		if d, ok := a.(k8stesting.DeleteAction); ok && (d.GetResource().Resource == "nodes" || d.GetResource().Resource == "leases") {
			s := d.GetResource().Resource + "/" + d.GetName()
			if p := d.GetDeleteOptions().Preconditions; p != nil && p.UID != nil {
				s += " uid=" + string(*p.UID)
			}
			out = append(out, s)
		}
	}
	return out
}

func TestReinstalledWorkerIsToldWhatItInherits(t *testing.T) {
	t.Parallel()
	n, l := formerW1()
	h := newTestHost(t, n, l)
	s := &State{Opts: h.options(t)}
	if _, err := Run(context.Background(), h.env, s, Join, RunOptions{}); err != nil {
		t.Fatalf("%v\n%s", err, h.out)
	}
	warn := strings.Join(s.Warnings, "\n")
	for _, want := range []string{`a Node named "w1" exists (uid uid-of-the-former-w1`, "NotReady (Ready=Unknown) since", "(NodeStatusUnknown)",
		"its Lease was last renewed", "2h0m0s ago", "labels team=blue", "taints dedicated=gpu:NoSchedule", "annotations example.com/owner", "a cordon", "--replace"} {
		if !strings.Contains(warn, want) {
			t.Errorf("warning lacks %q:\n%s", want, warn)
		}
	}
	for _, system := range []string{"kubernetes.io/hostname", "node.kubernetes.io/unreachable", "node.alpha.kubernetes.io/ttl", kubelet.JoinedByLabel} {
		if strings.Contains(warn, system) {
			t.Errorf("warning counts %s, which the kubelet, the cluster or kjoin sets, as inherited:\n%s", system, warn)
		}
	}
	if d := deletes(h); len(d) != 0 || len(s.Repairs) != 0 {
		t.Errorf("without --replace the join deleted %v (repairs %+v)", d, s.Repairs)
	}
	got, _ := h.client.CoreV1().Nodes().Get(context.Background(), "w1", metav1.GetOptions{})
	if got.UID != "uid-of-the-former-w1" || got.Labels["team"] != "blue" {
		t.Errorf("the Node was not taken over as kubeadm does: %+v", got.ObjectMeta)
	}
}

func TestReplaceDeletesTheFormerNodeBeforeTheKubeletStarts(t *testing.T) {
	t.Parallel()
	n, l := formerW1()
	h := newTestHost(t, n, l)
	s := &State{Opts: h.options(t)}
	s.Opts.Replace = true
	var order []string
	h.client.PrependReactor("delete", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		order = append(order, "delete node")
		return false, nil, nil
	})
	h.client.PrependReactor("create", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		order = append(order, "kubelet registers")
		return false, nil, nil
	})
	if _, err := Run(context.Background(), h.env, s, Join, RunOptions{}); err != nil {
		t.Fatalf("%v\n%s", err, h.out)
	}
	if d := strings.Join(deletes(h), ", "); d != "leases/w1, nodes/w1 uid=uid-of-the-former-w1" {
		t.Errorf("deleted %q, want the Lease and then that very Node (UID precondition)", d)
	}
	if strings.Join(order, ", ") != "delete node, kubelet registers" {
		t.Errorf("order %v: the Node must be gone before the kubelet registers", order)
	}
	got, err := h.client.CoreV1().Nodes().Get(context.Background(), "w1", metav1.GetOptions{})
	if err != nil || got.Labels["team"] != "" || got.Spec.Unschedulable {
		t.Errorf("the new registration inherited from the former Node: %+v %v", got, err)
	}
	if len(s.Repairs) != 1 || s.Repairs[0].Kind != "node" || s.Repairs[0].ID != "uid-of-the-former-w1" || s.Repairs[0].Action != "deleted" ||
		!strings.Contains(s.Repairs[0].Detail, "not inherited: labels team=blue") {
		t.Errorf("repairs %+v", s.Repairs)
	}
}

func TestReplaceDryRunDeletesNothing(t *testing.T) {
	t.Parallel()
	n, l := formerW1()
	h := newTestHost(t, n, l)
	s := &State{Opts: h.options(t)}
	s.Opts.Replace, s.Opts.DryRun = true, true
	if _, err := Run(context.Background(), h.env, s, Join, RunOptions{}); err != nil {
		t.Fatalf("%v\n%s", err, h.out)
	}
	if d := deletes(h); len(d) != 0 {
		t.Errorf("a dry run deleted %v", d)
	}
	if len(s.Repairs) != 1 || s.Repairs[0].Action != "would delete" || s.Repairs[0].ID != "uid-of-the-former-w1" {
		t.Errorf("repairs %+v", s.Repairs)
	}
	if !strings.Contains(strings.Join(s.PlannedActions(), "\n"), "delete the Lease kube-node-lease/w1 and the Node w1 (uid uid-of-the-former-w1)") {
		t.Errorf("planned %v", s.PlannedActions())
	}
}

func TestReplaceStillRefusesAReadyNode(t *testing.T) {
	t.Parallel()
	n, l := formerW1()
	n.Status.Conditions[0].Status = corev1.ConditionTrue
	h := newTestHost(t, n, l)
	s := &State{Opts: h.options(t)}
	s.Opts.Replace = true
	_, err := Run(context.Background(), h.env, s, Join, RunOptions{})
	if err == nil || !strings.Contains(err.Error(), "already registered and Ready") {
		t.Fatalf("err %v: a Ready Node must be refused whatever the flag", err)
	}
	if d := deletes(h); len(d) != 0 {
		t.Errorf("deleted %v", d)
	}
}

// expireClientCert replaces the kubelet's current client certificate with one of the same
// node and key that expired an hour ago (signed by the cluster CA), as after a long power-off.
func expireClientCert(t *testing.T, h *testHost, node string) *x509.Certificate {
	t.Helper()
	target, err := os.Readlink(h.env.Paths.Of(host.KubeletClientCurrent))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(h.env.Paths.Of(target))
	key, err := pki.ParseKey(b)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	c, err := pki.NewSignedCert(pki.CertConfig{CommonName: "system:node:" + node, Organization: []string{"system:nodes"},
		Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, NotBefore: now.Add(-48 * time.Hour), NotAfter: now.Add(-time.Hour)}, key.Public(), h.server.CA, h.server.CAKey)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM, _ := pki.EncodeKey(key)
	if err := os.WriteFile(h.env.Paths.Of(target), append(pki.EncodeCert(c), keyPEM...), 0o600); err != nil {
		t.Fatal(err)
	}
	return c
}

func TestExpiredClientCertificateIsRenewedInPlace(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	s := &State{Opts: h.options(t)}
	if _, err := Run(context.Background(), h.env, s, Join, RunOptions{}); err != nil {
		t.Fatalf("%v\n%s", err, h.out)
	}
	old := expireClientCert(t, h, "w1")
	flags, _ := os.ReadFile(h.env.Paths.Of(host.KubeletFlagsPath))
	h.runner.calls = nil

	dry := &State{Opts: h.options(t)}
	dry.Opts.DryRun = true
	if _, err := Run(context.Background(), h.env, dry, Join, RunOptions{}); err != nil {
		t.Fatalf("dry run: %v\n%s", err, h.out)
	}
	if len(dry.Repairs) != 1 || dry.Repairs[0].Action != "would renew" || dry.Repairs[0].ID != "serial "+old.SerialNumber.Text(16) {
		t.Errorf("dry run repairs %+v", dry.Repairs)
	}

	again := &State{Opts: h.options(t)}
	if _, err := Run(context.Background(), h.env, again, Join, RunOptions{}); err != nil {
		t.Fatalf("%v\n%s", err, h.out)
	}
	if len(again.Repairs) != 1 || again.Repairs[0].Kind != "client-certificate" || again.Repairs[0].Action != "renewed" ||
		again.Repairs[0].ID != "serial "+old.SerialNumber.Text(16) || !strings.Contains(again.Repairs[0].Detail, "expired") {
		t.Fatalf("repairs %+v", again.Repairs)
	}
	target, _ := os.Readlink(h.env.Paths.Of(host.KubeletClientCurrent))
	b, _ := os.ReadFile(h.env.Paths.Of(target))
	renewed, err := pki.ParseCert(b)
	if err != nil || renewed.SerialNumber.Cmp(old.SerialNumber) == 0 || !renewed.NotAfter.After(time.Now()) || renewed.Subject.CommonName != "system:node:w1" {
		t.Errorf("current certificate after the renewal: %v %v", renewed, err)
	}
	if now, _ := os.ReadFile(h.env.Paths.Of(host.KubeletFlagsPath)); string(now) != string(flags) {
		t.Errorf("kubeadm-flags.env changed by a renewal:\n%s\nwas\n%s", now, flags)
	}
	if !strings.Contains(strings.Join(h.runner.calls, "\n"), "systemctl restart kubelet") {
		t.Errorf("the kubelet was not restarted with its new certificate: %v", h.runner.calls)
	}
	if again.StaleNode != nil || len(deletes(h)) != 0 {
		t.Errorf("a renewal touched the Node: stale %v deletes %v", again.StaleNode, deletes(h))
	}
}

func TestReplaceWithoutThePermissionNamesIt(t *testing.T) {
	t.Parallel()
	n, l := formerW1()
	h := newTestHost(t, n, l)
	h.client.PrependReactor("delete", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "nodes"}, "w1", errors.New(`User "system:node:w1" cannot delete resource "nodes"`))
	})
	s := &State{Opts: h.options(t)}
	s.Opts.Replace = true
	_, err := Run(context.Background(), h.env, s, Join, RunOptions{})
	if operr.CodeOf(err) != operr.Auth || !strings.Contains(err.Error(), "uid-of-the-former-w1") || !strings.Contains(operr.HintOf(err), "kjoin token create --allow-node-replace") ||
		!strings.Contains(operr.HintOf(err), "kubectl delete node w1") {
		t.Fatalf("err %v (hint %q)", err, operr.HintOf(err))
	}
	if strings.Contains(strings.Join(h.runner.calls, "\n"), "restart kubelet") {
		t.Error("the kubelet started although the former Node could not be removed")
	}
}
