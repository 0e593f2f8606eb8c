#!/usr/bin/env bash
# Installs what `mcplint runner setup` and `mcplint fetch` need on Debian 12 (idempotent).
#
# QEMU comes from bookworm-backports: the plain bookworm qemu-system-x86 (7.2) conflicts with the
# preinstalled qemu-utils 10.x (`Breaks: qemu-system-common (< 1:8.0)`), so apt would remove it.
set -euo pipefail
need=()
command -v qemu-system-x86_64 >/dev/null || need+=(qemu)
command -v mkfs.ext4 >/dev/null || need+=(e2fsprogs)
[ -x /bin/busybox ] && /bin/busybox --help 2>&1 | head -1 | grep -q static 2>/dev/null || dpkg -s busybox-static >/dev/null 2>&1 || need+=(busybox-static)
command -v bwrap >/dev/null || need+=(bubblewrap)
command -v cpio >/dev/null || need+=(cpio)
command -v lz4 >/dev/null || need+=(lz4)
command -v xz >/dev/null || need+=(xz-utils)
command -v zstd >/dev/null || need+=(zstd)
[ ${#need[@]} -eq 0 ] && exit 0
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
if [[ " ${need[*]} " == *" qemu "* ]]; then
  src=/etc/apt/sources.list.d/bookworm-backports.sources
  if ! grep -rqs bookworm-backports /etc/apt/sources.list /etc/apt/sources.list.d/; then
    printf 'Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' | $SUDO tee "$src" >/dev/null
  fi
fi
$SUDO apt-get update -qq
pkgs=()
for p in "${need[@]}"; do [ "$p" != qemu ] && pkgs+=("$p"); done
[ ${#pkgs[@]} -gt 0 ] && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${pkgs[@]}"
if [[ " ${need[*]} " == *" qemu "* ]]; then
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends -t bookworm-backports qemu-system-x86
fi
