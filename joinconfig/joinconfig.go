// Package joinconfig turns kjoin join's flags, or a kubeadm JoinConfiguration, into validated
// phase options, before anything on the host is probed or changed. It has three steps, each
// with one copy of each rule: fromFlags and fromConfig gather the raw values (kubeadm's mixing
// rules), validate checks every value and reports all bad ones together (exit 2). It reads
// only what the command line names (token file, config file, patches directory, discovery
// file); it must not know about container runtimes, ports or the cluster.
package joinconfig

import (
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode"

	"k8s.io/apimachinery/pkg/util/validation"

	"kjoin.dev/kjoin/certs"
	"kjoin.dev/kjoin/clusterconfig"
	"kjoin.dev/kjoin/discovery"
	"kjoin.dev/kjoin/joinrequest"
	"kjoin.dev/kjoin/joinstring"
	"kjoin.dev/kjoin/operr"
	"kjoin.dev/kjoin/patches"
	"kjoin.dev/kjoin/token"
)

// Flags are kjoin join's command-line values, as given.
type Flags struct {
	Endpoint string
	// MoreEndpoints are the further api-server-endpoint arguments: other API servers of the
	// same cluster, tried when one before them is down.
	MoreEndpoints            []string
	Token                    string
	TokenFile                string
	DiscoveryToken           string
	CACertHashes             []string
	UnsafeSkipCAVerification bool
	DiscoveryFile            string
	TLSBootstrapToken        string
	NodeName                 string
	CRISocket                string
	ConfigPath               string
	IgnorePreflightErrors    []string
	SkipPhases               []string
	DryRun                   bool
	ControlPlane             bool
	CertificateKey           string
	// CertificateKeyFile holds the certificate key ('-': standard input, the line after the
	// token when --token-file is '-' too).
	CertificateKeyFile string
	// JoinStringFile holds a join string ('-': standard input) carrying the endpoints, the CA
	// pins, the token and for a control plane the certificate key (package joinstring).
	JoinStringFile   string
	AdvertiseAddress string
	BindPort         int
	Patches          string
	// Output is -o; OutputError its problem when the command layer found one (reported here
	// with every other bad value).
	Output      string
	OutputError string
	Verbosity   int
	// Wait is what the join waits for at the end: "ready"/"true" (the Node Ready, default),
	// "kubelet" (the kubelet's /healthz, holding its client certificate: what kubeadm waits
	// for) or "none"/"false".
	Wait             string
	WaitReady        bool
	WaitReadyTimeout time.Duration
	// Replace takes over a NotReady Node of this name afresh (and a dead etcd member with this
	// control plane's peer URL); RemoveDeadLearners removes etcd learners left by failed joins.
	Replace            bool
	RemoveDeadLearners bool
	// KubeletServingCertificates: the kubelet asks for a serving certificate signed by the
	// cluster CA (serverTLSBootstrap), for kjoin's approver to approve.
	KubeletServingCertificates bool
	// Changed reports whether a flag was set on the command line (nil: none was).
	Changed func(name string) bool
}

// Sources are where secrets come from besides flags.
type Sources struct {
	Stdin  io.Reader
	Getenv func(string) string
}

// Result is a validated join request.
type Result struct {
	Options    joinrequest.Options
	SkipPhases []string
	Warnings   []string
}

// Secret environment variables.
const (
	TokenEnv          = "KJOIN_TOKEN"
	CertificateKeyEnv = "KJOIN_CERTIFICATE_KEY"
)

// configMixAllowed are the flags that may accompany --config (kubeadm's allow-list plus
// kjoin's output, wait and secret-source flags).
var configMixAllowed = map[string]bool{
	"config": true, "ignore-preflight-errors": true, "dry-run": true, "node-name": true, "skip-phases": true,
	"v": true, "output": true, "wait": true, "wait-ready": true, "wait-ready-timeout": true, "token-file": true, "certificate-key-file": true, "root": true,
}

// value is one raw input and where it came from ("--flag", or a config field), for messages.
type value[T any] struct {
	V    T
	From string
}

