"""The fault and bad-input scenarios, each against servers of its own.

Each takes a lib.Context and records failures on it; together they carry
every assertion the per-language fault suites made on what a user of a
binding sees (go/faults_test.go, node/test/faults.test.js,
rust/tests/faults.rs before issue 8).
"""

import json
import os
import re
import shutil
import tempfile
import threading
import time
from typing import Any

from faults.lib import (
    ALGORITHMS,
    SLACK_MS,
    T,
    command_calls,
    expect_decision,
    expect_error,
    expect_fast_unavailable,
    expect_keys_expire,
    is_decision,
    is_error,
    now_ms,
    wait_for_window,
)
from harness.drivers import BeyondDouble, DriverError, wire_json
from harness.resp import Redis, ReplyError
from harness.servers import (
    NO_REWRITE,
    Certificates,
    ClosedPort,
    ReplyRewriter,
    Silent,
    Simple,
    SlowProxy,
)


def _policy(namespace, algorithm, limit, window_ms, resource="geocode"):
    return {
        "namespace": namespace,
        "resource": resource,
        "algorithm": algorithm,
        "limit": limit,
        "window_ms": window_ms,
    }


def _redis(url, timeout_ms=2000, **extra):
    return {"kind": "redis", "url": url, "timeout_ms": timeout_ms, **extra}


# ---------------------------------------------------------- SCRIPT FLUSH


def script_flush(ctx):
    """SCRIPT FLUSH before every call: each goes through the NOSCRIPT
    fallback (EVALSHA, then EVAL) and counts exactly once."""
    server = ctx.redis()
    admin = server.client()
    admin("CONFIG", "RESETSTAT")
    d = ctx.driver()
    calls = 0
    for alg in ALGORITHMS:
        d.limiter(_redis(server.url), _policy("flush", alg, 3, 60_000))
        for i in range(5):
            admin("SCRIPT", "FLUSH")
            expect_decision(
                ctx,
                d.req(op="acquire_at", tenant="t", now_ms=T),
                f"{alg} acquire_at #{i} after a flush",
                allowed=i < 3,
                remaining=max(0, 2 - i),
            )
            admin("SCRIPT", "FLUSH")
            # A peek answers what an acquire would: one permit fewer, if allowed.
            expect_decision(
                ctx,
                d.req(op="peek", tenant="t", now_ms=T),
                f"{alg} peek after acquire #{i}",
                allowed=i < 2,
                remaining=max(0, 1 - i),
            )
            calls += 2
        wait_for_window(admin, 60_000)
        for i in range(4):
            admin("SCRIPT", "FLUSH")
            expect_decision(
                ctx,
                d.req(op="acquire", tenant="server-time"),
                f"{alg} server-time acquire #{i}",
                allowed=i < 3,
                remaining=max(0, 2 - i),
            )
            calls += 1
    stats = command_calls(admin)
    sha = stats.get("evalsha", 0) + stats.get("evalsha_ro", 0)
    full = stats.get("eval", 0) + stats.get("eval_ro", 0)
    ctx.check(
        sha == calls and full == calls,
        f"{calls} calls after flushes: want {calls} EVALSHA and {calls} EVAL (one NOSCRIPT fallback each), "
        f"got {sha} and {full}",
    )
    expect_keys_expire(ctx, admin, "script_flush")


# ---------------------------------------------------------------- restart


def _load_lines(ctx, path):
    lines = []
    with open(path) as f:
        for n, line in enumerate(f):
            try:
                lines.append(json.loads(line))
            except ValueError:
                ctx.fail(f"load output line {n + 1} is not JSON: {line[:200]!r}")
    return lines


