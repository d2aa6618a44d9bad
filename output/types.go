// Package output is kjoin's machine-readable answers: one versioned object per command
// (apiVersion output.kjoin.dev/v1alpha1), with the same names and types for the same facts
// everywhere, and the -o printers (json, yaml, jsonpath, go-template) built on cli-runtime's
// print flags.
package output

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the API version of every object kjoin prints.
var GroupVersion = schema.GroupVersion{Group: "output.kjoin.dev", Version: "v1alpha1"}

// TypeMeta is apiVersion and kind, in that order (as kubectl prints them).
type TypeMeta struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

// GetObjectKind makes every answer a runtime.Object for cli-runtime's printers.
func (t *TypeMeta) GetObjectKind() schema.ObjectKind { return t }

// SetGroupVersionKind sets apiVersion and kind.
func (t *TypeMeta) SetGroupVersionKind(gvk schema.GroupVersionKind) {
	t.APIVersion, t.Kind = gvk.ToAPIVersionAndKind()
}

// GroupVersionKind reads apiVersion and kind.
func (t *TypeMeta) GroupVersionKind() schema.GroupVersionKind {
	return schema.FromAPIVersionAndKind(t.APIVersion, t.Kind)
}

// Object is one machine-readable answer.
type Object interface {
	runtime.Object
	kind() string
}

// Stamp sets obj's apiVersion and kind.
func Stamp(obj Object) Object {
	obj.GetObjectKind().SetGroupVersionKind(GroupVersion.WithKind(obj.kind()))
	return obj
}

// Duration is a duration in seconds beside a human string ("1.234s").
type Duration struct {
	Seconds float64 `json:"seconds"`
	String  string  `json:"string"`
}

// NewDuration rounds d to the millisecond.
func NewDuration(d time.Duration) *Duration {
	d = d.Round(time.Millisecond)
	return &Duration{Seconds: float64(d.Milliseconds()) / 1000, String: d.String()}
}

// FileMode is a file mode as an octal string ("0600").
type FileMode string

// NewFileMode formats the permission bits of m.
func NewFileMode(m os.FileMode) FileMode { return FileMode(fmt.Sprintf("%04o", m.Perm())) }

// Error is why a command failed: its exit code and reason, the message, whether running the
// same command again may succeed, and what to do next.
type Error struct {
	Code      int    `json:"code"`
	Reason    string `json:"reason"`
	Message   string `json:"message"`
	Retryable bool   `json:"retryable"`
	Hint      string `json:"hint,omitempty"`
}

// ErrorResult is what a command prints in JSON or YAML mode when it fails before it has a
// result of its own (a bad flag, an unreadable kubeconfig).
type ErrorResult struct {
	TypeMeta `json:",inline"`
	Error    Error `json:"error"`
}

// Phase is what one phase of a workflow did.
type Phase struct {
	Name     string    `json:"name"`
	Status   string    `json:"status"` // ran | skipped | unchanged | failed
	Reason   string    `json:"reason,omitempty"`
	Duration *Duration `json:"duration"`
}

// File is a file a join would write (--dry-run).
type File struct {
	Path string   `json:"path"`
	Mode FileMode `json:"mode"`
}

// Runtime is the node's container runtime as the CRI API describes it.
type Runtime struct {
	Name             string `json:"name"`
	Version          string `json:"version"`
	SandboxImage     string `json:"sandboxImage,omitempty"`
	SandboxImageFrom string `json:"sandboxImageFrom,omitempty"`
	RuntimeConfig    bool   `json:"runtimeConfig"`
	CgroupDriver     string `json:"cgroupDriver,omitempty"`
}

