package app

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"kjoin.dev/kjoin/approver"
	"kjoin.dev/kjoin/certs"
	cc "kjoin.dev/kjoin/clusterconfig"
	"kjoin.dev/kjoin/discovery"
	"kjoin.dev/kjoin/joinstring"
	"kjoin.dev/kjoin/operr"
	"kjoin.dev/kjoin/output"
	"kjoin.dev/kjoin/pki"
	"kjoin.dev/kjoin/tlsbootstrap"
	"kjoin.dev/kjoin/token"
)

// JoinInfo is what an operator (or a playbook) needs to join a node.

// TokenCreateOptions are the flags of kjoin token create.
type TokenCreateOptions struct {
	AdminOptions
	Token            string
	TTL              string
	Usages           []string
	Groups           []string
	Description      string
	PrintJoinCommand bool
	// PrintJoinString prints the join as one checked string (package joinstring).
	PrintJoinString bool
	// Node binds the token to one node: kjoin's approver approves one CSR made with it, for
	// that name (with ControlPlane: a control plane's).
	Node         string
	ControlPlane bool
	// Uses 1: one join under any name, decided by kjoin's approver (0: as many as the TTL
	// allows, kubeadm's).
	Uses   int
	Format string
	// GroupsSet: --groups was given (not its default).
	GroupsSet bool
	// AllowNodeReplace lets nodes delete their own Node (kjoin join --replace).
	AllowNodeReplace bool
}

// NewCmdToken builds kjoin token.
func NewCmdToken(deps *Deps, g *Globals) *cobra.Command {
	cmd := &cobra.Command{Use: "token", Short: "Create, list and delete bootstrap tokens (kubeadm-compatible)"}
	cmd.AddCommand(newCmdTokenCreate(deps, g), newCmdTokenList(deps, g), newCmdTokenDelete(deps, g), &cobra.Command{
		Use: "generate", Short: "Print a new random token (does not create it)", Args: cobra.NoArgs,
		Example: `  kjoin token create "$(kjoin token generate)" --ttl 2h`,
		RunE:    func(*cobra.Command, []string) error { return runTokenGenerate(deps, g) },
	})
	return cmd
}

// runTokenGenerate prints a new random token without creating it.
func runTokenGenerate(deps *Deps, g *Globals) error {
	t, err := token.Generate()
	if err != nil {
		return err
	}
	if !g.Output.Text() {
		return printResult(deps, g, &output.TokenResult{Token: output.Token{Token: t.Full(), ID: t.ID}}, nil)
	}
	_, err = fmt.Fprintln(deps.Out, t.Full())
	return err
}

func newCmdTokenCreate(deps *Deps, g *Globals) *cobra.Command {
	o := &TokenCreateOptions{}
	cmd := &cobra.Command{
		Use: "create [TOKEN]",
		Example: `  kjoin token create --print-join-command                  # a worker join command
  kjoin token create --print-join-command --control-plane  # uploads the certificates too
  kjoin token create --ttl 1h --description "rack 7"
  kjoin token create --node w7 --print-join-string          # joins w7 once (kjoin approver approves it)`,
		Short: "Create a bootstrap token; --print-join-command prints the join command, --control-plane also uploads the certificates",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				o.Token = args[0]
			}
			o.GroupsSet = cmd.Flags().Changed("groups")
			return runTokenCreate(cmd.Context(), deps, o)
		},
	}
	bindAdminFlags(cmd, &o.AdminOptions, g)
	f := cmd.Flags()
	f.StringVar(&o.TTL, "ttl", "24h", "token lifetime (0: never expires)")
	f.StringSliceVar(&o.Usages, "usages", token.DefaultUsages, "token usages")
	f.StringSliceVar(&o.Groups, "groups", []string{token.DefaultGroup}, "extra groups the token authenticates as")
	f.StringVar(&o.Description, "description", "", "human description")
	f.BoolVar(&o.PrintJoinCommand, "print-join-command", false, "print the full join command")
	f.StringVar(&o.Node, "node", "", "bind the token to one node: it joins that machine, under that name, once (kjoin's approver, kjoin approver on a control plane, approves its one CSR; the controller-manager never does); with --control-plane, a control plane's")
	f.BoolVar(&o.PrintJoinString, "print-join-string", false, "print the join as one string with checksums (endpoint, CA pins, token and with --control-plane the certificate key) for kjoin join --join-string-file")
	f.IntVar(&o.Uses, "uses", 0, "1: the token joins one machine, under any name, once (kjoin's approver approves its first CSR and deletes it; the controller-manager never does); 0: as many as its TTL allows, as kubeadm's")
	f.BoolVar(&o.ControlPlane, "control-plane", false, "also upload the control-plane certificates with a fresh key and print the control-plane join command")
	f.StringVar(&o.Format, "format", "kjoin", "join command for: kjoin or kubeadm")
	completeFlag(cmd, "format", "kjoin", "kubeadm")
	f.BoolVar(&o.AllowNodeReplace, "allow-node-replace", false, "also let every node delete its own Node object (ClusterRoleBinding "+tlsbootstrap.ReplaceSelf+"; NodeRestriction limits it to its own), so kjoin join --replace works on reinstalled workers")
	return cmd
}

