package cri

import (
	"context"
	"maps"
	"slices"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// podRuntime holds pod sandboxes and records what was stopped and removed, in order.
type podRuntime struct {
	fakeRuntime
	mu    sync.Mutex
	pods  map[string]*runtimeapi.PodSandbox
	calls []string
}

func (f *podRuntime) ListPodSandbox(context.Context, *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	resp := &runtimeapi.ListPodSandboxResponse{}
	for _, id := range slices.Sorted(maps.Keys(f.pods)) {
		resp.Items = append(resp.Items, f.pods[id])
	}
	return resp, nil
}

func (f *podRuntime) StopPodSandbox(_ context.Context, r *runtimeapi.StopPodSandboxRequest) (*runtimeapi.StopPodSandboxResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "stop "+r.PodSandboxId)
	p, ok := f.pods[r.PodSandboxId]
	if !ok {
		return nil, status.Error(codes.NotFound, "no such sandbox")
	}
	p.State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	return &runtimeapi.StopPodSandboxResponse{}, nil
}

func (f *podRuntime) RemovePodSandbox(_ context.Context, r *runtimeapi.RemovePodSandboxRequest) (*runtimeapi.RemovePodSandboxResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "remove "+r.PodSandboxId)
	if p, ok := f.pods[r.PodSandboxId]; ok && p.State == runtimeapi.PodSandboxState_SANDBOX_READY {
		return nil, status.Error(codes.FailedPrecondition, "sandbox is still running")
	}
	delete(f.pods, r.PodSandboxId)
	return &runtimeapi.RemovePodSandboxResponse{}, nil
}

func TestPodSandboxesStoppedThenRemoved(t *testing.T) {
	f := &podRuntime{pods: map[string]*runtimeapi.PodSandbox{
		"a1": {Id: "a1", Metadata: &runtimeapi.PodSandboxMetadata{Namespace: "kube-system", Name: "etcd-cp2"}, State: runtimeapi.PodSandboxState_SANDBOX_READY},
		"b2": {Id: "b2", Metadata: &runtimeapi.PodSandboxMetadata{Namespace: "default", Name: "web-0"}, State: runtimeapi.PodSandboxState_SANDBOX_NOTREADY},
	}}
	root, ep := serve(t, f)
	cl, err := Dial(root, ep)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	got, err := cl.PodSandboxes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []Sandbox{{ID: "a1", Name: "kube-system/etcd-cp2"}, {ID: "b2", Name: "default/web-0"}}
	if !slices.Equal(got, want) {
		t.Fatalf("sandboxes %+v, want %+v", got, want)
	}
	for _, s := range got {
		if err := cl.RemovePodSandbox(ctx, s.ID); err != nil {
			t.Fatal(err)
		}
	}
	// A sandbox already gone is not an error (a second reset, or the kubelet removed it).
	if err := cl.RemovePodSandbox(ctx, "a1"); err != nil {
		t.Errorf("removing a gone sandbox: %v", err)
	}
	if left, _ := cl.PodSandboxes(ctx); len(left) != 0 {
		t.Errorf("left %+v", left)
	}
	if wantCalls := []string{"stop a1", "remove a1", "stop b2", "remove b2", "stop a1", "remove a1"}; !slices.Equal(f.calls, wantCalls) {
		t.Errorf("calls %q, want %q", f.calls, wantCalls)
	}
}
