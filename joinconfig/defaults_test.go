package joinconfig

import (
	"os"
	"strings"
	"testing"
	"time"
)

// kjoin config print join-defaults prints what kubeadm v1.37.2's does (the golden is that
// kubeadm's own output, on a host named vm) except that it never turns CA verification off:
// kubeadm's unsafeSkipCAVerification: true becomes a pin placeholder. It reads back as a
// configuration, and a join with it as printed is refused, naming the placeholder.
func TestDefaultsAreKubeadmsButPinned(t *testing.T) {
	kubeadm, err := os.ReadFile("testdata/join-defaults.kubeadm-v1.37.2.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Replace(string(kubeadm), "    token: abcdef.0123456789abcdef\n    unsafeSkipCAVerification: true\n",
		"    caCertHashes:\n    - sha256:<the-cluster-CA-pin>\n    token: abcdef.0123456789abcdef\n", 1)
	if want == string(kubeadm) {
		t.Fatal("kubeadm's golden no longer turns CA verification off: review this test")
	}
	got, err := Defaults("vm").YAML()
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("join defaults differ from kubeadm's:\n--- kjoin\n%s\n--- kubeadm\n%s", got, want)
	}
	cfg, err := Decode(got, func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.NodeRegistration.Name != "vm" || cfg.Timeouts.Discovery.Duration.Minutes() != 5 {
		t.Fatalf("read back %+v", cfg)
	}
	p := t.TempDir() + "/join.yaml"
	if err := os.WriteFile(p, got, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Resolve(Flags{ConfigPath: p, Output: "text", Wait: "true", WaitReadyTimeout: time.Minute, Changed: func(string) bool { return false }}, Sources{}, nil)
	if err == nil || !strings.Contains(err.Error(), "caCertHashes") {
		t.Errorf("the printed defaults as they are: %v, want a refusal naming the pin", err)
	}
}
