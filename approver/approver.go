package approver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"kjoin.dev/kjoin/token"
)

// Approver decides on bound tokens' CSRs as they come (and again at each resync, so a
// decision an outage interrupted is taken later), and deletes each used token once its node
// has registered.
type Approver struct {
	Client kubernetes.Interface
	Clock  clock.Clock
	// Logf receives one line per decision and per token deleted.
	Logf func(format string, a ...any)
	// Resync is how often every CSR is looked at again and used tokens swept (default 30 s).
	Resync time.Duration
	// Linger is how long a used token may outlive its claim when its node never registers
	// (or registered before the claim, a reinstalled machine): default 10 minutes.
	Linger time.Duration
}

// Run decides until ctx ends.
func (a *Approver) Run(ctx context.Context) error {
	if a.Resync == 0 {
		a.Resync = 30 * time.Second
	}
	if a.Linger == 0 {
		a.Linger = 10 * time.Minute
	}
	csrs := a.Client.CertificatesV1().CertificateSigningRequests()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return csrs.List(ctx, o) },
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return csrs.Watch(ctx, o)
		},
	}
	inf := cache.NewSharedIndexInformer(lw, &certificatesv1.CertificateSigningRequest{}, a.Resync, cache.Indexers{})
	handle := func(obj any) {
		if csr, ok := obj.(*certificatesv1.CertificateSigningRequest); ok {
			if err := a.Handle(ctx, csr); err != nil && ctx.Err() == nil {
				a.Logf("CSR %s: %v (tried again at the next resync)", csr.Name, err)
			}
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: handle, UpdateFunc: func(_, obj any) { handle(obj) }}); err != nil {
		return err
	}
	go inf.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return ctx.Err()
	}
	a.Logf("deciding on bound tokens' CSRs (group %s)", token.BoundGroup)
	for {
		if err := a.Sweep(ctx); err != nil && ctx.Err() == nil {
			a.Logf("sweeping used tokens: %v", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-a.Clock.After(a.Resync):
		}
	}
}

// decided reports whether csr has an approval or a denial.
func decided(csr *certificatesv1.CertificateSigningRequest) bool {
	for _, c := range csr.Status.Conditions {
		if c.Type == certificatesv1.CertificateApproved || c.Type == certificatesv1.CertificateDenied {
			return true
		}
	}
	return false
}

// Handle decides on one CSR. It is idempotent, and safe beside other approvers: the claim
// on the token and the decision are updates at the versions read, which the API server
// accepts once; the loser reads again and finds the decision taken.
func (a *Approver) Handle(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) error {
	if decided(csr) {
		return nil
	}
	judge := a.judgeBound
	if csr.Spec.SignerName == certificatesv1.KubeletServingSignerName {
		judge = a.judgeServing
	} else if _, ours := tokenID(csr); !ours {
		return nil
	}
	csrs := a.Client.CertificatesV1().CertificateSigningRequests()
	for attempt := 0; ; attempt++ {
		// Read it fresh: another approver may have decided since the event.
		fresh, err := csrs.Get(ctx, csr.Name, metav1.GetOptions{})
		if err != nil {
			return client(err)
		}
		if csr = fresh; decided(csr) {
			return nil
		}
		secret, v, err := judge(ctx, csr)
		if err != nil || !v.Ours {
			return err
		}
		err = a.decide(ctx, csr, secret, v)
		if !apierrors.IsConflict(err) || attempt == 3 {
			return err
		}
		// Another approver changed the CSR or the token: read both again.
	}
}

// judgeBound decides on a bound token's CSR with the token's Secret as it is now.
func (a *Approver) judgeBound(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) (*corev1.Secret, Verdict, error) {
	id, _ := tokenID(csr)
	s, err := a.Client.CoreV1().Secrets(metav1.NamespaceSystem).Get(ctx, "bootstrap-token-"+id, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		s = nil
	case err != nil:
		return nil, Verdict{}, fmt.Errorf("read the token's Secret: %w", err)
	}
	v := Decide(csr, s)
	if v.Approve && s.Labels[token.NodeLabel] == "" {
		// A single-use token names no node, so it may not take an existing node's identity
		// (a client certificate in the name of a NotReady node: kubernetes#81056). A machine
		// rejoining under its name gets a token bound to that name.
		_, err := a.Client.CoreV1().Nodes().Get(ctx, v.Node, metav1.GetOptions{})
		switch {
		case err == nil:
			v = Verdict{Ours: true, TokenID: v.TokenID, Reason: ReasonNotForNode, Leaked: true, Message: fmt.Sprintf(
				"single-use token %s may not take the identity of existing node %s; the token is deleted (whoever sent this holds it); to rejoin a machine under its name, bind a token to it: kjoin token create --node %s", v.TokenID, v.Node, v.Node)}
		case !apierrors.IsNotFound(err):
			return nil, Verdict{}, fmt.Errorf("read Node %s: %w", v.Node, err)
		}
	}
	return s, v, nil
}

