#!/usr/bin/env bash
# Runs a test command with a deadline, so that a hung suite fails in minutes
# and names itself, instead of holding CI until its 90 minutes run out (as a
# Node test once did: CHANGELOG, "Fixed").
#   scripts/with-deadline.sh SECONDS SIGNAL COMMAND [ARGS...]
# SIGNAL is what the command gets first, chosen so that it prints where it
# hangs: ABRT for pytest (its faulthandler dumps every thread's stack), TERM
# for Ruby (its test helper prints every thread's backtrace) and for the
# rest. KILL follows DEADLINE_KILL_AFTER_S (default 30) seconds later if the
# command is still there. The signals go to the command's process group, so
# its children stop too. The deadline is far above the suite's own time
# (the make file says that time beside it): a hang guard, never a timing
# check. Its tests: scripts/test_with_deadline.py (make test-scripts).
set -euo pipefail
if [ $# -lt 3 ] || ! [[ $1 =~ ^[1-9][0-9]*$ ]]; then
  echo "usage: $0 SECONDS SIGNAL COMMAND [ARGS...]" >&2
  exit 2
fi
seconds=$1 signal=$2
shift 2
started=$SECONDS
# timeout leads a process group of its own (so that its signal reaches the
# command's children too), which a ^C at the terminal does not reach: this
# script passes INT, TERM and HUP on to that group, as TERM (a background
# command starts with INT ignored).
timeout --signal="$signal" --kill-after="${DEADLINE_KILL_AFTER_S:-30}" "$seconds" "$@" <&0 &
pid=$!
trap 'kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true' INT TERM HUP
while :; do
  status=0
  wait "$pid" || status=$?
  # A trapped signal ends `wait` early; wait again until timeout is gone.
  kill -0 "$pid" 2>/dev/null || break
done
# timeout exits 124 when the deadline hit (137 when KILL was needed). A
# command can exit so on its own (137: the OOM killer's KILL), so the line
# is printed only once the deadline has passed.
if { [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; } && [ $((SECONDS - started)) -ge "$seconds" ]; then
  echo "with-deadline: '$*' ran past its deadline of $seconds s and was stopped (SIG$signal): a hang? Its output above shows where." >&2
fi
exit "$status"
