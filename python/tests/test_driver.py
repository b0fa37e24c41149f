"""The driver's own part of docs/driver.md: framing and protocol errors (the
shared harnesses check the binding's answers through it)."""

from __future__ import annotations

import json
import subprocess
import sys

import slidelimit


def session(lines: list[bytes]) -> list[str]:
    proc = subprocess.run(
        [sys.executable, "-I", "-m", "slidelimit._driver"],
        input=b"".join(line + b"\n" for line in lines),
        capture_output=True,
        timeout=60,
        check=True,
    )
    return proc.stdout.decode().splitlines()


def test_framing_and_protocol_errors() -> None:
    out = session(
        [
            b'{"op":"hello"}',
            b"not json",
            b"\xff\xfe",
            b"[1]",
            b'{"op":"fly"}',
            b'{"op":"acquire","tenant":"t"}',
            b'{"op":"store","kind":"memory","colour":"red"}',
            b'{"op":"store","kind":"memory"}',
            b'{"op":"policy","resource":"geo","limit":"2","window_ms":1000}',
            b'{"op":"policy","resource":"geo","limit":0,"window_ms":1000}',
            b'{"op":"acquire","tenant":"t"}',
            b'{"op":"policy","resource":"geo","limit":2,"window_ms":1000}',
            b'{"op":"acquire_at","tenant":"t","now_ms":1000}',
            b'{"op":"acquire_at","tenant":"t","now_ms":1000,"cost":-1}',
            b'{"op":"key","tenant":"t"}',
            b'{"op":"exit"}',
            b'{"op":"hello"}',
        ]
    )
    replies = [json.loads(line) for line in out]
    assert replies[0] == {"ok": True, "binding": "python", "version": "0.1.0"}
    for i in (1, 2, 3, 4, 5, 6, 8):
        assert replies[i]["error"] == "protocol", (i, replies[i])
    assert replies[7] == {"ok": True}
    # A refused policy: that error, then again for every op that needs one.
    limit_error = {
        "error": "invalid_argument",
        "field": "limit",
        "message": "limit: must be at least 1",
    }
    assert replies[9] == limit_error and replies[10] == limit_error
    assert replies[11] == {"ok": True}
    assert out[12] == (
        '{"allowed":true,"remaining":1,"retry_after_ms":0,"reset_after_ms":1000,"now_ms":1000}'
    )
    assert replies[13]["field"] == "cost" and replies[13]["error"] == "invalid_argument"
    key = "rl:{geo:t}:log:1000"
    assert replies[14] == {"ok": True, "key": key, "slot": slidelimit.slot(key)}
    # exit answers and ends the session: nothing after it is read.
    assert replies[15] == {"ok": True} and len(replies) == 16
