package phases

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"k8s.io/client-go/rest"

	"kjoin.dev/kjoin/discovery"
	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/joinrequest"
	"kjoin.dev/kjoin/operr"
)

// Discovery establishes trust in the cluster (token or file discovery) and builds the
// bootstrap client that authenticates with the TLS bootstrap token.
//
//	Reads:  s.Opts (Endpoint, DiscoveryToken, Pins, UnsafeSkipCAVerification, DiscoveryFile, TLSBootstrapToken,
//	        Timeouts, NodeName, ControlPlane, DryRun)
//	Writes: s.Discovery, s.BootstrapClient, s.BootstrapWatcher, s.api (several endpoints), s.Journal (node, CA pin, endpoint, role), s.Warnings (clock skew)
var Discovery = Phase{ReadOnly: true, Name: "discovery", Short: "Fetch and verify cluster-info (CA pinning)", Run: runDiscovery}

func runDiscovery(ctx context.Context, e *host.Env, s *State) error {
	var auth *rest.Config
	switch {
	case s.Opts.DiscoveryFile != "":
		fr, err := discovery.File(ctx, s.Opts.DiscoveryFile, s.Opts.Timeouts.Discovery, nil)
		if err != nil {
			return err
		}
		s.Discovery = &fr.Result
		if s.Opts.TLSBootstrapToken == nil {
			if fr.AuthInfo == nil || (fr.AuthInfo.Token == "" && len(fr.AuthInfo.ClientCertificateData) == 0) {
				return operr.New(operr.Usage, "the discovery file has no credentials and no --tls-bootstrap-token was given",
					"pass --tls-bootstrap-token (or --token), or embed a token in the discovery file")
			}
			auth = &rest.Config{BearerToken: fr.AuthInfo.Token}
			auth.TLSClientConfig.CertData = fr.AuthInfo.ClientCertificateData
			auth.TLSClientConfig.KeyData = fr.AuthInfo.ClientKeyData
		}
		e.Logf("discovery", "using %s from the discovery file (CA %s)", s.Discovery.Server, s.Discovery.CAPin)
	default:
		if s.Opts.DiscoveryToken == nil {
			return operr.New(operr.Usage, "no discovery method: give an API server endpoint and --token, or --discovery-file", "")
		}
		waited := e.Waiting("discovery", discoveryAwaited(s.Opts), s.Opts.Timeouts.Discovery)
		res, err := discovery.Token(ctx, discovery.Request{
			Endpoint:                 s.Opts.Endpoint,
			MoreEndpoints:            s.Opts.MoreEndpoints,
			Token:                    *s.Opts.DiscoveryToken,
			Pins:                     s.Opts.Pins,
			UnsafeSkipCAVerification: s.Opts.UnsafeSkipCAVerification,
			Timeout:                  s.Opts.Timeouts.Discovery,
			Clock:                    e.Clock,
			Logf: func(f string, a ...any) {
				e.Debugf("discovery", f, a...)
				e.Note("discovery", fmt.Sprintf(f, a...)) // the wait line says why it still waits
			},
		})
		waited()
		if err != nil {
			return err
		}
		s.Discovery = res
		if len(s.Opts.MoreEndpoints) > 0 {
			for _, a := range res.Tried {
				if a.Error != "" {
					e.Logf("discovery", "API server %s: %s", a.Endpoint, a.Error)
				}
			}
			e.Logf("discovery", "cluster-info read from %s", res.Endpoint)
			// The endpoint that just served first, then cluster-info's server, then the rest.
			s.api = newAPIHosts(append([]string{res.Endpoint, hostOf(res.Server), s.Opts.Endpoint}, s.Opts.MoreEndpoints...),
				func(f string, a ...any) { e.Logf("discovery", f, a...) })
		}
		if len(s.Opts.Pins) == 0 {
			e.Logf("discovery", "cluster CA %s NOT verified (no pin); API server %s", res.CAPin, res.Server)
			s.Warn(e, "discovery", "the cluster CA %s was NOT verified: --discovery-token-unsafe-skip-ca-verification trusts whoever answered with a cluster-info signed for this token, so anyone who knows the token could have posed as this cluster's control plane. Pin the CA: --discovery-token-ca-cert-hash %s (check it on a control plane: kjoin token create --print-join-command)", res.CAPin, res.CAPin)
		} else {
			e.Logf("discovery", "cluster CA %s verified; API server %s", res.CAPin, res.Server)
		}
		if off := res.ClockOffset; off > time.Minute || off < -time.Minute {
			s.Warn(e, "discovery", "this node's clock differs from the API server's by %s; certificates may look expired or not yet valid", off.Round(time.Second))
		}
	}
	if auth == nil {
		if s.Opts.TLSBootstrapToken == nil {
			return operr.New(operr.Usage, "no TLS bootstrap token", "pass --token or --tls-bootstrap-token")
		}
		auth = &rest.Config{BearerToken: s.Opts.TLSBootstrapToken.Full()}
	}
	cfg := rest.CopyConfig(auth)
	cfg.Host = s.Discovery.Server
	cfg.TLSClientConfig.CAData = s.Discovery.CAData
	cfg.Timeout = 10 * time.Second
	cfg.UserAgent = "kjoin"
	if s.api != nil {
		s.api.wrap(cfg)
	}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return &authRetry{next: rt, clock: e.Clock, window: unauthorizedWindow, logf: func(f string, a ...any) { e.Debugf("discovery", f, a...) }}
	})
	client, err := e.Client(cfg)
	if err != nil {
		return operr.Wrap(operr.Other, err, "build the bootstrap client", "")
	}
	s.BootstrapClient = client
	// A watch is one long request: the client's 10 s timeout would end it every 10 s (a
	// join waiting out a storm re-watched ten times a minute). The watcher has none; each
	// watch asks the server to end it (tlsbootstrap.WatchFor) and is bounded on this side too.
	wcfg := rest.CopyConfig(cfg)
	wcfg.Timeout = 0
	if s.BootstrapWatcher, err = e.Client(wcfg); err != nil {
		return operr.Wrap(operr.Other, err, "build the bootstrap client", "")
	}
	if j := s.Journal; j != nil && !s.Opts.DryRun {
		j.Node, j.CAPin, j.Endpoint = s.Opts.NodeName, s.Discovery.CAPin, s.Discovery.Server
		j.Role = "worker"
		if s.Opts.ControlPlane {
			j.Role = "control-plane"
		}
	}
	return nil
}

// discoveryAwaited names what token discovery waits for, for its wait line: the endpoints,
// whether the CA is pinned, and the token's ID (never its secret).
func discoveryAwaited(o joinrequest.Options) string {
	trust := "verified by the pinned CA"
	if len(o.Pins) == 0 {
		trust = "its CA NOT verified (unpinned)"
	}
	from := o.Endpoint
	if len(o.MoreEndpoints) > 0 {
		from += " (or " + strings.Join(o.MoreEndpoints, ", ") + ")"
	}
	return fmt.Sprintf("cluster-info from %s, %s and signed for token %s", from, trust, o.DiscoveryToken.ID)
}

// hostOf is a server URL's host:port ("" when it has none).
func hostOf(server string) string {
	u, err := url.Parse(server)
	if err != nil {
		return ""
	}
	return u.Host
}
