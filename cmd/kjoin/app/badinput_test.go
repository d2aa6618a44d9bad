package app

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"kjoin.dev/kjoin/output"
)

// Every bad flag value, unknown flag, bad argument count and bad -o of every command is
// reported in one shape before anything is read or touched: exit 2, "invalid input: ..." (or
// "N invalid inputs:" with each on its own line), and the hint naming the command's help;
// with -o json the same error is the JSON answer's.
func TestBadInputHasOneShape(t *testing.T) {
	for _, tc := range []struct {
		args     string
		command  string
		problems int
	}{
		{"join --apiserver-bind-port abc", "kjoin join", 1},
		{"join --nope", "kjoin join", 1},
		{"join 10.0.0.1:6443 --token bad --discovery-token-unsafe-skip-ca-verification --apiserver-bind-port 99999 --control-plane", "kjoin join", 2},
		{"join --wait kubelet", "kjoin join", 1},
		{"token create --ttl 1x --usages nope --format x", "kjoin token create", 3},
		{"token create --node w1 --groups system:bootstrappers:x", "kjoin token create", 1},
		{"token delete abc.x zz", "kjoin token delete", 2},
		{"token list --sort-by .nope", "kjoin token list", 1},
		{"reset --skip-phases nope", "kjoin reset", 1},
		{"reset extra", "kjoin reset", 1},
		{"leave --drain-timeout -5s --grace-period -3 --skip-phases x", "kjoin leave", 3},
		{"verify --timeout 0s --wait=-1s", "kjoin verify", 2},
		{"verify -o yaml2", "kjoin verify", 1},
		{"nodes -l ,, --sort-by .nope", "kjoin nodes", 2},
		{"upload-certs --certificate-key 123", "kjoin upload-certs", 1},
		{"config print join-defaults -o json", "kjoin config print join-defaults", 1},
		{"diagnose -v -1", "kjoin diagnose", 1},
	} {
		t.Run(tc.args, func(t *testing.T) {
			root := t.TempDir()
			deps, out, errb := testDeps("", nil)
			code := Run(context.Background(), deps, append(strings.Fields(tc.args), "--root", root))
			msg := errb.String()
			if out.Len() > 0 { // -o json: the same error, as JSON on standard output
				var answer output.ErrorResult
				if err := json.Unmarshal(out.Bytes(), &answer); err != nil {
					t.Fatalf("%v\n%s", err, out)
				}
				msg = "error: " + answer.Error.Message + "\nhint: " + answer.Error.Hint + "\n"
			}
			if code != 2 {
				t.Fatalf("exit %d, want 2\n%s%s", code, out, msg)
			}
			shape := regexp.MustCompile(`^error: (invalid input: .+|(\d+) invalid inputs:\n(\t.+\n)+)`)
			m := shape.FindStringSubmatch(msg)
			if m == nil {
				t.Fatalf("not kjoin's shape for bad input:\n%s", msg)
			}
			named := 1
			if m[2] != "" {
				named, _ = strconv.Atoi(m[2])
				if lines := strings.Count(m[0], "\n\t"); lines != named {
					t.Errorf("says %d invalid inputs, lists %d:\n%s", named, lines, msg)
				}
			}
			if named != tc.problems {
				t.Errorf("want %d problems named, have %d:\n%s", tc.problems, named, msg)
			}
			if want := "hint: fix the values above (" + tc.command + " --help); nothing on this host was touched"; !strings.Contains(msg, want) {
				t.Errorf("lacks %q:\n%s", want, msg)
			}
			if ents, _ := os.ReadDir(root); len(ents) != 0 {
				t.Errorf("the host root holds %d entries after refused input", len(ents))
			}
		})
	}
}