// input is the raw request, gathered from flags or a config file, not yet checked.
type input struct {
	// joinStringRefused: --join-string-file was refused (and reported).
	joinStringRefused                                 bool
	endpoint, discoveryToken, tlsToken, discoveryFile value[string]
	moreEndpoints                                     value[[]string]
	pins                                              value[[]string]
	unsafe                                            bool
	nodeName, criSocket, certKey, advertise, patches  value[string]
	bindPort                                          value[int]
	controlPlane, dryRun                              bool
	skip                                              value[[]string]
	ignore                                            []string
	taints                                            value[*[]joinrequest.Taint]
	kubeletExtraArgs                                  []clusterconfig.Arg
	timeouts                                          []value[*time.Duration]
	secret                                            value[string]
}

// Resolve gathers the join request from flags (or --config) and validates all of it.
// phaseNames are the workflow's phases, for --skip-phases.
func Resolve(f Flags, src Sources, phaseNames []string) (*Result, error) {
	if f.Changed == nil {
		f.Changed = func(string) bool { return false }
	}
	v := &validator{}
	res := &Result{Options: joinrequest.Options{
		Timeouts: joinrequest.DefaultTimeouts(), WaitReady: f.WaitReady, WaitReadyTimeout: f.WaitReadyTimeout,
		Replace: f.Replace, RemoveDeadLearners: f.RemoveDeadLearners, KubeletServingCertificates: f.KubeletServingCertificates,
		ReadyGrace: 15 * time.Second, IgnorePreflight: map[string]bool{},
	}}
	in := v.fromFlags(f, src, &res.Options)
	if f.ConfigPath != "" {
		in = v.fromConfig(f, in, &res.Options)
	}
	if in != nil {
		v.validate(f, in, phaseNames, res)
	}
	res.Warnings = append(res.Warnings, v.warnings...)
	if err := v.err(); err != nil {
		return res, err
	}
	return res, nil
}

// fromFlags gathers the request from the command line (and the secret sources).
func (v *validator) fromFlags(f Flags, src Sources, po *joinrequest.Options) *input {
	in := &input{
		endpoint: value[string]{f.Endpoint, "api-server-endpoint argument"}, moreEndpoints: value[[]string]{f.MoreEndpoints, "api-server-endpoint argument"}, discoveryToken: value[string]{f.DiscoveryToken, "--discovery-token"},
		tlsToken: value[string]{f.TLSBootstrapToken, "--tls-bootstrap-token"}, discoveryFile: value[string]{f.DiscoveryFile, "--discovery-file"},
		pins: value[[]string]{f.CACertHashes, "--discovery-token-ca-cert-hash"}, unsafe: f.UnsafeSkipCAVerification,
		nodeName: value[string]{f.NodeName, "--node-name"}, criSocket: value[string]{f.CRISocket, "--cri-socket"},
		certKey: value[string]{f.CertificateKey, "--certificate-key"}, advertise: value[string]{f.AdvertiseAddress, "--apiserver-advertise-address"},
		patches: value[string]{f.Patches, "--patches"}, bindPort: value[int]{f.BindPort, "--apiserver-bind-port"},
		controlPlane: f.ControlPlane, dryRun: f.DryRun, skip: value[[]string]{f.SkipPhases, "--skip-phases"}, ignore: f.IgnorePreflightErrors,
	}
	if f.JoinStringFile != "" {
		v.fromJoinString(f, src, in)
		po.BindPort = f.BindPort
		return in
	}
	in.secret = v.readSecret(f, src)
	if f.CertificateKeyFile != "" {
		if f.CertificateKey != "" {
			v.bad("--certificate-key", "(hidden)", "not together with --certificate-key-file: give the key one way")
		}
		in.certKey = v.readCertificateKeyFile(f, src)
	}
	if f.ControlPlane && in.certKey.V == "" && src.Getenv != nil {
		in.certKey = value[string]{strings.TrimSpace(src.Getenv(CertificateKeyEnv)), CertificateKeyEnv}
	}
	if !f.ControlPlane && f.ConfigPath == "" && (f.CertificateKey != "" || f.CertificateKeyFile != "" || f.AdvertiseAddress != "" || f.Changed("apiserver-bind-port")) {
		v.warn("--control-plane is also required when passing control-plane flags such as --certificate-key, --apiserver-advertise-address, --apiserver-bind-port; they are ignored")
	}
	po.BindPort = f.BindPort
	return in
}

