#!/usr/bin/env bash
# Builds the servers of the compatibility matrix (docs/compatibility.md) from
# source archives, once, into a cache under .tmp/servers:
#   scripts/compat-servers.sh check NAME...   # are the archives there, with good checksums?
#   scripts/compat-servers.sh build NAME...   # check, then build what the cache lacks
#   scripts/compat-servers.sh path NAME       # prints the cached redis-server (or valkey-server)
#   scripts/compat-servers.sh present NAME... # exit 0 when any archive is there (.ci/run)
# NAME is an archive's name without .tar.gz (redis-6.2.16, valkey-8.0.1, ...).
#
# The archives and their SHA256SUMS live in SLIDELIMIT_SERVERS_DIR (default:
# ../shared/servers next to the checkout). Every archive is checked against
# SHA256SUMS, and the matrix's own servers against the checksums pinned in
# scripts/compat-servers.sha256, before it is unpacked; a mismatch refuses
# to build. A cached
# build is keyed by its archive's sha256 (.tmp/servers/NAME/SHA256, written
# last), so a changed archive is built again and an interrupted build never
# counts (SLIDELIMIT_SERVERS_CACHE moves the cache, e.g. to one that CI
# keeps between runs). Builds run COMPAT_BUILD_PARALLEL at a time (default
# 2) and share COMPAT_BUILD_JOBS make jobs (default 2, for two cores): two
# servers build with -j1 each, a lone one with -j2 (docs/compatibility.md
# has the figures).
# Exit status: 0 done, 1 a build failed, 3 archives missing or bad.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
servers_dir="$(realpath -m "${SLIDELIMIT_SERVERS_DIR:-$root/../shared/servers}")"
cache="${SLIDELIMIT_SERVERS_CACHE:-$root/.tmp/servers}"
parallel="${COMPAT_BUILD_PARALLEL:-2}"
total_jobs="${COMPAT_BUILD_JOBS:-2}"
make_jobs=1

cmd=${1:-}
shift || true

