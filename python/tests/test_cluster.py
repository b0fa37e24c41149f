"""The binding on a real six-node Redis Cluster (scripts/with-cluster.sh)."""

from __future__ import annotations

import asyncio

import redis
import redis.cluster
from test_redis import CALLERS, paused_calls

import slidelimit
from slidelimit import Algorithm, AsyncLimiter, Limiter, Policy


def flush_scripts(rc: redis.cluster.RedisCluster) -> None:
    for node in rc.get_primaries():
        rc.execute_command("SCRIPT FLUSH", target_nodes=node)


def eval_calls(rc: redis.cluster.RedisCluster) -> int:
    total = 0
    for node in rc.get_primaries():
        stats = rc.info("commandstats", target_nodes=node).get("cmdstat_eval")
        total += int(stats["calls"]) if stats else 0
    return total


def test_tenants_spread_over_slots_share_nothing(
    rc: redis.cluster.RedisCluster, resource: str
) -> None:
    limiter = Limiter(rc, Policy("rl", resource, Algorithm.SLIDING_LOG, limit=2, window_ms=60_000))
    tenants = [f"t-{i}" for i in range(24)]
    slots = {slidelimit.slot(limiter.key(t)) for t in tenants}
    owners = {rc.get_node_from_key(limiter.key(t)).name for t in tenants}
    assert len(slots) > 10 and len(owners) == 3
    for t in tenants:
        assert [limiter.acquire(t).allowed for _ in range(3)] == [True, True, False]
    for t in tenants:
        key = limiter.key(t)
        # The key lives on the node that owns its slot, with a TTL.
        assert rc.pttl(key) > 0
        limiter.reset(t)
        assert not rc.exists(key)


def test_noscript_on_every_node_is_one_eval_each(
    rc: redis.cluster.RedisCluster, resource: str
) -> None:
    limiter = Limiter(
        rc, Policy("rl", resource, Algorithm.SLIDING_COUNTER, limit=5, window_ms=60_000)
    )
    tenants = [f"n-{i}" for i in range(12)]
    for t in tenants:
        limiter.acquire(t)
    owners = {rc.get_node_from_key(limiter.key(t)).name for t in tenants}
    flush_scripts(rc)
    before = eval_calls(rc)
    for t in tenants:
        d = limiter.acquire(t)
        assert (d.allowed, d.remaining) == (True, 3)
    # One EVAL on each master that lost its script; the rest went by SHA.
    assert eval_calls(rc) - before == len(owners) == 3
    for t in tenants:
        limiter.reset(t)


def test_from_cluster_builds_its_client(cluster_urls: list[str], resource: str) -> None:
    policy = Policy("rl", resource, Algorithm.SLIDING_LOG, limit=1, window_ms=60_000)
    with Limiter.from_cluster(cluster_urls, policy, timeout_ms=2_000) as limiter:
        assert limiter.acquire("t").allowed
        assert not limiter.acquire("t").allowed
        limiter.reset("t")


async def test_async_cluster(cluster_urls: list[str], resource: str) -> None:
    policy = Policy("rl", resource, Algorithm.SLIDING_LOG, limit=3, window_ms=60_000)
    async with AsyncLimiter.from_cluster(cluster_urls, policy, timeout_ms=2_000) as limiter:
        for t in ("a", "b", "c", "d"):
            got = [await limiter.acquire(t) for _ in range(4)]
            assert [d.allowed for d in got] == [True, True, True, False]
            await limiter.reset(t)


def masters(cluster_urls: list[str]) -> list[redis.Redis]:
    return [redis.Redis.from_url(url, socket_timeout=5) for url in cluster_urls]


def test_more_callers_than_a_node_pool_holds_wait_for_a_connection(
    cluster_urls: list[str], resource: str
) -> None:
    policy = Policy("rl", resource, Algorithm.SLIDING_LOG, limit=1000, window_ms=60_000)
    with Limiter.from_cluster(cluster_urls, policy, timeout_ms=5_000) as limiter:
        limiter.acquire("t")  # the slot map first, so that the pause holds calls only
        results = paused_calls(masters(cluster_urls), [lambda: limiter.acquire("t")] * CALLERS)
        limiter.reset("t")
    decided = [d for d in results if isinstance(d, slidelimit.Decision)]
    assert len(decided) == CALLERS, [e for e in results if e not in decided][:3]
    assert sorted(d.remaining for d in decided) == list(range(999 - CALLERS, 999))


async def test_more_async_callers_than_a_node_pool_holds(
    cluster_urls: list[str], resource: str
) -> None:
    policy = Policy("rl", resource, Algorithm.SLIDING_LOG, limit=1000, window_ms=60_000)
    async with AsyncLimiter.from_cluster(cluster_urls, policy, timeout_ms=5_000) as limiter:
        await limiter.acquire("t")
        for admin in masters(cluster_urls):
            admin.execute_command("CLIENT", "PAUSE", 500, "ALL")
        results = await asyncio.gather(
            *(limiter.acquire("t") for _ in range(CALLERS)), return_exceptions=True
        )
        await limiter.reset("t")
    decided = [d for d in results if isinstance(d, slidelimit.Decision)]
    assert len(decided) == CALLERS, [e for e in results if e not in decided][:3]
    assert sorted(d.remaining for d in decided) == list(range(999 - CALLERS, 999))
