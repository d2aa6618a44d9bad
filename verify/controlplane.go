package verify

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"kjoin.dev/kjoin/etcd"
	"kjoin.dev/kjoin/host"
)

// Components are the static pods of a kubeadm control plane (stacked etcd).
var Components = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"}

type member struct {
	ID        uint64
	Name      string
	PeerURL   string
	ClientURL string
	Learner   bool
}

// controlPlaneChecks verifies a control-plane node: its etcd member, its static pods and its
// API server; clusterWide adds the member count and every member's health (once per run).
func (v *verifier) controlPlaneChecks(ctx context.Context, n *corev1.Node, controlPlanes []string, clusterWide bool) {
	name := n.Name
	members, err := v.etcdMembers(ctx)
	switch {
	case err != nil:
		v.add(Check{ID: "etcd.member", Node: name, Status: Warn, Summary: "etcd not checked", Evidence: err.Error()})
	default:
		var mine *member
		for i := range members {
			if members[i].Name == name {
				mine = &members[i]
			}
		}
		switch {
		case mine == nil:
			v.add(Check{ID: "etcd.member", Node: name, Status: Fail, Summary: "no started etcd member for this node", Evidence: describe(members)})
		case mine.Learner:
			v.add(Check{ID: "etcd.member", Node: name, Status: Fail, Summary: "the node's etcd member is still a learner (not promoted)", Evidence: fmt.Sprintf("member %x %s", mine.ID, mine.PeerURL)})
		default:
			v.add(Check{ID: "etcd.member", Node: name, Status: Pass, Summary: "etcd member started and voting", Evidence: fmt.Sprintf("member %x %s", mine.ID, mine.PeerURL)})
		}
		if clusterWide {
			v.etcdClusterChecks(ctx, members, controlPlanes)
		}
	}
	v.podChecks(ctx, name)
}

func (v *verifier) etcdClusterChecks(ctx context.Context, members []member, controlPlanes []string) {
	count := Check{ID: "etcd.count", Status: Pass, Summary: fmt.Sprintf("%d etcd members for %d control-plane nodes", len(members), len(controlPlanes)),
		Evidence: describe(members)}
	if len(members) != len(controlPlanes) {
		count.Status = Fail
	}
	v.add(count)
	v.leftBehindCheck(ctx, members)
	var sick []string
	for _, m := range members {
		if m.ClientURL == "" {
			sick = append(sick, fmt.Sprintf("%x (%s): no client URL (never started)", m.ID, m.Name))
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		_, err := v.conn.Status(cctx, m.ClientURL)
		cancel()
		if err != nil {
			sick = append(sick, fmt.Sprintf("%s (%s): %v", m.Name, m.ClientURL, err))
		}
	}
	if len(sick) > 0 {
		v.add(Check{ID: "etcd.health", Status: Fail, Summary: fmt.Sprintf("%d of %d etcd members unhealthy", len(sick), len(members)), Evidence: strings.Join(sick, "; ")})
		return
	}
	v.add(Check{ID: "etcd.health", Status: Pass, Summary: fmt.Sprintf("all %d etcd members healthy", len(members))})
}

// leftBehindCheck names learners left by joins that did not finish and members whose peer
// URL is silent, with the remedy (etcd.stale).
func (v *verifier) leftBehindCheck(ctx context.Context, members []member) {
	var states []etcd.MemberState
	for _, m := range members {
		st := etcd.MemberState{ID: m.ID, Name: m.Name, PeerURL: m.PeerURL, Learner: m.Learner, Started: m.Name != ""}
		if v.o.EtcdPeer != nil && m.PeerURL != "" {
			st.Probed, st.Silent = true, !v.o.EtcdPeer(ctx, m.PeerURL)
		}
		states = append(states, st)
	}
	if left := etcd.LeftBehind(states); len(left) > 0 {
		v.add(Check{ID: "etcd.stale", Status: Fail, Summary: fmt.Sprintf("%d etcd member(s) left behind: %s", len(left), etcd.Describe(left)), Evidence: etcd.LeftBehindRemedy})
		return
	}
	v.add(Check{ID: "etcd.stale", Status: Pass, Summary: "no learner left by a failed join, no member with a silent peer URL"})
}

// etcdMembers connects to etcd and lists the members, once per run; the connection stays
// open for the health checks (Run closes it).
func (v *verifier) etcdMembers(ctx context.Context) ([]member, error) {
	if v.membersRead {
		return v.members, v.membersErr
	}
	v.membersRead = true
	conn, err := v.dial(ctx)
	if err != nil {
		v.membersErr = err
		return nil, err
	}
	v.conn = conn
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	list, err := conn.MemberList(cctx)
	if err != nil {
		v.membersErr = fmt.Errorf("etcd member list: %w", err)
		return nil, v.membersErr
	}
	for _, m := range list.Members {
		mm := member{ID: m.ID, Name: m.Name, Learner: m.IsLearner}
		if len(m.PeerURLs) > 0 {
			mm.PeerURL = m.PeerURLs[0]
		}
		if len(m.ClientURLs) > 0 {
			mm.ClientURL = m.ClientURLs[0]
		}
		v.members = append(v.members, mm)
	}
	return v.members, nil
}

func (v *verifier) dial(ctx context.Context) (etcd.Conn, error) {
	if v.o.Etcd == nil {
		return nil, fmt.Errorf("no etcd client certificate here: run kjoin verify on a control-plane node for the etcd checks")
	}
	pods, err := v.o.Client.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "component=etcd,tier=control-plane"})
	if err != nil {
		return nil, fmt.Errorf("list etcd pods: %w", err)
	}
	var eps []string
	for _, p := range pods.Items {
		if u := p.Annotations["kubeadm.kubernetes.io/etcd.advertise-client-urls"]; u != "" {
			eps = append(eps, u)
		}
	}
	if len(eps) == 0 {
		return nil, fmt.Errorf("no etcd pod with kubeadm's advertise-client-urls annotation in kube-system")
	}
	return v.o.Etcd(eps)
}

