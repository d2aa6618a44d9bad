package lab

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/utils/clock"

	"kjoin.dev/kjoin/etcd"
)

// Etcd returns a client of the cluster's etcd through cp1, with cp1's apiserver client cert.
func (l *Lab) Etcd() (*clientv3.Client, error) {
	read := func(p string) ([]byte, error) { return l.ReadFile("cp1", p) }
	ca, err := read("/etc/kubernetes/pki/etcd/ca.crt")
	if err != nil {
		return nil, err
	}
	crt, err := read("/etc/kubernetes/pki/apiserver-etcd-client.crt")
	if err != nil {
		return nil, err
	}
	key, err := read("/etc/kubernetes/pki/apiserver-etcd-client.key")
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(crt, key)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	return clientv3.New(clientv3.Config{
		Endpoints:   []string{"https://" + net.JoinHostPort(l.Hosts["cp1"].IP, "2379")},
		DialTimeout: 5 * time.Second,
		TLS:         &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}},
	})
}

// EtcdMember is one etcd member as `etcdctl member list` shows it.
type EtcdMember struct {
	ID       uint64
	Name     string
	PeerURLs []string
	Learner  bool
	// Started is true once the member has joined and published its name.
	Started bool
}

// Status is "voter" or "learner", with ",unstarted" for a member that has not started yet.
func (m EtcdMember) Status() string {
	s := "voter"
	if m.Learner {
		s = "learner"
	}
	if !m.Started {
		s += ",unstarted"
	}
	return s
}

// EtcdMembers lists the cluster's etcd members.
func (l *Lab) EtcdMembers(ctx context.Context) ([]EtcdMember, error) {
	cli, err := l.Etcd()
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	resp, err := cli.MemberList(ctx)
	if err != nil {
		return nil, err
	}
	var out []EtcdMember
	for _, m := range resp.Members {
		out = append(out, EtcdMember{ID: m.ID, Name: m.Name, PeerURLs: m.PeerURLs, Learner: m.IsLearner, Started: m.Name != ""})
	}
	return out, nil
}

// RemoveEtcdMember removes the member whose peer URL is on host name, if there is one.
func (l *Lab) RemoveEtcdMember(ctx context.Context, name string) error {
	h, ok := l.Hosts[name]
	if !ok {
		return nil
	}
	cli, err := l.Etcd()
	if err != nil {
		return err
	}
	defer cli.Close()
	resp, err := cli.MemberList(ctx)
	if err != nil {
		return err
	}
	for _, m := range resp.Members {
		for _, u := range m.PeerURLs {
			if strings.Contains(u, "//"+net.JoinHostPort(h.IP, "")) {
				// etcd refuses membership changes for a few seconds after the last one.
				return etcd.RemoveMember(ctx, cli, m.ID, clock.RealClock{})
			}
		}
	}
	return nil
}

// EtcdLeader returns the ID of the current etcd leader, as cp1's member sees it.
func (l *Lab) EtcdLeader(ctx context.Context) (uint64, error) {
	cli, err := l.Etcd()
	if err != nil {
		return 0, err
	}
	defer cli.Close()
	st, err := cli.Status(ctx, cli.Endpoints()[0])
	if err != nil {
		return 0, err
	}
	return st.Leader, nil
}

// MoveEtcdLeader moves etcd leadership to the started voter named to and waits until the
// cluster reports it as the leader.
func (l *Lab) MoveEtcdLeader(ctx context.Context, to string) (from, toID uint64, err error) {
	members, err := l.EtcdMembers(ctx)
	if err != nil {
		return 0, 0, err
	}
	for _, m := range members {
		if m.Name == to && m.Started && !m.Learner {
			toID = m.ID
		}
	}
	if toID == 0 {
		return 0, 0, fmt.Errorf("no started voter named %s in %+v", to, members)
	}
	if from, err = l.EtcdLeader(ctx); err != nil {
		return 0, 0, err
	}
	if from == toID {
		return from, toID, fmt.Errorf("%s already leads", to)
	}
	cli, err := l.Etcd()
	if err != nil {
		return 0, 0, err
	}
	defer cli.Close()
	// The request must reach the leader: connect to its client URL.
	ml, err := cli.MemberList(ctx)
	if err != nil {
		return 0, 0, err
	}
	var leaderURL string
	for _, m := range ml.Members {
		if m.ID == from && len(m.ClientURLs) > 0 {
			leaderURL = m.ClientURLs[0]
		}
	}
	cli.SetEndpoints(leaderURL)
	if _, err := cli.MoveLeader(ctx, toID); err != nil {
		return from, toID, fmt.Errorf("move leader %x → %x: %w", from, toID, err)
	}
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if now, err := l.EtcdLeader(ctx); err == nil && now == toID {
			return from, toID, nil
		}
	}
	return from, toID, fmt.Errorf("leader did not become %x", toID)
}
