package output

import (
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/printers"
)

// Flags are -o/--output and the template flags, for every command (persistent on the root).
// The text formats ("" or text, and wide where a command has a wider table) are each
// command's own; the rest are cli-runtime's printers, chosen as its print flags choose them
// (genericclioptions itself is not used: it brings kustomize, 74 packages, into the binary).
type Flags struct {
	Format           string
	Template         string
	AllowMissingKeys bool
}

// templateFormats are the template formats, each also accepted as FORMAT=TEMPLATE.
var templateFormats = []string{"jsonpath", "jsonpath-file", "jsonpath-as-json", "go-template", "go-template-file", "template", "templatefile"}

// NewFlags returns the flags with their defaults (text).
func NewFlags() *Flags { return &Flags{AllowMissingKeys: true} }

// Formats are the values -o takes (for help and completion).
func (f *Flags) Formats() []string {
	return append([]string{"text", "wide", "json", "yaml"}, templateFormats...)
}

// AddFlags binds -o, --template and --allow-missing-template-keys.
func (f *Flags) AddFlags(fs *pflag.FlagSet) {
	fs.StringVarP(&f.Format, "output", "o", "", "output format: text (default), wide (where a table has more columns), json, yaml, jsonpath=TEMPLATE, jsonpath-file=FILE, go-template=TEMPLATE, go-template-file=FILE")
	fs.StringVar(&f.Template, "template", "", "template string or file for -o go-template, go-template-file, jsonpath or jsonpath-file")
	fs.BoolVar(&f.AllowMissingKeys, "allow-missing-template-keys", true, "ignore missing fields and map keys in templates")
}

// Text reports whether the command prints its own text (the default format).
func (f *Flags) Text() bool { return f.Format == "" || f.Format == "text" || f.Format == "wide" }

// Wide reports -o wide.
func (f *Flags) Wide() bool { return f.Format == "wide" }

// Structured reports json or yaml: the formats in which a failure is printed as an object
// (ErrorResult) too. Templates print only what the command answered.
func (f *Flags) Structured() bool {
	format := strings.ToLower(f.Format)
	return format == "json" || format == "yaml"
}

// Validate checks the format before the command does anything; wide only where the command
// has a wide table.
func (f *Flags) Validate(wide bool) error {
	if f.Text() {
		if f.Wide() && !wide {
			return fmt.Errorf("--output wide: this command has no wide table; use text, json, yaml, jsonpath or go-template")
		}
		return nil
	}
	_, err := f.resourcePrinter()
	return err
}

// resourcePrinter is cli-runtime's printer for the format.
func (f *Flags) resourcePrinter() (printers.ResourcePrinter, error) {
	format, tmpl := f.Format, f.Template
	switch strings.ToLower(format) {
	case "json":
		return &printers.JSONPrinter{}, nil
	case "yaml":
		return &printers.YAMLPrinter{}, nil
	}
	if name, value, ok := strings.Cut(format, "="); ok && slices.Contains(templateFormats, name) {
		format, tmpl = name, value
	}
	if !slices.Contains(templateFormats, format) {
		return nil, fmt.Errorf("--output %q is not a format; use one of %s", f.Format, strings.Join(f.Formats(), ", "))
	}
	if tmpl == "" {
		return nil, fmt.Errorf("--output %s needs a template: -o %s=TEMPLATE or --template", format, format)
	}
	if strings.HasSuffix(format, "-file") || format == "templatefile" {
		b, err := os.ReadFile(tmpl)
		if err != nil {
			return nil, fmt.Errorf("--output %s: reading the template: %w", format, err)
		}
		tmpl = string(b)
	}
	if strings.HasPrefix(format, "jsonpath") {
		p, err := printers.NewJSONPathPrinter(tmpl)
		if err != nil {
			return nil, fmt.Errorf("--output %s: %w", format, err)
		}
		p.AllowMissingKeys(f.AllowMissingKeys)
		p.EnableJSONOutput(format == "jsonpath-as-json")
		return p, nil
	}
	p, err := printers.NewGoTemplatePrinter([]byte(tmpl))
	if err != nil {
		return nil, fmt.Errorf("--output %s: %w", format, err)
	}
	p.AllowMissingKeys(f.AllowMissingKeys)
	return p, nil
}

// Print prints obj in the chosen machine format, its apiVersion and kind set and every nil
// list printed as [] rather than null.
func (f *Flags) Print(w io.Writer, obj Object) error {
	p, err := f.resourcePrinter()
	if err != nil {
		return err
	}
	Stamp(obj)
	emptyLists(reflect.ValueOf(obj))
	return p.PrintObj(obj, w)
}

// emptyLists replaces nil slices by empty ones, through pointers and structs.
func emptyLists(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			emptyLists(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				emptyLists(v.Field(i))
			}
		}
	case reflect.Slice:
		if v.IsNil() && v.CanSet() {
			v.Set(reflect.MakeSlice(v.Type(), 0, 0))
		}
		for i := range v.Len() {
			emptyLists(v.Index(i))
		}
	}
}
