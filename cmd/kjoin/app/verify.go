package app

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"kjoin.dev/kjoin/etcd"
	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/operr"
	"kjoin.dev/kjoin/verify"
)

// VerifyOptions are the flags and arguments of kjoin verify.
type VerifyOptions struct {
	Nodes      []string
	Kubeconfig string
	Output     string
	Timeout    time.Duration
	// Wait, when set, repeats the verification until every check passes or Wait has passed.
	Wait time.Duration
	Root string
}

// NewCmdVerify builds kjoin verify.
func NewCmdVerify(deps *Deps) *cobra.Command {
	o := &VerifyOptions{}
	cmd := &cobra.Command{
		Use:   "verify [NODE...]",
		Short: "Verify joined nodes: Ready, Lease renewing, pod CIDR, CSRs; etcd member, static pods and /livez for control planes",
		Long: `Verify nodes after a join, from the cluster's side. For each node (default: every node):
registered, Ready, no not-ready/unreachable taint, its Lease held by it and renewing, a pod CIDR
where the cluster allocates them, no CSR of the node pending. For control planes also: a started,
voting etcd member, as many etcd members as control-plane nodes, every member healthy, the
etcd/kube-apiserver/kube-controller-manager/kube-scheduler pods running and ready, and the node's
API server answering /livez over TLS verified by the cluster CA.

Run it with an admin kubeconfig (default /etc/kubernetes/admin.conf; etcd checks need the etcd
client certificate of a control plane), or on a joined worker, where it uses the node's own
kubelet.conf and checks that node. Exit 0 when every check passes, 8 when one fails.

--wait repeats the verification (as kubectl wait does) until every check passes or its budget
(default 2m) runs out, saying on stderr which checks it still waits for: right after a join,
mirror pods, the Lease and the not-ready taint take a few seconds to settle.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Nodes = args
			return runVerify(cmd.Context(), deps, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig (default: /etc/kubernetes/admin.conf, else the node's kubelet.conf)")
	f.StringVarP(&o.Output, "output", "o", "text", "output format: text or json")
	f.DurationVar(&o.Timeout, "timeout", time.Minute, "how long one verification may take")
	f.DurationVar(&o.Wait, "wait", 0, "repeat until every check passes, for at most this long (--wait alone: 2m)")
	f.Lookup("wait").NoOptDefVal = "2m"
	f.StringVar(&o.Root, "root", "/", "host root directory (for tests)")
	_ = f.MarkHidden("root")
	return cmd
}

func runVerify(ctx context.Context, deps *Deps, o *VerifyOptions) error {
	if err := checkOutput(o.Output, "text", "json"); err != nil {
		return err
	}
	if o.Timeout <= 0 {
		return usage("--timeout must be above zero, not %s", o.Timeout)
	}
	if o.Wait < 0 {
		return usage("--wait must not be negative, not %s", o.Wait)
	}
	env := deps.NewEnv(o.Root, 0)
	client, cfg, nodes, err := verifyClient(env, o)
	if err != nil {
		return err
	}
	opts := verify.Options{Client: client, Nodes: nodes, HTTP: env.HTTPClient, Clock: env.Clock}
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
	out := struct {
		*verify.Report
		Error *ErrorJSON `json:"error,omitempty"`
	}{rep, NewErrorJSON(failure)}
	return reportOutcome(deps, o.Output, out, rep.Checks, failure,
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

// reportOutcome prints what verify or diagnose found: the JSON object, or the checks and then
// the failure (exit 8) or okLine.
func reportOutcome(deps *Deps, output string, jsonObj any, checks []verify.Check, failure error, okLine string) error {
	if output == "json" {
		if err := printObject(deps.Out, "json", jsonObj); err != nil {
			return err
		}
		if failure != nil {
			return &reportedError{code: operr.CodeOf(failure), err: failure}
		}
		return nil
	}
	printChecks(deps.Out, checks)
	if failure != nil {
		return failure
	}
	_, err := fmt.Fprintln(deps.Out, okLine)
	return err
}

// verifyClient picks the credentials: --kubeconfig, admin.conf, else the node's kubelet.conf
// (then only this node is verified).
func verifyClient(env *host.Env, o *VerifyOptions) (kubernetes.Interface, *rest.Config, []string, error) {
	path, nodes := o.Kubeconfig, o.Nodes
	if path == "" {
		path = host.AdminKubeconfig
		if !env.Exists(path) && env.Exists(host.KubeletKubeconfig) {
			path = host.KubeletKubeconfig
			if len(nodes) == 0 {
				if name := host.NodeNameFromCert(env); name != "" {
					nodes = []string{name}
				}
			}
		}
	}
	client, cfg, err := env.ClientFromKubeconfig(path)
	if err != nil {
		return nil, nil, nil, operr.Wrap(operr.Usage, err, "cannot use the kubeconfig "+path, "pass --kubeconfig with an admin kubeconfig, or run on a joined node")
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
	fmt.Fprintf(w, "%-5s %-10s %-22s %s\n", "", "NODE", "CHECK", "RESULT")
	for _, c := range checks {
		line := c.Summary
		if c.Evidence != "" {
			line += " (" + c.Evidence + ")"
		}
		node := c.Node
		if node == "" {
			node = "-"
		}
		fmt.Fprintf(w, "%-5s %-10s %-22s %s\n", strings.ToUpper(string(c.Status)), node, c.ID, line)
	}
}

// NodesOptions are the flags and arguments of kjoin nodes.
type NodesOptions struct {
	AdminOptions
	Selector string
	Names    []string
}

// NewCmdNodes builds kjoin nodes.
func NewCmdNodes(deps *Deps) *cobra.Command {
	o := &NodesOptions{}
	cmd := &cobra.Command{
		Use: "nodes [NAME...]", Short: "The cluster's node map: role, Ready, Lease age, IPs, zone, versions, OS, joined at, pod CIDR, taints",
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error { o.Names = args; return runNodes(cmd.Context(), deps, o) },
	}
	bindAdminFlags(cmd, &o.AdminOptions, "text, json or yaml")
	cmd.Flags().StringVarP(&o.Selector, "selector", "l", "", "label selector (as kubectl's -l), e.g. node-role.kubernetes.io/control-plane")
	return cmd
}

func runNodes(ctx context.Context, deps *Deps, o *NodesOptions) error {
	if err := checkOutput(o.Output, "text", "json", "yaml"); err != nil {
		return err
	}
	ac, err := newAdminClient(deps, &o.AdminOptions)
	if err != nil {
		return err
	}
	if _, err := labels.Parse(o.Selector); err != nil {
		return operr.Wrap(operr.Usage, err, "invalid --selector "+strconv.Quote(o.Selector), "a kubectl label selector, e.g. node-role.kubernetes.io/control-plane or zone=a")
	}
	rows, err := verify.NodeMap(ctx, ac.client, deps.NewEnv(o.Root, 0).Clock, verify.Selection{Names: o.Names, Selector: o.Selector})
	if err != nil {
		var missing *verify.NoNodeError
		if errors.As(err, &missing) {
			return operr.Wrap(operr.Usage, err, "", "kjoin nodes lists them all")
		}
		return apiError(err, "list", "nodes")
	}
	if o.Output != "text" {
		return printObject(deps.Out, o.Output, rows)
	}
	// tabwriter: long names and versions never shift the columns.
	w := tabwriter.NewWriter(deps.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tROLES\tREADY\tLEASE\tINTERNAL-IPS\tZONE\tINSTANCE-TYPE\tKUBELET\tRUNTIME\tOS-IMAGE\tKERNEL\tJOINED\tPOD-CIDR\tTAINTS")
	for _, r := range rows {
		roles := r.Roles
		if len(roles) == 0 {
			roles = []string{r.Role}
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
			r.Name, strings.Join(roles, ","), r.Ready, r.LeaseAge, dash(strings.Join(r.InternalIPs, ",")), dash(r.Zone), dash(r.InstanceType),
			dash(r.KubeletVersion), dash(r.Runtime), dash(r.OSImage), dash(r.KernelVersion), r.JoinedAt.Format(time.RFC3339), dash(r.PodCIDR),
			dash(strings.Join(r.Taints, ",")))
	}
	return w.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
