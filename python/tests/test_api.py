"""The public API without I/O: policy, decision, errors, memory engine."""

from __future__ import annotations

import dataclasses
import datetime
import pickle
from typing import Callable

import pytest

import slidelimit
from slidelimit import (
    Algorithm,
    AsyncLimiter,
    Decision,
    Error,
    InvalidArgument,
    InvalidType,
    Limit,
    Limiter,
    Policy,
    _core,
    check_timeout_ms,
)

LOG = Algorithm.SLIDING_LOG
COUNTER = Algorithm.SLIDING_COUNTER


def policy(limit: int = 3, window_ms: int = 1000, algorithm: Algorithm = LOG) -> Policy:
    return Policy("rl", "geocode", algorithm, limit=limit, window_ms=window_ms)


def test_the_issue_example_builds_the_documented_key() -> None:
    p = Policy("rl", "geocode", Algorithm.SLIDING_LOG, limit=600, window_ms=60_000)
    assert (p.namespace, p.resource, p.limit, p.window_ms) == ("rl", "geocode", 600, 60_000)
    assert p.algorithm is Algorithm.SLIDING_LOG
    # docs/protocol.md: <namespace>:{<resource>:<tenant>}:<tag>:<window_ms>
    assert p.key("t-1") == "rl:{geocode:t-1}:log:60000"
    assert policy(algorithm=COUNTER).key("a b{}") == "rl:{geocode:a%20b%7B%7D}:counter:1000"
    assert Limiter.memory(p).key("t-1") == p.key("t-1")


def test_algorithms_and_defaults_are_cores() -> None:
    assert [a.value for a in Algorithm] == list(_core.ALGORITHMS)
    assert slidelimit.DEFAULT_ALGORITHM is Algorithm.SLIDING_LOG
    assert slidelimit.DEFAULT_NAMESPACE == "rl"
    # A plain str names an algorithm too (Algorithm is a str enum).
    assert Policy("rl", "g", "sliding_counter", 1, 1).algorithm is COUNTER
    # No algorithm (or None) is core's default, as in every binding.
    assert Policy("rl", "g", limit=1, window_ms=1).algorithm is slidelimit.DEFAULT_ALGORITHM
    assert Policy("rl", "g", None, 1, 1) == Policy("rl", "g", Algorithm.SLIDING_LOG, 1, 1)


def test_policy_is_immutable_comparable_and_picklable() -> None:
    p = policy()
    with pytest.raises(AttributeError):
        p.limit = 5  # type: ignore[misc]
    assert p == policy() and hash(p) == hash(policy())
    assert p != policy(limit=4)
    assert pickle.loads(pickle.dumps(p)) == p
    assert repr(p) == 'Policy("rl", "geocode", Algorithm.SLIDING_LOG, limit=3, window_ms=1000)'


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"namespace": ""}, "namespace"),
        ({"namespace": "a:b"}, "namespace"),
        ({"namespace": 7}, "namespace"),
        ({"resource": "x" * 65}, "resource"),
        ({"resource": b"geo"}, "resource"),
        ({"resource": "g\udc80"}, "resource"),
        ({"algorithm": "fixed"}, "algorithm"),
        ({"limit": 0}, "limit"),
        ({"limit": True}, "limit"),
        ({"limit": 3.0}, "limit"),
        ({"limit": -1}, "limit"),
        ({"limit": 2**64}, "limit"),
        ({"limit": 2**63}, "limit"),
        ({"limit": 10_001}, "limit"),
        ({"window_ms": 0}, "window_ms"),
        ({"window_ms": "1000"}, "window_ms"),
        ({"window_ms": 2**70}, "window_ms"),
    ],
)
def test_bad_policies_name_the_field(kwargs: dict[str, object], field: str) -> None:
    args: dict[str, object] = {
        "namespace": "rl",
        "resource": "geo",
        "algorithm": LOG,
        "limit": 3,
        "window_ms": 1000,
    }
    args.update(kwargs)
    with pytest.raises(InvalidArgument) as info:
        Policy(**args)  # type: ignore[arg-type]
    assert info.value.field == field
    assert info.value.message.startswith(f"{field}: ")
    assert isinstance(info.value, ValueError)
    assert str(info.value) == f"invalid_argument: {info.value.message}"


