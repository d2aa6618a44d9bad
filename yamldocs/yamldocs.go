// Package yamldocs splits multi-document YAML ("---" separated) the way kubeadm reads its
// config and patch files: every non-blank document, in order.
package yamldocs

import (
	"bufio"
	"bytes"
	"errors"
	"io"

	"k8s.io/apimachinery/pkg/util/yaml"
)

// Split returns the non-blank documents of b, in order.
func Split(b []byte) ([][]byte, error) {
	r := yaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	var out [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(doc)) > 0 {
			out = append(out, doc)
		}
	}
}
