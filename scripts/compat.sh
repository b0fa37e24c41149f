#!/usr/bin/env bash
# The compatibility matrix (make compat, docs/compatibility.md): every binding
# on every server, standalone, and the Cluster rows, then one table.
#   scripts/compat.sh --bindings "memory rust go node wasm" --vectors DIR \
#     [--servers "redis-6.2.16 debian redis-7.2.6 valkey-8.0.1"] [--cluster "valkey-8.0.1"]
# A server is an archive name that scripts/compat-servers.sh builds, or
# `debian` (redis-server on PATH, Debian's 7.0). Per standalone server, on a
# fresh server of its own (scripts/with-redis.sh with SLIDELIMIT_REDIS_SERVER):
#   conformance   conformance/all VECTORS BINDINGS (one column per binding's
#                 driver: DRIVER on the server, DRIVER:memory or memory embedded)
#   server-time   scripts/compat-server-time.py (TIME then a write, a replica)
#   audit         audit/run in make test-audit's short mode, standalone (every
#                 registered driver)
# Per Cluster server, on a six-node Cluster of it (scripts/with-cluster.sh):
# the same with SLIDELIMIT_CONFORMANCE_CLUSTER=1, --cluster, and the audit's
# cluster and cluster-failover targets. The servers must be built
# (scripts/compat-servers.sh build) and the drivers too (make compat does
# both). Logs in .tmp/compat/ROW/. Exit 0 only when every cell passes.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
export PATH="$HOME/.cargo/bin:/usr/local/go/bin:$PATH"
out_root="$root/.tmp/compat"

bindings="" vectors="$root/conformance/vectors"
servers="redis-6.2.16 debian redis-7.2.6 valkey-8.0.1" cluster_servers="valkey-8.0.1"
row_mode=""
while (($#)); do
  case "$1" in
  --bindings) bindings=$2 ;;
  --vectors) vectors=$2 ;;
  --servers) servers=$2 ;;
  --cluster) cluster_servers=$2 ;;
  --row) row_mode=$2 ;; # internal: run one row's steps on the server(s) handed in
  *)
    echo "compat: unknown argument $1" >&2
    exit 2
    ;;
  esac
  shift 2 || { echo "compat: $1 needs a value" >&2; exit 2; }
done
[[ -n $bindings ]] || { echo "compat: --bindings is required" >&2; exit 2; }

# The version a server reports, from INFO server on PORT: valkey_version
# when there is one (Valkey also reports redis_version 7.2.4 for clients).
server_version() {
  redis-cli -p "$1" INFO server | tr -d '\r' | awk -F: '
    $1 == "valkey_version" { v = "valkey " $2 }
    $1 == "redis_version" && v == "" { r = "redis " $2 }
    END { print (v != "" ? v : r) }'
}

# The version a row's server must report.
expected_version() {
  case "$1" in
  debian) redis-server --version | sed -n 's/^Redis server v=\([^ ]*\).*/redis \1/p' ;;
  redis-*) echo "redis ${1#redis-}" ;;
  valkey-*) echo "valkey ${1#valkey-}" ;;
  esac
}