// fromJoinString takes the endpoints, the CA pins, the token and (for a control plane) the
// certificate key from --join-string-file, a file or '-' (standard input). The string is
// checked here, before anything touches the network or the host; none of what it carries
// may be given another way.
func (v *validator) fromJoinString(f Flags, src Sources, in *input) {
	const flag = "--join-string-file"
	var also []string
	for _, c := range []struct {
		name string
		set  bool
	}{
		{"api-server-endpoint argument", f.Endpoint != "" || len(f.MoreEndpoints) > 0}, {"--token", f.Token != ""}, {"--token-file", f.TokenFile != ""},
		{"--discovery-token", f.DiscoveryToken != ""}, {"--discovery-token-ca-cert-hash", len(f.CACertHashes) > 0},
		{"--discovery-token-unsafe-skip-ca-verification", f.UnsafeSkipCAVerification}, {"--discovery-file", f.DiscoveryFile != ""},
		{"--tls-bootstrap-token", f.TLSBootstrapToken != ""}, {"--certificate-key", f.CertificateKey != ""}, {"--certificate-key-file", f.CertificateKeyFile != ""},
	} {
		if c.set {
			also = append(also, c.name)
		}
	}
	if len(also) > 0 {
		v.bad(flag, f.JoinStringFile, "not together with "+strings.Join(also, ", ")+": the join string carries the endpoints, the CA pins, the token and the certificate key")
	}
	var raw value[string]
	in.joinStringRefused = true // until it is read and checked
	if f.JoinStringFile == "-" {
		lines, err := v.stdin(src)
		if err != nil {
			v.bad(flag, "-", "a join string on standard input: "+err.Error())
			return
		}
		raw = value[string]{first(lines, 0), flag + " - (stdin)"}
	} else {
		before := len(v.problems)
		if raw = v.secretFile(flag, f.JoinStringFile, "join string"); len(v.problems) > before {
			return // unreadable, and said so
		}
	}
	js, err := joinstring.Parse(raw.V)
	if err != nil {
		v.bad(flag, f.JoinStringFile, "a kjoin join string ("+err.Error()+"); print a new one with kjoin token create --print-join-string")
		return
	}
	in.joinStringRefused = false
	in.endpoint = value[string]{js.Endpoints[0], raw.From}
	in.moreEndpoints = value[[]string]{js.Endpoints[1:], raw.From}
	in.pins = value[[]string]{js.Pins, raw.From}
	in.secret = value[string]{js.Token, raw.From}
	switch {
	case js.ControlPlane():
		in.certKey, in.controlPlane = value[string]{js.CertificateKey, raw.From}, true
	case f.ControlPlane:
		v.bad("--control-plane", "true", "the join string is a worker's (it carries no certificate key): print a control plane's with kjoin token create --print-join-string --control-plane")
	}
}

// readSecret reads the token from --token, --token-file (or stdin) or KJOIN_TOKEN.
func (v *validator) readSecret(f Flags, src Sources) value[string] {
	switch {
	case f.Token != "" && f.TokenFile != "":
		v.bad("--token", "(hidden)", "not together with --token-file: give the token one way")
	case f.Token != "":
		return value[string]{f.Token, "--token"}
	case f.TokenFile == "-":
		lines, err := v.stdin(src)
		if err != nil {
			v.bad("--token-file", "-", "a token on standard input: "+err.Error())
		}
		return value[string]{first(lines, 0), "--token-file - (stdin)"}
	case f.TokenFile != "":
		return v.secretFile("--token-file", f.TokenFile, "token")
	}
	if src.Getenv != nil {
		return value[string]{strings.TrimSpace(src.Getenv(TokenEnv)), TokenEnv}
	}
	return value[string]{}
}

// readCertificateKeyFile reads --certificate-key-file: a file (warned about when others may
// read it) or '-', standard input (its second line when the token comes first from there).
func (v *validator) readCertificateKeyFile(f Flags, src Sources) value[string] {
	if f.CertificateKeyFile == "-" {
		lines, err := v.stdin(src)
		if err != nil {
			v.bad("--certificate-key-file", "-", "a certificate key on standard input: "+err.Error())
		}
		if f.TokenFile == "-" {
			return value[string]{first(lines, 1), "--certificate-key-file - (stdin, after the token)"}
		}
		return value[string]{first(lines, 0), "--certificate-key-file - (stdin)"}
	}
	return v.secretFile("--certificate-key-file", f.CertificateKeyFile, "certificate key")
}

