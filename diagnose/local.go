package diagnose

import (
	"bufio"
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"kjoin.dev/kjoin/discovery"
	"kjoin.dev/kjoin/host"
	"kjoin.dev/kjoin/pki"
)

// loadKubeletFiles reads kubelet.conf (server, CA), the client certificate and config.yaml.
func (g *diagnosis) loadKubeletFiles() {
	if b, err := g.e.ReadFile(host.KubeletKubeconfig); err == nil {
		if cfg, err := clientcmd.Load(b); err == nil {
			if cl, err := discovery.SelectCluster(cfg); err == nil {
				g.server = cl.Server
				ca := cl.CertificateAuthorityData
				if len(ca) == 0 && cl.CertificateAuthority != "" {
					ca, _ = g.e.ReadFile(cl.CertificateAuthority)
				}
				if certs, err := pki.ParseCerts(ca); err == nil {
					g.caPool, g.caPEM = pki.Pool(certs), pki.EncodeCerts(certs)
				}
			}
		}
	}
	if b, err := g.e.ReadFile(host.KubeletClientCurrent); err == nil {
		g.certPEM = b
		g.cert, _ = pki.ParseCert(b)
	}
	if b, err := g.e.ReadFile(host.KubeletConfigPath); err == nil {
		_ = yaml.Unmarshal(b, &g.kubeletCfg)
	}
}

// joinedCheck tells a node that never joined (no kubelet.conf) from a joined one whose kubelet
// is in trouble: without it every later check would blame the kubelet.
func (g *diagnosis) joinedCheck() {
	if !g.e.Exists(host.KubeletKubeconfig) {
		g.fail("node.joined", "no kubelet.conf: this node has not joined a cluster", host.KubeletKubeconfig+" does not exist")
		return
	}
	g.pass("node.joined", "the node holds a kubelet.conf", host.KubeletKubeconfig)
}

func (g *diagnosis) cfgString(key, def string) string {
	if v, ok := g.kubeletCfg[key].(string); ok && v != "" {
		return v
	}
	return def
}

// kubeletChecks: the service, its /healthz and the last errors in its log.
func (g *diagnosis) kubeletChecks(ctx context.Context) {
	// What systemd says of the unit, read once: restarts for the service's evidence and the
	// crash-loop check.
	props := map[string]string{}
	out, showErr := g.e.Exec.Run(ctx, "systemctl", "show", "kubelet", "--property", "NRestarts,ActiveState,SubState,ExecMainStatus,Result,MainPID,UnitFileState,DropInPaths,ExecStart,Environment")
	if showErr == nil {
		for _, l := range strings.Split(string(out), "\n") {
			if k, v, ok := strings.Cut(strings.TrimSpace(l), "="); ok {
				props[k] = v
			}
		}
	}
	if _, err := g.e.Exec.Run(ctx, "systemctl", "is-active", "--quiet", "kubelet"); err != nil {
		ev := err.Error()
		if st := props["ActiveState"]; st != "" {
			ev += fmt.Sprintf("; systemd: %s/%s, result %s", st, props["SubState"], props["Result"])
		}
		g.fail("kubelet.service", "the kubelet service is not running", ev)
		g.kubeletExited = props["SubState"] == "auto-restart" || (props["Result"] != "" && props["Result"] != "success")
	} else {
		ev := "active"
		if n, ok := props["NRestarts"]; ok {
			ev += ", NRestarts=" + n
		}
		g.pass("kubelet.service", "the kubelet service is running", ev)
	}
	g.kubeletFlagsCheck(props, !g.failed("kubelet.service"))
	g.unitEnabledCheck(props)
	addr := g.cfgString("healthzBindAddress", "127.0.0.1")
	port := 10248
	if p, ok := g.kubeletCfg["healthzPort"].(float64); ok && p > 0 {
		port = int(p)
	}
	url := fmt.Sprintf("http://%s/healthz", host.JoinHostPort(addr, port))
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(cctx, http.MethodGet, url, nil)
	client := http.DefaultClient
	if g.e.HTTPClient != nil {
		client = g.e.HTTPClient(nil) // the kubelet's plain-HTTP healthz: no TLS roots
	}
	resp, err := client.Do(req)
	switch {
	case err != nil:
		ev := err.Error()
		if st := g.processState(props["MainPID"]); st != "" {
			ev += "; " + st
		}
		g.fail("kubelet.healthz", "the kubelet does not answer /healthz", ev)
	default:
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			g.pass("kubelet.healthz", "/healthz ok", url)
		} else {
			g.fail("kubelet.healthz", "/healthz is not ok", fmt.Sprintf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(body))))
		}
	}
	out, err = g.e.Exec.Run(ctx, "journalctl", "-u", "kubelet", "-n", "300", "--no-pager", "-o", "cat")
	g.crashLoopCheck(props, showErr, string(out), err, g.failed("kubelet.healthz"))
	if err != nil {
		g.warn("kubelet.log", "the kubelet's log is not readable", err.Error())
		return
	}
	var errs []string
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if len(l) > 1 && l[0] == 'E' && l[1] >= '0' && l[1] <= '9' { // klog error lines: E1130 ...
			if len(l) > 300 {
				l = l[:300] + "..."
			}
			errs = append(errs, l)
		}
	}
	if len(errs) == 0 {
		g.pass("kubelet.log", "no errors in the kubelet's recent log", "")
		return
	}
	if len(errs) > 5 {
		errs = errs[len(errs)-5:]
	}
	g.warn("kubelet.log", "the kubelet logged errors", strings.Join(errs, "\n"))
}

