package etcd

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// LocalState is what this node's own etcd member says of itself on its metrics endpoint,
// which etcd serves from its start, before it serves clients (kubeadm's
// --listen-metrics-urls, http://127.0.0.1:2381).
type LocalState struct {
	// Applied is the raft index the member has applied (etcd_server_proposals_applied_total),
	// from log entries or from a snapshot the leader sent.
	Applied uint64
	// Pending counts its own proposals not yet applied (etcd_server_proposals_pending); a
	// starting member's one proposal is the request that publishes its name.
	Pending uint64
}

// ParseLocalState reads the two values from etcd's Prometheus text exposition.
func ParseLocalState(r io.Reader) (LocalState, error) {
	var st LocalState
	var seen int
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") {
			continue
		}
		var dst *uint64
		switch name {
		case "etcd_server_proposals_applied_total":
			dst = &st.Applied
		case "etcd_server_proposals_pending":
			dst = &st.Pending
		default:
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil || f < 0 {
			return LocalState{}, fmt.Errorf("metric %s has the value %q", name, value)
		}
		*dst = uint64(f)
		seen++
	}
	if err := sc.Err(); err != nil {
		return LocalState{}, err
	}
	if seen != 2 {
		return LocalState{}, fmt.Errorf("etcd_server_proposals_applied_total or etcd_server_proposals_pending missing from the metrics")
	}
	return st, nil
}

// MetricsState returns a reader of the member's state at its metrics URL (http only: kubeadm
// serves etcd's metrics without TLS on the loopback address).
func MetricsState(c *http.Client, metricsURL string) func(context.Context) (LocalState, error) {
	return func(ctx context.Context) (LocalState, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(metricsURL, "/")+"/metrics", nil)
		if err != nil {
			return LocalState{}, err
		}
		resp, err := c.Do(req)
		if err != nil {
			return LocalState{}, err
		}
		defer func() { _ = resp.Body.Close() }()
		if resp.StatusCode != http.StatusOK {
			return LocalState{}, fmt.Errorf("GET %s/metrics: %s", metricsURL, resp.Status)
		}
		return ParseLocalState(resp.Body)
	}
}
