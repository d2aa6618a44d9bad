package diagnose

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// DialRuntime connects to a CRI runtime service on a unix socket (unix:///path), under root
// (the host root the paths live under; "/" on a real node).
func DialRuntime(root string) func(ctx context.Context, endpoint string) (Runtime, error) {
	return func(ctx context.Context, endpoint string) (Runtime, error) {
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
		return &criRuntime{conn: conn, rs: runtimeapi.NewRuntimeServiceClient(conn)}, nil
	}
}

type criRuntime struct {
	conn *grpc.ClientConn
	rs   runtimeapi.RuntimeServiceClient
}

func (c *criRuntime) Status(ctx context.Context) (bool, bool, string, error) {
	resp, err := c.rs.Status(ctx, &runtimeapi.StatusRequest{})
	if err != nil {
		return false, false, "", err
	}
	var runtimeReady, networkReady bool
	var detail []string
	for _, cond := range resp.GetStatus().GetConditions() {
		s := fmt.Sprintf("%s=%v", cond.Type, cond.Status)
		if cond.Reason != "" || cond.Message != "" {
			s += fmt.Sprintf(" (%s: %s)", cond.Reason, cond.Message)
		}
		detail = append(detail, s)
		switch cond.Type {
		case runtimeapi.RuntimeReady:
			runtimeReady = cond.Status
		case runtimeapi.NetworkReady:
			networkReady = cond.Status
		}
	}
	return runtimeReady, networkReady, strings.Join(detail, "; "), nil
}

func (c *criRuntime) RunningContainers(ctx context.Context) (int, error) {
	resp, err := c.rs.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}})
	if err != nil {
		return 0, err
	}
	return len(resp.Containers), nil
}

func (c *criRuntime) Close() error { return c.conn.Close() }
