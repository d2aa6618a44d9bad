// Package packaging holds the files of kjoin's .deb (nfpm.yaml, the copyright file, the kubelet
// unit and drop-in) and the tests that tie them to the code.
package packaging

import (
	"os"
	"strings"
	"testing"

	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/kubelet"
)

// The kubelet drop-in makes the kubelet read exactly the files a join writes: its kubeconfig,
// config.yaml and kubeadm-flags.env, whose variable it passes on.
func TestKubeletDropInReadsTheJoinsFiles(t *testing.T) {
	b, err := os.ReadFile("systemd/10-kjoin.conf")
	if err != nil {
		t.Fatal(err)
	}
	dropIn := string(b)
	for _, want := range []string{"--kubeconfig=" + host.KubeletKubeconfig, "--bootstrap-kubeconfig=" + host.BootstrapKubeconfig,
		"--config=" + host.KubeletConfigPath, "EnvironmentFile=-" + host.KubeletFlagsPath, "ExecStart=\n"} {
		if !strings.Contains(dropIn, want) {
			t.Errorf("the drop-in lacks %q", want)
		}
	}
	variable, _, _ := strings.Cut(string(kubelet.FlagsEnv(nil, nil)), "=")
	if !strings.Contains(dropIn, "$"+variable) {
		t.Errorf("the drop-in does not pass $%s, the variable kubeadm-flags.env sets", variable)
	}
	unit, err := os.ReadFile("systemd/kubelet.service")
	if err != nil || !strings.Contains(string(unit), "ExecStart=/usr/bin/kubelet") {
		t.Errorf("kubelet.service: %v", err)
	}
}

// The copyright file is machine-readable (DEP-5) and refers to Debian's copy of the licence.
func TestCopyrightIsDEP5(t *testing.T) {
	b, err := os.ReadFile("copyright")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/", "License: Apache-2.0", "/usr/share/common-licenses/Apache-2.0"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("copyright lacks %q", want)
		}
	}
}