def test_bucketed_window_buckets_key_repr_and_pickle() -> None:
    p = Policy("rl", "geocode", Algorithm.BUCKETED_WINDOW, limit=5, window_ms=1000, buckets=4)
    assert p.algorithm is Algorithm.BUCKETED_WINDOW and p.buckets == 4
    # docs/protocol.md: the bucket count is part of the key.
    assert p.key("t") == "rl:{geocode:t}:bucketed:1000:4"
    assert p != Policy("rl", "geocode", "bucketed_window", 5, 1000, buckets=5)
    assert pickle.loads(pickle.dumps(p)) == p and pickle.loads(pickle.dumps(p)).buckets == 4
    assert repr(p) == (
        'Policy("rl", "geocode", Algorithm.BUCKETED_WINDOW, limit=5, window_ms=1000, buckets=4)'
    )
    # No buckets: core's default, filled in; none for the other algorithms.
    d = Policy("rl", "geocode", "bucketed_window", 5, 60_000)
    assert d.buckets == 60 and d.key("t").endswith(":bucketed:60000:60")
    assert d == Policy("rl", "geocode", "bucketed_window", 5, 60_000, buckets=60)
    assert policy().buckets is None and policy(algorithm=COUNTER).buckets is None
    assert Policy("rl", "geocode", LOG, 3, 1000, buckets=None) == policy()


@pytest.mark.parametrize(
    ("algorithm", "window_ms", "buckets"),
    [
        (Algorithm.BUCKETED_WINDOW, 1000, None),  # the default 60 does not divide 1000
        (Algorithm.BUCKETED_WINDOW, 1000, 7),
        (Algorithm.BUCKETED_WINDOW, 1000, 0),
        (Algorithm.BUCKETED_WINDOW, 1000, -4),
        (Algorithm.BUCKETED_WINDOW, 1000, 4.0),
        (Algorithm.BUCKETED_WINDOW, 1000, "4"),
        (Algorithm.BUCKETED_WINDOW, 1000, True),
        (Algorithm.BUCKETED_WINDOW, 3601, 3601),
        (LOG, 1000, 4),
        (COUNTER, 1000, 4),
    ],
)
def test_bad_buckets_are_cores_invalid_argument(
    algorithm: Algorithm, window_ms: int, buckets: object
) -> None:
    with pytest.raises(InvalidArgument) as info:
        Policy("rl", "geo", algorithm, 3, window_ms, buckets=buckets)  # type: ignore[arg-type]
    assert info.value.field == "buckets"
    assert info.value.message.startswith("buckets: ")


# Each is refused by the binding before any I/O (tests/test_redis.py checks
# that no key is written).
BAD_CALLS = [
    ({"tenant": 17}, "tenant", "must be a str, got int"),
    ({"tenant": b"t-1"}, "tenant", "must be a str, got bytes"),
    ({"tenant": None}, "tenant", "must be a str, got NoneType"),
    ({"tenant": ""}, "tenant", "must not be empty"),
    ({"tenant": "x" * 513}, "tenant", "at most 512"),
    ({"tenant": "t-\ud800"}, "tenant", "unpaired surrogate"),
    ({"tenant": "t-\udfff-x"}, "tenant", "unpaired surrogate"),
    ({"cost": True}, "cost", "must be an int, got bool"),
    ({"cost": False}, "cost", "must be an int, got bool"),
    ({"cost": 1.0}, "cost", "must be an int, got float"),
    ({"cost": "1"}, "cost", "must be an int, got str"),
    ({"cost": -1}, "cost", "must not be negative"),
    ({"cost": 0}, "cost", "must be at least 1"),
    ({"cost": 4}, "cost", "exceeds the limit 3"),
    ({"cost": 2**63}, "cost", "exceeds the limit"),
    ({"cost": 2**64}, "cost", "at most 2^64 - 1"),
    ({"now_ms": 2**52 + 1}, "now_ms", "at most 2^52"),
    ({"now_ms": 2**63}, "now_ms", "at most 2^52"),
    ({"now_ms": -5}, "now_ms", "must not be negative"),
    ({"now_ms": 1.5e3}, "now_ms", "must be an int, got float"),
    ({"now_ms": True}, "now_ms", "must be an int, got bool"),
]