# One row, inside with-redis.sh or with-cluster.sh: the steps write
# DIR/NAME.{out,err,rc}; this always exits 0 (the results are in the files).
run_row() {
  local row=$1 dir=$2 name=$3 cluster=$4 port url rc start
  if ((cluster)); then
    url=${SLIDELIMIT_TEST_CLUSTER_URLS%%,*}
  else
    url=$SLIDELIMIT_TEST_REDIS_URL
  fi
  port=${url##*:} port=${port%%/*}
  server_version "$port" >"$dir/version"
  if [[ $(cat "$dir/version") != "$(expected_version "$name")" ]]; then
    echo "compat: $row: the server on :$port is '$(cat "$dir/version")', expected '$(expected_version "$name")'" |
      tee "$dir/conformance.err" "$dir/server-time.err" "$dir/audit.err" >&2
    for step in conformance server-time audit faults; do echo 1 >"$dir/$step.rc"; : >"$dir/$step.out"; done
    return 0
  fi
  step() {
    local s=$1
    shift
    start=$(date +%s)
    echo "compat: $row: $s" >&2
    rc=0
    "$@" >"$dir/$s.out" 2>"$dir/$s.err" || rc=$?
    echo "$rc" >"$dir/$s.rc"
    echo "$(($(date +%s) - start))" >"$dir/$s.secs"
    if ((rc)); then
      echo "compat: $row: $s FAILED (exit $rc); the end of $dir/$s.err:" >&2
      tail -n 15 "$dir/$s.err" >&2
    fi
  }
  if ((cluster)); then
    step conformance env SLIDELIMIT_CONFORMANCE_CLUSTER=1 "$root/conformance/all" "$vectors" $bindings
    step server-time python3 "$root/scripts/compat-server-time.py" --cluster
    step audit "$root/audit/run" --windows 3 --targets cluster,cluster-failover --runs log:uniform,bucketed:uniform \
      --out "$dir/audit-logs"
  else
    step conformance "$root/conformance/all" "$vectors" $bindings
    step server-time python3 "$root/scripts/compat-server-time.py"
    step audit "$root/audit/run" --windows 3 --targets standalone --runs log:uniform,bucketed:uniform --out "$dir/audit-logs"
  fi
  # The fault scenarios whose server errors differ by version (Redis 6.2
  # wraps a script's OOM and READONLY in its own error), on servers of their
  # own from this row's binary: standalone rows, the bindings with a driver.
  local drivers="" b
  for b in $bindings; do
    [[ $b != *:* && -e $root/drivers/$b ]] && drivers+="${drivers:+,}$b"
  done
  if ((cluster)) || [[ -z $drivers ]]; then
    echo skip >"$dir/faults.rc"
  else
    step faults "$root/faults/run" --drivers "$drivers" --scenarios refused_writes,read_only_replica,acl
  fi
  # Every key the steps left must expire (scripts/check-ttl.py, as make test).
  step ttl python3 "$root/scripts/check-ttl.py"
}

if [[ -n $row_mode ]]; then
  IFS=: read -r row dir name cluster <<<"$row_mode"
  run_row "$row" "$dir" "$name" "$cluster"
  exit 0
fi

binary_for() {
  if [[ $1 == debian ]]; then
    command -v redis-server
  else
    "$root/scripts/compat-servers.sh" path "$1"
  fi
}

rows=()
for s in $servers; do rows+=("$s:0"); done
for s in $cluster_servers; do rows+=("$s:1"); done
total_start=$(date +%s)
rm -rf "$out_root"
for item in "${rows[@]}"; do
  name=${item%%:*} cluster=${item#*:}
  row=$name
  ((cluster)) && row="$name-cluster"
  dir="$out_root/$row"
  mkdir -p "$dir"
  start=$(date +%s)
  bin=$(binary_for "$name") || {
    echo "compat: no server binary for $name" >&2
    echo 1 >"$dir/start.rc"
    continue
  }
  echo "compat: $row: $bin" >&2
  # A row sees only its own server: nothing handed in from outside.
  wrapper=(env -u SLIDELIMIT_TEST_REDIS_URL -u SLIDELIMIT_TEST_CLUSTER_URLS SLIDELIMIT_REDIS_SERVER="$bin")
  if ((cluster)); then wrapper+=("$root/scripts/with-cluster.sh"); else wrapper+=("$root/scripts/with-redis.sh"); fi
  if ! "${wrapper[@]}" "$0" --bindings "$bindings" --vectors "$vectors" \
    --row "$row:$dir:$name:$cluster" 2>&1 | tee "$dir/row.log" >&2; then
    echo "compat: $row: the server did not start (see $dir/row.log)" >&2
    echo 1 >"$dir/start.rc"
  fi
  echo "$(($(date +%s) - start))" >"$dir/secs"
done

# The table; its exit status is make compat's.
labels=()
for item in "${rows[@]}"; do
  name=${item%%:*} cluster=${item#*:}
  ((cluster)) && labels+=("$name-cluster") || labels+=("$name")
done
python3 "$root/scripts/compat-table.py" --out "$out_root" --bindings "$bindings" \
  --total-secs "$(($(date +%s) - total_start))" "${labels[@]}"
