"""The e2e run's Celery app (docs/e2e.md), started as
`celery -A e2e_celery worker --pool threads`: it sends the jobs the run feeds
it (Redis list e2e:feed:celery) as Celery tasks on a Redis broker and works
them behind slidelimit.celery.rate_limited: a task calls the provider for its
tenant's API key only after slidelimit admits it, and is deferred (published
again, request.retries untouched) when denied. Each completed task is
recorded in e2e:done with its request.retries. slidelimit's metrics are
served on E2E_METRICS_PORT by prometheus_client.
"""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.error
import urllib.request
from typing import Any

import prometheus_client
import redis
from celery import Celery, Task
from celery.signals import worker_ready
from slidelimit import Algorithm, Limit, Limiter, Policy
from slidelimit.celery import DEFERRALS_HEADER, rate_limited
from slidelimit.metrics import PrometheusMetrics

REDIS_URL = os.environ["E2E_REDIS_URL"]
PROVIDER = os.environ["E2E_PROVIDER_URL"]
LIMIT = int(os.environ["E2E_LIMIT"])
WINDOW_MS = int(os.environ["E2E_WINDOW_MS"])
JITTER_MS = int(os.environ["E2E_JITTER_MS"])
BUCKETS = int(os.environ["E2E_BUCKETS"])
SHORT_LIMIT = int(os.environ["E2E_SHORT_LIMIT"])
SHORT_WINDOW_MS = int(os.environ["E2E_SHORT_WINDOW_MS"])

# The broker in a database of its own, apart from the limiter's keys.
app = Celery("e2e", broker=REDIS_URL.rstrip("/") + "/1")
app.conf.update(
    task_ignore_result=True,
    worker_hijack_root_logger=False,
    broker_connection_retry_on_startup=True,
)

registry = prometheus_client.CollectorRegistry()
metrics = PrometheusMetrics(registry, tenant_label=True)
# Shared by every worker thread: a waiting pool, as Limiter.from_url's, so
# that more threads than redis-py 8's 100 connections wait, not fail.
records = redis.Redis(connection_pool=redis.BlockingConnectionPool.from_url(REDIS_URL))


def limiter(algorithm: Algorithm) -> Limiter:
    # Buckets only for the bucketed window: core refuses them with another algorithm.
    buckets = BUCKETS if algorithm is Algorithm.BUCKETED_WINDOW else None
    policy = Policy("rl", "geocode", algorithm, limit=LIMIT, window_ms=WINDOW_MS, buckets=buckets)
    return Limiter.from_url(REDIS_URL, policy, metrics=metrics, timeout_ms=1000)


def multi_limiter() -> Limiter:
    # The provider's two limits, checked and recorded together: the short one
    # as a log, the long one as a bucketed window.
    policy = Policy(
        "rl",
        "geocode",
        limits=[
            Limit(Algorithm.SLIDING_LOG, SHORT_LIMIT, SHORT_WINDOW_MS),
            Limit(Algorithm.BUCKETED_WINDOW, LIMIT, WINDOW_MS, buckets=BUCKETS),
        ],
    )
    return Limiter.from_url(REDIS_URL, policy, metrics=metrics, timeout_ms=1000)


def geocode(task: Task, job_id: str, tenant: str, alg: str) -> None:
    req = urllib.request.Request(
        f"{PROVIDER}/geocode?address={job_id}",
        headers={
            "X-Api-Key": tenant,
            "X-Job-Id": job_id,
            "X-System": "celery",
            "X-Sent-Ms": str(int(time.time() * 1000)),
        },
    )
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            status = resp.status
    except urllib.error.HTTPError as e:
        # A 429 is recorded, not retried: the run counts it (the counter's overshoot).
        status = e.code
    # The deferral count rides in a message header (as slidelimit.celery reads it).
    headers = task.request.headers or {}
    deferrals = headers.get(DEFERRALS_HEADER, getattr(task.request, DEFERRALS_HEADER, 0))
    record = {
        "id": job_id,
        "system": "celery",
        "tenant": tenant,
        "alg": alg,
        "status": status,
        "attempt": task.request.retries,
        "deferrals": int(deferrals or 0),
        "ms": int(time.time() * 1000),
    }
    records.rpush("e2e:done", json.dumps(record))


@app.task(bind=True, acks_late=True, max_retries=5, name="e2e.geocode_log")
@rate_limited(
    lambda: limiter(Algorithm.SLIDING_LOG),
    tenant=lambda job_id, tenant, alg: tenant,
    jitter_ms=JITTER_MS,
    max_deferrals=100_000,
)
def geocode_log(self: Task, job_id: str, tenant: str, alg: str) -> None:
    geocode(self, job_id, tenant, alg)


@app.task(bind=True, acks_late=True, max_retries=5, name="e2e.geocode_bucketed")
@rate_limited(
    lambda: limiter(Algorithm.BUCKETED_WINDOW),
    tenant=lambda job_id, tenant, alg: tenant,
    jitter_ms=JITTER_MS,
    max_deferrals=100_000,
)
def geocode_bucketed(self: Task, job_id: str, tenant: str, alg: str) -> None:
    geocode(self, job_id, tenant, alg)


@app.task(bind=True, acks_late=True, max_retries=5, name="e2e.geocode_counter")
@rate_limited(
    lambda: limiter(Algorithm.SLIDING_COUNTER),
    tenant=lambda job_id, tenant, alg: tenant,
    jitter_ms=JITTER_MS,
    max_deferrals=100_000,
)
def geocode_counter(self: Task, job_id: str, tenant: str, alg: str) -> None:
    geocode(self, job_id, tenant, alg)


@app.task(bind=True, acks_late=True, max_retries=5, name="e2e.geocode_multi")
@rate_limited(
    multi_limiter,
    tenant=lambda job_id, tenant, alg: tenant,
    jitter_ms=JITTER_MS,
    max_deferrals=100_000,
)
def geocode_multi(self: Task, job_id: str, tenant: str, alg: str) -> None:
    geocode(self, job_id, tenant, alg)


# One task per limiter: rate_limited puts one gate in front of one task.
TASKS = {
    "sliding_log": geocode_log,
    "bucketed_window": geocode_bucketed,
    "sliding_counter": geocode_counter,
    "multi": geocode_multi,
}


def feed() -> None:
    """Sends the run's jobs from e2e:feed:celery as tasks."""
    source = redis.Redis.from_url(REDIS_URL)
    while True:
        item = source.blpop(["e2e:feed:celery"], timeout=1)
        if item is None:
            continue
        data: dict[str, Any] = json.loads(item[1])
        task = TASKS[data["alg"]]
        task.delay(data["id"], data["tenant"], data["alg"])


@worker_ready.connect
def start(**_: Any) -> None:
    prometheus_client.start_http_server(
        int(os.environ["E2E_METRICS_PORT"]), addr="127.0.0.1", registry=registry
    )
    threading.Thread(target=feed, name="e2e-feed", daemon=True).start()
    print(f"celery worker ready (metrics on :{os.environ['E2E_METRICS_PORT']})", flush=True)