def test_policy_check_cost_is_the_rule_every_check_applies() -> None:
    p = policy()
    assert p.check_cost(1) == 1 and p.check_cost(3) == 3
    costs = [(bad["cost"], words) for bad, field, words in BAD_CALLS if field == "cost"]
    assert len(costs) == 9
    for cost, words in costs:
        with pytest.raises(InvalidArgument) as info:
            p.check_cost(cost)  # type: ignore[arg-type]
        assert info.value.field == "cost" and words in str(info.value), cost


@pytest.mark.parametrize(("bad", "field", "words"), BAD_CALLS)
def test_bad_calls_on_memory_raise_invalid_argument(
    bad: dict[str, object], field: str, words: str
) -> None:
    limiter = Limiter.memory(policy(), clock=lambda: 10_000)
    args: dict[str, object] = {"tenant": "t-1", "cost": 1, "now_ms": 5_000}
    args.update(bad)
    for call in (
        lambda: limiter.acquire_at(args["tenant"], args["now_ms"], args["cost"]),  # type: ignore[arg-type]
        lambda: limiter.peek(args["tenant"], args["cost"], args["now_ms"]),  # type: ignore[arg-type]
    ):
        with pytest.raises(InvalidArgument) as info:
            call()
        assert info.value.field == field
        assert words in info.value.message, info.value.message
    # Nothing was recorded: a good call still sees the whole budget.
    assert limiter.acquire_at("t-1", 5_000).remaining == 2


def test_a_wrong_python_type_is_also_a_type_error() -> None:
    # InvalidType: an InvalidArgument (and ValueError) that is also the
    # TypeError Python's own checks raise for a wrong type; values of the
    # right type that break a rule stay ValueErrors only.
    limiter = Limiter.memory(policy(), clock=lambda: 10_000)
    one = Limit(LOG, 3, 1000)
    wrong_types: list[tuple[str, Callable[[], object]]] = [
        ("tenant", lambda: limiter.acquire(b"t")),  # type: ignore[arg-type]
        ("tenant", lambda: limiter.reset(None)),  # type: ignore[arg-type]
        ("tenant", lambda: policy().key(7)),  # type: ignore[arg-type]
        ("cost", lambda: limiter.acquire("t", 1.0)),  # type: ignore[arg-type]
        ("now_ms", lambda: limiter.acquire_at("t", "5")),  # type: ignore[arg-type]
        ("limit", lambda: Policy("rl", "geo", LOG, "3", 1000)),  # type: ignore[arg-type]
        ("window_ms", lambda: Policy("rl", "geo", LOG, 3)),
        ("algorithm", lambda: Policy("rl", "geo", 5, 3, 1000)),  # type: ignore[arg-type]
        ("namespace", lambda: Policy(None, "geo", LOG, 3, 1000)),  # type: ignore[arg-type]
        ("limits", lambda: Policy("rl", "geo", limits="log")),  # type: ignore[arg-type]
        ("limits", lambda: Policy("rl", "geo", limits=[one, (LOG, 3, 1000)])),  # type: ignore[list-item]
        ("limits[1].limit", lambda: Policy("rl", "geo", limits=[one, Limit(LOG, 3.5, 1000)])),  # type: ignore[arg-type]
        ("policy", lambda: Limiter.memory("rl:geo")),  # type: ignore[arg-type]
        ("clock", lambda: Limiter.memory(policy(), clock=5)),  # type: ignore[arg-type]
        ("timeout_ms", lambda: check_timeout_ms(1.5)),  # type: ignore[arg-type]
        ("allowed", lambda: Decision(1, 0, 0, 0, 0)),  # type: ignore[arg-type]
    ]
    for field, call in wrong_types:
        with pytest.raises(InvalidType) as info:
            call()
        assert info.value.field == field, (field, info.value)
        assert isinstance(info.value, InvalidArgument) and isinstance(info.value, TypeError)
        assert isinstance(info.value, ValueError) and info.value.code == "invalid_argument"
    right_types_bad_values: list[tuple[str, Callable[[], object]]] = [
        ("tenant", lambda: limiter.acquire("")),
        ("tenant", lambda: limiter.acquire("t-\ud800")),
        ("cost", lambda: limiter.acquire("t", -1)),
        ("cost", lambda: limiter.acquire("t", 2**64)),
        ("cost", lambda: limiter.acquire("t", 4)),
        ("limit", lambda: Policy("rl", "geo", LOG, 0, 1000)),
        ("algorithm", lambda: Policy("rl", "geo", "nope", 3, 1000)),
        ("timeout_ms", lambda: check_timeout_ms(0)),
    ]
    for field, call in right_types_bad_values:
        with pytest.raises(InvalidArgument) as caught:
            call()
        assert caught.value.field == field, (field, caught.value)
        assert not isinstance(caught.value, TypeError), caught.value


