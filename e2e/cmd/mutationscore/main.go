// Command mutationscore runs a mutation tester (go-gremlins v0.6.0) over kjoin's security- and
// data-critical packages and compares its survivors with a committed baseline: a survivor the
// baseline does not list (with the reason it may survive) fails the run, and so does a baseline
// entry that no longer survives (the baseline only shrinks). It writes MUTANTS.md, the score per
// package and every survivor with its reason.
//
// A survivor is keyed by its file, its enclosing function, the mutation type and the text of
// its line (and its rank among equal keys), not by line number: moving code leaves the baseline
// valid; changing a line that had a survivor asks for the survivor to be looked at again.
//
//	go run ./e2e/cmd/mutationscore                     # every package: the full run (make mutants)
//	go run ./e2e/cmd/mutationscore -packages ./token   # some packages
//	go run ./e2e/cmd/mutationscore -diff v0.1.0        # only lines changed since a commit
//	go run ./e2e/cmd/mutationscore -changed            # only lines changed since each package's last score (make check)
//	go run ./e2e/cmd/mutationscore -update             # add new survivors to the baseline as "untriaged"
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"
)

// Packages are the packages whose mutants are scored: what decides trust, identity, file
// modes, etcd membership and what the operator is told.
var Packages = []string{"./discovery", "./tlsbootstrap", "./certs", "./pki", "./token", "./joinconfig", "./etcd", "./phases", "./cmd/kjoin/app"}

// Only names the files mutated in a package where not all of them are scored: of the
// command layer, the render path alone (what an error prints, redacted, and its exit code);
// the rest of it is flag plumbing that the phases' and packages' own mutants cover. Of the
// phases, the files issue 31 found survivors in (the pending key's mode, what reset deletes
// and its etcd quorum count, the kubelet's node name, the taints, wait-ready's timeout, the
// journal's trust, the etcd data dir) and the join's trust and membership path (discovery,
// preflight's ownership of a node's files, the kubelet's start, etcd-join, the control
// plane's start): about 380 runnable mutants, about an hour on two cores; the other phase
// files are not scored yet.
var Only = map[string][]string{
	"./cmd/kjoin/app": {"render.go"},
	"./phases": {"tlsbootstrap.go", "reset_files.go", "reset_etcd.go", "kubeletconfig.go", "markcontrolplane.go",
		"waitready.go", "journal.go", "etcd_datadir.go",
		"discovery.go", "preflight.go", "kubeletstart.go", "etcdjoin.go", "controlplane_start.go"},
}

const (
	gremlins     = "github.com/go-gremlins/gremlins/cmd/gremlins@v0.6.0"
	baselineFile = "e2e/mutants-baseline.tsv"
	reportFile   = "MUTANTS.md"
	untriaged    = "untriaged"
)

// result is gremlins' JSON output (its internal/report format).
type result struct {
	Files []struct {
		Name      string `json:"file_name"`
		Mutations []struct {
			Type   string `json:"type"`
			Status string `json:"status"`
			Line   int    `json:"line"`
			Column int    `json:"column"`
		} `json:"mutations"`
	} `json:"files"`
	ElapsedTime float64 `json:"elapsed_time"`
}

// score is one package's tally.
type score struct {
	pkg                                            string
	killed, lived, notCovered, timedOut, notViable int
	// caseClauses are mutants of case clauses, which gremlins cannot run (see run).
	caseClauses int
	seconds     float64
}

func (s score) efficacy() float64 {
	if s.killed+s.lived+s.notCovered == 0 {
		return 100
	}
	return 100 * float64(s.killed+s.timedOut) / float64(s.killed+s.timedOut+s.lived+s.notCovered)
}

// survivor is a mutant no unit test kills: it lived, or no test runs its line.
type survivor struct {
	key, pkg, where, status string
}

