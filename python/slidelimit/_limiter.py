"""Limiter and AsyncLimiter: redis-py I/O around core's calls and replies.

Each check is one EVALSHA of the call core built; on NOSCRIPT the same call
goes once as EVAL to the same node (RedisCluster routes both by the key).
What a server error means is core's table; a connection failure or timeout
is `Unavailable`, never a decision.
"""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Callable, Union

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.exceptions import (
    AskError,
    BusyLoadingError,
    ClusterDownError,
    ExecAbortError,
    MasterDownError,
    MovedError,
    NoPermissionError,
    NoScriptError,
    OutOfMemoryError,
    ReadOnlyError,
    RedisError,
    ResponseError,
    TryAgainError,
)
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.retry import Retry

from . import _core
from ._core import Decision, MemoryEngine, Policy, check_timeout_ms
from ._errors import Unavailable

if TYPE_CHECKING:
    from .metrics import Metrics

SyncClient = Union["redis.Redis", "redis.cluster.RedisCluster"]
AsyncClient = Union["redis.asyncio.Redis", "redis.asyncio.RedisCluster"]
Clock = Callable[[], int]

#: The per-call timeout of the clients `from_url` and `from_cluster` build.
DEFAULT_TIMEOUT_MS = 1000


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


# redis-py strips a known prefix off an error reply and says it with the
# exception's class (and, from redis-py 8 on, in `status_code` too). Core's
# table reads the reply as the server sent it, so the prefix goes back on.
# Subclasses come before their bases (MOVED is an ASK, MASTERDOWN a
# CLUSTERDOWN in redis-py's hierarchy).
_PREFIXES: tuple[tuple[type[RedisError], str], ...] = (
    (NoScriptError, "NOSCRIPT"),
    (BusyLoadingError, "LOADING"),
    (ReadOnlyError, "READONLY"),
    (NoPermissionError, "NOPERM"),
    (MovedError, "MOVED"),
    (AskError, "ASK"),
    (TryAgainError, "TRYAGAIN"),
    (MasterDownError, "MASTERDOWN"),
    (ClusterDownError, "CLUSTERDOWN"),
    (ExecAbortError, "EXECABORT"),
    (OutOfMemoryError, "OOM"),
)


def _server_text(e: RedisError) -> str | None:
    """The error reply as the server sent it; None when the command failed
    without a reply (connection, timeout)."""
    code = getattr(e, "status_code", None)
    if code:
        return f"{code} {e}"
    for cls, prefix in _PREFIXES:
        if isinstance(e, cls):
            return f"{prefix} {e}"
    if isinstance(e, ResponseError):
        text = str(e)
        # An unknown prefix (WRONGTYPE, BUSY) stays in the text; redis-py
        # before 8 drops a leading "ERR " without a trace.
        first = text.split(" ", 1)[0]
        return text if first.isalpha() and first.isupper() else f"ERR {text}"
    return None


def _unavailable(e: BaseException) -> Unavailable:
    return Unavailable(f"redis unavailable: {type(e).__name__}: {e}")


# What a failed command can raise: an error reply (a ResponseError, read by
# core's table) or anything else: connection failures, timeouts, the Cluster
# client giving up on its slot map, and redis-py's own races when a node goes
# away mid-command (an AttributeError on a connection closed under it during
# a failover). None of those is a decision: all are Unavailable.
_TRANSPORT = (Exception,)


def _client_options(timeout_ms: int, tls_ca_file: str | None) -> dict[str, Any]:
    seconds = check_timeout_ms(timeout_ms) / 1000
    options: dict[str, Any] = {
        "socket_timeout": seconds,
        "socket_connect_timeout": seconds,
        # One reconnect for a connection the server dropped (restart,
        # failover); never a second send after a timeout.
        "retry": Retry(NoBackoff(), 1, (RedisConnectionError,)),
    }
    if tls_ca_file is not None:
        options.update(ssl_ca_certs=tls_ca_file, ssl_cert_reqs="required", ssl_check_hostname=True)
    return options


def _async_client_options(timeout_ms: int, tls_ca_file: str | None) -> dict[str, Any]:
    options = _client_options(timeout_ms, tls_ca_file)
    options["retry"] = AsyncRetry(NoBackoff(), 1, (RedisConnectionError,))
    return options