// secretFile reads a secret from the file a flag names, warning when others may read it.
func (v *validator) secretFile(flag, p, what string) value[string] {
	st, err := os.Stat(p)
	if err == nil && st.Mode().Perm()&0o077 != 0 {
		v.warn(fmt.Sprintf("%s %s is readable by other users (mode %04o): chmod 600 it", flag, p, st.Mode().Perm()))
	}
	b, err := os.ReadFile(p)
	if err != nil {
		v.bad(flag, p, "a readable file holding the "+what+": "+err.Error())
	}
	return value[string]{strings.TrimSpace(string(b)), flag + " " + p}
}

// stdin reads standard input once and splits it into its non-empty lines (secrets read
// with '-': the token first, then the certificate key).
func (v *validator) stdin(src Sources) ([]string, error) {
	if v.stdinRead {
		return v.stdinLines, v.stdinErr
	}
	v.stdinRead = true
	if src.Stdin == nil {
		v.stdinErr = errors.New("no standard input")
		return nil, v.stdinErr
	}
	b, err := io.ReadAll(io.LimitReader(src.Stdin, 8192))
	if err != nil {
		v.stdinErr = err
		return nil, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			v.stdinLines = append(v.stdinLines, l)
		}
	}
	return v.stdinLines, nil
}

func first(lines []string, i int) string {
	if i < len(lines) {
		return lines[i]
	}
	return ""
}