// renewRemedy is how a node gets a new client certificate once the kubelet cannot rotate it.
const renewRemedy = "renew it in place with a fresh token: kjoin token create on a control plane, then kjoin join with the node's usual flags here (it keeps every other file and the Node, and restarts the kubelet)"

// certChecks: the kubelet's client certificate.
func (g *diagnosis) certChecks() {
	now := g.e.Clock.Now()
	if g.cert == nil {
		g.fail("cert.validity", "no kubelet client certificate", host.KubeletClientCurrent+" is missing or unreadable")
		return
	}
	c := g.cert
	window := fmt.Sprintf("valid %s to %s", c.NotBefore.UTC().Format(time.RFC3339), c.NotAfter.UTC().Format(time.RFC3339))
	life := c.NotAfter.Sub(c.NotBefore)
	used := now.Sub(c.NotBefore)
	switch {
	case now.After(c.NotAfter):
		g.fail("cert.validity", "the kubelet client certificate has expired: the kubelet cannot rotate an expired certificate", window+"; "+renewRemedy)
	case c.NotAfter.Sub(now) < 24*time.Hour && life > 0 && used > life*3/4:
		g.warn("cert.validity", fmt.Sprintf("the kubelet client certificate expires in %s and rotation has not renewed it", c.NotAfter.Sub(now).Round(time.Minute)), window+"; if it expires, "+renewRemedy)
	case now.Before(c.NotBefore):
		g.fail("cert.validity", "the kubelet client certificate is not valid yet (this node's clock is behind?)", window)
	case g.caPool != nil && !verifiesClient(c, g.caPool, now):
		g.fail("cert.validity", "the kubelet client certificate is not issued by the CA in kubelet.conf", window)
	case life > 0 && used > life*3/4:
		g.warn("cert.validity", "the kubelet client certificate is past 75% of its lifetime (rotation should have renewed it)", window)
	default:
		g.pass("cert.validity", "the kubelet client certificate is valid", window)
	}
	if name := strings.TrimPrefix(c.Subject.CommonName, "system:node:"); name != g.r.Node {
		g.fail("cert.node", "the certificate is for another node", fmt.Sprintf("CN %q, node %q", c.Subject.CommonName, g.r.Node))
	} else {
		g.pass("cert.node", "the certificate names this node", c.Subject.CommonName)
	}
	if rot, ok := g.kubeletCfg["rotateCertificates"].(bool); ok && rot {
		g.pass("cert.rotation", "client certificate rotation is on", "rotateCertificates: true")
	} else {
		g.warn("cert.rotation", "client certificate rotation is off: the certificate will expire", "set rotateCertificates: true in the cluster's kubelet-config")
	}
}

