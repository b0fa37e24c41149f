"""Policies of several limits: the API (validation by core, named fields)
and the behaviour on a real Redis (all or none, denied_by, reset)."""

from __future__ import annotations

import pickle

import pytest
import redis

from slidelimit import (
    MAX_LIMITS,
    Algorithm,
    AsyncLimiter,
    Decision,
    InvalidArgument,
    Limit,
    Limiter,
    Policy,
    WrongType,
    slot,
)

LOG = Algorithm.SLIDING_LOG
COUNTER = Algorithm.SLIDING_COUNTER
BUCKETED = Algorithm.BUCKETED_WINDOW
# Aligned to the second, so that the bucketed window's 1 s buckets start here.
T0 = 1_700_000_000_000


def two(resource: str = "geo") -> Policy:
    """2 per second (exact log) and 5 per 10 s (10 buckets of 1 s)."""
    return Policy("rl", resource, limits=[Limit(LOG, 2, 1000), Limit(BUCKETED, 5, 10_000, 10)])


def field_of(**kwargs: object) -> str | None:
    with pytest.raises(InvalidArgument) as e:
        Policy("rl", "geo", **kwargs)  # type: ignore[arg-type]
    assert e.value.message.startswith(f"{e.value.field}: "), e.value.message
    return e.value.field


def test_a_policy_of_several_limits() -> None:
    p = two()
    assert p.limits == (Limit(LOG, 2, 1000), Limit(BUCKETED, 5, 10_000, 10))
    # The getters report the first limit; key is its key, keys every one's.
    assert (p.algorithm, p.limit, p.window_ms, p.buckets) == (LOG, 2, 1000, None)
    assert p.keys("t") == ["rl:{geo:t}:log:1000", "rl:{geo:t}:bucketed:10000:10"]
    assert p.key("t") == p.keys("t")[0]
    assert len({slot(k) for k in p.keys("t")}) == 1
    # A bucketed window's default bucket count is filled in.
    q = Policy("rl", "geo", limits=[Limit(LOG, 2, 1000), Limit("bucketed_window", 600, 60_000)])
    assert q.limits[1] == Limit(BUCKETED, 600, 60_000, 60)
    assert q.limits[1].algorithm is BUCKETED
    assert p == two() and hash(p) == hash(two()) and p != q
    assert pickle.loads(pickle.dumps(p)) == p
    assert repr(p) == (
        'Policy("rl", "geo", limits=[Limit(Algorithm.SLIDING_LOG, limit=2, window_ms=1000), '
        "Limit(Algorithm.BUCKETED_WINDOW, limit=5, window_ms=10000, buckets=10)])"
    )
    # One limit is exactly the single policy (key, script, field names).
    one = Policy("rl", "geo", limits=[Limit(COUNTER, 5, 1000)])
    assert one == Policy("rl", "geo", COUNTER, limit=5, window_ms=1000)
    assert one.limits == (Limit(COUNTER, 5, 1000),)
    assert field_of(limits=[Limit(COUNTER, 5, 0)]) == "window_ms"


def test_limit_is_a_frozen_value() -> None:
    a = Limit("sliding_log", 2, 1000)
    assert a == Limit(LOG, 2, 1000) and hash(a) == hash(Limit(LOG, 2, 1000))
    assert a.algorithm is LOG and a.buckets is None
    with pytest.raises(AttributeError):
        a.limit = 3  # type: ignore[misc]
    # An unknown name is kept as given, for Policy to refuse.
    assert Limit("fixed", 1, 1).algorithm == "fixed"