// fromConfig replaces the flag values with the JoinConfiguration's, following kubeadm's
// mixing rules: only the allow-listed flags may accompany --config.
func (v *validator) fromConfig(f Flags, in *input, po *joinrequest.Options) *input {
	var mixed []string
	for _, n := range []string{"token", "join-string-file", "discovery-token", "discovery-token-ca-cert-hash", "discovery-token-unsafe-skip-ca-verification",
		"discovery-file", "tls-bootstrap-token", "cri-socket", "control-plane", "certificate-key", "apiserver-advertise-address",
		"apiserver-bind-port", "patches"} {
		if f.Changed(n) && !configMixAllowed[n] {
			mixed = append(mixed, "--"+n)
		}
	}
	if len(mixed) > 0 {
		v.bad("--config", f.ConfigPath, fmt.Sprintf("not mixed with %s (kubeadm's rule: can not mix '--config' with arguments)", strings.Join(mixed, ", ")))
	}
	if len(f.MoreEndpoints) > 0 {
		v.bad("api-server-endpoint argument", strings.Join(append([]string{f.Endpoint}, f.MoreEndpoints...), " "),
			"no endpoint arguments with --config (its discovery.bootstrapToken.apiServerEndpoint is the endpoint); give several endpoints on the command line without --config")
	}
	data, err := os.ReadFile(f.ConfigPath)
	if err != nil {
		v.bad("--config", f.ConfigPath, "a readable kubeadm config file: "+err.Error())
		return nil
	}
	jc, err := Decode(data, v.warn)
	if err != nil {
		v.bad("--config", f.ConfigPath, "a file with one valid "+APIVersion+" JoinConfiguration: "+err.Error())
		return nil
	}
	if st, err := os.Stat(f.ConfigPath); err == nil && st.Mode().Perm()&0o077 != 0 && configHoldsSecrets(jc) {
		v.warn(fmt.Sprintf("--config %s holds a token or certificate key and is readable by other users (mode %04o): chmod 600 it", f.ConfigPath, st.Mode().Perm()))
	}
	from := func(field string) string { return "JoinConfiguration " + field }
	out := &input{secret: in.secret, ignore: append(slices.Clone(in.ignore), jc.NodeRegistration.IgnorePreflightErrors...)}
	if bt := jc.Discovery.BootstrapToken; bt != nil {
		out.endpoint = value[string]{bt.APIServerEndpoint, from("discovery.bootstrapToken.apiServerEndpoint")}
		out.discoveryToken = value[string]{bt.Token, from("discovery.bootstrapToken.token")}
		out.pins = value[[]string]{bt.CACertHashes, from("discovery.bootstrapToken.caCertHashes")}
		out.unsafe = bt.UnsafeSkipCAVerification
		if bt.APIServerEndpoint == "" {
			v.bad(out.endpoint.From, "", "the API server's host:port")
		}
	}
	if jc.Discovery.File != nil {
		out.discoveryFile = value[string]{jc.Discovery.File.KubeConfigPath, from("discovery.file.kubeConfigPath")}
		if jc.Discovery.File.KubeConfigPath == "" {
			v.bad(out.discoveryFile.From, "", "a kubeconfig path or https URL")
		}
	}
	if jc.Discovery.BootstrapToken == nil && jc.Discovery.File == nil {
		v.bad(from("discovery"), "", "bootstrapToken or file")
	}
	out.tlsToken = value[string]{jc.Discovery.TLSBootstrapToken, from("discovery.tlsBootstrapToken")}
	if out.tlsToken.V == "" && jc.Discovery.BootstrapToken != nil {
		// kubeadm's default: the discovery token also bootstraps the kubelet.
		out.tlsToken = value[string]{jc.Discovery.BootstrapToken.Token, from("discovery.bootstrapToken.token")}
	}
	out.nodeName = value[string]{jc.NodeRegistration.Name, from("nodeRegistration.name")}
	if f.NodeName != "" {
		out.nodeName = in.nodeName
	}
	out.criSocket = value[string]{jc.NodeRegistration.CRISocket, from("nodeRegistration.criSocket")}
	out.taints = value[*[]joinrequest.Taint]{jc.NodeRegistration.Taints, from("nodeRegistration.taints")}
	out.kubeletExtraArgs = jc.NodeRegistration.KubeletExtraArgs
	out.controlPlane = jc.ControlPlane != nil
	out.bindPort = value[int]{6443, from("controlPlane.localAPIEndpoint.bindPort")}
	if cp := jc.ControlPlane; cp != nil {
		out.certKey = value[string]{cp.CertificateKey, from("controlPlane.certificateKey")}
		if f.CertificateKeyFile != "" {
			if cp.CertificateKey != "" {
				v.bad("--certificate-key-file", f.CertificateKeyFile, "not together with controlPlane.certificateKey in --config: give the key one way")
			}
			out.certKey = in.certKey
		}
		out.advertise = value[string]{cp.LocalAPIEndpoint.AdvertiseAddress, from("controlPlane.localAPIEndpoint.advertiseAddress")}
		if cp.LocalAPIEndpoint.BindPort != 0 {
			out.bindPort.V = cp.LocalAPIEndpoint.BindPort
		}
	}
	po.BindPort = out.bindPort.V
	if jc.Patches != nil {
		out.patches = value[string]{jc.Patches.Directory, from("patches.directory")}
	}
	out.dryRun = jc.DryRun
	if f.Changed("dry-run") {
		out.dryRun = f.DryRun
	}
	out.skip = in.skip
	if len(in.skip.V) == 0 {
		out.skip = value[[]string]{jc.SkipPhases, from("skipPhases")}
	}
	if t := jc.Timeouts; t != nil {
		for _, d := range []struct {
			dst   *time.Duration
			src   *Duration
			field string
		}{
			{&po.Timeouts.Discovery, t.Discovery, "discovery"},
			{&po.Timeouts.KubernetesAPICall, t.KubernetesAPICall, "kubernetesAPICall"},
			{&po.Timeouts.TLSBootstrap, t.TLSBootstrap, "tlsBootstrap"},
			{&po.Timeouts.KubeletHealth, t.KubeletHealthCheck, "kubeletHealthCheck"},
			{&po.Timeouts.EtcdAPICall, t.EtcdAPICall, "etcdAPICall"},
			{&po.Timeouts.ControlPlane, t.ControlPlaneComponentHealthCheck, "controlPlaneComponentHealthCheck"},
		} {
			if d.src != nil {
				*d.dst = d.src.Duration
				out.timeouts = append(out.timeouts, value[*time.Duration]{d.dst, from("timeouts." + d.field)})
			}
		}
	}
	return out
}

// validate checks the whole request, section by section as kubeadm's validation does, each
// problem reported (all at once, by the caller), then fills the options from it.
func (v *validator) validate(f Flags, in *input, phaseNames []string, res *Result) {
	po := &res.Options
	v.runFlags(f, in, po)
	v.discovery(in, po)
	v.nodeRegistration(in, po)
	v.controlPlane(in)
	ignore, skip := v.phases(in, phaseNames)
	v.kubeletExtraArgs(in)
	in.skip.V = skip
	po.IgnorePreflight = ignore
	po.Endpoint, po.UnsafeSkipCAVerification, po.DiscoveryFile = in.endpoint.V, in.unsafe, in.discoveryFile.V
	po.MoreEndpoints = slices.Clone(in.moreEndpoints.V)
	po.NodeName, po.CRISocket, po.PatchesDir, po.DryRun = in.nodeName.V, in.criSocket.V, in.patches.V, in.dryRun
	po.KubeletExtraArgs = in.kubeletExtraArgs
	if in.controlPlane {
		po.ControlPlane, po.CertificateKey, po.AdvertiseAddress = true, in.certKey.V, in.advertise.V
	}
	res.SkipPhases = in.skip.V
}

