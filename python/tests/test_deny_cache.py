"""The local deny cache on a real Redis: which acquires it answers without a
Redis call (counted with INFO commandstats), and which it never touches."""

from __future__ import annotations

import threading
import time
from typing import Any

import prometheus_client
import pytest
import redis

import slidelimit
from slidelimit import (
    DEFAULT_DENY_CACHE_CAPACITY,
    Algorithm,
    AsyncLimiter,
    InvalidArgument,
    Limit,
    Limiter,
    Policy,
)
from slidelimit.metrics import PrometheusMetrics

LOG = Algorithm.SLIDING_LOG


def script_calls(r: redis.Redis) -> int:
    """Script calls the server has run (EVALSHA, and EVAL after a NOSCRIPT;
    `loaded` keeps NOSCRIPT out of the counts)."""
    stats = r.info("commandstats")
    return sum(int(stats.get(f"cmdstat_{c}", {}).get("calls", 0)) for c in ("evalsha", "eval"))


def loaded(r: redis.Redis, policy: Policy) -> Policy:
    """`policy`, its acquire and peek scripts loaded on `r`."""
    for peek in (False, True):
        r.script_load(policy._script_text(peek))
    return policy


def log(resource: str, limit: int = 3, window_ms: int = 60_000) -> Policy:
    return Policy("rl", resource, LOG, limit=limit, window_ms=window_ms)


def test_a_denial_answers_the_same_or_higher_cost_without_redis(
    r: redis.Redis, resource: str
) -> None:
    limiter = Limiter(r, loaded(r, log(resource)))  # on by default
    assert limiter.acquire("t", 2).allowed
    calls = script_calls(r)
    denied = limiter.acquire("t", 2)
    assert not denied.allowed and script_calls(r) == calls + 1
    time.sleep(0.05)
    # Same cost and higher, within the retry: local, no Redis call, the
    # retry shortened by the time that passed.
    again = limiter.acquire("t", 2)
    higher = limiter.acquire("t", 3)
    assert script_calls(r) == calls + 1
    assert not again.allowed and not higher.allowed
    assert 0 < again.retry_after_ms <= denied.retry_after_ms - 50
    assert again.now_ms >= denied.now_ms + 50
    assert again.remaining == denied.remaining
    # Nothing of it reached Redis: one entry per admitted permit only.
    assert r.llen(limiter.key("t")) == 2
    # A lower cost asks Redis (1 permit is left), and that admission drops
    # the entry: the next cost-2 acquire asks Redis again.
    assert limiter.acquire("t", 1).allowed and script_calls(r) == calls + 2
    assert not limiter.acquire("t", 2).allowed and script_calls(r) == calls + 3
    limiter.reset("t")


def test_reset_clears_it_and_caller_time_never_uses_it(r: redis.Redis, resource: str) -> None:
    limiter = Limiter(r, loaded(r, log(resource, limit=1)))
    assert limiter.acquire("t").allowed
    assert not limiter.acquire("t").allowed
    calls = script_calls(r)
    assert not limiter.acquire("t").allowed and script_calls(r) == calls
    # A peek and a caller-time acquire always ask Redis.
    now = time.time_ns() // 1_000_000
    assert not limiter.peek("t").allowed and script_calls(r) == calls + 1
    assert not limiter.acquire_at("t", now).allowed and script_calls(r) == calls + 2
    # This limiter's reset forgets the denial: the next acquire asks Redis.
    limiter.reset("t")
    assert limiter.acquire("t").allowed and script_calls(r) == calls + 3
    # A caller-time denial is not cached: the next acquire asks Redis.
    limiter.reset("t")
    now = time.time_ns() // 1_000_000
    assert limiter.acquire_at("t", now).allowed
    assert not limiter.acquire_at("t", now).allowed
    calls = script_calls(r)
    assert not limiter.acquire("t").allowed and script_calls(r) == calls + 1
    limiter.reset("t")