func main() {
	pkgs := flag.String("packages", strings.Join(Packages, ","), "comma-separated packages to mutate")
	diff := flag.String("diff", "", "mutate only the lines changed since this git ref")
	update := flag.Bool("update", false, "add new survivors to the baseline as untriaged and drop the killed ones")
	workers := flag.Int("workers", 0, "gremlins workers (0: one per CPU)")
	outDir := flag.String("out", "_artifacts/mutants", "where gremlins' JSON results are kept")
	reuse := flag.Bool("reuse", false, "read gremlins' results from -out instead of running it")
	changed := flag.Bool("changed", false, "in each package, mutate only the lines changed since its row in "+reportFile+
		" last changed (its last score), and skip a package unchanged since; writes no report")
	flag.Parse()
	partial := *diff != "" || *changed

	baseline, order, err := readBaseline(baselineFile)
	if err != nil {
		fail(err)
	}
	var scores []score
	var survivors []survivor
	for _, pkg := range strings.Split(*pkgs, ",") {
		since := *diff
		if *changed {
			base, err := scoredAt(pkg)
			if err != nil {
				fail(fmt.Errorf("%s: %w", pkg, err))
			}
			if same, err := unchangedSince(base, pkg); err != nil {
				fail(fmt.Errorf("%s: %w", pkg, err))
			} else if same {
				fmt.Printf("%-16s unchanged since its score (%.12s): not mutated\n", pkg, base)
				continue
			}
			since = base
		}
		sc, sv, err := run(pkg, since, *workers, *outDir, *reuse)
		if err != nil {
			fail(fmt.Errorf("%s: %w", pkg, err))
		}
		if since != "" {
			fmt.Printf("%-16s lines changed since %.12s:\n", pkg, since)
		}
		fmt.Printf("%-16s killed %3d  lived %3d  not covered %3d  timed out %2d  case clauses %2d  efficacy %5.1f%%  (%.0fs)\n",
			pkg, sc.killed, sc.lived, sc.notCovered, sc.timedOut, sc.caseClauses, sc.efficacy(), sc.seconds)
		scores = append(scores, sc)
		survivors = append(survivors, sv...)
	}

	ran := map[string]bool{}
	for _, p := range strings.Split(*pkgs, ",") {
		ran[strings.TrimPrefix(p, "./")] = true
	}
	alive := map[string]bool{}
	var fresh, unreasoned []survivor
	for _, s := range survivors {
		alive[s.key] = true
		switch reason, ok := baseline[s.key]; {
		case !ok:
			fresh = append(fresh, s)
		case reason == untriaged:
			unreasoned = append(unreasoned, s)
		}
	}
	var killed []string
	if !partial {
		for _, k := range order {
			if ranFor(ran, pkgOfKey(k)) && !alive[k] {
				killed = append(killed, k)
			}
		}
	}

	if *update {
		for _, s := range fresh {
			baseline[s.key] = untriaged
			order = append(order, s.key)
		}
		order = slices.DeleteFunc(order, func(k string) bool { return slices.Contains(killed, k) })
		if err := writeBaseline(baselineFile, baseline, order); err != nil {
			fail(err)
		}
		fmt.Printf("baseline: %d added as %q, %d killed ones dropped\n", len(fresh), untriaged, len(killed))
		unreasoned = append(unreasoned, fresh...)
		fresh, killed = nil, nil
	}
	if !partial {
		if err := writeReport(scores, survivors, baseline, ran); err != nil {
			fail(err)
		}
	}

	bad := false
	for _, s := range fresh {
		fmt.Printf("NEW SURVIVOR %s (%s, %s): kill it with a test, or add it to %s with the reason it may survive\n", s.where, s.status, s.key, baselineFile)
		bad = true
	}
	for _, s := range unreasoned {
		fmt.Printf("UNTRIAGED %s (%s): give the reason in %s, or kill it\n", s.where, s.key, baselineFile)
		bad = true
	}
	for _, k := range killed {
		fmt.Printf("KILLED NOW %s: remove it from %s (the baseline only shrinks)\n", k, baselineFile)
		bad = true
	}
	if bad {
		os.Exit(1)
	}
	fmt.Printf("every survivor is in the baseline with its reason (%d survivors)\n", len(survivors))
}

