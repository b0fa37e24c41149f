#!/usr/bin/env python3
"""Broken drivers for the harness's self-tests (faults/test_harness.py): each
must make some scenario FAIL, or the scenario's checks prove nothing.

  fake_driver.py allowed
      No binding at all: every call is an allowed decision, every other op ok.
  fake_driver.py wrap DRIVER MUTATION
      Passes every request to drivers/DRIVER and changes its replies:
      none              nothing (the wrapper itself must be transparent)
      always-allowed    every decision says allowed
      unavailable-as-denial   an unavailable error becomes a denial
      late-unavailable  an unavailable error is answered 1 s late
      wrong-field       invalid_argument names another field
      errors-as-script-error  every error code becomes script_error
      double-count      every acquire_at is sent twice (the second's reply dropped)
      cache-off         every policy without the deny cache it asked for
      deny-from-reply   a deny cache of its own that counts a denial's retry
                        from when the reply came, not from when the call left
      malformed-as-denial   a malformed_reply error becomes a denial
      exit-1            answers exit, then ends with status 1 (a crash on
                        the way out)
    Without a mutation of its own the wrapper ends with the driver's status.
"""

import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
# The wrapper passes requests on as they came: a number past the doubles'
# range stays `1e400`, not json.dumps's `Infinity` (no JSON).
from harness.drivers import json_number, wire_json  # noqa: E402


def out(reply):
    sys.stdout.write(json.dumps(reply, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def decision(allowed=True, now=0):
    return {
        "allowed": allowed,
        "remaining": 99 if allowed else 0,
        "retry_after_ms": 0 if allowed else 1000,
        "reset_after_ms": 1000,
        "now_ms": now,
    }


def fake_allowed():
    for line in sys.stdin:
        req = json.loads(line)
        op = req.get("op")
        if op in ("acquire", "acquire_at", "peek"):
            out(decision(now=req.get("now_ms", int(time.time() * 1000))))
        elif op == "hello":
            out({"ok": True, "binding": "fake", "version": "0"})
        elif op == "key":
            out(
                {
                    "ok": True,
                    "key": "rl:{{geocode:{}}}:log:1000".format(req.get("tenant")),
                    "slot": 0,
                }
            )
        elif op == "load":
            with open(req["out"], "w") as f:
                for _ in range(10):
                    f.write(
                        f'{{"lang":"fake","allowed":true,"now_ms":{int(time.time() * 1000)},'
                        '"retry_after_ms":0}\n'
                    )
            out({"ok": True, "calls": 10, "errors": 0})
        elif op == "exit":
            out({"ok": True})
            return
        else:
            out({"ok": True})


def wrap(name, mutation):
    child = subprocess.Popen(
        [os.path.join(ROOT, "drivers", name)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        bufsize=1,
    )
    to_child, from_child = child.stdin, child.stdout
    if to_child is None or from_child is None:
        raise RuntimeError(f"drivers/{name}: no pipes")  # never, with PIPE

    def call(req):
        to_child.write(wire_json(req) + "\n")
        to_child.flush()
        line = from_child.readline()
        if not line:
            sys.exit(f"fake_driver: drivers/{name} is gone")
        return json.loads(line)

    held: dict = {}
    held_until = 0.0
    for line in sys.stdin:
        req = json.loads(line, parse_float=json_number)
        acquire = req.get("op") == "acquire"
        if mutation == "cache-off" and req.get("op") == "policy":
            req["deny_cache"] = False
        if mutation == "deny-from-reply" and acquire and time.monotonic() < held_until:
            left = max(1, round((held_until - time.monotonic()) * 1000))
            out({**held, "retry_after_ms": left})
            continue
        reply = call(req)
        if mutation == "deny-from-reply" and acquire and reply.get("allowed") is False:
            held, held_until = reply, time.monotonic() + reply["retry_after_ms"] / 1000
        if mutation == "double-count" and req.get("op") == "acquire_at":
            call(req)
        error = reply.get("error")
        if mutation == "always-allowed" and "allowed" in reply:
            reply["allowed"], reply["retry_after_ms"] = True, 0
        elif (mutation, error) in (
            ("unavailable-as-denial", "unavailable"),
            ("malformed-as-denial", "malformed_reply"),
        ):
            reply = decision(allowed=False, now=req.get("now_ms", 0))
        elif mutation == "late-unavailable" and error == "unavailable":
            time.sleep(1)
        elif mutation == "wrong-field" and error == "invalid_argument":
            reply["field"] = "argument"
        elif mutation == "errors-as-script-error" and error:
            reply["error"] = "script_error"
        out(reply)
        if req.get("op") == "exit":
            break
    to_child.close()
    status = child.wait()
    sys.exit(1 if mutation == "exit-1" else status)


if __name__ == "__main__":
    if sys.argv[1:2] == ["allowed"]:
        fake_allowed()
    elif sys.argv[1:2] == ["wrap"] and len(sys.argv) == 4:
        wrap(sys.argv[2], sys.argv[3])
    else:
        sys.exit(__doc__)
