// Command mutants applies hand mutations of kjoin's security-critical lines one at a time and
// requires each to make its unit test fail (issue 20): a check that no test guards is a check
// that can silently go. A mutation names its file, the declaration it lives in (a function,
// "Type.Method", or a top-level name) and the code to change, matched with any spacing, so
// moved code, reformatting and edits elsewhere in the file keep it. Mutants are built from
// overlays, never written into the tree; exit 1 if a mutation survives or its code is gone
// (then update the list).
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
)

// mutation changes from to to inside declaration decl of file; run names the unit tests of
// package pkg that must fail.
type mutation struct{ file, decl, from, to, pkg, run string }

var mutations = []mutation{
	{"discovery/token.go", "Token", "if !bytes.Equal(second.kubeconfig, first.kubeconfig) {", "if false && !bytes.Equal(second.kubeconfig, first.kubeconfig) {", "./discovery", "TestPinnedReread"},
	{"discovery/vet.go", "Request.verifyPeer", "opts.CurrentTime, opts.DNSName = r.Clock.Now(), r.host()", "opts.CurrentTime = r.Clock.Now()", "./discovery", "TestAuthenticatedCertificate|TestTokenDiscovery"},
	{"tlsbootstrap/tlsbootstrap.go", "Verify", "\tfor _, c := range chain[1:] {\n\t\tinter.AddCert(c)", "\tfor _, c := range chain[1:] {\n\t\troots.AddCert(c)", "./tlsbootstrap", "TestBundledCA"},
	{"phases/controlplane_prepare.go", "sameCA", "if _, unpinned := pins.Select(up); len(unpinned) > 0 {", "if pinned, unpinned := pins.Select(up); len(pinned) == 0 && len(unpinned) > 0 {", "./phases", "TestUploadedCAMustBeThePinnedCA"},
	{"phases/tlsbootstrap.go", "validIdentity", "if err != nil || cert.Subject.CommonName != \"system:node:\"+s.Opts.NodeName {", "if err != nil {", "./phases", "TestResumedIdentity"},
	{"phases/tlsbootstrap.go", "resumableCSR", "\t\ts.Warn(e, \"tls-bootstrap\", \"CSR %s of an interrupted run is gone; creating a new one\", j.CSR)\n\t\tforgetCSR(e, s)\n\t\treturn \"\"", "\t\ts.Warn(e, \"tls-bootstrap\", \"CSR %s of an interrupted run is gone; creating a new one\", j.CSR)", "./phases", "TestVanishedCSR"},
	{"phases/reset.go", "confined", "strings.HasPrefix(clean, strings.TrimSuffix(dir, \"/\")+\"/\")", "strings.HasPrefix(clean, strings.TrimSuffix(dir, \"/\"))", "./phases", "TestResetConfinement|TestResetDeletes"},
	{"phases/journal.go", "checkJournalStat", "if !st.Mode().IsRegular() {", "if false {", "./phases", "TestJoinRefusesAnUntrustedJournal|TestJournalThatIsNotAPlainPrivateFileIsRefused"},
	{"phases/journal.go", "checkJournalStat", "sys.Uid != 0 && int(sys.Uid) != os.Geteuid()", "false", "./phases", "TestJournalOwnedBy"},
	{"verify/verify.go", "verifier.leaseCheck", "\tif holder != name {", "\tif false {", "./verify", "TestFaultsAreNamed"},
	{"cmd/kjoin/app/render.go", "NewErrorJSON", "out.Retryable = e.Retryable || code == operr.Busy || code == operr.Timeout", "out.Retryable = e.Retryable", "./cmd/kjoin/app", "TestErrorJSONRetryable"},
	{"operr/operr.go", "Trust", "\tTrust     Code = 4", "\tTrust     Code = 9", "./operr", "TestExitCodes"},
	{"operr/operr.go", "Busy", "\tBusy      Code = 7", "\tBusy      Code = 17", "./operr", "TestExitCodes"},
	{"diagnose/verdict.go", "causes", "\t{\"kubelet.service\", \"the kubelet is not running\", \"start it: systemctl enable --now kubelet; then journalctl -xeu kubelet for why it stopped\"},", "", "./diagnose", "TestVerdictOrder"},
	{"phases/etcdjoin.go", "runEtcdJoin", "\t\t\treturn e.Fx().Remove(path.Join(dataDir, etcdMemberData))", "\t\t\treturn e.Fx().Remove(dataDir)", "./phases", "TestFailedEtcdJoin"},
	{"phases/etcd_datadir.go", "checkEtcdDataDir", "\tif slices.Contains(systemDirs, clean) {", "\tif slices.Contains(systemDirs, clean) && false {", "./phases", "TestControlPlaneJoinRefusesASystem|TestWhatKjoin"},
	{"phases/reset_files.go", "resetTargets", "\tif !s.Journaled || j.Adopted {", "\tif true {", "./phases", "TestResetWithJournal"},
	{"manifests/manifests.go", "localhostOf", "\tif ip := net.ParseIP(advertise); ip != nil && ip.To4() == nil {", "\tif ip := net.ParseIP(advertise); ip != nil && false {", "./manifests", "TestRenderMatchesKubeadmOfEachMinor"},
	{"phases/versioncheck.go", "checkRuntime", "\tif !info.RuntimeConfig {", "\tif false {", "./phases", "TestRuntimeCheck"},
	{"phases/versioncheck.go", "checkRuntime", "\t\tcase !cri.SandboxMatches(info.SandboxImage, want):", "\t\tcase false:", "./phases", "TestRuntimeCheck"},
	{"cri/cri.go", "Client.sandboxImage", "\t\tif !img.Pinned {", "\t\tif false {", "./cri", "TestDescribe"},
	{"approver/decide.go", "nodeRequestProblems", "\tif want := \"system:node:\" + node; req.Subject.CommonName != want {", "\tif want := \"system:node:\" + node; false && req.Subject.CommonName != want {", "./approver", "TestDecideChecksEveryField|TestDecideServingChecksEveryField"},
	{"approver/decide.go", "nodeRequestProblems", "\tif !slices.Equal(req.Subject.Organization, []string{\"system:nodes\"}) {", "\tif false {", "./approver", "TestDecideChecksEveryField"},
	{"approver/decide.go", "Decide", "\tif used := secret.Annotations[token.UsedByAnnotation]; used != \"\" && used != csr.Name {", "\tif used := secret.Annotations[token.UsedByAnnotation]; false && used != csr.Name {", "./approver", "TestDecideChecksEveryField"},
	{"approver/approver.go", "Approver.decide", "\t\tif secret != nil && secret.Annotations[token.UsedByAnnotation] != csr.Name {", "\t\tif false {", "./approver", "TestHandleApprovesOnceAndDeniesTheRest"},
	{"approver/serving.go", "servingProblems", "\t\tif !slices.Contains(ips, ip.String()) {", "\t\tif false {", "./approver", "TestDecideServingChecksEveryField"},
	{"approver/serving.go", "servingProblems", "\t\tif !slices.Contains(names, d) {", "\t\tif false {", "./approver", "TestDecideServingChecksEveryField"},
	{"joinstring/joinstring.go", "Parse", "\t\tif binary.BigEndian.Uint32(b[len(b)-4:]) != sum(p.label, v) {", "\t\tif false {", "./joinstring", "TestRefusalNamesThePart"},
	{"phases/leave.go", "nodePodReads.Get", "\tif apierrors.IsForbidden(err) {\n\t\treturn nil, apierrors.NewNotFound(corev1.Resource(\"pods\"), name)", "\tif false {\n\t\treturn nil, apierrors.NewNotFound(corev1.Resource(\"pods\"), name)", "./phases", "TestLeaveWithTheNodesOwnCredentialsDrains"},
	{"phases/reset_etcd.go", "removeEtcdMember", "\thandOffLeadership(ctx, e, cli, clientURL, self, otherIDs, warn)\n", "\t_ = otherIDs\n", "./phases", "TestLeaveControlPlaneHandsOffEtcdLeadership"},
	{"host/apiplan.go", "dryRunRequest", "\tq.Set(\"dryRun\", metav1.DryRunAll)", "\tq.Set(\"dryRun\", \"\")", "./host", "TestPlannedClientSendsChangesAsServerSideDryRuns"},
	{"host/apiplan.go", "dryRunRequest", "\t\topts[\"dryRun\"] = []string{metav1.DryRunAll}", "\t\t_ = opts", "./host", "TestPlannedClientSendsChangesAsServerSideDryRuns"},
	{"approver/decide.go", "Decide", "\t\tif node = requestedNode(csr); node == \"\" {", "\t\tif node = \"w1\"; node == \"\" {", "./approver", "TestDecideSingleUse"},
	{"approver/approver.go", "Approver.judgeBound", "\t\tcase err == nil:\n\t\t\tv = Verdict{", "\t\tcase false:\n\t\t\tv = Verdict{", "./approver", "TestSingleUseTokenRefusesAnExistingNodesName"},
	{"phases/approver.go", "runStartApprover", "func(j *Journal) *bool { return &j.EnabledApprover }", "func(*Journal) *bool { return new(bool) }", "./phases", "TestControlPlaneJoinStartsTheApprover"},
	{"tlsbootstrap/tlsbootstrap.go", "waitFrom", "\t\tcase seen != nil:", "\t\tcase false:", "./tlsbootstrap", "TestWaitCreatedWatchesFromTheCreatesAnswer"},
	{"phases/reset.go", "ResetState.remove", "\t\tif f.Kind == host.EffectRemove && f.Path == hostPath {", "\t\tif f.Kind == host.EffectRemove && f.Path == hostPath && false {", "./phases", "TestLeaveControlPlaneDryRunPlansEachRemovalOnce"},
	{"phases/reset_kubelet.go", "stopUnit", "\tif enabledByJoin {", "\tif true {", "./phases", "TestResetDisablesOnlyTheUnitTheJoinEnabled"},
	{"phases/reset_kubelet.go", "runResetKubelet", "\tif !e.Fx().Planning() {", "\tif true {", "./phases", "TestResetDryRunChangesNothing"},
	{"diagnose/local.go", "diagnosis.kubeletChecks", "g.kubeletExited = props[", "_ = props[", "./diagnose", "TestFaultsNamedByTheVerdict"},
	{"etcd/join.go", "Join.watchPublish", "\t\tcase st.Applied >= published:\n\t\t\tif since.IsZero() {", "\t\tcase st.Pending > 0:\n\t\t\tif since.IsZero() {", "./etcd", "TestJoinKnowsAStalledPublishFromTheLearnersState"},
	{"tlsbootstrap/tlsbootstrap.go", "waitFrom", "\twatcher := r.Watcher\n", "\twatcher := r.Client\n\t_ = r.Watcher\n", "./tlsbootstrap", "TestCSRWatchedByTheWatcherForAMinute"},
	{"tlsbootstrap/tlsbootstrap.go", "watchUntilFinal", "AllowWatchBookmarks: true, TimeoutSeconds: &secs}", "AllowWatchBookmarks: true, TimeoutSeconds: func() *int64 { _ = secs; return nil }()}", "./tlsbootstrap", "TestCSRWatchedByTheWatcherForAMinute"},
	{"phases/discovery.go", "runDiscovery", "\twcfg.Timeout = 0\n", "\t_ = 0\n", "./phases", "TestDiscoveryMakesAWatcherWithoutTheRequestTimeout"},
	{"phases/kubeletstart.go", "runKubeletStart", "s.Opts.ControlPlane && s.etcdJoinFollows &&", "s.Opts.ControlPlane &&", "./phases", "TestControlPlaneKubeletStartsInItsEtcdTurn"},
	{"etcd/join.go", "Join.Run", "\tif j.OnTurn != nil {\n\t\tif err := j.OnTurn(ctx); err != nil {", "\tif j.OnTurn != nil {\n\t\tif err := j.OnTurn(ctx); err == nil {", "./etcd", "TestJoinOnTurnRunsUnderTheLock"},
	{"phases/reset_staticpods.go", "removeStaticPods", "\t\tif path.Dir(path.Clean(t)) != host.ManifestsDir || !strings.HasSuffix(t, \".yaml\") || path.Clean(t) == keep {", "\t\tif false && (path.Dir(path.Clean(t)) != host.ManifestsDir || !strings.HasSuffix(t, \".yaml\")) || path.Clean(t) == keep {", "./phases", "TestResetWith|TestResetStaticPodsRemovesOnlyManifests"},
}

