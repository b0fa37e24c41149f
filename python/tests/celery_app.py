"""The Celery app the worker test runs: a real worker process imports it.

The broker and the test's records live in Redis database 1 of the test
server; the limiter's keys in database 0.
"""

from __future__ import annotations

import os
from typing import Any

import redis
from celery import Celery
from celery.signals import task_prerun

from slidelimit import Algorithm, Limiter, Policy
from slidelimit.celery import DEFERRALS_HEADER, rate_limited

BASE = os.environ["SLIDELIMIT_TEST_REDIS_URL"].rstrip("/")
BROKER = f"{BASE}/1"
RESOURCE = os.environ.get("SLIDELIMIT_CELERY_RESOURCE", "celery-test")

app = Celery("slidelimit_test", broker=BROKER, backend=BROKER)
app.conf.update(
    task_acks_late=True,
    worker_prefetch_multiplier=1,
    task_send_sent_event=True,
    worker_send_task_events=True,
    broker_connection_retry_on_startup=True,
)

# 1 call per 700 ms for every task of one API key.
POLICY = Policy("rl", RESOURCE, Algorithm.SLIDING_LOG, limit=1, window_ms=700)


def records() -> redis.Redis:
    return redis.Redis.from_url(BROKER)


@app.task(bind=True, acks_late=True)
@rate_limited(
    lambda: Limiter.from_url(BASE + "/0", POLICY), tenant=lambda n, api_key: api_key, jitter_ms=50
)
def geocode(self: Any, n: int, api_key: str) -> int:
    r = records()
    headers = self.request.headers or {}
    deferrals = headers.get(DEFERRALS_HEADER, getattr(self.request, DEFERRALS_HEADER, 0))
    r.rpush(f"body:{self.request.id}", f"{self.request.retries}:{deferrals}")
    return n * 2


@task_prerun.connect
def record_run(task_id: str, task: Any, **_: Any) -> None:
    """Every run, deferred or not: request.retries and the deferral count."""
    headers = task.request.headers or {}
    deferrals = headers.get(DEFERRALS_HEADER, getattr(task.request, DEFERRALS_HEADER, 0))
    records().rpush(f"runs:{task_id}", f"{task.request.retries}:{deferrals}")


# 1 call per 5 s: a second call within 5 s waits longer than a 2 s expires.
SLOW = Policy("rl", RESOURCE, Algorithm.SLIDING_LOG, limit=1, window_ms=5_000)


@app.task(bind=True, acks_late=True)
@rate_limited(lambda: Limiter.from_url(BASE + "/0", SLOW), tenant="fixed", jitter_ms=0)
def short_lived(self: Any) -> str:
    records().rpush(f"body:{self.request.id}", "ran")
    return "ran"


# Nothing listens on port 1: every check is Unavailable.
DOWN = Policy("rl", RESOURCE, Algorithm.SLIDING_LOG, limit=1, window_ms=1_000)


@app.task(bind=True, acks_late=True)
@rate_limited(
    lambda: Limiter.from_url("redis://127.0.0.1:1/", DOWN, timeout_ms=200),
    tenant="t",
    jitter_ms=0,
    max_deferrals=2,
    unavailable_backoff_ms=(100, 150),
)
def during_outage(self: Any) -> str:
    records().rpush(f"body:{self.request.id}", "ran")
    return "ran"


# A lifetime budget: one call per 10,000 years (one bucket), so a second
# call is owed a wait past the last date Celery can hold (year 9999).
LIFETIME = Policy(
    "rl", RESOURCE, Algorithm.BUCKETED_WINDOW, limit=1, window_ms=10_000 * 31_557_600_000, buckets=1
)


@app.task(bind=True, acks_late=True)
@rate_limited(lambda: Limiter.from_url(BASE + "/0", LIFETIME), tenant="once", jitter_ms=0)
def once_ever(self: Any) -> str:
    records().rpush(f"body:{self.request.id}", "ran")
    return "ran"
