package discovery

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"kjoin.dev/kjoin/operr"
	"kjoin.dev/kjoin/pki"
)

func TestFileDiscovery(t *testing.T) {
	ca, _ := newCA(t)
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: "https://cp.example:6443", CertificateAuthorityData: pki.EncodeCert(ca)}
	cfg.AuthInfos["u"] = &clientcmdapi.AuthInfo{Token: "abcdef.0123456789abcdef"}
	cfg.Contexts["x"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	cfg.CurrentContext = "x"
	b, _ := clientcmd.Write(*cfg)
	p := filepath.Join(t.TempDir(), "discovery.conf")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, loc := range []string{p, "file://" + p} {
		res, err := File(context.Background(), loc, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if res.Server != "https://cp.example:6443" || res.CAPin != Pin(ca) || res.AuthInfo.Token != "abcdef.0123456789abcdef" {
			t.Errorf("%s: %+v", loc, res)
		}
	}
	if _, err := File(context.Background(), "http://example/discovery.conf", time.Second); operr.CodeOf(err) != operr.Usage {
		t.Errorf("http URL: %v", err)
	}
	if _, err := File(context.Background(), filepath.Join(t.TempDir(), "missing"), time.Second); err == nil || !strings.Contains(err.Error(), "cannot read the discovery file") {
		t.Errorf("missing file: %v", err)
	}
}
