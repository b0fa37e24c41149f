#!/usr/bin/env bash
# scripts/without-rust.sh CMD [ARGS...]: runs CMD as a user without a Rust
# toolchain would (the install tests of `make test-install`): every PATH
# directory holding cargo or rustc is dropped, rustup's and cargo's variables
# are unset, and $INSTALL_WORK names a fresh temp directory outside the
# repository (removed afterwards) for CMD to cd into once it has resolved its
# arguments. Fails if cargo or rustc can still be found.
set -euo pipefail
[[ $# -gt 0 ]] || { echo "usage: $0 CMD [ARGS...]" >&2; exit 2; }
repo="$(cd "$(dirname "$0")/.." && pwd)"

path=""
IFS=: read -r -a dirs <<<"$PATH"
for d in "${dirs[@]}"; do
  [[ -n "$d" && -d "$d" ]] || continue
  [[ -x "$d/cargo" || -x "$d/rustc" ]] && continue
  path="${path:+$path:}$d"
done
export PATH="$path"
unset CARGO CARGO_HOME CARGO_TARGET_DIR RUSTC RUSTUP_HOME RUSTUP_TOOLCHAIN RUSTFLAGS
if command -v cargo >/dev/null || command -v rustc >/dev/null; then
  echo "without-rust: cargo or rustc is still on PATH ($(command -v cargo rustc | tr '\n' ' '))" >&2
  exit 1
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/slidelimit-install.XXXXXX")"
trap 'rm -rf "$work"' EXIT
case "$work/" in "$repo"/*) echo "without-rust: $work is inside the repository" >&2; exit 1 ;; esac
export INSTALL_WORK="$work"
"$@"
