"""The binding on a real six-node Redis Cluster (scripts/with-cluster.sh)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time

import pytest
import redis
import redis.asyncio
import redis.cluster
from test_redis import CALLERS, paused_calls

import slidelimit
from slidelimit import POOL_MAX_CONNECTIONS, Algorithm, AsyncLimiter, Limiter, Policy


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


def connections(admins: list[redis.Redis]) -> list[int]:
    """The connections each node has open (the limiter keeps its own open
    until it is closed)."""
    return [len(admin.client_list()) for admin in admins]


def test_more_callers_than_a_node_pool_holds_wait_for_a_connection(
    cluster_urls: list[str], resource: str
) -> None:
    policy = Policy("rl", resource, Algorithm.SLIDING_LOG, limit=1000, window_ms=60_000)
    admins = masters(cluster_urls)
    with Limiter.from_cluster(cluster_urls, policy, timeout_ms=5_000) as limiter:
        limiter.acquire("t")  # the slot map first, so that the pause holds calls only
        before = connections(admins)
        results = paused_calls(admins, [lambda: limiter.acquire("t")] * CALLERS)
        opened = [now - then for now, then in zip(connections(admins), before)]
        limiter.reset("t")
    decided = [d for d in results if isinstance(d, slidelimit.Decision)]
    assert len(decided) == CALLERS, [e for e in results if e not in decided][:3]
    assert sorted(d.remaining for d in decided) == list(range(999 - CALLERS, 999))
    # The calls past the first 100 waited for one of theirs: no node opened
    # a connection per caller.
    assert max(opened) <= POOL_MAX_CONNECTIONS < CALLERS, opened


async def test_more_async_callers_than_a_node_pool_holds(
    cluster_urls: list[str], resource: str
) -> None:
    policy = Policy("rl", resource, Algorithm.SLIDING_LOG, limit=1000, window_ms=60_000)
    admins = masters(cluster_urls)
    async with AsyncLimiter.from_cluster(cluster_urls, policy, timeout_ms=5_000) as limiter:
        await limiter.acquire("t")
        before = connections(admins)
        for admin in admins:
            admin.execute_command("CLIENT", "PAUSE", 500, "ALL")
        results = await asyncio.gather(
            *(limiter.acquire("t") for _ in range(CALLERS)), return_exceptions=True
        )
        opened = [now - then for now, then in zip(connections(admins), before)]
        await limiter.reset("t")
    decided = [d for d in results if isinstance(d, slidelimit.Decision)]
    assert len(decided) == CALLERS, [e for e in results if e not in decided][:3]
    assert sorted(d.remaining for d in decided) == list(range(999 - CALLERS, 999))
    assert max(opened) <= POOL_MAX_CONNECTIONS < CALLERS, opened


def test_a_call_past_the_calls_in_flight_waits_up_to_the_timeout(
    cluster_urls: list[str], resource: str
) -> None:
    policy = Policy("rl", resource, Algorithm.SLIDING_LOG, limit=5, window_ms=60_000)
    with Limiter.from_cluster(cluster_urls, policy, timeout_ms=200) as limiter:
        slots = limiter._client._slots  # the gate: every call in flight holds one
        for _ in range(POOL_MAX_CONNECTIONS):
            assert slots.acquire(timeout=0)
        with pytest.raises(slidelimit.Unavailable, match="no free connection within 200 ms"):
            limiter.acquire("t")
        slots.release()
        assert limiter.acquire("t").remaining == 4  # the refused call never ran
        limiter.reset("t")


def test_a_forked_child_has_every_slot_of_the_gate(cluster_urls: list[str], resource: str) -> None:
    # Calls in flight when a process forks hold slots of the gate that would
    # never come back in the child (Celery's prefork pool forks such a process).
    policy = Policy("rl", resource, Algorithm.SLIDING_LOG, limit=5, window_ms=60_000)
    with Limiter.from_cluster(cluster_urls, policy, timeout_ms=200) as limiter:
        assert limiter.acquire("t").allowed
        slots = limiter._client._slots
        for _ in range(POOL_MAX_CONNECTIONS):
            assert slots.acquire(timeout=0)
        pid = os.fork()
        if pid == 0:
            status = 1
            try:
                signal.alarm(10)
                status = 0 if limiter.acquire("t").remaining == 3 else 3
            except BaseException as e:
                sys.stderr.write(f"child: {e!r}\n")
            finally:
                os._exit(status)
        _, status = os.waitpid(pid, 0)
        for _ in range(POOL_MAX_CONNECTIONS):
            slots.release()
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
        # The child's call counted in the one budget.
        assert limiter.peek("t").remaining == 2
        limiter.reset("t")


async def test_an_async_call_past_the_calls_in_flight_waits_up_to_the_timeout(
    cluster_urls: list[str], resource: str
) -> None:
    policy = Policy("rl", resource, Algorithm.SLIDING_LOG, limit=5, window_ms=60_000)
    async with AsyncLimiter.from_cluster(cluster_urls, policy, timeout_ms=200) as limiter:
        assert (await limiter.acquire("t")).remaining == 4
        slots = limiter._client._slots
        for _ in range(POOL_MAX_CONNECTIONS):
            await slots.acquire()
        with pytest.raises(slidelimit.Unavailable, match="no free connection within 200 ms"):
            await limiter.acquire("t")
        slots.release()
        assert (await limiter.acquire("t")).remaining == 3
        await limiter.reset("t")


def own_async_cluster(urls: list[str], policy: Policy) -> AsyncLimiter:
    client = redis.asyncio.RedisCluster.from_url(urls[0], socket_timeout=5)
    return AsyncLimiter(client, policy, deny_cache=False)


@pytest.mark.parametrize("made_by", ["from_cluster", "the user"])
async def test_many_tasks_making_the_first_calls_together(
    cluster_urls: list[str], resource: str, made_by: str
) -> None:
    # redis-py 8.1's asyncio Cluster client, when 32 tasks make its first
    # calls at once, drops connections under other tasks' calls from then on.
    policy = Policy("rl", resource, Algorithm.SLIDING_COUNTER, limit=10_000, window_ms=60_000)
    tasks, calls = 32, 50
    admins = masters(cluster_urls)
    before = [int(admin.info("stats")["total_connections_received"]) for admin in admins]
    if made_by == "from_cluster":
        made = AsyncLimiter.from_cluster(cluster_urls, policy, deny_cache=False)
    else:
        made = own_async_cluster(cluster_urls, policy)
    async with made as limiter:

        async def caller(i: int) -> list[object]:
            results: list[object] = []
            for n in range(calls):
                try:
                    results.append(await limiter.acquire(f"t{(i + n) % 8}"))
                except slidelimit.Unavailable as e:
                    results.append(e)
            return results

        results = [r for rs in await asyncio.gather(*map(caller, range(tasks))) for r in rs]
        opened = [
            int(admin.info("stats")["total_connections_received"]) - then
            for admin, then in zip(admins, before)
        ]
        for t in range(8):
            await limiter.reset(f"t{t}")
    errors = [r for r in results if not isinstance(r, slidelimit.Decision)]
    assert errors == [], (len(errors), errors[:2])
    # About a connection per task (a storm opens thousands).
    assert max(opened) <= 2 * tasks, opened


class _Flaky:
    """Stands for a redis.asyncio.RedisCluster whose calls fail unwritten."""

    def __init__(self, failures: list[BaseException]) -> None:
        self.failures = failures
        self.calls = 0

    async def initialize(self) -> None:
        pass

    async def evalsha(self, *args: object) -> str:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return "reply"

    def get_connection_kwargs(self) -> dict[str, float]:
        return {"socket_timeout": 0.2}


UNWRITTEN = "'NoneType' object has no attribute 'writelines'"


async def test_a_call_failed_before_it_was_written_goes_again() -> None:
    from slidelimit._limiter import _AsyncCluster

    flaky = _Flaky([AttributeError(UNWRITTEN)] * 3)
    assert await _AsyncCluster(flaky, 1000).evalsha("sha", 1, "k") == "reply"
    assert flaky.calls == 4
    # Any other AttributeError may come after the write: never sent again.
    flaky = _Flaky([AttributeError("'NoneType' object has no attribute 'readline'")])
    with pytest.raises(AttributeError, match="readline"):
        await _AsyncCluster(flaky, None).evalsha("sha", 1, "k")
    assert flaky.calls == 1
    # Within the client's socket timeout (0.2 s), then the last error.
    flaky = _Flaky([AttributeError(UNWRITTEN)] * 1000)
    with pytest.raises(AttributeError, match="writelines"):
        await _AsyncCluster(flaky, 1000).evalsha("sha", 1, "k")
    assert 10 < flaky.calls < 60


def replica_of_owner(admin: redis.Redis, key: str) -> redis.Redis:
    """A client on the replica of the master that owns `key`'s slot."""
    slot = slidelimit.slot(key)
    nodes = [line.split() for line in admin.execute_command("CLUSTER", "NODES").splitlines()]
    for node in nodes:
        if "master" not in node[2]:
            continue
        for owned in node[8:]:
            first, _, last = owned.partition("-")
            if int(first) <= slot <= int(last or first):
                replica = next(n for n in nodes if n[3] == node[0])
                host, port = replica[1].split("@")[0].rsplit(":", 1)
                return redis.Redis(host=host, port=int(port), socket_timeout=5)
    raise AssertionError(f"no master owns slot {slot}")


