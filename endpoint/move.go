// Package endpoint moves a joined node to a new control-plane endpoint: it proves the new
// endpoint serves this cluster with the node's own CA and identity, rewrites every kubeconfig
// that names the old endpoint (atomically), restarts what reads them, proves the kubelet
// renews its Lease through the new endpoint, and rolls back on failure. With admin
// credentials it also moves the cluster's own record of the endpoint (kubeadm-config and
// cluster-info), so later joins and kubeadm upgrade use it.
package endpoint

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path"
	"slices"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"kjoin.dev/kjoin/atomicfile"
	"kjoin.dev/kjoin/discovery"
	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/operr"
)

// Options are kjoin endpoint move's inputs.
type Options struct {
	// To is the new endpoint, host:port.
	To string
	// UpdateCluster also moves kube-system/kubeadm-config's controlPlaneEndpoint and
	// kube-public/cluster-info's server (admin credentials needed).
	UpdateCluster bool
	// Kubeconfig holds the admin credentials for UpdateCluster (default: admin.conf).
	Kubeconfig string
	// RenewTimeout bounds the wait for the kubelet's Lease to renew through the new
	// endpoint (default 2 min: the kubelet renews every 10 s).
	RenewTimeout time.Duration
	DryRun       bool
}

// Report is what a move did (or, in a dry run, would do).
type Report struct {
	Node string
	From string
	To   string
	// Identity is who the new endpoint authenticated this node as.
	Identity string
	// Files are the kubeconfigs that named the old endpoint (rewritten, or to rewrite).
	Files []string
	// Restarted are the services and static pods restarted to read them.
	Restarted []string
	// LeaseRenewed is the kubelet's first Lease renewal seen through the new endpoint.
	LeaseRenewed time.Time
	// ClusterObjects are the cluster objects moved (UpdateCluster).
	ClusterObjects []string
	RolledBack     bool
	Changed        bool
	DryRun         bool
	Planned        []string
	Warnings       []string
}

// Kubeconfigs are the files a move looks at: the kubelet's and kubeadm's control-plane ones.
var Kubeconfigs = []string{host.KubeletKubeconfig, host.AdminKubeconfig, "/etc/kubernetes/super-admin.conf",
	"/etc/kubernetes/controller-manager.conf", "/etc/kubernetes/scheduler.conf"}

// staticPodOf names the static pod that reads a control-plane kubeconfig.
var staticPodOf = map[string]string{"/etc/kubernetes/controller-manager.conf": "kube-controller-manager", "/etc/kubernetes/scheduler.conf": "kube-scheduler"}

// kubeconfigFile is one kubeconfig as read, and as it would be written.
type kubeconfigFile struct {
	path     string
	mode     os.FileMode
	original []byte
	moved    []byte
}

