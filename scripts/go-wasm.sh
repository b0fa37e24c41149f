#!/usr/bin/env bash
# The C ABI compiled to wasm32 inside the Go module, for builds without cgo
# (go/internal/wasm; docs/go.md, Without cgo):
#   scripts/go-wasm.sh build   (make go-wasm)       rebuilds go/internal/wasm/slidelimit.wasm
#                                                   and records go/internal/wasm/inputs.txt
#   scripts/go-wasm.sh check   (make go-wasm-check, in make test)
#
# Like scripts/go-libs.sh, the check compares a recorded listing of the
# inputs, not rebuilt bytes (it needs no cargo and takes no build time, and
# the listing tells which input changed): the sha256 of every file under
# core/ and ffi-c/ (what git would commit there), of Cargo.lock and of this
# script, the workspace's version and profile sections of Cargo.toml and
# `rustc -vV`; then the sha256 of the module, so one replaced by hand fails
# too. The build itself is reproducible: paths are remapped, so a rebuild
# from the same inputs gives the same bytes on any machine.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"

out=go/internal/wasm/slidelimit.wasm
want=go/internal/wasm/inputs.txt
target_dir="${CARGO_TARGET_DIR:-$PWD/target}"
triple=wasm32-unknown-unknown

# shellcheck source=scripts/input-files.sh
source scripts/input-files.sh

inputs() {
  echo "# Inputs of $out (scripts/go-wasm.sh); regenerate with: make go-wasm"
  files core ffi-c lua Cargo.lock scripts/input-files.sh scripts/go-wasm.sh | xargs -d '\n' sha256sum --
  echo "## Cargo.toml"
  # Comments and blank lines do not change the build.
  awk '/^\[/ { keep = ($0 ~ /^\[(workspace\.package|workspace\.dependencies|profile\..*)\]$/) } keep && NF && !/^#/' Cargo.toml
  echo "## rustc -vV"
  rustc -vV
}

case "${1:-}" in
build)
  rustup target add "$triple" >/dev/null
  # A profile of its own, given here rather than in Cargo.toml: small code
  # (fat LTO, one codegen unit, opt-level s: 128 KB and a check about 30%
  # faster than z's 122 KB; 3 is another 15% faster at 151 KB), no unwinding (wasm32 has none:
  # a panic traps, which the Go side reports as internal), no debug info or
  # symbols. Only the cdylib: with the rlib and staticlib beside it cargo
  # would skip LTO. The remapped prefixes keep this machine's paths (panic
  # locations) out of the module, in every crate.
  cargo rustc --quiet --locked -p slidelimit-ffi --lib --crate-type cdylib --target "$triple" \
    --profile go-wasm \
    --config 'profile.go-wasm.inherits="release"' \
    --config 'profile.go-wasm.opt-level="s"' \
    --config 'profile.go-wasm.lto="fat"' \
    --config 'profile.go-wasm.codegen-units=1' \
    --config 'profile.go-wasm.panic="abort"' \
    --config 'profile.go-wasm.debug=0' \
    --config 'profile.go-wasm.strip=true' \
    --config "target.$triple.rustflags=[\"--remap-path-prefix=$HOME/.cargo/registry/src=/cargo\", \"--remap-path-prefix=$PWD=/slidelimit\"]"
  cp "$target_dir/$triple/go-wasm/slidelimit_ffi.wasm" "$out"
  echo "go-wasm: $out $(stat -c %s "$out") bytes"
  { inputs; echo "## output"; sha256sum "$out"; } >"$want"
  ;;
check)
  fail() {
    echo "go-wasm-check: $1" >&2
    echo "go-wasm-check: $out does not match the source: run make go-wasm and commit go/internal/wasm" >&2
    exit 1
  }
  [[ -f "$want" ]] || fail "$want is missing"
  got="$(inputs; echo "## output"; sha256sum "$out" 2>&1 || true)"
  if ! diff=$(diff -u --label "recorded $want" --label "now" "$want" <(echo "$got")); then
    echo "$diff" | head -40 >&2
    fail "inputs or output changed (diff above)"
  fi
  echo "go-wasm-check: $out matches $(grep -c '^[0-9a-f]\{64\} ' "$want") recorded checksums"
  ;;
*)
  echo "usage: $0 build|check" >&2
  exit 2
  ;;
esac
