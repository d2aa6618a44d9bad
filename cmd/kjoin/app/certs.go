package app

import (
	"fmt"

	"github.com/spf13/cobra"
	"kjoin.dev/kjoin/certs"
)

// NewCmdCerts builds kjoin certs.
func NewCmdCerts(deps *Deps) *cobra.Command {
	cmd := &cobra.Command{Use: "certs", Short: "Certificate helpers"}
	cmd.AddCommand(&cobra.Command{
		Use: "certificate-key", Short: "Print a new certificate key (for upload-certs and control-plane joins)", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error { return runCertificateKey(deps) },
	})
	return cmd
}

// runCertificateKey prints a new certificate key.
func runCertificateKey(deps *Deps) error {
	k, err := certs.NewCertificateKey()
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(deps.Out, k)
	return err
}
