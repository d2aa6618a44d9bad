// Package certs handles a control-plane node's certificates the way kubeadm does: the shared
// CAs and keys exchanged through the encrypted kube-system/kubeadm-certs Secret, the node's
// own serving and client certificates, and the component kubeconfigs. It returns contents;
// the phases decide where they are written.
package certs

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"maps"
	"os"
	"path"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"kjoin.dev/kjoin/clusterconfig"
	"kjoin.dev/kjoin/operr"
)

// SecretName is the Secret in kube-system holding the encrypted shared certificates.
const SecretName = "kubeadm-certs"

// UploadCommand is how an operator uploads fresh shared certificates.
const UploadCommand = "kubeadm init phase upload-certs --upload-certs (or kjoin token create --print-join-command --control-plane)"

// sharedFiles maps Secret keys to paths under the certificates directory (local etcd).
var sharedFiles = map[string]string{
	"ca.crt": "ca.crt", "ca.key": "ca.key",
	"front-proxy-ca.crt": "front-proxy-ca.crt", "front-proxy-ca.key": "front-proxy-ca.key",
	"sa.pub": "sa.pub", "sa.key": "sa.key",
	"etcd-ca.crt": "etcd/ca.crt", "etcd-ca.key": "etcd/ca.key",
}

// ParseCertificateKey decodes a certificate key (64 hex characters, 32 bytes).
func ParseCertificateKey(s string) ([]byte, error) {
	k, err := hex.DecodeString(strings.TrimSpace(s))
	if err != nil || len(k) != 32 {
		return nil, fmt.Errorf("a certificate key is 64 hex characters (32 bytes); got %d characters", len(strings.TrimSpace(s)))
	}
	return k, nil
}

// NewCertificateKey returns a fresh certificate key, hex-encoded.
func NewCertificateKey() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// Encrypt seals data with AES-256-GCM, kubeadm's format: nonce || ciphertext || tag.
func Encrypt(key, data []byte) ([]byte, error) {
	gcm, err := newGCM(key)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, gcm.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, err
	}
	return gcm.Seal(nonce, nonce, data, nil), nil
}

// Decrypt opens a value sealed by Encrypt (or kubeadm).
func Decrypt(key, sealed []byte) ([]byte, error) {
	gcm, err := newGCM(key)
	if err != nil {
		return nil, err
	}
	if len(sealed) < gcm.NonceSize() {
		return nil, errors.New("sealed value too short")
	}
	return gcm.Open(nil, sealed[:gcm.NonceSize()], sealed[gcm.NonceSize():], nil)
}

func newGCM(key []byte) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// External names the files of an external etcd client, if the cluster uses one.
type External struct{ CAFile, CertFile, KeyFile string }

// ExternalOf is the external etcd client of a cluster, nil for a stacked etcd.
func ExternalOf(cfg *clusterconfig.ClusterConfiguration) *External {
	if cfg == nil || cfg.Etcd.External == nil {
		return nil
	}
	x := cfg.Etcd.External
	return &External{CAFile: x.CAFile, CertFile: x.CertFile, KeyFile: x.KeyFile}
}

// File is a downloaded file and the mode it is written with.
type File struct {
	Data []byte
	Mode os.FileMode
}

// ModeOf is a downloaded file's mode: 0600 for a private key, 0644 for certificates and
// public keys. Name and content must both say public: a "*.key" entry is 0600 whatever it
// holds, and so is any entry whose content holds a PEM private key (a Secret whose values were
// swapped must not leave sa.key readable in the sa.pub slot).
func ModeOf(secretKey string, content []byte) os.FileMode {
	if strings.HasSuffix(secretKey, ".key") || holdsPrivateKey(content) {
		return 0o600
	}
	return 0o644
}

// holdsPrivateKey reports whether data has a PEM block of a private key of any kind.
func holdsPrivateKey(data []byte) bool {
	for rest := data; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			return false
		}
		if strings.Contains(b.Type, "PRIVATE KEY") {
			return true
		}
	}
}

// Download reads and decrypts kube-system/kubeadm-certs with the bootstrap identity. It returns
// files keyed by path: relative to the certificates directory for the shared CAs, absolute
// for external etcd files.
func Download(ctx context.Context, client kubernetes.Interface, certKey string, external *External) (map[string]File, error) {
	key, err := ParseCertificateKey(certKey)
	if err != nil {
		return nil, operr.Wrap(operr.Usage, err, "invalid --certificate-key", "print a new one with "+UploadCommand)
	}
	secret, err := client.CoreV1().Secrets("kube-system").Get(ctx, SecretName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, operr.Newf(operr.Auth,
			"Secret kube-system/%s was not found: the uploaded control-plane certificates expire 2 hours after upload", SecretName).
			WithHint("upload them again on a control plane with " + UploadCommand + " and use the key it prints")
	case apierrors.IsForbidden(err):
		return nil, operr.Wrap(operr.Auth, err, "the bootstrap token may not read kube-system/"+SecretName,
			"kubeadm grants it with Role kubeadm:kubeadm-certs bound to group system:bootstrappers:kubeadm:default-node-token; use a token in that group (kjoin token create)")
	case err != nil:
		return nil, fmt.Errorf("read kube-system/%s: %w", SecretName, err)
	}
	files := secretFiles(external)
	out := map[string]File{}
	for name, dst := range files {
		sealed, ok := secret.Data[name]
		if !ok {
			return nil, operr.Newf(operr.Other, "Secret kube-system/%s lacks %s", SecretName, name).
				WithHint("upload them again with " + UploadCommand)
		}
		if len(sealed) == 0 || dst == "" {
			continue
		}
		plain, err := Decrypt(key, sealed)
		if err != nil {
			return nil, operr.Wrap(operr.Auth, err, "the certificate key does not match the uploaded certificates",
				"use the key printed by the last upload, or upload again with "+UploadCommand)
		}
		out[path.Clean(dst)] = File{Data: plain, Mode: ModeOf(name, plain)}
	}
	return out, nil
}

// secretFiles maps the Secret's keys to files: the shared CAs, and for an external etcd its
// client files instead of the etcd CA.
func secretFiles(external *External) map[string]string {
	files := maps.Clone(sharedFiles)
	if external != nil {
		delete(files, "etcd-ca.crt")
		delete(files, "etcd-ca.key")
		files["external-etcd-ca.crt"] = external.CAFile
		files["external-etcd.crt"] = external.CertFile
		files["external-etcd.key"] = external.KeyFile
	}
	return files
}
