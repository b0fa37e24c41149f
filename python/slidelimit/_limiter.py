"""Limiter and AsyncLimiter: redis-py I/O around core's calls and replies.

Each check is one EVALSHA of the call core built; on NOSCRIPT the same call
goes once as EVAL to the same node (RedisCluster routes both by the key).
What a server error means is core's table; a connection failure or timeout
is `Unavailable`, never a decision.

The local deny cache (core's, in the extension): after Redis denies an
acquire on server time, an acquire of the same tenant and at least the same
cost within the retry is denied in-process, without a Redis call.
"""

from __future__ import annotations

import asyncio
import collections.abc
import inspect
import os
import sysconfig
import threading
import time
import urllib.parse
import weakref
from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING, Any, Callable, Union

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.exceptions import (
    AskError,
    AuthenticationError,
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
from ._core import Decision, DenyCache, MemoryEngine, Policy, check_timeout_ms
from ._errors import InvalidArgument, InvalidType, Unavailable

if TYPE_CHECKING:
    from .metrics import Metrics

SyncClient = Union["redis.Redis", "redis.cluster.RedisCluster"]
AsyncClient = Union["redis.asyncio.Redis", "redis.asyncio.RedisCluster"]
Clock = Callable[[], int]
#: The `deny_cache` option: True (on, core's default capacity), False (off)
#: or an int (on, that capacity).
DenyCacheOption = Union[bool, int]

#: Tenants a limiter's deny cache holds when `deny_cache=True` (core's).
DEFAULT_DENY_CACHE_CAPACITY: int = _core.DEFAULT_DENY_CACHE_CAPACITY

#: The per-call timeout of the clients `from_url` and `from_cluster` build (core's).
DEFAULT_TIMEOUT_MS: int = _core.DEFAULT_TIMEOUT_MS


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


def _mono_ms() -> int:
    """The deny cache's clock: monotonic milliseconds."""
    return time.monotonic_ns() // 1_000_000


# Tenants whose default call (cost 1, Redis TIME) a limiter keeps: that call
# depends on the tenant alone, and building it is most of the binding's CPU
# per check (docs/python.md, "Benchmarks"), as in the Node binding.
_CALL_CACHE_SIZE = 2048


class _CallCache:
    """Core's calls for `acquire(tenant)`, by tenant, bounded: two
    generations approximate LRU without reordering on every hit (a hit in
    the old one moves to the young one; a full young one replaces the old).
    A race between threads can only cost a hit: every call kept is core's."""

    __slots__ = ("_old", "_policy", "_young")

    def __init__(self, policy: Policy) -> None:
        self._policy = policy
        self._young: dict[str, tuple[Any, ...]] = {}
        self._old: dict[str, tuple[Any, ...]] = {}

    def acquire_call(self, tenant: str, cost: int) -> tuple[Any, ...]:
        """Core's call for acquire(tenant, cost) on Redis TIME: kept for cost
        1 and a str tenant, built by core (which checks both) otherwise."""
        if not (type(cost) is int and cost == 1 and type(tenant) is str):
            return self._policy._call(tenant, cost, None, False)
        call = self._young.get(tenant)
        if call is None:
            call = self._old.get(tenant)
            if call is None:
                call = self._policy._call(tenant, 1, None, False)
            if len(self._young) >= _CALL_CACHE_SIZE:
                self._old, self._young = self._young, {}
            self._young[tenant] = call
        return call


def _forget_denials(cache: DenyCache | None, tenant: str) -> None:
    """Drops `tenant`'s cached denial in every limiter of the process,
    through this limiter's cache or, with none, core's process-wide call."""
    if cache is not None:
        cache.forget(tenant)
    else:
        _core._forget_tenant(tenant)


def _deny_cache(option: DenyCacheOption) -> DenyCache | None:
    """The cache `option` asks for; an int is core's to check (1 up to
    `MAX_DENY_CACHE_CAPACITY`, else InvalidArgument on deny_cache_capacity)."""
    if option is True:
        return DenyCache(DEFAULT_DENY_CACHE_CAPACITY)
    if option is False:
        return None
    return DenyCache(option)


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
    if isinstance(e, AuthenticationError):
        # redis-py 7 keeps neither word; NOAUTH's text is "Authentication required."
        word = "NOAUTH" if str(e).startswith("Authentication required") else "WRONGPASS"
        return f"{word} {e}"
    if isinstance(e, ResponseError):
        text = str(e)
        # An unknown prefix (WRONGTYPE, BUSY) stays in the text; redis-py
        # before 8 drops a leading "ERR " without a trace.
        first = text.split(" ", 1)[0]
        return text if first.isalpha() and first.isupper() else f"ERR {text}"
    return None


def _reply_text(e: BaseException) -> str | None:
    """The server's error reply behind what the client raised, or None.
    A Cluster client that cannot start says so in its own exception, raised
    from what a node answered: a refused password (redis-py's
    AuthenticationError) is still the server's refusal, not an outage."""
    if isinstance(e, RedisError):
        return _server_text(e)
    cause = e.__cause__
    while cause is not None:
        if isinstance(cause, AuthenticationError):
            return _server_text(cause)
        cause = cause.__cause__
    return None


def _unavailable(e: BaseException) -> Unavailable:
    """The Unavailable for what the client raised. An exception raised into
    the call from outside the client, by a signal handler of the caller's (a
    Celery soft time limit, an alarm), is the caller's own: it goes on as it
    is, never as an outage."""
    if not _raised_by_the_client(e):
        raise e
    if isinstance(e, RuntimeError) and any(text in str(e) for text in _OTHER_LOOP):
        # A misuse, not an outage: a caller failing open on Unavailable
        # would run unlimited for as long as it lasts.
        raise RuntimeError(
            "slidelimit: this AsyncLimiter's redis-py client belongs to the event loop it"
            " first ran on, which is closed or is not this one; make one AsyncLimiter per"
            f" event loop (each asyncio.run makes a new loop): {e}"
        ) from e
    return Unavailable(f"redis unavailable: {type(e).__name__}: {e}")


# What asyncio says when a client made on one event loop is used on another.
_OTHER_LOOP = ("Event loop is closed", "attached to a different loop")


_STDLIB_DIRS = tuple({sysconfig.get_path("stdlib"), sysconfig.get_path("platstdlib")})
_SITE_DIRS = tuple({sysconfig.get_path("purelib"), sysconfig.get_path("platlib")})


def _raised_by_the_client(e: BaseException) -> bool:
    """Whether `e` came from redis-py, or what runs under it (sockets, ssl,
    asyncio, gevent's sockets), rather than from code that interrupted the
    call: an error of redis-py's or of the OS, or else told by the frame
    that raised it."""
    if isinstance(e, (RedisError, OSError)) or e.__traceback__ is None:
        return True
    tb = e.__traceback__
    while tb.tb_next is not None:
        tb = tb.tb_next
    module = tb.tb_frame.f_globals.get("__name__", "")
    if module.split(".")[0] == "redis":
        return True
    path = tb.tb_frame.f_code.co_filename
    return path.startswith(_STDLIB_DIRS) and not path.startswith(_SITE_DIRS)


# What a failed command can raise: an error reply (a ResponseError, read by
# core's table) or anything else: connection failures, timeouts, the Cluster
# client giving up on its slot map, and redis-py's own races when a node goes
# away mid-command (an AttributeError on a connection closed under it during
# a failover). None of those is a decision: all are Unavailable, but for an
# exception the caller's own code raised into the call (_unavailable).
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


def _without_maint_notifications(options: dict[str, Any], taker: Callable[..., Any]) -> None:
    """Turns redis-py's maintenance notifications off in `options`, where
    `taker` (the class the option goes to) has them. redis-py 8 turns them on
    ("auto") by default, and with them on its pools skip their check that a
    connection handed out holds no unread reply: a call cut between its send
    and its read (a signal's exception, such as a Celery soft time limit)
    left its reply for the next call on that connection, which took another
    call's decision for its own. Open-source Redis refuses them anyway (a
    failed command on every new connection). Older clients without them
    (redis-py 7's asyncio, its Cluster) keep the check on and refuse the
    option."""
    if "maint_notifications_config" in inspect.signature(taker).parameters:
        from redis.maint_notifications import MaintNotificationsConfig

        options["maint_notifications_config"] = MaintNotificationsConfig(enabled=False)


# The pools of the clients made here. redis-py 8's default pool holds 100
# connections and fails the 101st caller at once (MaxConnectionsError: a
# Celery worker of 150 threads would see Redis "unavailable" while it is
# fine). A standalone client keeps that size, and a caller past it waits up
# to timeout_ms for a free connection. redis-py's Cluster clients take no
# waiting pool for their nodes, so their pools are left unbounded and the
# client is gated instead (_GatedCluster): at most as many calls in flight.
#: The connections a client from `from_url` or `from_cluster` opens (on
#: each node); a call past them waits up to `timeout_ms` for a free one.
POOL_MAX_CONNECTIONS = 100
CLUSTER_MAX_CONNECTIONS = 2**31


def _pool_options(timeout_ms: int) -> dict[str, Any]:
    return {"max_connections": POOL_MAX_CONNECTIONS, "timeout": timeout_ms / 1000}


def _no_free_connection(timeout_ms: int) -> RedisConnectionError:
    return RedisConnectionError(
        f"no free connection within {timeout_ms} ms"
        f" ({POOL_MAX_CONNECTIONS} calls in flight on this client)"
    )


def _require_policy(policy: object) -> None:
    if not isinstance(policy, Policy):
        raise InvalidType(
            f"policy: must be a slidelimit.Policy, got {type(policy).__name__}", "policy"
        )


def _require_metrics(metrics: object) -> None:
    """None, or what `Metrics` names (checked here, not at the first permit)."""
    if metrics is not None and not (
        callable(getattr(metrics, "observe", None))
        and callable(getattr(metrics, "observe_local_denial", None))
    ):
        raise InvalidType(
            "metrics: must be a slidelimit Metrics (observe and observe_local_denial),"
            f" got {type(metrics).__name__}",
            "metrics",
        )


# A client of the wrong kind would fail on the first call, and every failure
# there reads as an outage (Unavailable), which a caller may fail open on:
# so it is refused here. Pipelines are clients too in redis-py's classes, but
# queue commands instead of answering them.
_SYNC_CLIENTS = (redis.Redis, redis.cluster.RedisCluster)
_SYNC_PIPELINES = (redis.client.Pipeline, redis.cluster.ClusterPipeline)
_ASYNC_CLIENTS = (redis.asyncio.Redis, redis.asyncio.RedisCluster)
_ASYNC_PIPELINES = (redis.asyncio.client.Pipeline, redis.asyncio.cluster.ClusterPipeline)


def _require_client(client: object, asynchronous: bool) -> None:
    clients, pipelines = (
        (_ASYNC_CLIENTS, _ASYNC_PIPELINES) if asynchronous else (_SYNC_CLIENTS, _SYNC_PIPELINES)
    )
    if isinstance(client, clients) and not isinstance(client, pipelines):
        return
    if asynchronous:
        wanted = "a redis.asyncio.Redis or redis.asyncio.RedisCluster"
        other_kind = isinstance(client, _SYNC_CLIENTS)
        other = "; a synchronous client goes to Limiter" if other_kind else ""
    else:
        wanted = "a redis.Redis or redis.cluster.RedisCluster"
        other_kind = isinstance(client, _ASYNC_CLIENTS)
        other = "; an asyncio client goes to AsyncLimiter" if other_kind else ""
    if isinstance(client, pipelines):
        other = "; a pipeline queues the script instead of running it"
    raise InvalidType(f"client: must be {wanted}, got {type(client).__name__}{other}", "client")


def _check_url(field: str, url: object, schemes: tuple[str, ...]) -> urllib.parse.SplitResult:
    """`url`, split, once it is a str with a scheme redis-py serves and a
    readable port. The messages never quote the URL: it may hold a password."""
    if not isinstance(url, str):
        raise InvalidType(f"{field}: must be a str, got {type(url).__name__}", field)
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in schemes:
        wanted = ", ".join(s + "://" for s in schemes)
        got = f"{parts.scheme}://" if parts.scheme else "none"
        raise InvalidArgument(f"{field}: the scheme must be one of {wanted}, got {got}", field)
    try:
        _ = parts.port  # urllib reads the port only when asked
    except ValueError as e:
        raise InvalidArgument(f"{field}: {e}", field) from e
    return parts


def _check_tls_ca_file(tls_ca_file: object, scheme: str) -> None:
    if tls_ca_file is None:
        return
    if not isinstance(tls_ca_file, str):
        raise InvalidType(
            f"tls_ca_file: must be a str (a path), got {type(tls_ca_file).__name__}", "tls_ca_file"
        )
    if not tls_ca_file:
        raise InvalidArgument("tls_ca_file: must not be empty", "tls_ca_file")
    if scheme != "rediss":
        raise InvalidArgument(
            f"tls_ca_file: is for TLS, which needs a rediss:// URL, not {scheme}://", "tls_ca_file"
        )


_URL_SCHEMES = ("redis", "rediss", "unix")
_CLUSTER_SCHEMES = ("redis", "rediss")


def _require_now_ms(now_ms: object) -> None:
    """acquire_at's time is required: None would quietly mean Redis TIME."""
    if now_ms is None:
        raise InvalidType("now_ms: must be an int, got NoneType", "now_ms")


class _GatedCluster:
    """A `RedisCluster` with at most POOL_MAX_CONNECTIONS calls in flight, so
    at most that many connections on any node: without the gate each node
    opens a connection per call in flight. A call past them waits up to
    `timeout_ms` for one to finish, as on `from_url`'s waiting pool.
    Anything else (`close`, the client's settings) goes to the client as
    is."""

    def __init__(self, client: redis.cluster.RedisCluster, timeout_ms: int) -> None:
        self._client = client
        self._timeout_ms = timeout_ms
        self._slots = threading.BoundedSemaphore(POOL_MAX_CONNECTIONS)
        _GATES.add(self)

    def _refill(self) -> None:
        """A forked child starts with every slot free: the slots held by the
        parent's calls in flight at the fork would never come back in it."""
        self._slots = threading.BoundedSemaphore(POOL_MAX_CONNECTIONS)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def _send(self, command: Callable[..., Any], args: tuple[Any, ...]) -> Any:
        if not self._slots.acquire(timeout=self._timeout_ms / 1000):
            raise _no_free_connection(self._timeout_ms)
        try:
            return command(*args)
        finally:
            self._slots.release()

    def evalsha(self, *args: Any) -> Any:
        return self._send(self._client.evalsha, args)

    def eval(self, *args: Any) -> Any:
        return self._send(self._client.eval, args)

    def delete(self, *args: Any) -> Any:
        return self._send(self._client.delete, args)


# Every live gate, refilled in a forked child (Celery's prefork pool forks a
# process that may already hold a limiter); one hook for all of them, since
# a hook cannot be unregistered.
_GATES: weakref.WeakSet[_GatedCluster] = weakref.WeakSet()


def _refill_gates_after_fork() -> None:
    for gate in list(_GATES):
        gate._refill()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_refill_gates_after_fork)


