"""The ```python blocks of README.md and docs/python.md, run against the
test Redis so that the docs cannot drift from the API. A doc's blocks run in
order as one program, with the names the prose leaves to the reader
supplied, and checks afterwards that they did what the text says."""

from __future__ import annotations

import os
import re
from typing import Any

import redis

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOC_URL = "redis://127.0.0.1:6379/"


def blocks(doc: str) -> list[str]:
    with open(os.path.join(ROOT, doc), encoding="utf-8") as f:
        return re.findall(r"^```python\n(.*?)^```$", f.read(), re.S | re.M)


def run(doc: str, redis_url: str, **given: Any) -> dict[str, Any]:
    code = "\n".join(blocks(doc))
    assert code, f"{doc} has no python block"
    namespace: dict[str, Any] = {"__name__": "doc", **given}
    exec(compile(code.replace(DOC_URL, redis_url.rstrip("/") + "/"), doc, "exec"), namespace)
    return namespace


def call_geocoding_api(address: str, api_key: str) -> str:
    return f"geocoded {address} for {api_key}"


def test_readme(redis_url: str, r: redis.Redis) -> None:
    ns = run("README.md", redis_url, call_geocoding_api=call_geocoding_api)
    # The limiter function waits for a permit, then calls the API.
    assert ns["geocode"]("doc-key", "Main St 1") == "geocoded Main St 1 for doc-key"
    limiter = ns["limiter"]
    assert limiter.key("doc-key") == "rl:{geocode:doc-key}:log:60000"
    assert limiter.peek("doc-key").remaining == 598
    # The Celery task and the River worker's policy: the same key per API key.
    assert ns["geocode_task"].name.endswith("geocode_task")
    assert ns["policy"].key("doc-key") == limiter.key("doc-key")
    limiter.reset("doc-key")


def test_docs_python_md(redis_url: str, r: redis.Redis) -> None:
    import prometheus_client

    client = redis.Redis.from_url(redis_url)
    ns = run("docs/python.md", redis_url, client=client)
    d = ns["d"]
    assert (d.allowed, d.remaining, d.retry_after_ms) == (True, 599, 0)
    assert ns["geocode"].name.endswith("geocode")
    # The metrics block's limiter counts its acquires in the default registry.
    ns["limiter"].acquire("api-key-17")
    allowed = prometheus_client.REGISTRY.get_sample_value(
        "ratelimit_allowed_total", {"resource": "geocode"}
    )
    assert allowed == 1
    ns["limiter"].reset("api-key-17")
