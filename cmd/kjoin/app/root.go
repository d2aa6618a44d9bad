// Package app is kjoin's command line: thin cobra commands that turn flags into options and
// call the phase runner, plus the one renderer that prints errors and maps them to exit codes.
package app

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"kjoin.dev/kjoin/cri"
	"kjoin.dev/kjoin/etcd"
	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/joinconfig"
	"kjoin.dev/kjoin/operr"
	"kjoin.dev/kjoin/output"
)

// Streams are the process's standard streams.
type Streams struct {
	In       io.Reader
	Out, Err io.Writer
}

// Deps are the command line's dependencies, injected so tests can run commands in-process.
type Deps struct {
	Streams
	// Getenv reads environment variables (KJOIN_TOKEN).
	Getenv func(string) string
	// NewEnv builds the phases' environment for a host root.
	NewEnv func(root string, verbosity int) *host.Env
	// InIsTerminal reports whether In is a terminal (reset then asks for confirmation).
	InIsTerminal func() bool
	// ErrIsTerminal reports whether Err is a terminal (waits then show as a live line).
	ErrIsTerminal func() bool
	// ErrWidth is the width of Err's terminal in columns (0: unknown).
	ErrWidth func() int
}

// Main runs kjoin with the process's arguments and returns the exit code.
func Main() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	deps := &Deps{
		Streams:       Streams{In: os.Stdin, Out: os.Stdout, Err: os.Stderr},
		Getenv:        takeSecretEnv(),
		NewEnv:        func(root string, v int) *host.Env { return HostEnv(root, v, os.Stderr) },
		InIsTerminal:  func() bool { return term.IsTerminal(int(os.Stdin.Fd())) },
		ErrIsTerminal: func() bool { return term.IsTerminal(int(os.Stderr.Fd())) },
		ErrWidth: func() int {
			w, _, err := term.GetSize(int(os.Stderr.Fd()))
			if err != nil {
				return 0
			}
			return w
		},
	}
	return Run(ctx, deps, os.Args[1:])
}

// takeSecretEnv removes the secret variables from the process environment, so no child
// process (systemctl, the kubelet it starts) inherits them, and returns a Getenv that still
// answers for them.
func takeSecretEnv() func(string) string {
	secrets := map[string]string{}
	for _, k := range []string{joinconfig.TokenEnv, joinconfig.CertificateKeyEnv} {
		if v, ok := os.LookupEnv(k); ok {
			secrets[k] = v
			_ = os.Unsetenv(k)
		}
	}
	return func(k string) string {
		if v, ok := secrets[k]; ok {
			return v
		}
		return os.Getenv(k)
	}
}

// Run runs kjoin with args and returns the exit code. Errors are rendered once, here.
func Run(ctx context.Context, deps *Deps, args []string) int {
	g := newGlobals()
	root := newRootCmd(deps, g)
	root.SetArgs(args)
	root.SetIn(deps.In)
	root.SetOut(deps.Out)
	root.SetErr(deps.Err)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	return int(reportFailure(deps, g, args, err))
}

// NewRootCmd builds the command tree.
func NewRootCmd(deps *Deps) *cobra.Command { return newRootCmd(deps, newGlobals()) }

func newRootCmd(deps *Deps, g *Globals) *cobra.Command {
	root := &cobra.Command{
		Use:           "kjoin",
		Short:         "Join nodes to a kubeadm cluster: fast, re-runnable, machine-readable",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return g.complete(cmd, deps)
		},
	}
	g.AddFlags(root.PersistentFlags())
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return operr.Invalid(cmd.CommandPath(), err.Error())
	})
	root.AddCommand(NewCmdJoin(deps, g, nil), NewCmdToken(deps, g), NewCmdUploadCerts(deps, g), NewCmdCerts(deps, g), NewCmdReset(deps, g), NewCmdLeave(deps, g), NewCmdEndpoint(deps, g), NewCmdApprover(deps, g),
		NewCmdVerify(deps, g), NewCmdDiagnose(deps, g), NewCmdNodes(deps, g), NewCmdVersion(deps, g), NewCmdConfig(deps, g),
		&cobra.Command{Use: "exit-codes", Short: "What kjoin's exit codes mean (kjoin help exit-codes)",
			Long: "kjoin exits with one of these codes (the same in --output json's error.code):\n\n" + operr.TextTable()})
	refuseUnknownSubcommands(root)
	usageArgs(root)
	completeFlag(root, "output", g.Output.Formats()...)
	return root
}

