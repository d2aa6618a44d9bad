package discovery

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
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
		res, err := File(context.Background(), loc, time.Second, nil)
		if err != nil {
			t.Fatal(err)
		}
		if res.Server != "https://cp.example:6443" || res.CAPin != Pin(ca) || res.AuthInfo.Token != "abcdef.0123456789abcdef" {
			t.Errorf("%s: %+v", loc, res)
		}
	}
	if _, err := File(context.Background(), "http://example/discovery.conf", time.Second, nil); operr.CodeOf(err) != operr.Usage {
		t.Errorf("http URL: %v", err)
	}
	if _, err := File(context.Background(), filepath.Join(t.TempDir(), "missing"), time.Second, nil); err == nil || !strings.Contains(err.Error(), "cannot read the discovery file") {
		t.Errorf("missing file: %v", err)
	}
}

func TestHTTPSDiscoveryFile(t *testing.T) {
	ca, _ := newCA(t)
	withPath := clientcmdapi.NewConfig()
	withPath.Clusters["c"] = &clientcmdapi.Cluster{Server: "https://cp.example:6443", CertificateAuthority: "ca.crt"}
	pathFile, _ := clientcmd.Write(*withPath)
	embedded := clientcmdapi.NewConfig()
	embedded.Clusters["c"] = &clientcmdapi.Cluster{Server: "https://cp.example:6443", CertificateAuthorityData: pki.EncodeCert(ca)}
	embeddedFile, _ := clientcmd.Write(*embedded)
	var followed atomic.Bool
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { followed.Store(true); _, _ = w.Write(embeddedFile) }))
	defer plain.Close()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/path":
			_, _ = w.Write(pathFile)
		case "/embedded":
			_, _ = w.Write(embeddedFile)
		default:
			http.Redirect(w, r, plain.URL+"/x", http.StatusFound)
		}
	}))
	defer srv.Close()
	// A CA file next to the process must not be picked up for a remote file's relative path.
	if err := os.WriteFile("ca.crt", pki.EncodeCert(ca), 0o600); err == nil {
		defer os.Remove("ca.crt")
	}
	_, err := File(context.Background(), srv.URL+"/path", time.Second, srv.Client())
	if operr.CodeOf(err) != operr.Trust || !strings.Contains(err.Error(), "names its CA by path") {
		t.Errorf("remote file with a CA path: %v", err)
	}
	if res, err := File(context.Background(), srv.URL+"/embedded", time.Second, srv.Client()); err != nil || res.CAPin != Pin(ca) {
		t.Errorf("embedded CA: %+v %v", res, err)
	}
	if _, err := File(context.Background(), srv.URL+"/redirect", time.Second, srv.Client()); err == nil || followed.Load() {
		t.Errorf("a redirect to http was followed: %v", err)
	}
}

func TestLocalDiscoveryFileRelativeCA(t *testing.T) {
	ca, _ := newCA(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "ca.crt"), pki.EncodeCert(ca), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["c"] = &clientcmdapi.Cluster{Server: "https://cp.example:6443", CertificateAuthority: "ca.crt"}
	b, _ := clientcmd.Write(*cfg)
	p := filepath.Join(dir, "discovery.conf")
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := File(context.Background(), p, time.Second, nil)
	if err != nil || res.CAPin != Pin(ca) {
		t.Errorf("a local file's relative CA path resolves next to the file: %+v %v", res, err)
	}
}