def _cluster_nodes(urls: Sequence[str], node_class: Any) -> tuple[list[Any], dict[str, Any]]:
    """Seed nodes from `urls`, and the first URL's credentials and scheme."""
    from ._errors import InvalidArgument

    if isinstance(urls, str) or not urls or not all(isinstance(u, str) for u in urls):
        raise InvalidArgument("urls: at least one Cluster node URL (a str) is needed", "urls")
    nodes = []
    for url in urls:
        parts = urllib.parse.urlsplit(url)
        try:
            port = parts.port or 6379
        except ValueError as e:
            raise InvalidArgument(f"urls: {url!r}: {e}", "urls") from e
        nodes.append(node_class(parts.hostname or "localhost", port))
    first = urllib.parse.urlsplit(urls[0])
    options: dict[str, Any] = {}
    if first.username:
        options["username"] = urllib.parse.unquote(first.username)
    if first.password:
        options["password"] = urllib.parse.unquote(first.password)
    if first.scheme == "rediss":
        options["ssl"] = True
    return nodes, options


class Limiter:
    """A sliding-window limiter on Redis (redis-py, synchronous).

    `client` is a `redis.Redis` or a `redis.cluster.RedisCluster`; its own
    socket timeout bounds every check (`from_url` and `from_cluster` set one).
    Thread-safe as far as the client is (redis-py's pool is).
    """

    def __init__(
        self, client: SyncClient, policy: Policy, *, metrics: Metrics | None = None
    ) -> None:
        if not isinstance(policy, Policy):
            raise TypeError(f"policy must be a slidelimit.Policy, got {type(policy).__name__}")
        self._client = client
        self._policy = policy
        self._metrics = metrics

    @classmethod
    def from_url(
        cls,
        url: str,
        policy: Policy,
        *,
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
        tls_ca_file: str | None = None,
        metrics: Metrics | None = None,
    ) -> Limiter:
        """A limiter on its own `redis.Redis` for `url` (redis://, rediss://,
        user and password allowed), every call bounded by `timeout_ms`."""
        options = _client_options(timeout_ms, tls_ca_file)
        return cls(redis.Redis.from_url(url, **options), policy, metrics=metrics)

    @classmethod
    def from_cluster(
        cls,
        urls: Sequence[str],
        policy: Policy,
        *,
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
        tls_ca_file: str | None = None,
        metrics: Metrics | None = None,
    ) -> Limiter:
        """A limiter on its own `RedisCluster` seeded with `urls`."""
        options = _client_options(timeout_ms, tls_ca_file)
        # The Cluster client's own retries (with backoff) follow a failover:
        # they refresh the slot map and replace connections the old master
        # closed; a single retry leaves most callers on a dead connection.
        del options["retry"]
        nodes, credentials = _cluster_nodes(urls, redis.cluster.ClusterNode)
        options.update(credentials)
        try:
            client = redis.cluster.RedisCluster(startup_nodes=nodes, **options)
        except _TRANSPORT as e:
            raise _unavailable(e) from e
        return cls(client, policy, metrics=metrics)

    @staticmethod
    def memory(
        policy: Policy, clock: Clock | None = None, *, metrics: Metrics | None = None
    ) -> Limiter:
        """The embedded engine (one process, no Redis), with the same methods.
        `clock` returns Unix milliseconds (default: the wall clock); it is the
        engine's server time."""
        return _MemoryLimiter(policy, clock, metrics)

    @property
    def policy(self) -> Policy:
        return self._policy

    def with_policy(self, policy: Policy) -> Limiter:
        """A limiter for another policy on the same client (or memory engine)."""
        return Limiter(self._client, policy, metrics=self._metrics)

    def key(self, tenant: str) -> str:
        """The Redis key of `tenant` under this limiter's policy."""
        return self._policy.key(tenant)

    def acquire(self, tenant: str, cost: int = 1) -> Decision:
        """Takes `cost` permits for `tenant` if they fit, on Redis `TIME`."""
        # _run inlined: this is the hot path.
        policy = self._policy
        call = policy._call(tenant, cost, None, False)
        try:
            reply = self._client.evalsha(*call)
        except _TRANSPORT as e:
            reply = self._after_error(e, call, False)
        d = policy._decide(reply)
        if self._metrics is not None:
            self._metrics.observe(self._policy, tenant, d)
        return d

    def acquire_at(self, tenant: str, now_ms: int, cost: int = 1) -> Decision:
        """`acquire` at the caller's time (tests, replays)."""
        d = self._run(self._policy._call(tenant, cost, now_ms, False), False)
        if self._metrics is not None:
            self._metrics.observe(self._policy, tenant, d)
        return d

    def peek(self, tenant: str, cost: int = 1, now_ms: int | None = None) -> Decision:
        """What `acquire` would answer, recording nothing."""
        return self._run(self._policy._call(tenant, cost, now_ms, True), True)

    def reset(self, tenant: str) -> None:
        """Forgets everything recorded for `tenant`."""
        key = self._policy.key(tenant)
        try:
            self._client.delete(key)
        except _TRANSPORT as e:
            raise _command_error(e) from e

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> Limiter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self, call: tuple[Any, ...], peek: bool) -> Decision:
        try:
            reply = self._client.evalsha(*call)
        except _TRANSPORT as e:
            reply = self._after_error(e, call, peek)
        return self._policy._decide(reply)

    def _after_error(self, e: BaseException, call: tuple[Any, ...], peek: bool) -> Any:
        error = _call_error(e, self._policy, call[2])
        if error is not None:
            raise error from e
        try:
            return self._client.eval(self._policy._script_text(peek), *call[1:])
        except _TRANSPORT as e2:
            raise _retried_call_error(e2, self._policy, call[2]) from e2


