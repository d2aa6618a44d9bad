package joinconfig

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The join's inputs are read and checked below the workflow: joinconfig (and the request type
// it fills) import no phase, workflow or host package, so they build without client-go's
// drain, etcd or the container runtime's client.
func TestInputsStayBelowTheWorkflow(t *testing.T) {
	t.Parallel()
	forbidden := []string{"kjoin.dev/kjoin/phases", "kjoin.dev/kjoin/workflow", "kjoin.dev/kjoin/host", "kjoin.dev/kjoin/etcd"}
	for _, dir := range []string{".", "../joinrequest"} {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no Go files in %s: %v", dir, err)
		}
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				for _, bad := range forbidden {
					if p == bad {
						t.Errorf("%s imports %s", name, p)
					}
				}
			}
		}
	}
}