// spec checks every flag at once and makes the token's spec (with a new token unless one was
// given).
func (o *TokenCreateOptions) spec() (*token.Spec, error) {
	var bad operr.Problems
	if o.Format != "kjoin" && o.Format != "kubeadm" {
		bad.Bad("--format", o.Format, "kjoin or kubeadm")
	}
	ttl, err := time.ParseDuration(o.TTL)
	if err != nil {
		bad.Bad("--ttl", o.TTL, "a duration (e.g. 24h, 90m, 0)")
	}
	spec := &token.Spec{TTL: ttl, Usages: o.Usages, Groups: o.Groups, Description: o.Description}
	if o.Uses != 0 && o.Uses != 1 {
		bad.Bad("--uses", fmt.Sprint(o.Uses), "1 (one join) or 0 (as many as the TTL allows)")
	}
	if o.Node != "" || o.Uses == 1 {
		if o.GroupsSet {
			bad.Add("--groups is not for a token kjoin's approver decides on (--node, --uses 1): its groups are %s", strings.Join((&token.Spec{ControlPlane: o.ControlPlane}).BoundGroups(), ","))
		}
		spec.Groups, spec.Node, spec.ControlPlane, spec.SingleUse = nil, o.Node, o.ControlPlane, o.Uses == 1 && o.Node == ""
	}
	if o.Token != "" {
		if spec.Token, err = token.Parse(o.Token); err != nil {
			bad.Add("--token (hidden, %d characters): want a token like abcdef.0123456789abcdef (kjoin token generate prints one)", len(o.Token))
		}
	}
	if err := spec.Validate(); err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			bad.Add("%s", line)
		}
	}
	if err := bad.Err("kjoin token create"); err != nil {
		return nil, err
	}
	if o.Token == "" {
		if spec.Token, err = token.Generate(); err != nil {
			return nil, err
		}
	}
	return spec, nil
}

