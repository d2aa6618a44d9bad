package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteReplacesWithMode(t *testing.T) {
	p := filepath.Join(t.TempDir(), "a", "b", "kubelet.conf")
	if err := Write(p, []byte("one"), 0o600, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Write(p, []byte("two"), 0o600, 0o755); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	st, _ := os.Stat(p)
	if string(b) != "two" || st.Mode().Perm() != 0o600 {
		t.Errorf("got %q mode %v", b, st.Mode())
	}
	left, _ := filepath.Glob(filepath.Join(filepath.Dir(p), ".*"))
	if len(left) != 0 {
		t.Errorf("temp files left: %v", left)
	}
}

func TestSymlinkReplaces(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "current.pem")
	for _, target := range []string{"/x/one.pem", "/x/two.pem"} {
		if err := Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := os.Readlink(p); got != "/x/two.pem" {
		t.Errorf("link -> %s", got)
	}
}
