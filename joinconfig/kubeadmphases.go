package joinconfig

// kubeadmPhase maps a kubeadm join phase name (as Ansible roles and Cluster API bootstrap
// configs pass them in --skip-phases or skipPhases) to kjoin's phases that do that work,
// with a note for the operator. A kubeadm phase that has no kjoin counterpart maps to none:
// nothing is skipped, and the note says why. Sub-phases that cover only part of one kjoin
// phase are refused (skipping the whole phase would skip more than was asked).
type kubeadmPhase struct {
	kjoin []string
	note  string
	// refuse, when set, is why the name cannot be honoured.
	refuse string
}

var kubeadmPhases = map[string]kubeadmPhase{
	"control-plane-prepare/all":             {kjoin: []string{"control-plane-prepare"}},
	"control-plane-prepare/download-certs":  {refuse: "kjoin's control-plane-prepare downloads the certificates and issues the node's in one step; skip control-plane-prepare as a whole, or leave the uploaded certificates out of kubeadm-certs"},
	"control-plane-prepare/certs":           {refuse: "kjoin's control-plane-prepare issues the certificates with the rest of the control-plane files; skip control-plane-prepare as a whole"},
	"control-plane-prepare/kubeconfig":      {refuse: "kjoin's control-plane-prepare writes the kubeconfigs with the rest of the control-plane files; skip control-plane-prepare as a whole"},
	"control-plane-prepare/control-plane":   {kjoin: []string{"control-plane-start"}, note: "kjoin writes the API server, controller-manager and scheduler manifests in control-plane-start"},
	"check-etcd":                            {note: "kjoin has no separate check-etcd phase: etcd-join checks etcd's health itself; nothing skipped"},
	"kubelet-start":                         {kjoin: []string{"tls-bootstrap", "replace-node", "kubelet-config", "kubelet-start"}, note: "kubeadm's kubelet-start bootstraps the kubelet's credentials, writes its configuration and starts it: kjoin's tls-bootstrap, replace-node, kubelet-config and kubelet-start"},
	"kubelet-wait-bootstrap":                {note: "kjoin has no kubelet-wait-bootstrap phase: it obtains the kubelet's certificate itself in tls-bootstrap; nothing skipped"},
	"control-plane-join":                    {kjoin: []string{"etcd-join", "control-plane-start", "mark-control-plane"}},
	"control-plane-join/all":                {kjoin: []string{"etcd-join", "control-plane-start", "mark-control-plane"}},
	"control-plane-join/etcd":               {kjoin: []string{"etcd-join"}},
	"control-plane-join/etcd-join":          {kjoin: []string{"etcd-join"}},
	"control-plane-join/mark-control-plane": {kjoin: []string{"mark-control-plane"}},
}
