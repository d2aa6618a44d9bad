package discovery

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"kjoin.dev/kjoin/operr"
)

// FileResult is a kubeconfig obtained by file or https discovery.
type FileResult struct {
	Result
	// AuthInfo holds the file's credentials, if any (used when no TLS bootstrap token is given).
	AuthInfo *clientcmdapi.AuthInfo
}

// File loads a discovery kubeconfig from a path, a file:// URL or an https:// URL. Trust comes
// from the file itself (kubeadm's file discovery): its CA is used as given.
func File(ctx context.Context, location string, timeout time.Duration) (*FileResult, error) {
	var data []byte
	var err error
	switch {
	case strings.HasPrefix(location, "https://"):
		data, err = fetchHTTPS(ctx, location, timeout)
	case strings.HasPrefix(location, "http://"):
		return nil, operr.New(operr.Usage, "--discovery-file URL must use https", "serve the discovery kubeconfig over https, or copy it to this host")
	default:
		data, err = os.ReadFile(strings.TrimPrefix(location, "file://"))
	}
	if err != nil {
		return nil, operr.Wrap(operr.Trust, err, "cannot read the discovery file "+location, "check the path or URL given to --discovery-file")
	}
	cfg, err := clientcmd.Load(data)
	if err != nil {
		return nil, operr.Wrap(operr.Trust, err, "the discovery file is not a kubeconfig", "")
	}
	ctxName := cfg.CurrentContext
	var cluster *clientcmdapi.Cluster
	var auth *clientcmdapi.AuthInfo
	if c := cfg.Contexts[ctxName]; c != nil {
		cluster, auth = cfg.Clusters[c.Cluster], cfg.AuthInfos[c.AuthInfo]
	}
	if cluster == nil {
		for _, c := range cfg.Clusters {
			cluster = c
			break
		}
	}
	if cluster == nil || cluster.Server == "" {
		return nil, operr.New(operr.Trust, "the discovery file names no cluster server", "")
	}
	ca := cluster.CertificateAuthorityData
	if len(ca) == 0 && cluster.CertificateAuthority != "" {
		if ca, err = os.ReadFile(cluster.CertificateAuthority); err != nil {
			return nil, operr.Wrap(operr.Trust, err, "cannot read the discovery file's CA", "")
		}
	}
	certs, err := ParseCerts(ca)
	if err != nil {
		return nil, operr.Wrap(operr.Trust, err, "the discovery file carries no usable CA certificate", "embed certificate-authority-data in the file")
	}
	return &FileResult{Result: Result{Server: cluster.Server, CAData: ca, CAPin: Pin(certs[0]), ClusterInfo: data}, AuthInfo: auth}, nil
}

func fetchHTTPS(ctx context.Context, url string, timeout time.Duration) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP %d from %s", resp.StatusCode, url)
	}
	return io.ReadAll(io.LimitReader(resp.Body, 4<<20))
}
