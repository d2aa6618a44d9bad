package phases

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"

	"kjoin.dev/kjoin/host"
)

// systemDirs are directories that are never an etcd data directory, whatever kubeadm-config
// or an etcd manifest says: a join would fill them and an undo or reset would empty them.
var systemDirs = []string{
	"/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/libx32", "/media", "/mnt",
	"/opt", "/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/tmp", "/usr", "/usr/bin", "/usr/lib",
	"/usr/libexec", "/usr/local", "/usr/local/bin", "/usr/local/lib", "/usr/sbin", "/usr/share",
	"/var", "/var/backups", "/var/cache", "/var/lib", "/var/local", "/var/lock", "/var/log", "/var/mail",
	"/var/opt", "/var/run", "/var/spool", "/var/tmp",
}

// joinDirs hold what a join writes besides etcd's data; an etcd data directory may be neither
// one of them, inside one, nor above one.
var joinDirs = []string{host.KubernetesDir, host.KubeletDir, path.Dir(JournalPath), "/var/lib/containerd", "/run/containerd"}

// checkEtcdDataDir refuses an etcd data directory that is not a dedicated directory: not
// absolute and clean, a system directory, a join directory (or inside or above one), a
// symlink, a path under a symlink, or something other than a directory.
func checkEtcdDataDir(e *host.Env, dir string) error {
	if dir == "" || !path.IsAbs(dir) {
		return fmt.Errorf("etcd data directory %q is not an absolute path", dir)
	}
	clean := path.Clean(dir)
	if slices.Contains(systemDirs, clean) {
		return fmt.Errorf("etcd data directory %s is a system directory, not a directory of etcd's own", clean)
	}
	for _, d := range joinDirs {
		if clean == d || strings.HasPrefix(clean, d+"/") || strings.HasPrefix(d, clean+"/") {
			return fmt.Errorf("etcd data directory %s is not a dedicated directory: it overlaps %s", clean, d)
		}
	}
	for p := clean; p != "/"; p = path.Dir(p) {
		st, err := os.Lstat(e.Paths.Of(p))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("inspect %s: %w", p, err)
		}
		if st.Mode()&os.ModeSymlink != 0 {
			return fmt.Errorf("etcd data directory %s is not a dedicated directory: %s is a symlink", clean, p)
		}
		if p == clean && !st.IsDir() {
			return fmt.Errorf("etcd data directory %s is not a directory (%s)", clean, st.Mode().Type())
		}
	}
	return nil
}

// etcdDataDirEmpty reports whether the etcd data directory is absent or empty.
func etcdDataDirEmpty(e *host.Env, dir string) (bool, error) {
	entries, err := os.ReadDir(e.Paths.Of(dir))
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return len(entries) == 0, nil
}

// etcdDataCheckName is kubeadm's preflight check name for the etcd data directory.
func etcdDataCheckName(dir string) string {
	return "DirAvailable-" + strings.ReplaceAll(path.Clean(dir), "/", "-")
}

// etcdMemberData is what an etcd member writes into its data directory: the one entry a
// failed join's undo (or reset) removes, never anything else in the directory.
const etcdMemberData = "member"