// judgeServing decides on a kubelet serving CSR with its Node as it is now.
func (a *Approver) judgeServing(ctx context.Context, csr *certificatesv1.CertificateSigningRequest) (*corev1.Secret, Verdict, error) {
	var node *corev1.Node
	if name := NodeOfServingCSR(csr); name != "" {
		n, err := a.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		switch {
		case err == nil:
			node = n
		case !apierrors.IsNotFound(err):
			return nil, Verdict{}, fmt.Errorf("read Node %s: %w", name, err)
		}
	}
	return nil, DecideServing(csr, node), nil
}

func client(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// tokenID is the bound token's ID a CSR was made with (ok: made with a bootstrap token).
func tokenID(csr *certificatesv1.CertificateSigningRequest) (string, bool) {
	return strings.CutPrefix(csr.Spec.Username, "system:bootstrap:")
}

// decide carries out v: the claim and the approval, or the denial (and the leaked token's
// deletion).
func (a *Approver) decide(ctx context.Context, csr *certificatesv1.CertificateSigningRequest, secret *corev1.Secret, v Verdict) error {
	secrets := a.Client.CoreV1().Secrets(metav1.NamespaceSystem)
	cond := certificatesv1.CertificateSigningRequestCondition{Type: certificatesv1.CertificateDenied, Status: corev1.ConditionTrue,
		Reason: v.Reason, Message: v.Message, LastUpdateTime: metav1.NewTime(a.Clock.Now())}
	if v.Approve {
		if secret != nil && secret.Annotations[token.UsedByAnnotation] != csr.Name {
			claimed := secret.DeepCopy()
			if claimed.Annotations == nil {
				claimed.Annotations = map[string]string{}
			}
			claimed.Annotations[token.UsedByAnnotation] = csr.Name
			claimed.Annotations[token.UsedAtAnnotation] = a.Clock.Now().UTC().Format(time.RFC3339)
			claimed.Annotations[token.UsedForAnnotation] = v.Node
			if _, err := secrets.Update(ctx, claimed, metav1.UpdateOptions{}); err != nil {
				return fmt.Errorf("claim token %s: %w", v.TokenID, err)
			}
		}
		cond.Type = certificatesv1.CertificateApproved
	}
	out := csr.DeepCopy()
	out.Status.Conditions = append(out.Status.Conditions, cond)
	if _, err := a.Client.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, out, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("record the decision: %w", err)
	}
	verb := "denied"
	if v.Approve {
		verb = "approved"
	}
	a.Logf("%s CSR %s: %s", verb, csr.Name, v.Message)
	if v.Leaked && secret != nil {
		if err := secrets.Delete(ctx, secret.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete the leaked token %s: %w", v.TokenID, err)
		}
		a.Logf("deleted bound token %s: it was used for a request it was not made for", v.TokenID)
	}
	return nil
}

// Sweep deletes each used bound token whose CSR was issued and whose node has registered
// since (the join needs the token no more), or whose claim is older than Linger.
func (a *Approver) Sweep(ctx context.Context) error {
	secrets := a.Client.CoreV1().Secrets(metav1.NamespaceSystem)
	list, err := secrets.List(ctx, metav1.ListOptions{LabelSelector: token.NodeLabel})
	if err != nil {
		return err
	}
	var errs []error
	for i := range list.Items {
		s := &list.Items[i]
		used, node := s.Annotations[token.UsedByAnnotation], s.Labels[token.NodeLabel]
		if used == "" {
			continue
		}
		if node == "" { // a single-use token: the node its claim was for
			node = s.Annotations[token.UsedForAnnotation]
		}
		at, _ := time.Parse(time.RFC3339, s.Annotations[token.UsedAtAnnotation])
		why := ""
		if a.Clock.Since(at) > a.Linger {
			why = fmt.Sprintf("claimed %s ago", a.Clock.Since(at).Round(time.Second))
		} else if csr, err := a.Client.CertificatesV1().CertificateSigningRequests().Get(ctx, used, metav1.GetOptions{}); err == nil && len(csr.Status.Certificate) > 0 {
			if n, err := a.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); err == nil && !n.CreationTimestamp.Time.Before(at.Add(-time.Second)) {
				why = "node " + node + " registered"
			}
		}
		if why == "" {
			continue
		}
		if err := secrets.Delete(ctx, s.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &s.UID}}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
			continue
		}
		a.Logf("deleted bound token %s (used for CSR %s): %s", s.Data["token-id"], used, why)
	}
	return errors.Join(errs...)
}