// run mutates one package with gremlins and returns its score and survivors.
// Its output is kept in outDir (reuse: read it from there, run nothing).
func run(pkg, diff string, workers int, outDir string, reuse bool) (score, []survivor, error) {
	out := filepath.Join(outDir, strings.ReplaceAll(strings.TrimPrefix(pkg, "./"), "/", "_")+".json")
	if !reuse {
		if err := os.MkdirAll(outDir, 0o755); err != nil {
			return score{}, nil, err
		}
		// gremlins names a mutant's file relative to the package directory it walks, and with
		// --diff looks it up among git diff's names, which are relative to the repository:
		// run from the root, --diff matched no file of a package and mutated nothing. A diff
		// run goes in the package's directory, with git diff's names made relative to it and
		// absolute paths for its target (gremlins finds the module from it) and its output.
		target, output, dir := pkg, out, ""
		var env []string
		if diff != "" {
			var err error
			if target, err = filepath.Abs(pkg); err != nil {
				return score{}, nil, err
			}
			if output, err = filepath.Abs(out); err != nil {
				return score{}, nil, err
			}
			dir, env = pkg, append(os.Environ(), "GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=diff.relative", "GIT_CONFIG_VALUE_0=true")
		}
		// Test helpers (discoverytest, fakes) are not the product: not mutated.
		args := []string{"run", gremlins, "unleash", "--output", output, "--timeout-coefficient", "20", "--exclude-files", `(^|/)[a-z]*test/`}
		if only := Only[pkg]; len(only) > 0 {
			others, err := othersThan(pkg, only)
			if err != nil {
				return score{}, nil, err
			}
			args = append(args, "--exclude-files", others)
		}
		if diff != "" {
			args = append(args, "--diff", diff)
		}
		if workers > 0 {
			args = append(args, "--workers", fmt.Sprint(workers))
		}
		cmd := exec.Command("go", append(args, target)...)
		cmd.Dir, cmd.Env = dir, env
		cmd.Stderr = os.Stderr
		if log, err := cmd.Output(); err != nil {
			return score{}, nil, fmt.Errorf("gremlins: %w\n%s", err, log)
		}
	}
	b, err := os.ReadFile(out)
	if err != nil {
		return score{}, nil, err
	}
	var r result
	if err := json.Unmarshal(b, &r); err != nil {
		return score{}, nil, fmt.Errorf("gremlins' output: %w", err)
	}
	sc := score{pkg: strings.TrimPrefix(pkg, "./"), seconds: r.ElapsedTime}
	var sv []survivor
	rank := map[string]int{}
	for _, f := range r.Files {
		f.Name = filepath.Join(strings.TrimPrefix(pkg, "./"), f.Name) // gremlins names files from the package's directory
		src, err := readSource(f.Name)
		if err != nil {
			return sc, nil, err
		}
		ms := f.Mutations
		sort.Slice(ms, func(i, j int) bool {
			if ms[i].Line != ms[j].Line {
				return ms[i].Line < ms[j].Line
			}
			return ms[i].Column < ms[j].Column
		})
		for _, m := range ms {
			switch m.Status {
			case "KILLED":
				sc.killed++
			case "TIMED OUT":
				sc.timedOut++
			case "NOT VIABLE":
				sc.notViable++
			case "NOT COVERED":
				if strings.HasPrefix(src.line(m.Line), "case ") {
					// Go's coverage profile gives a case clause's expressions no block, so
					// gremlins takes every mutant of one as not covered and never runs it.
					sc.caseClauses++
					continue
				}
				fallthrough
			case "LIVED":
				if m.Status == "LIVED" {
					sc.lived++
				} else {
					sc.notCovered++
				}
				base := fmt.Sprintf("%s\t%s\t%s\t%s", f.Name, src.funcAt(m.Line), m.Type, src.line(m.Line))
				rank[base]++
				sv = append(sv, survivor{key: fmt.Sprintf("%s\t%d", base, rank[base]), pkg: sc.pkg, where: fmt.Sprintf("%s:%d:%d", f.Name, m.Line, m.Column), status: m.Status})
			}
		}
	}
	return sc, sv, nil
}

// source is one Go file: its lines and its functions' line spans.
type source struct {
	lines []string
	funcs []struct {
		name       string
		start, end int
	}
}

func readSource(name string) (*source, error) {
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, err
	}
	s := &source{lines: strings.Split(string(b), "\n")}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, b, 0)
	if err != nil {
		return nil, err
	}
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok {
			n := fd.Name.Name
			if fd.Recv != nil && len(fd.Recv.List) > 0 {
				n = recvName(fd.Recv.List[0].Type) + "." + n
			}
			s.funcs = append(s.funcs, struct {
				name       string
				start, end int
			}{n, fset.Position(fd.Pos()).Line, fset.Position(fd.End()).Line})
		}
	}
	return s, nil
}

func recvName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return recvName(t.X)
	case *ast.IndexExpr:
		return recvName(t.X)
	case *ast.Ident:
		return t.Name
	}
	return "?"
}

func (s *source) funcAt(line int) string {
	for _, f := range s.funcs {
		if line >= f.start && line <= f.end {
			return f.name
		}
	}
	return "(package level)"
}

func (s *source) line(n int) string {
	if n < 1 || n > len(s.lines) {
		return ""
	}
	return strings.Join(strings.Fields(s.lines[n-1]), " ")
}

