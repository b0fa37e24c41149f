#!/usr/bin/env bash
# Starts or stops a throwaway redis-server on loopback that belongs to this repo:
# its own port, directory and pid file under .tmp/. Only that pid is ever signalled.
#   scripts/redis.sh start NAME PORT [redis-server options...]
#   scripts/redis.sh stop NAME
# SLIDELIMIT_REDIS_SERVER picks the server binary (default: redis-server on
# PATH, Debian's 7.0); make compat points it at the servers it builds.
set -euo pipefail
cmd=${1:?start|stop}
name=${2:?name}
root="$(cd "$(dirname "$0")/.." && pwd)/.tmp/redis-$name"
pidfile="$root/redis.pid"

case "$cmd" in
start)
  port=${3:?port}
  shift 3
  mkdir -p "$root"
  if [[ -f $pidfile ]] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
    echo "redis $name already running (pid $(cat "$pidfile"))" >&2
    exit 0
  fi
  "${SLIDELIMIT_REDIS_SERVER:-redis-server}" --port "$port" --bind 127.0.0.1 --dir "$root" --daemonize yes \
    --pidfile "$pidfile" --logfile "$root/redis.log" --save '' --appendonly no "$@"
  for _ in $(seq 1 100); do
    # The server answering must be ours (the port may have been taken meanwhile).
    if [[ -f $pidfile ]] &&
      redis-cli -p "$port" info server 2>/dev/null | grep -q "^process_id:$(cat "$pidfile")"; then
      echo "redis $name on 127.0.0.1:$port (pid $(cat "$pidfile"))" >&2
      exit 0
    fi
    sleep 0.05
  done
  echo "redis $name did not start; log:" >&2
  cat "$root/redis.log" >&2
  exit 1
  ;;
stop)
  if [[ -f $pidfile ]]; then
    pid=$(cat "$pidfile")
    if kill "$pid" 2>/dev/null; then
      for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
    fi
    rm -f "$pidfile"
  fi
  rm -rf "$root"
  ;;
*)
  echo "usage: $0 start NAME PORT [options] | stop NAME" >&2
  exit 2
  ;;
esac