// Move moves this node to o.To. Nothing on the node changes unless the new endpoint proved to
// be this cluster's API server for this node's own identity.
func Move(ctx context.Context, e *host.Env, o Options) (*Report, error) {
	if o.RenewTimeout == 0 {
		o.RenewTimeout = 2 * time.Minute
	}
	r := &Report{To: o.To, DryRun: o.DryRun, Files: []string{}, Restarted: []string{}, ClusterObjects: []string{}, Planned: []string{}, Warnings: []string{}}
	if err := discovery.CheckEndpoint(o.To); err != nil {
		return r, operr.Wrap(operr.Usage, err, fmt.Sprintf("new endpoint %q is unusable", o.To), "give it as host:port, e.g. 10.0.0.10:6443 or api.example.com:6443")
	}
	kubelet, err := readKubeconfig(e, host.KubeletKubeconfig)
	if err != nil {
		return r, operr.Wrap(operr.Other, err, "this node holds no usable kubelet.conf: it is not joined", "join it first (kjoin join)")
	}
	r.Node = host.NodeNameFromCert(e)
	if r.Node == "" {
		return r, operr.New(operr.Other, "the kubelet's client certificate "+host.KubeletClientCurrent+" names no node", "check the node's join: kjoin verify")
	}
	// The endpoint being moved from: admin.conf's on a control plane (whose kubelet talks to
	// its own API server), else the kubelet's.
	from := serverOf(kubelet)
	caData := caOf(e, kubelet)
	if admin, err := readKubeconfig(e, host.AdminKubeconfig); err == nil {
		from = serverOf(admin)
	}
	r.From = hostOf(from)
	to := "https://" + o.To
	if r.From == o.To {
		e.Logf("endpoint", "kubeconfigs already name %s: nothing to move", o.To)
		return r, clusterMove(ctx, e, o, r)
	}

	// 1. The new endpoint serves this cluster, for this node.
	c, err := nodeClientAt(e, to, caData)
	if err != nil {
		return r, err
	}
	if r.Identity, err = proveIdentity(ctx, c, r.Node, o.To, caData); err != nil {
		return r, err
	}
	e.Logf("endpoint", "%s is this cluster's API server: TLS verified by the node's CA for %s, and it authenticates this node as %s", o.To, hostOnly(o.To), r.Identity)

	// 2. The kubeconfigs that name the old endpoint.
	var files []*kubeconfigFile
	for _, p := range Kubeconfigs {
		f, err := moveFile(e, p, from, to)
		if err != nil {
			return r, err
		}
		if f != nil {
			files = append(files, f)
			r.Files = append(r.Files, p)
		}
	}
	if o.DryRun {
		for _, f := range files {
			r.Planned = append(r.Planned, fmt.Sprintf("rewrite %s: server %s -> %s", f.path, from, to))
		}
		for _, s := range restarts(files) {
			r.Planned = append(r.Planned, "restart "+s)
		}
		if o.UpdateCluster {
			r.Planned = append(r.Planned, "set kube-system/kubeadm-config controlPlaneEndpoint and kube-public/cluster-info server to "+o.To)
		}
		return r, nil
	}
	since, err := leaseRenewTime(ctx, c, r.Node)
	if err != nil {
		e.Debugf("endpoint", "lease of %s: %v", r.Node, err)
	}
	if err := writeAll(e, files, func(f *kubeconfigFile) []byte { return f.moved }); err != nil {
		rollback(ctx, e, files, r)
		return r, operr.Wrap(operr.Other, err, "cannot rewrite the kubeconfigs", "check the disk; the files that were written have been restored")
	}
	r.Changed = true
	e.Logf("endpoint", "rewrote %d kubeconfig(s) to %s", len(files), o.To)

	// 3. What reads them, restarted; 4. the kubelet proven to renew through the new endpoint.
	if err := restart(ctx, e, files, r); err != nil {
		rollback(ctx, e, files, r)
		return r, err
	}
	if slices.Contains(r.Files, host.KubeletKubeconfig) {
		at, err := waitRenewal(ctx, e, c, r.Node, since, o.RenewTimeout)
		if err != nil {
			rollback(ctx, e, files, r)
			return r, operr.Wrap(operr.Timeout, err, fmt.Sprintf("the kubelet did not renew its Lease through %s within %s", o.To, o.RenewTimeout),
				"the kubeconfigs were restored and the kubelet restarted on them; check the kubelet (journalctl -u kubelet) and the path to "+o.To)
		}
		r.LeaseRenewed = at
		e.Logf("endpoint", "the kubelet renewed its Lease through %s at %s", o.To, at.Format(time.RFC3339))
	}
	return r, clusterMove(ctx, e, o, r)
}

// readKubeconfig loads a kubeconfig from the host.
func readKubeconfig(e *host.Env, p string) (*clientcmdapi.Config, error) {
	b, err := e.ReadFile(p)
	if err != nil {
		return nil, err
	}
	return clientcmd.Load(b)
}

// serverOf is the server of a kubeconfig's current context.
func serverOf(kc *clientcmdapi.Config) string {
	if ctx := kc.Contexts[kc.CurrentContext]; ctx != nil {
		if c := kc.Clusters[ctx.Cluster]; c != nil {
			return c.Server
		}
	}
	for _, c := range kc.Clusters {
		return c.Server
	}
	return ""
}

// caOf is the CA a kubeconfig trusts (embedded, else its file), else the node's ca.crt.
func caOf(e *host.Env, kc *clientcmdapi.Config) []byte {
	if ctx := kc.Contexts[kc.CurrentContext]; ctx != nil {
		if c := kc.Clusters[ctx.Cluster]; c != nil {
			if len(c.CertificateAuthorityData) > 0 {
				return c.CertificateAuthorityData
			}
			if c.CertificateAuthority != "" {
				if b, err := e.ReadFile(c.CertificateAuthority); err == nil {
					return b
				}
			}
		}
	}
	b, _ := e.ReadFile(host.CACertPath)
	return b
}

