package discovery

import (
	"crypto/x509"
	"fmt"
	"strings"
	"testing"

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
