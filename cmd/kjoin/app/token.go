package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"kjoin.dev/kjoin/certs"
	cc "kjoin.dev/kjoin/clusterconfig"
	"kjoin.dev/kjoin/discovery"
	"kjoin.dev/kjoin/operr"
	"kjoin.dev/kjoin/phases"
	"kjoin.dev/kjoin/token"
)

// AdminOptions are shared by the commands that talk to the cluster as admin.
type AdminOptions struct {
	Kubeconfig string
	Output     string
	Root       string
}

func bindAdminFlags(cmd *cobra.Command, o *AdminOptions, outputs string) {
	cmd.Flags().StringVar(&o.Kubeconfig, "kubeconfig", phases.AdminKubeconfig, "admin kubeconfig")
	cmd.Flags().StringVarP(&o.Output, "output", "o", "text", "output format: "+outputs)
	cmd.Flags().StringVar(&o.Root, "root", "/", "host root directory (for tests)")
	_ = cmd.Flags().MarkHidden("root")
}

// adminClient loads the admin kubeconfig; missing or unusable files are usage errors.
type adminClient struct {
	client kubernetes.Interface
	server string
	caData []byte
}

// NewAdminClient is replaced in tests.
var newAdminClient = func(o *AdminOptions) (*adminClient, error) {
	p := phases.Paths{Root: o.Root}.Of(o.Kubeconfig)
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, operr.Wrap(operr.Usage, err, "cannot read the admin kubeconfig "+o.Kubeconfig, "run on a control plane, or pass --kubeconfig")
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(b)
	if err != nil {
		return nil, operr.Wrap(operr.Usage, err, "the admin kubeconfig is not usable", "")
	}
	cfg.Timeout = 15 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &adminClient{client: cs, server: cfg.Host, caData: cfg.TLSClientConfig.CAData}, nil
}

// apiError explains an API failure; forbidden names the verb and resource.
func apiError(err error, verb, resource string) error {
	switch {
	case apierrors.IsForbidden(err):
		return operr.Wrap(operr.Auth, err, fmt.Sprintf("the kubeconfig's user may not %s %s", verb, resource), "use a cluster-admin kubeconfig such as /etc/kubernetes/admin.conf")
	case apierrors.IsUnauthorized(err):
		return operr.Wrap(operr.Auth, err, "the API server rejected the kubeconfig's credentials", "renew the kubeconfig (kubeadm kubeconfig user / kubeadm certs renew admin.conf)")
	}
	return operr.Wrap(operr.Other, err, fmt.Sprintf("%s %s", verb, resource), "")
}

// JoinInfo is what an operator (or a playbook) needs to join a node.
type JoinInfo struct {
	Token                 string     `json:"token"`
	Endpoint              string     `json:"endpoint"`
	CACertHashes          []string   `json:"caCertHashes"`
	CertificateKey        string     `json:"certificateKey,omitempty"`
	Expires               *time.Time `json:"expires,omitempty"`
	CertificateKeyExpires *time.Time `json:"certificateKeyExpires,omitempty"`
	Command               string     `json:"command"`
	Warnings              []string   `json:"warnings"`
}

// TokenCreateOptions are the flags of kjoin token create.
type TokenCreateOptions struct {
	AdminOptions
	Token            string
	TTL              string
	Usages           []string
	Groups           []string
	Description      string
	PrintJoinCommand bool
	ControlPlane     bool
	Format           string
}

// NewCmdToken builds kjoin token.
func NewCmdToken(deps *Deps) *cobra.Command {
	cmd := &cobra.Command{Use: "token", Short: "Create, list and delete bootstrap tokens (kubeadm-compatible)"}
	cmd.AddCommand(newCmdTokenCreate(deps), newCmdTokenList(deps), newCmdTokenDelete(deps), &cobra.Command{
		Use: "generate", Short: "Print a new random token (does not create it)", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			t, err := token.Generate()
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(deps.Out, t.Full())
			return err
		},
	})
	return cmd
}

