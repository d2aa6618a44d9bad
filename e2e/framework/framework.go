//go:build e2e

// Package framework starts one lab per test package and gives lab tests what they need:
// commands on hosts, host files, an admin client, Node and etcd checks, and logs on failure.
package framework

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"kjoin.dev/kjoin/e2e/lab"
	"kjoin.dev/kjoin/tlsbootstrap"
)

// Cluster is the package's lab, with cp1 initialised by kubeadm.
type Cluster struct {
	*lab.Lab
	Client kubernetes.Interface
}

var (
	current *Cluster
	once    sync.Once
)

func logf(format string, args ...any) { fmt.Fprintf(os.Stderr, "[lab] "+format+"\n", args...) }

// Main is a test package's TestMain: it tears down any leftover lab, brings up cp1 with
// kubeadm init, runs the tests and tears everything down, also on SIGINT/SIGTERM.
func Main(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx := context.Background()
	settings := Env()
	if settingsErr != nil {
		logf("%v", settingsErr)
		return 2
	}
	root := settings.Root
	teardown := func() {
		once.Do(func() {
			if settings.Keep {
				logf("KJOIN_LAB_KEEP set: leaving the lab up")
				return
			}
			if err := lab.Down(ctx, root); err != nil {
				logf("teardown: %v", err)
			}
		})
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sig
		logf("%v: tearing the lab down", s)
		teardown()
		os.Exit(2)
	}()
	if err := lab.Down(ctx, root); err != nil {
		logf("removing a leftover lab: %v", err)
		return 1
	}
	start := time.Now()
	l, err := lab.Up(ctx, settings.Options(logf), "cp1")
	if err == nil {
		err = l.InitControlPlane(ctx, logf)
	}
	if err != nil {
		logf("lab up failed: %v", err)
		if l != nil {
			for _, h := range l.HostNames() {
				fmt.Fprint(os.Stderr, l.Logs(h, 40))
				_ = l.CollectLogs(h, artifactsDir("lab-up"))
			}
		}
		teardown()
		return 1
	}
	c := &Cluster{Lab: l}
	if c.Client, err = adminClient(l); err != nil {
		logf("admin client: %v", err)
		teardown()
		return 1
	}
	current = c
	logf("lab ready in %s", time.Since(start).Round(time.Second))
	code := m.Run()
	teardown()
	return code
}

// Get returns the package's lab, once cp1's scheduler and controller-manager lead again
// (see settle).
func Get(t testing.TB) *Cluster {
	t.Helper()
	if current == nil {
		t.Fatal("no lab: call framework.Main from TestMain")
	}
	current.settle(t)
	return current
}

// controllers are the components on cp1 that lead through a Lease in kube-system; a test
// needs both (the scheduler places pods; the controller-manager signs CSRs and runs
// ReplicaSets, budgets and the bootstrap signer).
var controllers = []string{"kube-scheduler", "kube-controller-manager"}

// settle waits until each of cp1's controllers holds its Lease and renews it. A test that
// took cp1's API server or etcd away leaves them crash-looping (they exit when they lose
// their Lease, and the kubelet's back-off grows to minutes), or a Lease held by a control
// plane that test removed, which the next holder must first see expire. After 45 s the
// kubelet is restarted once: that resets its back-off.
func (c *Cluster) settle(t testing.TB) {
	t.Helper()
	start, restarted := time.Now(), false
	var why string
	err := wait.PollUntilContextTimeout(context.Background(), time.Second, 4*time.Minute, true, func(ctx context.Context) (bool, error) {
		why = c.unsettled(ctx)
		if why != "" && !restarted && time.Since(start) > 45*time.Second {
			restarted = true
			r := c.Exec(ctx, "cp1", "systemctl", "restart", "kubelet")
			t.Logf("cp1's control plane unsettled for 45s (%s): restarted its kubelet (exit %d)", why, r.ExitCode)
		}
		return why == "", nil
	})
	if err != nil {
		t.Logf("logs of cp1:\n%s", c.Logs("cp1", 40))
		t.Fatalf("cp1's control plane did not settle before the test: %s", why)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Logf("waited %s for cp1's scheduler and controller-manager to lead", d.Round(time.Second))
	}
}

