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

// KubeconfigOptions choose the kubeconfig as kubectl does (--kubeconfig, KUBECONFIG,
// ~/.kube/config), defaulting to kubeadm's /etc/kubernetes/admin.conf, and --context.
type KubeconfigOptions struct {
	Kubeconfig string
	Context    string
}

func (o *KubeconfigOptions) bind(cmd *cobra.Command, defaults string) {
	cmd.Flags().StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig (default: $KUBECONFIG, else ~/.kube/config, else "+defaults+")")
	cmd.Flags().StringVar(&o.Context, "context", "", "the kubeconfig context to use (default: its current context)")
}

// choose picks the kubeconfig: the flags, then the environment, then fallbacks.
func (o *KubeconfigOptions) choose(deps *Deps, env *host.Env, fallbacks ...string) host.Kubeconfig {
	getenv := deps.Getenv
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	return env.ChooseKubeconfig(host.KubeconfigLookup{Explicit: o.Kubeconfig, Env: getenv("KUBECONFIG"), Home: getenv("HOME"), Fallbacks: fallbacks, Context: o.Context})
}

// AdminOptions are shared by the commands that talk to the cluster as admin.
type AdminOptions struct {
	KubeconfigOptions
	g *Globals
}

func bindAdminFlags(cmd *cobra.Command, o *AdminOptions, g *Globals) {
	o.g = g
	o.bind(cmd, host.AdminKubeconfig)
}

// root is the host root every host path is under.
func (o *AdminOptions) root() string { return o.g.Root }

// adminClient loads the admin kubeconfig; missing or unusable files are usage errors.
type adminClient struct {
	client kubernetes.Interface
	server string
	caData []byte
	// clock is the host's (a fake one in tests): token expiry and upload times come from it.
	clock clock.Clock
}

// newAdminClient loads the admin kubeconfig through the host environment; missing or
// unusable files are usage errors naming the file and how it was chosen.
func newAdminClient(deps *Deps, o *AdminOptions) (*adminClient, error) {
	env := deps.NewEnv(o.root(), o.g.Verbosity)
	kc := o.choose(deps, env, host.AdminKubeconfig)
	c, cfg, err := env.ClientFor(kc)
	if err != nil {
		return nil, operr.Wrap(operr.Usage, err, "cannot use the admin kubeconfig", "run on a control plane, or pass --kubeconfig (or set KUBECONFIG) with an admin kubeconfig")
	}
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
