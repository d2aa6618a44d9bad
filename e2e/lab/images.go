package lab

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// imageSpec is one local image: its reference as kubeadm writes it into manifests and the
// programs it carries.
type imageSpec struct {
	ref        string
	files      map[string]string // path in image → path on this machine
	entrypoint []string
}

// readVersions reads the components' Kubernetes version from their kubeadm and the images that
// kubeadm names for the lab's configuration (every image left to its defaults).
func (l *Lab) readVersions(ctx context.Context) error {
	kubeadm := filepath.Join(l.BinDir, "kubeadm")
	out, err := exec.CommandContext(ctx, kubeadm, "version", "-o", "short").Output()
	if err != nil {
		return fmt.Errorf("%s version: %w", kubeadm, err)
	}
	l.K8sVersion = strings.TrimSpace(string(out))
	dir, err := os.MkdirTemp("", "kjoin-lab-images")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	cfg := filepath.Join(dir, "kubeadm-init.yaml")
	if err := os.WriteFile(cfg, []byte(l.InitConfig("10.77.0.11")), 0o600); err != nil {
		return err
	}
	out, err = exec.CommandContext(ctx, kubeadm, "config", "images", "list", "--config", cfg).Output()
	if err != nil {
		return fmt.Errorf("kubeadm %s config images list: %w", l.K8sVersion, err)
	}
	l.Images = strings.Fields(string(out))
	l.PauseImage = ""
	for _, ref := range l.Images {
		if strings.HasPrefix(ref, "registry.k8s.io/pause:") {
			l.PauseImage = ref
		}
	}
	if l.PauseImage == "" {
		return fmt.Errorf("kubeadm %s names no pause image: %v", l.K8sVersion, l.Images)
	}
	return nil
}

// buildImages writes pause.tar and control-plane.tar (docker archives) into a cache directory
// keyed by the component binaries and the image names, and returns that directory. It builds
// exactly the images kubeadm named (readVersions): a missing one would make every kubeadm join
// try to pull it from a registry the lab cannot reach.
func (l *Lab) buildImages(ctx context.Context, logf func(string, ...any)) (string, error) {
	cache := SettingsFromEnv().Cache
	pauseSrc, err := repoFile("e2e/images/pause/main.go")
	if err != nil {
		return "", err
	}
	src, err := os.ReadFile(pauseSrc)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(append([]byte(l.BinDir+"\n"+strings.Join(l.Images, "\n")+"\n"), src...))
	dir := filepath.Join(cache, "images", hex.EncodeToString(sum[:6]))
	if _, err := os.Stat(filepath.Join(dir, "control-plane.tar")); err == nil {
		return dir, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	logf("building lab images into %s", dir)
	pauseBin := filepath.Join(dir, "pause")
	build := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", pauseBin, ".")
	build.Dir = filepath.Dir(pauseSrc)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build pause: %w: %s", err, out)
	}
	var pause, cp []imageSpec
	for _, ref := range l.Images {
		repo, _, _ := strings.Cut(ref, ":")
		switch c := strings.TrimPrefix(repo, "registry.k8s.io/"); c {
		case "pause":
			pause = append(pause, imageSpec{ref: ref, files: map[string]string{"pause": pauseBin}, entrypoint: []string{"/pause"}})
		case "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler":
			cp = append(cp, imageSpec{ref: ref, files: map[string]string{"usr/local/bin/" + c: filepath.Join(l.BinDir, c)}})
		default:
			return "", fmt.Errorf("kubeadm %s names image %s, which the lab cannot build", l.K8sVersion, ref)
		}
	}
	for file, specs := range map[string][]imageSpec{"pause.tar": pause, "control-plane.tar": cp} {
		if err := writeArchive(filepath.Join(dir, file), specs); err != nil {
			return "", fmt.Errorf("%s: %w", file, err)
		}
	}
	return dir, nil
}

func writeArchive(path string, specs []imageSpec) error {
	refs := map[name.Reference]v1.Image{}
	for _, s := range specs {
		img, err := buildImage(filepath.Dir(path), s)
		if err != nil {
			return fmt.Errorf("image %s: %w", s.ref, err)
		}
		ref, err := name.ParseReference(s.ref)
		if err != nil {
			return err
		}
		refs[ref] = img
	}
	tmp := path + ".tmp"
	if err := tarball.MultiRefWriteToFile(tmp, refs); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func buildImage(workDir string, s imageSpec) (v1.Image, error) {
	layerPath := filepath.Join(workDir, strings.NewReplacer("/", "_", ":", "_").Replace(s.ref)+".layer.tar")
	if err := writeLayerTar(layerPath, s.files); err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromFile(layerPath, tarball.WithCompressionLevel(gzip.BestSpeed))
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", "amd64"
	cfg.Config.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	cfg.Config.Entrypoint = s.entrypoint
	return mutate.ConfigFile(img, cfg)
}

// writeLayerTar writes one image layer holding the given executables (and their parent dirs).
func writeLayerTar(path string, files map[string]string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	dirs := map[string]bool{}
	for dst := range files {
		for d := filepath.Dir(dst); d != "."; d = filepath.Dir(d) {
			dirs[d] = true
		}
	}
	for _, d := range []string{"etc", "tmp", "var", "usr", "usr/local", "usr/local/bin"} {
		dirs[d] = true
	}
	for _, d := range sortedKeys(dirs) {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755}); err != nil {
			return err
		}
	}
	for _, dst := range sortedKeys(files) {
		in, err := os.Open(files[dst])
		if err != nil {
			return err
		}
		st, err := in.Stat()
		if err != nil {
			in.Close()
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: dst, Mode: 0o755, Size: st.Size()}); err != nil {
			in.Close()
			return err
		}
		_, err = io.Copy(tw, in)
		in.Close()
		if err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return f.Close()
}

func sortedKeys[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }
