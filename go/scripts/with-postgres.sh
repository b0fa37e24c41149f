#!/usr/bin/env bash
# Runs a command with a throwaway PostgreSQL of its own: a fresh private data
# directory under the system temp dir, a free loopback port, its own pid, stopped by that pid
# afterwards whatever the command returned.
#   go/scripts/with-postgres.sh COMMAND [ARGS...]
# The command sees SLIDELIMIT_TEST_DATABASE_URL. Installs Debian's postgresql
# through scripts/deps.sh when no initdb is found.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"

find_bindir() {
  local d
  # Debian keeps the server binaries out of PATH, one directory per major version.
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    [[ -x $d/initdb && -x $d/pg_ctl && -x $d/postgres ]] && { echo "$d"; return; }
  done
  if command -v initdb >/dev/null && command -v pg_ctl >/dev/null; then
    dirname "$(readlink -f "$(command -v initdb)")"
    return
  fi
  if command -v pg_config >/dev/null && [[ -x "$(pg_config --bindir)/initdb" ]]; then
    pg_config --bindir
  fi
}

bindir=$(find_bindir)
if [[ -z $bindir ]]; then
  SLIDELIMIT_EXTRA_DEBS="${SLIDELIMIT_EXTRA_DEBS:-} postgresql" "$root/scripts/deps.sh"
  bindir=$(find_bindir)
fi
[[ -n $bindir ]] || { echo "with-postgres: no initdb/pg_ctl found" >&2; exit 1; }

port=$("$root/scripts/free-port.sh")

# PostgreSQL refuses to run as root: as root the server runs as the postgres
# account Debian creates. That user must reach its data directory, and the
# checkout may sit under a private directory (/root, a 0700 mktemp -d): so the
# directory lives in the system temp dir, owned by the server's user, and no
# permission of the user's own directories is touched.
as_owner=()
if [[ $(id -u) -eq 0 ]]; then
  id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
  as_owner=(runuser -u postgres --)
fi
parent=${TMPDIR:-/tmp}
if ((${#as_owner[@]})) && ! "${as_owner[@]}" test -x "$parent" -a -w "$parent"; then
  parent=/tmp
fi
dir=$(mktemp -d "$parent/slidelimit-postgres-$port.XXXXXX")
pid=
stop() {
  # SIGINT is PostgreSQL's "fast shutdown"; only our postmaster's pid is signalled.
  if [[ -n $pid ]] && kill -INT "$pid" 2>/dev/null; then
    for _ in $(seq 1 200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  fi
  rm -rf "$dir"
}
trap stop EXIT
if ((${#as_owner[@]})); then chown postgres "$dir"; fi

# In a subshell from $dir: the server's user may not be able to enter the
# caller's working directory, and the wrapped command keeps the caller's.
(
  cd "$dir"
  "${as_owner[@]}" "$bindir/initdb" -D "$dir/data" -U slidelimit -A trust --no-sync -E UTF8 >"$dir/initdb.log" 2>&1 ||
    { cat "$dir/initdb.log" >&2; exit 1; }
  "${as_owner[@]}" "$bindir/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t 60 \
    -o "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=100" start >/dev/null ||
    { cat "$dir/postgres.log" >&2; exit 1; }
)
pid=$(head -1 "$dir/data/postmaster.pid")
echo "postgres on 127.0.0.1:$port (pid $pid)" >&2

export SLIDELIMIT_TEST_DATABASE_URL="postgres://slidelimit@127.0.0.1:$port/postgres?sslmode=disable"
"$@"
