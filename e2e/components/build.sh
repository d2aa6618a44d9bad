#!/usr/bin/env bash
# Builds the lab's real Kubernetes and etcd programs into a cache keyed by version.
# Usage: [KJOIN_K8S_VERSION=v1.36.3] build.sh  -> prints the bin directory. Idempotent: a
# complete cache is reused. One nested module per Kubernetes minor (this directory for v1.37,
# v1.MINOR/ for the others); each minor gets the etcd its kubeadm defaults to (etcd-vX.Y.Z/).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
K8S_VERSION=${KJOIN_K8S_VERSION:-v1.37.2}
minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
case $minor in
  35) ETCD_VERSION=v3.6.6 ;;
  36) ETCD_VERSION=v3.6.8 ;;
  37) ETCD_VERSION=v3.7.0 ;;
  *) echo "Kubernetes $K8S_VERSION is outside the lab's versions (v1.35-v1.37)" >&2; exit 2 ;;
esac
k8smod=$here; [ "$minor" = 37 ] || k8smod=$here/v1.$minor
etcdmod=$here; [ "$minor" = 37 ] || etcdmod=$here/etcd-$ETCD_VERSION
grep -q "k8s.io/kubernetes $K8S_VERSION" "$k8smod/go.mod" || { echo "$k8smod does not pin k8s.io/kubernetes $K8S_VERSION" >&2; exit 2; }
cache=${KJOIN_CACHE:-/var/cache/kjoin}
key=$(sha256sum "$here/go.sum" | cut -c1-12)
[ "$minor" = 37 ] || key=$(cat "$k8smod/go.sum" "$etcdmod/go.sum" | sha256sum | cut -c1-12)
bin="$cache/components/k8s-$K8S_VERSION-etcd-$ETCD_VERSION-$key/bin"
# Older kubelets for skewed workers, each built from its minor's nested module into a cache
# keyed by that module's go.sum, linked into bin as kubelet-vX.Y.Z.
# None by default: make matrix asks for its kubelet cells' (14 minutes each, cold).
read -r -a SKEW_KUBELETS <<< "${KJOIN_SKEW_KUBELETS:-}"
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
# Other container runtimes a lab host may run instead of Debian's containerd (Lab.UseRuntime):
# KJOIN_RUNTIMES="containerd-v2.4.2" builds containerd, its runc shim and ctr from that nested
# module into a cache keyed by its go.sum, linked into bin/runtimes/NAME/.
read -r -a RUNTIMES <<< "${KJOIN_RUNTIMES:-}"
runtimes() {
  for r in "${RUNTIMES[@]}"; do
    local dir=$here/$r
    [ -f "$dir/go.mod" ] || { echo "no runtime module $dir" >&2; exit 2; }
    local v=${r#containerd-}
    local out="$cache/components/$r-$(sha256sum "$dir/go.sum" | cut -c1-12)"
    local p
    for p in containerd containerd-shim-runc-v2 ctr; do
      [ -x "$out/$p" ] && continue
      local start; start=$(date +%s)
      echo "building $p $v (in $dir)" >&2
      mkdir -p "$out"
      (cd "$dir" && CGO_ENABLED=0 go build -trimpath -tags "no_btrfs no_devmapper no_zfs" \
        -ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=$v -X github.com/containerd/containerd/v2/version.Revision=kjoin-lab" \
        -o "$out/.$p.tmp" "github.com/containerd/containerd/v2/cmd/$p")
      mv "$out/.$p.tmp" "$out/$p"
      echo "built $p $v in $(( $(date +%s) - start ))s" >&2
    done
    mkdir -p "$bin/runtimes"
    ln -sfn "$out" "$bin/runtimes/$r"
  done
}
progs=(etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kubeadm kubectl)
missing=()
for p in "${progs[@]}"; do [ -x "$bin/$p" ] || missing+=("$p"); done
mkdir -p "$bin"
[ "$minor" != 37 ] || skew_kubelets
runtimes
if [ ${#missing[@]} -eq 0 ]; then echo "$bin"; exit 0; fi
minor=${K8S_VERSION#v1.}; minor=${minor%%.*}
kver="-X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
ever="-X go.etcd.io/etcd/api/v3/version.GitSHA=v${ETCD_VERSION#v}"
cd "$here"
export CGO_ENABLED=0
# etcd from its module; the Kubernetes programs in one go build, so that one program's link
# (single-threaded, up to a minute for kube-apiserver) overlaps the others' compiles. Each
# program lands in a temporary directory and is renamed into bin when the build succeeded.
k8spkgs=()
for p in "${missing[@]}"; do
  [ "$p" = etcd ] || { k8spkgs+=("k8s.io/kubernetes/cmd/$p"); continue; }
  start=$(date +%s)
  echo "building etcd (go.etcd.io/etcd/server/v3, in $etcdmod)" >&2
  (cd "$etcdmod" && go build -trimpath -ldflags "-s -w $ever" -o "$bin/.etcd.tmp" go.etcd.io/etcd/server/v3)
  mv "$bin/.etcd.tmp" "$bin/etcd"
  echo "built etcd in $(( $(date +%s) - start ))s" >&2
done
if [ ${#k8spkgs[@]} -gt 0 ]; then
  start=$(date +%s)
  tmp="$bin/.build.tmp"; rm -rf "$tmp"; mkdir -p "$tmp"
  echo "building ${k8spkgs[*]##*/} (in $k8smod)" >&2
  (cd "$k8smod" && go build -trimpath -ldflags "-s -w $kver" -o "$tmp/" "${k8spkgs[@]}")
  for pkg in "${k8spkgs[@]}"; do mv "$tmp/${pkg##*/}" "$bin/${pkg##*/}"; done
  rmdir "$tmp"
  echo "built ${k8spkgs[*]##*/} in $(( $(date +%s) - start ))s" >&2
fi
echo "$bin"
