#!/usr/bin/env bash
# A local apt repository of TEST-DOUBLE NVIDIA Container Toolkit packages, laid out like NVIDIA's
# (https://nvidia.github.io/libnvidia-container: gpgkey + stable/deb/$(ARCH)/ flat repository), with a
# Release file signed by a test GPG key, served over HTTP so Molecule instances reach it on the bridge.
# The four packages (nvidia-container-toolkit, nvidia-container-toolkit-base, libnvidia-container-tools,
# libnvidia-container1) carry the pinned version and test-double programs (tests/doubles/nvidia-container-toolkit/).
# Cached by a content hash of the doubles and this script: a second run rebuilds nothing.
# Usage: 20-nvidia-apt-repo.sh ENV_FILE   -> appends LLMFLEET_NVIDIA_APT_REPO_URL(_FROM_HOSTS), ..._VERSION
# testbed-needs: engine
set -euo pipefail
env_file=${1:?usage: 20-nvidia-apt-repo.sh ENV_FILE}
top=$(cd "$(dirname "$0")/../../.." && pwd)
self="$top/tests/testbed/up.d/$(basename "$0")"
version=${LLMFLEET_NVIDIA_TOOLKIT_TEST_VERSION:-1.19.1-1}
port=${LLMFLEET_NVIDIA_APT_REPO_PORT:-18086}
root=${LLMFLEET_NVIDIA_APT_REPO_ROOT:-/var/lib/llmfleet-testbed/nvidia-apt-repo}
doubles="$top/tests/doubles/nvidia-container-toolkit"
hash=$( (cd "$doubles" && find . -type f | LC_ALL=C sort | xargs sha256sum; sha256sum "$self"; echo "$version") \
        | sha256sum | cut -c1-16)
repo="$root/$hash"
arch=$(dpkg --print-architecture)

if [ ! -f "$repo/.complete" ]; then
  echo "testbed: building the test-double NVIDIA apt repository $repo" >&2
  command -v apt-ftparchive >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq apt-utils >/dev/null; }
  command -v gpg >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq gnupg >/dev/null; }
  rm -rf "$repo" && mkdir -p "$repo/stable/deb/$arch"
  build=$(mktemp -d)
  trap 'rm -rf "$build"' EXIT
  upstream=${version%%-*}
  # package NAME "DEPENDS" FILE:DEST...
  package() {
    local name=$1 depends=$2; shift 2
    local dir="$build/$name"
    mkdir -p "$dir/DEBIAN" "$dir/usr/share/doc/$name"
    {
      echo "Package: $name"
      echo "Version: $version"
      echo "Architecture: $arch"
      echo "Maintainer: llmfleet test bed <testbed@llmfleet.invalid>"
      [ -n "$depends" ] && echo "Depends: $depends"
      echo "Section: utils"
      echo "Priority: optional"
      echo "Description: TEST DOUBLE of NVIDIA's $name $version"
      echo " Built by llmfleet's test bed (tests/testbed/up.d/20-nvidia-apt-repo.sh); no GPU code inside."
    } > "$dir/DEBIAN/control"
    echo "TEST DOUBLE of $name $version for llmfleet's Molecule tests; not NVIDIA software." > "$dir/usr/share/doc/$name/TEST-DOUBLE"
    local spec src dest
    for spec in "$@"; do
      src=${spec%%:*}; dest=${spec#*:}
      mkdir -p "$dir$(dirname "$dest")"
      sed "s/@VERSION@/$upstream/g" "$doubles/$src" > "$dir$dest"
      chmod 0755 "$dir$dest"
    done
    dpkg-deb --root-owner-group -Zxz --build "$dir" "$repo/stable/deb/$arch/${name}_${version}_${arch}.deb" >/dev/null
  }
  package libnvidia-container1 ""
  package libnvidia-container-tools "libnvidia-container1 (>= $version)" nvidia-container-cli:/usr/bin/nvidia-container-cli
  package nvidia-container-toolkit-base "" \
    nvidia-ctk:/usr/bin/nvidia-ctk nvidia-container-runtime:/usr/bin/nvidia-container-runtime
  package nvidia-container-toolkit \
    "nvidia-container-toolkit-base (= $version), libnvidia-container-tools (>= $version), libnvidia-container-tools (<< 2.0.0)" \
    nvidia-container-runtime-hook:/usr/bin/nvidia-container-runtime-hook
  # A test signing key, made once per repository build (never a real key).
  export GNUPGHOME="$build/gnupg"
  mkdir -p "$GNUPGHOME" && chmod 0700 "$GNUPGHOME"
  gpg --batch --quiet --passphrase '' --quick-gen-key "llmfleet test-double NVIDIA apt repository <testbed@llmfleet.invalid>" rsa3072 sign never
  gpg --batch --armor --export > "$repo/gpgkey"
  (
    cd "$repo/stable/deb/$arch"
    apt-ftparchive packages . > Packages
    gzip -9nkf Packages
    apt-ftparchive -o APT::FTPArchive::Release::Origin="llmfleet test bed" \
      -o APT::FTPArchive::Release::Label="TEST DOUBLE nvidia-container-toolkit" release . > Release
    gpg --batch --yes --clearsign -o InRelease Release
    gpg --batch --yes -abs -o Release.gpg Release
  )
  touch "$repo/.complete"
fi

# One HTTP server for every build under $root (any checkout's hash is reachable through it).
if ! curl -fsS -o /dev/null "http://127.0.0.1:$port/$hash/gpgkey" 2>/dev/null; then
  if curl -fsS -o /dev/null "http://127.0.0.1:$port/" 2>/dev/null; then
    echo "testbed: port $port answers but does not serve $root; set LLMFLEET_NVIDIA_APT_REPO_PORT" >&2
    exit 1
  fi
  nohup /usr/bin/python3 -m http.server "$port" --bind 0.0.0.0 --directory "$root" \
    >/var/log/llmfleet-nvidia-apt-repo.log 2>&1 &
  for _ in $(seq 1 30); do curl -fsS -o /dev/null "http://127.0.0.1:$port/$hash/gpgkey" 2>/dev/null && break; sleep 0.3; done
  curl -fsS -o /dev/null "http://127.0.0.1:$port/$hash/gpgkey" || { echo "testbed: apt repo server did not answer; see /var/log/llmfleet-nvidia-apt-repo.log" >&2; exit 1; }
fi
# The default bridge's gateway: from docker when it reports one (docker 20.10 may not), else docker0's address.
bridge_ip=${LLMFLEET_TESTBED_BRIDGE_IP:-}
[ -n "$bridge_ip" ] || bridge_ip=$(docker network inspect bridge -f '{{range .IPAM.Config}}{{.Gateway}}{{end}}' 2>/dev/null || true)
[ -n "$bridge_ip" ] || bridge_ip=$(ip -4 -o addr show docker0 2>/dev/null | awk '{print $4}' | cut -d/ -f1 | head -1)
bridge_ip=${bridge_ip:-172.17.0.1}
{
  echo "LLMFLEET_NVIDIA_APT_REPO_URL=http://127.0.0.1:$port/$hash"
  echo "LLMFLEET_NVIDIA_APT_REPO_URL_FROM_HOSTS=http://$bridge_ip:$port/$hash"
  echo "LLMFLEET_NVIDIA_TOOLKIT_TEST_VERSION=$version"
} >> "$env_file"
