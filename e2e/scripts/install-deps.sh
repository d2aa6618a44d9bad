#!/usr/bin/env bash
# Installs the Debian packages the lab needs. Idempotent: does nothing when all are present.
set -euo pipefail
pkgs=(containerd runc containernetworking-plugins iproute2 iptables conntrack ethtool socat util-linux kmod ansible-core lintian man-db debootstrap)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
# The lab runs one containerd per host; the package's own service must not hold the default socket.
if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then systemctl disable --now containerd >/dev/null 2>&1 || true; fi
