package phases

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"kjoin.dev/kjoin/host"
)

// changesOutsideEffects lists each place in a Go file that changes the node without
// host.Effects: an os call that writes, links, makes or removes, any use of atomicfile, a
// systemctl command that is not a question, and a Kubernetes client built without the
// effects (Env.NewClient instead of Env.Client, whose client a dry run cannot change the
// cluster with).
func changesOutsideEffects(fset *token.FileSet, f *ast.File) []string {
	writes := map[string]bool{"WriteFile": true, "Remove": true, "RemoveAll": true, "Mkdir": true, "MkdirAll": true, "Symlink": true,
		"Link": true, "Rename": true, "Create": true, "Chmod": true, "Chown": true, "Truncate": true}
	questions := map[string]bool{"is-active": true, "is-enabled": true, "is-failed": true, "show": true, "status": true, "cat": true}
	var found []string
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SelectorExpr:
			if id, ok := n.X.(*ast.Ident); ok && ((id.Name == "os" && writes[n.Sel.Name]) || id.Name == "atomicfile") {
				found = append(found, fset.Position(n.Pos()).String()+": "+id.Name+"."+n.Sel.Name)
			}
			if n.Sel.Name == "NewClient" {
				found = append(found, fset.Position(n.Pos()).String()+": a client built with NewClient")
			}
		case *ast.CallExpr:
			for i, a := range n.Args {
				if lit, ok := a.(*ast.BasicLit); ok && lit.Value == `"systemctl"` && i+1 < len(n.Args) {
					verb, _ := n.Args[i+1].(*ast.BasicLit)
					if v, err := strconv.Unquote(litValue(verb)); err != nil || !questions[v] {
						found = append(found, fset.Position(n.Pos()).String()+": systemctl "+litValue(verb))
					}
				}
			}
		}
		return true
	})
	return found
}

func litValue(l *ast.BasicLit) string {
	if l == nil {
		return "<not a literal>"
	}
	return l.Value
}

// Every change a phase makes to the node goes through host.Effects: then "changed", the dry
// run's plan and the journal's file list cannot miss one.
func TestPhasesChangeTheNodeOnlyThroughEffects(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range changesOutsideEffects(fset, f) {
			t.Errorf("%s: changes the node outside host.Effects", w)
		}
	}
	// The check finds what it looks for.
	bad := `package p
func f(e *Env) { os.WriteFile("x", nil, 0); atomicfile.Symlink("a", "b"); e.Exec.Run(ctx, "systemctl", "restart", "kubelet"); e.Exec.Run(ctx, "systemctl", "is-active", "kubelet"); e.NewClient(cfg); e.Client(cfg) }`
	f, err := parser.ParseFile(fset, "bad.go", bad, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := changesOutsideEffects(fset, f); len(got) != 4 {
		t.Errorf("the check found %q in a file with four changes outside host.Effects", got)
	}
}

// writesDocs returns each phase's "Writes:" doc text, by phase name.
func writesDocs(t *testing.T) map[string]string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.VAR || g.Doc == nil {
				continue
			}
			doc := g.Doc.Text()
			if phase, i := phaseName(g), strings.Index(doc, "Writes:"); phase != "" && i >= 0 {
				out[phase] = doc[i:]
			}
		}
	}
	return out
}

// hostPaths are the host paths a Writes: text names ("/etc/kubernetes/{a,b}" names both).
func hostPaths(doc string) []string {
	var out []string
	for _, p := range regexp.MustCompile(`/[\w.*-]+(?:/[\w.*-]*)*(?:\{[^}]*\}[\w.*-]*)?`).FindAllString(doc, -1) {
		out = append(out, expandBraces(strings.TrimRight(p, ".,"))...)
	}
	return out
}

