//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/cluster-bootstrap/token/jws"

	"kjoin.dev/kjoin/e2e/framework"
	"kjoin.dev/kjoin/e2e/lab"
	"kjoin.dev/kjoin/output"
)

// forwardPort is where a TCP forward on cp1 makes a second address of cp1's API server.
const forwardPort = 16443

// TestEndpointMove moves nodes to a second address of the same API server (a forward on cp1,
// at cp1's own address, which the API server's certificate names): an address that is not
// this cluster is refused with nothing changed; a worker moves and its kubelet reconnects
// through the new address; the cluster's records move, and later kjoin and kubeadm joins
// use the new address; the Ansible play moves every node (cp1, a kjoin-joined cp2, workers
// kjoin and kubeadm joined) and every worker's kubelet renews its Lease through it.
func TestEndpointMove(t *testing.T) {
	c := framework.Get(t)
	cp1 := c.Hosts["cp1"].IP
	to := net.JoinHostPort(cp1, strconv.Itoa(forwardPort))
	c.Host(t, "w6")
	if r := kjoinJoin(t, c, "w6"); r.Err != nil {
		t.Fatal(r.Error())
	}
	t.Cleanup(func() { c.Forget(t, "w6") })
	// Hosts for the later joins (made here: a host lives as long as the test that made it).
	c.Host(t, "w7")
	c.Host(t, "w8")
	// A control plane kjoin joined: the play moves it too.
	c.Host(t, "cp2")
	key, err := c.UploadCerts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if r := kjoinControlPlane(t, c, "cp2", key); r.Err != nil {
		t.Fatal(r.Error())
	}
	t.Cleanup(func() { c.Forget(t, "cp2") })
	cp2Files := namingEndpoint(t, c, "cp2", lab.Endpoint())
	if !slices.Contains(cp2Files, "/etc/kubernetes/admin.conf") {
		t.Fatalf("cp2's admin.conf does not name %s; its kubeconfigs naming it: %v", lab.Endpoint(), cp2Files)
	}
	c.MustRun(t, "cp1", "systemd-run", "--unit", "kjoin-lab-forward", "socat",
		"TCP-LISTEN:"+strconv.Itoa(forwardPort)+",fork,reuseaddr", "TCP:127.0.0.1:"+strconv.Itoa(lab.APIPort))
	t.Cleanup(func() { c.Run(t, "cp1", "systemctl", "stop", "kjoin-lab-forward") })
	if err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		conn, err := net.DialTimeout("tcp", to, time.Second)
		if err == nil {
			conn.Close()
		}
		return err == nil, nil
	}); err != nil {
		t.Fatalf("the forward to cp1's API server at %s never listened", to)
	}
	kubeletConf := func(host string) []byte {
		b, err := os.ReadFile(c.HostPath(host, "/etc/kubernetes/kubelet.conf"))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	before := kubeletConf("w6")
	pid := c.MustRun(t, "w6", "systemctl", "show", "-p", "MainPID", "--value", "kubelet").Stdout

	t.Run("an address that is not this cluster's API server is refused", func(t *testing.T) {
		// The kubelet's own port on cp1: TLS, but a certificate the cluster CA did not sign.
		r := c.Run(t, "w6", "kjoin", "endpoint", "move", net.JoinHostPort(cp1, "10250"), "-o", "json")
		res := framework.Answer[output.EndpointMoveResult](t, r)
		if r.ExitCode != 4 || res.Error == nil || !strings.Contains(res.Error.Message, "not signed by this node's cluster CA") || res.Changed {
			t.Fatalf("exit %d, answer %+v (error %+v): want exit 4 (trust), nothing changed", r.ExitCode, res, res.Error)
		}
		if string(kubeletConf("w6")) != string(before) {
			t.Error("kubelet.conf changed after a refused move")
		}
		if now := c.MustRun(t, "w6", "systemctl", "show", "-p", "MainPID", "--value", "kubelet").Stdout; now != pid {
			t.Errorf("the kubelet was restarted (pid %s -> %s) by a refused move", strings.TrimSpace(pid), strings.TrimSpace(now))
		}
	})

	t.Run("a worker moves and its kubelet reconnects through the new address", func(t *testing.T) {
		r := c.Run(t, "w6", "kjoin", "endpoint", "move", to, "--dry-run", "-o", "json")
		if plan := framework.Answer[output.EndpointMoveResult](t, r); r.ExitCode != 0 || plan.Changed || len(plan.PlannedActions) == 0 || string(kubeletConf("w6")) != string(before) {
			t.Fatalf("dry run: exit %d %+v; kubelet.conf changed: %v", r.ExitCode, plan, string(kubeletConf("w6")) != string(before))
		}
		start := time.Now()
		r = c.Run(t, "w6", "kjoin", "endpoint", "move", to, "-o", "json")
		res := framework.Answer[output.EndpointMoveResult](t, r)
		if r.ExitCode != 0 || !res.Changed || res.Identity != "system:node:w6" || strings.Join(res.Files, ",") != "/etc/kubernetes/kubelet.conf" ||
			strings.Join(res.Restarted, ",") != "kubelet" || res.LeaseRenewed == nil {
			c.DumpLogs(t, "w6")
			t.Fatalf("move: exit %d %+v\n%s", r.ExitCode, res, framework.Tail(r.Stderr, 20))
		}
		if got := serverOf(t, kubeletConf("w6")); got != "https://"+to {
			t.Errorf("kubelet.conf names %q, want https://%s", got, to)
		}
		// The kubelet's own connection goes to the new address.
		var conns string
		if err := wait.PollUntilContextTimeout(context.Background(), time.Second, time.Minute, true, func(context.Context) (bool, error) {
			conns = c.Run(t, "w6", "ss", "-Htnp", "state", "established", "dst", to).Stdout
			return strings.Contains(conns, `"kubelet"`), nil
		}); err != nil {
			t.Fatalf("no kubelet connection to %s on w6: %q", to, conns)
		}
		lease, err := c.Client.CoordinationV1().Leases("kube-node-lease").Get(context.Background(), "w6", metav1.GetOptions{})
		if err != nil || lease.Spec.RenewTime == nil || !lease.Spec.RenewTime.After(start) {
			t.Errorf("w6's Lease not renewed since the move: %v %+v", err, lease)
		}
		c.WaitNodeCondition(t, "w6", corev1.NodeReady, corev1.ConditionTrue, time.Minute)
	})

	t.Run("the Ansible play moves a node back, then changes nothing", func(t *testing.T) {
		if _, err := exec.LookPath("ansible-playbook"); err != nil {
			t.Fatal("ansible-playbook is not installed (e2e/scripts/install-deps.sh installs ansible-core)")
		}
		inv := filepath.Join(t.TempDir(), "inventory.ini")
		content := fmt.Sprintf("[first_control_plane]\ncp1 ansible_become_method=su %s\n\n[workers]\nw6 ansible_become_method=su %s\n", c.AnsibleHost("cp1"), c.AnsibleHost("w6"))
		if err := os.WriteFile(inv, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		back := []string{"--limit", "w6", "-e", "kjoin_new_endpoint=" + lab.Endpoint()}
		check, _ := runPlaybookFile(t, c, "move-endpoint.yml", inv, false, append(back, "--check")...)
		if recapOf(t, check, "w6").changed == "0" || serverOf(t, kubeletConf("w6")) != "https://"+to {
			t.Errorf("--check: recap %+v, kubelet.conf names %q: want would-change, nothing changed", check["w6"], serverOf(t, kubeletConf("w6")))
		}
		first, _ := runPlaybookFile(t, c, "move-endpoint.yml", inv, false, back...)
		if recapOf(t, first, "w6").changed == "0" || serverOf(t, kubeletConf("w6")) != "https://"+lab.Endpoint() {
			t.Errorf("first run: recap %+v, kubelet.conf names %q", first["w6"], serverOf(t, kubeletConf("w6")))
		}
		second, _ := runPlaybookFile(t, c, "move-endpoint.yml", inv, false, back...)
		if r := recapOf(t, second, "w6"); r.changed != "0" || r.failed != "0" {
			t.Errorf("second run: %+v, want unchanged", r)
		}
		c.WaitNodeCondition(t, "w6", corev1.NodeReady, corev1.ConditionTrue, time.Minute)
	})

	outer := t // what this subtest changes to the cluster stays for the next one, and is undone at the end
	t.Run("the cluster's records move, and later joins use the new address", func(t *testing.T) {
		saveCluster(outer, c)
		r := c.Run(t, "cp1", "kjoin", "endpoint", "move", to, "--update-cluster", "-o", "json")
		res := framework.Answer[output.EndpointMoveResult](t, r)
		if r.ExitCode != 0 || strings.Join(res.ClusterObjects, ",") != "kube-system/kubeadm-config,kube-public/cluster-info" {
			t.Fatalf("move --update-cluster: exit %d %+v\n%s", r.ExitCode, res, framework.Tail(r.Stderr, 20))
		}
		cm, err := c.Client.CoreV1().ConfigMaps("kube-public").Get(context.Background(), "cluster-info", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		id, secret, _ := strings.Cut(lab.Token, ".")
		if got := serverOf(t, []byte(cm.Data["kubeconfig"])); got != "https://"+to || !jws.DetachedTokenIsValid(cm.Data["jws-kubeconfig-"+id], cm.Data["kubeconfig"], id, secret) {
			t.Errorf("cluster-info names %q, signed for the lab token: %v", got, jws.DetachedTokenIsValid(cm.Data["jws-kubeconfig-"+id], cm.Data["kubeconfig"], id, secret))
		}
		kc, err := c.Client.CoreV1().ConfigMaps("kube-system").Get(context.Background(), "kubeadm-config", metav1.GetOptions{})
		if err != nil || !strings.Contains(kc.Data["ClusterConfiguration"], "controlPlaneEndpoint: "+to) {
			t.Errorf("kubeadm-config: %v\n%s", err, kc.Data["ClusterConfiguration"])
		}
		// A later kjoin join and a later kubeadm join, given the old address, hand their
		// kubelets the new one (cluster-info's server).
		if r := kjoinJoin(t, c, "w7"); r.Err != nil {
			t.Fatal(r.Error())
		}
		c.MustRun(t, "w8", "kubeadm", "join", lab.Endpoint(), "--token", lab.Token, "--discovery-token-ca-cert-hash", c.CAHash, "--ignore-preflight-errors=all")
		for _, h := range []string{"w7", "w8"} {
			if got := serverOf(t, kubeletConf(h)); got != "https://"+to {
				t.Errorf("%s's kubelet.conf names %q, want https://%s", h, got, to)
			}
			c.WaitNodeCondition(t, h, corev1.NodeReady, corev1.ConditionTrue, 2*time.Minute)
		}
	})

	t.Run("the Ansible play moves every node, then changes nothing", func(t *testing.T) {
		// cp1 and the cluster's records moved already; cp2 (kjoin-joined) and w6 (moved back)
		// name the old address; w7 (kjoin) and w8 (kubeadm) joined with the new one.
		inv := filepath.Join(t.TempDir(), "inventory.ini")
		content := "[first_control_plane]\ncp1 ansible_become_method=su " + c.AnsibleHost("cp1") + "\n\n[control_planes]\n"
		for _, h := range []string{"cp1", "cp2"} {
			content += h + " ansible_become_method=su " + c.AnsibleHost(h) + "\n"
		}
		content += "\n[workers]\n"
		for _, h := range []string{"w6", "w7", "w8"} {
			content += h + " ansible_become_method=su " + c.AnsibleHost(h) + "\n"
		}
		if err := os.WriteFile(inv, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		first, _ := runPlaybookFile(t, c, "move-endpoint.yml", inv, false, "-e", "kjoin_new_endpoint="+to)
		for h, moves := range map[string]bool{"cp1": false, "cp2": true, "w6": true, "w7": false, "w8": false} {
			if r := recapOf(t, first, h); (r.changed != "0") != moves || r.failed != "0" {
				t.Errorf("%s: recap %+v, want changed %v", h, r, moves)
			}
		}
		for _, f := range cp2Files {
			b, err := os.ReadFile(c.HostPath("cp2", f))
			if err != nil || serverOf(t, b) != "https://"+to {
				t.Errorf("cp2's %s: want https://%s: %v", f, to, err)
			}
		}
		// Every worker's kubelet talks to the new address, and its Lease renews after the play.
		for _, h := range []string{"w6", "w7", "w8"} {
			if got := serverOf(t, kubeletConf(h)); got != "https://"+to {
				t.Errorf("%s's kubelet.conf names %q, want https://%s", h, got, to)
			}
			var conns string
			if err := wait.PollUntilContextTimeout(context.Background(), time.Second, time.Minute, true, func(context.Context) (bool, error) {
				conns = c.Run(t, h, "ss", "-Htnp", "state", "established", "dst", to).Stdout
				return strings.Contains(conns, `"kubelet"`), nil
			}); err != nil {
				t.Errorf("no kubelet connection to %s on %s: %q", to, h, conns)
			}
			if err := wait.PollUntilContextTimeout(context.Background(), time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
				l, err := c.Client.CoordinationV1().Leases("kube-node-lease").Get(ctx, h, metav1.GetOptions{})
				return err == nil && l.Spec.RenewTime != nil && l.Spec.RenewTime.After(start), nil
			}); err != nil {
				t.Errorf("%s's Lease was not renewed after the play", h)
			}
		}
		again, _ := runPlaybookFile(t, c, "move-endpoint.yml", inv, false, "-e", "kjoin_new_endpoint="+to)
		for _, h := range []string{"cp1", "cp2", "w6", "w7", "w8"} {
			if r := recapOf(t, again, h); r.changed != "0" || r.failed != "0" {
				t.Errorf("second run, %s: %+v, want unchanged", h, r)
			}
		}
	})
}

// namingEndpoint lists host's kubeconfigs in /etc/kubernetes whose server is https://endpoint.
func namingEndpoint(t *testing.T, c *framework.Cluster, host, endpoint string) []string {
	t.Helper()
	var out []string
	for _, f := range []string{"admin.conf", "super-admin.conf", "kubelet.conf", "controller-manager.conf", "scheduler.conf"} {
		p := "/etc/kubernetes/" + f
		if b, err := os.ReadFile(c.HostPath(host, p)); err == nil && serverOf(t, b) == "https://"+endpoint {
			out = append(out, p)
		}
	}
	return out
}

// saveCluster keeps what the cluster move changes (cp1's kubeconfigs, kubeadm-config,
// cluster-info) and puts it back when the test ends, with the lab's own tools.
func saveCluster(t *testing.T, c *framework.Cluster) {
	t.Helper()
	files := map[string][]byte{}
	for _, p := range []string{"/etc/kubernetes/kubelet.conf", "/etc/kubernetes/admin.conf", "/etc/kubernetes/super-admin.conf",
		"/etc/kubernetes/controller-manager.conf", "/etc/kubernetes/scheduler.conf"} {
		if b, err := os.ReadFile(c.HostPath("cp1", p)); err == nil {
			files[p] = b
		}
	}
	ctx := context.Background()
	kc, err1 := c.Client.CoreV1().ConfigMaps("kube-system").Get(ctx, "kubeadm-config", metav1.GetOptions{})
	ci, err2 := c.Client.CoreV1().ConfigMaps("kube-public").Get(ctx, "cluster-info", metav1.GetOptions{})
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	t.Cleanup(func() {
		for p, b := range files {
			if err := os.WriteFile(c.HostPath("cp1", p), b, 0o600); err != nil {
				t.Errorf("restore %s: %v", p, err)
			}
		}
		c.Run(t, "cp1", "systemctl", "restart", "kubelet")
		for _, cm := range []*corev1.ConfigMap{kc, ci} {
			err := wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
				now, err := c.Client.CoreV1().ConfigMaps(cm.Namespace).Get(ctx, cm.Name, metav1.GetOptions{})
				if err != nil {
					return false, nil
				}
				now.Data[keyOf(cm)] = cm.Data[keyOf(cm)]
				_, err = c.Client.CoreV1().ConfigMaps(cm.Namespace).Update(ctx, now, metav1.UpdateOptions{})
				return err == nil, nil
			})
			if err != nil {
				t.Errorf("restore %s/%s: %v", cm.Namespace, cm.Name, err)
			}
		}
		// Later tests' discoveries need the restored cluster-info signed for the lab token.
		id, secret, _ := strings.Cut(lab.Token, ".")
		if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			now, err := c.Client.CoreV1().ConfigMaps("kube-public").Get(ctx, "cluster-info", metav1.GetOptions{})
			return err == nil && now.Data["kubeconfig"] == ci.Data["kubeconfig"] && jws.DetachedTokenIsValid(now.Data["jws-kubeconfig-"+id], now.Data["kubeconfig"], id, secret), nil
		}); err != nil {
			t.Errorf("the restored cluster-info was not signed again for the lab token: %v", err)
		}
		c.WaitNodeCondition(t, "cp1", corev1.NodeReady, corev1.ConditionTrue, 2*time.Minute)
	})
}

func keyOf(cm *corev1.ConfigMap) string {
	if cm.Name == "cluster-info" {
		return "kubeconfig"
	}
	return "ClusterConfiguration"
}

func serverOf(t *testing.T, kubeconfig []byte) string {
	t.Helper()
	kc, err := clientcmd.Load(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, cl := range kc.Clusters {
		return cl.Server
	}
	return ""
}
