#!/usr/bin/env bash
# Installs what `mcplint runner setup` and `mcplint fetch` need on Debian 12. Idempotent: does
# nothing when everything is present.
#
# QEMU comes from bookworm-backports: the plain bookworm qemu-system-x86 (7.2) conflicts with a
# preinstalled qemu-utils 10.x (`Breaks: qemu-system-common (< 1:8.0)`), so apt would remove it.
# The guest's kernel, busybox and libraries are NOT installed here: `mcplint runner setup` downloads
# them with `apt-get download` and unpacks them into its cache.
set -euo pipefail
need=()
have() { command -v "$1" >/dev/null 2>&1; }
have qemu-system-x86_64 || need+=(qemu)
have mkfs.ext4 || need+=(e2fsprogs)
have bwrap || need+=(bubblewrap)
have cpio || need+=(cpio)
have lz4 || need+=(lz4)
have xz || need+=(xz-utils)
have zstd || need+=(zstd)
have dpkg-deb || need+=(dpkg)
have npm || need+=(npm)
have python3 || need+=(python3)
python3 -m pip --version >/dev/null 2>&1 || need+=(python3-pip)
dpkg -s busybox-static >/dev/null 2>&1 || need+=(busybox-static)
if [ ${#need[@]} -eq 0 ]; then
  # apt-get download (used by runner setup) needs package lists.
  [ -n "$(ls -A /var/lib/apt/lists 2>/dev/null | grep -v -e lock -e partial)" ] || apt-get update -qq
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO=sudo
if [[ " ${need[*]} " == *" qemu "* ]] && ! grep -rqs bookworm-backports /etc/apt/sources.list /etc/apt/sources.list.d/; then
  # Use the same mirror as the machine's own bookworm source.
  mirror=$(sed -n 's/^URIs:[[:space:]]*\([^[:space:]]*\/debian\)[[:space:]]*$/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n 1)
  [ -n "$mirror" ] || mirror=$(awk '$1 == "deb" && $3 == "bookworm" { print $2; exit }' /etc/apt/sources.list 2>/dev/null)
  [ -n "$mirror" ] || { echo "install-runner-deps: no Debian mirror found in the apt sources" >&2; exit 1; }
  printf 'Types: deb\nURIs: %s\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' "$mirror" |
    $SUDO tee /etc/apt/sources.list.d/bookworm-backports.sources >/dev/null
fi
$SUDO apt-get update -qq
pkgs=()
for p in "${need[@]}"; do [ "$p" != qemu ] && pkgs+=("$p"); done
if [ ${#pkgs[@]} -gt 0 ]; then
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${pkgs[@]}"
fi
if [[ " ${need[*]} " == *" qemu "* ]]; then
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends -t bookworm-backports qemu-system-x86
fi
