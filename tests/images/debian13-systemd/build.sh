#!/usr/bin/env bash
# Build the Debian 13 (trixie) systemd host image for the host-layer Molecule scenarios run over a second
# distribution (make molecule-distros). Same recipe as debian12-systemd, from the same Debian mirror, suite trixie.
# Usage: build.sh IMAGE_REF   (called by tests/testbed/image.sh, which owns caching by content hash)
set -euo pipefail
ref=$1
here=$(cd "$(dirname "$0")" && pwd)
suite=trixie
# The same Debian mirror this machine's apt uses (deb822 URIs: lines, or classic deb lines).
mirror=$( { grep -hE '^URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null | awk '{print $2}';
            grep -hE '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | awk '{print $2}'; } \
          | grep -v security | head -1 || true)
mirror=${mirror:-http://deb.debian.org/debian}
command -v debootstrap >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null; }
root=$(mktemp -d /var/tmp/llmfleet-rootfs.XXXXXX)
trap 'rm -rf "$root"' EXIT
packages=$(grep -v '^#' "$here/packages.txt" | xargs | tr ' ' ',')
debootstrap --variant=minbase --include="$packages" "$suite" "$root" "$mirror" >/dev/null
rm -rf "$root"/var/cache/apt/archives/*.deb
# The host's own apt sources name bookworm: write trixie's (main, updates, security) instead.
rm -f "$root"/etc/apt/sources.list
cat > "$root/etc/apt/sources.list.d/debian.sources" <<SOURCES
Types: deb
URIs: $mirror
Suites: $suite $suite-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: ${mirror%/debian}/debian-security
Suites: $suite-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
for unit in systemd-resolved.service systemd-timesyncd.service getty.target console-getty.service \
            apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer; do
  ln -sf /dev/null "$root/etc/systemd/system/$unit"
done
echo 'llmfleet-testhost' > "$root/etc/hostname"
tar -C "$root" -c . | docker import -c 'CMD ["/lib/systemd/systemd"]' -c 'ENV container=docker' \
  - "$ref" >/dev/null
