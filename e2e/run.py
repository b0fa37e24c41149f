#!/usr/bin/env python3
"""The whole system end to end (docs/e2e.md; `make e2e`, `make e2e-full`).

Run inside scripts/with-redis.sh and go/scripts/with-postgres.sh (they export
SLIDELIMIT_TEST_REDIS_URL and SLIDELIMIT_TEST_DATABASE_URL). It starts the
fake provider (e2e/provider.py), one worker per job system (River, BullMQ,
Sidekiq, Celery; e2e/<system>/) and a Prometheus server, feeds the jobs,
waits until every job has completed, checks, queries Prometheus, draws one
SVG per tenant, and stops everything it started, by pid.

Each tenant has four API keys at the provider: <tenant>-log, spent through
the sliding log, <tenant>-bucketed, spent through the bucketed window,
<tenant>-multi, which the provider holds to a second, shorter limit too
("15 per second and 60 per 6 s") and which is spent through a policy of
both limits (all three exact), and <tenant>-counter, spent through the
sliding counter (the contrast), apart so that the counter's overshoot cannot
eat an exact budget. Every job system works jobs of every key: all of them
spend the same budgets.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import analysis

ROOT = Path(__file__).resolve().parent.parent
SYSTEMS = ("river", "bullmq", "sidekiq", "celery")
# A key's suffix -> the job's alg (which limiter the workers put in front of it).
SHORT = {
    "log": "sliding_log",
    "bucketed": "bucketed_window",
    "multi": "multi",
    "counter": "sliding_counter",
}
# Never more than the limit in any rolling window: asserted, not just reported.
EXACT = ("sliding_log", "bucketed_window", "multi")


# --- a few Redis commands over RESP, so that this script needs only the standard library ---


class Redis:
    def __init__(self, url: str) -> None:
        u = urllib.parse.urlsplit(url)
        self.sock = socket.create_connection(
            (u.hostname or "127.0.0.1", u.port or 6379), timeout=30
        )
        self.file = self.sock.makefile("rb")

    def pipeline(self, *commands: list[str]) -> list[Any]:
        out = bytearray()
        for cmd in commands:
            out += b"*%d\r\n" % len(cmd)
            for arg in cmd:
                b = arg.encode()
                out += b"$%d\r\n%s\r\n" % (len(b), b)
        self.sock.sendall(out)
        return [self._reply() for _ in commands]

    def __call__(self, *cmd: str) -> Any:
        return self.pipeline(list(cmd))[0]

    def _reply(self) -> Any:
        line = self.file.readline()
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RuntimeError(f"redis: {rest.decode()}")
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.file.read(n + 2)[:-2]
            return data.decode()
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._reply() for _ in range(n)]
        raise RuntimeError(f"redis: unexpected reply {line!r}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(url: str, timeout: float = 5) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return resp.read()


def wait_until(
    what: str, seconds: float, check: Callable[..., object], procs: dict[str, subprocess.Popen]
) -> None:
    deadline = time.monotonic() + seconds
    while True:
        for name, p in procs.items():
            if p.poll() is not None:
                raise SystemExit(
                    f"e2e: {name} exited with {p.returncode} while waiting for {what} (see its log)"
                )
        try:
            if check():
                return
        except (OSError, RuntimeError):
            pass
        if time.monotonic() > deadline:
            raise SystemExit(f"e2e: timed out after {seconds:.0f} s waiting for {what}")
        time.sleep(0.2)


class Processes:
    """Everything this run started, stopped by pid in reverse order."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.procs: dict[str, subprocess.Popen] = {}

    def start(
        self, name: str, argv: list[str], env: dict[str, str] | None = None, cwd: Path | None = None
    ) -> None:
        log = open(self.logs / f"{name}.log", "w")  # noqa: SIM115 (the child keeps its own copy)
        self.procs[name] = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd, start_new_session=True
        )
        log.close()

    def stop(self, name: str) -> None:
        p = self.procs.pop(name, None)
        if p is None or p.poll() is not None:
            return
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()

    def stop_all(self) -> None:
        for name in reversed(list(self.procs)):
            self.stop(name)


