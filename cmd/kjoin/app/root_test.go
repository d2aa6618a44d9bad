package app

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/klog/v2"

	"kjoin.dev/kjoin/operr"
)

// KJOIN_TOKEN and KJOIN_CERTIFICATE_KEY must not reach child processes.
func TestSecretEnvIsNotInherited(t *testing.T) {
	t.Setenv("KJOIN_TOKEN", "abcdef.0123456789abcdef")
	t.Setenv("KJOIN_CERTIFICATE_KEY", "k3y")
	getenv := takeSecretEnv()
	if getenv("KJOIN_TOKEN") != "abcdef.0123456789abcdef" || getenv("KJOIN_CERTIFICATE_KEY") != "k3y" {
		t.Fatal("the secrets are no longer readable by kjoin itself")
	}
	out, err := exec.Command("env").Output()
	if err != nil {
		t.Skip("no env program:", err)
	}
	if strings.Contains(string(out), "KJOIN_TOKEN") || strings.Contains(string(out), "KJOIN_CERTIFICATE_KEY") {
		t.Errorf("a child process inherited a secret variable:\n%s", out)
	}
	if _, ok := os.LookupEnv("KJOIN_TOKEN"); ok {
		t.Error("KJOIN_TOKEN is still in the environment")
	}
}

func TestVersionJSON(t *testing.T) {
	deps, out, _ := testDeps("", nil)
	if code := Run(t.Context(), deps, []string{"version", "-o", "json"}); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{`"version": "dev"`, `"goVersion": "go`, `"platform": "linux/`} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("version output lacks %s:\n%s", want, out)
		}
	}
}

// A release build (no kjoin_fault tag, as this test binary) has no fault hook, whatever the
// environment says.
func TestReleaseBuildHasNoFaultHook(t *testing.T) {
	env := map[string]string{"KJOIN_FAULT_KILL_AFTER": "preflight", "KJOIN_FAULT_PAUSE_AT": "tls-bootstrap/csr-created", "KJOIN_FAULT_MARK": "/tmp/x"}
	after, at := faultHook(func(k string) string { return env[k] })
	if after != nil || at != nil {
		t.Error("the fault hooks are compiled into a build without the kjoin_fault tag")
	}
}

// The release build's dependency floors: grpc and the etcd client past their advisories, and
// a toolchain line so no release is built with a Go lacking the crypto/x509 and tls fixes.
func TestDependencyFloors(t *testing.T) {
	b, err := os.ReadFile("../../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	mod := string(b)
	floors := map[string]string{
		"google.golang.org/grpc":        "1.82.1", // GO-2026-6061
		"go.etcd.io/etcd/client/v3":     "3.7.1",  // GO-2026-6107
		"go.etcd.io/etcd/api/v3":        "3.7.1",
		"go.etcd.io/etcd/client/pkg/v3": "3.7.1",
	}
	for m, floor := range floors {
		re := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(m) + `\s+v(\S+)`)
		got := re.FindStringSubmatch(mod)
		if got == nil {
			t.Errorf("go.mod does not require %s", m)
			continue
		}
		if v := version.MustParseSemantic(got[1]); v.LessThan(version.MustParseSemantic(floor)) {
			t.Errorf("%s %s is below the floor %s", m, got[1], floor)
		}
	}
	tc := regexp.MustCompile(`(?m)^toolchain go(\S+)`).FindStringSubmatch(mod)
	if tc == nil || version.MustParseGeneric(tc[1]).LessThan(version.MustParseGeneric("1.26.8")) {
		t.Errorf("go.mod toolchain line %v: want go1.26.8 or newer", tc)
	}
}