func runTokenCreate(ctx context.Context, deps *Deps, o *TokenCreateOptions) error {
	spec, err := o.spec()
	if err != nil {
		return err
	}
	var warnings []string
	warn := func(format string, a ...any) {
		w := fmt.Sprintf(format, a...)
		warnings = append(warnings, w)
		fmt.Fprintln(deps.Err, "WARNING:", w)
	}
	if spec.TTL == 0 {
		warn("--ttl 0: this token never expires; anyone who obtains it can join nodes until you delete it (kjoin token delete %s)", spec.Token.ID)
	}
	approved := o.Node != "" || spec.SingleUse // kjoin's approver decides on its CSRs
	if !approved && !slices.Contains(o.Groups, token.DefaultGroup) && slices.Contains(o.Usages, "authentication") {
		warn("the token is not in group %s, which kubeadm's join RBAC (CSR creation and auto-approval, reading kubelet-config and kubeadm-certs) is bound to; joins with it will fail unless you bound your groups yourself", token.DefaultGroup)
	}
	ac, err := newAdminClient(deps, &o.AdminOptions)
	if err != nil {
		return err
	}
	now := ac.clock.Now()
	// Everything the answer needs is gathered before the token exists, so a failure leaves
	// no token behind: the endpoint and pins, and for --control-plane the uploaded certificates.
	var ji *output.JoinCommand
	if o.PrintJoinCommand || o.ControlPlane || o.PrintJoinString {
		if ji, err = joinInfo(ctx, ac, o.ControlPlane); err != nil {
			return err
		}
	}
	if o.ControlPlane {
		key, err := certs.NewCertificateKey()
		if err != nil {
			return err
		}
		exp, err := uploadCerts(ctx, ac, &o.AdminOptions, key, now)
		if err != nil {
			return fmt.Errorf("no token was created: %w", err)
		}
		ji.CertificateKey, ji.CertificateKeyExpires = key, &exp
	}
	if approved {
		created, err := approver.EnsureBoundRBAC(ctx, ac.client)
		if err != nil {
			return fmt.Errorf("no token was created: %w", apiError(err, "create", "role bindings"))
		}
		for _, b := range created {
			fmt.Fprintf(deps.Err, "Created binding %s for tokens bound to a node.\n", b)
		}
	}
	info, err := token.Create(ctx, ac.client, spec, now)
	if apierrors.IsAlreadyExists(err) {
		return operr.Newf(operr.Usage, "a token with id %q already exists", spec.Token.ID).
			WithHint("pick another token, or delete the old one with kjoin token delete " + spec.Token.ID)
	}
	if err != nil {
		return apiError(err, "create", "secrets in kube-system")
	}
	for _, w := range missingBootstrapRBAC(ctx, ac.client) {
		warn("%s", w)
	}
	if o.AllowNodeReplace {
		created, err := tlsbootstrap.EnsureReplaceSelf(ctx, ac.client)
		if err != nil {
			return apiError(err, "create", "clusterroles and clusterrolebindings")
		}
		if created {
			fmt.Fprintf(deps.Err, "Created ClusterRole and ClusterRoleBinding %s: a node may now delete its own Node object (kjoin join --replace); kubectl delete clusterrolebinding %s takes it back.\n", tlsbootstrap.ReplaceSelf, tlsbootstrap.ReplaceSelf)
		}
	}
	switch {
	case o.Node != "":
		warn("the token is bound to node %s: it joins that machine once, under that name, and only while kjoin's approver runs on a control plane (kjoin approver); the join waits for its approval", o.Node)
	case spec.SingleUse:
		warn("the token joins one machine once, under the name it asks for, and only while kjoin's approver runs on a control plane (kjoin approver); the join waits for its approval")
	}
	if ji == nil {
		if !o.g.Output.Text() {
			return printResult(deps, o.g, &output.TokenResult{Token: tokenOf(*info, now), Warnings: warnings}, nil)
		}
		_, err := fmt.Fprintln(deps.Out, spec.Token.Full())
		return err
	}
	ji.Token, ji.Expires = spec.Token.Full(), info.Expires
	ji.Warnings = warnings
	ji.Command = joinCommand(o.Format, ji)
	if o.PrintJoinString {
		if ji.JoinString, err = joinstring.Encode(joinstring.JoinString{Endpoints: []string{ji.Endpoint}, Pins: ji.CACertHashes,
			Token: ji.Token, CertificateKey: ji.CertificateKey}); err != nil {
			return fmt.Errorf("the token %s was created, but its join string cannot be written: %w", spec.Token.ID, err)
		}
	}
	if !o.g.Output.Text() {
		return printResult(deps, o.g, ji, nil)
	}
	if o.PrintJoinString {
		fmt.Fprintln(deps.Out, ji.JoinString)
		fmt.Fprintln(deps.Err, "Join with it: put it in a root-only file and run kjoin join --join-string-file FILE (or pipe it to kjoin join --join-string-file -).")
	} else {
		fmt.Fprintln(deps.Out, ji.Command)
	}
	if ji.Expires != nil {
		fmt.Fprintf(deps.Err, "The token is valid until %s (in %s).\n", ji.Expires.UTC().Format(time.RFC3339), time.Until(*ji.Expires).Round(time.Minute))
	}
	if ji.CertificateKeyExpires != nil {
		fmt.Fprintf(deps.Err, "The certificate key is valid until %s (in %s): control-plane joins after that need a new upload.\n",
			ji.CertificateKeyExpires.UTC().Format(time.RFC3339), time.Until(*ji.CertificateKeyExpires).Round(time.Minute))
	}
	return nil
}