func verifiesClient(c *x509.Certificate, roots *x509.CertPool, now time.Time) bool {
	_, err := c.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	return err == nil
}

// cniChecks is part of runtimeChecks: a CNI configuration must exist.
func (g *diagnosis) cniConfig() (string, bool) {
	dir := "/etc/cni/net.d"
	entries, err := os.ReadDir(g.e.Paths.Of(dir))
	if err != nil {
		return dir + ": " + err.Error(), false
	}
	var confs []string
	for _, e := range entries {
		switch filepath.Ext(e.Name()) {
		case ".conf", ".conflist", ".json":
			confs = append(confs, e.Name())
		}
	}
	if len(confs) == 0 {
		return "no .conf/.conflist in " + dir, false
	}
	return dir + ": " + strings.Join(confs, ", "), true
}

// crashLoopCheck names a kubelet that keeps exiting at start. The restarts are counted where
// systemd counts them (NRestarts, the unit waiting in auto-restart) and where only the
// kubelet's log shows them: each exit of a kubelet that fails to start logs "command failed"
// with the error it exits with (and journald adds systemd's "Main process exited" lines). A
// kubelet that answers /healthz is not looping, whatever its log's past says.
func (g *diagnosis) crashLoopCheck(props map[string]string, showErr error, log string, logErr error, unhealthy bool) {
	if showErr != nil && logErr != nil {
		g.skip("kubelet.crashloop", "neither systemd nor the kubelet's log can be read", showErr.Error())
		return
	}
	restarts, _ := strconv.Atoi(props["NRestarts"])
	failedStarts, exited, lastErr := 0, 0, ""
	for _, l := range strings.Split(log, "\n") {
		switch {
		case strings.Contains(l, `"command failed"`):
			failedStarts++
			if _, e, ok := strings.Cut(l, `err="`); ok {
				lastErr = strings.TrimSuffix(e, `"`)
			}
		case strings.Contains(l, "kubelet.service: Main process exited"):
			exited++
		}
	}
	exits := max(failedStarts, exited) // journald logs both lines for one exit
	// Where systemd answers, it says whether the unit is in a restart cycle now: waiting to
	// restart, starting again after restarts, or given up (start-limit-hit). A unit that runs,
	// or failed or stopped for good, is not looping, whatever its log's past says. Without
	// systemd, the kubelet's log is all there is.
	var looping bool
	if st := props["ActiveState"]; st != "" {
		looping = props["SubState"] == "auto-restart" || props["Result"] == "start-limit-hit" || (st == "activating" && restarts >= 2)
	} else {
		looping = unhealthy && exits >= 2
	}
	if !looping {
		g.pass("kubelet.crashloop", "the kubelet is not restarting in a loop", fmt.Sprintf("%d restart(s) counted by systemd, %d failed start(s) in its log", restarts, exits))
		return
	}
	ev := []string{}
	if restarts > 0 || props["SubState"] != "" {
		ev = append(ev, fmt.Sprintf("systemd: %d restart(s), %s/%s, last exit status %s", restarts, props["ActiveState"], props["SubState"], props["ExecMainStatus"]))
	}
	if exits > 0 {
		ev = append(ev, fmt.Sprintf("its log: %d failed start(s)", exits))
	}
	if lastErr != "" {
		if len(lastErr) > 300 {
			lastErr = lastErr[:300] + "..."
		}
		ev = append(ev, "it exits with: "+lastErr)
	}
	g.fail("kubelet.crashloop", "the kubelet keeps exiting at start (a crash loop)", strings.Join(ev, "; "))
}

