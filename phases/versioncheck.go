package phases

import (
	"context"
	"fmt"
	"strings"
	"time"

	"kjoin.dev/kjoin/cri"
	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/operr"
	"kjoin.dev/kjoin/versions"
)

// VersionCheck holds the join to kjoin's support window and the Kubernetes version skew
// before anything is written: the cluster (its API server) must run a supported minor, and the
// local kubelet may be neither newer than the API server nor more than three minors older
// (kubeadm's KubeletVersion check; control planes are checked again against kubeadm-config's
// kubernetesVersion in control-plane-prepare). It also asks the container runtime over CRI
// what it is: a runtime without the RuntimeConfig call is a warning (an error for kubelets from
// v1.38, which require it), and a sandbox image other than the one this cluster's kubeadm uses
// is a warning naming both.
//
//	Reads:  s.BootstrapClient (the API server's /version), s.Opts (IgnorePreflight, CRISocket);
//	        kubelet --version; the runtime's CRI Version, Status, ListImages and RuntimeConfig
//	Writes: s.ClusterVersion, s.KubeletVersion, s.Runtime
var VersionCheck = Phase{ReadOnly: true, Name: "version-check", Short: "Check the cluster's and the kubelet's versions (support window, skew)",
	Needs: []string{"discovery"}, Run: runVersionCheck}

func runVersionCheck(ctx context.Context, e *host.Env, s *State) error {
	if s.BootstrapClient == nil {
		return operr.New(operr.Usage, "version-check needs the discovery phase", "run the whole join, or kjoin join phase discovery first")
	}
	// The three questions are independent: the kubelet binary and the runtime were asked from
	// preflight on (hostProbes), or are asked now while the API server answers.
	probes := s.probes
	if probes == nil {
		probes = startHostProbes(ctx, e, s)
	}
	info, err := s.BootstrapClient.Discovery().ServerVersion()
	if werr := probes.wait(ctx); werr != nil {
		return fmt.Errorf("wait for the kubelet's and the runtime's versions: %w", werr)
	}
	kv, kerr, rt, rerr := probes.kubelet, probes.kubeletErr, probes.runtime, probes.runtimeErr
	if err != nil {
		return operr.Wrap(operr.Other, err, "cannot read the API server's version", "check that the API server is reachable, then run the same command again")
	}
	s.ClusterVersion = info.GitVersion
	err = runChecks(e, s, "version-check", []check{
		{"KubernetesVersion", func() (string, error) { return "", versions.CheckCluster(s.ClusterVersion) }},
		{"KubeletVersion", func() (string, error) {
			if kerr != nil {
				return "", fmt.Errorf("couldn't get kubelet version: %w", kerr)
			}
			s.KubeletVersion = kv
			return "", versions.CheckKubelet(kv, s.ClusterVersion, "")
		}},
		{"ContainerRuntimeVersion", func() (string, error) {
			if rerr != nil {
				return "", rerr
			}
			return checkRuntime(e, s, rt)
		}},
	})
	if err != nil {
		return err
	}
	e.Logf("version-check", "cluster %s, kubelet %s: inside the support window %s", s.ClusterVersion, s.KubeletVersion, versions.Window())
	return nil
}

// describeRuntime asks the runtime what it is (nil when the host cannot ask).
func describeRuntime(ctx context.Context, e *host.Env, socket string) (*cri.Info, error) {
	if e.DescribeRuntime == nil {
		return nil, nil
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	info, err := e.DescribeRuntime(cctx, socket)
	if err != nil {
		return nil, fmt.Errorf("could not ask the container runtime at %s what it is: %w", socket, err)
	}
	return &info, nil
}

// checkRuntime is kubeadm's ContainerRuntimeVersion check, plus its image-pull check's sandbox
// image comparison, on the runtime's answer; it records the answer in s.Runtime.
func checkRuntime(e *host.Env, s *State, rt *cri.Info) (string, error) {
	if rt == nil {
		return "", nil
	}
	info := *rt
	s.Runtime = &info
	e.Logf("version-check", "container runtime %s %s at %s", info.Name, info.Version, s.Opts.CRISocket)
	var warnings []string
	if !info.RuntimeConfig {
		msg := fmt.Sprintf("the container runtime %s %s does not implement the CRI RuntimeConfig call, which kubelets from v1.%d require (the kubelet then takes its cgroup driver from the runtime, KEP 4033): upgrade the runtime (containerd 2.0 or newer)",
			info.Name, info.Version, versions.RuntimeConfigRequired)
		if m, err := versions.Minor(s.KubeletVersion); err == nil && m >= versions.RuntimeConfigRequired {
			return "", fmt.Errorf("%s", msg)
		}
		warnings = append(warnings, msg)
	}
	if m, err := versions.Minor(s.ClusterVersion); err == nil {
		want := versions.PauseImage(m)
		switch {
		case info.SandboxImage == "":
			e.Debugf("version-check", "the container runtime does not report its sandbox image; expected %s", want)
		case !cri.SandboxMatches(info.SandboxImage, want):
			warnings = append(warnings, fmt.Sprintf("the container runtime's sandbox image is %s (read from %s), but Kubernetes %s's kubeadm uses %s: configure the runtime with %s",
				info.SandboxImage, info.SandboxImageFrom, s.ClusterVersion, want, want))
		}
	}
	return strings.Join(warnings, "; "), nil
}

// kubeletVersion asks the local kubelet binary for its version ("Kubernetes v1.37.2").
func kubeletVersion(ctx context.Context, e *host.Env) (string, error) {
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