// JoinResult is kjoin join's answer.
type JoinResult struct {
	TypeMeta `json:",inline"`
	Changed  bool   `json:"changed"`
	Node     string `json:"node,omitempty"`
	Role     string `json:"role"`
	// Endpoint is the endpoint that served the join (the first given, unless it was down).
	Endpoint string `json:"endpoint,omitempty"`
	// EndpointsTried are the given endpoints read when several were given, each with its last
	// failure (none for the one that served).
	EndpointsTried []EndpointAttempt `json:"endpointsTried,omitempty"`
	// KubeletServer is the API server kubelet.conf names.
	KubeletServer string   `json:"kubeletServer,omitempty"`
	CACertHashes  []string `json:"caCertHashes"`
	// CAVerification is how the cluster CA came to be trusted: "pinned" (a
	// --discovery-token-ca-cert-hash matched), "discovery-file" (given in the file) or
	// "not verified" (--discovery-token-unsafe-skip-ca-verification); absent before discovery.
	CAVerification    string    `json:"caVerification,omitempty"`
	ClusterVersion    string    `json:"clusterVersion,omitempty"`
	KubeletVersion    string    `json:"kubeletVersion,omitempty"`
	Runtime           *Runtime  `json:"runtime,omitempty"`
	ClientCertificate string    `json:"clientCertificate,omitempty"`
	CSR               string    `json:"csr,omitempty"`
	RegisteredAfter   *Duration `json:"registeredAfter,omitempty"`
	ReadyAfter        *Duration `json:"readyAfter,omitempty"`
	Ready             bool      `json:"ready"`
	// Lease is the kubelet's first Lease: found or pending (not waited for).
	Lease string `json:"lease,omitempty"`
	// Repairs are what the join removed or renewed of a node's earlier life: a former
	// machine's Node or etcd member, dead learners, an expired client certificate.
	Repairs        []Repair `json:"repairs,omitempty"`
	DryRun         bool     `json:"dryRun"`
	PlannedWrites  []File   `json:"plannedWrites"`
	PlannedActions []string `json:"plannedActions"`
	Phases         []Phase  `json:"phases"`
	Warnings       []string `json:"warnings"`
	Error          *Error   `json:"error,omitempty"`
}

// EndpointAttempt is one given API server endpoint's part in a join's discovery.
type EndpointAttempt struct {
	Endpoint string `json:"endpoint"`
	Error    string `json:"error,omitempty"`
}

// Repair is one thing a join removed or renewed (or, in a dry run, would).
type Repair struct {
	// Kind: node, lease, etcd-member, etcd-learner or client-certificate.
	Kind string `json:"kind"`
	Name string `json:"name"`
	// ID is the object's identity: a Node's UID, an etcd member ID (hex), a certificate serial.
	ID     string `json:"id,omitempty"`
	Action string `json:"action"`
	Detail string `json:"detail,omitempty"`
}

// ResetResult is kjoin reset's answer.
type ResetResult struct {
	TypeMeta          `json:",inline"`
	Changed           bool   `json:"changed"`
	Node              string `json:"node,omitempty"`
	Role              string `json:"role"`
	EtcdMemberRemoved string `json:"etcdMemberRemoved,omitempty"`
	NodeDeleted       bool   `json:"nodeDeleted"`
	KubeletStopped    bool   `json:"kubeletStopped"`
	// KubeletDisabled: the kubelet unit was disabled (the join had enabled it).
	KubeletDisabled bool `json:"kubeletDisabled"`
	// ApproverStopped: kjoin-approver.service was running and was stopped.
	ApproverStopped bool     `json:"approverStopped,omitempty"`
	RemovedFiles    []string `json:"removedFiles"`
	// RemovedPods are the pods removed from the container runtime (namespace/name).
	RemovedPods []string `json:"removedPods"`
	// DryRun: nothing was changed; PlannedActions is what the reset would do, in order.
	DryRun         bool     `json:"dryRun"`
	PlannedActions []string `json:"plannedActions"`
	Phases         []Phase  `json:"phases"`
	Warnings       []string `json:"warnings"`
	Error          *Error   `json:"error,omitempty"`
}

// EndpointMoveResult is kjoin endpoint move's answer.
type EndpointMoveResult struct {
	TypeMeta `json:",inline"`
	Changed  bool   `json:"changed"`
	DryRun   bool   `json:"dryRun"`
	Node     string `json:"node,omitempty"`
	From     string `json:"from,omitempty"`
	To       string `json:"to"`
	// Identity is who the new endpoint authenticated this node as (system:node:NAME).
	Identity string `json:"identity,omitempty"`
	// Files are the kubeconfigs that named the old endpoint (rewritten, or in a dry run to
	// rewrite); Restarted what was restarted to read them.
	Files     []string `json:"files"`
	Restarted []string `json:"restarted"`
	// LeaseRenewed is the kubelet's first Lease renewal seen through the new endpoint.
	LeaseRenewed *time.Time `json:"leaseRenewed,omitempty"`
	// ClusterObjects are the cluster's records moved with --update-cluster.
	ClusterObjects []string `json:"clusterObjects"`
	RolledBack     bool     `json:"rolledBack"`
	PlannedActions []string `json:"plannedActions"`
	Warnings       []string `json:"warnings"`
	Error          *Error   `json:"error,omitempty"`
}

