package diagnose

import "slices"

// causes, from the reporting path inward: the first failed check names the verdict.
var causes = []struct{ id, cause, next string }{
	{"node.joined", "this node has not joined a cluster (no kubelet.conf)", "join it: kjoin join <endpoint> --token-file ... --discovery-token-ca-cert-hash sha256:..."},
	{"kubelet.crashloop", "the kubelet keeps exiting at start (a crash loop)", "fix what it exits with (the kubelet.crashloop evidence: often config.yaml, kubelet.conf or the runtime endpoint), then systemctl restart kubelet"},
	{"kubelet.flags", "the kubelet gets no kubeconfig and configuration from its unit (the drop-in passing the join's files is missing)", "restore the kubelet unit's drop-in (10-kjoin.conf from the kjoin package, or kubeadm's 10-kubeadm.conf), then systemctl daemon-reload && systemctl restart kubelet"},
	{"kubelet.service", "the kubelet is not running", "start it: systemctl enable --now kubelet; then journalctl -xeu kubelet for why it stopped"},
	{"cert.validity", "the kubelet's client certificate is expired or not valid", "renew it in place: kjoin token create on a control plane, then kjoin join here with the node's usual flags (it keeps the Node and its other files); keep rotateCertificates on"},
	{"cert.node", "the kubelet's certificate is for another node", "rejoin the node under its own name (kjoin reset, then kjoin join)"},
	{"api.config", "kubelet.conf does not name a usable API server", "rejoin the node, or fix server: in /etc/kubernetes/kubelet.conf"},
	{"api.dns", "the API server's name does not resolve from this node", "fix DNS or /etc/hosts for the name in kubelet.conf"},
	{"api.tcp", "the API server is unreachable from this node", "check routes, firewalls and security groups between this node and the API server (port 6443)"},
	{"api.tls", "TLS to the API server fails", "check that kubelet.conf's CA is the cluster CA and that nothing intercepts the connection"},
	{"api.clock", "this node's clock is off", "enable time synchronisation (NTP, chrony)"},
	{"api.auth", "the API server rejects the kubelet's credentials", "check the client certificate (kjoin reset and rejoin renews it)"},
	{"cri.reachable", "the container runtime is down", "start it: systemctl start containerd (or your runtime); then crictl info"},
	{"cri.runtime", "the container runtime is not ready", "check the runtime's logs: journalctl -u containerd"},
	{"cni.config", "no CNI configuration: the pod network is not set up", "install a network plugin (CNI), or restore its config in /etc/cni/net.d"},
	{"cri.network", "the pod network is not ready (NetworkReady=false)", "check the network plugin's pods and its config in /etc/cni/net.d"},
	{"kubelet.healthz", "the kubelet runs but is not healthy", "journalctl -xeu kubelet (the kubelet.log check shows its last errors)"},
	{"res.nodefs", "disk pressure on the kubelet's filesystem", "free space under /var/lib/kubelet (images, logs)"},
	{"res.imagefs", "disk pressure on the image filesystem", "prune images: crictl rmi --prune"},
	{"res.memory", "memory pressure", "find what uses the memory; the kubelet evicts pods below the threshold"},
	{"res.pids", "PID pressure", "find the process leaking PIDs"},
	{"node.pressure", "the kubelet reports a pressure condition", "see the condition's message"},
	{"node.lease", "the Node's Lease is stale though the kubelet looks fine", "journalctl -xeu kubelet for lease update errors"},
	{"node.registered", "the Node is not registered", "journalctl -xeu kubelet for registration errors"},
	{"node.conditions", "the Node is not Ready", "see node.conditions' evidence; kubectl describe node"},
}

// crashCauses explain a kubelet that exits at start: when one of them failed, it is the
// verdict, and the crash loop only its symptom — and so is a kubelet found between two of
// its restarts (not running, having exited on its own). A kubelet stopped by hand is still
// "not running" first.
var crashCauses = []string{"kubelet.flags", "cert.validity", "cert.node", "api.config", "cri.reachable"}

func (g *diagnosis) verdict() Verdict {
	for _, c := range causes {
		symptom := c.id == "kubelet.crashloop" || (c.id == "kubelet.service" && g.kubeletExited)
		if symptom && slices.ContainsFunc(crashCauses, g.failed) {
			continue
		}
		if g.failed(c.id) {
			return Verdict{Cause: c.cause, CheckID: c.id, Next: c.next}
		}
	}
	if g.status["node.conditions"] == "warn" {
		return Verdict{Cause: "the local checks pass but the Node could not be read", CheckID: "node.conditions", Next: "run kjoin verify from a control plane"}
	}
	return Verdict{Healthy: true, Cause: "healthy", Next: "nothing to do"}
}
