package phases

import (
	"context"
	"fmt"
	"strings"

	"kjoin.dev/kjoin/operr"
	"kjoin.dev/kjoin/versions"
)

// VersionCheck holds the join to kjoin's support window and the Kubernetes version skew
// before anything is written: the cluster (its API server) must run a supported minor, and the
// local kubelet may be neither newer than the API server nor more than three minors older
// (kubeadm's KubeletVersion check; control planes are checked again against kubeadm-config's
// kubernetesVersion in control-plane-prepare).
//
//	Reads:  s.BootstrapClient (the API server's /version), s.Opts (IgnorePreflight); kubelet --version
//	Writes: s.ClusterVersion, s.KubeletVersion
var VersionCheck = Phase{ReadOnly: true, Name: "version-check", Short: "Check the cluster's and the kubelet's versions (support window, skew)",
	Needs: []string{"discovery"}, Run: runVersionCheck}

func runVersionCheck(ctx context.Context, e *Env, s *State) error {
	if s.BootstrapClient == nil {
		return operr.New(operr.Usage, "version-check needs the discovery phase", "run the whole join, or kjoin join phase discovery first")
	}
	var failed []string
	fail := func(name string, err error) {
		if ignored(s, name) {
			s.Warn(e, "version-check", "[%s]: %v (ignored)", name, err)
			return
		}
		failed = append(failed, fmt.Sprintf("[ERROR %s]: %v", name, err))
	}
	info, err := s.BootstrapClient.Discovery().ServerVersion()
	if err != nil {
		return operr.Wrap(operr.Other, err, "cannot read the API server's version", "check that the API server is reachable, then run the same command again")
	}
	s.ClusterVersion = info.GitVersion
	if err := versions.CheckCluster(s.ClusterVersion); err != nil {
		fail("KubernetesVersion", err)
	}
	kv, err := kubeletVersion(ctx, e)
	switch {
	case err != nil:
		fail("KubeletVersion", fmt.Errorf("couldn't get kubelet version: %w", err))
	default:
		s.KubeletVersion = kv
		if err := versions.CheckKubelet(kv, s.ClusterVersion, ""); err != nil {
			fail("KubeletVersion", err)
		}
	}
	if len(failed) > 0 {
		return preflightError(failed)
	}
	e.Logf("version-check", "cluster %s, kubelet %s: inside the support window %s", s.ClusterVersion, s.KubeletVersion, versions.Window())
	return nil
}

// kubeletVersion asks the local kubelet binary for its version ("Kubernetes v1.37.2").
func kubeletVersion(ctx context.Context, e *Env) (string, error) {
	out, err := e.Exec.Run(ctx, "kubelet", "--version")
	if err != nil {
		return "", err
	}
	v := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(out)), "Kubernetes"))
	if _, err := versions.Minor(v); err != nil {
		return "", fmt.Errorf("kubelet --version printed %q", strings.TrimSpace(string(out)))
	}
	return v, nil
}

// ignored reports whether a preflight-style check is made non-fatal by --ignore-preflight-errors.
func ignored(s *State, check string) bool {
	return s.Opts.IgnorePreflight["all"] || s.Opts.IgnorePreflight[strings.ToLower(check)]
}

// preflightError is the exit-3 error of failed preflight-style checks, as preflight reports them.
func preflightError(failed []string) error {
	return &operr.Error{
		Code: operr.Preflight,
		What: fmt.Sprintf("%d preflight check(s) failed:\n\t%s", len(failed), strings.Join(failed, "\n\t")),
		Hint: "fix them, or make a check non-fatal with --ignore-preflight-errors=<name>,... ('all' ignores every check)",
	}
}
