// Package atomicfile writes files and symlinks atomically (temp file in the same directory,
// fsync, rename), so a crash never leaves a half-written kubeconfig or key behind. It knows
// nothing of Kubernetes or of where the files live.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/renameio/v2"
)

// Write replaces path with data and mode, creating parent directories with dirMode. Not
// renameio.WriteFile: by default it stages the file in os.TempDir when that shares the
// filesystem, and kjoin's private keys must never be written outside their own directory.
func Write(path string, data []byte, mode, dirMode os.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, dirMode); err != nil {
		return fmt.Errorf("create directory %s: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err := f.Chmod(mode); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// Symlink points path at target, replacing any existing link atomically (renameio: the link
// is made under a fresh temporary name beside path, then renamed over it, so two writers never
// share a temporary name).
func Symlink(target, path string) error {
	if err := renameio.Symlink(target, path); err != nil {
		return fmt.Errorf("link %s: %w", path, err)
	}
	return nil
}
