"""Shared fixtures: the real servers scripts/with-redis.sh and
scripts/with-cluster.sh start (a missing one is an error, never a skip)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest
import redis
import redis.cluster


def _env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise RuntimeError(
            f"{name} is not set: run the tests under scripts/with-redis.sh"
            " and scripts/with-cluster.sh"
        )
    return value


@pytest.fixture(scope="session")
def redis_url() -> str:
    return _env("SLIDELIMIT_TEST_REDIS_URL")


@pytest.fixture(scope="session")
def cluster_urls() -> list[str]:
    return _env("SLIDELIMIT_TEST_CLUSTER_URLS").split(",")


@pytest.fixture
def r(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url, socket_timeout=5)
    yield client
    client.close()


@pytest.fixture
def rc(cluster_urls: list[str]) -> Iterator[redis.cluster.RedisCluster]:
    client = redis.cluster.RedisCluster.from_url(cluster_urls[0], socket_timeout=5)
    yield client
    client.close()


@pytest.fixture
def resource() -> str:
    """A resource name no other test uses, so tests share a server safely."""
    return "py-" + uuid.uuid4().hex[:12]
