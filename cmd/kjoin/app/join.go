package app

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/joinconfig"
	"kjoin.dev/kjoin/operr"
	"kjoin.dev/kjoin/output"
	"kjoin.dev/kjoin/phases"
	"kjoin.dev/kjoin/token"
	"kjoin.dev/kjoin/workflow"
)

const joinLong = `Join this machine to a cluster made by kubeadm init, as a worker or (with --control-plane)
as a control-plane node. Flags and JoinConfiguration are kubeadm's.

Trust works in two steps. Discovery reads the cluster's public cluster-info anonymously,
checks its signature with the bootstrap token and checks the CA inside it against
--discovery-token-ca-cert-hash (the CA's SPKI sha256 pin), then reads it again over TLS
verified by that CA. Only then is the token used as a credential: kjoin generates the
node's key here, sends a CertificateSigningRequest and installs the signed certificate for
the kubelet. --discovery-token-unsafe-skip-ca-verification drops the pin check, so anyone who
knows the token could impersonate the control plane: avoid it.

Several API server endpoints of the same cluster may be given (kjoin join cp1:6443 cp2:6443):
discovery and the join's requests use the first that answers and move on when one is down,
refuses the connection or times out. Each must prove the pinned CA: a failure of trust at any
of them ends the join. A worker's kubelet then uses the cluster's controlPlaneEndpoint, or
without one the endpoint that served the join.

Keep secrets off the command line: --token-file PATH, --token-file - (stdin) or KJOIN_TOKEN;
--certificate-key-file PATH, --certificate-key-file - (stdin) or KJOIN_CERTIFICATE_KEY. With
both read from stdin, the token is its first line and the certificate key its second. Or all
in one: --join-string-file FILE|- takes the join string kjoin token create --print-join-string
prints (endpoints, CA pins, token and for a control plane the certificate key), checked
before any network use.`

// JoinOptions are the flag values of kjoin join.
type JoinOptions struct {
	joinconfig.Flags
	g *Globals

	// OnlyPhase runs a single phase (kjoin join phase NAME).
	OnlyPhase string
}

// NewCmdJoin builds kjoin join (and kjoin join phase NAME). runF replaces the run function in tests.
func NewCmdJoin(deps *Deps, g *Globals, runF func(*JoinOptions) error) *cobra.Command {
	o := &JoinOptions{g: g}
	cmd := &cobra.Command{
		Use: "join [api-server-endpoint ...]",
		Example: `  # a worker; the token on stdin, never on the command line
  printf '%s\n' "$TOKEN" | kjoin join control-plane.example:6443 --token-file - \
      --discovery-token-ca-cert-hash sha256:<hash>
  # a control plane: the token, then the certificate key, on stdin
  printf '%s\n%s\n' "$TOKEN" "$CERT_KEY" | kjoin join control-plane.example:6443 --token-file - \
      --discovery-token-ca-cert-hash sha256:<hash> --control-plane --certificate-key-file - \
      --apiserver-advertise-address 10.0.0.12
  # an IPv6 endpoint goes in brackets; -o json for automation
  kjoin join '[fd00::11]:6443' --token-file /root/token --discovery-token-ca-cert-hash sha256:<hash> -o json
  # what would be written, without writing it
  kjoin join control-plane.example:6443 --token-file /root/token --discovery-token-ca-cert-hash sha256:<hash> --dry-run`,
		Short: "Join this machine to a cluster as a worker or control-plane node",
		Long:  joinLong,
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				o.Endpoint, o.MoreEndpoints = args[0], args[1:]
			}
			o.Changed = func(n string) bool { return cmd.Flags().Changed(n) }
			o.Output, o.OutputError, o.Verbosity = g.Output.Format, g.outputErr, g.Verbosity
			if runF != nil {
				return runF(o)
			}
			return runJoin(cmd, deps, o)
		},
	}
	bindJoinFlags(cmd.Flags(), o)
	completeFlag(cmd, "skip-phases", workflow.Names(phases.Join)...)
	phaseCmd := &cobra.Command{Use: "phase", Short: "Run one phase of the join (with the read-only phases it needs)"}
	for _, p := range phases.Join {
		p := p
		sub := &cobra.Command{
			Use:     p.Name + " [api-server-endpoint ...]",
			Short:   p.Short,
			Example: "  kjoin join phase " + p.Name + " control-plane.example:6443 --token-file /root/token --discovery-token-ca-cert-hash sha256:<hash>",
			Args:    cobra.ArbitraryArgs,
			RunE: func(cmd *cobra.Command, args []string) error {
				o.OnlyPhase = p.Name
				return cmd.Parent().Parent().RunE(cmd, args)
			},
		}
		for _, n := range phaseFlags(p.Name) {
			sub.Flags().AddFlag(cmd.Flags().Lookup(n))
		}
		phaseCmd.AddCommand(sub)
	}
	cmd.AddCommand(phaseCmd)
	return cmd
}