def test_errors_one_class_per_core_code() -> None:
    classes = [c for c in vars(slidelimit).values() if isinstance(c, type) and issubclass(c, Error)]
    # One class per code directly under Error; InvalidType refines one.
    codes = sorted(c.code for c in classes if c.__bases__[0] is Error)
    assert codes == sorted(_core.ERROR_CODES)
    assert [c for c in classes if c is not Error and c.__bases__[0] is not Error] == [InvalidType]
    for cls in classes:
        assert issubclass(cls, Exception)
    assert issubclass(InvalidArgument, ValueError)
    assert not issubclass(slidelimit.Unavailable, ValueError)


def test_decision_is_frozen_with_timedeltas() -> None:
    limiter = Limiter.memory(policy(limit=1), clock=lambda: 50_000)
    first = limiter.acquire("t")
    assert (first.allowed, first.remaining, first.retry_after_ms, first.now_ms) == (
        True,
        0,
        0,
        50_000,
    )
    assert first.retry_after == datetime.timedelta(0)
    denied = limiter.acquire_at("t", 50_250)
    assert not denied.allowed
    assert denied.retry_after_ms == 750
    assert denied.retry_after == datetime.timedelta(milliseconds=750)
    assert denied.reset_after == datetime.timedelta(milliseconds=denied.reset_after_ms)
    with pytest.raises(AttributeError):
        denied.allowed = True  # type: ignore[misc]
    with pytest.raises((AttributeError, TypeError)):
        dataclasses.replace(denied, allowed=True)  # type: ignore[type-var]
    assert pickle.loads(pickle.dumps(denied)) == denied
    assert hash(denied) == hash(Decision(False, 0, 750, denied.reset_after_ms, 50_250))
    # A Decision made by hand obeys the rules of a reply, each breach named
    # (it is no malformed reply: no script ran).
    for fields, field in (
        ((False, 0, 0, 0, 0), "retry_after_ms"),
        ((True, 1, 500, 0, 0), "retry_after_ms"),
        ((True, 0, 0, 5, 0, 2), "denied_by"),
        ((False, 0, 1, 5, 0, 8), "denied_by"),
        ((False, 2**53 + 1, 1, 5, 0), "remaining"),
        ((False, 0, 1, 5, -1), "now_ms"),
    ):
        with pytest.raises(InvalidArgument) as info:
            Decision(*fields)  # type: ignore[arg-type]
        assert info.value.field == field, fields
        assert not isinstance(info.value, slidelimit.MalformedReply)
    assert Decision(False, 0, 1, 5, 0, 7).denied_by == 7


def test_memory_clock_is_the_server_time() -> None:
    now = [1_000]
    limiter = Limiter.memory(policy(limit=2, window_ms=1000), clock=lambda: now[0])
    assert limiter.acquire("t").allowed
    assert limiter.acquire("t").allowed
    d = limiter.acquire("t")
    assert (d.allowed, d.retry_after_ms, d.now_ms) == (False, 1000, 1000)
    assert limiter.peek("t").remaining == 0
    now[0] = 2_001
    assert limiter.acquire("t").remaining == 1
    # A peek answers what an acquire would: the permit it would take counts.
    assert limiter.peek("t").remaining == 0
    limiter.reset("t")
    assert limiter.peek("t").remaining == 1


def test_memory_clock_must_return_an_int() -> None:
    limiter = Limiter.memory(policy(), clock=lambda: 1.5)  # type: ignore[arg-type,return-value]
    with pytest.raises(InvalidArgument) as info:
        limiter.acquire("t")
    assert info.value.field == "clock"
    with pytest.raises(TypeError):
        Limiter.memory(policy(), clock=5)  # type: ignore[arg-type]


def test_limiters_refuse_what_is_no_policy() -> None:
    with pytest.raises(TypeError):
        Limiter.memory("rl:geo")  # type: ignore[arg-type]


