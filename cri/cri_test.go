package cri

import (
	"context"
	"net"
	"path/filepath"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// fakeRuntime is a CRI runtime and image service on a unix socket: containerd 1.x style
// (sandboxImage in the verbose status, no RuntimeConfig) or 2.x style (a pinned pause image,
// RuntimeConfig answered).
type fakeRuntime struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	runtimeapi.UnimplementedImageServiceServer
	v2 bool
}

func (f *fakeRuntime) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	if f.v2 {
		return &runtimeapi.VersionResponse{RuntimeName: "containerd", RuntimeVersion: "v2.4.2", RuntimeApiVersion: "v1"}, nil
	}
	return &runtimeapi.VersionResponse{RuntimeName: "containerd", RuntimeVersion: "1.6.20~ds1", RuntimeApiVersion: "v1"}, nil
}

func (f *fakeRuntime) Status(_ context.Context, r *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	resp := &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
		{Type: runtimeapi.RuntimeReady, Status: true}, {Type: runtimeapi.NetworkReady, Status: false, Reason: "NetworkPluginNotReady", Message: "cni config uninitialized"}}}}
	if r.Verbose {
		if f.v2 {
			resp.Info = map[string]string{"config": `{"containerdRootDir":"/var/lib/containerd"}`}
		} else {
			resp.Info = map[string]string{"config": `{"sandboxImage":"registry.k8s.io/pause:3.6"}`}
		}
	}
	return resp, nil
}

func (f *fakeRuntime) RuntimeConfig(context.Context, *runtimeapi.RuntimeConfigRequest) (*runtimeapi.RuntimeConfigResponse, error) {
	if !f.v2 {
		return nil, status.Error(codes.Unimplemented, "unknown method RuntimeConfig for service runtime.v1.RuntimeService")
	}
	return &runtimeapi.RuntimeConfigResponse{Linux: &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: runtimeapi.CgroupDriver_SYSTEMD}}, nil
}

func (f *fakeRuntime) ListImages(context.Context, *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	return &runtimeapi.ListImagesResponse{Images: []*runtimeapi.Image{
		{Id: "a", RepoTags: []string{"registry.k8s.io/pause:3.9"}},
		{Id: "b", RepoTags: []string{"registry.k8s.io/kube-apiserver:v1.37.2"}, Pinned: true},
		{Id: "c", RepoTags: []string{"registry.k8s.io/pause:3.10.2"}, Pinned: true},
	}}, nil
}

func serve(t *testing.T, f interface {
	runtimeapi.RuntimeServiceServer
	runtimeapi.ImageServiceServer
}) (root, endpoint string) {
	t.Helper()
	root = t.TempDir()
	l, err := net.Listen("unix", filepath.Join(root, "cri.sock"))
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(s, f)
	runtimeapi.RegisterImageServiceServer(s, f)
	go func() { _ = s.Serve(l) }()
	t.Cleanup(s.Stop)
	return root, "unix:///cri.sock"
}

func TestDescribe(t *testing.T) {
	for _, c := range []struct {
		name string
		f    *fakeRuntime
		want Info
	}{
		{"containerd 1.6", &fakeRuntime{}, Info{Name: "containerd", Version: "1.6.20~ds1", SandboxImage: "registry.k8s.io/pause:3.6", SandboxImageFrom: "the runtime's status (config.sandboxImage)"}},
		{"containerd 2", &fakeRuntime{v2: true}, Info{Name: "containerd", Version: "v2.4.2", SandboxImage: "registry.k8s.io/pause:3.10.2", SandboxImageFrom: "the runtime's pinned images", RuntimeConfig: true, CgroupDriver: "systemd"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			root, ep := serve(t, c.f)
			cl, err := Dial(root, ep)
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			got, err := cl.Describe(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("got %+v\nwant %+v", got, c.want)
			}
			rr, nr, detail, err := cl.Status(context.Background())
			if err != nil || !rr || nr || detail != "RuntimeReady=true; NetworkReady=false (NetworkPluginNotReady: cni config uninitialized)" {
				t.Errorf("status %v %v %q %v", rr, nr, detail, err)
			}
		})
	}
	if _, err := Dial("/", "tcp://127.0.0.1:1"); err == nil {
		t.Error("a tcp endpoint was accepted")
	}
}

func TestImages(t *testing.T) {
	for ref, want := range map[string]bool{"registry.k8s.io/pause:3.10.2": true, "pause": true, "localhost:5000/pause:3.10": true,
		"registry.k8s.io/pause@sha256:abcd": true, "registry.k8s.io/pause-amd64:3.1": false, "registry.k8s.io/kube-apiserver:v1.37.2": false, "example.com/pause/x:1": false} {
		if got := IsPauseImage(ref); got != want {
			t.Errorf("IsPauseImage(%q) = %v", ref, got)
		}
	}
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{"registry.k8s.io/pause:3.10.2", "registry.k8s.io/pause:3.10.2", true},
		{"pause:3.10", "docker.io/library/pause:3.10", true},
		{"library/pause:3.10", "docker.io/library/pause:3.10", true},
		{"registry.k8s.io/pause:3.10.1", "registry.k8s.io/pause:3.10.2", false},
		{"localhost:5000/pause:3.10.2", "registry.k8s.io/pause:3.10.2", false},
	} {
		if got := SameImage(c.a, c.b); got != c.same {
			t.Errorf("SameImage(%q, %q) = %v", c.a, c.b, got)
		}
	}
	for _, c := range []struct {
		got  string
		same bool
	}{
		{"registry.k8s.io/pause:3.10.2", true},
		{"mirror.example.com/k8s/pause:3.10.2", true},
		{"localhost:5000/pause:3.10.2", true},
		{"registry.k8s.io/pause:3.10.1", false},
		{"mirror.example.com/k8s/pause", false},
		{"registry.k8s.io/not-pause:3.10.2", false},
	} {
		if got := SandboxMatches(c.got, "registry.k8s.io/pause:3.10.2"); got != c.same {
			t.Errorf("SandboxMatches(%q) = %v", c.got, got)
		}
	}
}
