"""The limiter function: call a geocoding API that allows 600 requests per
rolling 60 s per API key, sharing that budget with every other worker (Rust,
Go, Node, Celery) that uses the same policy.

    SLIDELIMIT_REDIS_URL=redis://127.0.0.1:6379/0 python examples/limiter.py
"""

from __future__ import annotations

import asyncio
import os
import time

import redis
import redis.asyncio

from slidelimit import Algorithm, AsyncLimiter, Decision, Limiter, Policy, Unavailable

POLICY = Policy("rl", "geocode", Algorithm.SLIDING_LOG, limit=600, window_ms=60_000)
URL = os.environ.get("SLIDELIMIT_REDIS_URL", "redis://127.0.0.1:6379/0")


def geocode(limiter: Limiter, api_key: str, address: str) -> str:
    """Waits for a permit of `api_key`'s budget, then calls the API."""
    while True:
        decision: Decision = limiter.acquire(api_key)
        if decision.allowed:
            return f"geocoded {address!r} ({decision.remaining} left this minute)"
        time.sleep(decision.retry_after.total_seconds())


async def geocode_async(limiter: AsyncLimiter, api_key: str, address: str) -> str:
    while True:
        decision = await limiter.acquire(api_key)
        if decision.allowed:
            return f"geocoded {address!r}"
        await asyncio.sleep(decision.retry_after_ms / 1000)


def main() -> None:
    with Limiter(redis.Redis.from_url(URL, socket_timeout=1), POLICY) as limiter:
        try:
            print(geocode(limiter, "key-1", "1 Main St"))
        except Unavailable as e:
            # Never a decision: failing open or closed is the caller's choice.
            print("limiter unavailable:", e)

    async def run() -> None:
        async with AsyncLimiter(
            redis.asyncio.Redis.from_url(URL, socket_timeout=1), POLICY
        ) as limiter:
            print(await geocode_async(limiter, "key-1", "2 Main St"))

    asyncio.run(run())


if __name__ == "__main__":
    main()
