package app

import (
	"encoding/json"
	"io"
	"slices"
	"strings"

	"kjoin.dev/kjoin/operr"
	"sigs.k8s.io/yaml"
)

func checkOutput(got string, allowed ...string) error {
	if !slices.Contains(allowed, got) {
		return usage("--output must be one of %s, not %q", strings.Join(allowed, ", "), got)
	}
	return nil
}

func printObject(w io.Writer, format string, v any) error {
	if format == "yaml" {
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func nonNil(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

func usage(format string, args ...any) error {
	return operr.Newf(operr.Usage, format, args...).
		WithHint("see kjoin --help")
}