async def test_async_callers_through_a_failover(cluster_urls: list[str], resource: str) -> None:
    policy = Policy("rl", resource, Algorithm.SLIDING_COUNTER, limit=10**6, window_ms=60_000)
    tasks = 32
    async with AsyncLimiter.from_cluster(cluster_urls, policy, deny_cache=False) as limiter:
        await limiter.acquire("t")
        admin = redis.Redis.from_url(cluster_urls[0], socket_timeout=5, decode_responses=True)
        replica = replica_of_owner(admin, limiter.key("t"))
        end = asyncio.get_running_loop().time() + 3
        decided, errors = 0, []

        async def caller() -> None:
            nonlocal decided
            while asyncio.get_running_loop().time() < end:
                try:
                    await limiter.acquire("t")
                    decided += 1
                except slidelimit.Unavailable as e:
                    errors.append(e)

        async def failover() -> None:
            await asyncio.sleep(1)
            await asyncio.to_thread(replica.execute_command, "CLUSTER", "FAILOVER")

        await asyncio.gather(failover(), *(caller() for _ in range(tasks)))
        await limiter.reset("t")
    # redis-py closes connections other tasks are about to write to: those
    # calls go again. What is left is a write cut short (no resend: the
    # script may have run), a few per failover; a single resend left 24 to 36.
    assert decided > 1000
    assert len(errors) <= tasks // 4, (len(errors), errors[:3])


