#!/usr/bin/env bash
# Writes BENCHMARKS.md from a benchmark table and the command that produced it.
set -euo pipefail
table=$1; cmd=$2
{
  echo "# Benchmarks"
  echo
  echo "Produced by \`$cmd\` on $(date -u +%Y-%m-%d) ($(nproc) cores, $(awk '/MemTotal/{printf "%d GiB", $2/1048576}' /proc/meminfo))."
  echo "One lab, real components (kubeadm-made cp1, containerd, kubelet v1.37.2); workers joined alternately"
  echo "with each tool on fresh hosts. Wall time = the join command; start → Ready = from the command's start"
  echo "until the test (polling every 50 ms) first sees the Node Ready."
  echo
  cat "$table"
} > BENCHMARKS.md
echo "wrote BENCHMARKS.md"