def test_validation_names_the_limit_and_field() -> None:
    log = Limit(LOG, 2, 1000)
    assert field_of(limits=[log, Limit(COUNTER, 5, 0)]) == "limits[1].window_ms"
    assert field_of(limits=[log, Limit(COUNTER, 0, 1000)]) == "limits[1].limit"
    assert field_of(limits=[Limit(LOG, 20_000, 1000), log]) == "limits[0].limit"
    assert field_of(limits=[log, Limit(BUCKETED, 5, 1000, 7)]) == "limits[1].buckets"
    assert field_of(limits=[log, Limit(COUNTER, 5, 1000, 10)]) == "limits[1].buckets"
    # Conversions name the same fields.
    assert field_of(limits=[log, Limit("fixed", 5, 1000)]) == "limits[1].algorithm"
    assert field_of(limits=[log, Limit(COUNTER, 5.0, 1000)]) == "limits[1].limit"  # type: ignore[arg-type]
    assert field_of(limits=[log, Limit(COUNTER, 5, -1)]) == "limits[1].window_ms"
    # The list itself.
    assert field_of(limits=[]) == "limits"
    assert field_of(limits=[Limit(COUNTER, 5, 1000 * (i + 1)) for i in range(MAX_LIMITS + 1)]) == (
        "limits"
    )
    # Too many is the list's fault, whatever its entries hold: core refuses
    # the count before it reads a limit, and so does the conversion.
    eight_good = [Limit(COUNTER, 5, 1000 * (i + 1)) for i in range(MAX_LIMITS)]
    for ninth in (Limit(COUNTER, 5.5, 1000), Limit(COUNTER, 5, -1), Limit("fixed", 5, 1000), "x"):
        assert field_of(limits=[*eight_good, ninth]) == "limits", ninth
    assert field_of(limits=[log, Limit(LOG, 5, 1000)]) == "limits"  # one key twice
    assert field_of(limits=[log, {"algorithm": "sliding_log"}]) == "limits"
    assert field_of(limits="sliding_log") == "limits"
    # Either limits or the single fields, never both: the error names the field.
    assert field_of(algorithm=LOG, limits=[log]) == "algorithm"
    assert field_of(limit=2, limits=[log]) == "limit"
    assert field_of(window_ms=1000, limits=[log]) == "window_ms"
    assert field_of(buckets=10, limits=[log]) == "buckets"
    assert field_of(algorithm=LOG, limit=2) == "window_ms"
    # Eight limits is the most, and allowed.
    eight = [Limit(COUNTER, 5, 1000 * (i + 1)) for i in range(MAX_LIMITS)]
    assert len(Policy("rl", "geo", limits=eight).keys("t")) == MAX_LIMITS
    # The cost must fit every limit.
    limiter = Limiter.memory(two(), clock=lambda: T0)
    with pytest.raises(InvalidArgument) as e:
        limiter.acquire("t", 3)
    assert e.value.field == "cost" and "limits[0]" in e.value.message


def test_decision_carries_denied_by() -> None:
    d = Decision(False, 0, 500, 900, T0, denied_by=1)
    assert d.denied_by == 1 and "denied_by=1" in repr(d)
    assert pickle.loads(pickle.dumps(d)) == d
    assert d != Decision(False, 0, 500, 900, T0)
    assert Decision(True, 1, 0, 900, T0).denied_by is None
    with pytest.raises(Exception):  # noqa: B017 - an allowed decision denied by nothing
        Decision(True, 1, 0, 900, T0, denied_by=0)
    with pytest.raises(Exception):  # noqa: B017 - past the most limits
        Decision(False, 0, 5, 900, T0, denied_by=MAX_LIMITS)


def snapshot(r: redis.Redis, p: Policy) -> tuple[object, object]:
    log, bucketed = p.keys("t")
    return r.lrange(log, 0, -1), r.dump(bucketed)


def bucketed_held(r: redis.Redis, p: Policy, now: int) -> int:
    """Permits the bucketed limit holds at now: the limit alone is the plain
    policy on the same key, and a peek of cost 1 that allows leaves
    remaining = limit - held - 1."""
    alone = Policy(p.namespace, p.resource, limits=[p.limits[1]])
    assert alone.key("t") == p.keys("t")[1]
    d = Limiter(r, alone, deny_cache=False).peek("t", 1, now)
    assert d.allowed
    return p.limits[1].limit - 1 - d.remaining


