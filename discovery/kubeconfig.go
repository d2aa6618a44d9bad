package discovery

import (
	"errors"
	"fmt"
	"net/url"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// SelectCluster picks the cluster of a kubeconfig: the current context's, else the one named
// "" (kubeadm's cluster-info), else the only one. It never picks at random.
func SelectCluster(cfg *clientcmdapi.Config) (*clientcmdapi.Cluster, error) {
	if c := cfg.Contexts[cfg.CurrentContext]; c != nil {
		if cl := cfg.Clusters[c.Cluster]; cl != nil {
			return cl, nil
		}
		return nil, fmt.Errorf("the current context %s names cluster %s, which is not defined", Quote(cfg.CurrentContext), Quote(c.Cluster))
	}
	if cl := cfg.Clusters[""]; cl != nil {
		return cl, nil
	}
	if len(cfg.Clusters) == 1 {
		for _, cl := range cfg.Clusters {
			if cl != nil {
				return cl, nil
			}
		}
	}
	if len(cfg.Clusters) == 0 {
		return nil, errors.New("the kubeconfig defines no cluster")
	}
	return nil, fmt.Errorf("the kubeconfig defines %d clusters and no current context to choose one", len(cfg.Clusters))
}

// CheckServerURL requires an https URL with a host.
func CheckServerURL(server string) error {
	u, err := url.Parse(server)
	if err != nil {
		return fmt.Errorf("server %s is not a URL", Quote(server))
	}
	if u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("server %s is not an https:// URL", Quote(server))
	}
	return nil
}