def prometheus_config(targets: dict[str, int], scrape_s: float, rules: list[Path]) -> str:
    lines = (
        [
            "global:",
            f"  scrape_interval: {scrape_s:g}s",
            f"  evaluation_interval: {scrape_s:g}s",
            "rule_files:",
        ]
        + [f"  - {r}" for r in rules]
        + ["scrape_configs:"]
    )
    for job, port in targets.items():
        lines += [
            f"  - job_name: {job}",
            "    static_configs:",
            f"      - targets: ['127.0.0.1:{port}']",
        ]
    return "\n".join(lines) + "\n"


def prom_query(base: str, expr: str) -> list[dict[str, Any]]:
    body = http_get(f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
    reply = json.loads(body)
    if reply.get("status") != "success":
        raise RuntimeError(f"prometheus: {expr}: {reply}")
    return reply["data"]["result"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--limit", type=int, default=60, help="provider's and limiter's budget per window"
    )
    ap.add_argument("--window-ms", type=int, default=6000)
    ap.add_argument(
        "--short-limit",
        type=int,
        default=None,
        help="the provider's second limit on the -multi keys (default limit / 4)",
    )
    ap.add_argument(
        "--short-window-ms", type=int, default=None, help="its window (default window / 6)"
    )
    ap.add_argument("--tenants", type=int, default=4)
    ap.add_argument(
        "--steady-windows",
        type=float,
        default=2.0,
        help="windows of steady demand at twice the budget after the burst",
    )
    ap.add_argument("--systems", default=",".join(SYSTEMS))
    ap.add_argument(
        "--jitter-ms", type=int, default=None, help="deferral jitter (default window/12)"
    )
    ap.add_argument(
        "--margin-ms",
        type=int,
        default=500,
        help="added to the limiter's window over the provider's (network delay allowance)",
    )
    ap.add_argument(
        "--buckets",
        type=int,
        default=None,
        help="the bucketed window's buckets; must divide the limiter's window (window + margin); "
        "default the largest count up to 60 that does",
    )
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--scrape-s", type=float, default=1.0)
    ap.add_argument("--river-bin", default=str(ROOT / ".tmp/e2e/river"))
    ap.add_argument("--python", default=str(ROOT / ".tmp/python/venv/bin/python"))
    ap.add_argument("--out", default=str(ROOT / "e2e/out"))
    ap.add_argument("--figures", default=None, help="also copy the SVGs to this directory")
    args = ap.parse_args(argv)
    if args.short_limit is None:
        args.short_limit = max(1, args.limit // 4)
    if args.short_window_ms is None:
        args.short_window_ms = max(1, args.window_ms // 6)
    for name in ("limit", "window_ms", "tenants", "concurrency", "short_limit", "short_window_ms"):
        if getattr(args, name) < 1:
            ap.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.steady_windows < 0 or args.margin_ms < 0 or args.scrape_s <= 0:
        ap.error("--steady-windows, --margin-ms must be >= 0 and --scrape-s > 0")
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = sorted(set(systems) - set(SYSTEMS))
    if unknown or not systems:
        ap.error(f"--systems: unknown {unknown} (known: {', '.join(SYSTEMS)})")
    jitter_ms = args.jitter_ms if args.jitter_ms is not None else args.window_ms // 12
    lwin = args.window_ms + args.margin_ms  # the limiter's window
    if args.buckets is None:
        args.buckets = analysis.default_buckets(lwin)
    elif args.buckets < 1 or lwin % args.buckets:
        ap.error(
            f"--buckets {args.buckets} must be a positive divisor of the limiter's window, "
            f"--window-ms + --margin-ms = {lwin} (e.g. {analysis.default_buckets(lwin)})"
        )

    redis_url = os.environ.get("SLIDELIMIT_TEST_REDIS_URL")
    db_url = os.environ.get("SLIDELIMIT_TEST_DATABASE_URL")
    if not redis_url or ("river" in systems and not db_url):
        raise SystemExit(
            "e2e: run inside scripts/with-redis.sh (and go/scripts/with-postgres.sh for River)"
        )

    # SIGTERM (a CI timeout) stops what this run started, as Ctrl-C does.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    out = Path(args.out)
    shutil.rmtree(out, ignore_errors=True)
    (out / "logs").mkdir(parents=True)
    procs = Processes(out / "logs")
    try:
        return run(args, systems, jitter_ms, redis_url, db_url or "", out, procs)
    finally:
        procs.stop_all()


def run(
    args: argparse.Namespace,
    systems: list[str],
    jitter_ms: int,
    redis_url: str,
    db_url: str,
    out: Path,
    procs: Processes,
) -> int:
    limit, window = args.limit, args.window_ms
    started = time.monotonic()
    r = Redis(redis_url)
    r("FLUSHALL")

    # The provider.
    provider_port = free_port()
    provider_log = out / "provider.jsonl"
    procs.start(
        "provider",
        [
            sys.executable,
            str(ROOT / "e2e/provider.py"),
            "--port",
            str(provider_port),
            "--limit",
            str(limit),
            "--window-ms",
            str(window),
            "--log",
            str(provider_log),
            f"--also=-multi:{args.short_limit}:{args.short_window_ms}",
        ],
    )
    provider_url = f"http://127.0.0.1:{provider_port}"

    # The workers, each on its own metrics port.
    ports = {s: free_port() for s in systems}
    base_env = dict(
        os.environ,
        E2E_REDIS_URL=redis_url,
        E2E_DATABASE_URL=db_url,
        E2E_PROVIDER_URL=provider_url,
        E2E_LIMIT=str(limit),
        E2E_WINDOW_MS=str(window + args.margin_ms),
        E2E_JITTER_MS=str(jitter_ms),
        E2E_BUCKETS=str(args.buckets),
        E2E_SHORT_LIMIT=str(args.short_limit),
        E2E_SHORT_WINDOW_MS=str(args.short_window_ms + args.margin_ms),
        E2E_CONCURRENCY=str(args.concurrency),
    )
    for s in systems:
        env = dict(base_env, E2E_METRICS_PORT=str(ports[s]))
        if s == "river":
            procs.start(s, [args.river_bin], env)
        elif s == "bullmq":
            env["NODE_PATH"] = f"{ROOT / '.tmp/e2e/node_modules'}:{ROOT / 'node/node_modules'}"
            procs.start(s, ["node", str(ROOT / "e2e/bullmq/worker.js")], env)
        elif s == "sidekiq":
            env["RUBYLIB"] = str(ROOT / "ruby/lib")
            procs.start(
                s,
                [
                    "sidekiq",
                    "-r",
                    str(ROOT / "e2e/sidekiq/app.rb"),
                    "-c",
                    str(args.concurrency),
                    "-q",
                    "default",
                    "-t",
                    "5",
                ],
                env,
            )
        elif s == "celery":
            procs.start(
                s,
                [
                    args.python,
                    "-m",
                    "celery",
                    "-A",
                    "e2e_celery",
                    "worker",
                    "--pool",
                    "threads",
                    "-c",
                    str(args.concurrency),
                    "--loglevel",
                    "WARNING",
                    "--without-gossip",
                    "--without-mingle",
                    "--without-heartbeat",
                ],
                env,
                cwd=ROOT / "e2e/celery",
            )

    # Prometheus, with the ops/ rules, scraping the provider and every worker.
    prom_port = free_port()
    targets = {"provider": provider_port, **ports}
    rules = sorted((ROOT / "ops/rules").glob("*.yml"))
    (out / "prometheus.yml").write_text(prometheus_config(targets, args.scrape_s, rules))
    procs.start(
        "prometheus",
        [
            "prometheus",
            f"--config.file={out / 'prometheus.yml'}",
            f"--storage.tsdb.path={out / 'prometheus-data'}",
            f"--web.listen-address=127.0.0.1:{prom_port}",
            "--log.level=warn",
        ],
    )
    prom = f"http://127.0.0.1:{prom_port}"

    for name, port in targets.items():
        wait_until(
            f"{name} on :{port}",
            90,
            lambda p=port: http_get(f"http://127.0.0.1:{p}/metrics") is not None,
            procs.procs,
        )
    wait_until("prometheus ready", 60, lambda: bool(http_get(f"{prom}/-/ready")), procs.procs)
    wait_until(
        "prometheus scraping every target",
        60,
        lambda: len(prom_query(prom, "up == 1")) == len(targets),
        procs.procs,
    )
    print(
        f"e2e: provider, prometheus and {', '.join(systems)} up after {time.monotonic() - started:.1f} s",
        flush=True,
    )

    # The jobs: per key, a burst of `limit` jobs just before a window boundary
    # (the counter's fixed windows start at multiples of the window), then
    # steady demand at twice the budget; round robin over the systems.
    lwin = window + args.margin_ms  # the limiter's window
    now = time.time() * 1000
    boundary = (int(now + 2000 + lwin * 0.1) // lwin + 1) * lwin
    burst_at = boundary - lwin * 0.1
    keys = [f"t{i + 1}-{short}" for i in range(args.tenants) for short in SHORT]
    steady = int(2 * limit * args.steady_windows)
    # Keys interleaved within a batch: each system works its list in order,
    # and every key's burst must reach the limiters before the boundary.
    plan: list[tuple[float, int, str]] = [(burst_at, n, k) for n in range(limit) for k in keys]
    plan += [(boundary + i * window / (2 * limit), 0, k) for i in range(steady) for k in keys]
    plan.sort()
    seq: Counter[str] = Counter()
    arrivals: dict[str, list[float]] = defaultdict(list)
    expected: dict[str, dict[str, str]] = {}
    i = 0
    while i < len(plan):
        at = plan[i][0]
        delay = at / 1000 - time.time()
        if delay > 0:
            time.sleep(delay)
        batch = []
        pushed_ms = time.time() * 1000
        while i < len(plan) and plan[i][0] <= pushed_ms:
            key = plan[i][2]
            short = key.rsplit("-", 1)[1]
            n = seq[key]
            seq[key] += 1
            system = systems[n % len(systems)]
            job = {"id": f"{key}-{n:05d}", "tenant": key, "alg": SHORT[short]}
            expected[job["id"]] = {"system": system, "tenant": key}
            arrivals[key].append(pushed_ms)
            batch.append(["RPUSH", f"e2e:feed:{system}", json.dumps(job)])
            i += 1
        r.pipeline(*batch)
    fed_s = time.monotonic() - started
    print(
        f"e2e: fed {len(expected)} jobs ({len(keys)} keys, {limit} per {window} ms each, the "
        f"-multi keys also {args.short_limit} per {args.short_window_ms} ms, "
        f"burst at {burst_at - boundary:+.0f} ms from a window boundary)",
        flush=True,
    )

    # Every job, once: the log drains one budget per window after the burst.
    drain_s = (limit + steady) / limit * window / 1000
    deadline = time.monotonic() + drain_s + 3 * window / 1000 + 60
    while (n := r("LLEN", "e2e:done")) < len(expected):
        for name, p in procs.procs.items():
            if p.poll() is not None:
                raise SystemExit(
                    f"e2e: {name} exited with {p.returncode} (see {out / 'logs' / name}.log)"
                )
        if time.monotonic() > deadline:
            print(f"e2e: timed out with {n} of {len(expected)} jobs done", flush=True)
            break
        time.sleep(0.25)
    # Late duplicates would show up within a few deferral rounds.
    time.sleep(max(2.0, 3 * args.scrape_s, jitter_ms / 1000 * 2))
    done_s = time.monotonic() - started

    # Prometheus's view, through its HTTP API (the recording rules of ops/).
    report: dict[str, Any] = {"prometheus": {}}
    pq = report["prometheus"]
    share = prom_query(
        prom,
        "sum by (tenant) (ratelimit_denied_total) / (sum by (tenant) (ratelimit_denied_total)"
        " + sum by (tenant) (ratelimit_allowed_total))",
    )
    pq["denial_share"] = {x["metric"]["tenant"]: float(x["value"][1]) for x in share}
    for q in ("0.5", "0.9", "0.99"):
        res = prom_query(
            prom, f"histogram_quantile({q}, sum by (le) (ratelimit_wait_seconds_bucket))"
        )
        pq[f"wait_p{q[2:]}_s"] = float(res[0]["value"][1]) if res else None
        by_system = prom_query(
            prom, f"histogram_quantile({q}, sum by (job, le) (ratelimit_wait_seconds_bucket))"
        )
        pq[f"wait_p{q[2:]}_s_by_system"] = {
            x["metric"]["job"]: float(x["value"][1]) for x in by_system
        }
    rate = prom_query(
        prom, 'sum(geocoder_responses_total{status="429"}) / sum(geocoder_responses_total)'
    )
    pq["provider_429_share"] = float(rate[0]["value"][1]) if rate else None
    by_key = prom_query(prom, 'sum by (key) (geocoder_responses_total{status="429"})')
    pq["provider_429_by_key"] = {x["metric"]["key"]: int(float(x["value"][1])) for x in by_key}
    rec = prom_query(prom, "slidelimit:provider_429:rate1m")
    pq["provider_429_rate1m_per_s"] = float(rec[0]["value"][1]) if rec else None
    alerts = json.loads(http_get(f"{prom}/api/v1/alerts"))["data"]["alerts"]
    pq["alerts"] = sorted(
        {
            (
                a["labels"]["alertname"],
                a["labels"].get("tenant", a["labels"].get("key", "")),
                a["state"],
            )
            for a in alerts
        }
    )

    # The queues' own books: nothing failed, retried, dead or still waiting.
    leftovers = {}
    if "bullmq" in systems:
        for state in ("failed", "delayed", "wait", "active"):
            kind = r("TYPE", f"bull:e2e-geocode:{state}")
            size = {"zset": "ZCARD", "list": "LLEN"}.get(kind)
            leftovers[f"bullmq {state}"] = r(size, f"bull:e2e-geocode:{state}") if size else 0
    if "sidekiq" in systems:
        r("SELECT", "2")
        for zset in ("retry", "dead", "schedule"):
            leftovers[f"sidekiq {zset}"] = r("ZCARD", zset)
        leftovers["sidekiq queue:default"] = r("LLEN", "queue:default")
        r("SELECT", "0")
    report["queue_leftovers"] = leftovers

    procs.stop_all()
    records = [json.loads(x) for x in r("LRANGE", "e2e:done", "0", "-1")]
    calls = [json.loads(line) for line in provider_log.read_text().splitlines()]
    failures = check_and_report(
        args, systems, expected, arrivals, records, calls, report, boundary, out
    )
    report.update(
        fed_s=round(fed_s, 1),
        done_s=round(done_s, 1),
        jobs=len(expected),
        systems=systems,
        limit=limit,
        window_ms=window,
        margin_ms=args.margin_ms,
        jitter_ms=jitter_ms,
        buckets=args.buckets,
        short_limit=args.short_limit,
        short_window_ms=args.short_window_ms,
        failures=failures,
    )
    (out / "report.json").write_text(json.dumps(report, indent=2, default=list) + "\n")
    print_report(report)
    if args.figures:
        dest = Path(args.figures)
        dest.mkdir(parents=True, exist_ok=True)
        for svg in sorted(out.glob("e2e-*.svg")):
            shutil.copy(svg, dest / svg.name)
    if failures:
        print("e2e: FAILED\n  " + "\n  ".join(failures), flush=True)
        return 1
    print(f"e2e: passed in {time.monotonic() - started:.0f} s", flush=True)
    return 0


# What each system records as its attempt/retry count for a job that never failed.
UNMOVED = {"river": 1, "bullmq": 0, "sidekiq": None, "celery": 0}


def check_and_report(
    args: argparse.Namespace,
    systems: list[str],
    expected: dict[str, dict[str, str]],
    arrivals: dict[str, list[float]],
    records: list[dict[str, Any]],
    calls: list[dict[str, Any]],
    report: dict[str, Any],
    boundary: int,
    out: Path,
) -> list[str]:
    limit, window = args.limit, args.window_ms
    failures: list[str] = []

    # Every job completed exactly once, on the system it was given to, and
    # called the provider exactly once.
    done = Counter(rec["id"] for rec in records)
    missing = sorted(set(expected) - set(done))
    dupes = sorted(j for j, n in done.items() if n > 1)
    strangers = sorted(set(done) - set(expected))
    wrong_system = sorted(
        rec["id"]
        for rec in records
        if rec["id"] in expected and rec["system"] != expected[rec["id"]]["system"]
    )
    called = Counter(c["job"] for c in calls)
    called_twice = sorted(j for j, n in called.items() if n > 1)
    for what, ids in (
        ("jobs never completed", missing),
        ("jobs completed more than once", dupes),
        ("completions of jobs never fed", strangers),
        ("jobs completed on another system", wrong_system),
        ("jobs that called the provider more than once", called_twice),
    ):
        if ids:
            failures.append(
                f"{len(ids)} {what}: {', '.join(ids[:5])}{' ...' if len(ids) > 5 else ''}"
            )
    left = {k: v for k, v in report["queue_leftovers"].items() if v}
    if left:
        failures.append(f"jobs left in the queues' own sets: {left}")
    moved = [
        f"{rec['id']} ({rec['system']} {rec['attempt']!r}, expected {UNMOVED[rec['system']]!r})"
        for rec in records
        if rec["attempt"] != UNMOVED[rec["system"]]
    ]
    if moved:
        failures.append(f"{len(moved)} jobs' attempt/retry count moved: {', '.join(moved[:5])}")

    per_key: dict[str, dict[str, Any]] = {}
    for key in sorted(arrivals):
        alg = SHORT[key.rsplit("-", 1)[1]]
        key_calls = [c for c in calls if c["key"] == key]
        ok = [c["ms"] for c in key_calls if c["status"] == 200]
        all_ms = [c["ms"] for c in key_calls]
        n429 = sum(1 for c in key_calls if c["status"] == 429)
        busiest, _ = analysis.max_in_window(ok, window)
        offered, _ = analysis.max_in_window(all_ms, window)
        # The budget the workers were given: the limiter's windows.
        also = [(args.short_limit, args.short_window_ms + args.margin_ms)] if alg == "multi" else []
        ideal = analysis.earliest_schedule(arrivals[key], limit, window + args.margin_ms, also)
        last = max(all_ms) if all_ms else float("nan")
        per_key[key] = {
            "algorithm": alg,
            "calls": len(key_calls),
            "provider_429": n429,
            "max_accepted_in_window": busiest,
            "max_sent_in_window": offered,
            "last_call_past_earliest_ms": round(last - ideal[-1]),
            "by_system": dict(Counter(c["system"] for c in key_calls)),
        }
        if alg == "multi":
            short_busiest, _ = analysis.max_in_window(ok, args.short_window_ms)
            short_offered, _ = analysis.max_in_window(all_ms, args.short_window_ms)
            per_key[key]["max_sent_in_short_window"] = short_offered
            if short_offered > args.short_limit:
                failures.append(
                    f"{key}: {short_offered} requests reached the provider in one rolling "
                    f"{args.short_window_ms} ms (short limit {args.short_limit})"
                )
            if short_busiest > args.short_limit:
                failures.append(
                    f"{key}: the provider's log holds {short_busiest} accepted in one rolling "
                    f"{args.short_window_ms} ms (short limit {args.short_limit})"
                )
        if alg in EXACT:
            if n429:
                failures.append(
                    f"{key}: the provider answered {n429} requests with 429 under {alg}"
                )
            if offered > limit:
                failures.append(
                    f"{key}: {offered} requests reached the provider in one rolling window (limit {limit})"
                )
        if busiest > limit:
            failures.append(
                f"{key}: the provider's log holds {busiest} accepted in one rolling window (limit {limit})"
            )
    report["keys"] = per_key
    # How often jobs were deferred before they ran (the bindings' max_deferrals must allow it).
    deferred: dict[str, list[int]] = defaultdict(list)
    for rec in records:
        if rec.get("deferrals") is not None:
            deferred[rec["system"]].append(rec["deferrals"])
    report["deferrals"] = {
        s: {"mean": round(sum(d) / len(d), 1), "max": max(d)} for s, d in sorted(deferred.items())
    }
    # From the job body (just after the check) to the provider's arrival:
    # the delay a limiter window must allow for.
    delays: dict[str, list[float]] = defaultdict(list)
    for c in calls:
        if c.get("sent_ms") is not None:
            delays[c["system"]].append(c["ms"] - c["sent_ms"])
    report["call_delay_ms"] = {
        s: {"p50": round(_pct(d, 0.5)), "p99": round(_pct(d, 0.99)), "max": round(max(d))}
        for s, d in sorted(delays.items())
    }

    # The pictures: one per tenant, from the provider's log.
    origin = boundary - window
    end = max((c["ms"] for c in calls), default=origin) + window
    step = max(window / 60, 10)
    panels = {
        "sliding log": "log",
        f"bucketed window ({args.buckets} buckets)": "bucketed",
        f"two limits (also {args.short_limit} per {args.short_window_ms / 1000:g} s)": "multi",
    }
    for t in range(1, args.tenants + 1):
        series = {
            label: {
                s: analysis.rolling_counts(
                    [c["ms"] for c in calls if c["key"] == f"t{t}-{short}" and c["system"] == s],
                    window,
                    origin,
                    end,
                    step,
                )
                for s in systems
            }
            for label, short in panels.items()
        }
        counter = analysis.rolling_counts(
            [c["ms"] for c in calls if c["key"] == f"t{t}-counter"], window, origin, end, step
        )
        title = (
            f"tenant t{t}: requests at the provider in the rolling {window / 1000:g} s, "
            f"{limit} allowed"
        )
        (out / f"e2e-t{t}.svg").write_text(
            analysis.svg_tenant(title, series, counter, limit, boundary)
        )
    return failures


def _pct(values: list[float], q: float) -> float:
    v = sorted(values)
    return v[min(len(v) - 1, int(q * len(v)))]


def print_report(report: dict[str, Any]) -> None:
    print(
        f"\n{'key':<12} {'alg':<16} {'calls':>6} {'429':>5} {'max in window':>14} {'last past earliest':>19}"
    )
    for key, k in report["keys"].items():
        # A policy of two limits: the busiest short window too.
        short = k.get("max_sent_in_short_window")
        busiest = f"{k['max_sent_in_window']}" + ("" if short is None else f" ({short} short)")
        print(
            f"{key:<12} {k['algorithm']:<16} {k['calls']:>6} {k['provider_429']:>5} "
            f"{busiest:>14} {k['last_call_past_earliest_ms'] / 1000:>17.2f} s"
        )
    print(
        "\nleft in the queues' own sets: "
        + ", ".join(f"{k} {v}" for k, v in report["queue_leftovers"].items())
    )
    print(
        "deferrals per job before it ran: "
        + ", ".join(f"{s} mean {d['mean']} max {d['max']}" for s, d in report["deferrals"].items())
    )
    print(
        "delay from job body to provider arrival (ms): "
        + ", ".join(
            f"{s} p50 {d['p50']} p99 {d['p99']} max {d['max']}"
            for s, d in report["call_delay_ms"].items()
        )
    )
    pq = report["prometheus"]
    print("\nPrometheus (HTTP API, at the end of the run):")
    print(
        "  denial share per tenant: "
        + ", ".join(f"{t} {v:.0%}" for t, v in sorted(pq["denial_share"].items()))
    )
    print(
        "  wait (retry-after handed out) p50/p90/p99: "
        + " / ".join(
            "n/a" if pq[f"wait_p{q}_s"] is None else f"{pq[f'wait_p{q}_s']:.3f} s"
            for q in ("5", "9", "99")
        )
    )
    for system, p90 in sorted(pq["wait_p9_s_by_system"].items()):
        print(f"    p90 {system}: {p90:.3f} s")
    share = pq["provider_429_share"]
    print(
        f"  provider 429 share: {'n/a' if share is None else f'{share:.2%}'}; by key: {pq['provider_429_by_key']}"
    )
    print(f"  alerts: {pq['alerts'] or 'none'}")


if __name__ == "__main__":
    sys.exit(main())
