package app

import (
	"context"
	"fmt"
	"net"
	"syscall"

	"github.com/spf13/cobra"

	"kjoin.dev/kjoin/diagnose"
	"kjoin.dev/kjoin/operr"
)

// DiagnoseOptions are the flags of kjoin diagnose.
type DiagnoseOptions struct {
	NodeName string
	Output   string
	Root     string
}

// NewCmdDiagnose builds kjoin diagnose.
func NewCmdDiagnose(deps *Deps) *cobra.Command {
	o := &DiagnoseOptions{}
	cmd := &cobra.Command{
		Use:   "diagnose",
		Short: "Explain why this node is NotReady (run as root on the node)",
		Long: `Check this node along its reporting path, from the cluster inward: the Node's conditions,
taints, Lease and pod CIDR; the kubelet (service, /healthz, its last errors); its client
certificate (validity, 75% of lifetime, rotation, node name, pending rotation CSRs);
connectivity to the API server in kubelet.conf (DNS, TCP, TLS, an authenticated request,
clock skew); the container runtime over the CRI API (RuntimeReady, NetworkReady, running
containers); the CNI configuration; free disk, memory and PIDs against the kubelet's eviction
thresholds. Then it names the most likely cause and the next step. The local checks run even
when the API server is unreachable. Works on nodes joined by kjoin or kubeadm.
Exit 0 when the node is healthy, 8 when it is not.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runDiagnose(cmd.Context(), deps, o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.NodeName, "node-name", "", "node name (default: from the kubelet's client certificate)")
	f.StringVarP(&o.Output, "output", "o", "text", "output format: text or json")
	f.StringVar(&o.Root, "root", "/", "host root directory (for tests)")
	_ = f.MarkHidden("root")
	return cmd
}

func runDiagnose(ctx context.Context, deps *Deps, o *DiagnoseOptions) error {
	if err := checkOutput(o.Output, "text", "json"); err != nil {
		return err
	}
	env := deps.NewEnv(o.Root, 0)
	var dialer net.Dialer
	rep := diagnose.Run(ctx, diagnose.Deps{
		Host: env, NodeName: o.NodeName, Runtime: diagnose.DialRuntime(env), Statfs: statfs,
		LookupHost: net.DefaultResolver.LookupHost, Dial: dialer.DialContext,
	})
	var failure error
	if !rep.Verdict.Healthy {
		failure = operr.Newf(operr.Verify, "node %q is not healthy: %s", rep.Node, rep.Verdict.Cause).WithHint(rep.Verdict.Next)
	}
	out := struct {
		*diagnose.Report
		Error *ErrorJSON `json:"error,omitempty"`
	}{rep, NewErrorJSON(failure)}
	return reportOutcome(deps, o.Output, out, rep.Checks, failure, fmt.Sprintf("node %q is healthy", rep.Node))
}

func statfs(path string) (avail, total uint64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, 0, err
	}
	return st.Bavail * uint64(st.Bsize), st.Blocks * uint64(st.Bsize), nil
}
