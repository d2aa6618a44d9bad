// Package cri asks a node's container runtime over the CRI API: whether it is ready, what it
// is (name and version), the sandbox image it is configured with, and whether it answers the
// RuntimeConfig call that kubelets from v1.38 require.
package cri

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Client is a connection to one runtime's CRI services. Not k8s.io/cri-client's remote
// services: they bring klog, OpenTelemetry tracing and component-base into a binary that makes
// five plain calls here.
type Client struct {
	conn *grpc.ClientConn
	rs   runtimeapi.RuntimeServiceClient
	is   runtimeapi.ImageServiceClient
}

// Dial connects to a CRI runtime on a unix socket (unix:///path) under root, the host root
// the paths live under ("/" on a real node). It does not wait for the runtime to answer.
func Dial(root, endpoint string) (*Client, error) {
	path, ok := strings.CutPrefix(endpoint, "unix://")
	if !ok {
		return nil, fmt.Errorf("only unix:// runtime endpoints are supported, not %q", endpoint)
	}
	if root != "" && root != "/" {
		path = strings.TrimSuffix(root, "/") + path
	}
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	return &Client{conn: conn, rs: runtimeapi.NewRuntimeServiceClient(conn), is: runtimeapi.NewImageServiceClient(conn)}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Status reports the runtime's RuntimeReady and NetworkReady conditions, and all of its
// conditions as one line.
func (c *Client) Status(ctx context.Context) (runtimeReady, networkReady bool, detail string, err error) {
	resp, err := c.rs.Status(ctx, &runtimeapi.StatusRequest{})
	if err != nil {
		return false, false, "", err
	}
	var conds []string
	for _, cond := range resp.GetStatus().GetConditions() {
		s := fmt.Sprintf("%s=%v", cond.Type, cond.Status)
		if cond.Reason != "" || cond.Message != "" {
			s += fmt.Sprintf(" (%s: %s)", cond.Reason, cond.Message)
		}
		conds = append(conds, s)
		switch cond.Type {
		case runtimeapi.RuntimeReady:
			runtimeReady = cond.Status
		case runtimeapi.NetworkReady:
			networkReady = cond.Status
		}
	}
	return runtimeReady, networkReady, strings.Join(conds, "; "), nil
}

// RunningContainers counts the runtime's running containers.
func (c *Client) RunningContainers(ctx context.Context) (int, error) {
	resp, err := c.rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}})
	if err != nil {
		return 0, err
	}
	return len(resp.Containers), nil
}

// Info is what a runtime says about itself.
type Info struct {
	// Name and Version are the runtime's (CRI Version: "containerd", "v2.4.2").
	Name    string
	Version string
	// SandboxImage is the pod sandbox ("pause") image the runtime is configured with; empty
	// when it does not say. SandboxImageFrom says where it was read.
	SandboxImage     string
	SandboxImageFrom string
	// RuntimeConfig reports whether the runtime implements the CRI RuntimeConfig call (the
	// cgroup driver the kubelet then takes from the runtime: CgroupDriver).
	RuntimeConfig bool
	CgroupDriver  string
}

// Describe asks the runtime its name and version, its sandbox image and whether it answers
// RuntimeConfig. Only the Version call must succeed.
func (c *Client) Describe(ctx context.Context) (Info, error) {
	v, err := c.rs.Version(ctx, &runtimeapi.VersionRequest{})
	if err != nil {
		return Info{}, fmt.Errorf("CRI Version: %w", err)
	}
	info := Info{Name: v.RuntimeName, Version: v.RuntimeVersion}
	info.SandboxImage, info.SandboxImageFrom = c.sandboxImage(ctx)
	rc, err := c.rs.RuntimeConfig(ctx, &runtimeapi.RuntimeConfigRequest{})
	switch {
	case err == nil:
		info.RuntimeConfig = true
		switch rc.GetLinux().GetCgroupDriver() {
		case runtimeapi.CgroupDriver_SYSTEMD:
			info.CgroupDriver = "systemd"
		case runtimeapi.CgroupDriver_CGROUPFS:
			info.CgroupDriver = "cgroupfs"
		}
	case status.Code(err) == codes.Unimplemented:
	default:
		return info, fmt.Errorf("CRI RuntimeConfig: %w", err)
	}
	return info, nil
}