func newCmdTokenCreate(deps *Deps) *cobra.Command {
	o := &TokenCreateOptions{}
	cmd := &cobra.Command{
		Use:   "create [TOKEN]",
		Short: "Create a bootstrap token; --print-join-command prints the join command, --control-plane also uploads the certificates",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				o.Token = args[0]
			}
			return runTokenCreate(cmd.Context(), deps, o)
		},
	}
	bindAdminFlags(cmd, &o.AdminOptions, "text, json or yaml")
	f := cmd.Flags()
	f.StringVar(&o.TTL, "ttl", "24h", "token lifetime (0: never expires)")
	f.StringSliceVar(&o.Usages, "usages", token.DefaultUsages, "token usages")
	f.StringSliceVar(&o.Groups, "groups", []string{token.DefaultGroup}, "extra groups the token authenticates as")
	f.StringVar(&o.Description, "description", "", "human description")
	f.BoolVar(&o.PrintJoinCommand, "print-join-command", false, "print the full join command")
	f.BoolVar(&o.ControlPlane, "control-plane", false, "also upload the control-plane certificates with a fresh key and print the control-plane join command")
	f.StringVar(&o.Format, "format", "kjoin", "join command for: kjoin or kubeadm")
	return cmd
}

func runTokenCreate(ctx context.Context, deps *Deps, o *TokenCreateOptions) error {
	if err := checkOutput(o.Output, "text", "json", "yaml"); err != nil {
		return err
	}
	if o.Format != "kjoin" && o.Format != "kubeadm" {
		return usage("--format must be kjoin or kubeadm, not %q", o.Format)
	}
	ttl, err := time.ParseDuration(o.TTL)
	if err != nil {
		return usage("--ttl %q is not a duration (e.g. 24h, 90m, 0)", o.TTL)
	}
	spec := &token.Spec{TTL: ttl, Usages: o.Usages, Groups: o.Groups, Description: o.Description}
	if o.Token != "" {
		if spec.Token, err = token.Parse(o.Token); err != nil {
			return operr.Wrap(operr.Usage, err, "invalid token", "tokens look like abcdef.0123456789abcdef; kjoin token generate prints one")
		}
	} else if spec.Token, err = token.Generate(); err != nil {
		return err
	}
	if err := spec.Validate(); err != nil {
		return operr.Wrap(operr.Usage, err, "invalid token settings", "")
	}
	var warnings []string
	warn := func(format string, a ...any) {
		w := fmt.Sprintf(format, a...)
		warnings = append(warnings, w)
		fmt.Fprintln(deps.Err, "WARNING:", w)
	}
	if ttl == 0 {
		warn("--ttl 0: this token never expires; anyone who obtains it can join nodes until you delete it (kjoin token delete %s)", spec.Token.ID)
	}
	if !slices.Contains(o.Groups, token.DefaultGroup) && slices.Contains(o.Usages, "authentication") {
		warn("the token is not in group %s, which kubeadm's join RBAC (CSR creation and auto-approval, reading kubelet-config and kubeadm-certs) is bound to; joins with it will fail unless you bound your groups yourself", token.DefaultGroup)
	}
	ac, err := newAdminClient(&o.AdminOptions)
	if err != nil {
		return err
	}
	now := time.Now()
	info, err := token.Create(ctx, ac.client, spec, now)
	if apierrors.IsAlreadyExists(err) {
		return operr.Newf(operr.Usage, "pick another token, or delete the old one with kjoin token delete "+spec.Token.ID, "a token with id %q already exists", spec.Token.ID)
	}
	if err != nil {
		return apiError(err, "create", "secrets in kube-system")
	}
	for _, w := range missingBootstrapRBAC(ctx, ac.client) {
		warn("%s", w)
	}
	if !o.PrintJoinCommand && !o.ControlPlane {
		switch o.Output {
		case "text":
			_, err := fmt.Fprintln(deps.Out, spec.Token.Full())
			return err
		default:
			return printObject(deps.Out, o.Output, map[string]any{"token": spec.Token.Full(), "id": info.ID, "expires": info.Expires, "usages": info.Usages, "groups": info.Groups, "warnings": nonNil(warnings)})
		}
	}
	ji, err := joinInfo(ctx, ac, spec.Token, info.Expires, o.ControlPlane)
	if err != nil {
		return err
	}
	if o.ControlPlane {
		key, err := certs.NewKey()
		if err != nil {
			return err
		}
		exp, err := uploadCerts(ctx, ac, &o.AdminOptions, key, now)
		if err != nil {
			return err
		}
		ji.CertificateKey, ji.CertificateKeyExpires = key, &exp
	}
	ji.Warnings = nonNil(warnings)
	ji.Command = joinCommand(o.Format, ji)
	if o.Output != "text" {
		return printObject(deps.Out, o.Output, ji)
	}
	fmt.Fprintln(deps.Out, ji.Command)
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
func joinInfo(ctx context.Context, ac *adminClient, t token.Token, expires *time.Time, controlPlane bool) (*JoinInfo, error) {
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
	caCerts, err := discovery.ParseCerts(ac.caData)
	if err != nil {
		return nil, operr.Wrap(operr.Usage, err, "the admin kubeconfig has no CA data to pin", "")
	}
	var pins []string
	for _, c := range caCerts {
		pins = append(pins, discovery.Pin(c))
	}
	return &JoinInfo{Token: t.Full(), Endpoint: endpoint, CACertHashes: pins, Expires: expires}, nil
}

func joinCommand(format string, ji *JoinInfo) string {
	tool := "kjoin join"
	if format == "kubeadm" {
		tool = "kubeadm join"
	}
	parts := []string{tool, ji.Endpoint, "--token", ji.Token}
	for _, p := range ji.CACertHashes {
		parts = append(parts, "--discovery-token-ca-cert-hash", p)
	}
	if ji.CertificateKey != "" {
		parts = append(parts, "--control-plane", "--certificate-key", ji.CertificateKey)
	}
	return strings.Join(parts, " ")
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

func uploadCerts(ctx context.Context, ac *adminClient, o *AdminOptions, key string, now time.Time) (time.Time, error) {
	cfg, err := clusterConfiguration(ctx, ac.client)
	if err != nil {
		return time.Time{}, err
	}
	pkiDir := phases.PKIDir
	ext := certs.ExternalOf(cfg)
	if cfg != nil {
		pkiDir = cfg.CertificatesDir
	}
	paths := phases.Paths{Root: o.Root}
	read := func(p string) ([]byte, error) {
		if !path.IsAbs(p) {
			p = path.Join(pkiDir, p)
		}
		return os.ReadFile(paths.Of(p))
	}
	exp, err := certs.Upload(ctx, ac.client, key, ext, read, now)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			return time.Time{}, operr.Wrap(operr.Usage, err, "the shared certificates are not on this host", "run it on a control-plane node")
		}
		return time.Time{}, apiError(err, "create", "secrets and RBAC in kube-system")
	}
	return exp, nil
}

// UploadCertsOptions are the flags of kjoin upload-certs.
type UploadCertsOptions struct {
	AdminOptions
	CertificateKey string
}

// NewCmdUploadCerts builds kjoin upload-certs.
func NewCmdUploadCerts(deps *Deps) *cobra.Command {
	o := &UploadCertsOptions{}
	cmd := &cobra.Command{
		Use: "upload-certs", Short: "Encrypt and upload the control-plane certificates (kube-system/kubeadm-certs, 2h)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runUploadCerts(cmd.Context(), deps, o) },
	}
	bindAdminFlags(cmd, &o.AdminOptions, "text, json or yaml")
	cmd.Flags().StringVar(&o.CertificateKey, "certificate-key", "", "key to encrypt with (default: a new one)")
	return cmd
}

func runUploadCerts(ctx context.Context, deps *Deps, o *UploadCertsOptions) error {
	if err := checkOutput(o.Output, "text", "json", "yaml"); err != nil {
		return err
	}
	key := o.CertificateKey
	if key == "" {
		var err error
		if key, err = certs.NewKey(); err != nil {
			return err
		}
	} else if _, err := certs.ParseKey(key); err != nil {
		return operr.Wrap(operr.Usage, err, "invalid --certificate-key", "kjoin certs certificate-key prints a new one")
	}
	ac, err := newAdminClient(&o.AdminOptions)
	if err != nil {
		return err
	}
	exp, err := uploadCerts(ctx, ac, &o.AdminOptions, key, time.Now())
	if err != nil {
		return err
	}
	if o.Output != "text" {
		return printObject(deps.Out, o.Output, map[string]any{"certificateKey": key, "certificateKeyExpires": exp})
	}
	fmt.Fprintln(deps.Out, key)
	fmt.Fprintf(deps.Err, "Uploaded to kube-system/%s; valid until %s (in %s).\n", certs.SecretName, exp.UTC().Format(time.RFC3339), time.Until(exp).Round(time.Minute))
	return nil
}