// Busy and timeout errors are retryable in JSON whatever the error says; others only when
// marked.
func TestErrorJSONRetryable(t *testing.T) {
	for code, want := range map[operr.Code]bool{operr.Busy: true, operr.Timeout: true, operr.Trust: false, operr.Usage: false, operr.Other: false} {
		if got := NewErrorJSON(operr.New(code, "x", "")).Retryable; got != want {
			t.Errorf("code %d: retryable %v, want %v", code, got, want)
		}
	}
	if !NewErrorJSON(&operr.Error{Code: operr.Other, What: "interrupted", Retryable: true}).Retryable {
		t.Error("an error marked retryable is not")
	}
}

// A typo in a command or subcommand is a usage error (exit 2) naming the nearest command, at
// every level (kjoin, kjoin token, kjoin join phase), where cobra printed help and exited 0; a
// group without arguments still prints its help.
func TestUnknownSubcommandsExit2(t *testing.T) {
	for args, want := range map[string]string{
		"joni":                "did you mean kjoin join?",
		"tokn":                "did you mean kjoin join or kjoin token?",
		"token lsit":          "did you mean kjoin token list?",
		"join phase discovry": "did you mean kjoin join phase discovery?",
		"certs frob":          `unknown command "frob" for "kjoin certs"`,
	} {
		deps, _, errb := testDeps("", nil)
		if code := Run(context.Background(), deps, strings.Fields(args)); code != 2 || !strings.Contains(errb.String(), want) {
			t.Errorf("kjoin %s: exit %d, %q (want exit 2 and %q)", args, code, errb, want)
		}
	}
	deps, out, _ := testDeps("", nil)
	if code := Run(context.Background(), deps, []string{"token"}); code != 0 || !strings.Contains(out.String(), "Available Commands") {
		t.Errorf("kjoin token: exit %d\n%s", code, out)
	}
}

// kjoin help exit-codes prints every exit code with its meaning (operr's, the README's).
func TestHelpExitCodes(t *testing.T) {
	deps, out, _ := testDeps("", nil)
	if code := Run(context.Background(), deps, []string{"help", "exit-codes"}); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, c := range operr.Codes {
		if !strings.Contains(out.String(), fmt.Sprintf("  %d  %-9s  ", c, c.Reason())) {
			t.Errorf("no line for exit code %d:\n%s", c, out)
		}
	}
}

// Every runnable command's help has an Examples section (cobra's own completion and help
// commands aside).
func TestEveryCommandHasExamples(t *testing.T) {
	deps, _, _ := testDeps("", nil)
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		switch c.Name() {
		case "completion", "help":
			return
		}
		groups := map[string]bool{"kjoin": true, "kjoin token": true, "kjoin certs": true, "kjoin join phase": true, "kjoin config": true, "kjoin config print": true}
		if c.Runnable() && !groups[c.CommandPath()] && c.Example == "" {
			t.Errorf("%s has no Examples section", c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(NewRootCmd(deps))
}

// -v 6 and up route client-go's klog to stderr at level 6, never higher (level 7 prints
// request headers, 8 request bodies: secrets); below 6 klog stays quiet.
func TestVerbosityCapsKlog(t *testing.T) {
	defer func() {
		fs := flag.NewFlagSet("reset", flag.ContinueOnError)
		klog.InitFlags(fs)
		_ = fs.Set("v", "0")
	}()
	for _, c := range []struct {
		v          string
		six, seven bool
	}{{"1", false, false}, {"6", true, false}, {"9", true, false}} {
		fs := flag.NewFlagSet("reset", flag.ContinueOnError)
		klog.InitFlags(fs)
		_ = fs.Set("v", "0")
		deps, _, _ := testDeps("", nil)
		if code := Run(t.Context(), deps, []string{"version", "-v", c.v}); code != 0 {
			t.Fatalf("-v %s: exit %d", c.v, code)
		}
		if got6, got7 := bool(klog.V(6).Enabled()), bool(klog.V(7).Enabled()); got6 != c.six || got7 != c.seven {
			t.Errorf("-v %s: klog level 6 %v, 7 %v; want %v, %v", c.v, got6, got7, c.six, c.seven)
		}
	}
}
