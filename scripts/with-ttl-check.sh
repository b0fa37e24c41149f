#!/usr/bin/env bash
# Runs a command, then (when it passed) scripts/check-ttl.py on the servers
# that scripts/with-redis.sh and scripts/with-cluster.sh started: no key the
# tests created may be left without a TTL.
#   scripts/with-redis.sh scripts/with-cluster.sh scripts/with-ttl-check.sh COMMAND [ARGS...]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
"$@"
python3 "$here/check-ttl.py"
