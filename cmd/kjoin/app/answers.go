package app

import (
	"kjoin.dev/kjoin/cri"
	"kjoin.dev/kjoin/diagnose"
	"kjoin.dev/kjoin/output"
	"kjoin.dev/kjoin/phases"
	"kjoin.dev/kjoin/verify"
	"kjoin.dev/kjoin/workflow"
)

// The answers' conversions: each fact is printed with the same name and type by every
// command that reports it.

func phasesOf(rs []workflow.Result) []output.Phase {
	out := []output.Phase{}
	for _, r := range rs {
		out = append(out, output.Phase{Name: r.Name, Status: r.Status, Reason: r.Reason, Duration: output.NewDuration(r.Duration)})
	}
	return out
}

func resetResultOf(r *phases.ResetReport, err error) *output.ResetResult {
	return &output.ResetResult{Changed: r.Changed, Node: r.Node, Role: r.Role, EtcdMemberRemoved: r.EtcdMemberRemoved,
		NodeDeleted: r.NodeDeleted, KubeletStopped: r.KubeletStopped, KubeletDisabled: r.KubeletDisabled, ApproverStopped: r.ApproverStopped, RemovedFiles: r.RemovedFiles, RemovedPods: r.RemovedPods,
		DryRun: r.DryRun, PlannedActions: r.PlannedActions, Phases: phasesOf(r.Phases),
		Warnings: r.Warnings, Error: NewErrorJSON(err)}
}

func leaveResultOf(r *phases.ResetReport, err error) *output.LeaveResult {
	out := &output.LeaveResult{ResetResult: *resetResultOf(r, err)}
	if l := r.Leave; l != nil {
		out.Credentials, out.Cordoned, out.EvictedPods, out.EvictionRefusals, out.LeaseDeleted, out.DeletedCSRs, out.Left = l.Credentials, l.Cordoned, l.EvictedPods, l.EvictionRefusals, l.LeaseDeleted, l.DeletedCSRs, l.Left
	}
	return out
}

func checksOf(cs []verify.Check) []output.Check {
	out := []output.Check{}
	for _, c := range cs {
		out = append(out, output.Check{ID: c.ID, Node: c.Node, Status: string(c.Status), Summary: c.Summary, Evidence: c.Evidence})
	}
	return out
}

func runtimeOf(i *cri.Info) *output.Runtime {
	if i == nil {
		return nil
	}
	return &output.Runtime{Name: i.Name, Version: i.Version, SandboxImage: i.SandboxImage, SandboxImageFrom: i.SandboxImageFrom, RuntimeConfig: i.RuntimeConfig, CgroupDriver: i.CgroupDriver}
}

func verifyReportOf(r *verify.Report, failure error) *output.VerifyReport {
	return &output.VerifyReport{Nodes: r.Nodes, Checks: checksOf(r.Checks), Verified: r.Failed == 0, Failed: r.Failed, Warned: r.Warned, Error: NewErrorJSON(failure)}
}

func diagnoseReportOf(r *diagnose.Report, failure error) *output.DiagnoseReport {
	v := r.Verdict
	return &output.DiagnoseReport{Node: r.Node, Checks: checksOf(r.Checks), Error: NewErrorJSON(failure),
		Verdict: output.Verdict{Healthy: v.Healthy, Cause: v.Cause, CheckID: v.CheckID, Next: v.Next}}
}

func nodeOf(n verify.NodeInfo) output.Node {
	out := output.Node{Name: n.Name, Role: n.Role, Roles: n.Roles, Ready: n.Ready == "True", ReadyStatus: n.Ready,
		InternalIPs: n.InternalIPs, Zone: n.Zone, InstanceType: n.InstanceType, KubeletVersion: n.KubeletVersion,
		ContainerRuntime: n.Runtime, OSImage: n.OSImage, KernelVersion: n.KernelVersion,
		JoinedAt: n.JoinedAt, JoinedBy: n.JoinedBy, PodCIDR: n.PodCIDR, Taints: n.Taints}
	if n.HasLease {
		out.LeaseAge = output.NewDuration(n.LeaseAge)
	}
	return out
}
