package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"regexp"
	"strings"
)

// apply returns src with the first match of from inside declaration decl replaced by to
// (both trimmed; from matched with any spacing where it has some). It fails when the
// declaration or the code is not there, or the code is there more than once.
func apply(name string, src []byte, decl, from, to string) ([]byte, error) {
	start, end, err := declRange(name, src, decl)
	if err != nil {
		return nil, err
	}
	re := loose(from)
	region := src[start:end]
	switch n := len(re.FindAllIndex(region, 2)); n {
	case 0:
		return nil, fmt.Errorf("%s has no %q", decl, strings.Join(strings.Fields(from), " "))
	case 2:
		return nil, fmt.Errorf("%s has %q more than once: name it more closely", decl, strings.Join(strings.Fields(from), " "))
	}
	loc := re.FindIndex(region)
	out := append([]byte{}, src[:start+loc[0]]...)
	out = append(out, strings.TrimSpace(to)...)
	return append(out, src[start+loc[1]:]...), nil
}

// loose is a pattern for code: its tokens in order, any run of spacing where it has one.
func loose(code string) *regexp.Regexp {
	parts := strings.Fields(code)
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile(strings.Join(parts, `\s+`))
}

// declRange is the byte range of a top-level declaration: a function, a method named
// "Type.Method", or the const, var or type block declaring the name.
func declRange(name string, src []byte, decl string) (int, int, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, 0)
	if err != nil {
		return 0, 0, err
	}
	off := func(p token.Pos) int { return fset.Position(p).Offset }
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if funcName(d) == decl {
				return off(d.Pos()), off(d.End()), nil
			}
		case *ast.GenDecl:
			for _, sp := range d.Specs {
				var names []*ast.Ident
				switch sp := sp.(type) {
				case *ast.ValueSpec:
					names = sp.Names
				case *ast.TypeSpec:
					names = []*ast.Ident{sp.Name}
				}
				for _, n := range names {
					if n.Name == decl {
						return off(d.Pos()), off(d.End()), nil
					}
				}
			}
		}
	}
	return 0, 0, fmt.Errorf("no declaration %s", decl)
}

// funcName is a function's name, or "Type.Method" for a method.
func funcName(d *ast.FuncDecl) string {
	if d.Recv == nil || len(d.Recv.List) == 0 {
		return d.Name.Name
	}
	t := d.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if ix, ok := t.(*ast.IndexExpr); ok {
		t = ix.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + d.Name.Name
	}
	return d.Name.Name
}
