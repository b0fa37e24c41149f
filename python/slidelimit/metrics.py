"""Prometheus metrics (prometheus_client) with the names, help texts, labels
and buckets every slidelimit binding uses (they come from core).

    from slidelimit.metrics import PrometheusMetrics
    limiter = Limiter(client, policy, metrics=PrometheusMetrics())

An acquire's decision counts once; a peek counts nothing. A denial the
local deny cache answered counts as any denial and in
`ratelimit_local_denied_total` too.
"""

from __future__ import annotations

from typing import Any, Protocol

from . import _core
from ._core import Decision, Policy
from ._errors import InvalidType

METRIC_ALLOWED_TOTAL: str = _core.METRIC_ALLOWED_TOTAL
METRIC_DENIED_TOTAL: str = _core.METRIC_DENIED_TOTAL
METRIC_LOCAL_DENIED_TOTAL: str = _core.METRIC_LOCAL_DENIED_TOTAL
METRIC_WAIT_SECONDS: str = _core.METRIC_WAIT_SECONDS
WAIT_BUCKETS: tuple[float, ...] = tuple(_core.WAIT_BUCKETS)


class Metrics(Protocol):
    """What a limiter reports each acquire's decision to."""

    def observe(self, policy: Policy, tenant: str, decision: Decision) -> None: ...

    def observe_local_denial(self, policy: Policy, tenant: str, decision: Decision) -> None:
        """A denial the deny cache answered without Redis (after `observe`)."""


class PrometheusMetrics:
    """Counters of allowed, denied and locally denied acquires and a
    histogram of the retry_after handed to denied callers, labelled by
    resource (and by tenant on the counters when `tenant_label`: one time
    series per tenant, so leave it off for unbounded tenants)."""

    def __init__(self, registry: Any | None = None, *, tenant_label: bool = False) -> None:
        import prometheus_client

        if registry is None:
            registry = prometheus_client.REGISTRY
        elif not isinstance(registry, prometheus_client.CollectorRegistry):
            # prometheus_client skips registering for a falsy registry: the
            # metrics would count and never be exported.
            raise InvalidType(
                "registry: must be a prometheus_client.CollectorRegistry,"
                f" got {type(registry).__name__}",
                "registry",
            )
        if not isinstance(tenant_label, bool):
            raise InvalidType(
                f"tenant_label: must be a bool, got {type(tenant_label).__name__}", "tenant_label"
            )
        labels = list(_core.COUNTER_LABELS_WITH_TENANT if tenant_label else _core.COUNTER_LABELS)
        self._tenant_label = tenant_label
        self.allowed = prometheus_client.Counter(
            _core.METRIC_ALLOWED_TOTAL,
            _core.METRIC_ALLOWED_TOTAL_HELP,
            labels,
            registry=registry,
        )
        self.denied = prometheus_client.Counter(
            _core.METRIC_DENIED_TOTAL,
            _core.METRIC_DENIED_TOTAL_HELP,
            labels,
            registry=registry,
        )
        self.local_denied = prometheus_client.Counter(
            _core.METRIC_LOCAL_DENIED_TOTAL,
            _core.METRIC_LOCAL_DENIED_TOTAL_HELP,
            labels,
            registry=registry,
        )
        self.wait_seconds = prometheus_client.Histogram(
            _core.METRIC_WAIT_SECONDS,
            _core.METRIC_WAIT_SECONDS_HELP,
            list(_core.WAIT_LABELS),
            buckets=list(_core.WAIT_BUCKETS),
            registry=registry,
        )

    def observe(self, policy: Policy, tenant: str, decision: Decision) -> None:
        labels = (policy.resource, tenant) if self._tenant_label else (policy.resource,)
        if decision.allowed:
            self.allowed.labels(*labels).inc()
        else:
            self.denied.labels(*labels).inc()
            self.wait_seconds.labels(policy.resource).observe(
                _core.wait_seconds(decision.retry_after_ms)
            )

    def observe_local_denial(self, policy: Policy, tenant: str, decision: Decision) -> None:
        labels = (policy.resource, tenant) if self._tenant_label else (policy.resource,)
        self.local_denied.labels(*labels).inc()