// LeaveResult is kjoin leave's answer: the reset's fields and what leave did in the cluster.
type LeaveResult struct {
	ResetResult `json:",inline"`
	// Credentials are whose credentials leave used: "admin (PATH)" or "node (PATH)".
	Credentials string `json:"credentials"`
	Cordoned    bool   `json:"cordoned"`
	// EvictedPods are the pods the drain evicted (or deleted), namespace/name.
	EvictedPods []string `json:"evictedPods"`
	// EvictionRefusals counts the evictions the API server refused for a while (a
	// PodDisruptionBudget's 429) and the drain retried: the budget held.
	EvictionRefusals int      `json:"evictionRefusals"`
	LeaseDeleted     bool     `json:"leaseDeleted"`
	DeletedCSRs      []string `json:"deletedCSRs"`
	// Left are the cluster objects leave could not delete, each with the command that does.
	Left []string `json:"left"`
}

// Check is one check of verify or diagnose.
type Check struct {
	ID       string `json:"id"`
	Node     string `json:"node,omitempty"`
	Status   string `json:"status"` // pass | warn | fail | skip
	Summary  string `json:"summary"`
	Evidence string `json:"evidence,omitempty"`
}

// VerifyReport is kjoin verify's answer.
type VerifyReport struct {
	TypeMeta `json:",inline"`
	Nodes    []string `json:"nodes"`
	Checks   []Check  `json:"checks"`
	// Verified is true when no check failed.
	Verified bool   `json:"verified"`
	Failed   int    `json:"failed"`
	Warned   int    `json:"warned"`
	Error    *Error `json:"error,omitempty"`
}

// Verdict is diagnose's conclusion.
type Verdict struct {
	Healthy bool   `json:"healthy"`
	Cause   string `json:"cause"`
	CheckID string `json:"checkId,omitempty"`
	Next    string `json:"next"`
}

// DiagnoseReport is kjoin diagnose's answer.
type DiagnoseReport struct {
	TypeMeta `json:",inline"`
	Node     string  `json:"node"`
	Checks   []Check `json:"checks"`
	Verdict  Verdict `json:"verdict"`
	Error    *Error  `json:"error,omitempty"`
}

// Node is one row of the node map.
type Node struct {
	Name string `json:"name"`
	// Role is control-plane or worker; Roles are the node-role.kubernetes.io/* labels.
	Role  string   `json:"role"`
	Roles []string `json:"roles"`
	Ready bool     `json:"ready"`
	// ReadyStatus is the Ready condition's status (True, False, Unknown).
	ReadyStatus      string    `json:"readyStatus"`
	LeaseAge         *Duration `json:"leaseAge,omitempty"`
	InternalIPs      []string  `json:"internalIPs"`
	Zone             string    `json:"zone,omitempty"`
	InstanceType     string    `json:"instanceType,omitempty"`
	KubeletVersion   string    `json:"kubeletVersion"`
	ContainerRuntime string    `json:"containerRuntime"`
	OSImage          string    `json:"osImage,omitempty"`
	KernelVersion    string    `json:"kernelVersion,omitempty"`
	JoinedAt         time.Time `json:"joinedAt"`
	// JoinedBy is the tool that joined the node as the Node shows it (kjoin, kubeadm; absent
	// when it does not tell).
	JoinedBy string   `json:"joinedBy,omitempty"`
	PodCIDR  string   `json:"podCIDR,omitempty"`
	Taints   []string `json:"taints"`
}

// NodeList is kjoin nodes' answer.
type NodeList struct {
	TypeMeta `json:",inline"`
	Items    []Node `json:"items"`
}

// Token is a bootstrap token.
type Token struct {
	Token   string     `json:"token"`
	ID      string     `json:"id"`
	Expires *time.Time `json:"expires,omitempty"`
	// Expired: past Expires (the API server no longer accepts it; the token cleaner deletes it soon).
	Expired     bool     `json:"expired,omitempty"`
	Usages      []string `json:"usages"`
	Groups      []string `json:"groups"`
	Description string   `json:"description,omitempty"`
	// Node and Role: a token bound to one node (kjoin token create --node); UsedBy the CSR
	// kjoin's approver approved with it (empty: unused).
	Node   string `json:"node,omitempty"`
	Role   string `json:"role,omitempty"`
	UsedBy string `json:"usedBy,omitempty"`
	// SingleUse: one join under any name (kjoin token create --uses 1), decided by kjoin's
	// approver like a bound token's.
	SingleUse bool `json:"singleUse,omitempty"`
}

