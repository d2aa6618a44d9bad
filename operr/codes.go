package operr

import (
	"fmt"
	"strings"
)

// Meanings say what each exit code means: the one source of the README's exit-code table and
// of kjoin help exit-codes.
var Meanings = map[Code]string{
	OK:        "success (changed or not)",
	Other:     "other error (among them: etcd lost quorum during a control-plane join)",
	Usage:     "usage: bad flags or config (every bad value listed at once, before the host is touched): malformed token, pin, endpoint, port, certificate key, patches",
	Preflight: "preflight: the host is not ready to join (no container runtime, ports, files, a non-empty or non-dedicated etcd data directory, an untrusted journal; or the node name is held by a Ready Node), or the disk filled up mid-join (the error names the path; the same command resumes once space is freed); reset refusing to break etcd quorum or to trust its journal",
	Trust:     "trust / discovery: CA pin mismatch, an unpinned CA in cluster-info, a server not holding a pinned-CA certificate for the endpoint, certificate name or time mismatch, unusable cluster-info, an issued certificate that is not the node's",
	Auth:      "token / auth: unknown or expired token, wrong secret, missing RBAC, wrong certificate key, denied CSR",
	Timeout:   "timeout",
	Busy:      "busy, retryable: another control plane holds the etcd join lock; an etcd learner left by a join that did not finish blocks this one (named, see \"Nodes that have lived\")",
	Verify:    "`kjoin verify`: a check failed; `kjoin diagnose`: the node is not healthy",
}

// Codes are the exit codes in order.
var Codes = []Code{OK, Other, Usage, Preflight, Trust, Auth, Timeout, Busy, Verify}

// MarkdownTable is the README's exit-code table.
func MarkdownTable() string {
	var b strings.Builder
	b.WriteString("| code | meaning |\n|---|---|\n")
	for _, c := range Codes {
		fmt.Fprintf(&b, "| %d | %s |\n", c, Meanings[c])
	}
	return b.String()
}

// TextTable is the exit-code table for a terminal (backquotes dropped).
func TextTable() string {
	var b strings.Builder
	for _, c := range Codes {
		fmt.Fprintf(&b, "  %d  %-9s  %s\n", c, c.Reason(), strings.ReplaceAll(Meanings[c], "`", ""))
	}
	return b.String()
}
