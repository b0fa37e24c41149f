#!/usr/bin/env bash
# Installs what the cross builds of `make dist` need (never `make test`): the
# aarch64 Rust target and Debian's aarch64 C toolchain (linker, strip).
# Idempotent and quiet when all is there.
set -euo pipefail
export PATH="$HOME/.cargo/bin:$PATH"
if ! rustup target list --installed | grep -qx aarch64-unknown-linux-gnu; then
  rustup target add aarch64-unknown-linux-gnu
fi
if ! command -v aarch64-linux-gnu-gcc >/dev/null || ! command -v aarch64-linux-gnu-strip >/dev/null; then
  echo "installing from Debian: gcc-aarch64-linux-gnu" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq gcc-aarch64-linux-gnu >/dev/null
fi