// joinInfo finds the endpoint (controlPlaneEndpoint, else the kubeconfig's server) and CA pins.
func joinInfo(ctx context.Context, ac *adminClient, controlPlane bool) (*output.JoinCommand, error) {
	cfg, err := clusterConfiguration(ctx, ac.client)
	if err != nil {
		return nil, err
	}
	endpoint := ""
	if cfg != nil {
		endpoint = cfg.ControlPlaneEndpoint
	}
	if controlPlane {
		if cfg == nil {
			cfg = &cc.ClusterConfiguration{}
		}
		if err := cfg.RequireControlPlaneEndpoint(); err != nil {
			return nil, err
		}
	}
	if endpoint == "" {
		endpoint = strings.TrimPrefix(ac.server, "https://")
	}
	caCerts, err := pki.ParseCerts(ac.caData)
	if err != nil {
		return nil, operr.Wrap(operr.Usage, err, "the admin kubeconfig has no CA data to pin", "")
	}
	var pins []string
	for _, c := range caCerts {
		pins = append(pins, discovery.Pin(c))
	}
	return &output.JoinCommand{Endpoint: endpoint, CACertHashes: pins}, nil
}

// joinCommand is the printed join command. kjoin's reads its secrets from standard input,
// fed by the shell's printf builtin, so no process's command line ever holds them; kubeadm's
// (--format kubeadm) takes them as flags, as kubeadm token create prints it.
func joinCommand(format string, ji *output.JoinCommand) string {
	if format == "kubeadm" {
		parts := []string{"kubeadm join", ji.Endpoint, "--token", ji.Token}
		for _, p := range ji.CACertHashes {
			parts = append(parts, "--discovery-token-ca-cert-hash", p)
		}
		if ji.CertificateKey != "" {
			parts = append(parts, "--control-plane", "--certificate-key", ji.CertificateKey)
		}
		return strings.Join(parts, " ")
	}
	feed := "printf '%s\\n' " + shellQuote(ji.Token)
	if ji.CertificateKey != "" {
		feed = "printf '%s\\n%s\\n' " + shellQuote(ji.Token) + " " + shellQuote(ji.CertificateKey)
	}
	parts := []string{feed, "|", "kjoin join", shellQuote(ji.Endpoint), "--token-file -"}
	for _, p := range ji.CACertHashes {
		parts = append(parts, "--discovery-token-ca-cert-hash", p)
	}
	if ji.CertificateKey != "" {
		parts = append(parts, "--control-plane", "--certificate-key-file -")
	}
	return strings.Join(parts, " ")
}

// shellQuote quotes s for a POSIX shell when it holds anything but safe characters.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.:-_/@%+=,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// clusterConfiguration is the cluster's ClusterConfiguration, nil when it has none.
func clusterConfiguration(ctx context.Context, c kubernetes.Interface) (*cc.ClusterConfiguration, error) {
	cfg, err := cc.Fetch(ctx, c, "the kubeconfig's user")
	if errors.Is(err, cc.ErrNotFound) {
		return nil, nil
	}
	return cfg, err
}

// missingBootstrapRBAC names kubeadm's join bindings that the cluster lacks.
func missingBootstrapRBAC(ctx context.Context, c kubernetes.Interface) []string {
	var out []string
	for _, name := range []string{"kubeadm:kubelet-bootstrap", "kubeadm:node-autoapprove-bootstrap", "kubeadm:get-nodes"} {
		if _, err := c.RbacV1().ClusterRoleBindings().Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			out = append(out, fmt.Sprintf("ClusterRoleBinding %s is missing: joins need it (kubeadm init phase bootstrap-token recreates kubeadm's bootstrap RBAC)", name))
		}
	}
	if _, err := c.RbacV1().RoleBindings("kube-public").Get(ctx, "kubeadm:bootstrap-signer-clusterinfo", metav1.GetOptions{}); apierrors.IsNotFound(err) {
		out = append(out, "RoleBinding kube-public/kubeadm:bootstrap-signer-clusterinfo is missing: discovery cannot read cluster-info anonymously (kubeadm init phase bootstrap-token recreates it)")
	}
	return out
}
