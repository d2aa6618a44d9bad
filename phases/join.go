package phases

// Join is the join workflow, in order. (ResetWorkflow undoes it.)
var Join = []Phase{
	Preflight, Discovery, VersionCheck, ControlPlanePrepare, TLSBootstrap, ReplaceNode, KubeletConfig, KubeletStart,
	EtcdJoin, ControlPlaneStart, MarkControlPlane, WaitControlPlane, StartApprover, WaitReady,
}
