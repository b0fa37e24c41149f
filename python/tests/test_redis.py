"""The binding on a real Redis (scripts/with-redis.sh): sync and asyncio."""

from __future__ import annotations

import asyncio
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator

import prometheus_client
import pytest
import redis
import redis.asyncio
from test_api import BAD_CALLS

import slidelimit
from slidelimit import Algorithm, AsyncLimiter, InvalidArgument, Limiter, Policy
from slidelimit.metrics import PrometheusMetrics

ALGORITHMS = [Algorithm.SLIDING_LOG, Algorithm.SLIDING_COUNTER]


def calls_of(r: redis.Redis, command: str) -> int:
    stats = r.info("commandstats").get(f"cmdstat_{command}")
    return int(stats["calls"]) if stats else 0


def keys_of(r: redis.Redis, resource: str) -> list[bytes]:
    return list(r.scan_iter(match=f"*{resource}*"))


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_acquire_on_server_time(
    redis_url: str, r: redis.Redis, resource: str, algorithm: Algorithm
) -> None:
    limiter = Limiter(r, Policy("rl", resource, algorithm, limit=3, window_ms=60_000))
    before = time.time_ns() // 1_000_000
    got = [limiter.acquire("t-1") for _ in range(4)]
    after = time.time_ns() // 1_000_000
    assert [d.allowed for d in got] == [True, True, True, False]
    assert [d.remaining for d in got] == [2, 1, 0, 0]
    for d in got:
        # Redis TIME on this host's loopback server: the same clock.
        assert before - 5 <= d.now_ms <= after + 5
    assert got[3].retry_after_ms > 0
    key = limiter.key("t-1")
    assert r.exists(key) and 0 < r.pttl(key) <= 120_000
    assert limiter.peek("t-1").remaining == 0
    limiter.reset("t-1")
    assert not r.exists(key)
    assert limiter.acquire("t-1", cost=3).allowed


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_caller_time_decides_as_the_memory_engine(
    r: redis.Redis, resource: str, algorithm: Algorithm
) -> None:
    policy = Policy("rl", resource, algorithm, limit=5, window_ms=1_000)
    on_redis = Limiter(r, policy)
    memory = Limiter.memory(policy, clock=lambda: 1_000)
    steps = [
        (1_000, 1),
        (1_100, 2),
        (1_200, 2),
        (1_500, 1),
        (1_999, 1),
        (2_000, 3),
        (2_700, 2),
        (3_100, 5),
    ]
    for now, cost in steps:
        assert on_redis.peek("t", cost, now) == memory.peek("t", cost, now)
        assert on_redis.acquire_at("t", now, cost) == memory.acquire_at("t", now, cost)
    on_redis.reset("t")


# Limit 3, window 1000 ms in 4 buckets of 250 ms: a permit admitted in bucket
# b is held until (b + 1) * 250 - 1 + 1000 (docs/protocol.md, "Bucketed
# window"). (now offset, cost, peek): bucket edges, denials, a lagging caller.
BUCKETED_STEPS = [
    (0, 1, False),
    (249, 1, False),
    (250, 1, False),
    (260, 1, True),
    (260, 1, False),
    (1_248, 1, False),
    (1_249, 2, True),
    (1_249, 2, False),
    (1_300, 1, False),
    (1_499, 1, False),
    (1_499, 3, True),
    (1_490, 1, False),
    (2_600, 3, False),
    (2_601, 1, False),
]
BUCKETED_ALLOWED = [True] * 3 + [False] * 3 + [True] * 2 + [False, True, False, False, True, False]
T0 = 1_800_000_000_000


def bucketed(resource: str) -> Policy:
    return Policy("rl", resource, Algorithm.BUCKETED_WINDOW, limit=3, window_ms=1_000, buckets=4)


