package output

import (
	"bytes"
	"encoding/json"
	"fmt"
	"iter"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"k8s.io/client-go/util/jsonpath"
)

// Sorter orders list items by a JSONPath expression over their versioned form, as kubectl's
// --sort-by does (".joinedAt", "{.leaseAge.seconds}"): numbers by value, strings and times
// (RFC 3339) by text, false before true; an item without the field sorts first.
type Sorter struct {
	expr string
	jp   *jsonpath.JSONPath
}

// NewSorterFor parses expr and checks a plain field path (".a.b", "{.a.b}") against the JSON
// form of item's type, as kubectl refuses a path that matches nothing: a misspelled field
// (".nmae") or kubectl's own object paths (".metadata.name") are refused, naming the fields
// there are, instead of leaving the list unsorted. Other expressions (filters, indexes) are
// parsed only.
func NewSorterFor(expr string, item any) (*Sorter, error) {
	s, err := NewSorter(expr)
	if err != nil {
		return nil, err
	}
	path := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(expr), "{"), "}")
	if !plainPath.MatchString(path) {
		return s, nil
	}
	t := reflect.TypeOf(item)
	prefix := ""
	for _, name := range strings.Split(strings.TrimPrefix(path, "."), ".") {
		t = deref(t)
		if t.Kind() != reflect.Struct || len(jsonFields(t, "")) == 0 { // a leaf (time.Time has no JSON fields)
			return nil, fmt.Errorf("%q: %s has no fields", expr, orTop(prefix))
		}
		f, ok := jsonField(t, name)
		if !ok {
			return nil, fmt.Errorf("%q matches nothing: %s has no field %q (its fields: %s)", expr, orTop(prefix), name, strings.Join(jsonFields(t, prefix), ", "))
		}
		prefix += "." + name
		t = f
	}
	return s, nil
}

// plainPath is a JSONPath of field names only.
var plainPath = regexp.MustCompile(`^(\.[A-Za-z_][A-Za-z0-9_]*)+$`)

func orTop(prefix string) string {
	if prefix == "" {
		return "an item"
	}
	return prefix
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
		t = t.Elem()
	}
	return t
}

// jsonField finds the type of the field named name in t's JSON form (embedded structs inlined).
func jsonField(t reflect.Type, name string) (reflect.Type, bool) {
	for tag, ft := range jsonTags(t) {
		if tag == name {
			return ft, true
		}
	}
	return nil, false
}

// jsonFields lists t's JSON field paths under prefix, sorted.
func jsonFields(t reflect.Type, prefix string) []string {
	var out []string
	for tag := range jsonTags(t) {
		out = append(out, prefix+"."+tag)
	}
	slices.Sort(out)
	return out
}

// jsonTags yields each field of t's JSON form, its name and type, embedded structs inlined.
func jsonTags(t reflect.Type) iter.Seq2[string, reflect.Type] {
	return func(yield func(string, reflect.Type) bool) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if tag == "-" || !f.IsExported() {
				continue
			}
			if f.Anonymous && tag == "" {
				for n, ft := range jsonTags(deref(f.Type)) {
					if !yield(n, ft) {
						return
					}
				}
				continue
			}
			if tag == "" {
				tag = f.Name
			}
			if !yield(tag, f.Type) {
				return
			}
		}
	}
}

// NewSorter parses expr (with or without braces); the error names what is wrong with it.
func NewSorter(expr string) (*Sorter, error) {
	e := strings.TrimSpace(expr)
	if e == "" {
		return nil, fmt.Errorf("an empty expression")
	}
	if !strings.HasPrefix(e, "{") {
		if !strings.HasPrefix(e, ".") {
			e = "." + e
		}
		e = "{" + e + "}"
	}
	jp := jsonpath.New("sort-by").AllowMissingKeys(true)
	if err := jp.Parse(e); err != nil {
		return nil, fmt.Errorf("%q is not a JSONPath expression: %w", expr, err)
	}
	return &Sorter{expr: expr, jp: jp}, nil
}

// Sort orders items (a slice of answer structs) stably by the expression.
func Sort[T any](s *Sorter, items []T) error {
	keys := make([]any, len(items))
	for i, it := range items {
		k, err := s.key(it)
		if err != nil {
			return err
		}
		keys[i] = k
	}
	idx := make([]int, len(items))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return compare(keys[a], keys[b]) })
	sorted := make([]T, len(items))
	for i, j := range idx {
		sorted[i] = items[j]
	}
	copy(items, sorted)
	return nil
}

// key is the first value the expression finds in item's JSON form (nil when none).
func (s *Sorter) key(item any) (any, error) {
	raw, err := json.Marshal(item)
	if err != nil {
		return nil, err
	}
	var doc any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&doc); err != nil {
		return nil, err
	}
	results, err := s.jp.FindResults(doc)
	if err != nil {
		return nil, fmt.Errorf("sort by %q: %w", s.expr, err)
	}
	for _, r := range results {
		for _, v := range r {
			if v.IsValid() && v.CanInterface() {
				return v.Interface(), nil
			}
		}
	}
	return nil, nil
}

// compare orders two keys: missing first, then numbers, booleans, strings; a list or object
// by its JSON text.
func compare(a, b any) int {
	ra, rb := rank(a), rank(b)
	if ra != rb {
		return ra - rb
	}
	switch x := a.(type) {
	case nil:
		return 0
	case json.Number:
		fa, _ := x.Float64()
		fb, _ := b.(json.Number).Float64()
		switch {
		case fa < fb:
			return -1
		case fa > fb:
			return 1
		}
		return 0
	case bool:
		if x == b.(bool) {
			return 0
		}
		if !x {
			return -1
		}
		return 1
	case string:
		return strings.Compare(x, b.(string))
	}
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Compare(ja, jb)
}

func rank(v any) int {
	switch v.(type) {
	case nil:
		return 0
	case json.Number:
		return 1
	case bool:
		return 2
	case string:
		return 3
	}
	return 4
}
