package phases

import (
	"context"
	"os"
	"path"
	"regexp"
	"slices"
	"sort"

	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/operr"
)

// kubeadmFiles are the exact files kubeadm join writes, removed for nodes joined without a
// journal (by kubeadm): never another static pod, another file in pki/ or a whole directory.
var kubeadmFiles = []string{
	host.AdminKubeconfig, host.KubeletKubeconfig, host.BootstrapKubeconfig,
	"/etc/kubernetes/controller-manager.conf", "/etc/kubernetes/scheduler.conf",
	path.Join(host.ManifestsDir, "etcd.yaml"), path.Join(host.ManifestsDir, "kube-apiserver.yaml"),
	path.Join(host.ManifestsDir, "kube-controller-manager.yaml"), path.Join(host.ManifestsDir, "kube-scheduler.yaml"),
	host.CACertPath, host.PKIDir + "/ca.key", host.PKIDir + "/sa.key", host.PKIDir + "/sa.pub",
	host.PKIDir + "/front-proxy-ca.crt", host.PKIDir + "/front-proxy-ca.key", host.PKIDir + "/front-proxy-client.crt", host.PKIDir + "/front-proxy-client.key",
	host.PKIDir + "/apiserver.crt", host.PKIDir + "/apiserver.key", host.PKIDir + "/apiserver-kubelet-client.crt", host.PKIDir + "/apiserver-kubelet-client.key",
	host.PKIDir + "/apiserver-etcd-client.crt", host.PKIDir + "/apiserver-etcd-client.key",
	host.PKIDir + "/etcd/ca.crt", host.PKIDir + "/etcd/ca.key", host.PKIDir + "/etcd/server.crt", host.PKIDir + "/etcd/server.key",
	host.PKIDir + "/etcd/peer.crt", host.PKIDir + "/etcd/peer.key", host.PKIDir + "/etcd/healthcheck-client.crt", host.PKIDir + "/etcd/healthcheck-client.key",
	host.KubeletConfigPath, host.KubeletInstancePath, host.KubeletFlagsPath, host.KubeletClientCurrent,
}

// kubeletClientPEM matches the kubelet's client certificate files (kubelet-client-<timestamp>.pem):
// the join's first one and those the kubelet rotated from it.
var kubeletClientPEM = regexp.MustCompile(`^kubelet-client-\d{4}-\d{2}-\d{2}-\d{2}-\d{2}-\d{2}\.pem$`)

// ResetFiles removes exactly what the join wrote: the journal's files (and the kubelet's
// rotations of the client certificate the join installed), or kubeadm's exact file list for
// nodes kubeadm joined, confined to the join's directories, then the journal. Of the etcd
// data directory only the member's data (member/) goes, and only when s.EtcdDataMayGo.
//
//	Reads:  s.Journal, s.Journaled, s.EtcdManifest, s.EtcdDataMayGo, s.Opts.DryRun
//	Writes: s.Report.RemovedFiles; removes host files and the journal
var ResetFiles = ResetPhase{Name: "remove-files", Short: "Remove the files the join wrote, then the journal", Run: runResetFiles}

// resetTargets are the files of the join's record reset removes for this node, before
// confinement: the journal's, or kubeadm's exact list.
func resetTargets(s *ResetState) []string {
	j := s.Journal
	var targets []string
	if !s.Journaled || j.Adopted {
		targets = slices.Clone(kubeadmFiles)
	}
	if s.Journaled {
		targets = append(targets, j.Files...)
		if j.PendingKey == pendingKeyPath {
			targets = append(targets, j.PendingKey)
		}
	}
	return targets
}

// kubeletClientRotations are the kubelet's client certificate files on the node: the join's
// first one and those the kubelet rotated from it.
func kubeletClientRotations(e *host.Env) []string {
	var out []string
	entries, _ := os.ReadDir(e.Paths.Of(host.KubeletPKIDir))
	for _, en := range entries {
		if kubeletClientPEM.MatchString(en.Name()) && en.Type().IsRegular() {
			out = append(out, path.Join(host.KubeletPKIDir, en.Name()))
		}
	}
	return out
}

func runResetFiles(_ context.Context, e *host.Env, s *ResetState) error {
	r := s.Report
	warn := func(format string, a ...any) { s.Warn(e, "remove-files", format, a...) }
	targets := append(resetTargets(s), kubeletClientRotations(e)...)
	allowed := []string{host.KubernetesDir, host.KubeletDir, path.Dir(JournalPath)}
	if dir := etcdDataDir(s.EtcdManifest); dir != "" {
		if err := checkEtcdDataDir(e, dir); err != nil {
			warn("not touching the etcd data directory: %v", err)
		} else {
			dir = path.Clean(dir)
			allowed = append(allowed, dir)
			member := path.Join(dir, etcdMemberData)
			switch {
			case !e.Exists(member):
			case s.EtcdDataMayGo:
				targets = append(targets, member)
			default:
				warn("kept the etcd data in %s: this node's member may still be in the cluster (remove it with etcdctl member remove, then delete the data, or use --allow-etcd-quorum-loss)", member)
			}
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
		removed, err := s.remove(e, "remove-files", clean) // a symlink itself is removed, never its target
		if err != nil {
			return operr.Wrap(operr.Other, err, "cannot remove "+clean, "")
		}
		if removed {
			r.RemovedFiles = append(r.RemovedFiles, clean)
		}
	}
	if e.Exists(JournalPath) {
		if err := RemoveJournal(e); err != nil {
			return err
		}
		if s.Opts.DryRun {
			e.Logf("remove-files", "would remove the join journal %s", JournalPath)
		}
	}
	if s.Opts.DryRun {
		return nil
	}
	if s.Changed() {
		e.Logf("remove-files", "removed %d files; the node left the cluster", len(r.RemovedFiles))
	} else {
		e.Logf("remove-files", "nothing to reset: this node holds no join")
	}
	return nil
}
