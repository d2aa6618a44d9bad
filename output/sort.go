package output

import (
	"bytes"
	"encoding/json"
	"fmt"
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