// phaseFlags are the join flags a phase run alone takes (as kubeadm's join phases each take
// their own): every phase needs discovery (its trust and the bootstrap client), the node's name
// and runtime and --config; the others only where the phase, or a phase it needs, uses them.
func phaseFlags(phase string) []string {
	base := []string{"config", "dry-run", "node-name", "cri-socket", "control-plane", "token", "token-file", "join-string-file", "discovery-token",
		"discovery-token-ca-cert-hash", "discovery-token-unsafe-skip-ca-verification", "discovery-file", "tls-bootstrap-token"}
	controlPlane := []string{"certificate-key", "certificate-key-file", "apiserver-advertise-address", "apiserver-bind-port", "patches"}
	own := map[string][]string{
		phases.Preflight.Name:           slices.Concat(controlPlane, []string{"ignore-preflight-errors"}),
		phases.ControlPlanePrepare.Name: slices.Concat(controlPlane, []string{"ignore-preflight-errors"}),
		phases.VersionCheck.Name:        {"ignore-preflight-errors"},
		phases.KubeletConfig.Name:       {"patches", "kubelet-serving-certificates"},
		phases.EtcdJoin.Name:            slices.Concat(controlPlane, []string{"replace", "remove-dead-etcd-learners"}),
		phases.ReplaceNode.Name:         slices.Concat(controlPlane, []string{"replace"}),
		phases.ControlPlaneStart.Name:   controlPlane,
		phases.MarkControlPlane.Name:    controlPlane,
		phases.WaitControlPlane.Name:    controlPlane,
		phases.WaitReady.Name:           {"wait", "wait-ready", "wait-ready-timeout"},
		// discovery, tls-bootstrap, kubelet-start and approver take the base flags only.
	}
	return slices.Concat(base, own[phase])
}

func bindJoinFlags(f *pflag.FlagSet, o *JoinOptions) {
	f.StringVar(&o.Token, "token", "", "token for both discovery and TLS bootstrap (prefer --token-file or KJOIN_TOKEN)")
	f.StringVar(&o.TokenFile, "token-file", "", "read the token from this file ('-' for stdin)")
	f.StringVar(&o.DiscoveryToken, "discovery-token", "", "token to verify cluster-info")
	f.StringSliceVar(&o.CACertHashes, "discovery-token-ca-cert-hash", nil, "pin of the cluster CA (sha256:<hex>); repeatable, any match passes")
	f.BoolVar(&o.UnsafeSkipCAVerification, "discovery-token-unsafe-skip-ca-verification", false, "do not pin the CA (unsafe)")
	f.StringVar(&o.DiscoveryFile, "discovery-file", "", "kubeconfig path or https URL to discover the cluster from")
	f.StringVar(&o.TLSBootstrapToken, "tls-bootstrap-token", "", "token for the TLS bootstrap (CSR)")
	f.StringVar(&o.NodeName, "node-name", "", "node name (default: hostname)")
	f.StringVar(&o.CRISocket, "cri-socket", "", "container runtime socket (default: detected)")
	f.StringVar(&o.ConfigPath, "config", "", "kubeadm config file with a JoinConfiguration (v1beta4)")
	f.StringSliceVar(&o.IgnorePreflightErrors, "ignore-preflight-errors", nil, "preflight checks to report as warnings ('all' for every check)")
	f.StringSliceVar(&o.SkipPhases, "skip-phases", nil, "phases to skip")
	f.BoolVar(&o.DryRun, "dry-run", false, "discover (read-only) and print what would be written; change nothing")
	f.BoolVar(&o.ControlPlane, "control-plane", false, "join as a control-plane node")
	f.StringVar(&o.CertificateKey, "certificate-key", "", "key to decrypt the control-plane certificates uploaded with upload-certs (prefer --certificate-key-file or KJOIN_CERTIFICATE_KEY)")
	f.StringVar(&o.JoinStringFile, "join-string-file", "", "read a join string (kjoin token create --print-join-string) from this file ('-' for stdin): the endpoints, CA pins, token and, for a control plane, the certificate key, checked before any network use")
	f.StringVar(&o.CertificateKeyFile, "certificate-key-file", "", "read the certificate key from this file ('-' for stdin: the line after the token when --token-file is '-' too)")
	f.StringVar(&o.AdvertiseAddress, "apiserver-advertise-address", "", "address this control-plane node's API server advertises")
	f.IntVar(&o.BindPort, "apiserver-bind-port", 6443, "port this control-plane node's API server binds")
	f.BoolVar(&o.KubeletServingCertificates, "kubelet-serving-certificates", false, "the kubelet asks the cluster for a serving certificate signed by its CA (serverTLSBootstrap: true), which kjoin approver approves for the Node's own names and addresses")
	f.StringVar(&o.Patches, "patches", "", "directory of kubeadm-style patches (kubeletconfiguration, etcd, kube-apiserver, ...)")
	f.StringVar(&o.Wait, "wait", "ready", "what to wait for at the end: ready (the Node registered, then Ready for up to 15s, else a warning naming the blocking condition; --wait-ready requires Ready), kubelet (the kubelet's /healthz, as kubeadm) or none; --wait alone = ready, --wait=false = none")
	f.Lookup("wait").NoOptDefVal = "ready"
	f.BoolVar(&o.WaitReady, "wait-ready", false, "require the Node to become Ready")
	f.DurationVar(&o.WaitReadyTimeout, "wait-ready-timeout", 4*time.Minute, "how long --wait-ready waits")
	f.BoolVar(&o.Replace, "replace", false, "this machine replaces a gone one of the same name: delete the NotReady Node (and its Lease) so this node registers afresh; for a control plane, also remove the dead etcd member with this node's peer URL under another name (a Ready Node is always refused)")
	f.BoolVar(&o.RemoveDeadLearners, "remove-dead-etcd-learners", false, "remove etcd learners left by joins that did not finish (their peer URL silent for 5s) instead of refusing; voters are never removed")
}