def test_bucketed_window_decides_as_the_memory_engine(r: redis.Redis, resource: str) -> None:
    policy = bucketed(resource)
    on_redis = Limiter(r, policy)
    memory = Limiter.memory(policy, clock=lambda: T0)
    got = []
    for at, cost, peek in BUCKETED_STEPS:
        if peek:
            d = on_redis.peek("t", cost, T0 + at)
            assert d == memory.peek("t", cost, T0 + at), at
        else:
            d = on_redis.acquire_at("t", T0 + at, cost)
            assert d == memory.acquire_at("t", T0 + at, cost), at
        got.append(d)
    assert [d.allowed for d in got] == BUCKETED_ALLOWED
    # Bucket 0 (2 permits) is held to 1249: a denial at 260 waits for it.
    assert (got[4].remaining, got[4].retry_after_ms, got[4].reset_after_ms) == (0, 989, 1239)
    # Bucket 4 is held to 2249; the lagging caller's wait counts from its own now.
    assert (got[7].reset_after_ms, got[11].retry_after_ms) == (1_000, 2_249 - 1_490)
    key = on_redis.key("t")
    assert key.endswith(":bucketed:1000:4") and r.type(key) == b"string"
    assert r.pttl(key) > 0
    on_redis.reset("t")
    assert not r.exists(key)


async def test_async_bucketed_window_decides_as_the_memory_engine(
    redis_url: str, r: redis.Redis, resource: str
) -> None:
    policy = bucketed(resource)
    memory = Limiter.memory(policy, clock=lambda: T0)
    allowed = []
    async with AsyncLimiter.from_url(redis_url, policy) as on_redis:
        for at, cost, peek in BUCKETED_STEPS:
            if peek:
                d = await on_redis.peek("t", cost, T0 + at)
                assert d == memory.peek("t", cost, T0 + at), at
            else:
                d = await on_redis.acquire_at("t", T0 + at, cost)
                assert d == memory.acquire_at("t", T0 + at, cost), at
            allowed.append(d.allowed)
        await on_redis.reset("t")
    assert allowed == BUCKETED_ALLOWED
    # Server time and the default bucket count.
    minute = Policy("rl", resource, "bucketed_window", 2, 60_000)
    async with AsyncLimiter.from_url(redis_url, minute) as limiter:
        got = await asyncio.gather(*(limiter.acquire("u") for _ in range(3)))
        assert sorted(d.allowed for d in got) == [False, True, True]
        assert limiter.key("u").endswith(":bucketed:60000:60")
        await limiter.reset("u")
    assert keys_of(r, resource) == []


def test_noscript_sends_eval_once_on_the_same_client(r: redis.Redis, resource: str) -> None:
    limiter = Limiter(r, Policy("rl", resource, Algorithm.SLIDING_LOG, limit=10, window_ms=60_000))
    limiter.acquire("t")
    r.script_flush()
    evals, evalshas = calls_of(r, "eval"), calls_of(r, "evalsha")
    d = limiter.acquire("t")
    assert (d.allowed, d.remaining) == (True, 8)
    assert (calls_of(r, "eval") - evals, calls_of(r, "evalsha") - evalshas) == (1, 1)
    # The EVAL loaded the script: the next check is one EVALSHA again.
    limiter.acquire("t")
    assert (calls_of(r, "eval") - evals, calls_of(r, "evalsha") - evalshas) == (1, 2)
    limiter.reset("t")


@pytest.mark.parametrize(("bad", "field", "words"), BAD_CALLS)
def test_bad_input_writes_nothing(
    r: redis.Redis, resource: str, bad: dict[str, object], field: str, words: str
) -> None:
    limiter = Limiter(r, Policy("rl", resource, Algorithm.SLIDING_LOG, limit=3, window_ms=1_000))
    args: dict[str, object] = {"tenant": "t-1", "cost": 1, "now_ms": 5_000}
    args.update(bad)
    scripts = calls_of(r, "evalsha") + calls_of(r, "eval")
    with pytest.raises(InvalidArgument) as info:
        limiter.acquire_at(args["tenant"], args["now_ms"], args["cost"])  # type: ignore[arg-type]
    assert info.value.field == field and words in info.value.message
    if field != "now_ms":
        with pytest.raises(InvalidArgument):
            limiter.acquire(args["tenant"], args["cost"])  # type: ignore[arg-type]
    if field == "tenant":
        with pytest.raises(InvalidArgument):
            limiter.reset(args["tenant"])  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument):
            limiter.key(args["tenant"])  # type: ignore[arg-type]
    # Refused before any I/O: no script ran, no key exists.
    assert calls_of(r, "evalsha") + calls_of(r, "eval") == scripts
    assert keys_of(r, resource) == []