# The pause before an asyncio Cluster call redis-py failed unwritten goes
# again (_AsyncCluster._resend): a slot-map read takes a few ms.
_UNSENT_PAUSE_S = 0.005


class _AsyncCluster:
    """A `redis.asyncio.RedisCluster` that reads the slot map before its
    first call goes out, and for `from_cluster` the gate of _GatedCluster
    (`timeout_ms`; None: no gate, a client the user made keeps its pool).

    redis-py 8.1's client reads the slot map on its first call; when many
    tasks make the first calls together, some fail ("Connection closed by
    server") and the client keeps dropping connections under other tasks'
    calls from then on: 32 tasks making 3,000 calls opened about 9,000
    connections, took 11 to 13 s where 0.3 s do, and 27 to 49 were Unavailable.
    The lock and semaphore are made on the first call, inside the event loop
    that runs it (Python 3.9's bind to a loop when made)."""

    def __init__(self, client: redis.asyncio.RedisCluster, timeout_ms: int | None) -> None:
        self._client = client
        self._timeout_ms = timeout_ms
        self._slots: asyncio.Semaphore | None = None
        self._first: asyncio.Lock | None = None
        self._ready = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    async def _initialize(self) -> None:
        if self._first is None:
            self._first = asyncio.Lock()
        async with self._first:
            if not self._ready:
                await self._client.initialize()
                self._ready = True

    async def _resend(
        self, command: Callable[..., Awaitable[Any]], args: tuple[Any, ...], e: AttributeError
    ) -> Any:
        """A command redis-py failed before writing it, sent again while the
        client's socket timeout allows. Around a failover the client closes
        connections other tasks are about to write to ("'NoneType' object
        has no attribute 'writelines'"): nothing was sent, so a resend cannot
        count twice. A single resend left 24 to 36 calls of 32 tasks
        Unavailable through one failover (docs/python.md). Any other
        AttributeError may come after the write: raised as is."""
        deadline = time.monotonic() + _socket_timeout_s(self._client)
        while str(e).endswith("'writelines'") and time.monotonic() < deadline:
            await asyncio.sleep(_UNSENT_PAUSE_S)
            try:
                return await command(*args)
            except AttributeError as again:
                e = again
        raise e

    async def _call(self, command: Callable[..., Awaitable[Any]], args: tuple[Any, ...]) -> Any:
        try:
            return await command(*args)
        except AttributeError as e:
            return await self._resend(command, args, e)

    async def _send(self, command: Callable[..., Awaitable[Any]], args: tuple[Any, ...]) -> Any:
        if not self._ready:
            await self._initialize()
        if self._timeout_ms is None:
            return await self._call(command, args)
        slots = self._slots
        if slots is None:
            slots = self._slots = asyncio.Semaphore(POOL_MAX_CONNECTIONS)
        if slots.locked():
            # Only a call that must wait pays for wait_for's task.
            try:
                await asyncio.wait_for(slots.acquire(), self._timeout_ms / 1000)
            except asyncio.TimeoutError:
                raise _no_free_connection(self._timeout_ms) from None
        else:
            await slots.acquire()
        try:
            return await self._call(command, args)
        finally:
            slots.release()

    async def evalsha(self, *args: Any) -> Any:
        slots = self._slots  # made once the slot map is read
        if slots is not None and not slots.locked():
            # _send's common case, _call inline: every check comes this way.
            await slots.acquire()
            try:
                return await self._client.evalsha(*args)
            except AttributeError as e:
                return await self._resend(self._client.evalsha, args, e)
            finally:
                slots.release()
        return await self._send(self._client.evalsha, args)

    async def eval(self, *args: Any) -> Any:
        return await self._send(self._client.eval, args)

    async def delete(self, *args: Any) -> Any:
        return await self._send(self._client.delete, args)


