#!/usr/bin/env bash
# Regression check for go/scripts/with-postgres.sh: runs it from a copy of the
# scripts it needs inside a private (0700) directory, as a checkout under /root
# or a `mktemp -d` is, and checks that the server answers, that the data
# directory is gone afterwards, and that the private directory's mode is
# untouched. As root this is the case where the server runs as another user.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"

private=$(mktemp -d)
trap 'rm -rf "$private"' EXIT
chmod 0700 "$private"
mkdir -p "$private/checkout/scripts" "$private/checkout/go/scripts"
cp "$root/scripts/free-port.sh" "$root/scripts/deps.sh" "$private/checkout/scripts/"
cp "$root/go/scripts/with-postgres.sh" "$private/checkout/go/scripts/"
mode_before=$(stat -c %a "$private")

cd "$private/checkout"
# The wrapped command runs in the caller's directory and sees the URL.
out=$(go/scripts/with-postgres.sh bash -c '
  [[ $PWD == '"$private/checkout"' ]] || { echo "wrong directory: $PWD" >&2; exit 1; }
  psql "$SLIDELIMIT_TEST_DATABASE_URL" -tAc "select 40 + 2"
  # The data directory is reported by the server itself: remember it.
  psql "$SLIDELIMIT_TEST_DATABASE_URL" -tAc "show data_directory"' 2>"$private/stderr") ||
  { cat "$private/stderr" >&2; echo "FAIL: with-postgres.sh from a 0700 parent exited non-zero" >&2; exit 1; }
answer=$(sed -n 1p <<<"$out")
datadir=$(sed -n 2p <<<"$out")

fail=0
[[ $answer == 42 ]] || { echo "FAIL: the server answered '$answer', not 42" >&2; fail=1; }
[[ -n $datadir && $datadir != "$private"* ]] ||
  { echo "FAIL: data directory '$datadir' is inside the private checkout" >&2; fail=1; }
[[ -n $datadir && ! -e $datadir ]] || { echo "FAIL: data directory '$datadir' was left behind" >&2; fail=1; }
[[ $(stat -c %a "$private") == "$mode_before" ]] ||
  { echo "FAIL: the private directory's mode changed to $(stat -c %a "$private")" >&2; fail=1; }
if ((fail)); then exit 1; fi
echo "with-postgres from a 0700 parent as $(id -un): 1 passed, 0 failed (data dir was $datadir)"