def test_memory_clock_in_nanoseconds_is_named_not_a_malformed_reply() -> None:
    limiter = Limiter.memory(policy(), clock=lambda: 1_800_000_000_000_000_000)
    with pytest.raises(InvalidArgument) as info:
        limiter.acquire("t")
    assert info.value.field == "clock" and "past 2^52" in str(info.value)


def test_limiters_refuse_what_is_no_client() -> None:
    """A wrong client is refused when the limiter is made: on its first call
    the failure would read as an outage (Unavailable)."""
    import redis
    import redis.asyncio

    sync = redis.Redis(port=1)
    asynchronous = redis.asyncio.Redis(port=1)
    for client, hint in (
        (None, ""),
        ("redis://127.0.0.1:6379", ""),
        ({}, ""),
        (redis.ConnectionPool(), ""),
        (asynchronous, "AsyncLimiter"),
        (sync.pipeline(), "pipeline"),
    ):
        with pytest.raises(InvalidType) as info:
            Limiter(client, policy())  # type: ignore[arg-type]
        assert info.value.field == "client" and hint in str(info.value), client
    for client, hint in ((None, ""), (sync, "Limiter"), (asynchronous.pipeline(), "pipeline")):
        with pytest.raises(InvalidType) as info:
            AsyncLimiter(client, policy())  # type: ignore[arg-type]
        assert info.value.field == "client" and hint in str(info.value), client
    Limiter(sync, policy())
    AsyncLimiter(asynchronous, policy())


def test_metrics_are_checked_when_the_limiter_is_made() -> None:
    import redis

    for metrics in (5, object(), False):
        with pytest.raises(InvalidType) as info:
            Limiter(redis.Redis(port=1), policy(), metrics=metrics)  # type: ignore[arg-type]
        assert info.value.field == "metrics"
        with pytest.raises(InvalidType):
            Limiter.memory(policy(), metrics=metrics)  # type: ignore[arg-type]
        with pytest.raises(InvalidType):
            AsyncLimiter.memory(policy(), metrics=metrics)  # type: ignore[arg-type]


def test_prometheus_metrics_check_registry_and_tenant_label() -> None:
    import prometheus_client

    from slidelimit.metrics import PrometheusMetrics

    for registry in (5, {}, False, prometheus_client.CollectorRegistry):
        with pytest.raises(InvalidType) as info:
            PrometheusMetrics(registry)
        assert info.value.field == "registry"
    for label in ("no", 1, None):
        with pytest.raises(InvalidType) as info:
            PrometheusMetrics(prometheus_client.CollectorRegistry(), tenant_label=label)  # type: ignore[arg-type]
        assert info.value.field == "tenant_label"


async def test_acquire_at_needs_a_time() -> None:
    """None would quietly be Redis TIME (or the memory engine's clock)."""
    import redis
    import redis.asyncio

    for limiter in (Limiter.memory(policy()), Limiter(redis.Redis(port=1), policy())):
        with pytest.raises(InvalidType) as info:
            limiter.acquire_at("t", None)  # type: ignore[arg-type]
        assert info.value.field == "now_ms"
    for alimiter in (
        AsyncLimiter.memory(policy()),
        AsyncLimiter(redis.asyncio.Redis(port=1), policy()),
    ):
        with pytest.raises(InvalidType) as info:
            await alimiter.acquire_at("t", None)  # type: ignore[arg-type]
        assert info.value.field == "now_ms"