// NewCmdCerts builds kjoin certs.
func NewCmdCerts(deps *Deps) *cobra.Command {
	cmd := &cobra.Command{Use: "certs", Short: "Certificate helpers"}
	cmd.AddCommand(&cobra.Command{
		Use: "certificate-key", Short: "Print a new certificate key (for upload-certs and control-plane joins)", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			k, err := certs.NewKey()
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(deps.Out, k)
			return err
		},
	})
	return cmd
}

func newCmdTokenList(deps *Deps) *cobra.Command {
	o := &AdminOptions{}
	cmd := &cobra.Command{
		Use: "list", Short: "List bootstrap tokens", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(o.Output, "text", "json", "yaml"); err != nil {
				return err
			}
			ac, err := newAdminClient(o)
			if err != nil {
				return err
			}
			tokens, err := token.List(cmd.Context(), ac.client)
			if err != nil {
				return apiError(err, "list", "secrets in kube-system")
			}
			type row struct {
				token.Info
				Token string `json:"token"`
			}
			rows := []row{}
			for _, t := range tokens {
				rows = append(rows, row{Info: t, Token: t.Token.Full()})
			}
			if o.Output != "text" {
				return printObject(deps.Out, o.Output, rows)
			}
			fmt.Fprintf(deps.Out, "%-24s %-22s %-26s %s\n", "TOKEN", "EXPIRES", "USAGES", "GROUPS")
			for _, r := range rows {
				exp := "never"
				if r.Expires != nil {
					exp = r.Expires.UTC().Format(time.RFC3339)
				}
				fmt.Fprintf(deps.Out, "%-24s %-22s %-26s %s\n", r.Token, exp, strings.Join(r.Usages, ","), strings.Join(r.Groups, ","))
			}
			return nil
		},
	}
	bindAdminFlags(cmd, o, "text, json or yaml")
	return cmd
}

func newCmdTokenDelete(deps *Deps) *cobra.Command {
	o := &AdminOptions{}
	cmd := &cobra.Command{
		Use: "delete TOKEN|ID...", Short: "Delete bootstrap tokens", Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ac, err := newAdminClient(o)
			if err != nil {
				return err
			}
			for _, a := range args {
				id, err := token.Delete(cmd.Context(), ac.client, a)
				switch {
				case errors.Is(err, token.ErrUnknown):
					return operr.Wrap(operr.Auth, err, "", "kjoin token list shows the existing tokens")
				case err != nil && id == "":
					return operr.Wrap(operr.Usage, err, "invalid token or token ID", "")
				case err != nil:
					return apiError(err, "delete", "secrets in kube-system")
				}
				fmt.Fprintf(deps.Out, "bootstrap token %q deleted\n", id)
			}
			return nil
		},
	}
	bindAdminFlags(cmd, o, "text")
	return cmd
}

func checkOutput(got string, allowed ...string) error {
	if !slices.Contains(allowed, got) {
		return usage("--output must be one of %s, not %q", strings.Join(allowed, ", "), got)
	}
	return nil
}

func printObject(w io.Writer, format string, v any) error {
	if format == "yaml" {
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func nonNil(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

func usage(format string, args ...any) error {
	return operr.Newf(operr.Usage, "see kjoin --help", format, args...)
}