// TokenList is kjoin token list's answer.
type TokenList struct {
	TypeMeta `json:",inline"`
	Items    []Token `json:"items"`
}

// TokenResult is kjoin token create's (without a join command) and token generate's answer.
type TokenResult struct {
	TypeMeta `json:",inline"`
	Token
	Warnings []string `json:"warnings"`
}

// TokenDeleteResult is kjoin token delete's answer: the IDs of the tokens deleted.
type TokenDeleteResult struct {
	TypeMeta `json:",inline"`
	Deleted  []string `json:"deleted"`
}

// JoinCommand is kjoin token create --print-join-command's answer.
type JoinCommand struct {
	TypeMeta              `json:",inline"`
	Token                 string     `json:"token"`
	Endpoint              string     `json:"endpoint"`
	CACertHashes          []string   `json:"caCertHashes"`
	CertificateKey        string     `json:"certificateKey,omitempty"`
	Expires               *time.Time `json:"expires,omitempty"`
	CertificateKeyExpires *time.Time `json:"certificateKeyExpires,omitempty"`
	Command               string     `json:"command"`
	// JoinString is the same join as one string (--print-join-string), for kjoin join
	// --join-string-file.
	JoinString string   `json:"joinString,omitempty"`
	Warnings   []string `json:"warnings"`
}

// CertificateKey is kjoin upload-certs' and certs certificate-key's answer.
type CertificateKey struct {
	TypeMeta       `json:",inline"`
	CertificateKey string     `json:"certificateKey"`
	Expires        *time.Time `json:"expires,omitempty"`
}

// Version is kjoin version's answer.
type Version struct {
	TypeMeta  `json:",inline"`
	Version   string `json:"version"`
	Commit    string `json:"commit,omitempty"`
	BuildDate string `json:"buildDate,omitempty"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

func (*ErrorResult) kind() string        { return "Error" }
func (*JoinResult) kind() string         { return "JoinResult" }
func (*ResetResult) kind() string        { return "ResetResult" }
func (*VerifyReport) kind() string       { return "VerifyReport" }
func (*DiagnoseReport) kind() string     { return "DiagnoseReport" }
func (*NodeList) kind() string           { return "NodeList" }
func (*TokenList) kind() string          { return "TokenList" }
func (*TokenResult) kind() string        { return "Token" }
func (*TokenDeleteResult) kind() string  { return "TokenDeleteResult" }
func (*JoinCommand) kind() string        { return "JoinCommand" }
func (*CertificateKey) kind() string     { return "CertificateKey" }
func (*Version) kind() string            { return "Version" }
func (*LeaveResult) kind() string        { return "LeaveResult" }
func (*EndpointMoveResult) kind() string { return "EndpointMoveResult" }

// DeepCopyObject makes these runtime.Objects (cli-runtime's printers copy what they print).
func (o *ErrorResult) DeepCopyObject() runtime.Object        { return deepCopy(o) }
func (o *JoinResult) DeepCopyObject() runtime.Object         { return deepCopy(o) }
func (o *ResetResult) DeepCopyObject() runtime.Object        { return deepCopy(o) }
func (o *EndpointMoveResult) DeepCopyObject() runtime.Object { return deepCopy(o) }
func (o *VerifyReport) DeepCopyObject() runtime.Object       { return deepCopy(o) }
func (o *DiagnoseReport) DeepCopyObject() runtime.Object     { return deepCopy(o) }
func (o *NodeList) DeepCopyObject() runtime.Object           { return deepCopy(o) }
func (o *TokenList) DeepCopyObject() runtime.Object          { return deepCopy(o) }
func (o *TokenResult) DeepCopyObject() runtime.Object        { return deepCopy(o) }
func (o *TokenDeleteResult) DeepCopyObject() runtime.Object  { return deepCopy(o) }
func (o *JoinCommand) DeepCopyObject() runtime.Object        { return deepCopy(o) }
func (o *CertificateKey) DeepCopyObject() runtime.Object     { return deepCopy(o) }
func (o *Version) DeepCopyObject() runtime.Object            { return deepCopy(o) }
func (o *LeaveResult) DeepCopyObject() runtime.Object        { return deepCopy(o) }

// deepCopy copies through JSON: these objects are plain data that round-trips exactly.
func deepCopy[T any](in *T) *T {
	out := new(T)
	b, err := json.Marshal(in)
	if err == nil {
		err = json.Unmarshal(b, out)
	}
	if err != nil {
		panic(fmt.Sprintf("output: copying %T: %v", in, err)) // plain data: cannot happen
	}
	return out
}
