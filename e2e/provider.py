#!/usr/bin/env python3
"""A fake geocoding provider that enforces its own budget, like the real one.

    e2e/provider.py --port 8080 --limit 600 --window-ms 60000 --log requests.jsonl
                    [--also=-multi:150:10000]

GET /geocode?address=...  with the API key in the X-Api-Key header (or the
`key` query parameter). Per API key, it counts the requests it answered 200
in the exact rolling window (t - window, t]; a request that would make that
count exceed the limit is answered 429 (and does not count, as providers do).
With --also=SUFFIX:LIMIT:WINDOW_MS (the `=` lets SUFFIX start with -), keys
ending in SUFFIX are held to a second limit as well ("150 per 10 s and 600
per minute"): a request passes only if it fits both.
Every request is appended to the log as one JSON line: key, arrival ms (wall
clock, float), status, and the caller's X-Job-Id, X-System and X-Sent-Ms
(when the caller sent it, wall ms) headers.

GET /metrics serves geocoder_responses_total{status,key} in Prometheus's text
format. Standard library only; one thread per connection.
"""

from __future__ import annotations

import argparse
import bisect
import collections
import json
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit


class Budget:
    """Per-key exact rolling window of accepted requests; keys ending in
    `also`'s suffix are held to its limit and window too."""

    def __init__(
        self, limit: int, window_ms: float, also: tuple[str, int, float] | None = None
    ) -> None:
        self.limit = limit
        self.window_ms = window_ms
        self.also = also
        self._accepted: dict[str, collections.deque[float]] = collections.defaultdict(
            collections.deque
        )
        self._lock = threading.Lock()

    def limits(self, key: str) -> list[tuple[int, float]]:
        """(limit, window_ms) of every window `key` is held to."""
        out = [(self.limit, self.window_ms)]
        if self.also is not None and key.endswith(self.also[0]):
            out.append((self.also[1], self.also[2]))
        return out

    def admit(self, key: str, now_ms: float) -> bool:
        limits = self.limits(key)
        longest = max(window for _, window in limits)
        with self._lock:
            log = self._accepted[key]
            # An entry at exactly now - window has left the window.
            while log and log[0] <= now_ms - longest:
                log.popleft()
            for limit, window in limits:
                # The log is in arrival order (times taken under the
                # provider's lock), so a window's count is one bisection; the
                # longest window's is the whole log, trimmed just above.
                inside = len(log) - bisect.bisect_right(log, now_ms - window)
                if inside >= limit:
                    return False
            log.append(now_ms)
            return True


class Provider:
    def __init__(self, budget: Budget, log_path: str) -> None:
        self.budget = budget
        # Open for the server's life, closed by close().
        self._log = open(log_path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115
        self._responses: collections.Counter[tuple[str, str]] = collections.Counter()
        self._lock = threading.Lock()

    def geocode(self, key: str, job: str, system: str, sent_ms: str = "") -> int:
        # The arrival time is taken and the budget decided under one lock, so
        # the log's order is the order the budget saw.
        with self._lock:
            now_ms = time.time() * 1000.0
            status = 200 if self.budget.admit(key, now_ms) else 429
            if ("429", key) not in self._responses:
                # Both series from a key's first request: increase() then
                # sees its first 429 (a series born at 1 shows no increase).
                self._responses[("200", key)] += 0
                self._responses[("429", key)] += 0
            self._responses[(str(status), key)] += 1
            self._log.write(
                json.dumps(
                    {
                        "key": key,
                        "ms": round(now_ms, 3),
                        "status": status,
                        "job": job,
                        "system": system,
                        "sent_ms": int(sent_ms) if sent_ms.isdigit() else None,
                    }
                )
                + "\n"
            )
        return status

    def metrics(self) -> str:
        with self._lock:
            items = sorted(self._responses.items())
        lines = [
            "# HELP geocoder_responses_total Responses of the fake geocoding provider, by status and API key.",
            "# TYPE geocoder_responses_total counter",
        ]
        for (status, key), n in items:
            lines.append(f'geocoder_responses_total{{status="{status}",key="{_escape(key)}"}} {n}')
        return "\n".join(lines) + "\n"

    def close(self) -> None:
        with self._lock:
            self._log.close()


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def make_handler(provider: Provider) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            url = urlsplit(self.path)
            if url.path == "/metrics":
                self._reply(200, provider.metrics(), "text/plain; version=0.0.4")
            elif url.path == "/geocode":
                query = parse_qs(url.query)
                key = self.headers.get("X-Api-Key") or query.get("key", [""])[0]
                if not key:
                    self._reply(
                        400,
                        json.dumps({"error": "missing API key (X-Api-Key)"}),
                        "application/json",
                    )
                    return
                status = provider.geocode(
                    key,
                    self.headers.get("X-Job-Id", ""),
                    self.headers.get("X-System", ""),
                    self.headers.get("X-Sent-Ms", ""),
                )
                body = (
                    {"lat": 52.52, "lon": 13.405}
                    if status == 200
                    else {"error": "rate limit exceeded"}
                )
                self._reply(status, json.dumps(body), "application/json")
            else:
                self._reply(404, json.dumps({"error": "not found"}), "application/json")

        def _reply(self, status: int, body: str, content_type: str) -> None:
            data = body.encode()
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            pass  # the JSONL log is the record

    return Handler


def positive(kind: Callable[[str], float], name: str) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{name} must be a positive number, got {text!r}"
            ) from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"{name} must be positive, got {text!r}")
        return value

    return parse


def also_limit(text: str) -> tuple[str, int, float]:
    """--also SUFFIX:LIMIT:WINDOW_MS."""
    suffix, _, rest = text.partition(":")
    limit, _, window = rest.partition(":")
    try:
        parsed = (suffix, int(limit), float(window))
    except ValueError:
        parsed = ("", 0, 0.0)
    if not parsed[0] or parsed[1] <= 0 or parsed[2] <= 0:
        raise argparse.ArgumentTypeError(
            f"--also must be SUFFIX:LIMIT:WINDOW_MS with a positive limit and window, got {text!r}"
        )
    return parsed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="0: any free port (printed on stdout)")
    ap.add_argument("--limit", type=positive(int, "--limit"), default=600)
    ap.add_argument("--window-ms", type=positive(float, "--window-ms"), default=60_000.0)
    ap.add_argument("--log", required=True, help="JSONL file to append every request to")
    ap.add_argument(
        "--also",
        type=also_limit,
        default=None,
        help="SUFFIX:LIMIT:WINDOW_MS: keys ending in SUFFIX are held to this limit too",
    )
    args = ap.parse_args(argv)

    provider = Provider(Budget(args.limit, args.window_ms, args.also), args.log)
    # socketserver's listen backlog is 5: a burst of new connections would
    # overflow it and wait for the client's SYN retransmission (1 s), a delay
    # no provider of this kind imposes.
    ThreadingHTTPServer.request_queue_size = 1024
    server = ThreadingHTTPServer((args.host, args.port), make_handler(provider))
    server.daemon_threads = True
    print(f"listening on {args.host}:{server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
        provider.close()
    return 0


if __name__ == "__main__":
    import signal

    # SIGTERM (how the e2e script stops it) ends serve_forever like Ctrl-C.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    sys.exit(main())