def test_a_reply_left_unread_is_never_another_calls_decision(
    cluster_urls: list[str], resource: str
) -> None:
    # As on one server (test_redis.py): a call cut between its send and its
    # read leaves its reply on a node's connection; the next call there
    # reads its own.
    policy = Policy("rl", resource, Algorithm.SLIDING_LOG, limit=100, window_ms=60_000)
    with Limiter.from_cluster(cluster_urls, policy) as limiter:
        assert limiter.acquire("a", 7).remaining == 93
        client = limiter._client._client
        pool = client.get_node_from_key(limiter.key("a")).redis_connection.connection_pool
        cut = pool.get_connection()
        cut.send_command("EVALSHA", *limiter._calls.acquire_call("a", 7))
        pool.release(cut)
        time.sleep(0.05)  # its reply has arrived, unread
        assert limiter.acquire("a").remaining == 85  # the cut call's reply said 86


async def test_a_refused_password_is_permission_denied_not_an_outage(
    cluster_urls: list[str],
) -> None:
    """redis-py's Cluster client wraps what its seeds answered in its own
    exception; a refused password is still the server's refusal, so a
    fail-open caller does not run unlimited on a typo."""
    bad = ["redis://nosuchuser:wrong@" + url.split("://", 1)[1] for url in cluster_urls]
    policy = Policy("rl", "auth", Algorithm.SLIDING_LOG, limit=1, window_ms=1_000)
    with pytest.raises(slidelimit.PermissionDenied, match="WRONGPASS"):
        Limiter.from_cluster(bad, policy, timeout_ms=2_000)
    limiter = AsyncLimiter.from_cluster(bad, policy, timeout_ms=2_000)
    try:
        with pytest.raises(slidelimit.PermissionDenied, match="WRONGPASS"):
            await limiter.acquire("t")
    finally:
        await limiter.aclose()
