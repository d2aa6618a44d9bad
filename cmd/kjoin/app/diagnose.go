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
	g        *Globals
}

// NewCmdDiagnose builds kjoin diagnose.
func NewCmdDiagnose(deps *Deps, g *Globals) *cobra.Command {
	o := &DiagnoseOptions{g: g}
	cmd := &cobra.Command{
		Use: "diagnose",
		Example: `  kjoin diagnose               # on the node that is NotReady
  kjoin diagnose -o json`,
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
	return cmd
}

func runDiagnose(ctx context.Context, deps *Deps, o *DiagnoseOptions) error {
	env := deps.NewEnv(o.g.Root, o.g.Verbosity)
	var dialer net.Dialer
	rep := diagnose.Run(ctx, diagnose.Deps{
		Host: env, NodeName: o.NodeName, Runtime: diagnose.DialRuntime(env), Statfs: statfs,
		LookupHost: net.DefaultResolver.LookupHost, Dial: dialer.DialContext,
	})
	var failure error
	if !rep.Verdict.Healthy {
		failure = operr.Newf(operr.Verify, "node %q is not healthy: %s", rep.Node, rep.Verdict.Cause).WithHint(rep.Verdict.Next)
	}
	return reportOutcome(deps, o.g, diagnoseReportOf(rep, failure), rep.Checks, failure, fmt.Sprintf("node %q is healthy", rep.Node))
}

func statfs(path string) (avail, total uint64, err error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, 0, err
	}
	return st.Bavail * uint64(st.Bsize), st.Blocks * uint64(st.Bsize), nil
}