func pkgOfKey(k string) string { return filepath.Dir(strings.SplitN(k, "\t", 2)[0]) }

// ranFor reports whether the package directory dir, or a parent of it, was mutated in this run.
func ranFor(ran map[string]bool, dir string) bool {
	for ; dir != "." && dir != "/"; dir = filepath.Dir(dir) {
		if ran[dir] {
			return true
		}
	}
	return false
}

// readBaseline reads survivor keys and their reasons (key fields, then the reason, tab-separated).
func readBaseline(name string) (map[string]string, []string, error) {
	m := map[string]string{}
	var order []string
	f, err := os.Open(name)
	if os.IsNotExist(err) {
		return m, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		l := sc.Text()
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		fields := strings.Split(l, "\t")
		if len(fields) != 6 || strings.TrimSpace(fields[5]) == "" {
			return nil, nil, fmt.Errorf("%s:%d: want file, function, type, line text, rank and reason, tab-separated", name, n)
		}
		k := strings.Join(fields[:5], "\t")
		m[k] = fields[5]
		order = append(order, k)
	}
	return m, order, sc.Err()
}

func writeBaseline(name string, m map[string]string, order []string) error {
	var b strings.Builder
	b.WriteString("# Mutants no unit test kills, each with the reason it may survive (e2e/cmd/mutationscore).\n")
	b.WriteString("# file\tfunction\tmutation\tline text\trank\treason\n")
	sort.Strings(order)
	for _, k := range slices.Compact(order) {
		fmt.Fprintf(&b, "%s\t%s\n", k, m[k])
	}
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return err
	}
	return os.WriteFile(name, []byte(b.String()), 0o644)
}

// earlierRows returns the rows of the existing report (its score table and its survivors
// table) that belong to packages this run did not mutate, so that a run of some packages
// keeps the others' last results.
func earlierRows(report string, ran map[string]bool) (scoreRows, survivorRows []string, dates string) {
	b, err := os.ReadFile(report)
	if err != nil {
		return nil, nil, ""
	}
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(l, "| `") {
			continue
		}
		name := strings.SplitN(strings.TrimPrefix(l, "| `"), "`", 2)[0]
		if file, _, ok := strings.Cut(name, ":"); ok { // a survivor: file:line:column
			if !ranFor(ran, filepath.Dir(file)) {
				survivorRows = append(survivorRows, l)
			}
		} else if !ranFor(ran, name) {
			scoreRows = append(scoreRows, l)
		}
	}
	if i := strings.Index(string(b), " on "); i >= 0 {
		dates = strings.SplitN(string(b)[i+4:], ";", 2)[0]
	}
	return scoreRows, survivorRows, dates
}

func writeReport(scores []score, survivors []survivor, baseline map[string]string, ran map[string]bool) error {
	oldScores, oldSurvivors, oldDate := earlierRows(reportFile, ran)
	var b strings.Builder
	var pkgs []string
	for _, s := range scores {
		pkgs = append(pkgs, "./"+s.pkg)
	}
	var secs float64
	for _, s := range scores {
		secs += s.seconds
	}
	fmt.Fprintf(&b, "# Mutation score\n\nGenerated by `go run ./e2e/cmd/mutationscore -packages %s` on %s; gremlins ran %s in all\n(each package's time below; %d cores), with\n",
		strings.Join(pkgs, ","), time.Now().UTC().Format("2006-01-02"), (time.Duration(secs) * time.Second).Round(time.Second), runtime.NumCPU())
	fmt.Fprintf(&b, "[go-gremlins](https://github.com/go-gremlins/gremlins) v0.6.0's default mutations (arithmetic, conditional boundaries and\n")
	fmt.Fprintf(&b, "negations, increments, negatives), each package's own unit tests run against each mutant. A survivor\n")
	fmt.Fprintf(&b, "lived (every test passed) or is not covered (no unit test runs its line). Every survivor is in\n")
	fmt.Fprintf(&b, "`%s` with the reason it may survive; a new one fails the run.\n", baselineFile)
	if len(oldScores) > 0 {
		fmt.Fprintf(&b, "The rows of packages this run did not mutate are kept from the report before it (run on %s).\n", oldDate)
	}
	b.WriteString("\n")
	b.WriteString("| package | killed | timed out | lived | not covered | case clauses (not run) | efficacy | seconds |\n|---|---|---|---|---|---|---|---|\n")
	for _, l := range oldScores {
		b.WriteString(l + "\n")
	}
	for _, s := range scores {
		fmt.Fprintf(&b, "| `%s` | %d | %d | %d | %d | %d | %.1f %% | %.0f |\n", s.pkg, s.killed, s.timedOut, s.lived, s.notCovered, s.caseClauses, s.efficacy(), s.seconds)
	}
	open := map[string]int{}
	for _, s := range survivors {
		if r, ok := baseline[s.key]; !ok || r == untriaged {
			open[s.pkg]++
		}
	}
	if len(open) > 0 {
		fmt.Fprintf(&b, "\nNot triaged yet (so `make mutants` fails until each is killed or given its reason):")
		for _, p := range slices.Sorted(maps.Keys(open)) {
			fmt.Fprintf(&b, " `%s` %d;", p, open[p])
		}
		b.WriteString("\n")
	}
	b.WriteString("\nEfficacy: killed (or timed out) of killed, timed out, lived and not covered. Mutants of `case` clauses\n")
	b.WriteString("are left out of it: Go's coverage profile gives a case expression no block, so gremlins marks every\n")
	b.WriteString("such mutant not covered and never runs it (the hand mutations in `make mutants-hand` cover some).\n\n## Survivors\n\n| where | mutation | line | status | reason |\n|---|---|---|---|---|\n")
	for _, l := range oldSurvivors {
		b.WriteString(l + "\n")
	}
	for _, s := range survivors {
		f := strings.Split(s.key, "\t")
		fmt.Fprintf(&b, "| `%s` (%s) | %s | `%s` | %s | %s |\n", s.where, f[1], f[2], strings.ReplaceAll(f[3], "|", "\\|"), strings.ToLower(s.status), baseline[s.key])
	}
	return os.WriteFile(reportFile, []byte(b.String()), 0o644)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "mutationscore:", err)
	os.Exit(2)
}

