package app

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"kjoin.dev/kjoin/etcd"
	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/operr"
	"kjoin.dev/kjoin/output"
	"kjoin.dev/kjoin/verify"
)

// VerifyOptions are the flags and arguments of kjoin verify.
type VerifyOptions struct {
	KubeconfigOptions
	Nodes   []string
	Timeout time.Duration
	// Wait, when set, repeats the verification until every check passes or Wait has passed.
	Wait time.Duration
	g    *Globals
}

// NewCmdVerify builds kjoin verify.
func NewCmdVerify(deps *Deps, g *Globals) *cobra.Command {
	o := &VerifyOptions{g: g}
	cmd := &cobra.Command{
		Use: "verify [NODE...]",
		Example: `  kjoin verify                 # every node and the etcd cluster
  kjoin verify w1 cp2 -o json  # just these nodes, for automation`,
		Short: "Verify joined nodes: Ready, Lease renewing, pod CIDR, CSRs; etcd member, static pods and /livez for control planes",
		Long: `Verify nodes after a join, from the cluster's side. For each node (default: every node):
registered, Ready, no not-ready/unreachable taint, its Lease held by it and renewing, a pod CIDR
where the cluster allocates them, no CSR of the node pending. For control planes also: a started,
voting etcd member, as many etcd members as control-plane nodes, every member healthy, the
etcd/kube-apiserver/kube-controller-manager/kube-scheduler pods running and ready, and the node's
API server answering /livez over TLS verified by the cluster CA.

The kubeconfig is chosen as kubectl chooses it (--kubeconfig, KUBECONFIG, ~/.kube/config), then
/etc/kubernetes/admin.conf, else the node's own kubelet.conf on a joined worker (then that node
is checked); etcd checks need the etcd client certificate of a control plane. Exit 0 when every
check passes, 8 when one fails.

--wait repeats the verification (as kubectl wait does) until every check passes or its budget
(default 2m) runs out, saying on stderr which checks it still waits for: right after a join,
mirror pods, the Lease and the not-ready taint take a few seconds to settle.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Nodes = args
			return runVerify(cmd.Context(), deps, o)
		},
	}
	o.bind(cmd, host.AdminKubeconfig+", else the node's kubelet.conf")
	f := cmd.Flags()
	f.DurationVar(&o.Timeout, "timeout", time.Minute, "how long one verification may take")
	f.DurationVar(&o.Wait, "wait", 0, "repeat until every check passes, for at most this long (--wait alone: 2m)")
	f.Lookup("wait").NoOptDefVal = "2m"
	completeNodeArgs(cmd, deps, g)
	return cmd
}

func runVerify(ctx context.Context, deps *Deps, o *VerifyOptions) error {
	var bad operr.Problems
	if o.Timeout <= 0 {
		bad.Bad("--timeout", o.Timeout.String(), "a duration above zero")
	}
	if o.Wait < 0 {
		bad.Bad("--wait", o.Wait.String(), "a duration of zero or more")
	}
	if err := bad.Err("kjoin verify"); err != nil {
		return err
	}
	env := deps.NewEnv(o.g.Root, o.g.Verbosity)
	client, cfg, nodes, err := verifyClient(deps, env, o)
	if err != nil {
		return err
	}
	opts := verify.Options{Client: client, Nodes: nodes, HTTP: env.HTTPClient, Clock: env.Clock, EtcdPeer: env.EtcdPeer, KubeletTLS: env.PeerCertificates}
	if cas, err := x509CertPool(cfg); err == nil {
		opts.CA = cas
	}
	if tlsCfg, err := host.EtcdClientTLS(env, host.PKIDir); err == nil {
		opts.Etcd = func(eps []string) (etcd.Conn, error) { return env.DialEtcd(eps, tlsCfg) }
	}
	rep, err := verifyUntil(ctx, env, deps, o, opts)
	if err != nil {
		return operr.Wrap(operr.Other, err, "cannot read the cluster", "check the kubeconfig and that the API server answers")
	}
	var failure error
	if rep.Failed > 0 {
		failure = operr.Newf(operr.Verify, "%d check(s) failed", rep.Failed).
			WithHint("on a NotReady node, kjoin diagnose says why")
	}
	return reportOutcome(deps, o.g, verifyReportOf(rep, failure), rep.Checks, failure,
		fmt.Sprintf("verified: %d node(s), %d check(s) passed, %d warning(s)", len(rep.Nodes), len(rep.Checks)-rep.Warned, rep.Warned))
}

// verifyUntil runs the verification once, or with --wait until every check passes or the
// budget runs out (then the last report stands), naming on stderr the checks it waits for
// whenever they change, and every 15 s.
func verifyUntil(ctx context.Context, env *host.Env, deps *Deps, o *VerifyOptions, opts verify.Options) (*verify.Report, error) {
	once := func() (*verify.Report, error) {
		cctx, cancel := context.WithTimeout(ctx, o.Timeout)
		defer cancel()
		return verify.Run(cctx, opts)
	}
	if o.Wait == 0 {
		return once()
	}
	start := env.Clock.Now()
	var last *verify.Report
	var said string
	var saidAt time.Time
	err := env.Poll(ctx, time.Second, o.Wait, func(context.Context) (bool, error) {
		rep, err := once()
		if err != nil {
			return false, nil // the API server may be settling too: try again within the budget
		}
		last = rep
		if rep.Failed == 0 {
			return true, nil
		}
		var waiting []string
		for _, c := range rep.Checks {
			if c.Status == verify.Fail {
				waiting = append(waiting, c.Node+"/"+c.ID)
			}
		}
		if w := strings.Join(waiting, ", "); w != said || env.Clock.Since(saidAt) >= 15*time.Second {
			fmt.Fprintf(deps.Err, "[verify] waiting for %s (%s left)\n", w, (o.Wait - env.Clock.Since(start)).Round(time.Second))
			said, saidAt = w, env.Clock.Now()
		}
		return false, nil
	})
	if last == nil {
		if err == nil {
			err = errors.New("no verification completed")
		}
		return nil, err
	}
	return last, nil
}

// reportOutcome prints what verify or diagnose found: the answer in a machine format, or the
// checks and then the failure (exit 8) or okLine.
func reportOutcome(deps *Deps, g *Globals, answer output.Object, checks []verify.Check, failure error, okLine string) error {
	if !g.Output.Text() {
		return printResult(deps, g, answer, failure)
	}
	printChecks(deps.Out, checks)
	if failure != nil {
		return failure
	}
	_, err := fmt.Fprintln(deps.Out, okLine)
	return err
}

// verifyClient picks the credentials as kubectl would, then admin.conf, else the node's
// kubelet.conf (then only this node is verified).
func verifyClient(deps *Deps, env *host.Env, o *VerifyOptions) (kubernetes.Interface, *rest.Config, []string, error) {
	kc := o.choose(deps, env, host.AdminKubeconfig, host.KubeletKubeconfig)
	nodes := o.Nodes
	if kc.From == "default" && len(kc.Paths) == 1 && kc.Paths[0] == host.KubeletKubeconfig && len(nodes) == 0 {
		if name := host.NodeNameFromCert(env); name != "" {
			nodes = []string{name}
		}
	}
	client, cfg, err := env.ClientFor(kc)
	if err != nil {
		return nil, nil, nil, operr.Wrap(operr.Usage, err, "cannot use the kubeconfig", "pass --kubeconfig (or set KUBECONFIG) with an admin kubeconfig, or run on a joined node")
	}
	return client, cfg, nodes, nil
}

func x509CertPool(cfg *rest.Config) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(cfg.TLSClientConfig.CAData) {
		return nil, fmt.Errorf("no CA data in the kubeconfig")
	}
	return pool, nil
}

func printChecks(w io.Writer, checks []verify.Check) {
	tb := output.NewTable(w, "", "NODE", "CHECK", "RESULT")
	for _, c := range checks {
		line := c.Summary
		if c.Evidence != "" {
			line += " (" + c.Evidence + ")"
		}
		tb.Row(strings.ToUpper(string(c.Status)), dash(c.Node), c.ID, line)
	}
	_ = tb.Flush()
}

// NodesOptions are the flags and arguments of kjoin nodes.
type NodesOptions struct {
	AdminOptions
	Selector string
	SortBy   string
	Names    []string
}

// NewCmdNodes builds kjoin nodes.
func NewCmdNodes(deps *Deps, g *Globals) *cobra.Command {
	o := &NodesOptions{}
	cmd := &cobra.Command{
		Use: "nodes [NAME...]", Short: "The cluster's node map: roles, Ready, Lease age, IPs, versions (-o wide: joined by, zone, runtime, OS, kernel, pod CIDR, taints)",
		Example: `  kjoin nodes
  kjoin nodes -o wide -l node-role.kubernetes.io/control-plane
  kjoin nodes w1 -o jsonpath='{.items[0].kubeletVersion}'`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error { o.Names = args; return runNodes(cmd.Context(), deps, o) },
	}
	bindAdminFlags(cmd, &o.AdminOptions, g)
	cmd.Flags().StringVarP(&o.Selector, "selector", "l", "", "label selector (as kubectl's -l), e.g. node-role.kubernetes.io/control-plane")
	bindSortBy(cmd, &o.SortBy, nodeSortFields)
	completeNodeArgs(cmd, deps, g)
	cmd.Annotations = map[string]string{wideTable: "true"}
	return cmd
}

func runNodes(ctx context.Context, deps *Deps, o *NodesOptions) error {
	var bad operr.Problems
	if _, err := labels.Parse(o.Selector); err != nil {
		bad.Bad("--selector", o.Selector, "a kubectl label selector, e.g. node-role.kubernetes.io/control-plane or zone=a ("+err.Error()+")")
	}
	sorter := sorterOf(&bad, o.SortBy, output.Node{})
	if err := bad.Err("kjoin nodes"); err != nil {
		return err
	}
	ac, err := newAdminClient(deps, &o.AdminOptions)
	if err != nil {
		return err
	}
	rows, err := verify.NodeMap(ctx, ac.client, ac.clock, verify.Selection{Names: o.Names, Selector: o.Selector})
	if err != nil {
		var missing *verify.NoNodeError
		if errors.As(err, &missing) {
			return operr.Wrap(operr.Usage, err, "", "kjoin nodes lists them all")
		}
		return apiError(err, "list", "nodes")
	}
	list := &output.NodeList{Items: []output.Node{}}
	for _, r := range rows {
		list.Items = append(list.Items, nodeOf(r))
	}
	if err := sortList(sorter, list.Items); err != nil {
		return err
	}
	if !o.g.Output.Text() {
		return printResult(deps, o.g, list, nil)
	}
	return printNodes(deps.Out, list.Items, o.g.Output.Wide())
}

// printNodes prints the node map as a table (tabwriter: long names and versions never shift
// the columns); wide adds the columns kubectl get nodes -o wide has and the taints.
func printNodes(w io.Writer, nodes []output.Node, wide bool) error {
	head := []string{"NAME", "ROLES", "STATUS", "LEASE", "INTERNAL-IPS", "VERSION", "JOINED"}
	if wide {
		head = append(head, "JOINED-BY", "ZONE", "INSTANCE-TYPE", "CONTAINER-RUNTIME", "OS-IMAGE", "KERNEL-VERSION", "POD-CIDR", "TAINTS")
	}
	tw := output.NewTable(w, head...)
	for _, n := range nodes {
		roles := n.Roles
		if len(roles) == 0 {
			roles = []string{n.Role}
		}
		status := "NotReady"
		switch {
		case n.Ready:
			status = "Ready"
		case n.ReadyStatus == "Unknown":
			status = "Unknown"
		}
		lease := "none"
		if n.LeaseAge != nil {
			lease = time.Duration(n.LeaseAge.Seconds * float64(time.Second)).Round(time.Second).String()
		}
		cols := []string{n.Name, strings.Join(roles, ","), status, lease, dash(strings.Join(n.InternalIPs, ",")), dash(n.KubeletVersion), n.JoinedAt.Format(time.RFC3339)}
		if wide {
			cols = append(cols, dash(n.JoinedBy), dash(n.Zone), dash(n.InstanceType), dash(n.ContainerRuntime), dash(n.OSImage), dash(n.KernelVersion), dash(n.PodCIDR), dash(strings.Join(n.Taints, ",")))
		}
		tw.Row(cols...)
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
