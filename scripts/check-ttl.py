#!/usr/bin/env python3
"""Fails when a key on the test servers has no TTL.

Every key slidelimit writes expires by itself; a key without a TTL would live
forever in production. `make test` runs this after the Rust suites, on the
standalone server (SLIDELIMIT_TEST_REDIS_URL) and on every master of the
Cluster (SLIDELIMIT_TEST_CLUSTER_URLS), before they are stopped. Exit 0: all
keys expire; 1: some do not (listed on stderr); 2: a server could not be read.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from harness.resp import Redis


def keys_without_ttl(url):
    r = Redis.from_url(url)
    role = r("ROLE")
    if role[0] != b"master":
        return None  # a replica mirrors its master, which is checked itself
    cursor, checked, missing = b"0", 0, []
    while True:
        cursor, keys = r("SCAN", cursor, "COUNT", "1000")
        if keys:
            ttls = r.pipeline(*[["PTTL", k] for k in keys])
            checked += len(keys)
            # -1: no TTL; -2: expired since SCAN saw it.
            missing += [k for k, ttl in zip(keys, ttls) if ttl == -1]
        if cursor == b"0":
            return checked, missing


def main():
    urls = [os.environ.get("SLIDELIMIT_TEST_REDIS_URL", "")]
    urls += os.environ.get("SLIDELIMIT_TEST_CLUSTER_URLS", "").split(",")
    urls = [u for u in urls if u]
    if not urls:
        print(
            "check-ttl: no SLIDELIMIT_TEST_REDIS_URL or SLIDELIMIT_TEST_CLUSTER_URLS",
            file=sys.stderr,
        )
        return 2
    failed = False
    for url in urls:
        try:
            result = keys_without_ttl(url)
        except (OSError, RuntimeError) as e:
            print(f"check-ttl: {url}: {e}", file=sys.stderr)
            return 2
        if result is None:
            continue
        checked, missing = result
        if missing:
            failed = True
            shown = ", ".join(k.decode(errors="replace") for k in missing[:20])
            print(
                f"check-ttl: {url}: {len(missing)} of {checked} keys have no TTL: {shown}",
                file=sys.stderr,
            )
        else:
            print(f"check-ttl: {url}: all {checked} keys expire", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