// runFlags checks how the join runs: output, verbosity, waits and timeouts.
func (v *validator) runFlags(f Flags, in *input, po *joinrequest.Options) {
	if f.OutputError != "" {
		v.bad("--output", f.Output, f.OutputError)
	}
	if f.Verbosity < 0 {
		v.bad("--v", fmt.Sprint(f.Verbosity), "0 or more")
	}
	switch f.Wait {
	case "", "true", "ready":
		po.Wait = true
	case "kubelet":
		po.Wait, po.WaitKubeletOnly = true, true
	case "false", "none":
	default:
		v.bad("--wait", f.Wait, "ready (or true), kubelet, or none (or false)")
	}
	if f.WaitReady && po.WaitKubeletOnly {
		v.bad("--wait-ready", "true", "not with --wait=kubelet (which returns before the Node is Ready)")
	}
	if f.RemoveDeadLearners && !in.controlPlane {
		v.bad("--remove-dead-etcd-learners", "true", "only with --control-plane (a worker adds no etcd member)")
	}
	if po.Wait && f.WaitReadyTimeout <= 0 {
		v.bad("--wait-ready-timeout", f.WaitReadyTimeout.String(), "a duration above zero, e.g. 4m")
	}
	for _, t := range in.timeouts {
		if *t.V <= 0 {
			v.bad(t.From, t.V.String(), "a duration above zero, e.g. 5m0s")
		}
	}
}

// discovery checks how the cluster is found and trusted: endpoints, tokens, the discovery file
// and CA pins, and fills the tokens and pins.
func (v *validator) discovery(in *input, po *joinrequest.Options) {
	// A token from --token, --token-file or KJOIN_TOKEN fills the tokens not given otherwise.
	if in.secret.V != "" {
		if in.discoveryToken.V == "" {
			in.discoveryToken = in.secret
		}
		if in.tlsToken.V == "" {
			in.tlsToken = in.secret
		}
	}
	for _, ep := range in.moreEndpoints.V {
		if err := discovery.CheckEndpoint(ep); err != nil {
			v.bad(in.moreEndpoints.From, ep, "host:port with a port in 1-65535, e.g. 10.0.0.2:6443 ("+err.Error()+")")
		}
	}
	switch {
	case in.discoveryFile.V != "" && len(in.moreEndpoints.V) > 0:
		v.bad(in.discoveryFile.From, in.discoveryFile.V, "either --discovery-file or API server endpoints, not both")
	case in.discoveryFile.V != "" && in.endpoint.V != "":
		v.bad(in.discoveryFile.From, in.discoveryFile.V, "either --discovery-file or an API server endpoint, not both")
	case in.discoveryFile.V != "":
		v.checkDiscoveryFile(in.discoveryFile)
	case in.joinStringRefused:
		// The endpoints, the token and the pins were to come from it: its refusal says it all.
	default:
		if in.endpoint.V == "" {
			v.bad(in.endpoint.From, "", "the API server's host:port (e.g. 10.0.0.1:6443), or --discovery-file")
		} else if err := discovery.CheckEndpoint(in.endpoint.V); err != nil {
			v.bad(in.endpoint.From, in.endpoint.V, "host:port with a port in 1-65535, e.g. 10.0.0.1:6443 ("+err.Error()+")")
		}
		if in.discoveryToken.V == "" {
			v.bad("--token", "", "a bootstrap token: --token-file, "+TokenEnv+", --token or --discovery-token")
		} else {
			po.DiscoveryToken = v.token(in.discoveryToken)
		}
		if len(in.pins.V) == 0 && !in.unsafe {
			v.bad(in.pins.From, "", "at least one CA pin sha256:<64 hex> (token discovery without one would trust any server; --discovery-token-unsafe-skip-ca-verification accepts that risk)")
		}
	}
	switch {
	case in.tlsToken.V == "":
	case in.tlsToken.V == in.discoveryToken.V && in.discoveryFile.V == "":
		po.TLSBootstrapToken = po.DiscoveryToken // already checked (and reported once)
	default:
		po.TLSBootstrapToken = v.token(in.tlsToken)
	}
	po.Pins = discovery.Pins{}
	for _, p := range in.pins.V {
		pin, err := discovery.ParsePin(p)
		if err != nil {
			v.bad(in.pins.From, p, "sha256:<64 hex characters> ("+err.Error()+")")
			continue
		}
		po.Pins[pin] = true
	}
}

