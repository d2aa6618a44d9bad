package discovery

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"kjoin.dev/kjoin/operr"
	"kjoin.dev/kjoin/pki"
)

// FileResult is a kubeconfig obtained by file or https discovery.
type FileResult struct {
	Result
	// AuthInfo holds the file's credentials, if any (used when no TLS bootstrap token is given).
	AuthInfo *clientcmdapi.AuthInfo
}

// File loads a discovery kubeconfig from a path, a file:// URL or an https:// URL. Trust comes
// from the file itself (kubeadm's file discovery): its CA is used as given.
// An https location is fetched with client (nil: the system's roots), never following a redirect.
func File(ctx context.Context, location string, timeout time.Duration, client *http.Client) (*FileResult, error) {
	var data []byte
	var err error
	remote := strings.HasPrefix(location, "https://")
	local := strings.TrimPrefix(location, "file://")
	switch {
	case remote:
		data, err = fetchHTTPS(ctx, location, timeout, client)
	case strings.Contains(location, "://") && !strings.HasPrefix(location, "file://"):
		return nil, operr.New(operr.Usage, "--discovery-file URL must use https", "serve the discovery kubeconfig over https, or copy it to this host")
	default:
		data, err = os.ReadFile(local)
	}
	if err != nil {
		return nil, operr.Wrap(operr.Trust, err, "cannot read the discovery file "+location, "check the path or URL given to --discovery-file")
	}
	cfg, err := clientcmd.Load(data)
	if err != nil {
		// The file may come from an https server not yet trusted: its bytes are quoted briefly.
		return nil, operr.Newf(operr.Trust, "the discovery file is not a kubeconfig: %s", Quote(err.Error()))
	}
	cluster, err := SelectCluster(cfg)
	if err != nil {
		return nil, operr.Wrap(operr.Trust, err, "the discovery file names no usable cluster", "")
	}
	var auth *clientcmdapi.AuthInfo
	if c := cfg.Contexts[cfg.CurrentContext]; c != nil {
		auth = cfg.AuthInfos[c.AuthInfo]
	}
	if err := CheckServerURL(cluster.Server); err != nil {
		return nil, operr.Wrap(operr.Trust, err, "the discovery file names an unusable API server", "")
	}
	ca := cluster.CertificateAuthorityData
	if len(ca) == 0 && cluster.CertificateAuthority != "" {
		if remote {
			return nil, operr.Newf(operr.Trust,
				"the discovery file from %s names its CA by path (%s): a remote file's paths mean nothing on this node", location, cluster.CertificateAuthority).
				WithHint("embed certificate-authority-data in the served file")
		}
		caPath := cluster.CertificateAuthority
		if !filepath.IsAbs(caPath) {
			caPath = filepath.Join(filepath.Dir(local), caPath)
		}
		if ca, err = os.ReadFile(caPath); err != nil {
			return nil, operr.Wrap(operr.Trust, err, "cannot read the discovery file's CA", "")
		}
	}
	certs, err := pki.ParseCerts(ca)
	if err != nil {
		return nil, operr.Wrap(operr.Trust, err, "the discovery file carries no usable CA certificate", "embed certificate-authority-data in the file")
	}
	return &FileResult{Result: Result{Server: cluster.Server, CAData: ca, CAPin: Pin(certs[0]), ClusterInfo: data}, AuthInfo: auth}, nil
}

func fetchHTTPS(ctx context.Context, url string, timeout time.Duration, base *http.Client) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	client := &http.Client{}
	if base != nil {
		client.Transport = base.Transport
	}
	client.CheckRedirect = func(*http.Request, []*http.Request) error {
		return errors.New("redirects are not followed: give the final https URL")
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("HTTP %d from %s: %s", resp.StatusCode, url, Snippet(body))
	}
	return io.ReadAll(io.LimitReader(resp.Body, 4<<20))
}
