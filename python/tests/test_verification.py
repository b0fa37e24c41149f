"""The verification test of the issue: 2,000 attempts 50 ms apart against a
limit of 600 per rolling 60 s, on caller time. No rolling 60 s may hold more
than 600 admissions, on the memory engine and on a real Redis."""

from __future__ import annotations

import bisect

import redis

from slidelimit import Algorithm, Limiter, Policy

LIMIT, WINDOW_MS, ATTEMPTS, STEP_MS = 600, 60_000, 2_000, 50
START_MS = 1_764_000_000_000


def most_in_any_window(admitted: list[int]) -> int:
    """The largest number of admissions in any [t, t + WINDOW_MS): a window
    starting at an admission is enough to find the maximum."""
    return max(
        (bisect.bisect_left(admitted, t + WINDOW_MS) - i for i, t in enumerate(admitted)),
        default=0,
    )


def run(limiter: Limiter) -> list[int]:
    admitted = []
    for i in range(ATTEMPTS):
        now = START_MS + i * STEP_MS
        d = limiter.acquire_at("verify", now)
        assert d.now_ms == now
        if d.allowed:
            admitted.append(now)
    return admitted


def check(admitted: list[int]) -> None:
    assert most_in_any_window(admitted) == LIMIT
    # The log is exact: the first 600 attempts (0 to 29.95 s) pass, then
    # nothing until the first of them leaves the window at 60 s.
    assert admitted[LIMIT - 1] == START_MS + (LIMIT - 1) * STEP_MS
    assert admitted[LIMIT] == START_MS + WINDOW_MS
    # 100 s of attempts: more than one window's worth passes in all.
    assert len(admitted) > LIMIT


def test_the_checker_sees_an_overrun() -> None:
    # 601 admissions 50 ms apart lie within 30 s: one too many.
    assert most_in_any_window([i * 50 for i in range(601)]) == 601
    assert most_in_any_window([i * 100 for i in range(1200)]) == 600


def policy(resource: str) -> Policy:
    return Policy("rl", resource, Algorithm.SLIDING_LOG, limit=LIMIT, window_ms=WINDOW_MS)


def test_memory_engine(resource: str) -> None:
    check(run(Limiter.memory(policy(resource))))


def test_real_redis(r: redis.Redis, resource: str) -> None:
    limiter = Limiter(r, policy(resource))
    check(run(limiter))
    limiter.reset("verify")
