package phases

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"kjoin.dev/kjoin/etcd"
	"kjoin.dev/kjoin/operr"
	"kjoin.dev/kjoin/pki"
)

// ResetOptions configure kjoin reset.
type ResetOptions struct {
	// Force removes the etcd member even when that leaves etcd without quorum.
	Force bool
	// DeleteNode deletes the Node object with admin credentials (Kubeconfig).
	DeleteNode bool
	Kubeconfig string
}

// ResetReport says what reset did.
type ResetReport struct {
	Changed           bool     `json:"changed"`
	Node              string   `json:"node,omitempty"`
	Role              string   `json:"role"`
	EtcdMemberRemoved string   `json:"etcdMemberRemoved,omitempty"`
	NodeDeleted       bool     `json:"nodeDeleted"`
	KubeletStopped    bool     `json:"kubeletStopped"`
	RemovedFiles      []string `json:"removedFiles"`
	Warnings          []string `json:"warnings"`
}

// kubeadmFiles are the files and directories kubeadm join writes, removed for nodes joined
// without a journal (by kubeadm).
var kubeadmFiles = []string{
	AdminKubeconfig, "/etc/kubernetes/super-admin.conf", KubeletKubeconfig, BootstrapKubeconfig,
	"/etc/kubernetes/controller-manager.conf", "/etc/kubernetes/scheduler.conf",
	path.Join(ManifestsDir, "etcd.yaml"), path.Join(ManifestsDir, "kube-apiserver.yaml"),
	path.Join(ManifestsDir, "kube-controller-manager.yaml"), path.Join(ManifestsDir, "kube-scheduler.yaml"),
	PKIDir, KubeletConfigPath, KubeletInstancePath, KubeletFlagsPath, KubeletPKIDir,
}

// Reset undoes a join on this node: for a control plane it first removes its own etcd member
// (refusing when that would break quorum, unless forced) and its static pods, then stops the
// kubelet and removes the files the join wrote (from the journal, or kubeadm's list for
// nodes kubeadm joined). It is idempotent.
func Reset(ctx context.Context, e *Env, o ResetOptions) (*ResetReport, error) {
	r := &ResetReport{Role: "worker", RemovedFiles: []string{}, Warnings: []string{}}
	if err := checkJournalFile(e); err != nil {
		return r, err
	}
	j, err := LoadJournal(e)
	if err != nil {
		return r, operr.Wrap(operr.Other, err, "cannot read the join journal", "")
	}
	r.Node = j.Node
	if r.Node == "" {
		r.Node = nodeNameFromCert(e)
	}
	etcdManifest, _ := e.ReadFile(path.Join(ManifestsDir, "etcd.yaml"))
	if j.Role == "control-plane" || e.Exists(path.Join(ManifestsDir, "kube-apiserver.yaml")) {
		r.Role = "control-plane"
	}
	warn := func(format string, a ...any) {
		w := fmt.Sprintf(format, a...)
		r.Warnings = append(r.Warnings, w)
		e.Logf("reset", "WARNING: %s", w)
	}

	if o.DeleteNode && r.Node != "" {
		if err := deleteNode(ctx, e, o.Kubeconfig, r.Node); err != nil {
			return r, err
		}
		r.NodeDeleted, r.Changed = true, true
		e.Logf("reset", "deleted Node %q", r.Node)
	}
	// The etcd data may be wiped only once this node's member is out of the cluster (or it
	// never was in it), or with --force.
	etcdDataMayGo := o.Force
	if len(etcdManifest) > 0 {
		id, gone, err := removeEtcdMember(ctx, e, etcdManifest, o.Force, warn)
		if err != nil {
			return r, err
		}
		if id != "" {
			r.EtcdMemberRemoved, r.Changed = id, true
		}
		etcdDataMayGo = etcdDataMayGo || gone
	}
	// Static pods first, while the kubelet can still stop them; then the kubelet itself.
	manifests, _ := filepath.Glob(e.Paths.Of(path.Join(ManifestsDir, "*.yaml")))
	for _, m := range manifests {
		hostPath, err := confined(e, path.Join(ManifestsDir, filepath.Base(m)), []string{ManifestsDir})
		if err != nil {
			warn("not removing %s: %v", m, err)
			continue
		}
		if err := os.Remove(m); err == nil {
			r.RemovedFiles = append(r.RemovedFiles, hostPath)
			r.Changed = true
		}
	}
	if len(manifests) > 0 {
		waitPortsFree(ctx, e, []int{6443, 2379, 2380, 10257, 10259}, 60*time.Second)
	}
	if _, err := e.Exec.Run(ctx, "systemctl", "is-active", "--quiet", "kubelet"); err == nil {
		if _, err := e.Exec.Run(ctx, "systemctl", "stop", "kubelet"); err != nil {
			warn("could not stop the kubelet: %v", err)
		} else {
			r.KubeletStopped, r.Changed = true, true
			e.Logf("reset", "stopped the kubelet")
		}
	}
	if r.KubeletStopped && !r.NodeDeleted && r.Node != "" {
		// Tell the cluster now, with the node's own identity, rather than after the node
		// monitor's grace period: a Ready Node would block re-joining under the same name.
		if err := markNodeGone(ctx, e, r.Node, clusterServer(e, j)); err != nil {
			warn("could not mark Node %q not ready (%v); it turns NotReady after the node monitor grace period", r.Node, err)
		}
	}
	targets := append(append([]string{}, j.Files...), kubeadmFiles...)
	if j.PendingKey != "" {
		targets = append(targets, j.PendingKey)
	}
	clients, _ := filepath.Glob(e.Paths.Of(path.Join(KubeletPKIDir, "kubelet-client-*.pem")))
	for _, c := range clients {
		targets = append(targets, path.Join(KubeletPKIDir, filepath.Base(c)))
	}
	allowed := []string{KubernetesDir, KubeletDir, path.Dir(JournalPath)}
	if dir := etcdDataDir(etcdManifest); dir != "" && path.IsAbs(dir) && path.Clean(dir) != "/" {
		// The data directory may be a mount point: empty it, keep it (as kubeadm does).
		dir = path.Clean(dir)
		allowed = append(allowed, dir)
		if etcdDataMayGo {
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
			return r, operr.Wrap(operr.Other, err, "cannot remove "+clean, "")
		}
		r.RemovedFiles = append(r.RemovedFiles, clean)
		r.Changed = true
	}
	if err := RemoveJournal(e); err != nil {
		return r, err
	}
	if r.Changed {
		e.Logf("reset", "removed %d files; the node left the cluster", len(r.RemovedFiles))
	} else {
		e.Logf("reset", "nothing to reset: this node holds no join")
	}
	return r, nil
}

