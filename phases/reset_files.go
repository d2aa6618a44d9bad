package phases

import (
	"context"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"

	"kjoin.dev/kjoin/operr"
)

// kubeadmFiles are the files and directories kubeadm join writes, removed for nodes joined
// without a journal (by kubeadm).
var kubeadmFiles = []string{
	AdminKubeconfig, "/etc/kubernetes/super-admin.conf", KubeletKubeconfig, BootstrapKubeconfig,
	"/etc/kubernetes/controller-manager.conf", "/etc/kubernetes/scheduler.conf",
	path.Join(ManifestsDir, "etcd.yaml"), path.Join(ManifestsDir, "kube-apiserver.yaml"),
	path.Join(ManifestsDir, "kube-controller-manager.yaml"), path.Join(ManifestsDir, "kube-scheduler.yaml"),
	PKIDir, KubeletConfigPath, KubeletInstancePath, KubeletFlagsPath, KubeletPKIDir,
}

// ResetFiles removes exactly what the join wrote (the journal's files, or kubeadm's list for
// nodes kubeadm joined), confined to the join's directories, then the journal. The etcd data
// directory is emptied (it may be a mount point) only when s.Reset.EtcdDataMayGo.
//
//	Reads:  s.Journal, s.Reset (EtcdManifest, EtcdDataMayGo)
//	Writes: s.Reset.Report.RemovedFiles; removes host files and the journal
var ResetFiles = Phase{Name: "remove-files", Short: "Remove the files the join wrote, then the journal", Run: runResetFiles}

func runResetFiles(_ context.Context, e *Env, s *State) error {
	r, j := s.Reset.Report, s.Journal
	warn := func(format string, a ...any) { s.Warn(e, "remove-files", format, a...) }
	targets := append(append([]string{}, j.Files...), kubeadmFiles...)
	if j.PendingKey != "" {
		targets = append(targets, j.PendingKey)
	}
	clients, _ := filepath.Glob(e.Paths.Of(path.Join(KubeletPKIDir, "kubelet-client-*.pem")))
	for _, c := range clients {
		targets = append(targets, path.Join(KubeletPKIDir, filepath.Base(c)))
	}
	allowed := []string{KubernetesDir, KubeletDir, path.Dir(JournalPath)}
	if dir := etcdDataDir(s.Reset.EtcdManifest); dir != "" && path.IsAbs(dir) && path.Clean(dir) != "/" {
		// The data directory may be a mount point: empty it, keep it (as kubeadm does).
		dir = path.Clean(dir)
		allowed = append(allowed, dir)
		if s.Reset.EtcdDataMayGo {
			entries, _ := os.ReadDir(e.Paths.Of(dir))
			for _, en := range entries {
				targets = append(targets, path.Join(dir, en.Name()))
			}
		} else if entries, _ := os.ReadDir(e.Paths.Of(dir)); len(entries) > 0 {
			warn("kept the etcd data in %s: this node's member may still be in the cluster (remove it with etcdctl member remove, then delete the data, or use --force)", dir)
		}
	}
	sort.Strings(targets)
	for _, t := range slices.Compact(targets) {
		clean, err := confined(e, t, allowed)
		if err != nil {
			warn("not removing %s: %v", t, err)
			continue
		}
		p := e.Paths.Of(clean)
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		if err := os.RemoveAll(p); err != nil { // a symlink itself is removed, never its target
			return operr.Wrap(operr.Other, err, "cannot remove "+clean, "")
		}
		r.RemovedFiles = append(r.RemovedFiles, clean)
		s.MarkChanged()
	}
	if e.Exists(JournalPath) {
		if err := RemoveJournal(e); err != nil {
			return err
		}
		s.MarkChanged()
	}
	if s.Changed() {
		e.Logf("remove-files", "removed %d files; the node left the cluster", len(r.RemovedFiles))
	} else {
		e.Logf("remove-files", "nothing to reset: this node holds no join")
	}
	return nil
}