func main() {
	// An optional argument, a regular expression, picks the mutations whose declaration it
	// matches (go run ./e2e/cmd/mutants 'stopUnit|waitFrom'): a quick check of new entries.
	var only *regexp.Regexp
	if len(os.Args) > 1 {
		only = regexp.MustCompile(os.Args[1])
	}
	dir, err := os.MkdirTemp("", "kjoin-mutants-")
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	var picked []mutation
	for _, m := range mutations {
		if only == nil || only.MatchString(m.decl) {
			picked = append(picked, m)
		}
	}
	// Each mutant is built from an overlay (go test -overlay): the source tree is never
	// written, so mutants run side by side (one per CPU: each is mostly a compile and a link)
	// and an interrupted run leaves nothing mutated behind. Results print as they finish.
	type result struct {
		line     string
		survived bool
	}
	next, results := make(chan int), make(chan result)
	for range max(1, min(runtime.NumCPU(), len(picked))) {
		go func() {
			for i := range next {
				line, survived := run(picked[i], dir, i)
				results <- result{line, survived}
			}
		}()
	}
	go func() {
		for i := range picked {
			next <- i
		}
		close(next)
	}()
	survived := 0
	for range picked {
		r := <-results
		fmt.Println(r.line)
		if r.survived {
			survived++
		}
	}
	_ = os.RemoveAll(dir)
	if survived > 0 {
		fmt.Printf("%d mutation(s) survived or lost their code\n", survived)
		os.Exit(1)
	}
}

