package lab

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// A host's containerd imports the lab's images when it first starts (imagesDropIn): 4–5 s for
// a control plane's images, on each of the thirty-odd control-plane hosts a make test boots.
// The first host of a kind (control plane or worker, per runtime build and image set) is
// imported for real; its containerd root, taken while its containerd is stopped and before
// anything ran on it, becomes a template that later hosts of that kind start from: a copy
// whose files are hard links (image content and unpacked layers are never written in place:
// containers write to their own upper directories) except the bolt databases, which are
// copied. The template lives in the lab's root and goes with lab down.

// templateMu serialises template creation between hosts booting at once.
var templateMu sync.Mutex

// templateMarker is imagesDropIn's marker: a containerd root holding it has the images.
const templateMarker = ".lab-images-imported"

// hasImages reports whether a containerd root holds the imported images.
func hasImages(root string) bool {
	_, err := os.Stat(filepath.Join(root, templateMarker))
	return err == nil
}

// containerdTemplate is the template directory for a host's kind.
func (l *Lab) containerdTemplate(h *Host) string {
	kind := "worker"
	if IsControlPlane(h.Name) {
		kind = "control-plane"
	}
	runtime := h.Runtime
	if runtime == "" {
		runtime = "default"
	}
	return filepath.Join(l.Root, "templates", fmt.Sprintf("containerd-%s-%s-%s", kind, runtime, filepath.Base(l.ImageDir)))
}

// seedContainerd fills an empty containerd root from its kind's template, if there is one.
func (l *Lab) seedContainerd(h *Host, root string) error {
	tmpl := l.containerdTemplate(h)
	if !hasImages(tmpl) {
		return nil
	}
	if entries, err := os.ReadDir(root); err != nil || len(entries) > 0 {
		return err
	}
	return linkTree(tmpl, root)
}

// saveContainerdTemplate makes a freshly booted host's containerd root its kind's template,
// unless there is one: containerd is stopped for the copy and started again.
func (l *Lab) saveContainerdTemplate(ctx context.Context, h *Host) error {
	templateMu.Lock()
	defer templateMu.Unlock()
	tmpl := l.containerdTemplate(h)
	root := filepath.Join(l.hostDir(h.Name), "containerd")
	if hasImages(tmpl) || !hasImages(root) {
		return nil // a template exists, or the images were not imported here: nothing to keep
	}
	if r := l.Exec(ctx, h.Name, "systemctl", "stop", "containerd"); r.Err != nil {
		return fmt.Errorf("stop containerd for the image template: %w", r.Error())
	}
	tmp := tmpl + ".tmp"
	_ = os.RemoveAll(tmp)
	err := linkTree(root, tmp)
	if err == nil {
		// Per-instance state: the introspection service's UUID, runtime and mount scratch.
		for _, d := range []string{"io.containerd.grpc.v1.introspection", "io.containerd.runtime.v1.linux", "io.containerd.runtime.v2.task", "tmpmounts"} {
			_ = os.RemoveAll(filepath.Join(tmp, d))
		}
		err = os.Rename(tmp, tmpl)
	}
	if r := l.Exec(ctx, h.Name, "systemctl", "start", "containerd"); r.Err != nil {
		return fmt.Errorf("start containerd after the image template: %w", r.Error())
	}
	if err != nil {
		_ = os.RemoveAll(tmp)
		return fmt.Errorf("image template %s: %w", tmpl, err)
	}
	return l.waitContainerd(ctx, h)
}

// linkTree copies the tree src to dst (which must not exist or be empty): hard links for
// files, real copies of bolt databases (*.db), which containerd writes in place.
func linkTree(src, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	if out, err := exec.Command("cp", "-al", src+"/.", dst+"/").CombinedOutput(); err != nil {
		return fmt.Errorf("cp -al %s %s: %w: %s", src, dst, err, strings.TrimSpace(string(out)))
	}
	return filepath.WalkDir(dst, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(d.Name(), ".db") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		// A new inode: remove the link first, then write the copy.
		if err := os.Remove(p); err != nil {
			return err
		}
		return os.WriteFile(p, b, info.Mode().Perm())
	})
}