// unitEnabledCheck warns when the kubelet unit will not start at boot (systemd's
// UnitFileState): a node that reboots would come back without its kubelet.
func (g *diagnosis) unitEnabledCheck(props map[string]string) {
	switch st := props["UnitFileState"]; st {
	case "":
		return // no systemd answer: nothing to say
	case "enabled", "enabled-runtime", "static", "indirect", "generated", "alias":
		g.pass("kubelet.enabled", "the kubelet unit starts at boot", "UnitFileState="+st)
	default:
		g.warn("kubelet.enabled", "the kubelet unit is "+st+": the kubelet will not start after a reboot (systemctl enable kubelet)", "UnitFileState="+st)
	}
}

// kubeletFlagsCheck fails a kubelet started without the join's kubeconfig and configuration:
// its unit lost the drop-in that passes them (kjoin's 10-kjoin.conf or kubeadm's
// 10-kubeadm.conf), so it runs standalone, or exits at start, and never reaches the cluster.
// A running kubelet is judged by its own command line, a stopped one by its unit (ExecStart
// with the unit's Environment, where the drop-ins put the flags).
func (g *diagnosis) kubeletFlagsCheck(props map[string]string, running bool) {
	var words []string
	var source string
	if pid := props["MainPID"]; running && pid != "" && pid != "0" {
		if b, err := g.e.ReadFile("/proc/" + pid + "/cmdline"); err == nil {
			words = strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
			source = "pid " + pid + ": " + strings.Join(words, " ")
		}
	}
	if words == nil {
		argv := execStartArgv(props["ExecStart"])
		if argv == "" {
			return // no systemd answer: nothing to say
		}
		words = strings.Fields(argv + " " + props["Environment"])
		source = "unit: ExecStart " + argv
		if env := props["Environment"]; env != "" {
			source += "; Environment " + env
		}
	}
	has := func(flag string) bool {
		for i, w := range words {
			if strings.Contains(w, flag+"=") || (w == flag && i+1 < len(words)) {
				return true
			}
		}
		return false
	}
	dropIns := props["DropInPaths"]
	if dropIns == "" {
		dropIns = "none"
	}
	ev := source + "; drop-ins: " + dropIns
	if len(ev) > 500 {
		ev = ev[:500] + "..."
	}
	if has("--kubeconfig") && has("--config") {
		g.pass("kubelet.flags", "the kubelet gets a kubeconfig and a configuration file", ev)
		return
	}
	g.fail("kubelet.flags", "the kubelet gets no --kubeconfig and --config from its unit: the drop-in that passes the join's files is missing", ev)
}

// execStartArgv is the command line in systemctl show's ExecStart value
// ("{ path=/usr/bin/kubelet ; argv[]=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS ... ; ... }").
func execStartArgv(v string) string {
	_, rest, ok := strings.Cut(v, "argv[]=")
	if !ok {
		return ""
	}
	argv, _, _ := strings.Cut(rest, " ;")
	return strings.TrimSpace(argv)
}

// processState names a kubelet process that cannot answer: stopped (a SIGSTOP, a debugger)
// or in uninterruptible sleep; "" otherwise.
func (g *diagnosis) processState(pid string) string {
	if pid == "" || pid == "0" {
		return ""
	}
	b, err := g.e.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return ""
	}
	// pid (comm) state ...: comm may hold spaces and parentheses, the state follows the last ")".
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 || i+2 >= len(b) {
		return ""
	}
	switch b[i+2] {
	case 'T', 't':
		return "the kubelet process (pid " + pid + ") is stopped (state T): wedged, not dead"
	case 'D':
		return "the kubelet process (pid " + pid + ") is in uninterruptible sleep (state D), waiting on I/O"
	}
	return ""
}