// nodeRegistration checks the node's name, runtime socket and taints (filling the taints).
func (v *validator) nodeRegistration(in *input, po *joinrequest.Options) {
	if in.nodeName.V != "" {
		if errs := validation.IsDNS1123Subdomain(in.nodeName.V); len(errs) > 0 {
			v.bad(in.nodeName.From, in.nodeName.V, "a lower-case DNS-1123 subdomain ("+strings.Join(errs, "; ")+")")
		}
	}
	if s := in.criSocket.V; s != "" {
		p, hasScheme := strings.CutPrefix(s, "unix://")
		if (!hasScheme && strings.Contains(s, "://")) || !strings.HasPrefix(p, "/") {
			v.bad(in.criSocket.From, s, "a unix socket: unix:///path or /path")
		}
	}
	if in.taints.V != nil {
		for _, t := range *in.taints.V {
			if errs := validation.IsQualifiedName(t.Key); len(errs) > 0 {
				v.bad(in.taints.From, t.Key, "a taint key that is a qualified name")
			}
			if errs := validation.IsValidLabelValue(t.Value); len(errs) > 0 {
				v.bad(in.taints.From, t.Value, "a taint value that is a valid label value (at most 63 of [A-Za-z0-9_.-], alphanumeric at both ends)")
			}
			if t.Effect != "NoSchedule" && t.Effect != "PreferNoSchedule" && t.Effect != "NoExecute" {
				v.bad(in.taints.From, t.Effect, "taint effect NoSchedule, PreferNoSchedule or NoExecute")
			}
		}
		po.Taints, po.TaintsSet = *in.taints.V, true
	}
}

// controlPlane checks the patches and a control plane's certificate key, advertise address
// and port.
func (v *validator) controlPlane(in *input) {
	if in.patches.V != "" {
		v.checkPatches(in.patches, in.controlPlane)
	}
	if in.controlPlane {
		if in.certKey.V != "" {
			if _, err := certs.ParseCertificateKey(in.certKey.V); err != nil {
				v.bad(in.certKey.From, fmt.Sprintf("(hidden, %d characters)", len(in.certKey.V)), "64 hex characters (print one with kjoin certs certificate-key)")
			}
		}
		if in.advertise.V != "" {
			if err := joinrequest.CheckAdvertiseAddress(in.advertise.V); err != nil {
				v.bad(in.advertise.From, in.advertise.V, "a unicast IP address of this node")
			}
		}
		if in.bindPort.V < 1 || in.bindPort.V > 65535 {
			v.bad(in.bindPort.From, fmt.Sprint(in.bindPort.V), "a port in 1-65535")
		}
	}
}

// phases checks --ignore-preflight-errors and --skip-phases (kubeadm's phase names mapped to
// kjoin's) and returns them.
func (v *validator) phases(in *input, phaseNames []string) (map[string]bool, []string) {
	ignore := map[string]bool{}
	for _, n := range in.ignore {
		ignore[strings.ToLower(n)] = true
	}
	if ignore["all"] && len(ignore) > 1 {
		v.bad("--ignore-preflight-errors", strings.Join(in.ignore, ","), "either 'all' or check names, not both")
	}
	var skip []string
	for _, p := range in.skip.V {
		if slices.Contains(phaseNames, p) {
			skip = append(skip, p)
			continue
		}
		k, ok := kubeadmPhases[p]
		switch {
		case !ok:
			v.bad(in.skip.From, p, "one of "+strings.Join(phaseNames, ", ")+" (or a kubeadm join phase name)")
		case k.refuse != "":
			v.bad(in.skip.From, p, "a phase kjoin can skip: "+k.refuse)
		case len(k.kjoin) == 0:
			v.warn(fmt.Sprintf("%s %s is kubeadm's phase name: %s", in.skip.From, p, k.note))
		default:
			msg := fmt.Sprintf("%s %s is kubeadm's phase name; skipping kjoin's %s", in.skip.From, p, strings.Join(k.kjoin, ", "))
			if k.note != "" {
				msg += " (" + k.note + ")"
			}
			v.warn(msg)
			for _, n := range k.kjoin {
				if !slices.Contains(skip, n) {
					skip = append(skip, n)
				}
			}
		}
	}
	return ignore, skip
}

