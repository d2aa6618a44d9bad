//go:build e2e

package e2e

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"kjoin.dev/kjoin/e2e/framework"
	"kjoin.dev/kjoin/output"
	"kjoin.dev/kjoin/pki"
)

func runDiagnose(t *testing.T, c *framework.Cluster, host string) (output.DiagnoseReport, int) {
	t.Helper()
	r := c.Run(t, host, "kjoin", "diagnose", "-o", "json")
	var out output.DiagnoseReport
	if err := json.Unmarshal([]byte(r.Stdout), &out); err != nil {
		t.Fatalf("kjoin diagnose output is not JSON: %v\n%s\n%s", err, r.Stdout, r.Stderr)
	}
	return out, r.ExitCode
}

// waitDiagnosis runs kjoin diagnose on host until its verdict names want ("" = healthy).
func waitDiagnosis(t *testing.T, c *framework.Cluster, host, want string, timeout time.Duration) output.DiagnoseReport {
	t.Helper()
	var last output.DiagnoseReport
	var code int
	deadline := time.Now().Add(timeout)
	for {
		last, code = runDiagnose(t, c, host)
		if want == "" && last.Verdict.Healthy && code == 0 {
			return last
		}
		if want != "" && last.Verdict.CheckID == want && code == 8 {
			t.Logf("diagnose on %s: %s (%s); next: %s", host, last.Verdict.Cause, last.Verdict.CheckID, last.Verdict.Next)
			return last
		}
		if time.Now().After(deadline) {
			for _, ch := range last.Checks {
				t.Logf("  %s %s: %s (%s)", ch.Status, ch.ID, ch.Summary, ch.Evidence)
			}
			t.Fatalf("diagnose on %s: verdict %+v (exit %d), want %q within %s", host, last.Verdict, code, want, timeout)
		}
		time.Sleep(2 * time.Second)
	}
}

