#!/usr/bin/env bash
# Builds the root filesystem every lab host boots (systemd as PID 1), once, from Debian's
# packages (debootstrap), and prints its directory. Cached under /var/cache/kjoin by the hash
# of this script: a change here builds a new one. Idempotent.
set -euo pipefail
suite=bookworm
mirror=${KJOIN_DEBIAN_MIRROR:-}
if [ -z "$mirror" ]; then
  # The machine's own Debian mirror (deb822 or one-line sources).
  mirror=$(grep -hoE '^URIs: *[^ ]+' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1 | awk '{print $2}')
  [ -n "$mirror" ] || mirror=$(grep -hoE '^deb +[^ ]+' /etc/apt/sources.list 2>/dev/null | head -1 | awk '{print $2}')
  [ -n "$mirror" ] || mirror=http://deb.debian.org/debian
fi
# What a real node has: systemd and journald, containerd and runc as the runtime, Debian's
# CNI plugins, the tools kubeadm's preflight looks for, an SSH server and python3 for Ansible,
# cloud-init for first boot.
pkgs=systemd,systemd-sysv,dbus,iproute2,iptables,iputils-ping,procps,kmod,util-linux,mount
pkgs=$pkgs,containerd,runc,containernetworking-plugins,conntrack,ethtool,socat,ebtables
# (python3-cffi-backend named: debootstrap does not resolve the virtual packages it provides)
pkgs=$pkgs,openssh-server,python3,cloud-init,python3-cffi-backend,ca-certificates
# Units that cannot work in a namespace host (the kernel and /proc/sys are the machine's) or
# that would leave it degraded (a getty on a non-tty console) or busy (apt timers).
masks=(systemd-sysctl.service systemd-binfmt.service proc-sys-fs-binfmt_misc.automount
  proc-sys-fs-binfmt_misc.mount systemd-modules-load.service modprobe@.service apt-daily.timer
  apt-daily-upgrade.timer console-getty.service e2scrub_reap.service e2scrub_all.timer
  fstrim.timer systemd-remount-fs.service containerd.service)

cache=${KJOIN_CACHE:-/var/cache/kjoin}
key=$(sha256sum "$0" | cut -c1-12)
dir=$cache/rootfs-$suite-$key
if [ -f "$dir/.complete" ]; then echo "$dir"; exit 0; fi
command -v debootstrap >/dev/null || {
  echo "installing debootstrap" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >&2 ||
    { apt-get update -qq >&2; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >&2; }
}
rm -rf "$dir.tmp"
mkdir -p "$dir.tmp"
echo "building the lab hosts' root filesystem ($suite from $mirror) in $dir" >&2
debootstrap --variant=minbase --include="$pkgs" "$suite" "$dir.tmp" "$mirror" >&2
r=$dir.tmp
: >"$r/etc/machine-id"
mkdir -p "$r/etc/systemd/journald.conf.d" "$r/etc/systemd/system.conf.d"
# The machine's kernel log is bound in: a host must not copy it into its journal.
printf '[Journal]\nReadKMsg=no\nStorage=volatile\nRuntimeMaxUse=32M\n' >"$r/etc/systemd/journald.conf.d/lab.conf"
for u in "${masks[@]}"; do ln -sf /dev/null "$r/etc/systemd/system/$u"; done
# sshd answers from boot for Ansible (root, by key; the lab writes each host's
# authorized_keys). The host keys are the root filesystem's, shared by every lab host.
ln -sf /lib/systemd/system/ssh.service "$r/etc/systemd/system/multi-user.target.wants/ssh.service"
# containerd runs from the lab's own unit, written per host (its configuration and build are
# per host); the package's unit is masked above so it cannot start a second one.
# cloud-init stays off unless a host is given a seed (the first-boot test).
touch "$r/etc/cloud/cloud-init.disabled"
rm -rf "$r/var/cache/apt/archives/"*.deb "$r/var/lib/apt/lists/"*
touch "$r/.complete"
rm -rf "$dir"
mv "$r" "$dir"
echo "$dir"
