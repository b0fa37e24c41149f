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

import dataclasses
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
    InvalidType,
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

#: The most limits one policy may hold (core's).
MAX_LIMITS: int = _core.MAX_LIMITS


@dataclasses.dataclass(frozen=True)
class Limit:
    """One limit of a policy of several: ``limit`` permits per ``window_ms``
    under ``algorithm`` (``buckets`` for a bucketed window; None: core's
    default). ``Policy(..., limits=[...])`` validates it, naming the field
    (``limits[1].window_ms``)."""

    algorithm: Algorithm | str
    limit: int
    window_ms: int
    buckets: int | None = None

    def __post_init__(self) -> None:
        # A known name becomes the enum, so that equal limits hash alike;
        # anything else is left for Policy to refuse.
        name = self.algorithm
        if not isinstance(name, Algorithm) and name in _core.ALGORITHMS:
            object.__setattr__(self, "algorithm", Algorithm(name))


_core._register(BY_CODE, InvalidType, Algorithm, Limit, datetime.timedelta)

from ._limiter import (  # noqa: E402
    DEFAULT_DENY_CACHE_CAPACITY,
    DEFAULT_TIMEOUT_MS,
    POOL_MAX_CONNECTIONS,
    AsyncLimiter,
    DenyCacheOption,
    Limiter,
)

__version__ = VERSION

__all__ = [
    "DEFAULT_ALGORITHM",
    "DEFAULT_DENY_CACHE_CAPACITY",
    "DEFAULT_NAMESPACE",
    "DEFAULT_TIMEOUT_MS",
    "MAX_LIMITS",
    "POOL_MAX_CONNECTIONS",
    "Algorithm",
    "AsyncLimiter",
    "Decision",
    "DenyCacheOption",
    "Error",
    "Internal",
    "InvalidArgument",
    "InvalidType",
    "Limit",
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
