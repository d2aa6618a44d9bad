package clusterconfig

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"kjoin.dev/kjoin/operr"
)

const minimal = "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\nkubernetesVersion: v1.37.2\n"

func TestParseAppliesKubeadmDefaults(t *testing.T) {
	c, err := Parse([]byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	if c.CertificatesDir != "/etc/kubernetes/pki" || c.Etcd.Local == nil || c.Etcd.Local.DataDir != "/var/lib/etcd" ||
		c.Image("etcd") != "registry.k8s.io/etcd:3.7.0-0" || c.Image("kube-apiserver") != "registry.k8s.io/kube-apiserver:v1.37.2" ||
		c.CertValidity() != 8760*time.Hour {
		t.Errorf("defaults: %+v", c)
	}
	ip, err := c.FirstServiceIP()
	if err != nil || ip.String() != "10.96.0.1" {
		t.Errorf("first service IP %v, %v", ip, err)
	}
	if _, err := Parse([]byte("apiVersion: kubeadm.k8s.io/v1beta3\nkind: ClusterConfiguration\n")); err == nil {
		t.Error("v1beta3 accepted")
	}
	ext, err := Parse([]byte(minimal + "etcd:\n  external:\n    endpoints: [https://e:2379]\n"))
	if err != nil || ext.Etcd.Local != nil || ext.Etcd.External == nil {
		t.Errorf("external etcd: %+v %v", ext.Etcd, err)
	}
}

func TestEndpointHost(t *testing.T) {
	for in, want := range map[string]string{"cp.example:6443": "cp.example", "[fd00::1]:6443": "fd00::1", "cp.example": "cp.example"} {
		if got := (&ClusterConfiguration{ControlPlaneEndpoint: in}).EndpointHost(); got != want {
			t.Errorf("EndpointHost(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCommandOverridesAndSorts(t *testing.T) {
	got := strings.Join(Command([]Arg{{"b", "1"}, {"a", "1"}}, []Arg{{"b", "2"}, {"c", "3"}}), " ")
	if got != "--a=1 --b=2 --c=3" {
		t.Errorf("got %q", got)
	}
}

func TestFetch(t *testing.T) {
	ctx := context.Background()
	_, err := Fetch(ctx, fake.NewClientset(), "the bootstrap token")
	if !errors.Is(err, ErrNotFound) || operr.CodeOf(err) != operr.Other {
		t.Errorf("missing kubeadm-config: %v", err)
	}
	c := fake.NewClientset(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: ConfigMap, Namespace: "kube-system"}, Data: map[string]string{"ClusterConfiguration": minimal}})
	cfg, err := Fetch(ctx, c, "x")
	if err != nil || cfg.KubernetesVersion != "v1.37.2" {
		t.Fatalf("%+v %v", cfg, err)
	}
	if err := cfg.RequireControlPlaneEndpoint(); operr.CodeOf(err) != operr.Preflight || !strings.Contains(err.Error(), "no controlPlaneEndpoint") {
		t.Errorf("no controlPlaneEndpoint: %v", err)
	}
	cfg.ControlPlaneEndpoint = "cp:6443"
	if err := cfg.RequireControlPlaneEndpoint(); err != nil {
		t.Error(err)
	}
}

// A cluster that leaves the etcd image to kubeadm gets the one its own kubeadm defaults to: a
// kjoin control plane never adds an etcd 3.7 member to a 3.6 cluster.
func TestEtcdImageFollowsTheClusterMinor(t *testing.T) {
	for v, tag := range map[string]string{"v1.35.4": "3.6.6-0", "v1.36.3": "3.6.8-0", "v1.37.2": "3.7.0-0"} {
		c, err := Parse([]byte(strings.Replace(minimal, "v1.37.2", v, 1)))
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Image("etcd"); got != "registry.k8s.io/etcd:"+tag {
			t.Errorf("%s: etcd image %s, want tag %s", v, got, tag)
		}
	}
	c, _ := Parse([]byte(minimal + "etcd:\n  local:\n    imageTag: 3.6.4-0\n"))
	if got := c.Image("etcd"); got != "registry.k8s.io/etcd:3.6.4-0" {
		t.Errorf("a pinned tag: %s", got)
	}
}