@pytest.mark.parametrize(("bad", "field", "words"), [c for c in BAD_CALLS if "now_ms" not in c[0]])
def test_a_kept_call_never_lets_a_bad_input_through(
    r: redis.Redis, resource: str, bad: dict[str, object], field: str, words: str
) -> None:
    # acquire(tenant) keeps core's call for cost 1 by tenant; every other
    # input still goes to core, which refuses it, once "t-1" is kept too.
    for limiter in (
        Limiter(r, Policy("rl", resource, Algorithm.SLIDING_LOG, limit=3, window_ms=60_000)),
        Limiter(r, Policy("rl", resource, Algorithm.SLIDING_COUNTER, limit=3, window_ms=60_000)),
    ):
        assert limiter.acquire("t-1").remaining == 2
        args: dict[str, object] = {"tenant": "t-1", "cost": 1, **bad}
        for _ in range(2):
            with pytest.raises(InvalidArgument) as info:
                limiter.acquire(args["tenant"], args["cost"])  # type: ignore[arg-type]
            assert info.value.field == field and words in info.value.message
        assert limiter.acquire("t-1").remaining == 1


def test_kept_calls_are_bounded_and_decide_as_core_builds(r: redis.Redis, resource: str) -> None:
    limiter = Limiter(r, Policy("rl", resource, Algorithm.SLIDING_LOG, limit=2, window_ms=60_000))

    class Tenant(str):
        pass

    assert limiter.acquire("t-0").remaining == 1
    # More tenants than the limiter keeps calls for: t-0's falls out and is
    # built again; a str subclass and cost 2 are built by core each time.
    for i in range(1, 2 * slidelimit._limiter._CALL_CACHE_SIZE + 2):
        assert limiter.acquire(f"t-{i}").remaining == 1
    assert len(limiter._calls._young) <= slidelimit._limiter._CALL_CACHE_SIZE
    assert limiter.acquire(Tenant("t-0")).remaining == 0
    assert not limiter.acquire("t-0").allowed
    assert limiter.acquire("t-1", 1).remaining == 0
    assert not limiter.acquire("t-2", 2).allowed
    assert sorted(keys_of(r, resource)) == sorted(
        limiter.key(f"t-{i}").encode() for i in range(2 * slidelimit._limiter._CALL_CACHE_SIZE + 2)
    )


async def test_async_kept_calls_decide_as_core_builds(redis_url: str, resource: str) -> None:
    client = redis.asyncio.Redis.from_url(redis_url)
    limiter = AsyncLimiter(
        client, Policy("rl", resource, Algorithm.SLIDING_LOG, limit=2, window_ms=60_000)
    )
    assert [(await limiter.acquire("t")).remaining for _ in range(2)] == [1, 0]
    assert not (await limiter.acquire("t")).allowed
    with pytest.raises(InvalidArgument):
        await limiter.acquire("t", True)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        await limiter.acquire("")
    await client.aclose()


def test_wrongtype_names_the_key(r: redis.Redis, resource: str) -> None:
    limiter = Limiter(
        r, Policy("rl", resource, Algorithm.SLIDING_COUNTER, limit=3, window_ms=1_000)
    )
    key = limiter.key("t")
    r.set(key, "not slidelimit's", px=60_000)
    with pytest.raises(slidelimit.WrongType) as info:
        limiter.acquire("t")
    assert key in info.value.message and "sliding_counter" in info.value.message
    r.delete(key)


