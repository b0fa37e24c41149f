"""slidelimit: distributed sliding-window rate limiting on Redis.

    from slidelimit import Algorithm, Policy, Limiter
    policy = Policy("rl", "geocode", Algorithm.SLIDING_LOG, limit=600, window_ms=60_000)
    limiter = Limiter(redis.Redis.from_url(url), policy)
    d = limiter.acquire("t-1")

Keys, validation, the Lua scripts, reply parsing and error codes come from
the Rust core (`slidelimit._core`); this package does the Redis I/O with
redis-py.
"""

from __future__ import annotations

import datetime
from enum import Enum

from . import _core
from ._core import (
    DEFAULT_NAMESPACE,
    VERSION,
    Decision,
    Policy,
    check_timeout_ms,
    slot,
)
from ._errors import (
    BY_CODE,
    Error,
    Internal,
    InvalidArgument,
    MalformedReply,
    PermissionDenied,
    ScriptError,
    Unavailable,
    WrongType,
)


class Algorithm(str, Enum):
    """Sliding log (exact), sliding counter (approximate, O(1) memory) or
    bucketed window (exact, O(buckets) memory; ``Policy(..., buckets=N)``)."""

    SLIDING_LOG = "sliding_log"
    SLIDING_COUNTER = "sliding_counter"
    BUCKETED_WINDOW = "bucketed_window"

    def __str__(self) -> str:
        return self.value


#: The algorithm a caller who names none gets (core's default): exact.
DEFAULT_ALGORITHM = Algorithm(_core.DEFAULT_ALGORITHM)

_core._register(BY_CODE, Algorithm, datetime.timedelta)

from ._limiter import DEFAULT_TIMEOUT_MS, AsyncLimiter, Limiter  # noqa: E402

__version__ = VERSION

__all__ = [
    "DEFAULT_ALGORITHM",
    "DEFAULT_NAMESPACE",
    "DEFAULT_TIMEOUT_MS",
    "Algorithm",
    "AsyncLimiter",
    "Decision",
    "Error",
    "Internal",
    "InvalidArgument",
    "Limiter",
    "MalformedReply",
    "PermissionDenied",
    "Policy",
    "ScriptError",
    "Unavailable",
    "WrongType",
    "__version__",
    "check_timeout_ms",
    "slot",
]