async def test_a_reset_through_another_limiter_clears_it_too(
    redis_url: str, r: redis.Redis, resource: str
) -> None:
    policy = loaded(r, log(resource, limit=1))
    cached = Limiter(r, policy)
    assert cached.acquire("elsewhere").allowed
    assert not cached.acquire("elsewhere").allowed
    calls = script_calls(r)
    assert not cached.acquire("elsewhere").allowed and script_calls(r) == calls
    # Through another limiter of the process, an asyncio one whose own cache
    # is off at that.
    async with AsyncLimiter.from_url(redis_url, policy, deny_cache=False) as resetter:
        await resetter.reset("elsewhere")
    assert cached.acquire("elsewhere").allowed and script_calls(r) == calls + 1
    # And a sync one with the cache off.
    assert not cached.acquire("elsewhere").allowed
    assert not cached.acquire("elsewhere").allowed and script_calls(r) == calls + 2
    Limiter(r, policy, deny_cache=False).reset("elsewhere")
    assert cached.acquire("elsewhere").allowed and script_calls(r) == calls + 3
    cached.reset("elsewhere")


class _HeldReplies(redis.Connection):
    """A real connection whose replies are read only once `gate` is set,
    while `held` is (the command has gone out; Redis answers meanwhile)."""

    held = threading.Event()
    gate = threading.Event()

    def read_response(self, *args: Any, **kwargs: Any) -> Any:
        if self.held.is_set():
            self.gate.wait(10)
        return super().read_response(*args, **kwargs)


def test_a_denial_a_reset_overtook_is_not_cached(
    redis_url: str, r: redis.Redis, resource: str
) -> None:
    """A denial Redis gave before a reset's DEL, read only after the reset
    has returned, is not cached: the tenant starts afresh in Redis."""
    policy = loaded(r, log(resource, limit=1))
    pool = redis.ConnectionPool.from_url(redis_url, connection_class=_HeldReplies)
    slow = redis.Redis(connection_pool=pool)
    cached = Limiter(slow, policy)
    _HeldReplies.gate.clear()
    try:
        assert cached.acquire("raced").allowed
        calls = script_calls(r)
        _HeldReplies.held.set()
        late: list[slidelimit.Decision] = []
        sender = threading.Thread(target=lambda: late.append(cached.acquire("raced")))
        sender.start()
        deadline = time.monotonic() + 10
        while script_calls(r) == calls:  # Redis has run it (and denied)
            assert time.monotonic() < deadline, "the acquire never reached Redis"
            time.sleep(0.005)
        Limiter(r, policy, deny_cache=False).reset("raced")
        _HeldReplies.gate.set()
        sender.join(10)
        assert len(late) == 1 and not late[0].allowed, "Redis ran it before the DEL"
        _HeldReplies.held.clear()
        assert cached.acquire("raced").allowed, "the stale denial was cached"
        assert script_calls(r) == calls + 2
    finally:
        _HeldReplies.held.clear()
        _HeldReplies.gate.set()
        cached.reset("raced")
        pool.disconnect()


def test_off_asks_redis_every_time(r: redis.Redis, resource: str) -> None:
    limiter = Limiter(r, loaded(r, log(resource, limit=1)), deny_cache=False)
    assert limiter.acquire("t").allowed
    calls = script_calls(r)
    for _ in range(3):
        assert not limiter.acquire("t").allowed
    assert script_calls(r) == calls + 3
    # with_policy keeps the setting unless told otherwise.
    other = limiter.with_policy(log(resource, limit=1, window_ms=30_000))
    assert other.acquire("t").allowed
    calls = script_calls(r)
    assert not other.acquire("t").allowed and not other.acquire("t").allowed
    assert script_calls(r) == calls + 2
    on = limiter.with_policy(log(resource, limit=1, window_ms=20_000), deny_cache=True)
    assert on.acquire("t").allowed
    calls = script_calls(r)
    assert not on.acquire("t").allowed and not on.acquire("t").allowed
    assert script_calls(r) == calls + 1
    for each in (limiter, other, on):
        each.reset("t")


def test_the_entry_ends_with_the_retry(r: redis.Redis, resource: str) -> None:
    limiter = Limiter(r, loaded(r, log(resource, limit=1, window_ms=200)), deny_cache=5)
    assert limiter.acquire("t").allowed
    denied = limiter.acquire("t")
    assert not denied.allowed
    time.sleep((denied.retry_after_ms + 20) / 1000)
    calls = script_calls(r)
    assert limiter.acquire("t").allowed and script_calls(r) == calls + 1
    limiter.reset("t")