// sandboxImage reads the configured sandbox image: containerd 1.x (and CRI-O) put it in the
// verbose Status's "config" (sandboxImage, what kubeadm reads); containerd 2 no longer does,
// but pins that image, so an image the runtime marks pinned with a pause tag is it.
func (c *Client) sandboxImage(ctx context.Context) (image, from string) {
	if st, err := c.rs.Status(ctx, &runtimeapi.StatusRequest{Verbose: true}); err == nil {
		var cfg struct {
			SandboxImage string `json:"sandboxImage"`
		}
		if raw, ok := st.GetInfo()["config"]; ok && json.Unmarshal([]byte(raw), &cfg) == nil && cfg.SandboxImage != "" {
			return cfg.SandboxImage, "the runtime's status (config.sandboxImage)"
		}
	}
	imgs, err := c.is.ListImages(ctx, &runtimeapi.ListImagesRequest{})
	if err != nil {
		return "", ""
	}
	for _, img := range imgs.Images {
		if !img.Pinned {
			continue
		}
		for _, tag := range img.RepoTags {
			if IsPauseImage(tag) {
				return tag, "the runtime's pinned images"
			}
		}
	}
	return "", ""
}

// IsPauseImage reports whether ref names a pause image (any registry, tag or digest).
func IsPauseImage(ref string) bool {
	ref, _, _ = strings.Cut(ref, "@")
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		ref = ref[:i]
	}
	return ref == "pause" || strings.HasSuffix(ref, "/pause")
}

// SandboxMatches reports whether the runtime's sandbox image got is the one kubeadm expects
// (want): the same image, or the same pause tag from another registry (a mirror; neither the
// join's version check nor diagnose knows the cluster's imageRepository).
func SandboxMatches(got, want string) bool {
	if SameImage(got, want) {
		return true
	}
	return IsPauseImage(got) && IsPauseImage(want) && tagOf(got) != "" && tagOf(got) == tagOf(want)
}

func tagOf(ref string) string {
	ref, _, _ = strings.Cut(ref, "@")
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		return ref[i+1:]
	}
	return ""
}

// SameImage compares image references, reading a missing registry as docker.io's the way
// runtimes do ("pause:3.10" is "docker.io/library/pause:3.10").
func SameImage(a, b string) bool { return normalImage(a) == normalImage(b) }

func normalImage(ref string) string {
	first, _, found := strings.Cut(ref, "/")
	if !found {
		return "docker.io/library/" + ref
	}
	if !strings.ContainsAny(first, ".:") && first != "localhost" {
		return "docker.io/" + ref
	}
	return ref
}

// Sandbox is one pod sandbox the runtime holds (what `crictl pods` lists).
type Sandbox struct {
	ID   string
	Name string // namespace/name of the pod
}

// Sandboxes is what kjoin reset asks of a runtime, as kubeadm reset does through crictl: the
// pod sandboxes, and their removal (stop, then remove, with their containers).
type Sandboxes interface {
	PodSandboxes(ctx context.Context) ([]Sandbox, error)
	RemovePodSandbox(ctx context.Context, id string) error
	Close() error
}

var _ Sandboxes = (*Client)(nil)

// PodSandboxes lists every pod sandbox the runtime holds, running or not.
func (c *Client) PodSandboxes(ctx context.Context) ([]Sandbox, error) {
	resp, err := c.rs.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return nil, fmt.Errorf("CRI ListPodSandbox: %w", err)
	}
	var out []Sandbox
	for _, p := range resp.Items {
		out = append(out, Sandbox{ID: p.Id, Name: p.GetMetadata().GetNamespace() + "/" + p.GetMetadata().GetName()})
	}
	return out, nil
}

// RemovePodSandbox stops a pod sandbox (its containers with it) and removes it. A sandbox
// already gone is not an error.
func (c *Client) RemovePodSandbox(ctx context.Context, id string) error {
	if _, err := c.rs.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}); err != nil && status.Code(err) != codes.NotFound {
		return fmt.Errorf("CRI StopPodSandbox %s: %w", id, err)
	}
	if _, err := c.rs.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}); err != nil && status.Code(err) != codes.NotFound {
		return fmt.Errorf("CRI RemovePodSandbox %s: %w", id, err)
	}
	return nil
}
