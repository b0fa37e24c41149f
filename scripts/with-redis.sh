#!/usr/bin/env bash
# Runs a command with a fresh redis-server of its own on a free loopback port:
#   scripts/with-redis.sh COMMAND [ARGS...]
# The command sees SLIDELIMIT_TEST_REDIS_URL (and SLIDELIMIT_TEST_REDIS_PORT);
# the server is stopped by its pid afterwards, whatever the command returned.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# A port found free can be taken before redis-server binds it: try a few.
for attempt in 1 2 3 4 5; do
  port=$("$here/free-port.sh")
  name="test-$port"
  if "$here/redis.sh" start "$name" "$port" >/dev/null 2>&1; then
    break
  fi
  "$here/redis.sh" stop "$name"
  if ((attempt == 5)); then
    echo "with-redis: could not start redis-server" >&2
    exit 1
  fi
done
trap '"$here/redis.sh" stop "$name"' EXIT
export SLIDELIMIT_TEST_REDIS_URL="redis://127.0.0.1:$port/"
export SLIDELIMIT_TEST_REDIS_PORT="$port"
"$@"