def test_all_or_none_and_denied_by_on_redis(r: redis.Redis, resource: str) -> None:
    p = two(resource)
    limiter = Limiter(r, p, deny_cache=False)
    memory = Limiter.memory(p, clock=lambda: T0)
    log, bucketed = p.keys("t")

    def step(at: int, cost: int) -> Decision:
        d = limiter.acquire_at("t", T0 + at, cost)
        # Core's engine is the oracle for every field (retry included).
        assert d == memory.acquire_at("t", T0 + at, cost), at
        return d

    d = step(0, 2)
    assert (d.allowed, d.remaining, d.denied_by) == (True, 0, None)
    assert r.llen(log) == 2 and bucketed_held(r, p, T0) == 2
    # The log denies (2 per second), the bucketed window would allow: nothing
    # is recorded anywhere, and the log's retry is the decision's.
    before = snapshot(r, p)
    d = step(500, 1)
    assert (d.allowed, d.denied_by, d.retry_after_ms) == (False, 0, 500)
    assert snapshot(r, p) == before
    # A second later the log has room again: recorded in both.
    d = step(1000, 2)
    assert d.allowed and r.llen(log) == 2 and bucketed_held(r, p, T0 + 1000) == 4
    # Now the log allows 2 but the bucketed window (4 of 5) does not: still
    # nothing recorded, not even in the log that allowed.
    before = snapshot(r, p)
    d = step(2000, 2)
    assert (d.allowed, d.denied_by) == (False, 1)
    assert snapshot(r, p) == before
    d = step(2000, 1)
    assert d.allowed and d.remaining == 0
    # Both deny: the longer retry (the 10 s window's) and its limit.
    d = step(2100, 2)
    assert (d.allowed, d.denied_by) == (False, 1) and d.retry_after_ms > 900
    # A peek answers the same, records nothing.
    before = snapshot(r, p)
    assert limiter.peek("t", 2, T0 + 2100) == d
    assert snapshot(r, p) == before
    # reset deletes every limit's key.
    limiter.reset("t")
    assert r.exists(log, bucketed) == 0


def test_a_foreign_key_is_named_with_its_limit(r: redis.Redis, resource: str) -> None:
    policy = two(resource)
    keys = policy.keys("t")
    limiter = Limiter(r, policy)
    assert limiter.acquire_at("t", T0, 1).allowed
    r.set(keys[1], "not slidelimit's", px=60_000)
    with pytest.raises(WrongType) as info:
        limiter.acquire_at("t", T0 + 1, 1)
    # The second limit's key, never the first (sound) one's.
    named = f"limits[1]: key {keys[1]} holds a value the bucketed_window algorithm"
    assert info.value.message.startswith(named), info.value.message
    assert r.llen(keys[0]) == 1
    r.delete(*keys)


def test_server_time_and_reset_delete_every_key(r: redis.Redis, resource: str) -> None:
    p = Policy("rl", resource, limits=[Limit(LOG, 2, 60_000), Limit(COUNTER, 3, 60_000)])
    limiter = Limiter(r, p, deny_cache=False)
    got = [limiter.acquire("t") for _ in range(3)]
    assert [d.allowed for d in got] == [True, True, False]
    assert [d.denied_by for d in got] == [None, None, 0]
    assert got[2].retry_after_ms > 0
    assert r.exists(*p.keys("t")) == 2
    limiter.reset("t")
    assert r.exists(*p.keys("t")) == 0
    assert limiter.acquire("t", 2).allowed


async def test_async_multi_limit(redis_url: str, r: redis.Redis, resource: str) -> None:
    p = two(resource)
    memory = Limiter.memory(p, clock=lambda: T0)
    async with AsyncLimiter.from_url(redis_url, p, deny_cache=False) as limiter:
        for at, cost in [(0, 2), (500, 1), (1000, 2), (2000, 2), (2000, 1), (2100, 2)]:
            d = await limiter.acquire_at("t", T0 + at, cost)
            assert d == memory.acquire_at("t", T0 + at, cost), at
        assert d.denied_by == 1
        assert r.exists(*p.keys("t")) == 2
        await limiter.reset("t")
        assert r.exists(*p.keys("t")) == 0