def test_the_capacity_option_is_cores(r: redis.Redis, resource: str) -> None:
    assert DEFAULT_DENY_CACHE_CAPACITY == 10_000
    for bad in (0, -1, 1 << 40, "many"):
        with pytest.raises(InvalidArgument) as e:
            Limiter(r, log(resource), deny_cache=bad)  # type: ignore[arg-type]
        assert e.value.field == "deny_cache_capacity"
    # Capacity 1: a second tenant's denial pushes the first out.
    limiter = Limiter(r, loaded(r, log(resource, limit=1)), deny_cache=1)
    for tenant in ("a", "b"):
        assert limiter.acquire(tenant).allowed and not limiter.acquire(tenant).allowed
    calls = script_calls(r)
    assert not limiter.acquire("b").allowed and script_calls(r) == calls
    assert not limiter.acquire("a").allowed and script_calls(r) == calls + 1
    limiter.reset("a")
    limiter.reset("b")


def test_metrics_count_local_denials(r: redis.Redis, resource: str) -> None:
    registry = prometheus_client.CollectorRegistry()
    metrics = PrometheusMetrics(registry, tenant_label=True)
    limiter = Limiter(r, log(resource, limit=1), metrics=metrics)
    assert limiter.acquire("t").allowed
    for _ in range(3):  # one Redis denial, then two local ones
        assert not limiter.acquire("t").allowed
    labels = {"resource": resource, "tenant": "t"}
    assert registry.get_sample_value("ratelimit_allowed_total", labels) == 1
    assert registry.get_sample_value("ratelimit_denied_total", labels) == 3
    assert registry.get_sample_value("ratelimit_local_denied_total", labels) == 2
    count = registry.get_sample_value("ratelimit_wait_seconds_count", {"resource": resource})
    assert count == 3
    assert slidelimit.metrics.METRIC_LOCAL_DENIED_TOTAL == "ratelimit_local_denied_total"
    text = prometheus_client.generate_latest(registry).decode()
    assert (
        "# HELP ratelimit_local_denied_total Acquires denied in-process by the local deny "
        "cache, without a Redis call." in text
    )
    limiter.reset("t")


def test_a_multi_limit_denial_keeps_denied_by(r: redis.Redis, resource: str) -> None:
    p = Policy("rl", resource, limits=[Limit(LOG, 5, 60_000), Limit(LOG, 1, 30_000)])
    limiter = Limiter(r, loaded(r, p))
    assert limiter.acquire("t").allowed
    denied = limiter.acquire("t")
    calls = script_calls(r)
    local = limiter.acquire("t")
    assert script_calls(r) == calls
    assert (denied.denied_by, local.denied_by) == (1, 1)
    limiter.reset("t")
    assert r.exists(*p.keys("t")) == 0
    assert limiter.acquire("t").allowed and script_calls(r) == calls + 1
    limiter.reset("t")


def test_the_memory_engine_has_none() -> None:
    clock = [1_000_000]
    limiter = Limiter.memory(log("mem", limit=1), clock=lambda: clock[0])
    assert limiter.acquire("t").allowed and not limiter.acquire("t").allowed
    # Another limiter on the same engine resets the tenant: nothing cached here.
    limiter.with_policy(log("mem", limit=1), deny_cache=True).reset("t")
    assert limiter.acquire("t").allowed


async def test_async_deny_cache(redis_url: str, r: redis.Redis, resource: str) -> None:
    async with AsyncLimiter.from_url(redis_url, loaded(r, log(resource, limit=1))) as limiter:
        assert (await limiter.acquire("t")).allowed
        denied = await limiter.acquire("t")
        calls = script_calls(r)
        local = await limiter.acquire("t")
        assert not local.allowed and script_calls(r) == calls
        assert local.retry_after_ms <= denied.retry_after_ms
        now = time.time_ns() // 1_000_000
        assert not (await limiter.acquire_at("t", now)).allowed
        assert not (await limiter.peek("t")).allowed
        assert script_calls(r) == calls + 2
        await limiter.reset("t")
        assert (await limiter.acquire("t")).allowed and script_calls(r) == calls + 3
        await limiter.reset("t")
    async with AsyncLimiter.from_url(redis_url, log(resource, limit=1), deny_cache=False) as off:
        assert (await off.acquire("t")).allowed
        calls = script_calls(r)
        assert not (await off.acquire("t")).allowed and not (await off.acquire("t")).allowed
        assert script_calls(r) == calls + 2
        await off.reset("t")