// resolve validates the flags (and --config) into phase options, before any host probe.
func (o *JoinOptions) resolve(deps *Deps) (*joinconfig.Result, error) {
	return joinconfig.Resolve(o.Flags, joinconfig.Sources{Stdin: deps.In, Getenv: deps.Getenv}, workflow.Names(phases.Join))
}

func runJoin(cmd *cobra.Command, deps *Deps, o *JoinOptions) error {
	// Progress goes to stderr in every mode, as kubectl's: in machine mode (-o json) stdout
	// holds the answer alone, and a long wait still shows in a journal or a playbook's log.
	progressOut := deps.Err
	// A bad -o is reported with the other bad values, in text.
	machine := !o.g.Output.Text() && o.OutputError == ""
	env := deps.NewEnv(o.g.Root, o.Verbosity)
	env.Out = progressOut
	env.Status = &host.Status{Out: progressOut, Terminal: !machine && deps.ErrIsTerminal != nil && deps.ErrIsTerminal(), Clock: env.Clock, Width: deps.ErrWidth}
	var warnings []string
	warn := func(s string) {
		warnings = append(warnings, s)
		fmt.Fprintf(progressOut, "[join] WARNING: %s\n", s)
	}
	resolved, err := o.resolve(deps)
	for _, w := range resolved.Warnings {
		warn(w)
	}
	po := resolved.Options
	if err == nil {
		err = phases.Defaults(env, &po)
	}
	s := &phases.State{Opts: po, Record: phases.Record{Warnings: warnings}}
	var results []phases.PhaseResult
	if err == nil {
		afterPhase, at := faultHook(deps.Getenv)
		env.Fault = at
		ro := phases.RunOptions{Skip: resolved.SkipPhases, AfterPhase: afterPhase}
		if o.OnlyPhase != "" {
			ro.Only = []string{o.OnlyPhase}
		}
		results, err = phases.Run(cmd.Context(), env, s, phases.Join, ro)
		if err != nil && cmd.Context().Err() != nil {
			err = &operr.Error{Code: operr.Other, Retryable: true, Err: err,
				What: "interrupted", Hint: "run the same command again: the join resumes where it stopped (kjoin reset undoes it instead)"}
		}
	}
	report := joinResultOf(s, results, err)
	if machine {
		return printResult(deps, o.g, report, err)
	}
	if err != nil {
		return err
	}
	printJoinSummary(deps.Out, s, report)
	return nil
}

