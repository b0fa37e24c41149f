#!/usr/bin/env bash
# Runs a command with a fresh six-node Redis Cluster of its own:
#   scripts/with-cluster.sh COMMAND [ARGS...]
# The command sees SLIDELIMIT_TEST_CLUSTER_URLS (comma-separated redis:// URLs
# of every node); the nodes are stopped by pid afterwards.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
pick_ports() {
  ports=()
  while ((${#ports[@]} < 6)); do
    local port
    port=$("$here/free-port.sh")
    # The cluster bus listens on port + 10000; both must be free.
    if ((port + 10000 < 65536)) && ! (exec 3<>"/dev/tcp/127.0.0.1/$((port + 10000))") 2>/dev/null; then
      [[ " ${ports[*]} " == *" $port "* ]] || ports+=("$port")
    fi
  done
  name="test-${ports[0]}"
}
# A port found free can be taken before redis-server binds it: try a few sets.
for attempt in 1 2 3; do
  pick_ports
  trap '"$here/redis-cluster.sh" stop "$name"' EXIT
  if "$here/redis-cluster.sh" start "$name" "${ports[@]}"; then
    break
  fi
  "$here/redis-cluster.sh" stop "$name"
  if ((attempt == 3)); then
    echo "with-cluster: could not start the cluster" >&2
    exit 1
  fi
done
urls=()
for port in "${ports[@]}"; do urls+=("redis://127.0.0.1:$port/"); done
SLIDELIMIT_TEST_CLUSTER_URLS=$(IFS=,; echo "${urls[*]}")
export SLIDELIMIT_TEST_CLUSTER_URLS
"$@"
