"""The Celery task: geocode under the shared 600-per-60-s budget of each API
key. A denied task is deferred (published again after retry_after), never
retried: request.retries and max_retries stay for real failures.

    celery -A examples.celery_worker worker -l info
"""

from __future__ import annotations

import os
from typing import Any

from celery import Celery

from slidelimit import Algorithm, Limiter, Policy
from slidelimit.celery import rate_limited

REDIS_URL = os.environ.get("SLIDELIMIT_REDIS_URL", "redis://127.0.0.1:6379/0")
app = Celery("geocoder", broker=os.environ.get("CELERY_BROKER_URL", REDIS_URL))

POLICY = Policy("rl", "geocode", Algorithm.SLIDING_LOG, limit=600, window_ms=60_000)


def limiter() -> Limiter:
    # Made once per worker process, after the fork.
    return Limiter.from_url(REDIS_URL, POLICY, timeout_ms=1000)


@app.task(bind=True, acks_late=True, max_retries=5)
@rate_limited(limiter, tenant=lambda address, api_key: api_key)
def geocode(self: Any, address: str, api_key: str) -> str:
    return f"geocoded {address!r}"
