#!/usr/bin/env bash
# Builds the lab's real Kubernetes and etcd programs into a cache keyed by version.
# Usage: build.sh  -> prints the bin directory. Idempotent: a complete cache is reused.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
K8S_VERSION=v1.37.2
ETCD_VERSION=v3.7.0
cache=${KJOIN_CACHE:-/var/cache/kjoin}
bin="$cache/components/k8s-$K8S_VERSION-etcd-$ETCD_VERSION-$(sha256sum "$here/go.sum" | cut -c1-12)/bin"
# Older kubelets for skewed workers, each built from its minor's nested module into a cache
# keyed by that module's go.sum, linked into bin as kubelet-vX.Y.Z.
SKEW_KUBELETS=(v1.34.4)
skew_kubelets() {
  for v in "${SKEW_KUBELETS[@]}"; do
    local m=${v#v1.}; m=${m%%.*}
    local dir=$here/v1.$m
    local out="$cache/components/kubelet-$v-$(sha256sum "$dir/go.sum" | cut -c1-12)"
    if [ ! -x "$out/kubelet" ]; then
      local start; start=$(date +%s)
      echo "building kubelet $v (in $dir)" >&2
      mkdir -p "$out"
      (cd "$dir" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$v -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$m -X k8s.io/component-base/version.gitTreeState=clean" -o "$out/.kubelet.tmp" k8s.io/kubernetes/cmd/kubelet)
      mv "$out/.kubelet.tmp" "$out/kubelet"
      echo "built kubelet $v in $(( $(date +%s) - start ))s" >&2
    fi
    ln -sfn "$out/kubelet" "$bin/kubelet-$v"
  done
}
progs=(etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kubeadm kubectl)
missing=()
for p in "${progs[@]}"; do [ -x "$bin/$p" ] || missing+=("$p"); done
mkdir -p "$bin"
skew_kubelets
if [ ${#missing[@]} -eq 0 ]; then echo "$bin"; exit 0; fi
minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
kver="-X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
ever="-X go.etcd.io/etcd/api/v3/version.GitSHA=v${ETCD_VERSION#v}"
cd "$here"
export CGO_ENABLED=0
for p in "${missing[@]}"; do
  start=$(date +%s)
  case $p in
    etcd) pkg=go.etcd.io/etcd/server/v3; ld="-s -w $ever" ;;
    *) pkg=k8s.io/kubernetes/cmd/$p; ld="-s -w $kver" ;;
  esac
  echo "building $p ($pkg)" >&2
  go build -trimpath -ldflags "$ld" -o "$bin/.$p.tmp" "$pkg"
  mv "$bin/.$p.tmp" "$bin/$p"
  echo "built $p in $(( $(date +%s) - start ))s" >&2
done
echo "$bin"
