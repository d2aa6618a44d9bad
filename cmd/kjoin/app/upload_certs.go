package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"time"

	"github.com/spf13/cobra"

	"kjoin.dev/kjoin/certs"
	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/operr"
	"kjoin.dev/kjoin/output"
)

// UploadCertsOptions are the flags of kjoin upload-certs.
type UploadCertsOptions struct {
	AdminOptions
	CertificateKey string
}

// NewCmdUploadCerts builds kjoin upload-certs.
func NewCmdUploadCerts(deps *Deps, g *Globals) *cobra.Command {
	o := &UploadCertsOptions{}
	cmd := &cobra.Command{
		Use: "upload-certs", Short: "Encrypt and upload the control-plane certificates (kube-system/kubeadm-certs, 2h)", Args: cobra.NoArgs,
		Example: `  kjoin upload-certs                       # prints the new certificate key
  kjoin upload-certs --certificate-key "$(kjoin certs certificate-key)"`,
		RunE: func(cmd *cobra.Command, _ []string) error { return runUploadCerts(cmd.Context(), deps, o) },
	}
	bindAdminFlags(cmd, &o.AdminOptions, g)
	cmd.Flags().StringVar(&o.CertificateKey, "certificate-key", "", "key to encrypt with (default: a new one)")
	return cmd
}

func runUploadCerts(ctx context.Context, deps *Deps, o *UploadCertsOptions) error {
	key := o.CertificateKey
	if key == "" {
		var err error
		if key, err = certs.NewCertificateKey(); err != nil {
			return err
		}
	} else if _, err := certs.ParseCertificateKey(key); err != nil {
		return operr.Invalid("kjoin upload-certs", fmt.Sprintf("--certificate-key: %v; kjoin certs certificate-key prints a new one", err))
	}
	ac, err := newAdminClient(deps, &o.AdminOptions)
	if err != nil {
		return err
	}
	exp, err := uploadCerts(ctx, ac, &o.AdminOptions, key, ac.clock.Now())
	if err != nil {
		return err
	}
	if !o.g.Output.Text() {
		return printResult(deps, o.g, &output.CertificateKey{CertificateKey: key, Expires: &exp}, nil)
	}
	fmt.Fprintln(deps.Out, key)
	fmt.Fprintf(deps.Err, "Uploaded to kube-system/%s; valid until %s (in %s).\n", certs.SecretName, exp.UTC().Format(time.RFC3339), time.Until(exp).Round(time.Minute))
	return nil
}

func uploadCerts(ctx context.Context, ac *adminClient, o *AdminOptions, key string, now time.Time) (time.Time, error) {
	cfg, err := clusterConfiguration(ctx, ac.client)
	if err != nil {
		return time.Time{}, err
	}
	pkiDir := host.PKIDir
	ext := certs.ExternalOf(cfg)
	if cfg != nil {
		pkiDir = cfg.CertificatesDir
	}
	paths := host.Paths{Root: o.root()}
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
