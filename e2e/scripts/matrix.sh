#!/usr/bin/env bash
# make matrix: one compact suite (TestMatrixCell) per compatibility cell, each on a fresh lab
# whose components are that cell's Kubernetes version; raw results in
# $KJOIN_ARTIFACTS/matrix.jsonl, merged into COMPATIBILITY.results.jsonl (by cell), COMPATIBILITY.md
# generated from them. A cell is VERSION (cluster and kubelets) or VERSION:kubelet-KVERSION
# (a worker whose kubelet is KVERSION) or VERSION:upgrade-TARGET (kubeadm upgrade of a cluster made at
# VERSION, with kjoin-joined nodes, to TARGET) or VERSION:runtime-NAME (the joined nodes run the
# container runtime NAME, e.g. containerd-v2.4.2, built from e2e/components/NAME) or VERSION:ipv6 /
# VERSION:dual (an IPv6 single-stack or a dual-stack cluster).
# Usage: matrix.sh CELL...
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
cd "$repo"
out=${KJOIN_ARTIFACTS:-$repo/_artifacts}/matrix.jsonl
mkdir -p "$(dirname "$out")"; rm -f "$out"
skew=()
for cell in "$@"; do case $cell in *:kubelet-*) skew+=("${cell#*:kubelet-}") ;; esac; done
status=0
for cell in "$@"; do
  version=${cell%%:*}; kubelet=""; upgrade=""; runtime=""
  case $cell in *:kubelet-*) kubelet=${cell#*:kubelet-} ;; esac
  case $cell in *:runtime-*) runtime=${cell#*:runtime-} ;; esac
  family=""; case $cell in *:ipv6) family=ipv6 ;; *:dual) family=dual ;; esac
  case $cell in
    *:upgrade-*) upgrade=$(KJOIN_K8S_VERSION=${cell#*:upgrade-} KJOIN_SKEW_KUBELETS="${skew[*]:-v1.34.4}" e2e/components/build.sh) || { status=1; continue; } ;;
  esac
  echo "=== cell $cell" >&2
  bin=$(KJOIN_K8S_VERSION=$version KJOIN_SKEW_KUBELETS="${skew[*]:-v1.34.4}" KJOIN_RUNTIMES="$runtime" e2e/components/build.sh) || { status=1; continue; }
  bin/lab down >/dev/null 2>&1 || true
  KJOIN_MATRIX_CELL=$cell KJOIN_MATRIX_KUBELET=$kubelet KJOIN_MATRIX_UPGRADE_TO=$upgrade KJOIN_MATRIX_RUNTIME=$runtime KJOIN_LAB_FAMILY=$family KJOIN_MATRIX_RESULTS=$out \
    KJOIN_BIN=$repo/bin/kjoin-fault KJOIN_COMPONENTS=$bin \
    go test -tags e2e -p 1 -count=1 -v -run '^(TestMatrix(Cell|Upgrade)|TestSkewedKubelet)$' -timeout 30m ./e2e/ || status=1
  bin/lab down >/dev/null 2>&1 || true
done
# The run's rows replace those cells' rows in the committed results; other cells' rows stay.
go run ./e2e/cmd/matrixreport -results "$out" -into COMPATIBILITY.results.jsonl -out COMPATIBILITY.md -command "make matrix MATRIX_CELLS='$*'"
exit $status