// usageArgs makes every command's argument check a usage error (exit 2) with the command's
// usage line, where cobra's own is a plain error (exit 1). An argument that a bare
// optional-value flag just before it would have taken as its value (join --wait kubelet,
// verify --wait 5s) is named, with the '=' form: pflag gives such a flag its default and
// leaves the word as an argument.
func usageArgs(c *cobra.Command) {
	check := c.Args
	if check == nil && !c.HasSubCommands() {
		check = cobra.ArbitraryArgs // cobra's own default for a command without subcommands
	}
	if check != nil {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := bareFlagValue(cmd, args); err != nil {
				return err
			}
			if err := check(cmd, args); err != nil {
				return operr.Invalid(cmd.CommandPath(), err.Error()+" (usage: "+cmd.UseLine()+")")
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		usageArgs(sub)
	}
}

// optionalValues are the words each optional-value flag takes as its value, by flag name
// (nil: any word its own type accepts).
var optionalValues = map[string][]string{"wait": {"ready", "kubelet", "none", "true", "false"}}

// bareFlagValue refuses an argument that is a value of an optional-value flag given bare.
func bareFlagValue(cmd *cobra.Command, args []string) error {
	var err error
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if err != nil || f.NoOptDefVal == "" || f.Value.String() != normalizedDefault(f) {
			return
		}
		for _, a := range args {
			if !looksLikeValue(f, a) {
				continue
			}
			err = operr.Invalid(cmd.CommandPath(), fmt.Sprintf("%q after --%s is an argument of %s, not the flag's value: a bare --%s means --%s=%s; give the value with '=': --%s=%s",
				a, f.Name, cmd.CommandPath(), f.Name, f.Name, f.NoOptDefVal, f.Name, a))
			return
		}
	})
	return err
}

// normalizedDefault is the flag's value when it was given bare, as its Value prints it.
func normalizedDefault(f *pflag.Flag) string {
	if d, err := time.ParseDuration(f.NoOptDefVal); err == nil && f.Value.Type() == "duration" {
		return d.String()
	}
	return f.NoOptDefVal
}

// looksLikeValue reports whether word is a value flag f would accept.
func looksLikeValue(f *pflag.Flag, word string) bool {
	if vs, ok := optionalValues[f.Name]; ok && f.Value.Type() == "string" {
		return slices.Contains(vs, word)
	}
	if f.Value.Type() == "duration" {
		_, err := time.ParseDuration(word)
		return err == nil
	}
	return false
}

// refuseUnknownSubcommands makes every command that only groups others (kjoin, token,
// certs, join phase) refuse an unknown subcommand with exit 2 and cobra's suggestions, where
// cobra would print the group's help and exit 0 (a typo in a script would pass silently).
func refuseUnknownSubcommands(c *cobra.Command) {
	if c.HasSubCommands() && c.Run == nil && c.RunE == nil {
		c.Args = cobra.ArbitraryArgs
		c.RunE = func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cmd.Help()
			}
			return unknownCommand(cmd, args[0])
		}
	}
	for _, sub := range c.Commands() {
		refuseUnknownSubcommands(sub)
	}
}

func unknownCommand(cmd *cobra.Command, name string) error {
	hint := "see " + cmd.CommandPath() + " --help"
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2 // cobra's own default for the root
	}
	if s := cmd.SuggestionsFor(name); len(s) > 0 {
		for i := range s {
			s[i] = cmd.CommandPath() + " " + s[i]
		}
		hint = "did you mean " + strings.Join(s, " or ") + "?"
	}
	return operr.Newf(operr.Usage, "unknown command %q for %q", name, cmd.CommandPath()).WithHint(hint)
}

