"""Celery integration: a task whose limiter denies is deferred, not retried.

    from slidelimit.celery import rate_limited

    @app.task(bind=True, acks_late=True)
    @rate_limited(limiter, tenant=lambda address, api_key: api_key)
    def geocode(self, address, api_key): ...

Before the body runs, the task acquires from `limiter` for its tenant. When
allowed, the body runs (once). When denied, the same task (same id, args,
kwargs, headers, routing) is published again with a countdown of
`retry_after` plus a random jitter, and this run ends with `Ignore`:

- `request.retries` does not move and `max_retries` is untouched: the
  deferral is no retry, no task-retried or task-failed event is sent, and the
  task never enters RETRY or FAILURE for it;
- the number of deferrals rides in the `slidelimit-deferrals` header, capped
  by `max_deferrals` (past it the task fails with `DeferralLimitExceeded`);
- an absolute `expires` is kept on the republished message. A task whose
  `expires` passes before its next chance is not published again: it is
  marked REVOKED ("expired") in the result backend, as Celery marks an
  expired task, and ends with `Ignore`;
- in eager mode (`task_always_eager`, `.apply()`), and for a task called
  as a plain function (`geocode(...)`, no message), nothing can be published
  for later: a denial raises `RateLimited` instead (no recursion), and an
  unavailable Redis with "defer" raises `Unavailable`;
- when Redis is unavailable (`slidelimit.Unavailable`), `on_unavailable`
  decides: "defer" (default) publishes the task again after an exponential
  backoff (streak in the `slidelimit-outages` header, same cap), "run" fails
  open and runs the body, "fail" raises the error.
"""

from __future__ import annotations

import datetime
import functools
import os
import random
import threading
from typing import Any, Callable, NoReturn, TypeVar, Union

from celery import Task
from celery.exceptions import Ignore
from celery.utils.time import maybe_iso8601

from ._core import Decision, _check_cost
from ._errors import InvalidArgument, InvalidType, Unavailable
from ._limiter import Limiter

DEFERRALS_HEADER = "slidelimit-deferrals"
OUTAGES_HEADER = "slidelimit-outages"
ON_UNAVAILABLE = ("defer", "run", "fail")

# The latest eta a deferral asks for. A datetime stops at the year 9999, so
# a longer wait (a retry of about 7,970 years from 2026, which a long bucketed
# window can owe) would fail the task with OverflowError; it waits until then
# instead, as Go's Decision.RetryAfter saturates. A year short of the end, so
# that no time zone's offset passes it either.
LATEST_ETA = datetime.datetime(9999, 1, 1, tzinfo=datetime.timezone.utc)

# RabbitMQ's dead-lettering headers. Celery leaves them off a message it
# sends again (a retry), so that RabbitMQ does not take it for a cycle; the
# headers given here replace Celery's own, so a deferral leaves them off too.
_DEAD_LETTER_HEADERS = frozenset(
    {
        "x-death",
        "x-first-death-exchange",
        "x-first-death-queue",
        "x-first-death-reason",
        "x-last-death-exchange",
        "x-last-death-queue",
        "x-last-death-reason",
    }
)

F = TypeVar("F", bound=Callable[..., Any])
Tenant = Union[str, Callable[..., str]]


class RateLimited(Exception):
    """Eager mode only: the limiter denied and the task cannot be deferred."""

    def __init__(self, decision: Decision) -> None:
        # args = (decision,): the exception pickles (result backends store it).
        super().__init__(decision)
        self.decision = decision

    def __str__(self) -> str:
        return f"rate limited; retry after {self.decision.retry_after_ms} ms"


class DeferralLimitExceeded(Exception):
    """The task was deferred `max_deferrals` times already."""


def _header(task: Task, name: str) -> int:
    """A count this module keeps on the task (0 when absent). It writes only
    non-negative ints: anything else was put there by someone else, and
    reading it as 0 would start max_deferrals over, so it fails the run
    naming the header. Digits as text are read as the count."""
    request = task.request
    headers = request.headers or {}
    value = headers.get(name, getattr(request, name, None))
    if value is None:
        return 0
    if isinstance(value, str) and value.isascii() and value.isdigit():
        return int(value)  # a broker that hands headers over as text
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidArgument(
            f"{name}: the task's count must be a non-negative int, got {value!r}", name
        )
    return value