def refused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Silent:
    """A TCP server that accepts and never answers: a hung Redis."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.held: list[socket.socket] = []
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        try:
            while True:
                self.held.append(self.sock.accept()[0])
        except OSError:
            pass

    def close(self) -> None:
        self.sock.close()
        for c in self.held:
            c.close()


@pytest.fixture
def silent() -> Iterator[Silent]:
    server = Silent()
    yield server
    server.close()


def test_unreachable_and_hung_redis_are_unavailable(silent: Silent, resource: str) -> None:
    policy = Policy("rl", resource, Algorithm.SLIDING_LOG, limit=3, window_ms=1_000)
    refused = Limiter.from_url(f"redis://127.0.0.1:{refused_port()}/", policy, timeout_ms=300)
    with pytest.raises(slidelimit.Unavailable) as info:
        refused.acquire("t")
    assert info.value.message.startswith("redis unavailable: ")
    with pytest.raises(slidelimit.Unavailable):
        refused.reset("t")
    hung = Limiter.from_url(f"redis://127.0.0.1:{silent.port}/", policy, timeout_ms=300)
    for call in (
        lambda: hung.acquire("t"),
        lambda: hung.peek("t"),
        lambda: hung.acquire_at("t", 5),
    ):
        started = time.monotonic()
        with pytest.raises(slidelimit.Unavailable):
            call()
        # One timeout, no retry after it.
        assert time.monotonic() - started < 0.9


def test_metrics_count_acquires_with_cores_names(r: redis.Redis, resource: str) -> None:
    registry = prometheus_client.CollectorRegistry()
    metrics = PrometheusMetrics(registry, tenant_label=True)
    limiter = Limiter(
        r, Policy("rl", resource, Algorithm.SLIDING_LOG, limit=2, window_ms=60_000), metrics=metrics
    )
    for _ in range(3):
        limiter.acquire("t")
    limiter.peek("t")  # counts nothing
    labels = {"resource": resource, "tenant": "t"}
    assert registry.get_sample_value("ratelimit_allowed_total", labels) == 2
    assert registry.get_sample_value("ratelimit_denied_total", labels) == 1
    count = registry.get_sample_value("ratelimit_wait_seconds_count", {"resource": resource})
    assert count == 1
    text = prometheus_client.generate_latest(registry).decode()
    assert "# HELP ratelimit_allowed_total Acquires allowed by the rate limiter." in text
    buckets = [
        line for line in text.splitlines() if line.startswith("ratelimit_wait_seconds_bucket")
    ]
    les = [line.split('le="')[1].split('"')[0] for line in buckets]
    assert les == [str(b) for b in slidelimit.metrics.WAIT_BUCKETS] + ["+Inf"]
    assert les[0] == "0.001" and les[-2] == "600.0"
    limiter.reset("t")


def test_with_policy_shares_the_client(r: redis.Redis, resource: str) -> None:
    a = Limiter(r, Policy("rl", resource, Algorithm.SLIDING_LOG, limit=1, window_ms=60_000))
    b = a.with_policy(Policy("rl", resource, Algorithm.SLIDING_COUNTER, limit=1, window_ms=60_000))
    assert a.acquire("t").allowed and b.acquire("t").allowed
    assert not a.acquire("t").allowed and not b.acquire("t").allowed
    a.reset("t")
    b.reset("t")


async def test_async_acquire_noscript_and_errors(
    redis_url: str, r: redis.Redis, resource: str
) -> None:
    policy = Policy("rl", resource, Algorithm.SLIDING_LOG, limit=3, window_ms=60_000)
    async with AsyncLimiter.from_url(redis_url, policy) as limiter:
        got = await asyncio.gather(*(limiter.acquire("t") for _ in range(5)))
        assert sorted(d.allowed for d in got) == [False, False, True, True, True]
        r.script_flush()
        evals = calls_of(r, "eval")
        assert (await limiter.peek("t")).remaining == 0
        assert calls_of(r, "eval") == evals + 1
        await limiter.reset("t")
        assert (await limiter.acquire_at("t", 1_000, cost=3)).allowed
        with pytest.raises(InvalidArgument):
            await limiter.acquire("t", cost=4)
        await limiter.reset("t")
    assert keys_of(r, resource) == []


async def test_async_unavailable(silent: Silent, resource: str) -> None:
    policy = Policy("rl", resource, Algorithm.SLIDING_LOG, limit=3, window_ms=1_000)
    refused = AsyncLimiter.from_url(f"redis://127.0.0.1:{refused_port()}/", policy, timeout_ms=300)
    with pytest.raises(slidelimit.Unavailable):
        await refused.acquire("t")
    hung = AsyncLimiter.from_url(f"redis://127.0.0.1:{silent.port}/", policy, timeout_ms=300)
    started = time.monotonic()
    with pytest.raises(slidelimit.Unavailable):
        await hung.acquire("t")
    assert time.monotonic() - started < 0.9
    await refused.aclose()
    await hung.aclose()


def test_error_replies_reach_core_as_sent_whatever_redis_py_kept() -> None:
    """redis-py strips a known prefix into the exception's class; from 8 on
    it also keeps it in status_code, before 8 (the last for Python 3.9 is
    7.0) it does not. Either way core must see the reply as sent."""
    from redis.exceptions import AuthenticationError, MovedError, NoScriptError, ResponseError

    from slidelimit._limiter import _server_text

    cases = [
        (
            NoScriptError("No matching script. Please use EVAL."),
            "NOSCRIPT No matching script. Please use EVAL.",
        ),
        (MovedError("3999 127.0.0.1:7001"), "MOVED 3999 127.0.0.1:7001"),
        (
            ResponseError("slidelimit invalid_argument cost: must be at least 1"),
            "ERR slidelimit invalid_argument cost: must be at least 1",
        ),
        (ResponseError("WRONGTYPE Operation against a key"), "WRONGTYPE Operation against a key"),
        (
            ResponseError("BUSY Redis is busy running a script."),
            "BUSY Redis is busy running a script.",
        ),
        # A ConnectionError, not a ResponseError: both words are core's
        # permission_denied.
        (
            AuthenticationError("invalid username-password pair or user is disabled."),
            "WRONGPASS invalid username-password pair or user is disabled.",
        ),
        (AuthenticationError("Authentication required."), "NOAUTH Authentication required."),
    ]
    for error, sent in cases:
        error.status_code = None  # as redis-py 7 raises it
        assert _server_text(error) == sent
    with_code = NoScriptError("No matching script.", status_code="NOSCRIPT")
    assert _server_text(with_code) == "NOSCRIPT No matching script."
    assert _server_text(redis.exceptions.TimeoutError("Timeout reading")) is None


# More callers at once than redis-py 8's default pool holds (100 connections,
# past which it raises MaxConnectionsError at once): Redis is paused, so every
# call holds its connection until the pause ends.
CALLERS = 150


def paused_calls(admins: list[redis.Redis], calls: list[Callable[[], object]]) -> list[object]:
    """Runs the calls on threads, all at once, while every server is paused."""
    results: list[object] = [None] * len(calls)

    def run(i: int) -> None:
        try:
            results[i] = calls[i]()
        except Exception as e:  # collected, so the test shows every failure
            results[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for admin in admins:
        admin.execute_command("CLIENT", "PAUSE", 500, "ALL")
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def test_more_callers_than_the_pool_holds_wait_for_a_connection(
    r: redis.Redis, redis_url: str, resource: str
) -> None:
    policy = Policy("rl", resource, Algorithm.SLIDING_LOG, limit=1000, window_ms=60_000)
    with Limiter.from_url(redis_url, policy, timeout_ms=5_000) as limiter:
        results = paused_calls([r], [lambda: limiter.acquire("t")] * CALLERS)
    decided = [d for d in results if isinstance(d, slidelimit.Decision)]
    assert len(decided) == CALLERS, [e for e in results if e not in decided][:3]
    # Each admitted exactly once: no call was sent twice or lost.
    assert sorted(d.remaining for d in decided) == list(range(1000 - CALLERS, 1000))


async def test_more_async_callers_than_the_pool_holds_wait_for_a_connection(
    r: redis.Redis, redis_url: str, resource: str
) -> None:
    policy = Policy("rl", resource, Algorithm.SLIDING_LOG, limit=1000, window_ms=60_000)
    async with AsyncLimiter.from_url(redis_url, policy, timeout_ms=5_000) as limiter:
        r.execute_command("CLIENT", "PAUSE", 500, "ALL")
        results = await asyncio.gather(
            *(limiter.acquire("t") for _ in range(CALLERS)), return_exceptions=True
        )
    decided = [d for d in results if isinstance(d, slidelimit.Decision)]
    assert len(decided) == CALLERS, [e for e in results if e not in decided][:3]
    assert sorted(d.remaining for d in decided) == list(range(1000 - CALLERS, 1000))


def test_a_reply_left_unread_is_never_another_calls_decision(redis_url: str, resource: str) -> None:
    # A call cut between its send and its read (a signal's exception: a
    # Celery soft time limit) leaves its reply on a connection redis-py puts
    # back in its pool; the next call on that connection must not take that
    # reply for its own decision.
    policy = Policy("rl", resource, Algorithm.SLIDING_LOG, limit=100, window_ms=60_000)
    with Limiter.from_url(redis_url, policy) as limiter:
        assert limiter.acquire("a", 7).remaining == 93
        pool = limiter._client.connection_pool
        cut = pool.get_connection()
        cut.send_command("EVALSHA", *limiter._calls.acquire_call("a", 7))
        pool.release(cut)
        time.sleep(0.05)  # its reply has arrived, unread
        assert limiter.acquire("b").remaining == 99
        assert limiter.peek("a").remaining == 85  # the cut call counted, as sent


async def test_async_a_reply_left_unread_is_never_another_calls_decision(
    redis_url: str, resource: str
) -> None:
    policy = Policy("rl", resource, Algorithm.SLIDING_LOG, limit=100, window_ms=60_000)
    limiter = AsyncLimiter.from_url(redis_url, policy)
    try:
        assert (await limiter.acquire("a", 7)).remaining == 93
        pool = limiter._client.connection_pool
        cut = await pool.get_connection()
        await cut.send_command("EVALSHA", *limiter._calls.acquire_call("a", 7))
        await pool.release(cut)
        await asyncio.sleep(0.05)
        assert (await limiter.acquire("b")).remaining == 99
        assert (await limiter.peek("a")).remaining == 85
    finally:
        await limiter.aclose()


class _TimeIsUp(Exception):
    """As Celery's SoftTimeLimitExceeded: an Exception a signal handler raises."""