# Tells a new user what is needed and where it goes; exit 3.
missing() {
  local problem=$1
  shift
  cat >&2 <<EOF
compat: $problem
  make compat builds Redis 6.2, Redis 7.2 and Valkey 8 from source archives
  kept outside the repository, in this directory:
    $servers_dir
  (default ../shared/servers next to the checkout; set SLIDELIMIT_SERVERS_DIR
  to use another one). It must hold:
EOF
  local n
  for n in "$@"; do
    if [[ -f $servers_dir/$n.tar.gz ]]; then
      printf '    %-24s present\n' "$n.tar.gz" >&2
    else
      printf '    %-24s MISSING\n' "$n.tar.gz" >&2
    fi
  done
  if [[ -f $servers_dir/SHA256SUMS ]]; then
    printf '    %-24s present\n' SHA256SUMS >&2
  else
    printf '    %-24s MISSING\n' SHA256SUMS >&2
  fi
  cat >&2 <<EOF
  Each archive is the upstream release tag as \`git archive\` makes it, with
  the directory NAME/ at its top, e.g. in a clone of github.com/redis/redis:
    git archive --prefix=redis-7.2.6/ -o redis-7.2.6.tar.gz 7.2.6
  (valkey-8.0.1 from github.com/valkey-io/valkey, tag 8.0.1). SHA256SUMS is
  the output of \`sha256sum *.tar.gz\` in that directory: make compat builds
  nothing whose checksum it cannot confirm. Building needs cc and make
  (Debian: build-essential); each server takes about two minutes on two cores.
  More in docs/compatibility.md. Without the archives, the same checks run on
  Debian's redis-server alone with:
    make compat COMPAT_SERVERS=debian COMPAT_CLUSTER_SERVERS=
EOF
  exit 3
}

# sum_of NAME FILE: the sha256 FILE (sha256sum's format) gives NAME.tar.gz, or nothing.
sum_of() {
  awk -v f="$1.tar.gz" '{ sub(/^\*/, "", $2) } $2 == f { print $1; exit }' "$2"
}

# check NAME...: every archive present and matching SHA256SUMS (and, for the
# matrix's own servers, the checksums pinned in scripts/compat-servers.sha256).
check() {
  (($#)) || { echo "compat-servers: no server names" >&2; exit 2; }
  local n want got pinned
  if [[ ! -d $servers_dir ]]; then
    missing "the directory of server archives does not exist." "$@"
  fi
  for n in "$@"; do
    [[ -f $servers_dir/$n.tar.gz && -f $servers_dir/SHA256SUMS ]] ||
      missing "server archives missing." "$@"
  done
  for n in "$@"; do
    want=$(sum_of "$n" "$servers_dir/SHA256SUMS")
    [[ -n $want ]] || missing "SHA256SUMS has no line for $n.tar.gz." "$@"
    # The matrix's own servers are pinned in the repository: a SHA256SUMS
    # next to the archives cannot vouch for an archive that was swapped.
    pinned=$(sum_of "$n" "$root/scripts/compat-servers.sha256")
    if [[ -n $pinned && $pinned != "$want" ]]; then
      echo "compat: $servers_dir/SHA256SUMS says $want for $n.tar.gz," >&2
      echo "  but scripts/compat-servers.sha256 pins $pinned; refusing to build it." >&2
      exit 3
    fi
    got=$(sha256sum "$servers_dir/$n.tar.gz" | cut -d' ' -f1)
    if [[ $got != "$want" ]]; then
      echo "compat: $servers_dir/$n.tar.gz does not match SHA256SUMS" >&2
      echo "  SHA256SUMS says $want" >&2
      echo "  the file is     $got" >&2
      echo "  refusing to build it; replace the archive (or SHA256SUMS, if the archive is the one you want)." >&2
      exit 3
    fi
    echo "$n $got"
  done
}

# The server binary of a build dir: Valkey's is valkey-server (make install
# adds a redis-server link; the real name is used).
server_bin() {
  local dir=$1
  if [[ -x $dir/bin/valkey-server ]]; then echo "$dir/bin/valkey-server"; else echo "$dir/bin/redis-server"; fi
}

# build_one NAME SHA: unpack into a scratch dir, build, install, then write
# the stamp. Output to .tmp/servers/NAME.build.log.
build_one() {
  local n=$1 sha=$2 scratch log start
  scratch="$cache/$n.build"
  log="$cache/$n.build.log"
  rm -rf "$scratch" "$cache/$n"
  mkdir -p "$scratch"
  start=$(date +%s)
  {
    tar -xzf "$servers_dir/$n.tar.gz" -C "$scratch" &&
      make -C "$scratch/$n" -j"$make_jobs" MALLOC=libc BUILD_TLS=no &&
      make -C "$scratch/$n" install PREFIX="$cache/$n"
  } >"$log" 2>&1 || return 1
  "$(server_bin "$cache/$n")" --version >>"$log"
  echo "$sha" >"$cache/$n/SHA256"
  rm -rf "$scratch"
  echo "compat: built $n in $(($(date +%s) - start)) s: $("$(server_bin "$cache/$n")" --version | cut -d' ' -f1-3)" >&2
}

case "$cmd" in
check)
  check "$@" >/dev/null
  ;;
build)
  sums=$(check "$@")
  command -v make >/dev/null && command -v cc >/dev/null || {
    echo "compat: building the servers needs make and cc (Debian: apt-get install build-essential)" >&2
    exit 1
  }
  mkdir -p "$cache"
  todo=()
  while read -r n sha; do
    if [[ -f $cache/$n/SHA256 && $(cat "$cache/$n/SHA256") == "$sha" && -x $(server_bin "$cache/$n") ]]; then
      echo "compat: $n cached ($cache/$n)" >&2
    else
      todo+=("$n:$sha")
    fi
  done <<<"$sums"
  ((${#todo[@]})) || exit 0
  ((parallel > ${#todo[@]})) && parallel=${#todo[@]}
  make_jobs=$((total_jobs / parallel))
  ((make_jobs >= 1)) || make_jobs=1
  echo "compat: building ${todo[*]%%:*} ($parallel at a time, make -j$make_jobs each; logs in $cache/NAME.build.log)" >&2
  start=$(date +%s)
  failed=()
  for item in "${todo[@]}"; do
    while (($(jobs -rp | wc -l) >= parallel)); do wait -n || true; done
    build_one "${item%%:*}" "${item#*:}" &
  done
  wait || true
  # A build counts when its stamp is there (written last).
  for item in "${todo[@]}"; do
    n=${item%%:*}
    if [[ ! -f $cache/$n/SHA256 ]]; then
      failed+=("$n")
      echo "compat: building $n failed; the end of $cache/$n.build.log:" >&2
      tail -n 20 "$cache/$n.build.log" >&2
    fi
  done
  echo "compat: builds took $(($(date +%s) - start)) s" >&2
  ((${#failed[@]} == 0))
  ;;
present)
  for n in "$@"; do [[ -f $servers_dir/$n.tar.gz ]] && exit 0; done
  names=$(printf '%s.tar.gz ' "$@")
  if [[ -d $servers_dir ]]; then
    echo "no server archives (${names% }) in $servers_dir" >&2
  else
    echo "no directory $servers_dir for the server archives (${names% })" >&2
  fi
  exit 1
  ;;
path)
  n=${1:?name}
  [[ -f $cache/$n/SHA256 ]] || { echo "compat-servers: $n is not built (scripts/compat-servers.sh build $n)" >&2; exit 1; }
  server_bin "$cache/$n"
  ;;
*)
  echo "usage: $0 check|build|present NAME... | path NAME" >&2
  exit 2
  ;;
esac