def _call_error(e: BaseException, policy: Policy, key: str) -> BaseException | None:
    """What a failed script call raises, by core's table; None when core says
    to send it once more as EVAL (NOSCRIPT)."""
    text = _server_text(e) if isinstance(e, RedisError) else None
    if text is None:
        return _unavailable(e)
    return policy._server_error(text, key, False)


def _retried_call_error(e: BaseException, policy: Policy, key: str) -> BaseException:
    """What the EVAL after a NOSCRIPT raises when it fails too."""
    text = _server_text(e) if isinstance(e, RedisError) else None
    if text is None:
        return _unavailable(e)
    error = policy._server_error(text, key, True)
    assert error is not None, "after the retry core's table always names an error"
    return error


def _command_error(e: BaseException) -> BaseException:
    text = _server_text(e) if isinstance(e, RedisError) else None
    if text is None:
        return _unavailable(e)
    return _core._command_error(text)


class _MemoryLimiter(Limiter):
    """Limiter.memory: core's engine, the clock as server time."""

    def __init__(self, policy: Policy, clock: Clock | None, metrics: Metrics | None) -> None:
        if clock is not None and not callable(clock):
            raise TypeError(f"clock must be callable, got {type(clock).__name__}")
        if not isinstance(policy, Policy):
            raise TypeError(f"policy must be a slidelimit.Policy, got {type(policy).__name__}")
        self._policy = policy
        self._metrics = metrics
        self._engine = MemoryEngine()
        self._clock = clock or _wall_ms

    def _check(self, tenant: str, cost: int, now_ms: int | None, peek: bool) -> Decision:
        return self._engine.check(self._policy, tenant, cost, now_ms, self._clock(), peek)

    def acquire(self, tenant: str, cost: int = 1) -> Decision:
        d = self._check(tenant, cost, None, False)
        if self._metrics is not None:
            self._metrics.observe(self._policy, tenant, d)
        return d

    def acquire_at(self, tenant: str, now_ms: int, cost: int = 1) -> Decision:
        d = self._engine.check(self._policy, tenant, cost, now_ms, self._clock(), False)
        if self._metrics is not None:
            self._metrics.observe(self._policy, tenant, d)
        return d

    def peek(self, tenant: str, cost: int = 1, now_ms: int | None = None) -> Decision:
        return self._check(tenant, cost, now_ms, True)

    def reset(self, tenant: str) -> None:
        self._engine.reset(self._policy, tenant)

    def close(self) -> None:
        pass

    def with_policy(self, policy: Policy) -> Limiter:
        other = _MemoryLimiter(policy, self._clock, self._metrics)
        other._engine = self._engine
        return other