def restart_mid_run(ctx):
    """Callers in flight while their redis-server is killed and started again
    (empty, no script cache) on the same port: every failure is unavailable,
    never a decision; calls succeed soon after the server is back and the
    NOSCRIPT fallback loads the script into the new server."""
    server = ctx.redis()
    d = ctx.driver()
    timeout, concurrency, jitter = 300, 4, 20
    # The counter: a limit no run reaches (the log's is capped at 10,000).
    d.limiter(_redis(server.url, timeout), _policy("restart", "sliding_counter", 1_000_000, 60_000))
    key = d.key("tenant-1")
    out = os.path.join(ctx.own(_TempDir()).path, "load.jsonl")
    start = now_ms() + 300
    end = start + 3000
    reply = {}

    def run():
        reply.update(
            d.req(
                timeout_s=30,
                op="load",
                lang="faults",
                tenant="tenant-1",
                cost=1,
                concurrency=concurrency,
                start_at_ms=start,
                end_at_ms=end,
                ramp_ms=50,
                jitter_ms=jitter,
                out=out,
            )
        )

    caller = threading.Thread(target=run, daemon=True)
    caller.start()
    time.sleep(max(0, start + 300 - now_ms()) / 1000)
    stopped_at = now_ms()
    server.stop()
    time.sleep(0.4)
    server.start()
    restarted_at = now_ms()
    caller.join(30)
    returned_at = now_ms()
    ctx.require(not caller.is_alive(), "the load op did not return")
    ctx.require(reply.get("ok") is True, f"load: {reply}")
    ctx.check(
        returned_at <= end + timeout + SLACK_MS,
        f"load returned {returned_at - end} ms after its end: a call outlived its timeout",
    )
    lines = _load_lines(ctx, out)
    errors = [rec for rec in lines if "error" in rec]
    decisions = [rec for rec in lines if "error" not in rec]
    ctx.check(
        reply.get("calls") == len(lines) and reply.get("errors") == len(errors),
        f"load counted {reply.get('calls')} calls, {reply.get('errors')} errors; its file holds "
        f"{len(lines)}, {len(errors)}",
    )
    codes = sorted({rec.get("error") for rec in errors})
    ctx.check(codes in ([], ["unavailable"]), f"errors other than unavailable: {codes}")
    ctx.check(errors, "no call saw the outage")
    ctx.check(
        all(rec.get("allowed") is True for rec in decisions),
        "a decision far below the limit was a denial",
    )
    ctx.check(
        any(rec.get("now_ms", 0) < stopped_at for rec in decisions), "the run did not start healthy"
    )
    after = sorted(rec["now_ms"] for rec in decisions if rec.get("now_ms", 0) >= restarted_at)
    ctx.require(
        after, f"no call succeeded after the restart ({restarted_at - stopped_at} ms outage)"
    )
    recovered = after[0] - restarted_at
    ctx.check(
        recovered <= 3 * timeout + 300,
        f"the first success came {recovered} ms after the server was back",
    )
    # Bounded: callers sleep uniform [0, jitter] ms between calls, so they make
    # fewer than one call per jitter/8 ms on average while the server is
    # down, plus a few on connections that died with it.
    down = restarted_at - stopped_at + recovered
    bound = concurrency * (down // (jitter // 8) + 5)
    ctx.check(
        len(errors) <= bound,
        f"{len(errors)} unavailable errors for a {down} ms outage (bound {bound})",
    )
    # Afterwards every call succeeds, but for a driver whose client sends on a
    # pooled connection idle through the restart without checking it first
    # (hello's stale_idle_connections, docs/driver.md): there each such
    # connection fails once, with unavailable (at most one per caller).
    start = now_ms() + 50
    again = d.req(
        timeout_s=30,
        op="load",
        lang="faults",
        tenant="tenant-1",
        cost=1,
        concurrency=concurrency,
        start_at_ms=start,
        end_at_ms=start + 400,
        ramp_ms=20,
        jitter_ms=jitter,
        out=out,
    )
    stale = concurrency if d.hello.get("stale_idle_connections") is True else 0
    codes_after = sorted({rec.get("error") for rec in _load_lines(ctx, out) if "error" in rec})
    ctx.check(
        again.get("ok") is True
        and again.get("calls", 0) > 0
        and again.get("errors", 1) <= stale
        and codes_after in ([], ["unavailable"]),
        f"a load after the restart: {again}, error codes {codes_after} (at most {stale} unavailable allowed)",
    )
    admin = server.client()
    ctx.check(
        admin("EXISTS", key) == 1 and admin("PTTL", key) > 0,
        f"{key} not recorded on the new server",
    )
    ctx.check(
        command_calls(admin).get("eval", 0) >= 1,
        "the new server never got EVAL (the NOSCRIPT fallback)",
    )
    expect_keys_expire(ctx, admin, "restart_mid_run")


def restart_between_calls(ctx):
    """Across a restart between calls the decisions stay exact: the call
    made while the server is down is unavailable, in time; the empty server
    (nothing is saved) counts the next calls once each, through the NOSCRIPT
    fallback, and a call that failed counts at most once (over-count, never
    under-count)."""
    server = ctx.redis()
    d = ctx.driver()
    timeout = 300
    d.limiter(_redis(server.url, timeout), _policy("restart", "sliding_counter", 3, 60_000))
    wait_for_window(server.client(), 60_000)
    for want in (2, 1):
        expect_decision(
            ctx,
            d.req(op="acquire", tenant="s"),
            "server time before the restart",
            allowed=True,
            remaining=want,
        )
    expect_decision(
        ctx,
        d.req(op="acquire_at", tenant="c", now_ms=T),
        "caller time before the restart",
        allowed=True,
        remaining=2,
    )
    server.stop()
    reply, ms = d.timed(op="acquire", tenant="s")
    expect_error(ctx, reply, "acquire while the server is down", "unavailable")
    ctx.check(
        ms <= timeout + SLACK_MS, f"the call while down took {ms:.0f} ms (timeout {timeout} ms)"
    )
    server.start()
    errors = 0
    while True:
        reply = d.req(op="acquire", tenant="s")
        if not is_error(reply, "unavailable") or errors == 3:
            break
        errors += 1
        time.sleep(0.05)
    # The call made while the server was down may still run once it is back
    # (ioredis's offline queue: docs/compatibility.md, the Node binding), counted once at most: an
    # over-count by its cost, never an under-count.
    first = expect_decision(
        ctx,
        reply,
        f"first server-time call on the empty server ({errors} errors first)",
        allowed=True,
    )
    expect_decision(
        ctx,
        d.req(op="acquire_at", tenant="c", now_ms=T),
        "caller time on the empty server",
        allowed=True,
        remaining=2,
    )
    admin = server.client()
    recorded = sum(int(v) for v in admin("HVALS", d.key("s")))
    late = recorded - 1
    ctx.check(
        0 <= late <= 1 + errors,
        f"the empty server recorded {recorded} permits for 1 call and {1 + errors} failed ones",
    )
    if first:
        ctx.check(
            3 - recorded <= first["remaining"] <= 2,
            f"remaining {first['remaining']} on an empty server that recorded {recorded}",
        )
    stats = command_calls(admin)
    evalsha, evals = stats.get("evalsha", 0), stats.get("eval", 0)
    # A failed call sent late that met the empty script cache counts
    # nothing: past its deadline it sends no EVAL after its NOSCRIPT. Every
    # other EVALSHA is one of the two calls here or a late one counted.
    unretried = _failed_calls(admin, "evalsha") - evals
    ctx.check(
        1 <= evals <= 1 + late and evalsha - unretried == 2 + late and 0 <= unretried <= 1 + errors,
        f"want {2 + late} EVALSHA (besides NOSCRIPTs of late calls that sent no EVAL) and 1 to "
        f"{1 + late} EVAL (NOSCRIPT fallbacks) on the new server, got {evalsha} "
        f"({unretried} NOSCRIPT without an EVAL) and {evals}",
    )


def _failed_calls(admin, command):
    """`failed_calls` of INFO commandstats (an EVALSHA answered NOSCRIPT)."""
    stats = admin.info("commandstats").get(f"cmdstat_{command}", "")
    found = re.search(r"failed_calls=(\d+)", stats)
    return int(found.group(1)) if found else 0


# ------------------------------------------------------ unreachable, slow

CALLS: list[dict[str, Any]] = [
    {"op": "acquire", "tenant": "t"},
    {"op": "acquire_at", "tenant": "t", "now_ms": T},
    {"op": "peek", "tenant": "t"},
    {"op": "peek", "tenant": "t", "now_ms": T},
    {"op": "reset", "tenant": "t"},
]


def max_clients(ctx):
    """A server at `maxclients` refuses every new connection ("ERR max number
    of clients reached", then it closes it): each call is `unavailable`
    within the timeout, never a decision nor a script error, on both clocks
    and for reset; once a connection frees, the same limiter decides again.
    A refused acquire may still be counted later (a client that queues
    commands while it reconnects, as ioredis does), never more than once."""
    server = ctx.redis(args=["--maxclients", "2"])
    admin = server.client()
    holder = server.client()  # the second and last client
    holder("PING")
    d = ctx.driver()
    d.limiter(_redis(server.url, timeout_ms=500), _policy("full", "sliding_log", 100, 60_000))
    for op in CALLS:
        reply = d.req(**op)
        expect_error(ctx, reply, f"at maxclients: {op['op']}", "unavailable")
    ctx.check(admin("DBSIZE") == 0, "a refused client wrote keys")
    acquires = sum(op["op"].startswith("acquire") for op in CALLS)
    holder.close()
    deadline, reply = time.monotonic() + 10, None
    while time.monotonic() < deadline:
        reply = d.req(op="acquire_at", tenant="t", now_ms=T)
        acquires += 1
        if not is_error(reply, "unavailable"):
            break
        time.sleep(0.1)
    if expect_decision(ctx, reply, "a connection free again", allowed=True):
        ctx.check(
            100 - acquires <= reply["remaining"] <= 99,
            f"{acquires} acquires sent, remaining {reply['remaining']} of 100",
        )


def unreachable(ctx):
    """Nothing listening (a closed port, a killed server's port): every call
    is unavailable within the configured timeout."""
    closed = ctx.own(ClosedPort())
    killed = ctx.redis()
    killed.stop()
    # held, so no other process can take the port and answer in its place
    ctx.own(ClosedPort(killed.port))
    d = ctx.driver()
    policy = _policy("dead", "sliding_log", 3, 1000)
    for what, url, timeout in (
        ("closed port", closed.url, 100),
        ("closed port", closed.url, 400),
        ("killed server", killed.url, 300),
    ):
        expect_fast_unavailable(
            ctx, d, f"{what}, timeout {timeout} ms", _redis(url, timeout), policy, CALLS, timeout
        )
    # A server that is down when the policy is set and starts later: once it
    # answers, calls decide, with no new policy (every driver here connects
    # lazily; one that connects eagerly would connect again, as its users
    # retry the connect).
    late = ctx.redis()
    late.stop()
    fresh = ctx.driver()
    fresh.ok("store", op="store", **_redis(late.url, 300))
    reply = fresh.req(op="policy", **policy)
    if reply.get("ok") is not True:
        expect_error(ctx, reply, "policy while the server is down", "unavailable")
    # Another tenant: a client's offline queue may still send this call
    # once the server is up.
    expect_error(
        ctx, fresh.req(op="acquire", tenant="d"), "acquire while the server is down", "unavailable"
    )
    key = fresh.req(op="key", tenant="t")
    ctx.check(
        key.get("ok") is True and key.get("key") == "dead:{geocode:t}:log:1000",
        f"key while the server is down: {key}",
    )
    late.start()
    for _ in range(4):
        reply = fresh.req(op="acquire_at", tenant="t", now_ms=T)
        if not is_error(reply, "unavailable"):
            break
        time.sleep(0.05)
    expect_decision(ctx, reply, "acquire_at once the server is up", allowed=True, remaining=2)


def hanging(ctx):
    """A peer that accepts connections and never answers: every call is
    unavailable, not before the timeout and not long after it."""
    silent = ctx.own(Silent())
    d = ctx.driver()
    timeout = 300
    expect_fast_unavailable(
        ctx,
        d,
        "silent peer",
        _redis(silent.url, timeout),
        _policy("dead", "sliding_log", 3, 1000),
        CALLS,
        timeout,
        lower_ms=timeout - 20,
    )


def slow(ctx):
    """Through a proxy that delays each direction by 300 ms: a 250 ms timeout
    is unavailable in time (on an open connection and when connecting), a
    3 s timeout is served, and once the link is fast the short-timeout
    limiter works again. A timed-out acquire may have been counted (the
    request had left), never more than once: over-count, never under-count;
    but no EVAL fallback goes out once the call has timed out."""
    server = ctx.redis()
    proxy = ctx.own(SlowProxy(server.port))
    policy = _policy("slow", "sliding_log", 10, 60_000)
    short, patient, fresh = 250, 3000, 250
    fast_d, slow_d, new_d = ctx.driver(), ctx.driver(), ctx.driver()
    fast_d.limiter(_redis(proxy.url, short), policy)
    slow_d.limiter(_redis(proxy.url, patient), policy)
    expect_decision(
        ctx,
        fast_d.req(op="acquire_at", tenant="t", now_ms=T),
        "short timeout, fast link",
        allowed=True,
        remaining=9,
    )
    # The patient limiter's connection opens while the link is fast too.
    expect_decision(
        ctx,
        slow_d.req(op="peek", tenant="t", now_ms=T),
        "patient peek, fast link",
        allowed=True,
        remaining=8,
    )

    delay = 300
    proxy.delay_ms = delay
    for op in (
        {"op": "acquire_at", "tenant": "t", "now_ms": T + 1},
        {"op": "acquire_at", "tenant": "t", "now_ms": T + 1},
        {"op": "peek", "tenant": "t", "now_ms": T + 1},
        {"op": "reset", "tenant": "u"},
    ):
        reply, ms = fast_d.timed(**op)
        expect_error(ctx, reply, f"{op['op']} through a {2 * delay} ms round trip", "unavailable")
        ctx.check(
            short - 20 <= ms <= 3 * short,
            f"{op['op']}: unavailable after {ms:.0f} ms, the timeout is {short}",
        )
    # Connecting through the slow link fails in time too (the call that
    # connects, or the store or policy when the binding connects there).
    expect_fast_unavailable(
        ctx,
        new_d,
        "connecting through the slow link",
        _redis(proxy.url, fresh),
        policy,
        [{"op": "acquire_at", "tenant": "t", "now_ms": T + 1}],
        fresh,
    )

    served, ms = slow_d.timed(op="acquire_at", tenant="t", now_ms=T + 2)
    if expect_decision(ctx, served, "3 s timeout through the slow link", allowed=True):
        ctx.check(ms >= 2 * delay, f"served in {ms:.0f} ms through a {2 * delay} ms round trip")
        # 2 counted for sure; up to 3 timed-out acquires may have reached Redis.
        ctx.check(
            5 <= served["remaining"] <= 8, f"remaining {served['remaining']} after 2 to 5 permits"
        )

    proxy.delay_ms = 0
    time.sleep(3 * delay / 1000)  # the timed-out requests' replies drain
    after = fast_d.req(op="acquire_at", tenant="t", now_ms=T + 3)
    if expect_decision(
        ctx, after, "the short-timeout limiter on a fast link again", allowed=True
    ) and is_decision(served):
        ctx.check(
            4 <= after["remaining"] <= served["remaining"] - 1,
            f"remaining {after['remaining']} after {served['remaining']}: a permit was lost or a "
            "timed-out call counted twice",
        )
    # A NOSCRIPT that comes back after the timeout: the call is over, so its
    # EVAL fallback must not go out (it would spend a permit for a call
    # reported unavailable).
    admin = server.client()
    late = fast_d.key("late")
    admin("SCRIPT", "FLUSH")
    evals = command_calls(admin).get("eval", 0)
    proxy.delay_ms = delay
    reply, ms = fast_d.timed(op="acquire_at", tenant="late", now_ms=T)
    expect_error(ctx, reply, "an acquire whose NOSCRIPT comes after the timeout", "unavailable")
    # The NOSCRIPT's way back, an EVAL's way there, and some slack.
    time.sleep(4 * delay / 1000)
    proxy.delay_ms = 0
    ctx.check(
        command_calls(admin).get("eval", 0) == evals and admin("EXISTS", late) == 0,
        "an EVAL fallback was sent after the call had timed out, and recorded a permit",
    )
    expect_keys_expire(ctx, admin, "slow")


def deny_cache(ctx):
    """The deny cache's rules (docs/protocol.md, "Local deny cache") in every
    binding, each Redis call counted by INFO commandstats: after Redis denies
    an acquire of cost c, acquires of cost >= c are denied in-process with
    the retry counting down; a lower cost, a peek and a caller-time acquire
    ask Redis; a bad cost is invalid_argument, cached denial or not; this
    limiter's reset drops the entry; a local denial of a
    policy of several limits names the limit that denied, and its reset
    deletes every limit's key and the entry."""
    server = ctx.redis()
    admin = server.client()
    d = ctx.driver()

    def script_calls():
        stats = command_calls(admin)
        return sum(stats.get(name, 0) for name in ("evalsha", "eval", "evalsha_ro", "eval_ro"))

    def step(what, request, asks_redis, **want):
        # A script's first call may be two (EVALSHA, NOSCRIPT, EVAL).
        before = script_calls()
        reply = expect_decision(ctx, d.req(**request), what, **want)
        made = script_calls() - before
        where = "asks Redis" if asks_redis else "is answered in-process"
        ctx.check((made > 0) == asks_redis, f"{what}: {where}, but made {made} script call(s)")
        return reply

    d.limiter(_redis(server.url), _policy("cache", "sliding_log", 2, 60_000) | {"deny_cache": True})
    acquire = {"op": "acquire", "tenant": "t"}
    step("cost 2, the budget", {**acquire, "cost": 2}, True, allowed=True, remaining=0)
    denied = step("cost 2 again, Redis denies", {**acquire, "cost": 2}, True, allowed=False)
    time.sleep(0.05)
    local = step(
        "cost 2 within the retry", {**acquire, "cost": 2}, False, allowed=False, remaining=0
    )
    if denied and local:
        ctx.check(
            1 <= local["retry_after_ms"] <= denied["retry_after_ms"] - 40
            and local["now_ms"] >= denied["now_ms"] + 40,
            f"a local denial 50 ms later counts down: {local} after {denied}",
        )
    step("cost 1, below the cached cost", {**acquire, "cost": 1}, True, allowed=False)
    step("cost 1 again, now cached", {**acquire, "cost": 1}, False, allowed=False)
    step("cost 2, above the cached cost", {**acquire, "cost": 2}, False, allowed=False)
    # A cached denial answers only calls core accepts: a cost over the limit
    # is the caller's bug, the same error as without the cache.
    for bad in (3, 0):
        before = script_calls()
        expect_error(
            ctx,
            d.req(**acquire, cost=bad),
            f"cost {bad} with a denial cached",
            "invalid_argument",
            "cost",
        )
        ctx.check(script_calls() == before, f"cost {bad} with a denial cached reached Redis")
    step("a peek", {"op": "peek", "tenant": "t", "cost": 2}, True, allowed=False)
    if denied:
        at = {"op": "acquire_at", "tenant": "t", "cost": 2, "now_ms": denied["now_ms"] + 1}
        step("a caller-time acquire", at, True, allowed=False)
    step("another tenant", {"op": "acquire", "tenant": "u", "cost": 2}, True, allowed=True)
    d.ok("reset", op="reset", tenant="t")
    step("after this limiter's reset", {**acquire, "cost": 2}, True, allowed=True, remaining=0)

    limits = [
        {"algorithm": "sliding_log", "limit": 1, "window_ms": 60_000},
        {"algorithm": "bucketed_window", "limit": 5, "window_ms": 120_000, "buckets": 60},
        {"algorithm": "sliding_counter", "limit": 10, "window_ms": 30_000},
    ]
    d.ok(
        "policy",
        op="policy",
        namespace="cache",
        resource="multi",
        limits=limits,
        deny_cache=True,
    )
    step("several limits: the first's one permit", acquire, True, allowed=True)
    step("several limits: Redis denies", acquire, True, allowed=False, denied_by=0)
    step("several limits: denied in-process", acquire, False, allowed=False, denied_by=0)
    expect_keys_expire(ctx, admin, "deny_cache")

    def tenant_keys():
        return sorted(k.decode() for k in admin.scan_all() if b"{multi:t}" in k)

    held = tenant_keys()
    ctx.check(len(held) == len(limits), f"one key per limit, got {held}")
    d.ok("reset", op="reset", tenant="t")
    ctx.check(not tenant_keys(), f"a reset of several limits left {tenant_keys()}")
    step("several limits, after the reset", acquire, True, allowed=True)


def deny_cache_slow_reply(ctx):
    """The deny cache counts a denial's retry from when the call was sent,
    not from when its reply came back (docs/protocol.md, "Local deny
    cache"): Redis denied somewhere in between, so only the send time keeps
    a cached wait from outlasting Redis's. Through a proxy that holds each
    direction 300 ms, a denial's reply lands 600 ms after its call left;
    100 ms after Redis frees the permit, a cache that counted from the
    reply would still deny for another 200 ms."""
    server = ctx.redis()
    proxy = ctx.own(SlowProxy(server.port))
    window, delay = 1500, 300
    policy = _policy("slowcache", "sliding_log", 1, window) | {"deny_cache": True}
    d = ctx.driver()
    d.limiter(_redis(proxy.url, 3000), policy)
    first = expect_decision(
        ctx, d.req(op="acquire", tenant="t"), "the one permit, fast link", allowed=True
    )
    if first is None:
        return
    proxy.delay_ms = delay
    denied, ms = d.timed(op="acquire", tenant="t")
    if expect_decision(ctx, denied, f"through a {2 * delay} ms round trip", allowed=False):
        ctx.check(ms >= 2 * delay, f"denied by Redis in {ms:.0f} ms through the slow link")
    # Answered in-process: a call to Redis would take 600 ms.
    local, ms = d.timed(op="acquire", tenant="t")
    if expect_decision(ctx, local, "right after the denial", allowed=False):
        ctx.check(ms < delay, f"denied in {ms:.0f} ms: the cached denial, not Redis")
    proxy.delay_ms = 0
    # Redis admits again at the first permit's now_ms + window (its TIME is
    # this machine's clock).
    free_at = first["now_ms"] + window + 100
    time.sleep(max(0.0, free_at / 1000 - time.time()))
    expect_decision(
        ctx,
        d.req(op="acquire", tenant="t"),
        "100 ms after Redis frees the permit (a wait counted from the slow reply ends 200 ms later)",
        allowed=True,
    )
    expect_keys_expire(ctx, server.client(), "slowcache")


# ------------------------------------------------------ malformed replies


def malformed_reply(ctx):
    """A script reply that is not one the policy's script sends is
    malformed_reply in every binding (docs/protocol.md): never a decision,
    never another code, one script call each, and nothing of it cached.
    A proxy replaces what Redis answered to each script call (the script
    still ran there), in the protocol the client chose. That includes a
    reply that fits another policy: six integers for one limit, five for
    several, a denying limit past the policy's last."""
    server = ctx.redis()
    proxy = ctx.own(ReplyRewriter(server.port))
    d = ctx.driver()
    now = now_ms()

    def answered(what, substitute, request, check):
        proxy.reply = substitute
        before = proxy.rewritten
        reply = d.req(**request)
        proxy.reply = NO_REWRITE
        made = proxy.rewritten - before
        ctx.check(made == 1, f"{what}: {made} script replies replaced, want 1 (one call)")
        return check(reply)

    def refused(what, substitute, request):
        return answered(
            what,
            substitute,
            request,
            lambda reply: (
                expect_error(ctx, reply, what, "malformed_reply")
                and ctx.check(reply.get("field") is None, f"{what}: field {reply.get('field')!r}")
            ),
        )

    acquire = {"op": "acquire", "tenant": "t"}
    # Enough permits that the calls Redis really ran never deny.
    d.limiter(
        _redis(proxy.url), _policy("malformed", "sliding_log", 100, 60_000) | {"deny_cache": True}
    )
    one_limit = {
        "four integers": [1, 99, 0, 60_000],
        "six integers, as from several limits": [0, 0, 250, 900, now, 1],
        "allowed = 2": [2, 99, 0, 60_000, now],
        "a negative remaining": [1, -1, 0, 60_000, now],
        "remaining above 2^53": [1, 2**60, 0, 60_000, now],
        "retry_after_ms above 2^53": [0, 0, 2**53 + 2, 60_000, now],
        "an admission with a retry": [1, 99, 5, 60_000, now],
        "a denial without a retry": [0, 0, 0, 60_000, now],
        "an element of text": [1, b"99", 0, 60_000, now],
        "a nil element": [1, None, 0, 60_000, now],
        "a nested array": [1, [99], 0, 60_000, now],
        "an empty array": [],
        "a status reply": Simple("OK"),
        "an integer": 1,
        "nil": None,
    }
    for kind, substitute in one_limit.items():
        refused(f"one limit, {kind}", substitute, acquire)
    bogus_denial = one_limit["six integers, as from several limits"]
    refused("one limit, six integers, a peek", bogus_denial, {"op": "peek", "tenant": "t"})
    at = {"op": "acquire_at", "tenant": "t", "now_ms": now}
    refused("one limit, six integers, a caller-time acquire", bogus_denial, at)
    # The bogus denial was not cached: the next acquire asks Redis, which admits.
    expect_decision(ctx, d.req(**acquire), "after the malformed denials", allowed=True)
    answered(
        "one limit, a well-formed denial",
        [0, 0, 250, 900, now],
        acquire,
        lambda reply: expect_decision(
            ctx,
            reply,
            "one limit, a well-formed denial",
            allowed=False,
            remaining=0,
            retry_after_ms=250,
            reset_after_ms=900,
            now_ms=now,
        ),
    )
    d.ok("reset", op="reset", tenant="t")

    limits = [
        {"algorithm": "sliding_log", "limit": 100, "window_ms": 1_000},
        {"algorithm": "sliding_counter", "limit": 100, "window_ms": 60_000},
    ]
    d.ok("policy", op="policy", namespace="malformed", resource="multi", limits=limits)
    for kind, substitute in {
        "five integers, as from one limit": [0, 0, 250, 900, now],
        "a denying limit past the last": [0, 0, 250, 900, now, 3],
        "a denial naming no limit": [0, 0, 250, 900, now, 0],
        "an admission naming a limit": [1, 5, 0, 900, now, 1],
        "seven integers": [1, 5, 0, 900, now, 0, 0],
    }.items():
        refused(f"two limits, {kind}", substitute, acquire)
    answered(
        "two limits, a well-formed denial by the second",
        [0, 0, 250, 900, now, 2],
        acquire,
        lambda reply: expect_decision(
            ctx, reply, "two limits, a denial by the second", allowed=False, denied_by=1
        ),
    )
    expect_keys_expire(ctx, server.client(), "malformed_reply")


# ------------------------------------------------------------- TRYAGAIN


def tryagain(ctx):
    """A script call that Redis refuses without running it with TRYAGAIN (a
    Cluster node whose migrating slot holds only some of a call's keys) is
    sent again after core's pauses (5, 10, 20, ... ms; docs/protocol.md,
    "Server errors"), so the call succeeds once the keys are together, and
    counts once; while the refusals last past the timeout it is
    unavailable, naming TRYAGAIN, within the timeout, and nothing is
    recorded. A MOVED the client did not follow is sent once more, then
    unavailable. A proxy answers the calls in Redis's place."""
    server = ctx.redis()
    proxy = ctx.own(ReplyRewriter(server.port))
    admin = server.client()
    d = ctx.driver()
    timeout = 400
    d.limiter(_redis(proxy.url, timeout), _policy("tryagain", "sliding_log", 3, 60_000))

    def refused_then(what, refusals, request):
        proxy.refuse, before = refusals, proxy.refused
        reply, ms = d.timed(**request)
        made = proxy.refused - before
        proxy.refuse = 0
        return reply, ms, made

    for what, request, want in (
        ("an acquire", {"op": "acquire", "tenant": "t"}, {"allowed": True, "remaining": 2}),
        ("a peek", {"op": "peek", "tenant": "t"}, {"allowed": True, "remaining": 1}),
        (
            "a caller-time acquire",
            {"op": "acquire_at", "tenant": "t", "now_ms": now_ms()},
            {"allowed": True, "remaining": 1},
        ),
    ):
        reply, ms, made = refused_then(what, 3, request)
        # Once each refused call, the fourth through; one permit at most.
        expect_decision(ctx, reply, f"{what} after 3 TRYAGAIN", **want)
        ctx.check(made == 3, f"{what}: {made} calls refused, want 3 (then a resend that passed)")
        ctx.check(
            ms >= 5 + 10 + 20, f"{what}: answered in {ms:.0f} ms, before core's pauses (35 ms)"
        )
    # A redirect the client did not follow (a standalone client here): sent
    # once more, then unavailable at once.
    proxy.refusal = f"-MOVED 8000 127.0.0.1:{server.port}\r\n".encode()
    reply, ms, made = refused_then("one MOVED", 1, {"op": "acquire", "tenant": "t"})
    expect_decision(ctx, reply, "after one MOVED", allowed=True, remaining=0)
    ctx.check(made == 1, f"one MOVED: {made} calls refused, want 1")
    reply, ms, made = refused_then("MOVED twice", 10**6, {"op": "peek", "tenant": "t"})
    if expect_error(
        ctx, reply, "MOVED twice", "unavailable", contains=["slot map is changing", "MOVED 8000"]
    ):
        ctx.check(made == 2, f"MOVED twice: {made} calls sent, want 2 (one resend)")
    proxy.refusal = ReplyRewriter.TRYAGAIN
    reply, ms, made = refused_then("refused throughout", 10**6, {"op": "acquire", "tenant": "t"})
    if expect_error(ctx, reply, "refused past the timeout", "unavailable", contains=["TRYAGAIN"]):
        ctx.check(ms <= timeout + SLACK_MS, f"refused past the timeout: {ms:.0f} ms")
        ctx.check(made >= 3, f"refused past the timeout: only {made} calls sent")
    expect_decision(
        ctx,
        d.req(op="peek", tenant="t"),
        "after the refusals: three permits held, none from the refused calls",
        allowed=False,
    )
    ctx.check(admin("LLEN", d.key("t")) == 3, "three permits in the log")
    expect_keys_expire(ctx, admin, "tryagain")


# ------------------------------------------------------------- wrong type


def wrong_type(ctx):
    """A key holding something the algorithm does not use (another type, the
    other algorithm's, or the right type with data slidelimit never writes)
    is wrong_type, the message names the key (core's text, the server's
    reply once), and the key is left exactly as it was; reset deletes it."""
    server = ctx.redis()
    admin = server.client()
    d = ctx.driver()
    for alg in ALGORITHMS:
        d.limiter(_redis(server.url), _policy("wrongtype", alg, 3, 60_000))
        key = d.key("t")
        writers = {
            "a string": [["SET", key, "not a rate limit"]],
            "a set": [["SADD", key, "x"]],
            "the other algorithm's": [["HSET", key, "1", "1"]]
            if alg == "sliding_log"
            else [["RPUSH", key, "1"]],
            # The right type, holding data slidelimit never writes.
            "foreign data": [["RPUSH", key, "x"]]
            if alg == "sliding_log"
            else [["HSET", key, "note", "1"]],
        }
        for kind, commands in writers.items():
            admin.pipeline(*commands, ["PEXPIRE", key, 60_000])
            before = admin("DUMP", key)
            for op in (
                {"op": "acquire", "tenant": "t"},
                {"op": "acquire_at", "tenant": "t", "now_ms": T},
                {"op": "peek", "tenant": "t"},
                {"op": "peek", "tenant": "t", "now_ms": T},
            ):
                what = f"{alg}, {kind} at {key}: {op['op']}{' at T' if 'now_ms' in op else ''}"
                reply = d.req(**op)
                contains = (
                    ["wrong kind of value"] if kind != "foreign data" else []
                )  # the server's reply, kept
                if expect_error(
                    ctx,
                    reply,
                    what,
                    "wrong_type",
                    contains=contains,
                    starts=f"key {key} holds a value the {alg} algorithm does not use",
                ):
                    ctx.check(
                        reply.get("field") is None,
                        f"{what}: field {reply.get('field')!r}, want null",
                    )
                    ctx.check(
                        reply["message"].count("WRONGTYPE") == 1,
                        f"{what}: WRONGTYPE should appear once: {reply['message']!r}",
                    )
            ctx.check(
                admin("DUMP", key) == before and admin("PTTL", key) > 0,
                f"{alg}: {kind} key changed",
            )
            d.ok("reset deletes a key of any type", op="reset", tenant="t")
            ctx.check(admin("EXISTS", key) == 0, f"{alg}: reset left {kind} key {key}")


# ------------------------------------------------- a full memory, a replica


def _every_kind(namespace):
    """(name, policy): each algorithm alone with a limit of 3, then the three
    as one policy of several limits whose smallest limit is 3, so that every
    kind answers the same `remaining`."""
    yield "sliding_log", _policy(namespace, "sliding_log", 3, 60_000)
    yield "sliding_counter", _policy(namespace, "sliding_counter", 3, 60_000)
    yield "bucketed_window", {**_policy(namespace, "bucketed_window", 3, 60_000), "buckets": 60}
    yield (
        "several limits",
        {
            "namespace": namespace,
            "resource": "multi",
            "limits": [
                {"algorithm": "sliding_log", "limit": 3, "window_ms": 60_000},
                {"algorithm": "bucketed_window", "limit": 5, "window_ms": 120_000, "buckets": 60},
                {"algorithm": "sliding_counter", "limit": 10, "window_ms": 30_000},
            ],
        },
    )


def _snapshot(admin):
    """Every key with its DUMP: what "nothing was recorded" compares."""
    return {k: admin("DUMP", k) for k in admin.scan_all()}


def _record(ctx, d, kind, tenant, count):
    for i in range(count):
        expect_decision(
            ctx,
            d.req(op="acquire_at", tenant=tenant, now_ms=T + i),
            f"{kind}: {tenant} #{i}",
            allowed=True,
        )


def _peek_answers_writes_unavailable(ctx, d, where, peek, remaining, word, writes):
    """A peek, which writes nothing, is a decision (allowed, `remaining`);
    each of `writes` (what, request) is unavailable with the server's `word`."""
    expect_decision(
        ctx, d.req(op="peek", **peek), f"{where}: a peek", allowed=True, remaining=remaining
    )
    for what, op in writes:
        expect_error(
            ctx,
            d.req(**op),
            f"{where}: {what}",
            "unavailable",
            contains=[word],
            starts="redis unavailable: ",
        )


def _config_set(name, value):
    return lambda ctx, server, admin: admin("CONFIG", "SET", name, value)


def _fail_a_save(ctx, server, admin):
    """A save point, and a save that failed. A directory where the dump
    goes makes the finished dump's rename fail, for root as for anyone."""
    dump = admin("CONFIG", "GET", "dbfilename")[1]
    os.makedirs(os.path.join(server.dir, os.fsdecode(dump)), exist_ok=True)
    admin("CONFIG", "SET", "save", "3600 1")
    admin("BGSAVE")
    deadline = time.monotonic() + 10
    while (info := admin.info("persistence"))["rdb_bgsave_in_progress"] != "0":
        if time.monotonic() > deadline:
            ctx.fail("the BGSAVE did not end in 10 s")
        time.sleep(0.02)
    ctx.require(info["rdb_last_bgsave_status"] == "err", f"the BGSAVE did not fail: {info}")


def _forget_the_failed_save(ctx, server, admin):
    # Without a save point, a failed save no longer stops writes.
    admin("CONFIG", "SET", "save", "")
    dump = admin("CONFIG", "GET", "dbfilename")[1]
    os.rmdir(os.path.join(server.dir, os.fsdecode(dump)))


# A server state that refuses writes: its name, how to enter and leave it
# (ctx, server, admin), the word its error holds, and whether DEL (a reset)
# is refused too.
_REFUSING_STATES = (
    # At maxmemory with noeviction a script's first write is refused, DEL
    # is not: it frees memory. Any memory in use is over one byte.
    ("maxmemory", _config_set("maxmemory", "1"), _config_set("maxmemory", "0"), "OOM", False),
    # A master told to write only with a replica, and none connected.
    (
        "min-replicas-to-write",
        _config_set("min-replicas-to-write", "1"),
        _config_set("min-replicas-to-write", "0"),
        "NOREPLICAS",
        True,
    ),
    # A save failed while a save point is configured, and
    # stop-writes-on-bgsave-error is on (the default).
    ("a failed save", _fail_a_save, _forget_the_failed_save, "MISCONF", True),
)


def refused_writes(ctx):
    """A server that refuses writes for a state it is in (`OOM` at maxmemory
    with `maxmemory-policy noeviction`; `NOREPLICAS` under
    `min-replicas-to-write` without a replica; `MISCONF` after a failed
    save with a save point configured): an acquire that would admit
    (none here trims expired entries first, which at maxmemory Redis lets
    through, and then the RPUSH after it)
    is unavailable, the server's word in its message, and records nothing; a
    denial and a peek, which write nothing, are still decisions; a reset is
    refused alike unless the state lets DEL through (at maxmemory it frees
    memory). Once the state ends, the same limiter admits, counting what it
    held before. (Redis 6.2 wraps these errors in its own script error;
    `make compat` runs this scenario there too.)"""
    server = ctx.redis(args=["--maxmemory-policy", "noeviction"])
    admin = server.client()
    d = ctx.driver()
    for state, enter, leave, word, refuses_del in _REFUSING_STATES:
        for n, (kind, policy) in enumerate(_every_kind("refused")):
            where = f"{kind}, {state}"
            d.limiter(_redis(server.url), policy)
            _record(ctx, d, where, "full", 3)
            _record(ctx, d, where, "part", 1)
            enter(ctx, server, admin)
            before = _snapshot(admin)
            expect_decision(
                ctx,
                d.req(op="acquire_at", tenant="full", now_ms=T + 10),
                f"{where}: a denial",
                allowed=False,
            )
            _peek_answers_writes_unavailable(
                ctx,
                d,
                where,
                {"tenant": "fresh", "now_ms": T + 10},
                2,
                word,
                [
                    ("a new tenant", {"op": "acquire_at", "tenant": "fresh", "now_ms": T + 10}),
                    ("a new tenant, server time", {"op": "acquire", "tenant": f"fresh-{n}"}),
                    (
                        "a tenant with room",
                        {"op": "acquire_at", "tenant": "part", "now_ms": T + 11},
                    ),
                    ("cost 2", {"op": "acquire_at", "tenant": "part", "now_ms": T + 11, "cost": 2}),
                ],
            )
            admin("SCRIPT", "FLUSH")  # the NOSCRIPT fallback's EVAL meets the same refusal
            expect_error(
                ctx,
                d.req(op="acquire_at", tenant="part", now_ms=T + 12),
                f"{where}: after SCRIPT FLUSH",
                "unavailable",
                contains=[word],
            )
            ctx.check(_snapshot(admin) == before, f"{where}: a refused acquire changed a key")
            reset = d.req(op="reset", tenant="full")
            full_keys = [k for k in admin.scan_all() if b":full}" in k]
            if refuses_del:
                expect_error(ctx, reset, f"{where}: a reset", "unavailable", contains=[word])
                ctx.check(_snapshot(admin) == before, f"{where}: a refused reset changed a key")
            else:
                ctx.check(reset == {"ok": True}, f"{where}: a reset: {reset}")
                ctx.check(not full_keys, f"{where}: the reset left {full_keys}")
            leave(ctx, server, admin)
            expect_decision(
                ctx,
                d.req(op="acquire_at", tenant="part", now_ms=T + 13),
                f"{where}, left: the tenant's second permit",
                allowed=True,
                remaining=1,
            )
            admin("FLUSHALL")
    ctx.check(
        admin("CONFIG", "GET", "maxmemory-policy")[1] in (b"noeviction", "noeviction"),
        "the server evicts: the scenario proves nothing",
    )


def read_only_replica(ctx):
    """A standalone URL that names a replica (a master a failover demoted):
    every acquire is unavailable, READONLY in its message, and nothing is
    written; a peek answers from what was replicated. (Redis 6.2 wraps the
    READONLY in its own script error; `make compat` runs this there too.)"""
    # No wait before a full sync (7.0's default is 5 s).
    primary = ctx.redis(args=["--repl-diskless-sync-delay", "0"])
    replica = ctx.redis(args=["--replicaof", "127.0.0.1", str(primary.port)])
    admin, on_replica = primary.client(), replica.client()
    deadline = time.monotonic() + 20
    while b"master_link_status:up" not in on_replica("INFO", "replication"):
        if time.monotonic() > deadline:
            ctx.fail("the replica did not sync in 20 s")
        time.sleep(0.05)
    d = ctx.driver()
    for kind, policy in _every_kind("replica"):
        d.limiter(_redis(primary.url), policy)
        _record(ctx, d, kind, "t", 2)
        # WAIT would not do: it waits for this connection's own writes.
        before, deadline = _snapshot(on_replica), time.monotonic() + 10
        while before != _snapshot(admin):
            if time.monotonic() > deadline:
                ctx.fail(f"{kind}: the replica did not take the writes in 10 s")
            time.sleep(0.02)
            before = _snapshot(on_replica)
        d.limiter(_redis(replica.url), policy)
        _peek_answers_writes_unavailable(
            ctx,
            d,
            f"{kind}: on the replica",
            {"tenant": "t", "now_ms": T + 2},
            0,
            "READONLY",
            [
                ("an acquire", {"op": "acquire_at", "tenant": "t", "now_ms": T + 2}),
                ("a new tenant, server time", {"op": "acquire", "tenant": "u"}),
            ],
        )
        ctx.check(_snapshot(on_replica) == before, f"{kind}: the replica's keys changed")
        ctx.check(_snapshot(admin) == before, f"{kind}: the master's keys changed")


# -------------------------------------------------------------------- ACL

# What a limiter needs: EVALSHA (every call), EVAL (the NOSCRIPT fallback),
# DEL (reset) and what the scripts call (docs/compatibility.md's list).
ACL_COMMANDS = [
    "evalsha",
    "eval",
    "del",
    "time",
    "lrange",
    "llen",
    "lindex",
    "lpop",
    "ltrim",
    "rpush",
    "pexpire",
    "hmget",
    "hincrby",
    "hkeys",
    "hdel",
    "exists",
    "getrange",
    "set",
    "setrange",
]


def _acl_user(admin, user, password, ns, commands):
    """A user confined to `ns:*` keys that may run only `commands`."""
    admin(
        "ACL",
        "SETUSER",
        user,
        "reset",
        "on",
        f">{password}",
        f"~{ns}:*",
        "resetchannels",
        "-@all",
        *[f"+{c}" for c in commands],
    )


def acl(ctx):
    """A user allowed only `ns:*` keys and the limiter's commands gets every
    kind of decision (server and caller time, cost, peek, denial, reset,
    trimming, the EVAL fallback); with a policy in another namespace it gets
    permission_denied and writes nothing, nor may it run anything else."""
    server = ctx.redis()
    admin = server.client()
    ns, user, password = "aclns", "limiter", "s3cret-pass"
    _acl_user(admin, user, password, ns, ACL_COMMANDS)
    url = f"redis://{user}:{password}@127.0.0.1:{server.port}/"
    d = ctx.driver()
    for alg, policy in _every_kind(ns):
        d.limiter(_redis(url), policy)
        key = d.key("t")
        wait_for_window(admin, 60_000)
        expect_decision(ctx, d.req(op="acquire", tenant="t"), f"{alg} server time", allowed=True)
        expect_decision(
            ctx, d.req(op="acquire", tenant="t", cost=2), f"{alg} server time, cost 2", allowed=True
        )
        expect_decision(
            ctx, d.req(op="peek", tenant="t"), f"{alg} peek at the limit", allowed=False
        )
        expect_decision(
            ctx, d.req(op="acquire", tenant="t"), f"{alg} acquire at the limit", allowed=False
        )
        d.ok(f"{alg} reset", op="reset", tenant="t")
        ctx.check(admin("EXISTS", key) == 0, f"{alg}: reset left {key}")
        for i in range(4):
            expect_decision(
                ctx,
                d.req(op="acquire_at", tenant="t", now_ms=T + i),
                f"{alg} caller time #{i}",
                allowed=i < 3,
            )
        # After the window: the log trims, the counter drops old fields, the
        # bucketed window starts its key again.
        expect_decision(
            ctx,
            d.req(op="acquire_at", tenant="t", now_ms=T + 200_000),
            f"{alg} after the window",
            allowed=True,
        )
        admin("SCRIPT", "FLUSH")  # NOSCRIPT: the fallback's EVAL is allowed too
        expect_decision(
            ctx,
            d.req(op="acquire_at", tenant="t", now_ms=T + 200_001),
            f"{alg} after SCRIPT FLUSH",
            allowed=True,
        )
        ctx.check(admin("PTTL", key) > 0, f"{alg}: {key} has no TTL")
    before = admin("DBSIZE")
    for alg, policy in _every_kind(f"other{ns}"):
        d.limiter(_redis(url), policy)
        key = d.key("t")
        for op in CALLS:
            expect_error(
                ctx,
                d.req(**op),
                f"{alg} outside the prefix: {op['op']}",
                "permission_denied",
                contains=["NOPERM"],
            )
        ctx.check(admin("EXISTS", key) == 0, f"{alg}: {key} was written outside the prefix")
    ctx.check(admin("DBSIZE") == before, "keys were written outside the prefix")
    # A wrong password (WRONGPASS) is an auth refusal, permission_denied, at
    # whichever step the binding first talks to the server.
    wrong = f"redis://{user}:not-{password}@127.0.0.1:{server.port}/"
    step = None
    # step is read after the loop: the one the refusal came at.
    for step, request in (  # noqa: B007
        ("store", {"op": "store", **_redis(wrong)}),
        ("policy", {"op": "policy", **_policy(ns, "sliding_log", 3, 60_000)}),
        ("acquire", {"op": "acquire", "tenant": "t"}),
    ):
        reply = d.req(**request)
        if reply.get("ok") is not True:
            break
    expect_error(ctx, reply, f"wrong password, at {step}", "permission_denied")
    ctx.check(admin("DBSIZE") == before, "a refused login wrote keys")
    # A user whose ACL lacks a command a script calls (each script's commands:
    # docs/compatibility.md, "ACL") is refused inside the script, in words
    # that differ by server version: permission_denied all the same.
    lacking = "limiter-without-setrange"
    _acl_user(admin, lacking, password, ns, [c for c in ACL_COMMANDS if c != "setrange"])
    d.limiter(
        _redis(f"redis://{lacking}:{password}@127.0.0.1:{server.port}/"),
        {**_policy(ns, "bucketed_window", 3, 60_000), "buckets": 60},
    )
    _record(ctx, d, "bucketed_window without SETRANGE", "lacking", 1)  # a SET
    dumped = admin("DUMP", d.key("lacking"))
    expect_error(
        ctx,
        d.req(op="acquire_at", tenant="lacking", now_ms=T + 1),
        "bucketed_window without SETRANGE, a second permit",
        "permission_denied",
    )
    ctx.check(
        admin("DUMP", d.key("lacking")) == dumped,
        "a refused command changed the key",
    )
    # The user really is confined: nothing else, even inside its prefix.
    with Redis("127.0.0.1", server.port, username=user, password=password) as as_user:
        for command in (["GET", f"{ns}:x"], ["ACL", "WHOAMI"]):
            try:
                as_user(*command)
                ctx.fail(f"the ACL user may run {command[0]}: the scenario proves nothing")
            except ReplyError as e:
                ctx.check("NOPERM" in str(e), f"{command[0]}: {e}")
    keys = admin.scan_all()
    outside = [k for k in keys if not k.startswith(f"{ns}:".encode())]
    ctx.check(keys and not outside, f"keys outside {ns}: {outside[:5]} (of {len(keys)})")
    expect_keys_expire(ctx, admin, "acl")


# -------------------------------------------------------------------- TLS


def tls(ctx):
    """A server speaking only TLS, its certificate (localhost, 127.0.0.1)
    from the scenario's CA: trusted through tls_ca_file it serves, by name
    and by address; the system roots only, another CA, a certificate for
    another name, plain text on the TLS port: unavailable, never a decision."""
    certs = ctx.own(Certificates())
    server = ctx.redis(tls=certs)
    misnamed = ctx.redis(tls=certs.with_server_cert("misnamed"), tls_name="redis.example")
    admin = server.client()
    ca, timeout, refused_timeout = certs.path("ca.crt"), 2000, 500
    policy = _policy("tls", "sliding_log", 3, 60_000)
    d = ctx.driver()
    for host in ("localhost", "127.0.0.1"):
        d.limiter(_redis(f"rediss://{host}:{server.port}/", timeout, tls_ca_file=ca), policy)
        for want in (2, 1, 0):
            expect_decision(
                ctx,
                d.req(op="acquire", tenant="t"),
                f"TLS via {host}: acquire",
                allowed=True,
                remaining=want,
            )
        expect_decision(ctx, d.req(op="peek", tenant="t"), f"TLS via {host}: peek", allowed=False)
        expect_decision(
            ctx,
            d.req(op="acquire_at", tenant="c", now_ms=T),
            f"TLS via {host}: acquire_at",
            allowed=True,
            remaining=2,
        )
        ctx.check(admin("PTTL", d.key("c")) > 0, f"TLS via {host}: no TTL")
        for tenant in ("t", "c"):
            d.ok(f"TLS via {host}: reset", op="reset", tenant=tenant)
    ctx.check(admin("DBSIZE") == 0, "reset over TLS left keys")
    t = refused_timeout
    refused = [
        ("the system roots only", _redis(f"rediss://localhost:{server.port}/", t)),
        (
            "another CA",
            _redis(f"rediss://localhost:{server.port}/", t, tls_ca_file=certs.path("other-ca.crt")),
        ),
        (
            "a certificate for another name",
            _redis(f"rediss://localhost:{misnamed.port}/", t, tls_ca_file=ca),
        ),
        ("plain text on the TLS port", _redis(f"redis://127.0.0.1:{server.port}/", t)),
    ]
    for what, store in refused:
        expect_fast_unavailable(ctx, ctx.driver(), what, store, policy, CALLS[:2], t)
    ctx.check(
        admin("DBSIZE") == 0 and misnamed.client()("DBSIZE") == 0, "a refused client wrote a key"
    )


# -------------------------------------------------------------- bad input

# (what a good policy is changed by, the field the error names)
BAD_POLICIES: list[tuple[dict[str, Any], str]] = [
    ({"limit": 0}, "limit"),
    ({"window_ms": 0}, "window_ms"),
    ({"limit": 1 << 40, "window_ms": 1 << 13}, "limit"),  # limit * window_ms = 2^53
    ({"limit": 1 << 26, "window_ms": (1 << 26) + 1}, "limit"),  # just over 2^52
    ({"limit": 1 << 30, "window_ms": 1 << 30}, "limit"),
    ({"limit": 1 << 53, "window_ms": 1}, "limit"),
    ({"limit": 10_001}, "limit"),  # the sliding log's cap
    ({"algorithm": "sliding_counter", "limit": 1 << 53, "window_ms": 1}, "limit"),
    ({"namespace": ""}, "namespace"),
    ({"namespace": "n" * 65}, "namespace"),
    ({"namespace": "a{b"}, "namespace"),
    ({"namespace": "a{b}"}, "namespace"),
    ({"namespace": "rl:v2"}, "namespace"),
    ({"namespace": "a b"}, "namespace"),
    ({"resource": ""}, "resource"),
    ({"resource": "r" * 65}, "resource"),
    ({"resource": "geo}code"}, "resource"),
    ({"resource": "}"}, "resource"),
    ({"resource": "geo:code"}, "resource"),
    ({"resource": "géo"}, "resource"),
    ({"algorithm": "sliding log"}, "algorithm"),
    ({"algorithm": "SLIDING_LOG"}, "algorithm"),
    ({"algorithm": "token_bucket"}, "algorithm"),
    # Numbers no unsigned parameter holds, and fields left out (null is the
    # same as absent): every binding refuses them, the typed ones through
    # their drivers (docs/driver.md).
    ({"limit": -1}, "limit"),
    ({"window_ms": -1000}, "window_ms"),
    ({"limit": 2.5}, "limit"),
    ({"algorithm": "bucketed_window", "buckets": -10}, "buckets"),
    # Past the doubles' range: JSON's grammar has it, no double holds it.
    ({"limit": BeyondDouble("1e400")}, "limit"),
    ({"window_ms": BeyondDouble("-1e999")}, "window_ms"),
    ({"limit": None}, "limit"),
    ({"window_ms": None}, "window_ms"),
    ({"resource": None}, "resource"),
    # A lone surrogate (JSON's \ud800): no UTF-8 string holds one.
    ({"resource": "geo\ud800"}, "resource"),
    ({"namespace": "\udc00rl"}, "namespace"),
]

# A tenant left out of the request (a null one is the same).
ABSENT = object()

BAD_TENANTS: list[tuple[Any, str]] = [
    ("", "tenant: must not be empty"),
    ("x" * 513, "tenant: is 513 bytes"),
    ("é" * 256 + "x", "tenant: is 513 bytes"),  # 512 bytes of UTF-8 at most, not characters
    ("é" * 257, "tenant: is 514 bytes"),
    # Each binding words these its own way (docs/driver.md).
    (ABSENT, "tenant: "),
    (None, "tenant: "),
    ("a\ud800b", "tenant: "),
    ("\udc80", "tenant: "),
    ("\ude80\ud83d", "tenant: "),  # a pair in the wrong order is two lone ones
]


def _bad_calls(limit):
    calls = []
    for tenant, message in BAD_TENANTS:
        for op in (
            {"op": "acquire"},
            {"op": "acquire", "cost": 1},
            {"op": "acquire_at", "now_ms": T},
            {"op": "peek"},
            {"op": "peek", "now_ms": T},
            {"op": "reset"},
            {"op": "key"},
        ):
            calls.append(
                ({**op} if tenant is ABSENT else {**op, "tenant": tenant}, "tenant", message)
            )
    for cost in (0, limit + 1, 1 << 53, -1, 1.5, BeyondDouble("1e400")):
        for op in (
            {"op": "acquire"},
            {"op": "acquire_at", "now_ms": T},
            {"op": "peek"},
            {"op": "peek", "now_ms": T},
        ):
            calls.append(({**op, "tenant": "t", "cost": cost}, "cost", "cost: "))
    for now in ((1 << 52) + 1, 1 << 53, -1, 2.5, BeyondDouble("-1e400")):
        for op in ({"op": "acquire_at"}, {"op": "peek"}):
            calls.append(({**op, "tenant": "t", "now_ms": now}, "now_ms", "now_ms: "))
    return calls


def bad_input(ctx):
    """Every bad input the driver protocol can carry is invalid_argument
    naming its field, on Redis and on the memory engine, and nothing reaches
    Redis: no key written, no script sent. The largest valid values pass,
    and braces in a tenant are escaped into exactly one key."""
    server = ctx.redis()
    admin = server.client()
    admin("CONFIG", "RESETSTAT")
    d = ctx.driver()
    good = _policy("bad", "sliding_log", 3, 1000)
    stores = {"redis": _redis(server.url), "memory": {"kind": "memory"}}
    for kind, store in stores.items():
        for overrides, field in BAD_POLICIES:
            d.ok("store", op="store", **store)
            policy = {**good, **overrides}
            expect_error(
                ctx,
                d.req(op="policy", **policy),
                f"{kind}: policy {overrides}",
                "invalid_argument",
                field=field,
                starts=f"{field}: ",
            )
        for alg in ALGORITHMS:
            d.limiter(store, {**good, "algorithm": alg})
            for op, field, message in _bad_calls(good["limit"]):
                shown = {
                    k: (f"{v[:4]}...({len(v)} chars)" if isinstance(v, str) and len(v) > 20 else v)
                    for k, v in op.items()
                }
                expect_error(
                    ctx,
                    d.req(**op),
                    f"{kind} {alg}: {shown}",
                    "invalid_argument",
                    field=field,
                    starts=message,
                )
    for timeout in (0, 1 << 31):
        reply = d.req(op="store", **_redis(server.url, timeout))
        if reply.get("ok") is True:  # a binding that makes its client with the limiter
            reply = d.req(op="policy", **good)
        expect_error(
            ctx,
            reply,
            f"store with timeout_ms {timeout}",
            "invalid_argument",
            field="timeout_ms",
            starts="timeout_ms: ",
        )
    ctx.check(admin("DBSIZE") == 0, f"bad input wrote {admin('DBSIZE')} keys")
    stats = command_calls(admin)
    sent = {c: stats[c] for c in ("evalsha", "evalsha_ro", "eval", "eval_ro", "del") if c in stats}
    ctx.check(not sent, f"bad input reached Redis: {sent}")

    # The largest valid values.
    for kind, store in stores.items():
        for overrides in (
            {"namespace": "n" * 64, "resource": "r" * 64},
            {"limit": 10_000},
            {"algorithm": "sliding_counter", "limit": 1 << 26, "window_ms": 1 << 26},
        ):
            d.ok(f"{kind}: policy {list(overrides)} at the limit", op="store", **store)
            d.ok(
                f"{kind}: policy {list(overrides)} at the limit",
                op="policy",
                **{**good, **overrides},
            )
        d.limiter(store, good)
        for tenant in ("x" * 512, "é" * 256):
            expect_decision(
                ctx,
                d.req(op="acquire_at", tenant=tenant, now_ms=T),
                f"{kind}: 512-byte tenant",
                allowed=True,
            )
        expect_decision(
            ctx,
            d.req(op="acquire_at", tenant="edge", cost=3, now_ms=1 << 52),
            f"{kind}: cost = limit at now_ms 2^52",
            allowed=True,
            remaining=0,
        )
        # A JSON number is a double (docs/driver.md): whole ones written as
        # 3.0 or -0.0 are those integers in every driver.
        d.ok(
            f"{kind}: a policy of 3.0 per 1000.0 ms",
            op="policy",
            **{**good, "limit": 3.0, "window_ms": 1000.0},
        )
        expect_decision(
            ctx,
            d.req(op="acquire_at", tenant="float-form", cost=2.0, now_ms=float(T)),
            f"{kind}: cost 2.0 at now_ms {float(T)}",
            allowed=True,
            remaining=1,
            now_ms=T,
        )
        expect_decision(
            ctx,
            d.req(op="acquire_at", tenant="minus-zero", now_ms=-0.0),
            f"{kind}: now_ms -0.0",
            allowed=True,
            now_ms=0,
        )
    admin("FLUSHALL")

    # Braces are escaped, not refused: one key, the one the binding names.
    d.limiter(stores["redis"], good)
    expected = "bad:{geocode:%7D%7Ba%7D%7B%7Bb%7D%7D}:log:1000"
    ctx.check(
        d.key("}{a}{{b}}") == expected,
        f"key of }}{{a}}{{{{b}}}}: {d.key('}{a}{{b}}')}, want {expected}",
    )
    for tenant in ("}{a}{{b}}", "{", "}", "{}", "{{{{"):
        expect_decision(
            ctx, d.req(op="acquire_at", tenant=tenant, now_ms=T), f"tenant {tenant!r}", allowed=True
        )
        keys = [k.decode() for k in admin.scan_all()]
        ctx.check(
            keys == [d.key(tenant)], f"tenant {tenant!r} wrote {keys}, want [{d.key(tenant)}]"
        )
        ctx.check(
            all(k.count("{") == 1 and k.count("}") == 1 for k in keys),
            f"more than one hash tag: {keys}",
        )
        expect_keys_expire(ctx, admin, f"tenant {tenant!r}")
        admin("FLUSHALL")
    # The driver, and the binding, are still alive and well.
    expect_decision(
        ctx,
        d.req(op="acquire_at", tenant="t", now_ms=T),
        "after all that",
        allowed=True,
        remaining=2,
    )


class _TempDir:
    def __init__(self):
        self.path = tempfile.mkdtemp(prefix="slidelimit-faults-")

    def close(self):
        shutil.rmtree(self.path, ignore_errors=True)


# ---------------------------------------------------------- FRAMING


def _protocol_reply(ctx, session, request, what):
    """Sends one request (a raw line as it is, a dict as the harness writes
    it); its reply must be a protocol error with a message."""
    line = request if isinstance(request, str) else wire_json(request)
    try:
        raw = session.driver.send_line(line, what)
        reply = json.loads(raw)
    except (DriverError, ValueError) as e:
        ctx.fail(f"{what}: {line[:120]} -> {e}{session.driver_stderr()}")
    ctx.check(
        isinstance(reply, dict)
        and reply.get("error") == "protocol"
        and isinstance(reply.get("message"), str)
        and reply["message"] != "",
        f"{what}: {line[:120]} -> {raw[:200]}, want a protocol error with a message",
    )


def framing(ctx):
    """docs/driver.md, "Framing": a request the driver cannot read (no JSON,
    no object, no or an unknown op, a field the op does not know, a field of
    another JSON type) is a protocol error, changes nothing, and the driver
    carries on. A misspelt field is never left at its default. Every
    policy's limiter on one memory store shares its engine, as on Redis."""
    d = ctx.driver()
    good = _policy("framing", "sliding_log", 3, 1000)
    store = {"kind": "memory"}
    # Out of order: a policy before any store, a call before any policy.
    _protocol_reply(ctx, d, {"op": "policy", **good}, "policy before a store")
    d.ok("store", op="store", **store)
    for request in (
        {"op": "acquire_at", "tenant": "t", "now_ms": T},
        {"op": "peek", "tenant": "t"},
        {"op": "reset", "tenant": "t"},
        {"op": "key", "tenant": "t"},
    ):
        _protocol_reply(ctx, d, request, f"{request['op']} before a policy")
    d.limiter(store, good)
    lines = ["{", "not json", '{"op":"acquire_at"', "[1,2]", '"acquire"', "5", "null"]
    lines += ["{}", '{"op":5}', '{"op":null}', '{"op":"fly"}', '{"op":"ACQUIRE"}']
    for line in lines:
        _protocol_reply(ctx, d, line, "unreadable")
    # Each op as it would pass, plus one field it does not know.
    policies = [
        {"op": "policy", **good, "limt": 3},
        {"op": "policy", **good, "deny_cache": False, "namespce": "x"},
        {
            "op": "policy",
            "namespace": "framing",
            "resource": "geocode",
            "limits": [
                {"limit": 3, "window_ms": 1000},
                {"limit": 9, "window_ms": 9000, "bucket": 9},
            ],
        },
    ]
    calls = [
        {"op": "hello", "verbose": True},
        {"op": "store", **store, "timeout": 5},
        *policies,
        {"op": "acquire", "tenant": "t", "cost": 1, "now": T},
        {"op": "acquire_at", "tenant": "t", "now_ms": T, "cots": 2},
        {"op": "peek", "tenant": "t", "now_ms": T, "dry_run": True},
        {"op": "reset", "tenant": "t", "all": True},
        {"op": "key", "tenant": "t", "algorithm": "sliding_log"},
    ]
    for request in calls:
        _protocol_reply(ctx, d, request, f"{request['op']} with a field it does not know")
    # Changed nothing: the policy set before still decides, and nothing was recorded.
    expect_decision(
        ctx,
        d.req(op="acquire_at", tenant="t", now_ms=T),
        "after the refused requests",
        allowed=True,
        remaining=2,
    )
    # Fields of another JSON type than the protocol gives them.
    mistyped: list[dict[str, Any]] = [
        {"op": "acquire_at", "tenant": "t", "now_ms": str(T)},
        {"op": "acquire_at", "tenant": "t", "now_ms": T, "cost": "2"},
        {"op": "acquire_at", "tenant": 5, "now_ms": T},
        {"op": "key", "tenant": ["t"]},
        {"op": "policy", **good, "limit": "3"},
        {"op": "policy", **good, "limits": {"limit": 3}},
        {"op": "store", "kind": 1},
    ]
    for request in mistyped:
        _protocol_reply(ctx, d, request, f"{request['op']} with a field of another type")
    # A fault the driver cannot read wins over any other, wherever it sits:
    # the driver reads the whole request before a value reaches the binding
    # (a typed binding refuses a -1 as its type's refusal, which must not
    # come first because its field does).
    limit_and_window = [{"limit": -1, "window_ms": 1000}, {"limit": 3, "window_ms": "9000"}]
    two_faults: list[dict[str, Any]] = [
        {"op": "acquire_at", "tenant": "t", "cost": -1, "now_ms": str(T)},
        {"op": "acquire_at", "tenant": "t", "cost": -1},
        {"op": "acquire_at", "tenant": "\ud800", "cost": 1},
        {"op": "acquire", "tenant": BeyondDouble("1e400")},
        {"op": "policy", **good, "limit": -1, "window_ms": "1000"},
        {"op": "policy", **good, "limit": -1, "deny_cache": 5},
        {"op": "policy", "namespace": "framing", "resource": "geocode", "limits": limit_and_window},
        {"op": "store", "kind": "cluster", "urls": []},
    ]
    for request in two_faults:
        _protocol_reply(ctx, d, request, f"{request['op']} with a protocol fault and another")
    expect_decision(
        ctx,
        d.req(op="acquire_at", tenant="t", now_ms=T, cost=2),
        "after the fields of another type",
        allowed=True,
        remaining=0,
    )
    # A list of more limits than a policy holds is refused as such, whatever
    # its entries hold (docs/driver.md): no binding reads an entry first.
    one = {"algorithm": "sliding_log", "limit": 3}
    nine = [{**one, "window_ms": 1000 * (i + 1)} for i in range(8)]
    for entry, what in (
        ({**one, "limit": -1, "window_ms": 9000}, "a negative limit"),
        ({**one, "limit": 1.5, "window_ms": 9000}, "a fraction"),
        ({**one, "window_ms": 2**64}, "a window past 2^64 - 1"),
        ({**one, "algorithm": "fixed_window", "window_ms": 9000}, "an unknown algorithm"),
        ({"limit": 3}, "no window"),
    ):
        reply = d.req(op="policy", namespace="framing", resource="geocode", limits=[*nine, entry])
        expect_error(
            ctx, reply, f"nine limits, the ninth with {what}", "invalid_argument", "limits"
        )
    # The refused policy's error answers every call, but a call the driver
    # cannot read is still a protocol error.
    _protocol_reply(
        ctx, d, {"op": "acquire_at", "tenant": "t"}, "acquire_at after a refused policy"
    )
    no_end = {"lang": "framing", "tenant": "t", "concurrency": 1, "start_at_ms": 0}
    _protocol_reply(
        ctx, d, {"op": "load", **no_end, "out": "/nonexistent/log"}, "load after a refused policy"
    )
    expect_error(
        ctx,
        d.req(op="acquire", tenant="t"),
        "acquire after a refused policy",
        "invalid_argument",
        "limits",
    )
    d.ok("the policy again", op="policy", **good)
    # A new policy on the same memory store sees what the earlier one
    # recorded, as on one Redis; only a new store starts empty.
    d.ok("a new policy", op="policy", **{**good, "limit": 4})
    expect_decision(
        ctx,
        d.req(op="acquire_at", tenant="t", now_ms=T),
        "a new policy (limit 4) on the same memory store, after 3 permits",
        allowed=True,
        remaining=0,
    )
    d.ok("a new store", op="store", **store)
    d.ok("the policy again", op="policy", **good)
    expect_decision(
        ctx,
        d.req(op="acquire_at", tenant="t", now_ms=T),
        "a new memory store",
        allowed=True,
        remaining=2,
    )


SCENARIOS = {
    "script_flush": script_flush,
    "restart_mid_run": restart_mid_run,
    "restart_between_calls": restart_between_calls,
    "unreachable": unreachable,
    "hanging": hanging,
    "slow": slow,
    "deny_cache": deny_cache,
    "deny_cache_slow_reply": deny_cache_slow_reply,
    "malformed_reply": malformed_reply,
    "tryagain": tryagain,
    "wrong_type": wrong_type,
    "acl": acl,
    "tls": tls,
    "bad_input": bad_input,
    "framing": framing,
    "refused_writes": refused_writes,
    "read_only_replica": read_only_replica,
    "max_clients": max_clients,
}
