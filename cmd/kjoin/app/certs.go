package app

import (
	"fmt"

	"github.com/spf13/cobra"
	"kjoin.dev/kjoin/certs"
	"kjoin.dev/kjoin/output"
)

// NewCmdCerts builds kjoin certs.
func NewCmdCerts(deps *Deps, g *Globals) *cobra.Command {
	cmd := &cobra.Command{Use: "certs", Short: "Certificate helpers"}
	cmd.AddCommand(&cobra.Command{
		Use: "certificate-key", Short: "Print a new certificate key (for upload-certs and control-plane joins)", Args: cobra.NoArgs,
		Example: `  kjoin upload-certs --certificate-key "$(kjoin certs certificate-key)"`,
		RunE:    func(*cobra.Command, []string) error { return runCertificateKey(deps, g) },
	})
	return cmd
}

// runCertificateKey prints a new certificate key.
func runCertificateKey(deps *Deps, g *Globals) error {
	k, err := certs.NewCertificateKey()
	if err != nil {
		return err
	}
	if !g.Output.Text() {
		return printResult(deps, g, &output.CertificateKey{CertificateKey: k}, nil)
	}
	_, err = fmt.Fprintln(deps.Out, k)
	return err
}
