#!/usr/bin/env bash
# make test's first step: says how much disk is free, and stops at once when a
# build from scratch would run out of it. Without it a small disk fails deep
# inside the run with ENOSPC (a CI run once did, nine minutes in, in the
# audit), after the time is spent and far from the cause.
#   scripts/disk-room.sh NEED_MB
# NEED_MB is what a run from scratch writes at its fullest (the Makefile says
# how it was measured). A tree where make test has built before (it holds
# target/debug) is a rerun, which writes much less: the figure is printed but
# nothing is stopped.
set -euo pipefail
if [ $# -ne 1 ] || ! [[ $1 =~ ^[0-9]+$ ]]; then
  echo "usage: $0 NEED_MB" >&2
  exit 2
fi
need_mb=$1
free_mb=$(df -Pk . | awk 'NR == 2 { print int($4 / 1024) }')
echo "disk: ${free_mb} MB free on the disk holding $PWD (a run from scratch needs about ${need_mb} MB)"
if [ ! -d target/debug ] && [ "$free_mb" -lt "$need_mb" ]; then
  echo "disk-room: only ${free_mb} MB free, and a make test from scratch writes about ${need_mb} MB" >&2
  echo "  (build outputs here, Go's build cache, Cargo's registry and Debian's packages); free some," >&2
  echo "  or run make test TEST_DISK_NEED_MB=0 to go on anyway" >&2
  exit 1
fi
