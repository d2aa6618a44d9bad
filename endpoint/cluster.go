package endpoint

import (
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	bootstrapapi "k8s.io/cluster-bootstrap/token/api"
	"sigs.k8s.io/yaml"

	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/operr"
)

// clusterMove moves the cluster's own record of its endpoint (o.UpdateCluster): kubeadm-config's
// ClusterConfiguration controlPlaneEndpoint, read by later control-plane joins and kubeadm
// upgrade, and cluster-info's server, which later joins' discovery hands their kubelets. The
// controller-manager's bootstrap signer signs the changed cluster-info again for every token.
func clusterMove(ctx context.Context, e *host.Env, o Options, r *Report) error {
	if !o.UpdateCluster || o.DryRun {
		return nil
	}
	kubeconfig := o.Kubeconfig
	if kubeconfig == "" {
		kubeconfig = host.AdminKubeconfig
	}
	c, _, err := e.ClientFromKubeconfig(kubeconfig)
	if err != nil {
		return operr.Wrap(operr.Usage, err, "--update-cluster needs admin credentials", "run it on a control plane (admin.conf), or pass --kubeconfig")
	}
	if changed, err := moveKubeadmConfig(ctx, c, o.To); err != nil {
		return err
	} else if changed {
		r.ClusterObjects = append(r.ClusterObjects, "kube-system/kubeadm-config")
		r.Changed = true
	}
	changed, err := moveClusterInfo(ctx, e, c, o.To)
	if err != nil {
		return err
	}
	if changed {
		r.ClusterObjects = append(r.ClusterObjects, "kube-public/cluster-info")
		r.Changed = true
	}
	return nil
}

// moveKubeadmConfig sets controlPlaneEndpoint in kubeadm-config, leaving the rest as it is.
func moveKubeadmConfig(ctx context.Context, c kubernetes.Interface, to string) (bool, error) {
	cm, err := c.CoreV1().ConfigMaps("kube-system").Get(ctx, "kubeadm-config", metav1.GetOptions{})
	if err != nil {
		return false, operr.Wrap(operr.Other, err, "cannot read kube-system/kubeadm-config", "check the admin credentials")
	}
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(cm.Data["ClusterConfiguration"]), &cfg); err != nil || cfg == nil {
		return false, operr.New(operr.Other, "kube-system/kubeadm-config holds no readable ClusterConfiguration", "re-upload it: kubeadm init phase upload-config kubeadm")
	}
	if cfg["controlPlaneEndpoint"] == to {
		return false, nil
	}
	cfg["controlPlaneEndpoint"] = to
	b, err := yaml.Marshal(cfg)
	if err != nil {
		return false, err
	}
	cm.Data["ClusterConfiguration"] = string(b)
	if _, err := c.CoreV1().ConfigMaps("kube-system").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		return false, operr.Wrap(operr.Other, err, "cannot update kube-system/kubeadm-config", "retry; the node's own kubeconfigs already name the new endpoint")
	}
	return true, nil
}

// moveClusterInfo sets the server of cluster-info's kubeconfig, then waits (up to 30 s) for
// the bootstrap signer to sign it again when it was signed.
func moveClusterInfo(ctx context.Context, e *host.Env, c kubernetes.Interface, to string) (bool, error) {
	cms := c.CoreV1().ConfigMaps(metav1.NamespacePublic)
	cm, err := cms.Get(ctx, bootstrapapi.ConfigMapClusterInfo, metav1.GetOptions{})
	if err != nil {
		return false, operr.Wrap(operr.Other, err, "cannot read kube-public/cluster-info", "check the admin credentials")
	}
	kc, err := clientcmd.Load([]byte(cm.Data[bootstrapapi.KubeConfigKey]))
	if err != nil || len(kc.Clusters) == 0 {
		return false, operr.New(operr.Other, "kube-public/cluster-info holds no readable kubeconfig", "re-create it: kubeadm init phase bootstrap-token")
	}
	found := false
	for _, cl := range kc.Clusters {
		if cl.Server != "https://"+to {
			cl.Server, found = "https://"+to, true
		}
	}
	if !found {
		return false, nil
	}
	b, err := clientcmd.Write(*kc)
	if err != nil {
		return false, err
	}
	signed := false
	for k := range cm.Data {
		if strings.HasPrefix(k, bootstrapapi.JWSSignatureKeyPrefix) {
			signed = true
		}
	}
	cm.Data[bootstrapapi.KubeConfigKey] = string(b)
	updated, err := cms.Update(ctx, cm, metav1.UpdateOptions{})
	if err != nil {
		return false, operr.Wrap(operr.Other, err, "cannot update kube-public/cluster-info", "retry; the node's own kubeconfigs already name the new endpoint")
	}
	if signed {
		err := e.PollFor(ctx, "endpoint", "the bootstrap signer to sign cluster-info again", 500*time.Millisecond, 30*time.Second, func(ctx context.Context) (bool, error) {
			now, err := cms.Get(ctx, bootstrapapi.ConfigMapClusterInfo, metav1.GetOptions{})
			return err == nil && now.ResourceVersion != updated.ResourceVersion && resigned(now, b), nil
		})
		if err != nil {
			return true, operr.New(operr.Timeout, "cluster-info was moved but not signed again within 30 s: joins with a token wait for its signature",
				"check that the controller-manager runs (its bootstrapsigner controller signs cluster-info)")
		}
	}
	e.Logf("endpoint", "kube-public/cluster-info names https://%s (signed again: %v)", to, signed)
	return true, nil
}

// resigned reports whether cm still carries the moved kubeconfig and some signature.
func resigned(cm *corev1.ConfigMap, kubeconfig []byte) bool {
	if cm.Data[bootstrapapi.KubeConfigKey] != string(kubeconfig) {
		return false
	}
	for k := range cm.Data {
		if strings.HasPrefix(k, bootstrapapi.JWSSignatureKeyPrefix) {
			return true
		}
	}
	return false
}
