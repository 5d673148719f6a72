#!/usr/bin/env bash
# HAProxy as Debian 12 ships it (2.6, what the edge and the balancer run on bookworm hosts) on the test bed's Python
# base image, for tests/integration/test_model_routing.py: the rendered configurations run in it in front of
# stand-in replicas (python http.server). Built from debian12-python (tests/testbed/image.sh builds that first).
# Usage: build.sh IMAGE_REF   (called by tests/testbed/image.sh, which owns caching by content hash)
set -euo pipefail
ref=$1
top=$(cd "$(dirname "$0")/../../.." && pwd)
base=$("$top/tests/testbed/image.sh" debian12-python)
printf 'FROM %s\nRUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends haproxy >/dev/null && rm -rf /var/lib/apt/lists/*\n' "$base" \
  | docker build -q -t "$ref" - >/dev/null
