package app

import "github.com/spf13/cobra"

// examples are the Examples sections of the commands that do not set their own, by command
// path (a unit test requires one on every runnable command).
var examples = map[string]string{
	"kjoin join": `  # a worker; the token on stdin, never on the command line
  printf '%s\n' "$TOKEN" | kjoin join control-plane.example:6443 --token-file - \
      --discovery-token-ca-cert-hash sha256:<hash>
  # a control plane: the token, then the certificate key, on stdin
  printf '%s\n%s\n' "$TOKEN" "$CERT_KEY" | kjoin join control-plane.example:6443 --token-file - \
      --discovery-token-ca-cert-hash sha256:<hash> --control-plane --certificate-key-file - \
      --apiserver-advertise-address 10.0.0.12
  # an IPv6 endpoint goes in brackets; -o json for automation
  kjoin join '[fd00::11]:6443' --token-file /root/token --discovery-token-ca-cert-hash sha256:<hash> -o json
  # what would be written, without writing it
  kjoin join control-plane.example:6443 --token-file /root/token --discovery-token-ca-cert-hash sha256:<hash> --dry-run`,
	"kjoin verify": `  kjoin verify                 # every node and the etcd cluster
  kjoin verify w1 cp2 -o json  # just these nodes, for automation`,
	"kjoin diagnose": `  kjoin diagnose               # on the node that is NotReady
  kjoin diagnose -o json`,
	"kjoin nodes": `  kjoin nodes
  kjoin nodes -o wide -l node-role.kubernetes.io/control-plane
  kjoin nodes w1 -o jsonpath='{.items[0].kubeletVersion}'`,
	"kjoin token create": `  kjoin token create --print-join-command                  # a worker join command
  kjoin token create --print-join-command --control-plane  # uploads the certificates too
  kjoin token create --ttl 1h --description "rack 7"
  kjoin token create --node w7 --print-join-string          # joins w7 once (kjoin approver approves it)`,
	"kjoin approver": `  kjoin approver                               # on a control plane, until stopped
  systemd-run --unit kjoin-approver kjoin approver   # as a transient service`,
	"kjoin token list": `  kjoin token list -o wide
  kjoin token list -o jsonpath='{range .items[*]}{.id}{"\n"}{end}'`,
	"kjoin token delete":   `  kjoin token delete abcdef`,
	"kjoin token generate": `  kjoin token create "$(kjoin token generate)" --ttl 2h`,
	"kjoin upload-certs": `  kjoin upload-certs                       # prints the new certificate key
  kjoin upload-certs --certificate-key "$(kjoin certs certificate-key)"`,
	"kjoin certs certificate-key": `  kjoin upload-certs --certificate-key "$(kjoin certs certificate-key)"`,
	"kjoin version":               `  kjoin version -o json`,
	"kjoin config print join-defaults": `  kjoin config print join-defaults > join.yaml   # edit, then:
  kjoin join --config join.yaml`,
}

// addExamples sets the Examples sections from examples where a command has none; each
// join phase gets its own command line.
func addExamples(c *cobra.Command) {
	if c.Example == "" {
		c.Example = examples[c.CommandPath()]
	}
	if c.Example == "" && c.HasParent() && c.Parent().CommandPath() == "kjoin join phase" {
		c.Example = "  kjoin join phase " + c.Name() + " control-plane.example:6443 --token-file /root/token --discovery-token-ca-cert-hash sha256:<hash>"
	}
	for _, sub := range c.Commands() {
		addExamples(sub)
	}
}
