//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"kjoin.dev/kjoin/e2e/framework"
	"kjoin.dev/kjoin/e2e/lab"
)

const (
	auditDir    = "/etc/kubernetes/audit"
	auditLogDir = "/var/log/kubernetes/audit"
	auditLog    = auditLogDir + "/audit.log"
	auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
`
)

// enableAudit turns on cp1's API server audit log (Metadata level, JSON lines) by editing its
// static-pod manifest, waits until the restarted API server writes to it, and returns a
// function that puts the manifest back. Only cp1's manifest changes: kubeadm-config does not,
// so joining control planes are not affected.
func enableAudit(t *testing.T, c *framework.Cluster) (restore func()) {
	t.Helper()
	manifest := c.HostPath("cp1", "/etc/kubernetes/manifests/kube-apiserver.yaml")
	orig, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{auditDir, auditLogDir} {
		if err := os.MkdirAll(c.HostPath("cp1", d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(c.HostPath("cp1", auditDir+"/policy.yaml"), []byte(auditPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	var pod corev1.Pod
	if err := yaml.Unmarshal(orig, &pod); err != nil {
		t.Fatal(err)
	}
	ctr := &pod.Spec.Containers[0]
	ctr.Command = append(ctr.Command, "--audit-policy-file="+auditDir+"/policy.yaml", "--audit-log-path="+auditLog, "--audit-log-format=json", "--audit-log-maxbackup=1")
	dirOrCreate := corev1.HostPathDirectoryOrCreate
	for _, v := range []struct {
		name, path string
		ro         bool
	}{{"audit-policy", auditDir, true}, {"audit-log", auditLogDir, false}} {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: v.name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: v.path, Type: &dirOrCreate}}})
		ctr.VolumeMounts = append(ctr.VolumeMounts, corev1.VolumeMount{Name: v.name, MountPath: v.path, ReadOnly: v.ro})
	}
	b, err := yaml.Marshal(&pod)
	if err != nil {
		t.Fatal(err)
	}
	writeManifest := func(b []byte) {
		// Written beside, then renamed: the kubelet would read a half-written file in the directory.
		tmp := c.HostPath("cp1", "/etc/kubernetes/kube-apiserver.yaml.tmp")
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, manifest); err != nil {
			t.Fatal(err)
		}
	}
	var before int64 = -1 // an earlier section's audit log stays: the new API server must add to it
	if st, err := os.Stat(c.HostPath("cp1", auditLog)); err == nil {
		before = st.Size()
	}
	writeManifest(b)
	deadline := time.Now().Add(3 * time.Minute)
	for {
		// Only the API server started with the audit flags runs, it has logged, and it is ready:
		// /readyz waits for its informers (RBAC's among them); until they sync it refuses even
		// the anonymous read of cluster-info (2026-12-06: a storm started on /livez got 156 403s).
		if st, err := os.Stat(c.HostPath("cp1", auditLog)); err == nil && st.Size() > before && auditOn(c) && readyz(c.Hosts["cp1"].IP) {
			break
		}
		if time.Now().After(deadline) {
			writeManifest(orig)
			t.Fatal("cp1's API server wrote no audit log within 3 minutes of the audit flags")
		}
		time.Sleep(time.Second)
	}
	return func() {
		writeManifest(orig)
		// The API server that logs stays live until the kubelet replaces it: wait for the one
		// started without the audit flags to be the only one, and live.
		deadline := time.Now().Add(3 * time.Minute)
		for !auditOff(c) || !readyz(c.Hosts["cp1"].IP) {
			if time.Now().After(deadline) {
				t.Error("cp1's API server did not come back without the audit log within 3 minutes")
				return
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
}

// auditOn reports whether cp1 runs an API server and each of its API servers has the audit
// log flag.
func auditOn(c *framework.Cluster) bool {
	pids := c.Pids("cp1", "kube-apiserver")
	for _, p := range pids {
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
		if err != nil || !strings.Contains(string(cmdline), "--audit-log-path") {
			return false
		}
	}
	return len(pids) > 0
}

// auditOff reports whether cp1 runs an API server and none of its API servers has the audit
// log flag.
func auditOff(c *framework.Cluster) bool {
	pids := c.Pids("cp1", "kube-apiserver")
	for _, p := range pids {
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p))
		if err != nil || strings.Contains(string(cmdline), "--audit-log-path") {
			return false
		}
	}
	return len(pids) > 0
}

// auditEvent is the part of an audit.k8s.io/v1 Event the cost count reads.
type auditEvent struct {
	Stage     string `json:"stage"`
	Verb      string `json:"verb"`
	UserAgent string `json:"userAgent"`
	User      struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestReceivedTimestamp time.Time `json:"requestReceivedTimestamp"`
}

// clientOf names the client class of an audited request: the storm's own (discovery's
// anonymous reads, the bootstrap token's), the controllers that approve and sign (the
// controller-manager's service accounts), or everyone else (kubelets, the scheduler, the API
// server itself).
func clientOf(user string) string {
	switch {
	case user == "system:anonymous":
		return "anonymous (discovery)"
	case strings.HasPrefix(user, "system:bootstrap:"):
		return "bootstrap token (CSR)"
	case user == "system:kube-controller-manager" || strings.HasPrefix(user, "system:serviceaccount:kube-system:"):
		return "controller-manager"
	}
	return "others"
}

// eachAuditEvent calls fn with every completed request event cp1's audit log holds after
// offset (non-resource requests, the components' probes, left out).
func eachAuditEvent(t *testing.T, c *framework.Cluster, offset int64, fn func(ev auditEvent)) {
	t.Helper()
	f, err := os.Open(c.HostPath("cp1", auditLog))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(offset, 0); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev auditEvent
		if json.Unmarshal(sc.Bytes(), &ev) == nil && ev.Stage == "ResponseComplete" && ev.ObjectRef != nil {
			fn(ev)
		}
	}
}

// call is an audited request's verb and resource (with its subresource).
func (ev auditEvent) call() string {
	res := ev.ObjectRef.Resource
	if ev.ObjectRef.Subresource != "" {
		res += "/" + ev.ObjectRef.Subresource
	}
	return ev.Verb + " " + res
}

// auditCalls counts the requests cp1's audit log holds after offset, by client class and call
// ("CLASS|VERB RESOURCE"), and their 429 answers by class ("CLASS|429").
func auditCalls(t *testing.T, c *framework.Cluster, offset int64) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	eachAuditEvent(t, c, offset, func(ev auditEvent) {
		class := clientOf(ev.User.Username)
		out[class+"|"+ev.call()]++
		if ev.ResponseStatus != nil && ev.ResponseStatus.Code == 429 {
			out[class+"|429"]++
		}
	})
	return out
}

// joinCost counts the API requests the joining side of one join made, from cp1's audit log
// after offset and before until: anonymous ones (discovery), the bootstrap token's (the TLS
// bootstrap, kubeadm's reads) and the new node's own (the kubelet registering, until Ready).
// Non-resource requests (the components' /livez and /readyz probes) are left out. Writes are
// the mutating verbs: each is an etcd write.
func joinCost(t *testing.T, c *framework.Cluster, offset int64, node string, until time.Time) (byCall map[string]float64, requests, writes int) {
	t.Helper()
	byCall = map[string]float64{}
	eachAuditEvent(t, c, offset, func(ev auditEvent) {
		if ev.RequestReceivedTimestamp.After(until) {
			return
		}
		u := ev.User.Username
		if u != "system:anonymous" && !strings.HasPrefix(u, "system:bootstrap:") && u != "system:node:"+node {
			return
		}
		byCall[ev.call()]++
		requests++
		if slices.Contains([]string{"create", "update", "patch", "delete", "deletecollection"}, ev.Verb) {
			writes++
		}
	})
	return byCall, requests, writes
}

// benchCost measures what one worker join costs the control plane, kubeadm beside kjoin, on
// fresh hosts, with cp1's audit log on for the rounds and off again after.
func benchCost(t *testing.T, c *framework.Cluster, tools []benchTool, rounds int) {
	restore := enableAudit(t, c)
	defer restore()
	for round := 0; round <= rounds; round++ {
		for ti, tool := range tools {
			host := []string{"w5", "w6"}[(ti+round)%2]
			if _, err := c.AddHost(context.Background(), host, t.Logf); err != nil {
				t.Fatal(err)
			}
			writeToken(t, c, host, lab.Token)
			st, err := os.Stat(c.HostPath("cp1", auditLog))
			if err != nil {
				t.Fatal(err)
			}
			readyCh := watchReady(c, host)
			r := c.Exec(context.Background(), host, tool.argv(host, "")...)
			if r.Err != nil {
				t.Fatalf("%s on %s: %v", tool.name, host, r.Error())
			}
			ready := <-readyCh
			if ready.IsZero() {
				t.Fatalf("%s: node %s never became Ready", tool.name, host)
			}
			time.Sleep(2 * time.Second) // the audit backend writes in batches
			byCall, requests, writes := joinCost(t, c, st.Size(), host, ready)
			if requests == 0 {
				t.Fatalf("%s on %s: no request of the join in cp1's audit log: the count would be empty", tool.name, host)
			}
			s := Sample{Section: "cost", Tool: tool.name, Round: round, Warmup: round == 0, Host: host, OK: true, WallMs: r.Duration.Milliseconds(), Extra: byCall}
			s.Extra["requests"], s.Extra["writes"] = float64(requests), float64(writes)
			recordSample(t, s)
			t.Logf("cost round %d %-12s on %s: %d requests, %d writes until Ready: %s", round, tool.name, host, requests, writes, describeCost(byCall))
			c.Forget(t, host)
		}
	}
}

func describeCost(m map[string]float64) string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b bytes.Buffer
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%g ", k, m[k])
	}
	return strings.TrimSpace(b.String())
}
