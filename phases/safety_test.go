package phases

import (
	"context"
	"os"
	"path"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/joinrequest"
	"kjoin.dev/kjoin/operr"
)

// decoys are files a join or reset never made; each test plants them and checks they survive.
type decoys map[string]string

func plant(t *testing.T, e *host.Env, d decoys) {
	t.Helper()
	for p, content := range d {
		writeHost(t, e, p, content, 0o600)
	}
}

func (d decoys) assertIntact(t *testing.T, e *host.Env) {
	t.Helper()
	for p, content := range d {
		if b, err := e.ReadFile(p); err != nil || string(b) != content {
			t.Errorf("decoy %s was deleted or changed (%v)", p, err)
		}
	}
}

// editClusterConfiguration replaces from with to in the cluster's kubeadm-config.
func editClusterConfiguration(t *testing.T, c *cpHost, from, to string) {
	t.Helper()
	cms := c.client.CoreV1().ConfigMaps("kube-system")
	cm, err := cms.Get(context.Background(), "kubeadm-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(cm.Data["ClusterConfiguration"], from) {
		t.Fatalf("kubeadm-config holds no %q", from)
	}
	cm.Data["ClusterConfiguration"] = strings.Replace(cm.Data["ClusterConfiguration"], from, to, 1)
	if _, err := cms.Update(context.Background(), cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// A control-plane join into a host whose etcd data directory holds another member's data is
// refused before anything is written (kubeadm's DirAvailable check), the data intact.
func TestControlPlaneJoinRefusesANonEmptyEtcdDataDir(t *testing.T) {
	t.Parallel()
	c := newCPHost(t)
	d := decoys{"/var/lib/etcd/member/snap/db": "another member", "/var/lib/etcd/backup.db": "operator's backup"}
	plant(t, c.env, d)
	_, err := Run(context.Background(), c.env, &State{Opts: c.options(t)}, Join, RunOptions{})
	if operr.CodeOf(err) != operr.Preflight || !strings.Contains(err.Error(), "[ERROR DirAvailable--var-lib-etcd]") {
		t.Fatalf("got %v; want exit 3 naming DirAvailable--var-lib-etcd", err)
	}
	d.assertIntact(t, c.env)
	for _, dir := range []string{host.KubernetesDir, host.KubeletDir} {
		if entries, _ := os.ReadDir(c.env.Paths.Of(dir)); len(entries) > 0 {
			t.Errorf("the refused join wrote into %s: %v", dir, entries)
		}
	}
	if len(c.etcd.Added) != 0 {
		t.Errorf("the refused join added etcd member %x", c.etcd.Added)
	}
}

// A data directory that is a system directory, or not one of etcd's own, is refused before
// anything is written; --ignore-preflight-errors=all does not make it usable.
func TestControlPlaneJoinRefusesASystemEtcdDataDir(t *testing.T) {
	t.Parallel()
	for _, dir := range []string{"/var/lib", "/", "/etc", "/home", "/usr", "/var", "/etc/kubernetes", "/var/lib/kubelet/etcd", "/var/lib/kubelet/../etcd-x/../kubelet"} {
		t.Run(dir, func(t *testing.T) {
			t.Parallel()
			c := newCPHost(t)
			d := decoys{"/var/lib/dpkg/status": "packages", "/home/op/notes": "notes", "/etc/important.conf": "x"}
			plant(t, c.env, d)
			editClusterConfiguration(t, c, "dataDir: /var/lib/etcd", "dataDir: "+dir)
			o := c.options(t)
			o.IgnorePreflight = map[string]bool{"all": true}
			_, err := Run(context.Background(), c.env, &State{Opts: o}, Join, RunOptions{})
			if operr.CodeOf(err) != operr.Preflight || !strings.Contains(err.Error(), "etcd data directory") {
				t.Fatalf("got %v; want exit 3 naming the etcd data directory", err)
			}
			d.assertIntact(t, c.env)
			if c.env.Exists(host.PKIDir) || len(c.etcd.Added) != 0 {
				t.Error("the refused join wrote certificates or added an etcd member")
			}
		})
	}
	c := newCPHost(t)
	if err := os.MkdirAll(c.env.Paths.Of("/srv"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(c.env.Paths.Of("/var/lib"), c.env.Paths.Of("/srv/etcd")); err != nil {
		t.Fatal(err)
	}
	if err := checkEtcdDataDir(c.env, "/srv/etcd"); err == nil || !strings.Contains(err.Error(), "symlink") {
		t.Errorf("a symlinked data directory: %v, want refused", err)
	}
	writeHost(t, c.env, "/srv/etcd-file", "x", 0o600)
	if err := checkEtcdDataDir(c.env, "/srv/etcd-file"); err == nil {
		t.Error("a data directory that is a file: accepted")
	}
	if err := checkEtcdDataDir(c.env, "/var/lib/etcd"); err != nil {
		t.Errorf("kubeadm's default: %v", err)
	}
}

// A failed etcd-join removes only what its learner wrote: member/ of a data directory the join
// found empty, never a directory that already held data (checks ignored by the operator).
func TestFailedEtcdJoinDeletesOnlyItsLearnersData(t *testing.T) {
	t.Parallel()
	fail := func(t *testing.T, c *cpHost, o joinrequest.Options) {
		t.Helper()
		c.etcd.PromoteRefusals = -1
		o.Timeouts.EtcdAPICall = 300 * 1e6
		// The learner's etcd writes its data once its manifest is there.
		started := c.etcd.Started
		c.etcd.Started = func() bool {
			if started() {
				_ = os.MkdirAll(c.env.Paths.Of("/var/lib/etcd/member/wal"), 0o700)
				_ = os.WriteFile(c.env.Paths.Of("/var/lib/etcd/member/wal/0.wal"), []byte("learner"), 0o600)
				return true
			}
			return false
		}
		_, err := Run(context.Background(), c.env, &State{Opts: o}, Join, RunOptions{})
		if operr.CodeOf(err) != operr.Timeout || len(c.etcd.Removed) != 1 {
			t.Fatalf("got %v, removed %x; want the learner removed after a timeout", err, c.etcd.Removed)
		}
	}
	t.Run("empty before: the learner's data goes", func(t *testing.T) {
		t.Parallel()
		c := newCPHost(t)
		fail(t, c, c.options(t))
		if c.env.Exists("/var/lib/etcd/member") || !c.env.Exists("/var/lib/etcd") {
			t.Error("the removed learner's member/ is left, or the data directory itself was removed")
		}
	})
	t.Run("data before: nothing goes", func(t *testing.T) {
		t.Parallel()
		c := newCPHost(t)
		d := decoys{"/var/lib/etcd/backup.db": "operator's backup", "/var/lib/etcd/member/snap/db": "earlier member"}
		plant(t, c.env, d)
		o := c.options(t)
		o.IgnorePreflight = map[string]bool{"diravailable--var-lib-etcd": true}
		fail(t, c, o)
		d.assertIntact(t, c.env)
	})
}

// With a journal, reset removes exactly the journal's files: an operator's static pod, an
// extra CA in pki/, an admin.conf and other kubelet pki files the join never wrote stay.
func TestResetWithJournalRemovesOnlyTheJournalsFiles(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	if _, err := Run(context.Background(), h.env, &State{Opts: h.options(t)}, Join, RunOptions{}); err != nil {
		t.Fatal(err)
	}
	d := decoys{
		"/etc/kubernetes/manifests/kube-vip.yaml": "operator's static pod", "/etc/kubernetes/pki/extra-ca.crt": "extra CA",
		"/etc/kubernetes/admin.conf": "operator's admin", "/var/lib/kubelet/pki/kubelet.crt": "serving", "/var/lib/kubelet/pki/other.pem": "other",
		"/etc/kubernetes/manifests/etcd.yaml": "not the join's", "/var/lib/kubelet/pki/kubelet-client-2026.pem": "not a rotation",
	}
	plant(t, h.env, d)
	j, _ := LoadJournal(h.env)
	rep, err := Reset(context.Background(), h.env, ResetOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	d.assertIntact(t, h.env)
	for _, f := range j.Files {
		if h.env.Exists(f) {
			t.Errorf("reset kept the join's %s", f)
		}
	}
	if len(rep.RemovedFiles) == 0 || h.env.Exists(JournalPath) {
		t.Errorf("removed %v, journal left %v", rep.RemovedFiles, h.env.Exists(JournalPath))
	}
}

// Without a journal (a node kubeadm joined), reset removes kubeadm's exact file names only.
func TestResetWithoutJournalRemovesKubeadmsFilesOnly(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	theirs := []string{host.KubeletKubeconfig, host.CACertPath, "/etc/kubernetes/manifests/kube-apiserver.yaml", "/etc/kubernetes/pki/apiserver.key",
		host.KubeletConfigPath, "/var/lib/kubelet/pki/kubelet-client-2026-11-30-10-00-00.pem"}
	for _, f := range theirs {
		writeHost(t, h.env, f, "kubeadm's", 0o600)
	}
	d := decoys{
		"/etc/kubernetes/manifests/kube-vip.yaml": "operator's static pod", "/etc/kubernetes/pki/extra-ca.crt": "extra CA",
		"/var/lib/kubelet/pki/kubelet.crt": "serving", "/var/lib/kubelet/pki/other.pem": "other", "/etc/kubernetes/notes": "notes",
		"/var/lib/kubelet/device-plugins/kubelet.sock": "plugin",
	}
	plant(t, h.env, d)
	if _, err := Reset(context.Background(), h.env, ResetOptions{}, nil); err != nil {
		t.Fatal(err)
	}
	d.assertIntact(t, h.env)
	for _, f := range theirs {
		if h.env.Exists(f) {
			t.Errorf("reset kept kubeadm's %s", f)
		}
	}
}

// Reset confines the etcd data directory of the manifest as a join does: with
// --data-dir=/var/lib nothing in /var/lib is touched, even when the data may go.
func TestResetConfinesTheEtcdDataDir(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	writeHost(t, h.env, "/etc/kubernetes/manifests/etcd.yaml", strings.Replace(etcdManifest, "--data-dir=/var/lib/etcd", "--data-dir=/var/lib", 1), 0o600)
	d := decoys{"/var/lib/dpkg/status": "packages", "/var/lib/member/x": "not etcd's"}
	plant(t, h.env, d)
	rep, err := Reset(context.Background(), h.env, ResetOptions{AllowEtcdQuorumLoss: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	d.assertIntact(t, h.env)
	if !strings.Contains(strings.Join(rep.Warnings, "\n"), "system directory") {
		t.Errorf("warnings do not say why the data directory was left: %v", rep.Warnings)
	}
	// In a dedicated directory, only etcd's member/ goes.
	h = newTestHost(t)
	writeHost(t, h.env, "/etc/kubernetes/manifests/etcd.yaml", etcdManifest, 0o600)
	d = decoys{"/var/lib/etcd/backup.db": "operator's backup"}
	plant(t, h.env, d)
	writeHost(t, h.env, "/var/lib/etcd/member/snap/db", "member", 0o600)
	if _, err := Reset(context.Background(), h.env, ResetOptions{AllowEtcdQuorumLoss: true}, nil); err != nil {
		t.Fatal(err)
	}
	d.assertIntact(t, h.env)
	if h.env.Exists("/var/lib/etcd/member") {
		t.Error("reset kept the member's data")
	}
}

// An etcd manifest without a peer URL is not "not a member": the member is found by name
// and removed; with neither, reset refuses (and keeps the data).
func TestResetFindsTheMemberWithoutAPeerURL(t *testing.T) {
	t.Parallel()
	c := newCPHost(t)
	if _, err := Run(context.Background(), c.env, &State{Opts: c.options(t)}, Join, RunOptions{}); err != nil {
		t.Fatal(err)
	}
	manifest, _ := c.env.ReadFile(path.Join(host.ManifestsDir, "etcd.yaml"))
	var kept []string
	for _, l := range strings.Split(string(manifest), "\n") {
		if !strings.Contains(l, "--initial-advertise-peer-urls=") {
			kept = append(kept, l)
		}
	}
	noPeer := strings.Join(kept, "\n")
	writeHost(t, c.env, path.Join(host.ManifestsDir, "etcd.yaml"), strings.Replace(noPeer, "- --name=cp2", "- --name=", 1), 0o600)
	writeHost(t, c.env, "/var/lib/etcd/member/snap/db", "data", 0o600)
	_, err := Reset(context.Background(), c.env, ResetOptions{}, nil)
	if operr.CodeOf(err) != operr.Preflight || !strings.Contains(err.Error(), "cannot be found") || !c.env.Exists("/var/lib/etcd/member/snap/db") {
		t.Fatalf("a manifest naming no member: %v; want refused with the data kept", err)
	}
	writeHost(t, c.env, path.Join(host.ManifestsDir, "etcd.yaml"), noPeer, 0o600)
	rep, err := Reset(context.Background(), c.env, ResetOptions{}, nil)
	if err != nil || rep.EtcdMemberRemoved == "" || c.etcd.Member("https://10.0.0.12:2380") != nil {
		t.Fatalf("member by name: %+v %v", rep, err)
	}
	if c.env.Exists("/var/lib/etcd/member") {
		t.Error("the removed member's data was kept")
	}
}

// The join applies reset's journal checks: a journal others could write, or one whose pending
// key is not kjoin's own path, is refused and nothing it names is deleted.
func TestJoinRefusesAnUntrustedJournal(t *testing.T) {
	t.Parallel()
	t.Run("pending key elsewhere", func(t *testing.T) {
		t.Parallel()
		h := newTestHost(t)
		d := decoys{"/etc/important.conf": "important"}
		plant(t, h.env, d)
		if err := (&Journal{Node: "w1", CSR: "kjoin-w1-x", PendingKey: "/etc/important.conf", Phases: []string{"preflight"}}).Save(h.env); err != nil {
			t.Fatal(err)
		}
		_, err := Run(context.Background(), h.env, &State{Opts: h.options(t)}, Join, RunOptions{})
		if operr.CodeOf(err) != operr.Preflight || !strings.Contains(err.Error(), "pending key") {
			t.Fatalf("got %v", err)
		}
		d.assertIntact(t, h.env)
		if _, err := Reset(context.Background(), h.env, ResetOptions{}, nil); operr.CodeOf(err) != operr.Preflight {
			t.Errorf("reset with that journal: %v, want refused", err)
		}
		d.assertIntact(t, h.env)
	})
	for _, mode := range []os.FileMode{0o666, 0o644, 0o640} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			h := newTestHost(t)
			if err := (&Journal{Node: "w1", Phases: []string{"preflight"}}).Save(h.env); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(h.env.Paths.Of(JournalPath), mode); err != nil {
				t.Fatal(err)
			}
			_, err := Run(context.Background(), h.env, &State{Opts: h.options(t)}, Join, RunOptions{})
			if operr.CodeOf(err) != operr.Preflight || !strings.Contains(err.Error(), "not 0600") {
				t.Fatalf("got %v", err)
			}
			for _, dir := range []string{host.KubernetesDir, host.KubeletDir} {
				if entries, _ := os.ReadDir(h.env.Paths.Of(dir)); len(entries) > 0 {
					t.Errorf("the refused join wrote into %s: %v", dir, entries)
				}
			}
		})
	}
	h := newTestHost(t)
	writeHost(t, h.env, "/elsewhere/journal.json", `{"node":"w1"}`, 0o600)
	if err := os.MkdirAll(h.env.Paths.Of("/var/lib/kjoin"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(h.env.Paths.Of("/elsewhere/journal.json"), h.env.Paths.Of(JournalPath)); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), h.env, &State{Opts: h.options(t)}, Join, RunOptions{}); operr.CodeOf(err) != operr.Preflight || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a symlinked journal: %v", err)
	}
}

// The README's "What kjoin deletes" list matches the code: the kubeadm file names, the pending
// key, the kubelet rotation pattern, the refused system directories and the join directories.
func TestWhatKjoinDeletes(t *testing.T) {
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	start := strings.Index(readme, "What kjoin deletes, and nothing else")
	end := strings.Index(readme[max(start, 0):], "\n\n## ")
	if start < 0 || end < 0 {
		t.Fatal("README has no \"What kjoin deletes\" section")
	}
	section := readme[start : start+end]
	for _, f := range kubeadmFiles {
		if strings.HasPrefix(f, host.PKIDir+"/") {
			if !strings.Contains(section, "kubeadm's certificates and keys in\n  `pki/` and `pki/etcd/` by name") || !strings.HasSuffix(f, ".crt") && !strings.HasSuffix(f, ".key") && !strings.HasSuffix(f, ".pub") {
				t.Errorf("kubeadm's %s is not a certificate or key the README names", f)
			}
			continue
		}
		if !strings.Contains(section, "`"+path.Base(f)+"`") && !(strings.HasPrefix(path.Base(f), "kube-") || path.Base(f) == "etcd.yaml") && path.Base(f) != "kubelet-client-current.pem" {
			t.Errorf("kubeadm file %s is not in the README's list", f)
		}
	}
	if !strings.Contains(section, "`"+pendingKeyPath+"`") || !kubeletClientPEM.MatchString("kubelet-client-2026-01-02-03-04-05.pem") ||
		!strings.Contains(section, "kubelet-client-<timestamp>.pem") {
		t.Error("the pending key or the kubelet rotation pattern differ from the README")
	}
	for _, d := range []string{"/", "/etc", "/usr", "/var", "/var/lib", "/home"} {
		if !strings.Contains(section, "`"+d+"`") || checkEtcdDataDir(&host.Env{Paths: host.Paths{Root: t.TempDir()}}, d) == nil {
			t.Errorf("system directory %s: not in the README or not refused", d)
		}
	}
	for _, d := range []string{host.KubernetesDir, host.KubeletDir, path.Dir(JournalPath)} {
		if !strings.Contains(section, "`"+d+"`") || checkEtcdDataDir(&host.Env{Paths: host.Paths{Root: t.TempDir()}}, d+"/etcd") == nil {
			t.Errorf("join directory %s: not in the README or a data directory inside it is not refused", d)
		}
	}
	if !strings.Contains(section, "`<data-dir>/"+etcdMemberData+"`") {
		t.Error("the README does not name the member data reset removes")
	}
}

// A node kubeadm joined, on which kjoin join then ran (already joined: nothing written),
// holds a journal that says so: reset still removes kubeadm's files there.
func TestResetOfAKubeadmNodeKjoinAdopted(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	if _, err := Run(context.Background(), h.env, &State{Opts: h.options(t)}, Join, RunOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := RemoveJournal(h.env); err != nil { // as if kubeadm had joined it
		t.Fatal(err)
	}
	s := &State{Opts: h.options(t)}
	if _, err := Run(context.Background(), h.env, s, Join, RunOptions{}); err != nil {
		t.Fatal(err)
	}
	j, err := LoadJournal(h.env)
	if err != nil || !j.Adopted {
		t.Fatalf("journal after re-running on a joined node: %+v %v; want adopted", j, err)
	}
	d := decoys{"/etc/kubernetes/manifests/kube-vip.yaml": "operator's", "/etc/kubernetes/pki/extra-ca.crt": "extra"}
	plant(t, h.env, d)
	if _, err := Reset(context.Background(), h.env, ResetOptions{}, nil); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{host.KubeletKubeconfig, host.CACertPath, host.KubeletConfigPath, host.KubeletClientCurrent} {
		if h.env.Exists(f) {
			t.Errorf("reset kept kubeadm's %s", f)
		}
	}
	d.assertIntact(t, h.env)
}

// remove-static-pods removes the journal's manifests and nothing else of its files: with
// remove-files skipped, the join's kubeconfig, its kubelet config and a non-manifest file
// the journal names in the manifests directory are all still there, with no warning.
func TestResetStaticPodsRemovesOnlyManifests(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	if _, err := Run(context.Background(), h.env, &State{Opts: h.options(t)}, Join, RunOptions{}); err != nil {
		t.Fatal(err)
	}
	const manifest, notes = "/etc/kubernetes/manifests/kube-vip.yaml", "/etc/kubernetes/manifests/kube-vip.yaml.orig"
	writeHost(t, h.env, manifest, "a static pod", 0o600)
	writeHost(t, h.env, notes, "not a manifest", 0o600)
	j, err := LoadJournal(h.env)
	if err != nil {
		t.Fatal(err)
	}
	j.Files = append(j.Files, manifest, notes)
	if err := j.Save(h.env); err != nil {
		t.Fatal(err)
	}
	kept := []string{host.KubeletKubeconfig, host.KubeletConfigPath, notes}
	for _, f := range kept {
		if !h.env.Exists(f) {
			t.Fatalf("the join left no %s to keep", f)
		}
	}
	rep, err := Reset(context.Background(), h.env, ResetOptions{}, []string{"remove-files"})
	if err != nil {
		t.Fatal(err)
	}
	if h.env.Exists(manifest) {
		t.Errorf("remove-static-pods kept the journal's manifest %s", manifest)
	}
	for _, f := range kept {
		if !h.env.Exists(f) {
			t.Errorf("remove-static-pods removed %s, which is not a manifest", f)
		}
	}
	if len(rep.Warnings) > 0 {
		t.Errorf("warnings: %v", rep.Warnings)
	}
}