// kubeletExtraArgs checks nodeRegistration.kubeletExtraArgs: kubeadm's kubelet unit expands
// them unquoted.
func (v *validator) kubeletExtraArgs(in *input) {
	for _, a := range in.kubeletExtraArgs {
		// kubeadm's kubelet unit expands these unquoted: whitespace would smuggle in flags.
		if !kubeletArgName.MatchString(a.Name) {
			v.bad("JoinConfiguration nodeRegistration.kubeletExtraArgs name", a.Name, "a kubelet flag name without dashes ([a-z0-9][a-z0-9-]*)")
		}
		if strings.ContainsFunc(a.Value, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) || r == '"' || r == '\\' }) {
			v.bad("JoinConfiguration nodeRegistration.kubeletExtraArgs value of "+a.Name, a.Value, "a value without whitespace, newlines, quotes or backslashes (kubeadm's kubelet unit splits it into flags)")
		}
	}
}

func (v *validator) token(t value[string]) *token.Token {
	tk, err := token.Parse(t.V)
	if err != nil {
		v.bad(t.From, redactToken(t.V), "a bootstrap token [a-z0-9]{6}.[a-z0-9]{16} (kjoin token create makes one)")
		return nil
	}
	return &tk
}

func (v *validator) checkDiscoveryFile(f value[string]) {
	loc := f.V
	switch {
	case strings.HasPrefix(loc, "https://"):
		return
	case strings.Contains(loc, "://") && !strings.HasPrefix(loc, "file://"):
		v.bad(f.From, loc, "a local kubeconfig path or an https:// URL")
		return
	}
	st, err := os.Stat(strings.TrimPrefix(loc, "file://"))
	if err != nil || !st.Mode().IsRegular() {
		v.bad(f.From, loc, "an existing kubeconfig file")
	}
}

func (v *validator) checkPatches(p value[string], controlPlane bool) {
	st, err := os.Stat(p.V)
	if err != nil || !st.IsDir() {
		v.bad(p.From, p.V, "an existing directory of patch files")
		return
	}
	set, err := patches.Load(p.V)
	if err != nil {
		v.bad(p.From, p.V, "a directory of <target>[suffix][+strategic|merge|json].yaml files ("+err.Error()+")")
		return
	}
	for _, name := range set.Ignored {
		v.warn(fmt.Sprintf("patch %s is for kubeadm init/upgrade; a join does not use it", name))
	}
	if !controlPlane {
		for _, t := range patches.StaticPodTargets {
			for _, f := range set.For(t) {
				v.warn(fmt.Sprintf("patch %s targets a control-plane static pod; a worker join does not use it", f.Name))
			}
		}
	}
}

// kubeletArgName is the shape of a kubelet flag name in kubeletExtraArgs (given without "--").
var kubeletArgName = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

// redactToken shows a token's id, never its secret.
func redactToken(s string) string {
	if id, _, ok := strings.Cut(s, "."); ok && len(id) <= 8 {
		return id + ".<hidden>"
	}
	return fmt.Sprintf("<hidden, %d characters>", len(s))
}

// validator collects every problem before reporting.
type validator struct {
	problems []string
	warnings []string
	// standard input, read once for every secret given as '-'
	stdinRead  bool
	stdinLines []string
	stdinErr   error
}

// bad records an invalid input. The value is echoed quoted, with anything shaped like a
// token or a certificate key hidden (a secret given in the wrong place stays secret).
func (v *validator) bad(from, value, want string) {
	if value == "" {
		v.problems = append(v.problems, fmt.Sprintf("%s: missing; want %s", from, want))
		return
	}
	v.problems = append(v.problems, token.Redact(fmt.Sprintf("%s %q: want %s", from, value, want)))
}

func (v *validator) warn(s string) { v.warnings = append(v.warnings, token.Redact(s)) }

func (v *validator) err() error {
	if len(v.problems) == 0 {
		return nil
	}
	return operr.Invalid("kjoin join", v.problems...)
}

// configHoldsSecrets reports whether a JoinConfiguration carries a bootstrap token or a
// certificate key (a --config with neither may be world-readable).
func configHoldsSecrets(jc *JoinConfiguration) bool {
	if jc.Discovery.TLSBootstrapToken != "" {
		return true
	}
	if bt := jc.Discovery.BootstrapToken; bt != nil && bt.Token != "" {
		return true
	}
	return jc.ControlPlane != nil && jc.ControlPlane.CertificateKey != ""
}
