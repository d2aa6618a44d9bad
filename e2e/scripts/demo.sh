#!/usr/bin/env bash
# make demo: bring up the lab, join a worker (w1) and a control plane (cp2) with kjoin, and
# show the nodes, the etcd members, kjoin verify, kjoin diagnose and the node map. The lab stays up; make lab-down removes it.
set -euo pipefail
cd "$(dirname "$0")/../.."
lab=bin/lab
step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "lab: cp1 by kubeadm init, empty hosts w1 and cp2"
$lab up w1 cp2
eval "$($lab join-info)"

step "kjoin join (worker w1), token on stdin"
echo "$TOKEN" | $lab exec w1 kjoin join "$ENDPOINT" --token-file - --discovery-token-ca-cert-hash "$CA_HASH"

step "kjoin join --control-plane (cp2), certificate key from kubeadm upload-certs; token and key on stdin"
KEY=$($lab upload-certs)
printf '%s\n%s\n' "$TOKEN" "$KEY" | $lab exec cp2 kjoin join "$ENDPOINT" --token-file - --discovery-token-ca-cert-hash "$CA_HASH" \
  --control-plane --certificate-key-file - --apiserver-advertise-address 10.77.0.12

step "kubectl get nodes"
$lab kubectl get nodes -o wide

step "etcd members"
$lab etcd-members

step "kjoin verify --wait (on cp1, admin credentials): every node, etcd, static pods, /livez, once they have settled"
$lab exec cp1 kjoin verify --wait || echo "(kjoin verify exit $?: see the failed checks above)"

step "kjoin diagnose (on w1, the node's own view)"
$lab exec w1 kjoin diagnose || echo "(kjoin diagnose exit $?: see the verdict above)"

step "kjoin nodes"
$lab exec cp1 kjoin nodes

printf '\nThe lab is still up (bin/lab status, bin/lab exec HOST CMD). Remove it with: make lab-down\n'