// scoredAt is the commit at which pkg was last scored: the oldest commit in the run of
// commits, back from HEAD, whose report has pkg's score row exactly as HEAD's (a run rewrites the
// row, its seconds at least; runs of other packages keep it verbatim, wherever it moves).
func scoredAt(pkg string) (string, error) {
	row := func(rev string) string {
		b, err := exec.Command("git", "show", rev+":"+reportFile).Output()
		if err != nil {
			return ""
		}
		prefix := "| `" + strings.TrimPrefix(pkg, "./") + "` |"
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, prefix) {
				return l
			}
		}
		return ""
	}
	out, err := exec.Command("git", "log", "--format=%H", "--", reportFile).Output()
	if err != nil {
		return "", fmt.Errorf("git log %s: %w", reportFile, err)
	}
	want, base := row("HEAD"), ""
	if want == "" {
		return "", fmt.Errorf("%s has no row for %s: score it first (make mutants MUTANT_PACKAGES=%s)", reportFile, pkg, pkg)
	}
	for _, c := range strings.Fields(string(out)) {
		if row(c) != want {
			break
		}
		base = c
	}
	if base == "" {
		return "", fmt.Errorf("%s's row for %s is not committed", reportFile, pkg)
	}
	return base, nil
}

// unchangedSince reports whether none of the Go files gremlins mutates in pkg (its Only files,
// or every non-test file outside the test-helper packages) differs from base in the working tree.
func unchangedSince(base, pkg string) (bool, error) {
	dir := strings.TrimPrefix(pkg, "./")
	spec := []string{dir + "/*.go", ":(exclude)*_test.go", ":(exclude,glob)" + dir + "/**/*test/**"}
	if only := Only[pkg]; len(only) > 0 {
		spec = nil
		for _, f := range only {
			spec = append(spec, dir+"/"+f)
		}
	}
	err := exec.Command("git", append([]string{"diff", "--quiet", base, "--"}, spec...)...).Run()
	if err == nil {
		return true, nil
	}
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 1 {
		return false, nil
	}
	return false, fmt.Errorf("git diff %.12s: %w", base, err)
}

// othersThan is a gremlins file exclusion matching every Go file of pkg but those named.
func othersThan(pkg string, only []string) (string, error) {
	entries, err := os.ReadDir(pkg)
	if err != nil {
		return "", err
	}
	var others []string
	for _, e := range entries {
		name := e.Name()
		if !e.IsDir() && strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") && !slices.Contains(only, name) {
			others = append(others, regexp.QuoteMeta(name))
		}
	}
	if len(others) == 0 {
		return "", fmt.Errorf("%s has no Go files but %v", pkg, only)
	}
	return `(^|/)(` + strings.Join(others, "|") + `)$`, nil
}
