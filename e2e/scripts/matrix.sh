#!/usr/bin/env bash
# make matrix: one compact suite (TestMatrixCell) per compatibility cell, each on a fresh lab
# whose components are that cell's Kubernetes version; raw results in
# $KJOIN_ARTIFACTS/matrix.jsonl, copied to COMPATIBILITY.results.jsonl, COMPATIBILITY.md
# generated from them. A cell is VERSION (cluster and kubelets) or VERSION:kubelet-KVERSION
# (a worker whose kubelet is KVERSION).
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
  version=${cell%%:*}; kubelet=""
  case $cell in *:kubelet-*) kubelet=${cell#*:kubelet-} ;; esac
  echo "=== cell $cell" >&2
  bin=$(KJOIN_K8S_VERSION=$version KJOIN_SKEW_KUBELETS="${skew[*]:-v1.34.4}" e2e/components/build.sh) || { status=1; continue; }
  bin/lab down >/dev/null 2>&1 || true
  KJOIN_MATRIX_CELL=$cell KJOIN_MATRIX_KUBELET=$kubelet KJOIN_MATRIX_RESULTS=$out \
    KJOIN_BIN=$repo/bin/kjoin-fault KJOIN_COMPONENTS=$bin \
    go test -tags e2e -p 1 -count=1 -v -run '^TestMatrixCell$' -timeout 30m ./e2e/ || status=1
  bin/lab down >/dev/null 2>&1 || true
done
cp "$out" COMPATIBILITY.results.jsonl
go run ./e2e/cmd/matrixreport -results COMPATIBILITY.results.jsonl -out COMPATIBILITY.md -command "make matrix MATRIX_CELLS='$*'"
exit $status
