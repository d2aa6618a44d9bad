package joinconfig

import (
	"slices"
	"strings"
	"testing"

	"kjoin.dev/kjoin/joinstring"
)

func joinString(t *testing.T, key string, endpoints ...string) string {
	t.Helper()
	s, err := joinstring.Encode(joinstring.JoinString{Endpoints: endpoints, Pins: []string{goodPin}, Token: goodToken, CertificateKey: key})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A join string from a file or standard input fills the endpoints, the pins, the token and,
// for a control plane's, the certificate key (joining as a control plane).
func TestJoinStringFillsTheJoin(t *testing.T) {
	f := Flags{JoinStringFile: writeFile(t, t.TempDir(), "join", joinString(t, "", "10.0.0.1:6443", "10.0.0.2:6443")+"\n", 0o600),
		BindPort: 6443, Output: "text", Wait: "true", WaitReadyTimeout: base().WaitReadyTimeout}
	res, err := resolve(t, f, nil)
	if err != nil {
		t.Fatal(err)
	}
	o := res.Options
	if o.Endpoint != "10.0.0.1:6443" || !slices.Equal(o.MoreEndpoints, []string{"10.0.0.2:6443"}) || !o.Pins[goodPin] || o.DiscoveryToken.Full() != goodToken ||
		o.TLSBootstrapToken.Full() != goodToken || o.ControlPlane || o.CertificateKey != "" {
		t.Errorf("worker string: %+v", o)
	}

	f.JoinStringFile = "-"
	res, err = resolveStdin(t, f, strings.NewReader("\n"+joinString(t, goodKey, "cp.example.com:6443")+"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if o := res.Options; o.Endpoint != "cp.example.com:6443" || !o.ControlPlane || o.CertificateKey != goodKey || o.DiscoveryToken.Full() != goodToken {
		t.Errorf("control plane's string on stdin: %+v", o)
	}
}

// What the string carries may not be given another way: every such flag is named at once.
// A damaged string is refused naming its part, a worker's string with --control-plane is
// refused, an empty or missing file is refused; nothing of the secret is echoed.
func TestJoinStringRefusals(t *testing.T) {
	dir := t.TempDir()
	good := joinString(t, "", "10.0.0.1:6443")
	withString := func(content string) Flags {
		return Flags{JoinStringFile: writeFile(t, dir, "join", content, 0o600), BindPort: 6443, Output: "text", Wait: "true", WaitReadyTimeout: base().WaitReadyTimeout}
	}
	f := withString(good)
	f.Endpoint, f.Token, f.CACertHashes, f.CertificateKeyFile = "10.0.0.9:6443", goodToken, []string{goodPin}, "/k"
	_, err := resolve(t, f, nil)
	for _, want := range []string{"not together with api-server-endpoint argument, --token, --discovery-token-ca-cert-hash, --certificate-key-file"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("flags beside the string: %v, want %q", err, want)
		}
	}
	cut := good[:len(good)-10]
	for _, c := range []struct {
		content, want string
		cp            bool
	}{
		{cut, "cut short", false},
		{good[:12] + "x" + good[13:], "the endpoints part (part 1) is damaged", false},
		{good, "the join string is a worker's", true},
		{"", "it is empty", false},
	} {
		f := withString(c.content)
		f.ControlPlane = c.cp
		_, err := resolve(t, f, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.content, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "0123456789abcdef") {
			t.Errorf("the error shows the token: %v", err)
		}
		if err != nil && strings.Contains(err.Error(), "missing") {
			t.Errorf("a refused string's parts are reported missing besides: %v", err)
		}
	}
	f = withString(good)
	f.JoinStringFile = dir + "/missing"
	if _, err := resolve(t, f, nil); err == nil || !strings.Contains(err.Error(), "--join-string-file") || strings.Count(err.Error(), "--join-string-file") != 1 {
		t.Errorf("missing file: %v (want it named once)", err)
	}
}
