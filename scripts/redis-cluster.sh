#!/usr/bin/env bash
# A local Redis Cluster of six redis-server processes (three masters, three
# replicas) on loopback, each with its own port, directory and pid file:
#   scripts/redis-cluster.sh start NAME PORT1 ... PORT6
#   scripts/redis-cluster.sh stop NAME
# Only the pids this script recorded are ever signalled.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cmd=${1:?start|stop}
name=${2:?name}
shift 2
state="$here/../.tmp/cluster-$name"

case "$cmd" in
start)
  (($# == 6)) || { echo "need six ports" >&2; exit 2; }
  mkdir -p "$state"
  printf '%s\n' "$@" >"$state/ports"
  nodes=()
  for port in "$@"; do
    "$here/redis.sh" start "$name-$port" "$port" --cluster-enabled yes \
      --cluster-config-file nodes.conf --cluster-node-timeout 2000 \
      --repl-diskless-sync-delay 0 >/dev/null
    nodes+=("127.0.0.1:$port")
  done
  redis-cli --cluster create "${nodes[@]}" --cluster-replicas 1 --cluster-yes >"$state/create.log" 2>&1 || {
    cat "$state/create.log" >&2
    exit 1
  }
  for _ in $(seq 1 200); do
    if redis-cli -p "$1" cluster info 2>/dev/null | grep -q 'cluster_state:ok'; then
      ok=1
      for port in "$@"; do
        redis-cli -p "$port" cluster info 2>/dev/null | grep -q 'cluster_state:ok' || ok=0
        # Every node must know every role: a node told late that another is a
        # replica still lists it as a master (SETSLOT there is refused, and
        # its CLUSTER SLOTS leaves the replica out).
        redis-cli -p "$port" cluster nodes 2>/dev/null |
          awk '$3 ~ /master/ { m++ } $3 ~ /slave/ { s++ } END { exit !(m == 3 && s == 3) }' || ok=0
        # A replica counts once its first sync is done, so failovers have data to keep.
        if redis-cli -p "$port" role 2>/dev/null | head -1 | grep -q slave; then
          redis-cli -p "$port" info replication 2>/dev/null | grep -q 'master_link_status:up' || ok=0
        fi
      done
      if ((ok)); then
        echo "cluster $name on ports $*" >&2
        exit 0
      fi
    fi
    sleep 0.1
  done
  echo "cluster $name did not reach cluster_state:ok" >&2
  exit 1
  ;;
stop)
  if [[ -f $state/ports ]]; then
    while read -r port; do "$here/redis.sh" stop "$name-$port"; done <"$state/ports"
    rm -rf "$state"
  fi
  ;;
*)
  echo "usage: $0 start NAME PORT1..PORT6 | stop NAME" >&2
  exit 2
  ;;
esac
