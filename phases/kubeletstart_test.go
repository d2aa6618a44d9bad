package phases

import (
	"context"
	"strings"
	"testing"
)

func TestKubeletStartRestartsOnlyAfterAChange(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	h.runner.active = true
	s := &State{Opts: h.options(t)}
	if err := KubeletStart.Run(context.Background(), h.env, s); err != nil {
		t.Fatal(err)
	}
	if s.Changed() || strings.Contains(strings.Join(h.runner.calls, "\n"), "restart") {
		t.Errorf("an unchanged node's running kubelet was restarted: %v", h.runner.calls)
	}
	s.MarkChanged()
	h.runner.calls = nil
	if err := KubeletStart.Run(context.Background(), h.env, s); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(h.runner.calls, ";"); got != "systemctl daemon-reload;systemctl enable kubelet;systemctl restart kubelet" {
		t.Errorf("commands %q", got)
	}
}

func TestKubeletStartDryRunPlansOnly(t *testing.T) {
	t.Parallel()
	h := newTestHost(t)
	o := h.options(t)
	o.DryRun = true
	s := &State{Opts: o}
	if err := KubeletStart.Run(context.Background(), h.env, s); err != nil {
		t.Fatal(err)
	}
	if len(h.runner.calls) != 0 || len(s.PlannedAPI) != 3 {
		t.Errorf("calls %v planned %v", h.runner.calls, s.PlannedAPI)
	}
}
