package lab

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
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
		Endpoints:   []string{fmt.Sprintf("https://%s:2379", l.Hosts["cp1"].IP)},
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
			if strings.Contains(u, "//"+h.IP+":") {
				// etcd refuses membership changes for a few seconds after the last one.
				return etcd.RemoveMember(ctx, cli, m.ID, clock.RealClock{})
			}
		}
	}
	return nil
}
