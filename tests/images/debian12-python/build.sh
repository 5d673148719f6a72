#!/usr/bin/env bash
# Build a minimal Debian 12 + Python 3.11 base image (debootstrap minbase; there is no registry to pull
# a python image from here). No systemd: it is a base for application images, not a test host.
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
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/usr/share/doc/* \
       "$root"/usr/share/man/* "$root"/usr/share/locale/*
cp /etc/apt/sources.list.d/*.sources "$root/etc/apt/sources.list.d/" 2>/dev/null || true
tar -C "$root" -c . | docker import -c 'CMD ["/usr/bin/python3"]' -c 'ENV LANG=C.UTF-8' - "$ref" >/dev/null
