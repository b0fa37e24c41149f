#!/usr/bin/env bash
# The prebuilt static libraries inside the Go module (docs/go.md, Installing):
#   scripts/go-libs.sh build   (make go-libs)  rebuilds go/lib/*/libslidelimit_ffi.a,
#                                              copies the header to go/include/ and
#                                              records go/lib/inputs.txt
#   scripts/go-libs.sh check   (make go-libs-check, in make test)
#
# The check compares a recorded listing of the inputs, not rebuilt bytes: a
# rebuild of both archives with fat LTO takes longer than `make test` should
# spend on it, and the listing tells which input changed. go/lib/inputs.txt
# holds the sha256 of every file under core/, ffi-c/ and lua/ (what git would
# commit there), of Cargo.lock and of this script, the workspace's version and
# profile sections of Cargo.toml (go-lib inherits release) and `rustc -vV`;
# then the sha256 of each archive and of the header copy, so an archive
# replaced by hand fails too.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

lib=go/lib
# GOOS_GOARCH  Rust target  strip that reads the target's objects
platforms=(
  "linux_amd64 x86_64-unknown-linux-gnu strip"
  "linux_arm64 aarch64-unknown-linux-gnu aarch64-linux-gnu-strip"
)
target_dir="${CARGO_TARGET_DIR:-$PWD/target}"

# shellcheck source=scripts/input-files.sh
source scripts/input-files.sh

inputs() {
  echo "# Inputs of go/lib (scripts/go-libs.sh); regenerate with: make go-libs"
  files core ffi-c lua Cargo.lock scripts/input-files.sh scripts/go-libs.sh | xargs -d '\n' sha256sum --
  echo "## Cargo.toml"
  # Comments and blank lines do not change the build.
  awk '/^\[/ { keep = ($0 ~ /^\[(workspace\.package|workspace\.dependencies|profile\..*)\]$/) } keep && NF && !/^#/' Cargo.toml
  echo "## rustc -vV"
  rustc -vV
}

outputs() {
  echo "## outputs"
  local p
  for p in "${platforms[@]}"; do
    read -r goarch _ _ <<<"$p"
    (cd go && sha256sum "lib/$goarch/libslidelimit_ffi.a")
  done
  (cd go && sha256sum include/slidelimit.h)
}

case "${1:-}" in
build)
  for p in "${platforms[@]}"; do
    read -r goarch triple stripper <<<"$p"
    # --crate-type staticlib alone: with ffi-c's rlib and cdylib beside it,
    # cargo would not run LTO at all (a 2.5x larger archive).
    cargo rustc --quiet --locked --profile go-lib -p slidelimit-ffi --lib \
      --crate-type staticlib --target "$triple"
    mkdir -p "$lib/$goarch"
    # -D: no timestamps or owners in the archive.
    "$stripper" -D --strip-debug -o "$lib/$goarch/libslidelimit_ffi.a" \
      "$target_dir/$triple/go-lib/libslidelimit_ffi.a"
    echo "go-libs: $lib/$goarch/libslidelimit_ffi.a $(stat -c %s "$lib/$goarch/libslidelimit_ffi.a") bytes" \
      "(unstripped $(stat -c %s "$target_dir/$triple/go-lib/libslidelimit_ffi.a"))"
  done
  mkdir -p go/include
  cp ffi-c/include/slidelimit.h go/include/slidelimit.h
  { inputs; outputs; } >"$lib/inputs.txt"
  ;;
check)
  want="$lib/inputs.txt"
  fail() {
    echo "go-libs-check: $1" >&2
    echo "go-libs-check: the archives in go/lib do not match the source: run make go-libs and commit go/lib" >&2
    exit 1
  }
  [[ -f "$want" ]] || fail "$want is missing"
  got="$( inputs; outputs 2>&1 || true)"
  if ! diff=$(diff -u --label "recorded $want" --label "now" "$want" <(echo "$got")); then
    echo "$diff" | head -40 >&2
    fail "inputs or outputs changed (diff above)"
  fi
  cmp -s ffi-c/include/slidelimit.h go/include/slidelimit.h || fail "go/include/slidelimit.h differs from ffi-c/include/slidelimit.h"
  echo "go-libs-check: go/lib matches $(grep -c '^[0-9a-f]\{64\} ' "$want") recorded checksums"
  ;;
*)
  echo "usage: $0 build|check" >&2
  exit 2
  ;;
esac
