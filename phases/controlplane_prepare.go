package phases

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path"
	"slices"

	"kjoin.dev/kjoin/certs"
	cc "kjoin.dev/kjoin/clusterconfig"
	"kjoin.dev/kjoin/discovery"
	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/manifests"
	"kjoin.dev/kjoin/operr"
	"kjoin.dev/kjoin/patches"
	"kjoin.dev/kjoin/pki"
	"kjoin.dev/kjoin/versions"
)

// ControlPlanePrepare gets a control-plane node ready before its kubelet starts: it reads the
// cluster's ClusterConfiguration, downloads and decrypts the shared CAs with the certificate
// key, issues the node's certificates and kubeconfigs, and renders the kube-apiserver,
// kube-controller-manager and kube-scheduler manifests with the operator's patches (written
// by control-plane-start, once etcd is ready for them).
//
//	Reads:  s.BootstrapClient, s.Opts (CertificateKey, NodeName, AdvertiseAddress, BindPort, PatchesDir, Timeouts)
//	Writes: s.Cluster, s.AdminClient, s.ControlPlanePods; /etc/kubernetes/{pki/*,pki/etcd/*,admin.conf,controller-manager.conf,scheduler.conf},
//	        the (empty) /etc/kubernetes/manifests directory, for the kubelet to watch from its start
var ControlPlanePrepare = Phase{
	Name: "control-plane-prepare", Short: "Download shared certificates; write node certificates and kubeconfigs; render the manifests",
	Needs: []string{"discovery"}, Skip: workerSkip, Run: runControlPlanePrepare,
}

func workerSkip(s *State) string {
	if !s.Opts.ControlPlane {
		return "worker node"
	}
	return ""
}

func runControlPlanePrepare(ctx context.Context, e *host.Env, s *State) error {
	cfg, err := cc.Fetch(ctx, s.BootstrapClient, "the bootstrap token")
	if err != nil {
		return err
	}
	s.Cluster = cfg
	if err := cfg.RequireControlPlaneEndpoint(); err != nil {
		return err
	}
	if err := checkControlPlaneHost(e, s); err != nil {
		return err
	}
	// Rendered (and patched) now, so a bad patch fails the join before anything else changes.
	if s.ControlPlanePods, err = renderControlPlane(e, s); err != nil {
		return err
	}
	pkiDir := cfg.CertificatesDir
	written := 0
	var shared map[string]certs.File
	if s.Opts.CertificateKey != "" {
		files, err := certs.Download(ctx, s.BootstrapClient, s.Opts.CertificateKey, certs.ExternalOf(cfg))
		if err != nil {
			return err
		}
		shared = files
		if err := sameCA(files["ca.crt"].Data, s.Discovery.CAData); err != nil {
			return err
		}
		for _, name := range slices.Sorted(maps.Keys(files)) {
			p := name
			if !path.IsAbs(p) {
				p = path.Join(pkiDir, name)
			}
			if err := e.Fx().WriteFile(p, files[name].Data, files[name].Mode); err != nil {
				return err
			}
			written++
		}
		e.Logf("control-plane-prepare", "downloaded and decrypted %d shared certificate files from kube-system/%s", written, certs.SecretName)
	}
	if s.Opts.DryRun {
		s.dryRunCAs = sharedCAs(e, pkiDir, shared)
		e.Fx().API("issue node certificates (apiserver, apiserver-kubelet-client, front-proxy-client, etcd server/peer/healthcheck-client, apiserver-etcd-client)")
		for _, f := range []string{"admin.conf", "controller-manager.conf", "scheduler.conf"} {
			if err := e.Fx().WriteFile(path.Join(host.KubernetesDir, f), nil, 0o600); err != nil { // planned
				return err
			}
		}
		return nil
	}
	cas := map[string]*certs.CA{}
	for _, name := range []string{"ca", "front-proxy-ca", "etcd/ca"} {
		crt, err1 := e.ReadFile(path.Join(pkiDir, name+".crt"))
		key, err2 := e.ReadFile(path.Join(pkiDir, name+".key"))
		if name == "etcd/ca" && cfg.Etcd.External != nil {
			continue
		}
		if err1 != nil || err2 != nil {
			return operr.Newf(operr.Preflight,
				"the shared CA %s is missing on this node (%s)", name, path.Join(pkiDir, name+".{crt,key}")).
				WithHint("pass --certificate-key with the key printed by " + certs.UploadCommand + ", or copy the shared certificates to this node")
		}
		ca, err := certs.LoadCA(crt, key)
		if err != nil {
			return fmt.Errorf("load %s: %w", name, err)
		}
		cas[name] = ca
	}
	node := certs.Node{Name: s.Opts.NodeName, AdvertiseAddress: s.Opts.AdvertiseAddress, BindPort: s.Opts.BindPort}
	now := e.Clock.Now()
	leaves, err := certs.NodeCerts(cfg, node, cas, now)
	if err != nil {
		return fmt.Errorf("issue node certificates: %w", err)
	}
	issued := 0
	for _, name := range slices.Sorted(maps.Keys(leaves)) {
		crt := path.Join(pkiDir, name+".crt")
		if e.Exists(crt) {
			continue // kubeadm keeps existing leaves
		}
		if err := e.Fx().WriteFile(path.Join(pkiDir, name+".key"), leaves[name].Key, 0o600); err != nil {
			return err
		}
		if err := e.Fx().WriteFile(crt, leaves[name].Cert, 0o644); err != nil {
			return err
		}
		issued++
	}
	kubeconfigs, err := certs.Kubeconfigs(cfg, node, cas["ca"], now)
	if err != nil {
		return fmt.Errorf("kubeconfigs: %w", err)
	}
	for _, name := range slices.Sorted(maps.Keys(kubeconfigs)) {
		if p := path.Join(host.KubernetesDir, name); !e.Exists(p) {
			if err := e.Fx().WriteFile(p, kubeconfigs[name], 0o600); err != nil {
				return err
			}
		}
	}
	if s.AdminClient, _, err = e.ClientFromKubeconfig(host.AdminKubeconfig); err != nil {
		return fmt.Errorf("admin client: %w", err)
	}
	// The kubelet watches its static pod directory only if it exists when the kubelet starts;
	// otherwise it finds the etcd manifest at its next periodic look, up to 20 s later.
	if err := e.Fx().MkdirAll(host.ManifestsDir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", host.ManifestsDir, err)
	}
	e.Logf("control-plane-prepare", "issued %d node certificates, wrote admin/controller-manager/scheduler kubeconfigs", issued)
	return nil
}

// checkControlPlaneHost runs, before anything is written, the checks that need the cluster's
// configuration: the stacked etcd data directory it names is a dedicated directory (never a
// system directory) and empty unless this very join filled it (kubeadm's DirAvailable check),
// and the kubelet is not newer than kubernetesVersion (kubeadm's rule for control planes;
// version-check read the kubelet's version).
func checkControlPlaneHost(e *host.Env, s *State) error {
	var checks []check
	if l := s.Cluster.Etcd.Local; l != nil {
		if err := checkEtcdDataDir(e, l.DataDir); err != nil {
			return operr.Wrap(operr.Preflight, err, "cannot use the etcd data directory of kube-system/kubeadm-config (etcd.local.dataDir)",
				"set etcd.local.dataDir to a directory of etcd's own (kubeadm's default is /var/lib/etcd) and run the join again; nothing was written")
		}
		if !s.Own && !s.Opts.DryRun {
			checks = append(checks, check{etcdDataCheckName(l.DataDir), func() (string, error) {
				empty, err := etcdDataDirEmpty(e, l.DataDir)
				if err == nil && !empty {
					err = fmt.Errorf("%s is not empty: it may hold another etcd member's data (move it away, or kjoin reset the node's earlier join; ignored, a failed join will not delete it)", path.Clean(l.DataDir))
				}
				return "", err
			}})
		}
	}
	if s.KubeletVersion != "" && s.ClusterVersion != "" {
		checks = append(checks, check{"KubeletVersion", func() (string, error) {
			return "", versions.CheckKubelet(s.KubeletVersion, s.ClusterVersion, s.Cluster.KubernetesVersion)
		}})
	}
	return runChecks(e, s, "control-plane-prepare", checks)
}

