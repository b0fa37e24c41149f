# Types of the Rust extension (python/src/lib.rs).
import datetime
from typing import Any, final

from . import Algorithm
from ._errors import Error

VERSION: str
DEFAULT_NAMESPACE: str
DEFAULT_ALGORITHM: str
ALGORITHMS: tuple[str, ...]
ERROR_CODES: tuple[str, ...]
MAX_TENANT_BYTES: int
METRIC_ALLOWED_TOTAL: str
METRIC_ALLOWED_TOTAL_HELP: str
METRIC_DENIED_TOTAL: str
METRIC_DENIED_TOTAL_HELP: str
METRIC_WAIT_SECONDS: str
METRIC_WAIT_SECONDS_HELP: str
COUNTER_LABELS: tuple[str, ...]
COUNTER_LABELS_WITH_TENANT: tuple[str, ...]
WAIT_LABELS: tuple[str, ...]
WAIT_BUCKETS: tuple[float, ...]

# EVALSHA's arguments: sha1, 1, key, limit, window_ms, cost, now_ms or "",
# and the bucket count of a bucketed window.
_Call = tuple[str, int, str, str, str, str, str] | tuple[str, int, str, str, str, str, str, str]

@final
class Policy:
    """A validated rate-limit policy; bad input raises InvalidArgument naming the field."""

    def __init__(
        self,
        namespace: str,
        resource: str,
        algorithm: Algorithm | str,
        limit: int,
        window_ms: int,
        buckets: int | None = None,
    ) -> None: ...
    @property
    def namespace(self) -> str: ...
    @property
    def resource(self) -> str: ...
    @property
    def algorithm(self) -> Algorithm: ...
    @property
    def limit(self) -> int: ...
    @property
    def window_ms(self) -> int: ...
    @property
    def buckets(self) -> int | None: ...
    def key(self, tenant: str) -> str: ...
    def _call(self, tenant: str, cost: int, now_ms: int | None, peek: bool) -> _Call: ...
    def _script_text(self, peek: bool) -> str: ...
    def _decide(self, reply: Any) -> Decision: ...
    def _server_error(self, reply: str, key: str, after_retry: bool) -> Error | None: ...
    def __eq__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...

@final
class Decision:
    """What a check answered; immutable. Times are milliseconds."""

    def __init__(
        self,
        allowed: bool,
        remaining: int,
        retry_after_ms: int,
        reset_after_ms: int,
        now_ms: int,
    ) -> None: ...
    @property
    def allowed(self) -> bool: ...
    @property
    def remaining(self) -> int: ...
    @property
    def retry_after_ms(self) -> int: ...
    @property
    def reset_after_ms(self) -> int: ...
    @property
    def now_ms(self) -> int: ...
    @property
    def retry_after(self) -> datetime.timedelta: ...
    @property
    def reset_after(self) -> datetime.timedelta: ...
    def __eq__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...

@final
class MemoryEngine:
    def __init__(self) -> None: ...
    def check(
        self,
        policy: Policy,
        tenant: str,
        cost: int,
        now_ms: int | None,
        clock_ms: int,
        peek: bool,
    ) -> Decision: ...
    def reset(self, policy: Policy, tenant: str) -> bool: ...

def slot(key: str) -> int: ...
def check_timeout_ms(timeout_ms: int) -> int: ...
def wait_seconds(retry_after_ms: int) -> float: ...
def _command_error(reply: str) -> Error: ...
def _register(
    errors: dict[str, type[Error]], algorithm: type[Algorithm], timedelta: type[datetime.timedelta]
) -> None: ...