def test_urls_and_tls_are_checked_before_any_connection() -> None:
    cases: list[tuple[dict[str, object], str, bool]] = [
        ({"url": None}, "url", True),
        ({"url": b"redis://127.0.0.1"}, "url", True),
        ({"url": "http://127.0.0.1:6379"}, "url", False),
        ({"url": "nonsense"}, "url", False),
        ({"url": "redis://127.0.0.1:abc/0"}, "url", False),
        ({"url": "redis://127.0.0.1:1", "tls_ca_file": "/ca.pem"}, "tls_ca_file", False),
        ({"url": "rediss://127.0.0.1:1", "tls_ca_file": 5}, "tls_ca_file", True),
        ({"url": "rediss://127.0.0.1:1", "tls_ca_file": ""}, "tls_ca_file", False),
    ]
    for options, field, wrong_type in cases:
        for make in (Limiter.from_url, AsyncLimiter.from_url):
            with pytest.raises(InvalidArgument) as info:
                make(policy=policy(), **options)  # type: ignore[arg-type]
            assert info.value.field == field, options
            assert isinstance(info.value, TypeError) is wrong_type, options
    # A URL may hold a password: the message says what is wrong without it.
    for url in ("http://:hunter2@127.0.0.1:6379", "redis://:hunter2@127.0.0.1:abc/0"):
        with pytest.raises(InvalidArgument) as info:
            Limiter.from_url(url, policy())
        assert info.value.field == "url"
        assert "hunter2" not in str(info.value), info.value
        with pytest.raises(InvalidArgument) as info:
            Limiter.from_cluster([url], policy())
        assert "hunter2" not in str(info.value), info.value
    for urls, options, field in (
        (["http://127.0.0.1:1"], {}, "urls"),
        (["redis://127.0.0.1:1"], {"tls_ca_file": "/ca.pem"}, "tls_ca_file"),
    ):
        for make_cluster in (Limiter.from_cluster, AsyncLimiter.from_cluster):
            with pytest.raises(InvalidArgument) as info:
                make_cluster(urls, policy(), **options)  # type: ignore[arg-type]
            assert info.value.field == field, urls
    # Not a sequence of URLs: the first one's credentials are used, so order counts.
    for urls in (
        "redis://127.0.0.1:1",
        5,
        (u for u in ["redis://127.0.0.1:1"]),
        {"redis://127.0.0.1:1"},
    ):
        for make_cluster in (Limiter.from_cluster, AsyncLimiter.from_cluster):
            with pytest.raises(InvalidType) as info:
                make_cluster(urls, policy())  # type: ignore[arg-type]
            assert info.value.field == "urls", urls
    # The policy is checked before from_cluster connects (nothing listens on port 1).
    with pytest.raises(InvalidType) as info:
        Limiter.from_cluster(["redis://127.0.0.1:1"], None)  # type: ignore[arg-type]
    assert info.value.field == "policy"


def test_limits_must_be_an_ordered_sequence() -> None:
    """A set's or a dict's order can differ between processes, and with it
    limits[i] and denied_by."""
    a = Limit(LOG, limit=2, window_ms=1000)
    b = Limit(LOG, limit=5, window_ms=60_000)
    for limits in ({a, b}, {a: "x", b: "y"}, {a: 1}.keys(), iter([a, b]), "ab"):
        with pytest.raises(InvalidType) as info:
            Policy("rl", "geo", limits=limits)  # type: ignore[arg-type]
        assert info.value.field == "limits", limits
    assert Policy("rl", "geo", limits=[a, b]) == Policy("rl", "geo", limits=(a, b))


def test_memory_with_policy_checks_deny_cache_as_on_redis() -> None:
    for bad in ("x", -1, 0):
        with pytest.raises(InvalidArgument):
            Limiter.memory(policy()).with_policy(policy(limit=2), deny_cache=bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgument):
            AsyncLimiter.memory(policy()).with_policy(policy(limit=2), deny_cache=bad)  # type: ignore[arg-type]


def test_timeouts_follow_cores_rule() -> None:
    for bad in (0, -1, 2**31, 1.5, True):
        with pytest.raises(InvalidArgument) as info:
            Limiter.from_url("redis://127.0.0.1:1/", policy(), timeout_ms=bad)  # type: ignore[arg-type]
        assert info.value.field == "timeout_ms"
    assert slidelimit.check_timeout_ms(2**31 - 1) == 2**31 - 1


def test_slot_is_the_cluster_rule() -> None:
    # The Redis Cluster specification: "123456789" hashes to 0x31C3.
    assert slidelimit.slot("123456789") == 0x31C3 % 16384
    assert slidelimit.slot("{123456789}.x") == slidelimit.slot("123456789")


async def test_async_memory_has_the_same_methods() -> None:
    limiter = AsyncLimiter.memory(policy(limit=1), clock=lambda: 7_000)
    d = await limiter.acquire("t")
    assert d.allowed and d.now_ms == 7_000
    assert not (await limiter.acquire_at("t", 7_001)).allowed
    assert (await limiter.peek("t")).remaining == 0
    await limiter.reset("t")
    assert (await limiter.peek("t")).allowed
    other = limiter.with_policy(policy(limit=2, algorithm=COUNTER))
    assert (await other.acquire("t")).remaining == 1
    with pytest.raises(InvalidArgument):
        await limiter.acquire("t", cost=True)
