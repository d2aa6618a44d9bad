package yamldocs

import "testing"

func TestSplit(t *testing.T) {
	docs, err := Split([]byte("a: 1\n---\n\n---\n# only a comment? no: a key\nb: 2\n---\nc: 3\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) != 3 || string(docs[0]) != "a: 1\n" || string(docs[2]) != "c: 3\n" {
		t.Errorf("docs %q", docs)
	}
	if docs, err := Split([]byte("\n\n")); err != nil || len(docs) != 0 {
		t.Errorf("blank input: %q %v", docs, err)
	}
}
