#!/usr/bin/env bash
# Writes real kubeadm's static-pod manifests for one node (cp2, 10.77.0.12) of a cluster that
# leaves every image to kubeadm's defaults, once per supported minor, into
# manifests/testdata/kubeadm/<version>/ (TestRenderMatchesKubeadmOfEachMinor compares kjoin's
# render with them). Each minor's kubeadm is built from its own nested module
# (e2e/components[/v1.MINOR]). kubeadm's dry-run writes under /etc/kubernetes/tmp: it runs in a
# private mount namespace with a tmpfs there (root, unshare), so the machine's /etc/kubernetes,
# and a running lab's hosts bound onto it, are never touched.
# Each version gets an IPv4 node (<version>/); KJOIN_GOLDEN_FAMILIES="ipv6 dual" also writes an
# IPv6 single-stack node (<version>-ipv6/, advertise fd77::12) and a dual-stack cluster
# (<version>-dual/, IPv4 first), and "proxy" an IPv4 node whose kubeadm runs with proxy
# variables in its environment (<version>-proxy/, the variables in proxy-env): kubeadm passes
# them to the API server, controller-manager and scheduler, not to etcd.
# Usage: golden-manifests.sh [VERSION...]   (default: v1.35.4 v1.36.3 v1.37.2)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=(v1.35.4 v1.36.3 v1.37.2)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for v in "${versions[@]}"; do
  minor=${v#v1.}; minor=${minor%%.*}
  mod="$repo/e2e/components/v1.$minor"; [ -f "$mod/go.mod" ] || mod="$repo/e2e/components"
  grep -q "k8s.io/kubernetes $v" "$mod/go.mod" || { echo "$mod does not pin k8s.io/kubernetes $v" >&2; exit 1; }
  ld="-s -w -X k8s.io/component-base/version.gitVersion=$v -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
  # A component build of this version (KJOIN_GOLDEN_BIN, e.g. the lab's cache) saves the build.
  if [ -n "${KJOIN_GOLDEN_BIN:-}" ] && [ "$("$KJOIN_GOLDEN_BIN/kubeadm" version -o short)" = "$v" ]; then
    cp "$KJOIN_GOLDEN_BIN/kubeadm" "$work/kubeadm-$v"
  else
    (cd "$mod" && CGO_ENABLED=0 go build -trimpath -ldflags "$ld" -o "$work/kubeadm-$v" k8s.io/kubernetes/cmd/kubeadm)
  fi
  read -r -a families <<< "${KJOIN_GOLDEN_FAMILIES:-ipv4}"
  for family in "${families[@]}"; do
    proxy_env=()
    case $family in
      proxy) out="$repo/manifests/testdata/kubeadm/$v-proxy"; adv=10.77.0.12; pods=10.244.0.0/16; svcs=10.96.0.0/12
        proxy_env=(HTTP_PROXY=http://proxy.lab:3128 https_proxy=http://proxy.lab:3129 NO_PROXY=10.96.0.0/12,.lab,127.0.0.1) ;;
      ipv4) out="$repo/manifests/testdata/kubeadm/$v"; adv=10.77.0.12; pods=10.244.0.0/16; svcs=10.96.0.0/12 ;;
      ipv6) out="$repo/manifests/testdata/kubeadm/$v-ipv6"; adv=fd77::12; pods=fd77:244::/56; svcs=fd77:96::/112 ;;
      dual) out="$repo/manifests/testdata/kubeadm/$v-dual"; adv=10.77.0.12; pods=10.244.0.0/16,fd77:244::/56; svcs=10.96.0.0/12,fd77:96::/112 ;;
      *) echo "unknown family $family" >&2; exit 2 ;;
    esac
    mkdir -p "$out"
    cat > "$out/kubeadm-config.yaml" <<CFG
apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
localAPIEndpoint:
  advertiseAddress: $adv
  bindPort: 6443
nodeRegistration:
  name: cp2
  criSocket: unix:///run/containerd/containerd.sock
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: $v
controlPlaneEndpoint: control-plane.lab:6443
networking:
  podSubnet: $pods
  serviceSubnet: $svcs
CFG
    mkdir -p /etc/kubernetes  # the mount point (an empty directory) for the private tmpfs
    # shellcheck disable=SC2016
    env -u http_proxy -u HTTPS_PROXY -u no_proxy "${proxy_env[@]}" unshare --mount --propagation private sh -ec '
      mount -t tmpfs tmpfs /etc/kubernetes
      for phase in "control-plane all" "etcd local"; do
        "$1" init phase $phase --config "$2/kubeadm-config.yaml" --dry-run > "$3/log" 2>&1 || { cat "$3/log" >&2; exit 1; }
      done
      cp /etc/kubernetes/tmp/kubeadm-init-dryrun*/*.yaml "$2/"' sh "$work/kubeadm-$v" "$out" "$work"
    [ ${#proxy_env[@]} -eq 0 ] || printf '%s\n' "${proxy_env[@]}" > "$out/proxy-env"
    "$work/kubeadm-$v" version -o short > "$out/kubeadm-version"
    echo "wrote $out ($(cat "$out/kubeadm-version"))" >&2
  done
done
