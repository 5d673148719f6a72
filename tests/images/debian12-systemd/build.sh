#!/usr/bin/env bash
# Build the Debian 12 systemd host image the Molecule instances boot (debootstrap; no registry here).
# Usage: build.sh IMAGE_REF   (called by tests/testbed/image.sh, which owns caching by content hash)
set -euo pipefail
ref=$1
here=$(cd "$(dirname "$0")" && pwd)
# The same Debian mirror this machine's apt uses (deb822 URIs: lines, or classic deb lines).
mirror=$( { grep -hE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}';
            grep -hE '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | awk '{print $2}'; } \
          | grep -v security | head -1 || true)
mirror=${mirror:-http://deb.debian.org/debian}
command -v debootstrap >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }
root=$(mktemp -d /var/tmp/llmfleet-rootfs.XXXXXX)
trap 'rm -rf "$root"' EXIT
packages=$(grep -v '^#' "$here/packages.txt" | xargs | tr ' ' ',')
debootstrap --variant=minbase --include="$packages" bookworm "$root" "$mirror" >/dev/null
# Keep the package lists (a fresh host has them too); drop downloaded .debs. Mask units a test
# host never needs, so systemd boots quiet and quick in a container.
rm -rf "$root"/var/cache/apt/archives/*.deb
cp /etc/apt/sources.list.d/*.sources "$root/etc/apt/sources.list.d/" 2>/dev/null || true
for unit in systemd-resolved.service systemd-timesyncd.service getty.target console-getty.service \
            apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer; do
  ln -sf /dev/null "$root/etc/systemd/system/$unit"
done
echo 'llmfleet-testhost' > "$root/etc/hostname"
tar -C "$root" -c . | docker import -c 'CMD ["/lib/systemd/systemd"]' -c 'ENV container=docker' \
  - "$ref" >/dev/null
