package lab

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// Release is another Kubernetes version's programs and images, staged beside the running
// lab's for an upgrade (as a package repository and a registry would offer them).
type Release struct {
	BinDir     string
	ImageDir   string
	K8sVersion string
	Images     []string
}

// LoadRelease reads the version and the images of the components in binDir (their kubeadm's
// answers for the lab's configuration) and builds those images into the image cache.
func (l *Lab) LoadRelease(ctx context.Context, binDir string, logf func(string, ...any)) (*Release, error) {
	other := &Lab{Root: l.Root, BinDir: binDir}
	if err := other.readVersions(ctx); err != nil {
		return nil, err
	}
	dir, err := other.buildImages(ctx, logf)
	if err != nil {
		return nil, fmt.Errorf("build the images of %s: %w", other.K8sVersion, err)
	}
	return &Release{BinDir: binDir, ImageDir: dir, K8sVersion: other.K8sVersion, Images: other.Images}, nil
}

// StageRelease imports a release's images into a host's containerd (a control plane gets the
// control-plane images too) and puts the release's kubeadm first on the host's PATH, the way
// an operator installs the new kubeadm package before `kubeadm upgrade`. The kubelet stays
// the old one until UseProgram swaps it.
func (l *Lab) StageRelease(ctx context.Context, host string, r *Release) error {
	if err := l.importImages(ctx, host, r.ImageDir); err != nil {
		return fmt.Errorf("stage %s: %w", r.K8sVersion, err)
	}
	return l.UseProgram(host, "kubeadm", filepath.Join(r.BinDir, "kubeadm"))
}

// UseProgram puts path first on a host's PATH as name (/run/lab/bin/name): the host runs
// that program from its next start on.
func (l *Lab) UseProgram(host, name, path string) error {
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("host %s: %s: %w", host, name, err)
	}
	dir := filepath.Join(l.runLabDir(host), "bin")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	link := filepath.Join(dir, name)
	_ = os.Remove(link)
	return os.Symlink(path, link)
}
