"""Benchmarks of the Python binding, ratios measured in one run:

- acquire vs raw redis-py EVALSHA of the same script and arguments, sync one
  at a time and asyncio with 32 in flight (>= 0.95x wanted);
- acquire vs the `limits` library's moving window on the same Redis (the same
  exact rolling-window job);
- one core build + parse from Python (< 2 us wanted).

The limiters' local deny cache is off: most calls here are denials (limit
600), which the cache would answer without Redis, so acquire would be timed
against round trips it skips (the cache's effect is audit/flood's measure,
`make bench-flood`).

    scripts/with-redis.sh .tmp/python/venv/bin/python -I python/bench/bench.py
"""

from __future__ import annotations

import asyncio
import os
import platform
import sys
import time
from collections.abc import Awaitable, Callable

import limits
import limits.storage
import limits.strategies
import redis
import redis.asyncio

import slidelimit
from slidelimit import Algorithm, AsyncLimiter, Limiter, Policy

URL = os.environ["SLIDELIMIT_TEST_REDIS_URL"]
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "10"))
CALLS = int(os.environ.get("BENCH_CALLS", "2000"))
IN_FLIGHT = 32
POLICY = Policy("rl", "bench", Algorithm.SLIDING_LOG, limit=600, window_ms=60_000)


def timed(fn: Callable[[], object], n: int) -> float:
    started = time.perf_counter()
    for _ in range(n):
        fn()
    return time.perf_counter() - started


async def timed_async(fn: Callable[[], Awaitable[object]], n: int) -> float:
    async def worker(k: int) -> None:
        for _ in range(k):
            await fn()

    started = time.perf_counter()
    await asyncio.gather(*(worker(n // IN_FLIGHT) for _ in range(IN_FLIGHT)))
    return time.perf_counter() - started


def paired(
    name: str, a: tuple[str, Callable[[], object]], b: tuple[str, Callable[[], object]]
) -> None:
    """One call of each in turn, each timed on its own: load on the shared
    machine hits both alike. Ratio: a's throughput over b's."""
    total = {a[0]: 0, b[0]: 0}
    n = ROUNDS * CALLS
    clock = time.perf_counter_ns
    for i in range(n):
        for label, fn in (a, b) if i % 2 == 0 else (b, a):
            started = clock()
            fn()
            total[label] += clock() - started
    ops = {k: n / (v / 1e9) for k, v in total.items()}
    print(
        f"{name:34} {a[0]} {ops[a[0]]:9,.0f}/s  {b[0]} {ops[b[0]]:9,.0f}/s  "
        f"ratio {total[b[0]] / total[a[0]]:.3f}x  ({n:,} calls each, interleaved)"
    )


def sync_vs_raw() -> None:
    r = redis.Redis.from_url(URL)
    limiter = Limiter(r, POLICY, deny_cache=False)
    call = POLICY._call("sync", 1, None, False)  # the same script and ARGV
    limiter.acquire("sync")  # loads the script
    paired(
        "sync, one at a time",
        ("acquire", lambda: limiter.acquire("sync")),
        ("raw evalsha", lambda: r.evalsha(*call)),
    )
    limiter.reset("sync")


async def async_vs_raw() -> None:
    r = redis.asyncio.Redis.from_url(URL, max_connections=IN_FLIGHT)
    limiter = AsyncLimiter(r, POLICY, deny_cache=False)
    call = POLICY._call("async", 1, None, False)
    await limiter.acquire("async")
    times: dict[str, list[float]] = {"acquire": [], "raw evalsha": []}
    block = IN_FLIGHT * 10
    # The pool opens its IN_FLIGHT connections on first use: untimed, so that
    # the side that happens to run first does not pay for them.
    await timed_async(lambda: r.evalsha(*call), block)
    for i in range(ROUNDS * CALLS // block):
        order = [
            ("acquire", lambda: limiter.acquire("async")),
            ("raw evalsha", lambda: r.evalsha(*call)),
        ]
        for name, fn in order if i % 2 == 0 else order[::-1]:
            times[name].append(await timed_async(fn, block))
    total = {k: sum(v) for k, v in times.items()}
    n = len(times["acquire"]) * block
    print(
        f"{f'asyncio, {IN_FLIGHT} in flight':34} acquire {n / total['acquire']:9,.0f}/s  "
        f"raw evalsha {n / total['raw evalsha']:9,.0f}/s  "
        f"ratio {total['raw evalsha'] / total['acquire']:.3f}x  "
        f"({n:,} calls each, blocks of {block} alternating)"
    )
    await limiter.reset("async")
    await r.aclose()


def vs_limits() -> None:
    r = redis.Redis.from_url(URL)
    limiter = Limiter(r, POLICY, deny_cache=False)
    moving = limits.strategies.MovingWindowRateLimiter(limits.storage.RedisStorage(URL))
    item = limits.RateLimitItemPerMinute(600)
    paired(
        "vs limits moving window (sync)",
        ("acquire", lambda: limiter.acquire("vs-limits")),
        ("limits", lambda: moving.hit(item, "vs-limits")),
    )
    limiter.reset("vs-limits")
    moving.clear(item, "vs-limits")


def core_cost() -> None:
    n = 200_000
    reply = [1, 599, 0, 60_000, 1_764_000_000_000]
    build = POLICY._call
    decide = POLICY._decide

    def both() -> None:
        decide(reply) if build("tenant-17", 1, None, False) else None

    runs = {
        "build": [timed(lambda: build("tenant-17", 1, None, False), n) for _ in range(5)],
        "parse": [timed(lambda: decide(reply), n) for _ in range(5)],
        "build + parse": [timed(both, n) for _ in range(5)],
        "memory acquire_at": [],
    }
    memory = Limiter.memory(
        Policy("rl", "bench", Algorithm.SLIDING_COUNTER, limit=10**9, window_ms=60_000)
    )
    runs["memory acquire_at"] = [
        timed(lambda: memory.acquire_at("t", 1_764_000_000_000), n) for _ in range(5)
    ]
    for name, t in runs.items():
        print(f"core from Python: {name:18} {min(t) / n * 1e6:6.2f} us/op (best of 5 x {n:,})")


def main() -> None:
    print(
        f"slidelimit {slidelimit.__version__}, redis-py {redis.__version__}, "
        f"limits {limits.__version__}, "
        f"Python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cores; "
        f"{ROUNDS} rounds x {CALLS:,} calls, loopback redis-server"
    )
    sync_vs_raw()
    asyncio.run(async_vs_raw())
    vs_limits()
    core_cost()


if __name__ == "__main__":
    sys.exit(main())