// checkJournalFile refuses a journal that someone other than root (this process's user)
// could have written: reset deletes what it lists.
func checkJournalFile(e *Env) error {
	st, err := os.Lstat(e.Paths.Of(JournalPath))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return operr.Wrap(operr.Other, err, "cannot inspect the join journal "+JournalPath, "")
	}
	hint := "check who changed it; if it is the join's own record, restore it with chown root:root " + JournalPath + " && chmod 600 " + JournalPath + " (or remove it: reset then uses kubeadm's file list)"
	if !st.Mode().IsRegular() {
		return operr.Newf(operr.Preflight, hint, "the join journal %s is not a regular file (%s); reset will not act on it", JournalPath, st.Mode().Type())
	}
	if st.Mode().Perm() != 0o600 {
		return operr.Newf(operr.Preflight, hint, "the join journal %s has mode %04o, not 0600; reset will not delete what it lists", JournalPath, st.Mode().Perm())
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && sys.Uid != 0 && int(sys.Uid) != os.Geteuid() {
		return operr.Newf(operr.Preflight, hint, "the join journal %s is owned by uid %d, not root; reset will not delete what it lists", JournalPath, sys.Uid)
	}
	return nil
}

// confined cleans a host path and checks that reset may remove it: absolute, inside one of
// the allowed directories (not the directory itself) and reached without following a
// symlink in any parent.
func confined(e *Env, p string, allowed []string) (string, error) {
	if !path.IsAbs(p) {
		return "", fmt.Errorf("not an absolute path")
	}
	clean := path.Clean(p)
	inside := false
	for _, dir := range allowed {
		if strings.HasPrefix(clean, strings.TrimSuffix(dir, "/")+"/") {
			inside = true
			break
		}
	}
	if !inside {
		return "", fmt.Errorf("outside %s", strings.Join(allowed, ", "))
	}
	for parent := path.Dir(clean); parent != "/"; parent = path.Dir(parent) {
		st, err := os.Lstat(e.Paths.Of(parent))
		if err != nil {
			continue
		}
		if st.Mode()&os.ModeSymlink != 0 {
			return "", fmt.Errorf("its parent %s is a symlink", parent)
		}
	}
	return clean, nil
}

