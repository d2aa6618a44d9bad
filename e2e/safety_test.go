//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"

	"kjoin.dev/kjoin/e2e/framework"
	"kjoin.dev/kjoin/e2e/lab"
	"kjoin.dev/kjoin/output"
)

// TestFullDiskMidJoin: a worker join paused after its CSR is created finds /etc/kubernetes (a
// 256 KiB tmpfs on w7) full when it installs the kubelet's identity. It fails with exit 3
// naming the path and ENOSPC, leaves no empty, partial or temporary file, keeps its pending
// key intact, and once space is freed the same command converges on that very CSR's
// certificate (no second CSR).
func TestFullDiskMidJoin(t *testing.T) {
	c := framework.Get(t)
	c.Host(t, "w7")
	c.MustRun(t, "w7", "mount", "-t", "tmpfs", "-o", "size=256k,mode=0755", "tmpfs", "/etc/kubernetes")
	t.Cleanup(func() { c.Run(t, "w7", "umount", "-l", "/etc/kubernetes") })
	start := time.Now()
	p := startPaused(t, c, "w7", "tls-bootstrap/csr-created", "")

	// Fill the filesystem, and prove it is full.
	c.Run(t, "w7", "dd", "if=/dev/zero", "of=/etc/kubernetes/filler", "bs=4k")
	avail := c.MustRun(t, "w7", "df", "--output=avail", "/etc/kubernetes")
	if f := strings.Fields(avail.Stdout); len(f) != 2 || f[1] != "0" {
		t.Fatalf("/etc/kubernetes is not full: %q", avail.Stdout)
	}
	keyBefore := c.MustRun(t, "w7", "cat", "/var/lib/kubelet/pki/kjoin-pending-client.key").Stdout

	p.release(t)
	r := p.wait(t)
	out := framework.Answer[output.JoinResult](t, r)
	if r.ExitCode != 3 || out.Error == nil || !strings.Contains(out.Error.Message, "/etc/kubernetes/") || !strings.Contains(out.Error.Message, "no space left on device") {
		t.Fatalf("full disk: exit %d %s; want exit 3 naming a path under /etc/kubernetes and ENOSPC\n%s", r.ExitCode, r.Stdout, framework.Tail(r.Stderr, 20))
	}
	t.Logf("the join said: %s", out.Error.Message)
	files := c.MustRun(t, "w7", "find", "/etc/kubernetes", "/var/lib/kubelet", "/var/lib/kjoin", "-type", "f", "!", "-name", "filler", "-printf", "%s %p\n")
	for _, l := range strings.Split(strings.TrimSpace(files.Stdout), "\n") {
		size, name, _ := strings.Cut(l, " ")
		if size == "0" || strings.Contains(name, ".tmp-") {
			t.Errorf("the full disk left %s (%s bytes)", name, size)
		}
	}
	if keyAfter := c.MustRun(t, "w7", "cat", "/var/lib/kubelet/pki/kjoin-pending-client.key").Stdout; keyAfter != keyBefore || !strings.Contains(keyAfter, "PRIVATE KEY") {
		t.Error("the pending key changed or is not a key")
	}

	c.MustRun(t, "w7", "rm", "/etc/kubernetes/filler")
	again := rerun(t, c, "w7", "")
	// The re-run finishes with the interrupted join's certificate (installed, or its CSR
	// resumed): no second CSR is made (assertKubeletCSRIssued: exactly that one since start).
	if out.CSR == "" || (again.CSR != "" && again.CSR != out.CSR) {
		t.Errorf("the re-run used CSR %q, want the interrupted join's %q", again.CSR, out.CSR)
	}
	c.WaitNodeCondition(t, "w7", corev1.NodeReady, corev1.ConditionTrue, 2*time.Minute)
	assertKubeletCSRIssued(t, c, "w7", start, out.CSR)
}