// phaseName is the Name of a `var X = Phase{Name: "..."}` declaration ("" otherwise).
func phaseName(g *ast.GenDecl) string {
	for _, sp := range g.Specs {
		vs, ok := sp.(*ast.ValueSpec)
		if !ok || len(vs.Values) != 1 {
			continue
		}
		lit, ok := vs.Values[0].(*ast.CompositeLit)
		if !ok {
			continue
		}
		for _, el := range lit.Elts {
			kv, ok := el.(*ast.KeyValueExpr)
			if !ok {
				continue
			}
			if k, _ := kv.Key.(*ast.Ident); k != nil && k.Name == "Name" {
				if v, ok := kv.Value.(*ast.BasicLit); ok {
					s, _ := strconv.Unquote(v.Value)
					return s
				}
			}
		}
	}
	return ""
}

// expandBraces expands one {a,b} group.
func expandBraces(p string) []string {
	i, j := strings.Index(p, "{"), strings.Index(p, "}")
	if i < 0 || j < i {
		return []string{p}
	}
	var out []string
	for _, alt := range strings.Split(p[i+1:j], ",") {
		out = append(out, p[:i]+alt+p[j+1:])
	}
	return out
}

// covers reports whether a contract's path names p: the path itself, a glob matching it, or
// a directory holding it.
func covers(contract []string, p string) bool {
	for _, c := range contract {
		if ok, _ := path.Match(c, p); ok || strings.HasPrefix(p, strings.TrimSuffix(c, "/")+"/") {
			return true
		}
	}
	return false
}

// holds reports whether directory d holds one of the paths (making it makes their parent).
func holds(d string, paths []string) bool {
	for _, p := range paths {
		if strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// effectsByPhase runs a whole join and returns each phase's effects on the node.
func effectsByPhase(t *testing.T, e *host.Env, s *State) map[string][]host.Effect {
	t.Helper()
	by, seen := map[string][]host.Effect{}, 0
	_, err := Run(context.Background(), e, s, Join, RunOptions{AfterPhase: func(name string) {
		log := s.log()
		by[name] = append(by[name], log[seen:]...)
		seen = len(log)
	}})
	if err != nil {
		t.Fatal(err)
	}
	return by
}

// Each phase's effects on the node, recorded in a worker's and a control plane's whole join,
// are within what its doc comment's "Writes:" says (a service action needs "systemctl" and
// the action named there).
func TestPhaseEffectsKeepTheirContracts(t *testing.T) {
	t.Parallel()
	docs := writesDocs(t)
	contracts := map[string][]string{}
	for phase, doc := range docs {
		contracts[phase] = hostPaths(doc)
	}
	w := newTestHost(t)
	c := newCPHost(t)
	runs := map[string]map[string][]host.Effect{
		"worker":        effectsByPhase(t, w.env, &State{Opts: w.options(t)}),
		"control plane": effectsByPhase(t, c.env, &State{Opts: c.options(t)}),
	}
	for run, by := range runs {
		total := 0
		for phase, effects := range by {
			doc := docs[phase]
			for _, f := range effects {
				switch f.Kind {
				case host.EffectAPI, host.EffectRecord:
					continue
				case host.EffectService:
					if !strings.Contains(doc, "systemctl") || !strings.Contains(doc, f.Action) {
						t.Errorf("%s join: phase %s ran %q; its Writes: contract does not say so", run, phase, f)
					}
				default:
					if !covers(contracts[phase], f.Path) && !(f.Kind == host.EffectMkdir && holds(f.Path, contracts[phase])) {
						t.Errorf("%s join: phase %s did %q; its Writes: contract names only %q", run, phase, f, contracts[phase])
					}
				}
				total++
			}
		}
		if total < 5 {
			t.Errorf("%s join: only %d effects recorded on the node: %v", run, total, by)
		}
	}
	// The check catches a phase that writes outside its contract.
	if covers(contracts["kubelet-start"], "/etc/kubernetes/kubelet.conf") || !covers(contracts["kubelet-config"], "/var/lib/kubelet/config.yaml") {
		t.Errorf("contracts read wrongly: %v", contracts)
	}
}