class AsyncLimiter:
    """Limiter for asyncio: `redis.asyncio.Redis` or `redis.asyncio.RedisCluster`,
    the same methods as coroutines."""

    def __init__(
        self, client: AsyncClient, policy: Policy, *, metrics: Metrics | None = None
    ) -> None:
        if not isinstance(policy, Policy):
            raise TypeError(f"policy must be a slidelimit.Policy, got {type(policy).__name__}")
        self._client = client
        self._policy = policy
        self._metrics = metrics

    @classmethod
    def from_url(
        cls,
        url: str,
        policy: Policy,
        *,
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
        tls_ca_file: str | None = None,
        metrics: Metrics | None = None,
    ) -> AsyncLimiter:
        options = _async_client_options(timeout_ms, tls_ca_file)
        return cls(redis.asyncio.Redis.from_url(url, **options), policy, metrics=metrics)

    @classmethod
    def from_cluster(
        cls,
        urls: Sequence[str],
        policy: Policy,
        *,
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
        tls_ca_file: str | None = None,
        metrics: Metrics | None = None,
    ) -> AsyncLimiter:
        """Connects lazily: an unreachable Cluster is `Unavailable` on the first call."""
        options = _async_client_options(timeout_ms, tls_ca_file)
        del options["retry"]  # as in Limiter.from_cluster
        nodes, credentials = _cluster_nodes(urls, redis.asyncio.cluster.ClusterNode)
        options.update(credentials)
        client = redis.asyncio.RedisCluster(startup_nodes=nodes, **options)
        return cls(client, policy, metrics=metrics)

    @staticmethod
    def memory(
        policy: Policy, clock: Clock | None = None, *, metrics: Metrics | None = None
    ) -> AsyncLimiter:
        return _AsyncMemoryLimiter(policy, clock, metrics)

    @property
    def policy(self) -> Policy:
        return self._policy

    def with_policy(self, policy: Policy) -> AsyncLimiter:
        """A limiter for another policy on the same client (or memory engine)."""
        return AsyncLimiter(self._client, policy, metrics=self._metrics)

    def key(self, tenant: str) -> str:
        return self._policy.key(tenant)

    async def acquire(self, tenant: str, cost: int = 1) -> Decision:
        d = await self._run(self._policy._call(tenant, cost, None, False), False)
        if self._metrics is not None:
            self._metrics.observe(self._policy, tenant, d)
        return d

    async def acquire_at(self, tenant: str, now_ms: int, cost: int = 1) -> Decision:
        d = await self._run(self._policy._call(tenant, cost, now_ms, False), False)
        if self._metrics is not None:
            self._metrics.observe(self._policy, tenant, d)
        return d

    async def peek(self, tenant: str, cost: int = 1, now_ms: int | None = None) -> Decision:
        return await self._run(self._policy._call(tenant, cost, now_ms, True), True)

    async def reset(self, tenant: str) -> None:
        key = self._policy.key(tenant)
        try:
            await self._client.delete(key)
        except _TRANSPORT as e:
            raise _command_error(e) from e

    async def aclose(self) -> None:
        await self._client.aclose()

    async def __aenter__(self) -> AsyncLimiter:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _run(self, call: tuple[Any, ...], peek: bool) -> Decision:
        try:
            try:
                reply = await self._client.evalsha(*call)
            except AttributeError:
                # redis-py's asyncio Cluster client, while it refreshes its
                # slot map after a failover, can close a connection another
                # task is about to write to ("'NoneType' object has no
                # attribute 'writelines'"): nothing was sent, so one resend
                # cannot count twice.
                reply = await self._client.evalsha(*call)
        except _TRANSPORT as e:
            reply = await self._after_error(e, call, peek)
        return self._policy._decide(reply)

    async def _after_error(self, e: BaseException, call: tuple[Any, ...], peek: bool) -> Any:
        error = _call_error(e, self._policy, call[2])
        if error is not None:
            raise error from e
        try:
            return await self._client.eval(self._policy._script_text(peek), *call[1:])
        except _TRANSPORT as e2:
            raise _retried_call_error(e2, self._policy, call[2]) from e2


class _AsyncMemoryLimiter(AsyncLimiter):
    def __init__(self, policy: Policy, clock: Clock | None, metrics: Metrics | None) -> None:
        self._sync = _MemoryLimiter(policy, clock, metrics)
        self._policy = policy

    async def acquire(self, tenant: str, cost: int = 1) -> Decision:
        return self._sync.acquire(tenant, cost)

    async def acquire_at(self, tenant: str, now_ms: int, cost: int = 1) -> Decision:
        return self._sync.acquire_at(tenant, now_ms, cost)

    async def peek(self, tenant: str, cost: int = 1, now_ms: int | None = None) -> Decision:
        return self._sync.peek(tenant, cost, now_ms)

    async def reset(self, tenant: str) -> None:
        self._sync.reset(tenant)

    async def aclose(self) -> None:
        pass

    def with_policy(self, policy: Policy) -> AsyncLimiter:
        other = _AsyncMemoryLimiter.__new__(_AsyncMemoryLimiter)
        other._sync = self._sync.with_policy(policy)  # type: ignore[assignment]
        other._policy = policy
        return other