// TestEtcdDataDirOfAnotherMember: a control-plane join into a host whose etcd data directory
// holds another member's data is refused by kubeadm's DirAvailable check, the data intact.
// Told to ignore that check, the join's learner cannot start on that data; the join fails in
// etcd-join, removes its learner and its manifest, and leaves every file it did not create.
func TestEtcdDataDirOfAnotherMember(t *testing.T) {
	c := framework.Get(t)
	c.Host(t, "cp2")
	key, err := c.UploadCerts(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	decoys := map[string]string{
		"/var/lib/etcd/member/snap/db":        "another member's database",
		"/var/lib/etcd/backup.db":             "an operator's backup",
		"/etc/kubernetes/pki/operator-ca.crt": "an operator's extra CA",
		"/var/lib/kubelet/operator-note":      "an operator's note",
	}
	for p, content := range decoys {
		hp := c.HostPath("cp2", p)
		if err := os.MkdirAll(hp[:strings.LastIndex(hp, "/")], 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(hp, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	intact := func(when string) {
		t.Helper()
		for p, content := range decoys {
			if b, err := os.ReadFile(c.HostPath("cp2", p)); err != nil || string(b) != content {
				t.Errorf("%s: %s was deleted or changed (%v)", when, p, err)
			}
		}
	}

	refused := kjoinControlPlane(t, c, "cp2", key, "-o", "json")
	out := framework.Answer[output.JoinResult](t, refused)
	if refused.ExitCode != 3 || out.Error == nil || !strings.Contains(out.Error.Message, "[ERROR DirAvailable--var-lib-etcd]") {
		t.Fatalf("want exit 3 naming DirAvailable--var-lib-etcd, got exit %d: %s", refused.ExitCode, refused.Stdout)
	}
	intact("after the refused join")
	if _, ok := memberOn(t, c, "cp2"); ok {
		t.Fatal("the refused join added an etcd member")
	}

	// A journal naming someone else's etcd lease (one with another key attached, as the API
	// server's are): the join must not revoke it.
	cli, err := c.Etcd()
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	decoyLease, err := cli.Grant(ctx, 600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "/kjoin-test/not-the-join-lock", "x", clientv3.WithLease(decoyLease.ID)); err != nil {
		t.Fatal(err)
	}
	journal := fmt.Sprintf(`{"node":"cp2","role":"control-plane","completedPhases":[],"files":[],"etcdLockLease":%d}`, decoyLease.ID)
	if err := os.MkdirAll(c.HostPath("cp2", "/var/lib/kjoin"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.HostPath("cp2", "/var/lib/kjoin/journal.json"), []byte(journal), 0o600); err != nil {
		t.Fatal(err)
	}

	writeToken(t, c, "cp2", lab.Token)
	failed := c.Run(t, "cp2", "kjoin", "join", "--config", writeJoinConfig(t, c, "cp2", controlPlaneConfig(c, "cp2", key, "20s")), "--ignore-preflight-errors=DirAvailable--var-lib-etcd", "-o", "json", "-v", "1")
	fout := framework.Answer[output.JoinResult](t, failed)
	if failed.ExitCode == 0 || fout.Error == nil || !strings.Contains(fout.Error.Message, "etcd-join") {
		t.Fatalf("want the join to fail in etcd-join, got exit %d: %s\n%s", failed.ExitCode, failed.Stdout, framework.Tail(failed.Stderr, 20))
	}
	if !strings.Contains(failed.Stderr, "kept /var/lib/etcd") {
		t.Errorf("the join does not say it kept the data directory:\n%s", framework.Tail(failed.Stderr, 20))
	}
	intact("after the failed etcd-join")
	if ttl := leaseTTL(t, c, int64(decoyLease.ID)); ttl <= 0 {
		t.Errorf("the join revoked lease %x, which holds no join lock (TTL %d)", decoyLease.ID, ttl)
	}
	if _, ok := memberOn(t, c, "cp2"); ok {
		t.Error("the failed join left its learner in etcd")
	}
	if _, err := os.Stat(c.HostPath("cp2", "/etc/kubernetes/manifests/etcd.yaml")); err == nil {
		t.Error("the failed join left its etcd manifest")
	}
}