// podChecks: the node's static pods run and are Ready; its API server answers /livez over
// TLS verified by the cluster CA.
func (v *verifier) podChecks(ctx context.Context, name string) {
	for _, comp := range Components {
		id := "pod." + comp
		p, err := v.o.Client.CoreV1().Pods("kube-system").Get(ctx, comp+"-"+name, metav1.GetOptions{})
		if err != nil {
			st := Fail
			if isNotFound(err) && comp == "etcd" {
				st = Warn // external etcd clusters have no etcd pod
			}
			v.add(Check{ID: id, Node: name, Status: st, Summary: comp + " pod not found", Evidence: err.Error()})
			continue
		}
		ready := false
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				ready = true
			}
		}
		restarts := int32(0)
		for _, cs := range p.Status.ContainerStatuses {
			restarts += cs.RestartCount
		}
		ev := fmt.Sprintf("phase %s, ready %v, %d restart(s)", p.Status.Phase, ready, restarts)
		if p.Status.Phase == corev1.PodRunning && ready {
			v.add(Check{ID: id, Node: name, Status: Pass, Summary: comp + " running and ready", Evidence: ev})
		} else {
			v.add(Check{ID: id, Node: name, Status: Fail, Summary: comp + " not running and ready", Evidence: ev})
		}
		if comp == "kube-apiserver" {
			v.livez(ctx, name, p)
		}
	}
}

func (v *verifier) livez(ctx context.Context, name string, p *corev1.Pod) {
	ep := p.Annotations["kubeadm.kubernetes.io/kube-apiserver.advertise-address.endpoint"]
	if ep == "" {
		ep = host.JoinHostPort(p.Status.HostIP, 6443)
	}
	if v.o.HTTP == nil || v.o.CA == nil {
		v.add(Check{ID: "apiserver.livez", Node: name, Status: Warn, Summary: "not probed: no cluster CA"})
		return
	}
	url := "https://" + ep + "/livez"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		v.add(Check{ID: "apiserver.livez", Node: name, Status: Fail, Summary: "bad endpoint", Evidence: err.Error()})
		return
	}
	resp, err := v.o.HTTP(v.o.CA).Do(req)
	if err != nil {
		v.add(Check{ID: "apiserver.livez", Node: name, Status: Fail, Summary: "the API server does not answer /livez with a certificate of the cluster CA", Evidence: err.Error()})
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
	if resp.StatusCode != http.StatusOK {
		v.add(Check{ID: "apiserver.livez", Node: name, Status: Fail, Summary: "/livez is not ok", Evidence: fmt.Sprintf("%s: HTTP %d %q", url, resp.StatusCode, strings.TrimSpace(string(body)))})
		return
	}
	v.add(Check{ID: "apiserver.livez", Node: name, Status: Pass, Summary: "/livez ok, TLS verified by the cluster CA", Evidence: url})
}

func describe(ms []member) string {
	var out []string
	for _, m := range ms {
		role := "voter"
		if m.Learner {
			role = "learner"
		}
		n := m.Name
		if n == "" {
			n = "(not started)"
		}
		out = append(out, fmt.Sprintf("%s %x %s", n, m.ID, role))
	}
	return strings.Join(out, ", ")
}