// joinResultOf is the join's answer from its state, phase results and error.
func joinResultOf(s *phases.State, results []workflow.Result, err error) *output.JoinResult {
	r := &output.JoinResult{
		Changed: s.Changed(), Node: s.Opts.NodeName, Role: "worker", Endpoint: token.Redact(s.Opts.Endpoint),
		ClusterVersion: s.ClusterVersion, KubeletVersion: s.KubeletVersion, Runtime: runtimeOf(s.Runtime),
		ClientCertificate: s.ClientCertPath, CSR: s.CSRName, KubeletServer: s.KubeletServer, Ready: s.Ready, DryRun: s.Opts.DryRun,
		PlannedActions: s.PlannedActions(), Phases: phasesOf(results), Warnings: s.Warnings,
		Error: NewErrorJSON(err),
	}
	for _, rp := range s.Repairs {
		r.Repairs = append(r.Repairs, output.Repair{Kind: rp.Kind, Name: rp.Name, ID: rp.ID, Action: rp.Action, Detail: rp.Detail})
	}
	for _, w := range s.PlannedWrites() {
		r.PlannedWrites = append(r.PlannedWrites, output.File{Path: w.Path, Mode: output.NewFileMode(w.Mode)})
	}
	if s.RegisteredAfter > 0 {
		r.RegisteredAfter = output.NewDuration(s.RegisteredAfter)
		r.Lease = "pending"
		if s.LeaseFound {
			r.Lease = "found"
		}
	}
	if s.Ready {
		r.ReadyAfter = output.NewDuration(s.ReadyAfter)
	}
	if s.Opts.ControlPlane {
		r.Role = "control-plane"
	}
	if s.Discovery != nil {
		r.CACertHashes = []string{s.Discovery.CAPin}
		switch {
		case s.Opts.DiscoveryFile != "":
			r.CAVerification = "discovery-file"
		case len(s.Opts.Pins) > 0:
			r.CAVerification = "pinned"
		default:
			r.CAVerification = "not verified"
		}
		if s.Discovery.Endpoint != "" {
			r.Endpoint = s.Discovery.Endpoint
		}
		if r.Endpoint == "" {
			r.Endpoint = s.Discovery.Server
		}
		if len(s.Opts.MoreEndpoints) > 0 {
			for _, a := range s.Discovery.Tried {
				r.EndpointsTried = append(r.EndpointsTried, output.EndpointAttempt{Endpoint: a.Endpoint, Error: a.Error})
			}
		}
	}
	return r
}

func printJoinSummary(w io.Writer, s *phases.State, r *output.JoinResult) {
	if s.Opts.DryRun {
		fmt.Fprintln(w, "Dry run: nothing was changed. This join would:")
		for _, a := range s.PlannedActions() {
			fmt.Fprintf(w, "  - %s\n", a)
		}
		for _, f := range s.PlannedWrites() {
			fmt.Fprintf(w, "  - write %s (mode %04o)\n", f.Path, f.Mode.Perm())
		}
		printRepairs(w, r.Repairs)
		return
	}
	if !s.Changed() {
		fmt.Fprintf(w, "This node is already joined to the cluster as %q (%s); nothing changed.\n", r.Node, r.Role)
		return
	}
	fmt.Fprintf(w, "This node has joined the cluster as %q (%s).\n", r.Node, r.Role)
	fmt.Fprintf(w, "  CA:                 %s (%s)\n", strings.Join(r.CACertHashes, ", "), r.CAVerification)
	if r.CSR != "" {
		fmt.Fprintf(w, "  client certificate: %s (CSR %s)\n", r.ClientCertificate, r.CSR)
	}
	if s.RegisteredAfter > 0 {
		fmt.Fprintf(w, "  registered after:   %s\n", s.RegisteredAfter.Round(time.Millisecond))
	}
	if s.Ready {
		fmt.Fprintf(w, "  Ready after:        %s\n", s.ReadyAfter.Round(time.Millisecond))
	}
	printRepairs(w, r.Repairs)
	fmt.Fprintln(w, "Run 'kubectl get nodes' on a control plane to see it.")
}

// printRepairs lists what the join removed or renewed of the node's earlier life.
func printRepairs(w io.Writer, rs []output.Repair) {
	if len(rs) == 0 {
		return
	}
	fmt.Fprintln(w, "  repaired:")
	for _, r := range rs {
		id := ""
		if r.ID != "" {
			id = " " + r.ID
		}
		fmt.Fprintf(w, "    - %s %s %s%s: %s\n", r.Action, r.Kind, r.Name, id, r.Detail)
	}
}

func bufioReader(b []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(b)) }
