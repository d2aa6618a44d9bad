package app

import (
	"fmt"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/operr"
)

// AdminOptions are shared by the commands that talk to the cluster as admin.
type AdminOptions struct {
	Kubeconfig string
	Output     string
	Root       string
}

func bindAdminFlags(cmd *cobra.Command, o *AdminOptions, outputs string) {
	cmd.Flags().StringVar(&o.Kubeconfig, "kubeconfig", host.AdminKubeconfig, "admin kubeconfig")
	cmd.Flags().StringVarP(&o.Output, "output", "o", "text", "output format: "+outputs)
	cmd.Flags().StringVar(&o.Root, "root", "/", "host root directory (for tests)")
	_ = cmd.Flags().MarkHidden("root")
}

// adminClient loads the admin kubeconfig; missing or unusable files are usage errors.
type adminClient struct {
	client kubernetes.Interface
	server string
	caData []byte
	// clock is the host's (a fake one in tests): token expiry and upload times come from it.
	clock clock.PassiveClock
}

// newAdminClient loads the admin kubeconfig through the host environment; missing or
// unusable files are usage errors.
func newAdminClient(deps *Deps, o *AdminOptions) (*adminClient, error) {
	c, cfg, err := deps.NewEnv(o.Root, 0).ClientFromKubeconfig(o.Kubeconfig)
	if err != nil {
		return nil, operr.Wrap(operr.Usage, err, "cannot read the admin kubeconfig "+o.Kubeconfig, "run on a control plane, or pass --kubeconfig")
	}
	env := deps.NewEnv(o.Root, 0)
	return &adminClient{client: c, server: cfg.Host, caData: cfg.TLSClientConfig.CAData, clock: env.Clock}, nil
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
