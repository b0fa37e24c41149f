#!/usr/bin/env bash
# make test-install-c (under scripts/without-rust.sh): scripts/install/c.sh DIST_C VERSION
# Compiles a C program against dist/c with pkg-config alone, linked with the
# shared library (slidelimit.pc) and with the static one (slidelimit-static.pc),
# and runs both.
set -euo pipefail
dist_c="$(cd "${1:?usage: $0 DIST_C VERSION}" && pwd)"
version="${2:?usage: $0 DIST_C VERSION}"
here="$(cd "$(dirname "$0")" && pwd)"
! command -v cargo >/dev/null || { echo "cargo is on PATH" >&2; exit 1; }
cd "${INSTALL_WORK:?run under scripts/without-rust.sh}"
cp "$here/memory_check.c" .
export PKG_CONFIG_PATH="$dist_c"
[[ "$(pkg-config --modversion slidelimit)" == "$version" ]] || { echo "slidelimit.pc: version $(pkg-config --modversion slidelimit), want $version" >&2; exit 1; }
# shellcheck disable=SC2046 # pkg-config's flags are meant to split
cc -std=c11 -Wall -Wextra -Werror memory_check.c $(pkg-config --cflags --libs slidelimit) -o check-shared
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -Werror memory_check.c $(pkg-config --cflags --libs slidelimit-static) -o check-static

# limit 2 per 1000 ms at 1000, 1001, 1002: the third waits until the first
# permit leaves the window at 2000, 998 ms after 1002.
want="slidelimit $version: allowed(remaining=1 retry_after_ms=0) allowed(remaining=0 retry_after_ms=0) denied(remaining=0 retry_after_ms=998)"
needed() { readelf -d "$1" | grep -c 'NEEDED.*libslidelimit_ffi' || true; }
[[ "$(needed check-shared)" == 1 ]] || { echo "check-shared does not load libslidelimit_ffi.so" >&2; exit 1; }
[[ "$(needed check-static)" == 0 ]] || { echo "check-static loads libslidelimit_ffi.so" >&2; exit 1; }
for bin in check-shared check-static; do
  # The shared library is found where dist/c is, as a user's LD_LIBRARY_PATH would.
  got="$(LD_LIBRARY_PATH="$dist_c" "./$bin")"
  [[ "$got" == "$want" ]] || { printf '%s printed\n  %s\nwant\n  %s\n' "$bin" "$got" "$want" >&2; exit 1; }
  echo "test-install-c: $bin ($(stat -c %s "$bin") bytes): $got"
done