// unsettled names the first of cp1's controllers that does not lead, or returns "".
func (c *Cluster) unsettled(ctx context.Context) string {
	for _, name := range controllers {
		l, err := c.Client.CoordinationV1().Leases("kube-system").Get(ctx, name, metav1.GetOptions{})
		switch {
		case err != nil:
			return fmt.Sprintf("lease %s: %v", name, err)
		case l.Spec.HolderIdentity == nil || !strings.HasPrefix(*l.Spec.HolderIdentity, "cp1_"):
			return fmt.Sprintf("lease %s held by %q, not cp1", name, ptrString(l.Spec.HolderIdentity))
		case l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil ||
			time.Since(l.Spec.RenewTime.Time) > time.Duration(*l.Spec.LeaseDurationSeconds)*time.Second:
			return fmt.Sprintf("lease %s not renewed by %s", name, ptrString(l.Spec.HolderIdentity))
		}
	}
	return ""
}

func ptrString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func artifactsDir(name string) string {
	base := Env().Artifacts
	if base == "" {
		base = filepath.Join(os.TempDir(), "kjoin-artifacts")
	}
	return filepath.Join(base, strings.ReplaceAll(name, "/", "_"))
}

// adminClient talks to cp1's apiserver from this machine through the lab bridge.
func adminClient(l *lab.Lab) (kubernetes.Interface, error) {
	b, err := l.ReadFile("cp1", "/etc/kubernetes/admin.conf")
	if err != nil {
		return nil, err
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(b)
	if err != nil {
		return nil, err
	}
	cfg.Host = "https://" + net.JoinHostPort(l.Hosts["cp1"].IP, strconv.Itoa(lab.APIPort))
	cfg.TLSClientConfig.ServerName = lab.ControlPlaneName
	return kubernetes.NewForConfig(cfg)
}

// Host brings up a lab host for this test. When the test ends the host is removed (for a
// control plane its etcd member first, so the cluster keeps quorum) and its Node deleted;
// on failure the tail of its logs and cp1's is printed and full logs kept as artifacts.
func (c *Cluster) Host(t *testing.T, name string) *lab.Host {
	t.Helper()
	return c.HostWith(t, name, lab.HostSetup{})
}

// HostWith is Host for a host set up differently (lab.HostSetup).
func (c *Cluster) HostWith(t *testing.T, name string, setup lab.HostSetup) *lab.Host {
	t.Helper()
	h, err := c.AddHostWith(context.Background(), name, setup, t.Logf)
	if err != nil {
		c.DumpLogs(t, name)
		c.Forget(t, name)
		t.Fatalf("host %s: %v", name, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			c.DumpLogs(t, name, "cp1")
		}
		c.Forget(t, name)
	})
	return h
}

// DumpLogs prints the tail of the hosts' logs and keeps the full logs as artifacts.
func (c *Cluster) DumpLogs(t *testing.T, hosts ...string) {
	dir := artifactsDir(t.Name())
	for _, h := range hosts {
		t.Logf("logs of %s:\n%s", h, c.Logs(h, 40))
		if err := c.CollectLogs(h, dir); err != nil {
			t.Logf("collect logs of %s: %v", h, err)
		}
	}
	t.Logf("full logs: %s", dir)
}

