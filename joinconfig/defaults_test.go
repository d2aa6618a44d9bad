package joinconfig

import (
	"os"
	"testing"
)

// kjoin config print join-defaults prints exactly what kubeadm v1.37.2's does (the golden is
// that kubeadm's own output, on a host named vm), and it reads back as a valid configuration.
func TestDefaultsAreKubeadms(t *testing.T) {
	want, err := os.ReadFile("testdata/join-defaults.kubeadm-v1.37.2.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got, err := Defaults("vm").YAML()
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("join defaults differ from kubeadm's:\n--- kjoin\n%s\n--- kubeadm\n%s", got, want)
	}
	cfg, err := Decode(got, func(string) {})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.NodeRegistration.Name != "vm" || cfg.Timeouts.Discovery.Duration.Minutes() != 5 {
		t.Fatalf("read back %+v", cfg)
	}
}
