package discovery

import (
	"crypto/x509"
	"fmt"
	"strings"
	"testing"
	"time"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Quote keeps a string of exactly 100 bytes whole and cuts one of 101 after 100, never inside
// a character.
func TestQuoteCutsAtTheLimit(t *testing.T) {
	exact := strings.Repeat("a", maxQuoted)
	if got := Quote(exact); got != fmt.Sprintf("%q", exact) {
		t.Errorf("Quote of %d bytes = %s", maxQuoted, got)
	}
	if got, want := Quote(exact+"b"), fmt.Sprintf("%q (1 more bytes)", exact); got != want {
		t.Errorf("Quote of %d bytes = %s, want %s", maxQuoted+1, got, want)
	}
	// "é" is two bytes; one starting at byte 99 would be split by a cut at 100.
	split := strings.Repeat("a", maxQuoted-1) + "é" + "z"
	if got, want := Quote(split), fmt.Sprintf("%q (3 more bytes)", strings.Repeat("a", maxQuoted-1)); got != want {
		t.Errorf("Quote = %s, want %s", got, want)
	}
}

// Snippet keeps 200 bytes whole and says how many bytes it left out.
func TestSnippetCutsAtTheLimit(t *testing.T) {
	exact := strings.Repeat("x", 200)
	if got := Snippet([]byte(exact)); got != fmt.Sprintf("%q", exact) {
		t.Errorf("Snippet of 200 bytes = %s", got)
	}
	if got, want := Snippet([]byte(exact+"yz")), fmt.Sprintf("%q (2 more bytes)", exact); got != want {
		t.Errorf("Snippet of 202 bytes = %s, want %s", got, want)
	}
}

// Ports 1 and 65535 are ports; 0 and 65536 are not.
func TestCheckEndpointPortBounds(t *testing.T) {
	for ep, ok := range map[string]bool{"cp:1": true, "cp:65535": true, "cp:0": false, "cp:65536": false} {
		if err := CheckEndpoint(ep); (err == nil) != ok {
			t.Errorf("CheckEndpoint(%q) = %v", ep, err)
		}
	}
}

// A kubeconfig with no cluster says so (not "0 clusters and no current context").
func TestSelectClusterOfAnEmptyKubeconfig(t *testing.T) {
	_, err := SelectCluster(&clientcmdapi.Config{})
	if err == nil || err.Error() != "the kubeconfig defines no cluster" {
		t.Errorf("got %v", err)
	}
}

// A certificate for another name lists up to ten of its names, then how many more.
func TestNameMismatchListsTenNames(t *testing.T) {
	r := &Request{Endpoint: "cp.example:6443"}
	for n, more := range map[int]string{10: "", 11: ", and 1 more"} {
		cert := &x509.Certificate{}
		for i := range n {
			cert.DNSNames = append(cert.DNSNames, fmt.Sprintf("n%d", i))
		}
		msg := r.identityError(x509.HostnameError{Certificate: cert, Host: "cp.example"}).Error()
		if !strings.Contains(msg, `"n9"`+more) || (more == "" && strings.Contains(msg, "more")) {
			t.Errorf("%d names: %s", n, msg)
		}
	}
}

// A string of 150 continuation bytes (no character starts in it) is cut to nothing, never
// below the start of the string.
func TestQuoteOfNoCharacterStart(t *testing.T) {
	if got, want := Quote(strings.Repeat("\x80", 150)), `"" (150 more bytes)`; got != want {
		t.Errorf("Quote = %s, want %s", got, want)
	}
}

// A request without timeouts gets kubeadm's: 5m for discovery, 10s per call, and 5s for the
// controller-manager to sign cluster-info for a new token; 20s of refused anonymous reads.
func TestRequestDefaults(t *testing.T) {
	r := Request{}
	r.defaults()
	if r.Timeout != 5*time.Minute || r.CallTimeout != 10*time.Second || r.SignatureGrace != 5*time.Second || r.RefusalGrace != 20*time.Second || r.Clock == nil || r.Logf == nil {
		t.Errorf("defaults: %+v", r)
	}
}

// Five pins are named, then how many more.
func TestPinsOfNamesFive(t *testing.T) {
	var certs []*x509.Certificate
	for i := range 7 {
		certs = append(certs, &x509.Certificate{RawSubjectPublicKeyInfo: []byte{byte(i)}})
	}
	got := PinsOf(certs)
	if strings.Count(got, "sha256:") != 5 || !strings.HasSuffix(got, ", and 2 more") {
		t.Errorf("PinsOf(7 certificates) = %s", got)
	}
}