func nodeNameFromCert(e *Env) string {
	b, err := e.ReadFile(KubeletClientCurrent)
	if err != nil {
		return ""
	}
	c, err := pki.ParseCert(b)
	if err != nil {
		return ""
	}
	return strings.TrimPrefix(c.Subject.CommonName, "system:node:")
}

func deleteNode(ctx context.Context, e *Env, kubeconfig, name string) error {
	if kubeconfig == "" {
		kubeconfig = AdminKubeconfig
	}
	b, err := e.ReadFile(kubeconfig)
	if err != nil {
		return operr.Wrap(operr.Usage, err, "--delete-node needs admin credentials", "pass --kubeconfig with a cluster-admin kubeconfig")
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(b)
	if err != nil {
		return operr.Wrap(operr.Usage, err, "unusable kubeconfig "+kubeconfig, "")
	}
	cfg.Timeout = 15 * time.Second
	c, err := e.NewClient(cfg)
	if err != nil {
		return err
	}
	err = c.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsForbidden(err) {
		return operr.Wrap(operr.Auth, err, "the kubeconfig's user may not delete nodes", "pass --kubeconfig with a cluster-admin kubeconfig")
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return operr.Wrap(operr.Other, err, "delete Node "+name, "")
	}
	return nil
}

// staticPodFlags reads the command flags of a static pod manifest.
func staticPodFlags(manifest []byte) map[string]string {
	var pod struct {
		Spec struct {
			Containers []struct {
				Command []string `json:"command"`
			} `json:"containers"`
		} `json:"spec"`
	}
	flags := map[string]string{}
	if yaml.Unmarshal(manifest, &pod) != nil || len(pod.Spec.Containers) == 0 {
		return flags
	}
	for _, a := range pod.Spec.Containers[0].Command {
		if k, v, ok := strings.Cut(strings.TrimPrefix(a, "--"), "="); ok {
			flags[k] = v
		}
	}
	return flags
}

func etcdDataDir(manifest []byte) string { return staticPodFlags(manifest)["data-dir"] }

// removeEtcdMember removes this node's etcd member, refusing to break quorum unless forced.
// gone reports that the member is out of the cluster (removed now, or not a member), so its
// data may be wiped.
func removeEtcdMember(ctx context.Context, e *Env, manifest []byte, force bool, warn func(string, ...any)) (id string, gone bool, err error) {
	flags := staticPodFlags(manifest)
	peerURL := flags["initial-advertise-peer-urls"]
	clientURL := flags["advertise-client-urls"]
	if peerURL == "" {
		return "", true, nil
	}
	tlsCfg, err := etcdTLSFrom(e, etcdCertificatesDir(flags))
	if err != nil {
		if force {
			warn("cannot read this node's etcd client certificate (%v); its etcd member was not removed (--force)", err)
			return "", false, nil
		}
		return "", false, operr.Wrap(operr.Preflight, err, "cannot read this node's etcd client certificate, so its etcd member cannot be removed",
			"restore the certificate, or pass --force to reset anyway (then remove the member by hand: etcdctl member remove)")
	}
	cli, err := etcd.Client([]string{clientURL}, tlsCfg)
	if err != nil {
		return "", false, operr.Wrap(operr.Other, err, "connect to etcd", "")
	}
	defer cli.Close()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	list, err := cli.MemberList(cctx)
	if err != nil {
		if force {
			warn("etcd is unreachable (%v); member not removed (--force)", err)
			return "", false, nil
		}
		return "", false, operr.Wrap(operr.Other, err, "etcd does not answer, so this node's member cannot be removed safely", "fix etcd, or pass --force to reset anyway (then remove the member by hand: etcdctl member remove)")
	}
	var self uint64
	voters, healthyOthers := 0, 0
	for _, m := range list.Members {
		mine := false
		for _, u := range m.PeerURLs {
			if u == peerURL {
				self, mine = m.ID, true
			}
		}
		if m.IsLearner {
			continue
		}
		voters++
		if !mine && len(m.ClientURLs) > 0 && memberHealthy(ctx, cli, m.ClientURLs[0]) {
			healthyOthers++
		}
	}
	if self == 0 {
		return "", true, nil
	}
	remaining := voters - 1
	if remaining == 0 && !force {
		return "", false, operr.New(operr.Preflight, "this node holds the last etcd member: removing it destroys the cluster's data", "pass --force if that is what you want")
	}
	if remaining > 0 && healthyOthers < remaining/2+1 && !force {
		return "", false, operr.Newf(operr.Preflight, "bring the other control planes' etcd back first, or pass --force",
			"removing this etcd member would leave %d voting member(s) of which only %d are healthy: etcd would lose quorum", remaining, healthyOthers)
	}
	rctx, rcancel := context.WithTimeout(ctx, time.Minute)
	defer rcancel()
	if err := etcd.RemoveMember(rctx, cli, self); err != nil {
		return "", false, operr.Wrap(operr.Other, err, fmt.Sprintf("remove etcd member %x", self), "")
	}
	e.Logf("reset", "removed etcd member %x (%s)", self, peerURL)
	return fmt.Sprintf("%x", self), true, nil
}

// etcdCertificatesDir is the certificates directory the etcd manifest uses
// (<dir>/etcd/ca.crt is its trusted CA), else kubeadm's default.
func etcdCertificatesDir(flags map[string]string) string {
	if ca := flags["trusted-ca-file"]; path.IsAbs(ca) && path.Base(path.Dir(ca)) == "etcd" {
		return path.Dir(path.Dir(ca))
	}
	return PKIDir
}

func memberHealthy(ctx context.Context, cli *clientv3.Client, url string) bool {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err := cli.Status(cctx, url)
	return err == nil
}

func waitPortsFree(ctx context.Context, e *Env, ports []int, timeout time.Duration) {
	deadline := e.Clock.Now().Add(timeout)
	for e.Clock.Now().Before(deadline) {
		busy := false
		for _, p := range ports {
			if e.PortInUse(p) {
				busy = true
			}
		}
		if !busy {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-e.Clock.After(250 * time.Millisecond):
		}
	}
}

// markNodeGone sets the Node's Ready condition to Unknown, as the node lifecycle controller
// would once the kubelet stops reporting.
func markNodeGone(ctx context.Context, e *Env, name, server string) error {
	b, err := e.ReadFile(KubeletKubeconfig)
	if err != nil {
		return err
	}
	kc, err := clientcmd.Load(b)
	if err != nil {
		return err
	}
	kctx := kc.Contexts[kc.CurrentContext]
	if kctx == nil || kc.Clusters[kctx.Cluster] == nil || kc.AuthInfos[kctx.AuthInfo] == nil {
		return fmt.Errorf("%s has no usable current context", KubeletKubeconfig)
	}
	cluster, auth := kc.Clusters[kctx.Cluster], kc.AuthInfos[kctx.AuthInfo]
	if server == "" {
		server = cluster.Server
	}
	cfg := &rest.Config{Host: server, Timeout: 10 * time.Second, TLSClientConfig: rest.TLSClientConfig{
		CAData: cluster.CertificateAuthorityData, CertFile: e.Paths.Of(auth.ClientCertificate), KeyFile: e.Paths.Of(auth.ClientKey),
		CertData: auth.ClientCertificateData, KeyData: auth.ClientKeyData,
	}}
	if auth.ClientCertificate == "" {
		cfg.TLSClientConfig.CertFile, cfg.TLSClientConfig.KeyFile = "", ""
	}
	c, err := e.NewClient(cfg)
	if err != nil {
		return err
	}
	node, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	now := metav1.NewTime(e.Clock.Now())
	for i, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			node.Status.Conditions[i].Status = corev1.ConditionUnknown
			node.Status.Conditions[i].Reason = "KjoinReset"
			node.Status.Conditions[i].Message = "kjoin reset stopped this node's kubelet"
			node.Status.Conditions[i].LastTransitionTime = now
			node.Status.Conditions[i].LastHeartbeatTime = now
		}
	}
	_, err = c.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{})
	return err
}

// clusterServer is the cluster's endpoint (a control plane's kubelet.conf points at its own,
// now stopped, API server): from the journal, else from admin.conf.
func clusterServer(e *Env, j *Journal) string {
	if j.Endpoint != "" {
		return j.Endpoint
	}
	if b, err := e.ReadFile(AdminKubeconfig); err == nil {
		if cfg, err := clientcmd.RESTConfigFromKubeConfig(b); err == nil {
			return cfg.Host
		}
	}
	return ""
}