// run builds and tests one mutant through an overlay in dir; it returns its result line and
// whether it survived (or its code is gone).
func run(m mutation, dir string, i int) (string, bool) {
	orig, err := os.ReadFile(m.file)
	if err != nil {
		return fmt.Sprintf("MISSING %s %v", m.file, err), true
	}
	mutated, err := apply(m.file, orig, m.decl, m.from, m.to)
	if err != nil {
		return fmt.Sprintf("MISSING (update this list) %s: %v", m.file, err), true
	}
	abs, err := filepath.Abs(m.file)
	if err != nil {
		return fmt.Sprintf("MISSING %s %v", m.file, err), true
	}
	src := filepath.Join(dir, fmt.Sprintf("%d.go", i))
	overlay := filepath.Join(dir, fmt.Sprintf("%d.json", i))
	spec, _ := json.Marshal(map[string]map[string]string{"Replace": {abs: src}})
	if err := os.WriteFile(src, mutated, 0o600); err != nil {
		return fmt.Sprintf("MISSING %s %v", m.file, err), true
	}
	if err := os.WriteFile(overlay, spec, 0o600); err != nil {
		return fmt.Sprintf("MISSING %s %v", m.file, err), true
	}
	// Vet and the debug information are left out: the tree's own vet ran, and a mutant's test
	// binary is linked once and thrown away (about 40 % of make mutants-hand's time).
	out, err := exec.Command("go", "test", "-vet=off", "-ldflags=-s -w", "-overlay", overlay, "-count=1", "-run", m.run, m.pkg).CombinedOutput()
	status, survived := "KILLED", err == nil
	switch {
	case survived:
		status = "SURVIVED"
	case strings.Contains(string(out), "[build failed]") || strings.Contains(string(out), "[setup failed]"):
		// A mutant that does not compile proves nothing about the tests.
		status, survived = "BROKEN (update this list)", true
	}
	return fmt.Sprintf("%s %s %s | %.70s", status, m.file, m.decl, strings.Join(strings.Fields(m.from), " ")), survived
}