def test_an_exception_a_signal_handler_raises_is_the_callers(
    redis_url: str, r: redis.Redis, resource: str
) -> None:
    def time_is_up(signum: int, frame: object) -> None:
        raise _TimeIsUp("time is up")

    policy = Policy("rl", resource, Algorithm.SLIDING_LOG, limit=10, window_ms=60_000)
    with Limiter.from_url(redis_url, policy, timeout_ms=2000) as limiter:
        assert limiter.acquire("t").allowed  # connected, the script loaded
        previous = signal.signal(signal.SIGALRM, time_is_up)
        r.execute_command("CLIENT", "PAUSE", 500, "WRITE")
        try:
            signal.setitimer(signal.ITIMER_REAL, 0.1)  # while the call waits on Redis
            with pytest.raises(_TimeIsUp):
                limiter.acquire("t")
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
            r.execute_command("CLIENT", "UNPAUSE")
        # The next call is a decision; the cut call counted if Redis ran it
        # before redis-py closed its connection.
        assert limiter.acquire("t").remaining in (7, 8)

    # What redis-py itself raises is still an outage, never a decision: a
    # socket error from the standard library, a race inside redis-py.

    class Failing(redis.Redis):
        def __init__(self, raise_it: Callable[[], None]) -> None:
            super().__init__(port=1)  # never connected: evalsha raises first
            self.raise_it = raise_it

        def evalsha(self, *args: object) -> None:  # type: ignore[override]
            self.raise_it()

    def inside_redis_py() -> None:
        # Run as code of redis.connection, as its races raise it.
        code = "raise AttributeError(\"'NoneType' object has no attribute 'readline'\")"
        exec(code, {"__name__": "redis.connection"})

    for raise_it in (lambda: socket.create_connection(("127.0.0.1", 1)), inside_redis_py):
        with pytest.raises(slidelimit.Unavailable):
            Limiter(Failing(raise_it), policy).acquire("t")

    # The same AttributeError raised by the caller's own code is not an outage.
    def callers() -> None:
        raise AttributeError("the caller's")

    with pytest.raises(AttributeError, match="the caller's"):
        Limiter(Failing(callers), policy).acquire("t")


def test_an_async_limiter_on_another_event_loop_is_a_clear_error(
    redis_url: str, resource: str
) -> None:
    """redis-py's asyncio client belongs to the loop it first ran on. Used
    from the next asyncio.run it fails; that is the caller's misuse, not an
    outage a fail-open caller would run unlimited through."""
    policy = Policy("rl", resource, Algorithm.SLIDING_LOG, limit=100, window_ms=60_000)
    limiter = AsyncLimiter.from_url(redis_url, policy)

    async def acquire() -> bool:
        return (await limiter.acquire("t")).allowed

    assert asyncio.run(acquire())
    with pytest.raises(RuntimeError, match="one AsyncLimiter per event loop") as info:
        asyncio.run(acquire())
    assert not isinstance(info.value, slidelimit.Unavailable)