// Forget removes a host from the cluster and the lab: its etcd member (if any), its Node and
// every CSR asking for its name (a later test that brings up a host of the same name starts
// with none), then the host itself.
func (c *Cluster) Forget(t *testing.T, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if lab.IsControlPlane(name) && name != "cp1" {
		if err := c.RemoveEtcdMember(ctx, name); err != nil {
			// Removing the host anyway would cost etcd its quorum and break every later test.
			t.Fatalf("remove etcd member %s: %v", name, err)
		}
	}
	if err := c.Client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !strings.Contains(err.Error(), "not found") {
		t.Logf("delete node %s: %v", name, err)
	}
	c.deleteCSRsFor(ctx, t, name)
	if err := c.RemoveHost(ctx, name); err != nil {
		t.Errorf("remove host %s: %v", name, err)
	}
	// The node's Lease too, now that no kubelet renews it: the garbage collector would delete
	// it only later, and a host of the same name joining before then would find a Lease owned
	// by the Node this deleted (until the collector deletes it under the new kubelet).
	if err := c.Client.CoordinationV1().Leases("kube-node-lease").Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Logf("delete lease kube-node-lease/%s: %v", name, err)
	}
}

// NodeLease waits until Node name's Lease in kube-node-lease is owned by that very Node (its
// UID), and returns it: a test that asserts on what becomes of the Lease asserts on the one
// the garbage collector will not delete under it (a Lease left from an earlier Node of the
// same name is, and its kubelet then makes another).
func (c *Cluster) NodeLease(t *testing.T, name string) *coordinationv1.Lease {
	t.Helper()
	var lease *coordinationv1.Lease
	var node *corev1.Node
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		node = n
		l, err := c.Client.CoordinationV1().Leases("kube-node-lease").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			lease = nil
			return false, nil
		}
		lease = l
		for _, o := range l.OwnerReferences {
			if o.Kind == "Node" && o.UID == n.UID {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		desc := "no Lease"
		if lease != nil && node != nil {
			desc = fmt.Sprintf("Lease %s owned by %+v, Node UID %s", lease.UID, lease.OwnerReferences, node.UID)
		}
		t.Fatalf("node %s: no Lease owned by its Node within 2m: %s", name, desc)
	}
	return lease
}

// deleteCSRsFor deletes every CSR whose request names system:node:<name>, whatever its signer
// and sender.
func (c *Cluster) deleteCSRsFor(ctx context.Context, t *testing.T, name string) {
	list, err := c.Client.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Logf("list CSRs: %v", err)
		return
	}
	for i, csr := range list.Items {
		if tlsbootstrap.AsksFor(&list.Items[i], name) {
			if err := c.Client.CertificatesV1().CertificateSigningRequests().Delete(ctx, csr.Name, metav1.DeleteOptions{}); err != nil && !strings.Contains(err.Error(), "not found") {
				t.Logf("delete CSR %s of %s: %v", csr.Name, name, err)
			}
		}
	}
}

// Run runs a command on a host and logs it with its duration.
func (c *Cluster) Run(t *testing.T, host string, argv ...string) lab.Result {
	t.Helper()
	r := c.Exec(context.Background(), host, argv...)
	t.Logf("%s$ %s  (exit %d, %s)", host, strings.Join(argv, " "), r.ExitCode, r.Duration.Round(time.Millisecond))
	return r
}

// MustRun is Run that fails the test on a non-zero exit.
func (c *Cluster) MustRun(t *testing.T, host string, argv ...string) lab.Result {
	t.Helper()
	r := c.Run(t, host, argv...)
	if r.Err != nil {
		t.Fatalf("%v", r.Error())
	}
	return r
}

// WaitNodeCondition waits until Node name has condition typ with status, and returns the
// Node as last seen.
func (c *Cluster) WaitNodeCondition(t *testing.T, name string, typ corev1.NodeConditionType, status corev1.ConditionStatus, timeout time.Duration) *corev1.Node {
	t.Helper()
	var last *corev1.Node
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		last = n
		for _, cond := range n.Status.Conditions {
			if cond.Type == typ && cond.Status == status {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		desc := "not registered"
		if last != nil {
			desc = fmt.Sprintf("conditions %+v", last.Status.Conditions)
		}
		t.Fatalf("node %s: no %s=%s within %s: %s", name, typ, status, timeout, desc)
	}
	return last
}