// renderControlPlane renders the kube-apiserver, kube-controller-manager and kube-scheduler
// manifests for s.Cluster with the operator's patches applied.
func renderControlPlane(e *host.Env, s *State) (map[string][]byte, error) {
	pods, err := manifests.ControlPlane(s.Cluster, manifestNode(e, s))
	if err != nil {
		return nil, err
	}
	for name, data := range pods {
		if pods[name], err = patchManifest(s, name, data); err != nil {
			return nil, err
		}
	}
	return pods, nil
}

// sameCA refuses uploaded certificates for another cluster CA than the one discovery pinned.
func sameCA(uploaded, pinned []byte) error {
	up, err := pki.ParseCerts(uploaded)
	if err != nil {
		return operr.Wrap(operr.Trust, err, "kube-system/"+certs.SecretName+" holds no usable ca.crt", "upload the certificates again with "+certs.UploadCommand)
	}
	trusted, _ := pki.ParseCerts(pinned)
	pins := discovery.Pins{}
	for _, c := range trusted {
		pins[discovery.Pin(c)] = true
	}
	if _, unpinned := pins.Select(up); len(unpinned) > 0 {
		return operr.Newf(operr.Trust,
			"the CA in kube-system/%s (%s) is not the cluster CA discovery pinned (%s)", certs.SecretName, discovery.PinsOf(unpinned), discovery.PinsOf(trusted)).
			WithHint("upload the certificates again from a control plane of this cluster with " + certs.UploadCommand)
	}
	return nil
}

func manifestNode(e *host.Env, s *State) manifests.Node {
	var environ []string
	if e.Environ != nil {
		environ = e.Environ()
	}
	return manifests.Node{
		ProxyEnv: manifests.ProxyEnv(environ),
		Name:     s.Opts.NodeName, AdvertiseAddress: s.Opts.AdvertiseAddress, BindPort: s.Opts.BindPort,
		HostDirExists: func(d string) bool {
			st, err := os.Stat(e.Paths.Of(d))
			return err == nil && st.IsDir()
		},
		ComponentHealthTimeout: s.Opts.Timeouts.ControlPlane,
	}
}

// patchManifest applies the operator's patches for a static pod manifest.
func patchManifest(s *State, name string, data []byte) ([]byte, error) {
	set, err := loadPatches(s)
	if err != nil {
		return nil, err
	}
	if data, err = set.Apply(name, data); err != nil {
		return nil, operr.Wrap(operr.Usage, err, "cannot apply --patches", "fix the patch file named above")
	}
	return data, nil
}

// writeManifest writes a static pod manifest with the operator's patches for it applied.
func writeManifest(e *host.Env, s *State, name string, data []byte) error {
	data, err := patchManifest(s, name, data)
	if err != nil {
		return err
	}
	return writePatchedManifest(e, s, name, data)
}

// writePatchedManifest writes a static pod manifest as it is.
func writePatchedManifest(e *host.Env, s *State, name string, data []byte) error {
	if err := e.Fx().MkdirAll(host.ManifestsDir, 0o700); err != nil {
		return err
	}
	return e.Fx().WriteFile(path.Join(host.ManifestsDir, name+".yaml"), data, 0o600)
}

// loadPatches reads the operator's patches directory (validated before the join started).
func loadPatches(s *State) (*patches.Set, error) {
	set, err := patches.Load(s.Opts.PatchesDir)
	if err != nil {
		return nil, operr.Wrap(operr.Usage, err, "cannot read --patches", "")
	}
	return set, nil
}

// sharedCAs are the cluster CA and the etcd CA a dry run holds in memory only (downloaded, or
// already on the node), so that etcd-join can look at etcd read-only; nil when either is missing.
func sharedCAs(e *host.Env, pkiDir string, downloaded map[string]certs.File) map[string]*certs.CA {
	out := map[string]*certs.CA{}
	for _, name := range []string{"ca", "etcd/ca"} {
		crt, key := downloaded[name+".crt"].Data, downloaded[name+".key"].Data
		if crt == nil || key == nil {
			crt, _ = e.ReadFile(path.Join(pkiDir, name+".crt"))
			key, _ = e.ReadFile(path.Join(pkiDir, name+".key"))
		}
		ca, err := certs.LoadCA(crt, key)
		if err != nil {
			return nil
		}
		out[name] = ca
	}
	return out
}