// Build stamps, set with -ldflags "-X kjoin.dev/kjoin/cmd/kjoin/app.Version=..." by make dist;
// an unstamped build says "dev".
var (
	Version   = "dev"
	Commit    = ""
	BuildDate = ""
)

// NewCmdVersion builds kjoin version.
func NewCmdVersion(deps *Deps, g *Globals) *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Example: `  kjoin version -o json`,
		Short:   "Print the kjoin version, commit, build date, Go version and platform",
		Args:    cobra.NoArgs,
		RunE:    func(*cobra.Command, []string) error { return runVersion(deps, g) },
	}
}

func runVersion(deps *Deps, g *Globals) error {
	v := &output.Version{Version: Version, Commit: Commit, BuildDate: BuildDate, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if !g.Output.Text() {
		return printResult(deps, g, v, nil)
	}
	_, err := fmt.Fprintf(deps.Out, "kjoin %s (commit %s, built %s, %s, %s)\n", v.Version, dash(v.Commit), dash(v.BuildDate), v.GoVersion, v.Platform)
	return err
}

// HostEnv is the real environment: the host's files under root, systemctl, real clients.
func HostEnv(root string, verbosity int, progress io.Writer) *host.Env {
	return &host.Env{
		Paths:     host.Paths{Root: root},
		Out:       progress,
		Verbosity: verbosity,
		Clock:     clock.RealClock{},
		Exec:      host.ExecRunner{},
		NewClient: func(c *rest.Config) (kubernetes.Interface, error) {
			if c.QPS == 0 {
				c.QPS, c.Burst = 50, 100
			}
			return kubernetes.NewForConfig(c)
		},
		DialEtcd: etcd.Dial,
		HTTPClient: func(roots *x509.CertPool) *http.Client {
			cfg := &tls.Config{RootCAs: roots}
			if roots == nil {
				cfg = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // localhost health probes of self-signed components
			}
			return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg}}
		},
		Hostname:  os.Hostname,
		Geteuid:   os.Geteuid,
		Processes: host.ProcProcesses,
		EtcdPeer:  etcd.DialPeer,
		PeerCertificates: func(ctx context.Context, addr string) ([]*x509.Certificate, error) {
			d := tls.Dialer{Config: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // the chain is read here and verified by the caller
			conn, err := d.DialContext(ctx, "tcp", addr)
			if err != nil {
				return nil, err
			}
			defer conn.Close()
			return conn.(*tls.Conn).ConnectionState().PeerCertificates, nil
		},
		Environ: os.Environ,
		Signal:  syscall.Kill,
		PortInUse: func(port int) bool {
			l, err := net.Listen("tcp", fmt.Sprintf(":%d", port))
			if err != nil {
				return errors.Is(err, syscall.EADDRINUSE)
			}
			l.Close()
			return false
		},
		LocalAddressFor: func(endpoint string) (string, error) {
			c, err := net.Dial("udp", endpoint) // no packet is sent
			if err != nil {
				return "", err
			}
			defer c.Close()
			return c.LocalAddr().(*net.UDPAddr).IP.String(), nil
		},
		DescribeRuntime: func(ctx context.Context, endpoint string) (cri.Info, error) {
			c, err := cri.Dial(root, endpoint)
			if err != nil {
				return cri.Info{}, err
			}
			defer c.Close()
			return c.Describe(ctx)
		},
		Sandboxes: func(endpoint string) (cri.Sandboxes, error) { return cri.Dial(root, endpoint) },
		SocketReachable: func(path string) bool {
			c, err := net.DialTimeout("unix", path, 2*time.Second)
			if err != nil {
				return false
			}
			c.Close()
			return true
		},
	}
}