// TestDiagnoseFaults injects real faults on a joined worker, proves each happened, and checks
// that kjoin diagnose names it; after each repair the node is healthy again and diagnose says so.
func TestDiagnoseFaults(t *testing.T) {
	c := framework.Get(t)
	h := c.Host(t, "w7")
	if r := kjoinJoin(t, c, "w7"); r.Err != nil {
		t.Fatalf("%v", r.Error())
	}
	c.WaitNodeCondition(t, "w7", corev1.NodeReady, corev1.ConditionTrue, 2*time.Minute)
	waitDiagnosis(t, c, "w7", "", time.Minute)
	healthy := func(t *testing.T) {
		t.Helper()
		c.WaitNodeCondition(t, "w7", corev1.NodeReady, corev1.ConditionTrue, 3*time.Minute)
		waitDiagnosis(t, c, "w7", "", 2*time.Minute)
	}
	_ = h

	t.Run("kubelet stopped", func(t *testing.T) {
		c.MustRun(t, "w7", "systemctl", "stop", "kubelet")
		if r := c.Run(t, "w7", "systemctl", "is-active", "kubelet"); r.ExitCode == 0 {
			t.Fatal("the kubelet still runs: the fault was not injected")
		}
		waitDiagnosis(t, c, "w7", "kubelet.service", 30*time.Second)
		c.MustRun(t, "w7", "systemctl", "start", "kubelet")
		healthy(t)
	})
	t.Run("kubelet crash loop", func(t *testing.T) {
		cfg := c.HostPath("w7", "/var/lib/kubelet/config.yaml")
		good, err := os.ReadFile(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(cfg, []byte("kind: KubeletConfiguration\nnot yaml: [\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		c.MustRun(t, "w7", "systemctl", "restart", "kubelet")
		// Prove the fault through systemd itself: the unit restarts the kubelet (every 10 s,
		// the package unit's RestartSec) and it exits again.
		deadline := time.Now().Add(60 * time.Second)
		for {
			show := c.Run(t, "w7", "systemctl", "show", "kubelet", "--property", "NRestarts", "--value")
			n, _ := strconv.Atoi(strings.TrimSpace(show.Stdout))
			log := c.Run(t, "w7", "journalctl", "-u", "kubelet", "-n", "50", "--no-pager", "-o", "cat").Stdout
			if n >= 2 && strings.Contains(log, "failed to load kubelet config file") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the broken config.yaml did not make systemd restart the kubelet twice (NRestarts=%d):\n%s", n, framework.Tail(log, 20))
			}
			time.Sleep(time.Second)
		}
		out := waitDiagnosis(t, c, "w7", "kubelet.crashloop", time.Minute)
		for _, ch := range out.Checks {
			if ch.ID == "kubelet.crashloop" && !strings.Contains(ch.Evidence, "failed to load kubelet config file") {
				t.Errorf("the crash loop does not name the error the kubelet exits with: %s", ch.Evidence)
			}
		}
		if err := os.WriteFile(cfg, good, 0o644); err != nil {
			t.Fatal(err)
		}
		c.MustRun(t, "w7", "systemctl", "restart", "kubelet")
		healthy(t)
	})
	check := func(out output.DiagnoseReport, id string) (status, evidence string) {
		for _, ch := range out.Checks {
			if ch.ID == id {
				return ch.Status, ch.Evidence
			}
		}
		return "missing", ""
	}
	// A unit failed for good: a runtime drop-in takes away Restart=, then SIGKILL. systemd
	// itself says failed, and diagnose quotes it.
	t.Run("kubelet unit failed", func(t *testing.T) {
		const dropIn = "/run/systemd/system/kubelet.service.d/99-lab-fault.conf"
		c.MustRun(t, "w7", "sh", "-c", "mkdir -p /run/systemd/system/kubelet.service.d && printf '[Service]\\nRestart=no\\n' > "+dropIn)
		defer func() { // repaired even when the subtest fails, so the next one starts healthy
			c.Run(t, "w7", "rm", "-f", dropIn)
			c.Run(t, "w7", "systemctl", "daemon-reload")
			c.Run(t, "w7", "systemctl", "reset-failed", "kubelet")
			c.Run(t, "w7", "systemctl", "start", "kubelet")
			healthy(t)
		}()
		c.MustRun(t, "w7", "systemctl", "daemon-reload")
		c.MustRun(t, "w7", "systemctl", "kill", "--signal=SIGKILL", "kubelet")
		deadline := time.Now().Add(30 * time.Second)
		for {
			st := c.Run(t, "w7", "systemctl", "show", "kubelet", "--property", "ActiveState,Result").Stdout
			if strings.Contains(st, "ActiveState=failed") && strings.Contains(st, "Result=signal") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the kubelet unit did not fail: the fault was not injected:\n%s", st)
			}
			time.Sleep(200 * time.Millisecond)
		}
		out := waitDiagnosis(t, c, "w7", "kubelet.service", 30*time.Second)
		if _, ev := check(out, "kubelet.service"); !strings.Contains(ev, "systemd: failed/failed, result signal") {
			t.Errorf("kubelet.service evidence does not say how systemd saw it fail: %q", ev)
		}
	})
	// The kubelet's drop-in gone (kubeadm's, this host's package layout): after a restart the
	// package unit starts a bare kubelet that never reads the join's files (standalone, or
	// exiting at start: either way the unit is what is wrong).
	t.Run("kubelet drop-in removed", func(t *testing.T) {
		const dropIn, parked = "/usr/lib/systemd/system/kubelet.service.d/10-kubeadm.conf", "/root/10-kubeadm.conf.parked"
		c.MustRun(t, "w7", "mv", dropIn, parked)
		defer func() {
			c.Run(t, "w7", "mv", parked, dropIn)
			c.Run(t, "w7", "systemctl", "daemon-reload")
			c.Run(t, "w7", "systemctl", "restart", "kubelet")
			healthy(t)
		}()
		c.MustRun(t, "w7", "systemctl", "daemon-reload")
		c.MustRun(t, "w7", "systemctl", "restart", "kubelet")
		// Proven by systemd: the unit has no drop-in and starts the kubelet with no arguments.
		show := c.MustRun(t, "w7", "systemctl", "show", "kubelet", "--property", "DropInPaths,ExecStart").Stdout
		if !strings.Contains(show, "DropInPaths=\n") || !strings.Contains(show, "argv[]=/usr/bin/kubelet ;") {
			t.Fatalf("the kubelet unit still has its drop-in: the fault was not injected:\n%s", show)
		}
		out := waitDiagnosis(t, c, "w7", "kubelet.flags", 30*time.Second)
		if _, ev := check(out, "kubelet.flags"); !strings.Contains(ev, "drop-ins: none") {
			t.Errorf("kubelet.flags evidence does not show the missing drop-in: %q", ev)
		}
	})
	// A wedged kubelet: the process lives (systemd says active) but answers nothing.
	t.Run("kubelet wedged", func(t *testing.T) {
		c.MustRun(t, "w7", "systemctl", "kill", "--signal=SIGSTOP", "kubelet")
		defer c.MustRun(t, "w7", "systemctl", "kill", "--signal=SIGCONT", "kubelet")
		pid := strings.TrimSpace(c.MustRun(t, "w7", "systemctl", "show", "kubelet", "--property", "MainPID", "--value").Stdout)
		if st, _ := os.ReadFile(c.HostPath("w7", "/proc/"+pid+"/stat")); !strings.Contains(string(st), ") T ") {
			t.Fatalf("the kubelet is not stopped: the fault was not injected: %q", st)
		}
		out := waitDiagnosis(t, c, "w7", "kubelet.healthz", 30*time.Second)
		if _, ev := check(out, "kubelet.healthz"); !strings.Contains(ev, "is stopped (state T)") {
			t.Errorf("kubelet.healthz evidence does not name the stopped process: %q", ev)
		}
		if st, _ := check(out, "kubelet.service"); st != "pass" {
			t.Errorf("systemd sees the wedged kubelet active, diagnose says kubelet.service %s", st)
		}
	})
	// A disabled unit: the kubelet runs now, but not after a reboot.
	t.Run("kubelet unit disabled", func(t *testing.T) {
		healthy(t)
		c.MustRun(t, "w7", "systemctl", "disable", "kubelet")
		defer c.MustRun(t, "w7", "systemctl", "enable", "kubelet")
		if r := c.Run(t, "w7", "systemctl", "is-enabled", "kubelet"); strings.TrimSpace(r.Stdout) != "disabled" {
			t.Fatalf("the unit is %q: the fault was not injected", r.Stdout)
		}
		out, _ := runDiagnose(t, c, "w7")
		if st, ev := check(out, "kubelet.enabled"); st != "warn" || !strings.Contains(ev, "UnitFileState=disabled") {
			t.Errorf("kubelet.enabled %s (%s), want a warning naming the disabled unit", st, ev)
		}
	})
	t.Run("containerd stopped", func(t *testing.T) {
		if err := c.StopContainerd("w7"); err != nil {
			t.Fatal(err)
		}
		// Proven by systemd and by the socket itself: the unit is inactive and nothing answers
		// on the socket (a stale socket file may stay, as on a real node).
		if st := c.Run(t, "w7", "systemctl", "show", "containerd", "--property", "ActiveState", "--value").Stdout; strings.TrimSpace(st) != "inactive" {
			t.Fatalf("containerd.service is %q: the fault was not injected", st)
		}
		if conn, err := net.Dial("unix", c.HostPath("w7", "/run/containerd/containerd.sock")); err == nil {
			conn.Close()
			t.Fatal("containerd's socket still answers: the fault was not injected")
		}
		out := waitDiagnosis(t, c, "w7", "cri.reachable", 30*time.Second)
		if st, _ := check(out, "cri.reachable"); st != "fail" {
			t.Errorf("cri.reachable is %s", st)
		}
		if err := c.StartContainerd(context.Background(), "w7"); err != nil {
			t.Fatal(err)
		}
		healthy(t)
	})
	t.Run("CNI configuration removed", func(t *testing.T) {
		dir, saved := c.HostPath("w7", "/etc/cni/net.d"), c.HostPath("w7", "/etc/cni/saved")
		if err := os.MkdirAll(saved, 0o755); err != nil {
			t.Fatal(err)
		}
		entries, _ := os.ReadDir(dir)
		if len(entries) == 0 {
			t.Fatal("no CNI configuration to remove")
		}
		for _, e := range entries {
			if err := os.Rename(filepath.Join(dir, e.Name()), filepath.Join(saved, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
		waitDiagnosis(t, c, "w7", "cni.config", 30*time.Second)
		c.WaitNodeCondition(t, "w7", corev1.NodeReady, corev1.ConditionFalse, 2*time.Minute)
		// Repair: put the configuration back and restart the runtime, which then loads it.
		for _, e := range entries {
			if err := os.Rename(filepath.Join(saved, e.Name()), filepath.Join(dir, e.Name())); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.StopContainerd("w7"); err != nil {
			t.Fatal(err)
		}
		if err := c.StartContainerd(context.Background(), "w7"); err != nil {
			t.Fatal(err)
		}
		healthy(t)
	})
	t.Run("API server unreachable", func(t *testing.T) {
		cp1 := c.Hosts["cp1"].IP
		rule := []string{"OUTPUT", "-d", cp1, "-p", "tcp", "--dport", "6443", "-j", "DROP"}
		c.MustRun(t, "w7", append([]string{"iptables", "-I"}, rule...)...)
		defer c.Run(t, "w7", append([]string{"iptables", "-D"}, rule...)...)
		if r := c.Run(t, "w7", "iptables", "-C", rule[0], rule[1], rule[2], rule[3], rule[4], rule[5], rule[6], rule[7], rule[8]); r.ExitCode != 0 {
			t.Fatalf("the DROP rule is not in w7's network namespace: %s", r.Stderr)
		}
		out := waitDiagnosis(t, c, "w7", "api.tcp", 30*time.Second)
		local := 0
		for _, ch := range out.Checks {
			if (ch.ID == "kubelet.service" || ch.ID == "cri.runtime" || ch.ID == "cni.config") && ch.Status == "pass" {
				local++
			}
		}
		if local != 3 {
			t.Errorf("the local checks did not all run while the API server was unreachable: %+v", out.Checks)
		}
		// The fault is real, seen by another program than kjoin: a TCP connect from w7 to the
		// API server times out. (The Node going Unknown, the cluster's view, takes the
		// controller-manager's 40 s grace and proves nothing more about the verdict.)
		probe := fmt.Sprintf("import socket\ntry:\n socket.create_connection((%q, 6443), timeout=2)\nexcept socket.timeout:\n print('timed out')\n", cp1)
		if r := c.Run(t, "w7", "python3", "-c", probe); !strings.Contains(r.Stdout, "timed out") {
			t.Fatalf("w7 still reaches %s:6443 (the fault was not injected): %s %s", cp1, r.Stdout, r.Stderr)
		}
		c.MustRun(t, "w7", append([]string{"iptables", "-D"}, rule...)...)
		healthy(t)
	})
	t.Run("client certificate expired", func(t *testing.T) {
		caPEM, err1 := c.ReadFile("cp1", "/etc/kubernetes/pki/ca.crt")
		caKeyPEM, err2 := c.ReadFile("cp1", "/etc/kubernetes/pki/ca.key")
		current := c.HostPath("w7", "/var/lib/kubelet/pki/kubelet-client-current.pem")
		target, err3 := os.Readlink(current)
		nodePEM, err4 := os.ReadFile(c.HostPath("w7", target))
		if err := firstErr(err1, err2, err3, err4); err != nil {
			t.Fatal(err)
		}
		ca, _ := pki.ParseCert(caPEM)
		caKey, err := pki.ParseKey(caKeyPEM)
		if err != nil {
			t.Fatal(err)
		}
		nodeKey, err := pki.ParseKey(nodePEM)
		if err != nil {
			t.Fatal(err)
		}
		now := time.Now()
		expired, err := pki.NewSignedCert(pki.CertConfig{CommonName: "system:node:w7", Organization: []string{"system:nodes"},
			Usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, NotBefore: now.Add(-48 * time.Hour), NotAfter: now.Add(-time.Hour)}, nodeKey.Public(), ca, caKey)
		if err != nil {
			t.Fatal(err)
		}
		keyPEM, _ := pki.EncodeKey(nodeKey)
		if err := os.WriteFile(c.HostPath("w7", "/var/lib/kubelet/pki/kubelet-client-expired.pem"), append(pki.EncodeCert(expired), keyPEM...), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(current); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("/var/lib/kubelet/pki/kubelet-client-expired.pem", current); err != nil {
			t.Fatal(err)
		}
		restore := func() {
			_ = os.Remove(current)
			if err := os.Symlink(target, current); err != nil {
				t.Error(err)
			}
			c.Run(t, "w7", "systemctl", "restart", "kubelet")
		}
		restored := false
		defer func() { // a failed wait still gives w7 its certificate back for what follows
			if !restored {
				restore()
			}
		}()
		c.MustRun(t, "w7", "systemctl", "restart", "kubelet")
		out := waitDiagnosis(t, c, "w7", "cert.validity", 30*time.Second)
		for _, ch := range out.Checks {
			if ch.ID == "cert.validity" {
				t.Logf("cert.validity: %s (%s)", ch.Summary, ch.Evidence)
			}
		}
		restore()
		restored = true
		healthy(t)
	})
	if err := wait.PollUntilContextTimeout(context.Background(), time.Second, time.Minute, true, func(context.Context) (bool, error) {
		_, code := runVerify(t, c, "w7")
		return code == 0, nil
	}); err != nil {
		t.Errorf("kjoin verify w7 does not pass after the repairs: %v", err)
	}
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
