#!/usr/bin/env bash
# Installs what `make test` needs and a fresh Debian machine may lack, from
# Debian's packages and crates.io. Idempotent and quiet when all is there.
set -euo pipefail
need=()
command -v redis-server >/dev/null || need+=(redis-server)
command -v redis-cli >/dev/null || need+=(redis-tools)
command -v valgrind >/dev/null || need+=(valgrind)
command -v cc >/dev/null || need+=(gcc)
# faults/run's tls scenario and the TLS tests (rust/ and cli/ tests/faults.rs, go/, node/) make certificates with openssl.
command -v openssl >/dev/null || need+=(openssl)
# PostgreSQL for the River tests (go/scripts/with-postgres.sh); Debian keeps its binaries off PATH.
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || command -v initdb >/dev/null || need+=(postgresql)
# Debian's python3 has the venv module without ensurepip; only python3-venv makes `python3 -m venv` work.
if ! python3 -c 'import venv, ensurepip' 2>/dev/null; then need+=(python3-venv); fi
# The Ruby binding (ruby/): Debian's Ruby and gems, since RubyGems is not
# reachable (ruby-ffi loads ffi-c's library; no native gem is built).
for deb in ruby ruby-dev ruby-ffi ruby-redis ruby-sidekiq ruby-minitest ruby-rack ruby-prometheus-client-mmap; do
  dpkg -s "$deb" >/dev/null 2>&1 || need+=("$deb")
done
for extra in ${SLIDELIMIT_EXTRA_DEBS:-}; do
  dpkg -s "$extra" >/dev/null 2>&1 || need+=("$extra")
done
if ((${#need[@]})); then
  echo "installing from Debian: ${need[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need[@]}" >/dev/null
fi
# Debian's package may start a system redis on 6379; tests never use it.
# Prometheus and promtool for the ops/ rule tests and `make e2e` (which starts
# the binary itself): without its recommended node exporter, a daemon nothing here uses.
if ! command -v prometheus >/dev/null || ! command -v promtool >/dev/null; then
  echo "installing from Debian: prometheus" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi
