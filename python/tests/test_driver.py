"""The driver's own part of docs/driver.md: framing and protocol errors (the
shared harnesses check the binding's answers through it)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import redis

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


def test_a_policy_field_left_out_or_null_goes_to_the_binding_as_none() -> None:
    # docs/driver.md: null is a field left out; resource, limit and window_ms
    # have no default, so the binding refuses None, naming the field.
    out = session(
        [
            b'{"op":"store","kind":"memory"}',
            b'{"op":"policy","resource":"geo","window_ms":1000}',
            b'{"op":"acquire_at","tenant":"t","now_ms":1}',
            b'{"op":"policy","resource":"geo","limit":2,"window_ms":null}',
            b'{"op":"policy","limit":2,"window_ms":1000}',
            b'{"op":"policy","resource":"geo","limits":[{"limit":2,"window_ms":1000},{"limit":2}]}',
            b'{"op":"policy","namespace":null,"resource":"geo","algorithm":null,"limit":2,'
            b'"window_ms":1000,"buckets":null}',
            b'{"op":"acquire_at","tenant":"t","now_ms":1,"cost":null}',
        ]
    )
    replies = [json.loads(line) for line in out]
    assert replies[0] == {"ok": True}
    fields = ["limit", "limit", "window_ms", "resource", "limits[1].window_ms"]
    for reply, field in zip(replies[1:6], fields):
        assert (reply["error"], reply["field"]) == ("invalid_argument", field), reply
        assert reply["message"].startswith(f"{field}: "), reply
    assert replies[1] == replies[2]
    assert replies[6] == {"ok": True}
    assert out[7] == (
        '{"allowed":true,"remaining":1,"retry_after_ms":0,"reset_after_ms":1000,"now_ms":1}'
    )


def test_a_tenant_left_out_null_or_with_a_lone_surrogate_is_the_bindings_refusal() -> None:
    # docs/driver.md: the binding gets None, or the str json.loads makes of
    # a lone surrogate (JSON's \ud800), and refuses it, naming tenant.
    requests = [
        b'{"op":"acquire_at","now_ms":1}',
        b'{"op":"acquire","tenant":null}',
        b'{"op":"peek"}',
        b'{"op":"reset"}',
        b'{"op":"key"}',
        b'{"op":"acquire_at","tenant":"a\\ud800b","now_ms":1}',
        b'{"op":"key","tenant":"\\ude80\\ud83d"}',
    ]
    out = session(
        [
            b'{"op":"store","kind":"memory"}',
            b'{"op":"policy","resource":"geo","limit":2,"window_ms":1000}',
            *requests,
        ]
    )
    # One reply per request: a session ended early (exit 0) must not shorten the loop.
    assert len(out) == 2 + len(requests), out
    for request, line in zip(requests, out[2:]):
        reply = json.loads(line)
        assert (reply["error"], reply["field"]) == ("invalid_argument", "tenant"), (request, reply)
        assert reply["message"].startswith("tenant: "), reply


def test_a_whole_number_in_float_form_is_that_integer() -> None:
    # docs/driver.md: a JSON number is a double, so 2.0, 1e3 and -0.0 are the
    # integers 2, 1000 and 0 here too, where the binding refuses a float.
    out = session(
        [
            b'{"op":"store","kind":"memory"}',
            b'{"op":"policy","resource":"geo","limit":2.0,"window_ms":1e3}',
            b'{"op":"acquire_at","tenant":"t","now_ms":-0.0,"cost":1.0}',
            b'{"op":"acquire_at","tenant":"t","now_ms":0.5}',
        ]
    )
    assert out[1] == '{"ok":true}'
    assert out[2] == (
        '{"allowed":true,"remaining":1,"retry_after_ms":0,"reset_after_ms":1000,"now_ms":0}'
    )
    refused = json.loads(out[3])
    assert (refused["error"], refused["field"]) == ("invalid_argument", "now_ms"), refused


def test_the_policy_op_takes_buckets() -> None:
    bucketed = '"algorithm":"bucketed_window","limit":2,"window_ms":1000'
    out = session(
        [
            b'{"op":"store","kind":"memory"}',
            b'{"op":"policy","resource":"geo",' + bucketed.encode() + b',"buckets":4}',
            b'{"op":"key","tenant":"t"}',
            b'{"op":"acquire_at","tenant":"t","now_ms":1010}',
            b'{"op":"policy","resource":"geo",' + bucketed.encode() + b"}",
            b'{"op":"policy","resource":"geo","limit":2,"window_ms":1000,"buckets":4}',
            b'{"op":"policy","resource":"geo",' + bucketed.encode() + b',"buckets":"4"}',
        ]
    )
    replies = [json.loads(line) for line in out]
    assert replies[0] == replies[1] == {"ok": True}
    assert replies[2]["key"] == "rl:{geo:t}:bucketed:1000:4"
    # Buckets of 250 ms: a permit at 1010 is held until 1249 + 1000.
    assert replies[3]["reset_after_ms"] == 2249 - 1010
    # No buckets: core's default 60, which does not divide 1000; buckets on
    # the default algorithm (the log): both core's error on buckets.
    for reply in replies[4:6]:
        assert (reply["error"], reply["field"]) == ("invalid_argument", "buckets"), reply
    assert replies[6]["error"] == "protocol"


def test_load_with_skew_ms_calls_on_the_caller_clock(tmp_path: Path) -> None:
    # Every call is acquire_at on the wall clock plus the skew, an hour
    # behind here (far from the clock a memory store would use); each
    # decision record carries reset_after_ms; a skew beyond an hour is refused.
    out = tmp_path / "python.jsonl"
    skew = 3_600_000
    before = time.time_ns() // 1_000_000
    start, end = before + 2000, before + 2300  # after the driver has started
    load = {"op": "load", "lang": "python", "tenant": "t", "concurrency": 4, "out": str(out)}
    requests = [
        {"op": "store", "kind": "memory"},
        {"op": "policy", "resource": "geo", "limit": 5, "window_ms": 1000},
        {**load, "start_at_ms": start, "end_at_ms": end, "jitter_ms": 2, "skew_ms": -skew},
    ] + [
        {**load, "start_at_ms": 0, "end_at_ms": 0, "skew_ms": bad}
        for bad in (3_600_001, -3_600_001, 1.5, "5", True)
    ]
    out_lines = session([json.dumps(r).encode() for r in requests])
    after = time.time_ns() // 1_000_000
    replies = [json.loads(line) for line in out_lines]
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert replies[2] == {"ok": True, "calls": len(records), "errors": 0}
    assert len(records) > 5
    allowed = 0
    for r in records:
        assert start - skew <= r["now_ms"] <= after - skew, r
        assert isinstance(r["reset_after_ms"], int), r
        if r["allowed"]:
            allowed += 1
            # The log records at now + reset_after - W, on the caller clock too.
            assert start - skew <= r["now_ms"] + r["reset_after_ms"] - 1000 <= after - skew, r
    assert allowed == 5
    for reply in replies[3:]:
        assert reply["error"] == "protocol" and reply["message"].startswith("load: skew_ms must be")


def test_the_policy_op_takes_limits_and_replies_denied_by() -> None:
    limits = [
        {"algorithm": "sliding_log", "limit": 2, "window_ms": 1000},
        {"algorithm": "bucketed_window", "limit": 3, "window_ms": 10_000, "buckets": 10},
    ]
    policy = {"op": "policy", "resource": "geo", "limits": limits}
    requests = [
        {"op": "store", "kind": "memory"},
        policy,
        {"op": "acquire_at", "tenant": "t", "now_ms": 1000, "cost": 2},
        {"op": "acquire_at", "tenant": "t", "now_ms": 1500},
        {"op": "acquire_at", "tenant": "t", "now_ms": 2000, "cost": 2},
        {"op": "key", "tenant": "t"},
        # Refused by the binding: errors on limits and the limit's field.
        {**policy, "limits": []},
        {**policy, "limits": [limits[0], {**limits[1], "window_ms": 0}]},
        {**policy, "limits": [limits[0]] * 9},
        # A limit without its limit: None to the binding (docs/driver.md).
        {**policy, "limits": [limits[0], {"algorithm": "sliding_log", "window_ms": 5}]},
        # Not the protocol's: the driver's own errors.
        {**policy, "limit": 2},
        {**policy, "algorithm": "sliding_log"},
        {**policy, "limits": {"0": limits[0]}},
        {**policy, "limits": [limits[0], {**limits[1], "colour": "red"}]},
        {**policy, "limits": [limits[0], {**limits[1], "limit": "3"}]},
        {**policy, "deny_cache": "yes"},
        {**policy, "limits": [limits[0], 5]},
        # One limit in the list: the single policy, its field names.
        {**policy, "limits": [{**limits[0], "window_ms": 0}]},
        {**policy, "deny_cache": True},
        {"op": "acquire_at", "tenant": "u", "now_ms": 1000, "cost": 3},
    ]
    out = session([json.dumps(r).encode() for r in requests])
    replies = [json.loads(line) for line in out]
    assert replies[0] == replies[1] == {"ok": True}
    assert out[2] == (
        '{"allowed":true,"remaining":0,"retry_after_ms":0,"reset_after_ms":10999,"now_ms":1000}'
    )
    # Denied by the log (limit 0) within its second, then by the bucketed
    # window (limit 1, 2 of 3 held) once the log has room again.
    assert out[3] == (
        '{"allowed":false,"remaining":0,"retry_after_ms":500,"reset_after_ms":10499,'
        '"now_ms":1500,"denied_by":0}'
    )
    assert replies[4]["denied_by"] == 1 and not replies[4]["allowed"]
    assert replies[5]["key"] == "rl:{geo:t}:log:1000"
    assert [(r.get("error"), r.get("field")) for r in replies[6:10]] == [
        ("invalid_argument", "limits"),
        ("invalid_argument", "limits[1].window_ms"),
        ("invalid_argument", "limits"),
        ("invalid_argument", "limits[1].limit"),
    ]
    for i in range(10, 17):
        assert replies[i]["error"] == "protocol", (i, replies[i])
    assert (replies[17]["error"], replies[17]["field"]) == ("invalid_argument", "window_ms")
    # deny_cache on the memory store: accepted, the engine has none.
    assert replies[18] == {"ok": True}
    assert replies[19]["field"] == "cost"


def test_the_deny_cache_is_off_unless_the_policy_asks(redis_url: str, r: redis.Redis) -> None:
    def evalsha() -> int:
        stats = r.info("commandstats").get("cmdstat_evalsha")
        return int(stats["calls"]) if stats else 0

    resource = "py-driver-" + str(time.time_ns())
    policy = {"op": "policy", "resource": resource, "limit": 1, "window_ms": 60_000}
    acquire = {"op": "acquire", "tenant": "t"}
    # The script is loaded: no NOSCRIPT (and EVAL) in the counts.
    r.script_load(slidelimit.Policy("rl", resource, "sliding_log", 1, 60_000)._script_text(False))
    counts: list[int] = []
    for ask in (None, True):
        extra = {} if ask is None else {"deny_cache": ask}
        before = evalsha()
        out = session(
            [
                json.dumps(r).encode()
                for r in [
                    {"op": "store", "kind": "redis", "url": redis_url},
                    {**policy, **extra},
                    acquire,
                    acquire,
                    acquire,
                    acquire,
                    {"op": "reset", "tenant": "t"},
                ]
            ]
        )
        assert [json.loads(line).get("allowed") for line in out[2:6]] == [
            True,
            False,
            False,
            False,
        ]
        counts.append(evalsha() - before)
    # Off: every acquire is a call; on: the denials after the first are local.
    assert counts == [4, 2]