def _u64(field: str, value: object) -> int:
    """An int from 0 to 2^64 - 1 (every count and time here is core's u64)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidType(f"{field}: must be an int, got {value!r}", field)
    if value < 0:
        raise InvalidArgument(f"{field}: must not be negative, got {value!r}", field)
    if value > 2**64 - 1:
        raise InvalidArgument(f"{field}: must be at most 2^64 - 1, got {value!r}", field)
    return value


def rate_limited(
    limiter: Limiter | Callable[[], Limiter],
    tenant: Tenant,
    *,
    cost: int = 1,
    max_deferrals: int = 1000,
    jitter_ms: int = 1000,
    on_unavailable: str = "defer",
    unavailable_backoff_ms: tuple[int, int] = (1000, 60_000),
) -> Callable[[F], F]:
    """Wraps a bound task's function (`@app.task(bind=True)` goes on top).

    `limiter`: a Limiter, or a function returning one (called once per worker
    process, after the fork: a child forked from a process that made one
    calls it again). `tenant`: a str, or a function of the task's
    args and kwargs returning one.
    """
    if not isinstance(limiter, Limiter) and not callable(limiter):
        raise InvalidType(
            "limiter: must be a slidelimit.Limiter or a function returning one,"
            f" got {type(limiter).__name__}",
            "limiter",
        )
    # Core's rule, up to the policy's lowest limit when the limiter is at hand
    # (a factory's limiter applies that bound at each check).
    if isinstance(limiter, Limiter):
        limiter.policy.check_cost(cost)
    else:
        _check_cost(cost)
    _u64("max_deferrals", max_deferrals)
    _u64("jitter_ms", jitter_ms)
    if on_unavailable not in ON_UNAVAILABLE:
        raise InvalidArgument(
            f'on_unavailable: must be "defer", "run" or "fail", got {on_unavailable!r}',
            "on_unavailable",
        )
    pair = unavailable_backoff_ms
    if not isinstance(pair, (tuple, list)) or len(pair) != 2:
        raise InvalidType(
            f"unavailable_backoff_ms: must be a (base, max) pair of ints, got {pair!r}",
            "unavailable_backoff_ms",
        )
    base_ms, max_ms = (_u64("unavailable_backoff_ms", n) for n in pair)
    if base_ms > max_ms:
        raise InvalidArgument(
            f"unavailable_backoff_ms: the base {base_ms} exceeds the max {max_ms}",
            "unavailable_backoff_ms",
        )
    if not isinstance(tenant, str) and not callable(tenant):
        raise InvalidType(
            f"tenant: must be a str or a function, got {type(tenant).__name__}", "tenant"
        )
    if isinstance(tenant, str) and isinstance(limiter, Limiter):
        limiter.policy.key(tenant)  # core's tenant rules, now rather than at every run
    made: list[Limiter] = []
    # A thread pool's first tasks arrive together: one limiter (one client,
    # one deny cache) per process, not one per racing thread.
    making = [threading.Lock()]

    def forget_after_fork() -> None:
        # The child calls the function again, as documented; and the lock is
        # new, since a thread of the parent may have held the old one at the
        # fork, which would leave it held in the child for good.
        made.clear()
        making[0] = threading.Lock()

    if not isinstance(limiter, Limiter) and hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=forget_after_fork)

    def get_limiter() -> Limiter:
        if isinstance(limiter, Limiter):
            return limiter
        with making[0]:
            if not made:
                built = limiter()
                if not isinstance(built, Limiter):
                    raise InvalidType(
                        "limiter: the function given as limiter returned"
                        f" {type(built).__name__}, not a slidelimit.Limiter",
                        "limiter",
                    )
                made.append(built)
        return made[0]

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def run(task: Task, *args: Any, **kwargs: Any) -> Any:
            name = tenant if isinstance(tenant, str) else tenant(*args, **kwargs)
            try:
                decision = get_limiter().acquire(name, cost)
            except Unavailable:
                if on_unavailable == "run":
                    return fn(task, *args, **kwargs)
                if on_unavailable == "fail" or _cannot_defer(task):
                    raise
                streak = _header(task, OUTAGES_HEADER)
                delay_ms = min(base_ms * 2**streak, max_ms)
                _defer(task, args, kwargs, delay_ms, {OUTAGES_HEADER: streak + 1})
            if decision.allowed:
                return fn(task, *args, **kwargs)
            if _cannot_defer(task):
                raise RateLimited(decision)
            _defer(task, args, kwargs, decision.retry_after_ms, {OUTAGES_HEADER: 0})

        def _defer(
            task: Task, args: Any, kwargs: Any, delay_ms: int, extra: dict[str, int]
        ) -> NoReturn:
            request = task.request
            deferrals = _header(task, DEFERRALS_HEADER)
            if deferrals >= max_deferrals:
                raise DeferralLimitExceeded(
                    f"task {request.id} was deferred {deferrals} times (max_deferrals)"
                )
            now = datetime.datetime.now(datetime.timezone.utc)
            countdown = min(
                (delay_ms + random.randint(0, jitter_ms)) / 1000,
                (LATEST_ETA - now).total_seconds(),
            )
            expires = _expires(request.expires)
            if expires is not None and expires <= now + datetime.timedelta(seconds=countdown):
                task.backend.mark_as_revoked(request.id, "expired", request=request)
                raise Ignore()
            headers = {
                name: value
                for name, value in (request.headers or {}).items()
                if name not in _DEAD_LETTER_HEADERS
            }
            headers.update({DEFERRALS_HEADER: deferrals + 1, **extra})
            task.signature_from_request(
                request, args, kwargs, countdown=countdown, headers=headers
            ).apply_async()
            raise Ignore()

        return run  # type: ignore[return-value]

    return decorate


def _cannot_defer(task: Task) -> bool:
    """Eager mode (`.apply()`, `task_always_eager`) and a task called as a
    plain function (no message, no id) have nothing to publish again: as
    Celery's own `retry`, they raise instead."""
    request = task.request
    return bool(request.is_eager or request.called_directly)


def _expires(value: object) -> datetime.datetime | None:
    if value is None:
        return None
    when = value if isinstance(value, datetime.datetime) else maybe_iso8601(value)
    if when is None:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.timezone.utc)
    return when