def _async_client_options(timeout_ms: int, tls_ca_file: str | None) -> dict[str, Any]:
    options = _client_options(timeout_ms, tls_ca_file)
    options["retry"] = AsyncRetry(NoBackoff(), 1, (RedisConnectionError,))
    return options


def _cluster_nodes(
    urls: Sequence[str], node_class: Any, tls_ca_file: object
) -> tuple[list[Any], dict[str, Any]]:
    """Seed nodes from `urls`, and the first URL's credentials and scheme."""
    # A sequence: the first URL's credentials are the ones used, so an
    # unordered collection (or a generator, read once) would not do.
    if isinstance(urls, (str, bytes)) or not isinstance(urls, collections.abc.Sequence):
        raise InvalidType(
            f"urls: must be a list of Cluster node URLs (str), got {type(urls).__name__}", "urls"
        )
    if not urls or not all(isinstance(u, str) for u in urls):
        raise InvalidArgument("urls: at least one Cluster node URL (a str) is needed", "urls")
    split = [_check_url("urls", url, _CLUSTER_SCHEMES) for url in urls]
    nodes = [node_class(parts.hostname or "localhost", parts.port or 6379) for parts in split]
    first = split[0]
    _check_tls_ca_file(tls_ca_file, first.scheme)
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

    `deny_cache`: the local deny cache of `acquire` (True: on, with
    `DEFAULT_DENY_CACHE_CAPACITY` tenants; False: off; an int: on, with that
    many). It does not see a `reset` made by another process: such a tenant
    stays denied here until the cached retry runs out.
    """

    def __init__(
        self,
        client: SyncClient,
        policy: Policy,
        *,
        metrics: Metrics | None = None,
        deny_cache: DenyCacheOption = True,
    ) -> None:
        if not isinstance(client, _GatedCluster):  # with_policy's, checked already
            _require_client(client, asynchronous=False)
        _require_policy(policy)
        _require_metrics(metrics)
        # The client, or from_cluster's _GatedCluster around it.
        self._client: Any = client
        self._policy = policy
        self._metrics = metrics
        self._deny_option = deny_cache
        self._deny_cache = _deny_cache(deny_cache)
        self._calls = _CallCache(policy)

    @classmethod
    def from_url(
        cls,
        url: str,
        policy: Policy,
        *,
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
        tls_ca_file: str | None = None,
        metrics: Metrics | None = None,
        deny_cache: DenyCacheOption = True,
    ) -> Limiter:
        """A limiter on its own `redis.Redis` for `url` (redis://, rediss://,
        user and password allowed), every call bounded by `timeout_ms`; a
        call past the pool's 100 connections in flight first waits up to
        `timeout_ms` for a free one (docs/python.md, "Many threads")."""
        _check_tls_ca_file(tls_ca_file, _check_url("url", url, _URL_SCHEMES).scheme)
        options = _client_options(timeout_ms, tls_ca_file)
        _without_maint_notifications(options, redis.connection.AbstractConnection)
        pool = redis.BlockingConnectionPool.from_url(url, **_pool_options(timeout_ms), **options)
        client = redis.Redis(connection_pool=pool)
        client.auto_close_connection_pool = True
        return cls(client, policy, metrics=metrics, deny_cache=deny_cache)

    @classmethod
    def from_cluster(
        cls,
        urls: Sequence[str],
        policy: Policy,
        *,
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
        tls_ca_file: str | None = None,
        metrics: Metrics | None = None,
        deny_cache: DenyCacheOption = True,
    ) -> Limiter:
        """A limiter on its own `RedisCluster` seeded with `urls`."""
        # Checked before the client connects: a bad argument is no outage.
        _require_policy(policy)
        _require_metrics(metrics)
        _deny_cache(deny_cache)
        options = _client_options(timeout_ms, tls_ca_file)
        _without_maint_notifications(options, redis.cluster.RedisCluster)
        # The Cluster client's own retries (with backoff) follow a failover:
        # they refresh the slot map and replace connections the old master
        # closed; a single retry leaves most callers on a dead connection.
        del options["retry"]
        nodes, credentials = _cluster_nodes(urls, redis.cluster.ClusterNode, tls_ca_file)
        options.update(credentials)
        options["max_connections"] = CLUSTER_MAX_CONNECTIONS
        try:
            client = redis.cluster.RedisCluster(startup_nodes=nodes, **options)
        except _TRANSPORT as e:
            raise _command_error(e) from e
        limiter = cls(client, policy, metrics=metrics, deny_cache=deny_cache)
        limiter._client = _GatedCluster(client, timeout_ms)
        return limiter

    @staticmethod
    def memory(
        policy: Policy, clock: Clock | None = None, *, metrics: Metrics | None = None
    ) -> Limiter:
        """The embedded engine (one process, no Redis), with the same methods.
        `clock` returns Unix milliseconds (default: the wall clock); it is the
        engine's server time. It has no deny cache (it makes no Redis call to
        save)."""
        return _MemoryLimiter(policy, clock, metrics)

    @property
    def policy(self) -> Policy:
        return self._policy

    def with_policy(self, policy: Policy, *, deny_cache: DenyCacheOption | None = None) -> Limiter:
        """A limiter for another policy on the same client (or memory engine),
        with its own deny cache (`deny_cache` None: as this limiter's)."""
        option = self._deny_option if deny_cache is None else deny_cache
        return Limiter(self._client, policy, metrics=self._metrics, deny_cache=option)

    def key(self, tenant: str) -> str:
        """The Redis key of `tenant` under this limiter's policy (its first
        limit's; `policy.keys(tenant)` has every limit's)."""
        return self._policy.key(tenant)

    def acquire(self, tenant: str, cost: int = 1) -> Decision:
        """Takes `cost` permits for `tenant` if they fit (in every limit of
        the policy, or in none), on Redis `TIME`."""
        # _run inlined: this is the hot path.
        policy = self._policy
        call = self._calls.acquire_call(tenant, cost)
        cache = self._deny_cache
        if cache is not None:
            sent_ms = _mono_ms()
            local = cache.check(tenant, cost, sent_ms)
            if local is not None:
                _observe_local(self._metrics, policy, tenant, local)
                return local
        try:
            reply = self._client.evalsha(*call)
        except _TRANSPORT as e:
            reply = self._after_error(e, call, False)
        d = policy._decide(reply)
        if cache is not None:
            cache.record(tenant, cost, d, sent_ms)
        if self._metrics is not None:
            self._metrics.observe(policy, tenant, d)
        return d

    def acquire_at(self, tenant: str, now_ms: int, cost: int = 1) -> Decision:
        """`acquire` at the caller's time (tests, replays); never answered by
        the deny cache."""
        _require_now_ms(now_ms)
        d = self._run(self._policy._call(tenant, cost, now_ms, False), False)
        if self._metrics is not None:
            self._metrics.observe(self._policy, tenant, d)
        return d

    def peek(self, tenant: str, cost: int = 1, now_ms: int | None = None) -> Decision:
        """What `acquire` would answer, recording nothing."""
        return self._run(self._policy._call(tenant, cost, now_ms, True), True)

    def reset(self, tenant: str) -> None:
        """Forgets everything recorded for `tenant`: every limit's key, and
        the tenant's cached denial in every limiter of the process."""
        keys = self._policy.keys(tenant)
        _forget_denials(self._deny_cache, tenant)
        try:
            self._client.delete(*keys)
        except _TRANSPORT as e:
            raise _command_error(e) from e
        finally:
            # Again: a denial Redis gave before the DEL may have come back,
            # and been cached, while it ran.
            _forget_denials(self._deny_cache, tenant)

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
        resends = _Resends(self._client)
        while (pause := resends.pause(e)) is not None:
            time.sleep(pause)
            try:
                return self._client.evalsha(*call)
            except _TRANSPORT as again:
                e = again
        error = _call_error(e, self._policy, call[2])
        if error is not None:
            raise error from e
        try:
            return self._client.eval(self._policy._script_text(peek), *call[1:])
        except _TRANSPORT as e2:
            raise _retried_call_error(e2, self._policy, call[2]) from e2


def _observe_local(
    metrics: Metrics | None, policy: Policy, tenant: str, decision: Decision
) -> None:
    """A local denial counts as any denial, and as a local one."""
    if metrics is not None:
        metrics.observe(policy, tenant, decision)
        metrics.observe_local_denial(policy, tenant, decision)


class _Resends:
    """Core's resends of one script call that Redis refused without running
    it (TRYAGAIN: a slot migrating under a policy's keys): each wait is
    core's, and all of them together stay within the client's socket
    timeout, which bounds every call."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._attempt = 0
        self._deadline: float | None = None

    def pause(self, e: BaseException) -> float | None:
        """Seconds to wait before sending the call again, or None."""
        text = _reply_text(e)
        ms = None if text is None else _core._resend_pause_ms(text, min(self._attempt, 2**32 - 1))
        if ms is None:
            return None
        now = time.monotonic()
        if self._deadline is None:
            self._deadline = now + _socket_timeout_s(self._client)
        if now + ms / 1000 >= self._deadline:
            return None
        self._attempt += 1
        return ms / 1000


def _socket_timeout_s(client: Any) -> float:
    """The client's socket timeout (standalone or Cluster, sync or asyncio);
    DEFAULT_TIMEOUT_MS when it has none."""
    pool = getattr(client, "connection_pool", None)
    if pool is not None:
        kwargs = pool.connection_kwargs
    elif hasattr(client, "get_connection_kwargs"):
        kwargs = client.get_connection_kwargs()
    else:
        kwargs = {}
    timeout = kwargs.get("socket_timeout")
    return float(timeout) if timeout else DEFAULT_TIMEOUT_MS / 1000


def _call_error(e: BaseException, policy: Policy, key: str) -> BaseException | None:
    """What a failed script call raises, by core's table; None when core says
    to send it once more as EVAL (NOSCRIPT)."""
    text = _reply_text(e)
    if text is None:
        return _unavailable(e)
    return policy._server_error(text, key, False)


def _retried_call_error(e: BaseException, policy: Policy, key: str) -> BaseException:
    """What the EVAL after a NOSCRIPT raises when it fails too."""
    text = _reply_text(e)
    if text is None:
        return _unavailable(e)
    error = policy._server_error(text, key, True)
    assert error is not None, "after the retry core's table always names an error"
    return error


def _command_error(e: BaseException) -> BaseException:
    text = _reply_text(e)
    if text is None:
        return _unavailable(e)
    return _core._command_error(text)


class _MemoryLimiter(Limiter):
    """Limiter.memory: core's engine, the clock as server time."""

    def __init__(self, policy: Policy, clock: Clock | None, metrics: Metrics | None) -> None:
        if clock is not None and not callable(clock):
            raise InvalidType(f"clock: must be callable, got {type(clock).__name__}", "clock")
        _require_policy(policy)
        _require_metrics(metrics)
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
        _require_now_ms(now_ms)
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

    def with_policy(self, policy: Policy, *, deny_cache: DenyCacheOption | None = None) -> Limiter:
        """`deny_cache` is checked as on Redis, and unused: the engine has no
        deny cache."""
        if deny_cache is not None:
            _deny_cache(deny_cache)
        other = _MemoryLimiter(policy, self._clock, self._metrics)
        other._engine = self._engine
        return other


class AsyncLimiter:
    """Limiter for asyncio: `redis.asyncio.Redis` or `redis.asyncio.RedisCluster`,
    the same methods as coroutines, the same `deny_cache` option."""

    def __init__(
        self,
        client: AsyncClient,
        policy: Policy,
        *,
        metrics: Metrics | None = None,
        deny_cache: DenyCacheOption = True,
    ) -> None:
        if not isinstance(client, _AsyncCluster):  # with_policy's, checked already
            _require_client(client, asynchronous=True)
        _require_policy(policy)
        _require_metrics(metrics)
        # A Cluster client reads its slot map before the first call
        # (_AsyncCluster); from_cluster's also has the gate.
        self._client: Any = (
            _AsyncCluster(client, None)
            if isinstance(client, redis.asyncio.RedisCluster)
            else client
        )
        self._policy = policy
        self._metrics = metrics
        self._deny_option = deny_cache
        self._deny_cache = _deny_cache(deny_cache)
        self._calls = _CallCache(policy)

    @classmethod
    def from_url(
        cls,
        url: str,
        policy: Policy,
        *,
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
        tls_ca_file: str | None = None,
        metrics: Metrics | None = None,
        deny_cache: DenyCacheOption = True,
    ) -> AsyncLimiter:
        _check_tls_ca_file(tls_ca_file, _check_url("url", url, _URL_SCHEMES).scheme)
        options = _async_client_options(timeout_ms, tls_ca_file)
        _without_maint_notifications(options, redis.asyncio.connection.AbstractConnection)
        pool = redis.asyncio.BlockingConnectionPool.from_url(
            url, **_pool_options(timeout_ms), **options
        )
        client = redis.asyncio.Redis(connection_pool=pool)
        client.auto_close_connection_pool = True
        return cls(client, policy, metrics=metrics, deny_cache=deny_cache)

    @classmethod
    def from_cluster(
        cls,
        urls: Sequence[str],
        policy: Policy,
        *,
        timeout_ms: int = DEFAULT_TIMEOUT_MS,
        tls_ca_file: str | None = None,
        metrics: Metrics | None = None,
        deny_cache: DenyCacheOption = True,
    ) -> AsyncLimiter:
        """Connects lazily: an unreachable Cluster is `Unavailable` on the first call."""
        options = _async_client_options(timeout_ms, tls_ca_file)
        _without_maint_notifications(options, redis.asyncio.cluster.RedisCluster)
        del options["retry"]  # as in Limiter.from_cluster
        nodes, credentials = _cluster_nodes(urls, redis.asyncio.cluster.ClusterNode, tls_ca_file)
        options.update(credentials)
        options["max_connections"] = CLUSTER_MAX_CONNECTIONS
        client = redis.asyncio.RedisCluster(startup_nodes=nodes, **options)
        limiter = cls(client, policy, metrics=metrics, deny_cache=deny_cache)
        limiter._client = _AsyncCluster(client, timeout_ms)  # the gate too
        return limiter

    @staticmethod
    def memory(
        policy: Policy, clock: Clock | None = None, *, metrics: Metrics | None = None
    ) -> AsyncLimiter:
        return _AsyncMemoryLimiter(policy, clock, metrics)

    @property
    def policy(self) -> Policy:
        return self._policy

    def with_policy(
        self, policy: Policy, *, deny_cache: DenyCacheOption | None = None
    ) -> AsyncLimiter:
        """A limiter for another policy on the same client (or memory engine),
        with its own deny cache (`deny_cache` None: as this limiter's)."""
        option = self._deny_option if deny_cache is None else deny_cache
        return AsyncLimiter(self._client, policy, metrics=self._metrics, deny_cache=option)

    def key(self, tenant: str) -> str:
        return self._policy.key(tenant)

    async def acquire(self, tenant: str, cost: int = 1) -> Decision:
        policy = self._policy
        call = self._calls.acquire_call(tenant, cost)
        cache = self._deny_cache
        if cache is not None:
            sent_ms = _mono_ms()
            local = cache.check(tenant, cost, sent_ms)
            if local is not None:
                _observe_local(self._metrics, policy, tenant, local)
                return local
        d = await self._run(call, False)
        if cache is not None:
            cache.record(tenant, cost, d, sent_ms)
        if self._metrics is not None:
            self._metrics.observe(policy, tenant, d)
        return d

    async def acquire_at(self, tenant: str, now_ms: int, cost: int = 1) -> Decision:
        _require_now_ms(now_ms)
        d = await self._run(self._policy._call(tenant, cost, now_ms, False), False)
        if self._metrics is not None:
            self._metrics.observe(self._policy, tenant, d)
        return d

    async def peek(self, tenant: str, cost: int = 1, now_ms: int | None = None) -> Decision:
        return await self._run(self._policy._call(tenant, cost, now_ms, True), True)

    async def reset(self, tenant: str) -> None:
        keys = self._policy.keys(tenant)
        _forget_denials(self._deny_cache, tenant)
        try:
            await self._client.delete(*keys)
        except _TRANSPORT as e:
            raise _command_error(e) from e
        finally:
            _forget_denials(self._deny_cache, tenant)

    async def aclose(self) -> None:
        await self._client.aclose()

    async def __aenter__(self) -> AsyncLimiter:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def _run(self, call: tuple[Any, ...], peek: bool) -> Decision:
        try:
            reply = await self._client.evalsha(*call)
        except _TRANSPORT as e:
            reply = await self._after_error(e, call, peek)
        return self._policy._decide(reply)

    async def _after_error(self, e: BaseException, call: tuple[Any, ...], peek: bool) -> Any:
        resends = _Resends(self._client)
        while (pause := resends.pause(e)) is not None:
            await asyncio.sleep(pause)
            try:
                return await self._client.evalsha(*call)
            except _TRANSPORT as again:
                e = again
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

    def with_policy(
        self, policy: Policy, *, deny_cache: DenyCacheOption | None = None
    ) -> AsyncLimiter:
        other = _AsyncMemoryLimiter.__new__(_AsyncMemoryLimiter)
        other._sync = self._sync.with_policy(policy, deny_cache=deny_cache)  # type: ignore[assignment]
        other._policy = policy
        return other