func hostOf(server string) string {
	u, err := url.Parse(server)
	if err != nil {
		return server
	}
	return u.Host
}

func hostOnly(endpoint string) string {
	u, err := url.Parse("https://" + endpoint)
	if err != nil {
		return endpoint
	}
	return u.Hostname()
}

// moveFile reads p and, when a cluster in it names from, returns it with to instead (nil:
// the file is absent or does not name from).
func moveFile(e *host.Env, p, from, to string) (*kubeconfigFile, error) {
	b, err := e.ReadFile(p)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	kc, err := clientcmd.Load(b)
	if err != nil {
		return nil, operr.Wrap(operr.Other, err, p+" is not a kubeconfig", "restore it (kubeadm init phase kubeconfig, or the node's join) before moving the endpoint")
	}
	found := false
	for _, c := range kc.Clusters {
		if c.Server == from {
			c.Server, found = to, true
		}
	}
	if !found {
		return nil, nil
	}
	moved, err := clientcmd.Write(*kc)
	if err != nil {
		return nil, err
	}
	st, err := os.Stat(e.Paths.Of(p))
	if err != nil {
		return nil, err
	}
	return &kubeconfigFile{path: p, mode: st.Mode().Perm(), original: b, moved: moved}, nil
}

// writeAll writes each file's chosen content atomically, keeping its mode.
func writeAll(e *host.Env, files []*kubeconfigFile, content func(*kubeconfigFile) []byte) error {
	for _, f := range files {
		if err := atomicfile.Write(e.Paths.Of(f.path), content(f), f.mode, 0o755); err != nil {
			return fmt.Errorf("write %s: %w", f.path, err)
		}
	}
	return nil
}

// restarts names what reads the files: the kubelet, and the static pods of kubeadm's
// control-plane kubeconfigs.
func restarts(files []*kubeconfigFile) []string {
	var out []string
	for _, f := range files {
		switch {
		case f.path == host.KubeletKubeconfig:
			out = append(out, "kubelet")
		case staticPodOf[f.path] != "":
			out = append(out, staticPodOf[f.path])
		}
	}
	return out
}

// restart restarts the kubelet (systemd) and the static pods whose kubeconfig moved (their
// sandboxes removed: the kubelet starts them again, reading the new file).
func restart(ctx context.Context, e *host.Env, files []*kubeconfigFile, r *Report) error {
	for _, s := range restarts(files) {
		if s == "kubelet" {
			if out, err := e.Exec.Run(ctx, "systemctl", "restart", "kubelet"); err != nil {
				return operr.Wrap(operr.Other, fmt.Errorf("%w: %s", err, out), "cannot restart the kubelet", "check systemctl status kubelet")
			}
			r.Restarted = append(r.Restarted, "kubelet")
			continue
		}
		if err := restartStaticPod(ctx, e, s+"-"+r.Node); err != nil {
			r.Warnings = append(r.Warnings, fmt.Sprintf("%s was not restarted (%v): it reads its kubeconfig at start; restart it (crictl rmp) to use %s", s, err, r.To))
			continue
		}
		r.Restarted = append(r.Restarted, s)
	}
	return nil
}

func restartStaticPod(ctx context.Context, e *host.Env, pod string) error {
	if e.Sandboxes == nil {
		return fmt.Errorf("no container runtime client")
	}
	rt, err := e.Sandboxes(host.RuntimeEndpoint(e))
	if err != nil {
		return err
	}
	defer rt.Close()
	pods, err := rt.PodSandboxes(ctx)
	if err != nil {
		return err
	}
	for _, p := range pods {
		if p.Name == path.Join("kube-system", pod) {
			if err := rt.RemovePodSandbox(ctx, p.ID); err != nil {
				return err
			}
		}
	}
	return nil
}

// rollback restores every file and restarts what reads them.
func rollback(ctx context.Context, e *host.Env, files []*kubeconfigFile, r *Report) {
	if err := writeAll(e, files, func(f *kubeconfigFile) []byte { return f.original }); err != nil {
		r.Warnings = append(r.Warnings, "rollback: "+err.Error())
		return
	}
	r.Restarted = r.Restarted[:0]
	_ = restart(ctx, e, files, r)
	r.RolledBack = true
	e.Logf("endpoint", "restored %d kubeconfig(s) to %s", len(files), r.From)
}
