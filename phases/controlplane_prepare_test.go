package phases

import (
	"context"
	"os"
	"path"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/joinrequest"
	"kjoin.dev/kjoin/operr"
	"kjoin.dev/kjoin/pki"
)

// The CA downloaded from kubeadm-certs must be the CA discovery pinned.
func TestUploadedCAMustBeThePinnedCA(t *testing.T) {
	t.Parallel()
	newCA := func() []byte {
		k, _ := pki.NewECKey()
		c, err := pki.NewSelfSignedCA(pki.CertConfig{CommonName: "kubernetes", NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}, k)
		if err != nil {
			t.Fatal(err)
		}
		return pki.EncodeCert(c)
	}
	pinned, other := newCA(), newCA()
	if err := sameCA(pinned, pinned); err != nil {
		t.Errorf("the pinned CA was refused: %v", err)
	}
	err := sameCA(other, pinned)
	if operr.CodeOf(err) != operr.Trust || !strings.Contains(err.Error(), "is not the cluster CA discovery pinned") {
		t.Errorf("another CA: %v", err)
	}
	if err := sameCA([]byte("junk"), pinned); operr.CodeOf(err) != operr.Trust {
		t.Errorf("junk: %v", err)
	}
	// A bundle of the pinned CA and a foreign one is refused too: every CA must be pinned.
	bundle := append(append([]byte{}, pinned...), other...)
	if err := sameCA(bundle, pinned); operr.CodeOf(err) != operr.Trust {
		t.Errorf("the pinned CA bundled with a foreign one was accepted: %v", err)
	}
}

func TestControlPlanePrepareRefusals(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		edit func(c *cpHost, o *joinrequest.Options)
		code operr.Code
		want string
	}{
		{"wrong certificate key", func(c *cpHost, o *joinrequest.Options) {
			o.CertificateKey = strings.Repeat("ab", 32)
		}, operr.Auth, "does not match the uploaded certificates"},
		{"no controlPlaneEndpoint", func(c *cpHost, o *joinrequest.Options) {
			cm, _ := c.client.CoreV1().ConfigMaps("kube-system").Get(context.Background(), "kubeadm-config", metav1.GetOptions{})
			cm.Data["ClusterConfiguration"] = strings.Replace(cm.Data["ClusterConfiguration"], "controlPlaneEndpoint: control-plane.lab:6443\n", "", 1)
			_, _ = c.client.CoreV1().ConfigMaps("kube-system").Update(context.Background(), cm, metav1.UpdateOptions{})
		}, operr.Preflight, "no controlPlaneEndpoint"},
		{"no kubeadm-config", func(c *cpHost, o *joinrequest.Options) {
			_ = c.client.CoreV1().ConfigMaps("kube-system").Delete(context.Background(), "kubeadm-config", metav1.DeleteOptions{})
		}, operr.Other, "no kube-system/kubeadm-config"},
		{"certificates expired from the cluster", func(c *cpHost, o *joinrequest.Options) {
			_ = c.client.CoreV1().Secrets("kube-system").Delete(context.Background(), "kubeadm-certs", metav1.DeleteOptions{})
		}, operr.Auth, "expire 2 hours after upload"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newCPHost(t)
			o := c.options(t)
			tc.edit(c, &o)
			_, err := Run(context.Background(), c.env, &State{Opts: o}, Join, RunOptions{})
			if operr.CodeOf(err) != tc.code || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v (code %d), want code %d with %q", err, operr.CodeOf(err), tc.code, tc.want)
			}
			if len(c.etcd.Added) != 0 {
				t.Error("etcd was changed by a refused join")
			}
		})
	}
}

// A patch that cannot be applied to a control-plane manifest fails the join in
// control-plane-prepare, before it writes anything: no certificate, kubeconfig, manifest or
// journal, and etcd untouched.
func TestBadPatchFailsBeforeAnythingIsWritten(t *testing.T) {
	t.Parallel()
	c := newCPHost(t)
	o := c.options(t)
	o.PatchesDir = t.TempDir()
	bad := "- op: replace\n  path: /spec/nosuchfield/0\n  value: x\n"
	if err := os.WriteFile(path.Join(o.PatchesDir, "kube-apiserver+json.yaml"), []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Run(context.Background(), c.env, &State{Opts: o}, Join, RunOptions{})
	if operr.CodeOf(err) != operr.Usage || !strings.Contains(err.Error(), "cannot apply --patches") {
		t.Fatalf("got %v (code %d), want a usage error about --patches", err, operr.CodeOf(err))
	}
	for _, p := range []string{"/etc/kubernetes/pki", "/etc/kubernetes/admin.conf", host.ManifestsDir, JournalPath, host.KubeletKubeconfig} {
		if c.env.Exists(p) {
			t.Errorf("%s was written by a join refused for its patch", p)
		}
	}
	if len(c.etcd.Added) != 0 {
		t.Error("etcd was changed")
	}
}

// The static pod directory exists before the kubelet starts (the kubelet watches it only if
// it exists then), while no manifest is in it yet.
func TestManifestsDirExistsBeforeKubeletStarts(t *testing.T) {
	t.Parallel()
	c := newCPHost(t)
	if _, err := Run(context.Background(), c.env, &State{Opts: c.options(t)}, Join, RunOptions{Only: []string{"control-plane-prepare"}}); err != nil {
		t.Fatalf("%v\n%s", err, c.out)
	}
	st, err := os.Stat(c.env.Paths.Of(host.ManifestsDir))
	if err != nil || !st.IsDir() {
		t.Fatalf("%s after control-plane-prepare: %v", host.ManifestsDir, err)
	}
	if entries, _ := os.ReadDir(c.env.Paths.Of(host.ManifestsDir)); len(entries) != 0 {
		t.Errorf("manifests written before etcd joined: %v", entries)
	}
}
