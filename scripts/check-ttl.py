#!/usr/bin/env python3
"""Fails when a key on the test servers has no TTL.

Every key slidelimit writes expires by itself; a key without a TTL would live
forever in production. `make test` runs this after the Rust suites, on the
standalone server (SLIDELIMIT_TEST_REDIS_URL) and on every master of the
Cluster (SLIDELIMIT_TEST_CLUSTER_URLS), before they are stopped. Exit 0: all
keys expire; 1: some do not (listed on stderr); 2: a server could not be read.
"""
import os
import socket
import sys
from urllib.parse import urlparse


class Redis:
    """Just enough RESP2 for SCAN, PTTL and ROLE, pipelined."""

    def __init__(self, url):
        u = urlparse(url)
        self.sock = socket.create_connection((u.hostname, u.port or 6379), timeout=10)
        self.buf = self.sock.makefile("rb")

    def send(self, *commands):
        out = bytearray()
        for args in commands:
            out += b"*%d\r\n" % len(args)
            for a in args:
                a = a if isinstance(a, bytes) else str(a).encode()
                out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.sock.sendall(out)
        return [self.read() for _ in commands]

    def read(self):
        line = self.buf.readline()
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest
        if kind == b"-":
            raise RuntimeError(rest.decode(errors="replace"))
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.buf.read(n + 2)
            return data[:-2]
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        raise RuntimeError(f"unexpected reply {line!r}")


def keys_without_ttl(url):
    r = Redis(url)
    (role,) = r.send(["ROLE"])
    if role[0] != b"master":
        return None  # a replica mirrors its master, which is checked itself
    cursor, checked, missing = b"0", 0, []
    while True:
        (reply,) = r.send(["SCAN", cursor, "COUNT", "1000"])
        cursor, keys = reply
        if keys:
            ttls = r.send(*[["PTTL", k] for k in keys])
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
        print("check-ttl: no SLIDELIMIT_TEST_REDIS_URL or SLIDELIMIT_TEST_CLUSTER_URLS", file=sys.stderr)
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
            print(f"check-ttl: {url}: {len(missing)} of {checked} keys have no TTL: {shown}", file=sys.stderr)
        else:
            print(f"check-ttl: {url}: all {checked} keys expire", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
