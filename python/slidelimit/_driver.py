"""The Python binding's driver (docs/driver.md): the public API of the
package behind JSON lines on stdin and stdout, for the shared harnesses.

    python -m slidelimit._driver

It decides nothing: every value goes to the binding as given and every
answer is the binding's. Ops use the synchronous Limiter; `load` runs its
callers as threads sharing it, so `concurrency` calls are in flight. (Threads
rather than asyncio tasks: redis-py's asyncio Cluster client surfaces errors
for seconds after a failover, its synchronous one does not; docs/python.md.)
"""

from __future__ import annotations

import json
import random
import sys
import threading
import time
from typing import Any

import slidelimit
from slidelimit import Decision, Limit, Limiter, Policy

#: The fields of one limit of a policy's `limits`.
LIMIT_FIELDS = ("algorithm", "limit", "window_ms", "buckets")

#: Callers (threads) of one `load`: beyond any harness's need, short of
#: exhausting the process.
MAX_CONCURRENCY = 1_024

#: The largest caller-clock skew a `load` takes (docs/driver.md): an hour.
MAX_SKEW_MS = 3_600_000

#: The most tenants one `load` goes round (docs/driver.md).
MAX_LOAD_TENANTS = 1_000

KNOWN_FIELDS: dict[str, tuple[str, ...]] = {
    "hello": (),
    "exit": (),
    "store": ("kind", "url", "urls", "timeout_ms", "tls_ca_file"),
    "policy": (
        "namespace",
        "resource",
        "algorithm",
        "limit",
        "window_ms",
        "buckets",
        "limits",
        "deny_cache",
    ),
    "acquire": ("tenant", "cost"),
    "acquire_at": ("tenant", "cost", "now_ms"),
    "peek": ("tenant", "cost", "now_ms"),
    "reset": ("tenant",),
    "key": ("tenant",),
    "load": (
        "lang",
        "tenant",
        "tenants",
        "cost",
        "concurrency",
        "start_at_ms",
        "end_at_ms",
        "active",
        "ramp_ms",
        "jitter_ms",
        "skew_ms",
        "out",
    ),
}


class Protocol(Exception):
    """A request the driver cannot read: `{"error":"protocol",...}`."""


def dumps(value: Any) -> str:
    # ASCII with \u escapes: a message may quote a str no UTF-8 can carry.
    return json.dumps(value, separators=(",", ":"))


def decision_line(d: Decision) -> str:
    denied_by = "" if d.denied_by is None else f',"denied_by":{d.denied_by}'
    return (
        f'{{"allowed":{"true" if d.allowed else "false"},"remaining":{d.remaining},'
        f'"retry_after_ms":{d.retry_after_ms},"reset_after_ms":{d.reset_after_ms},'
        f'"now_ms":{d.now_ms}{denied_by}}}'
    )


def error_line(e: slidelimit.Error) -> str:
    return dumps({"error": e.code, "field": e.field, "message": e.message})


OK = '{"ok":true}'


# Every whole number up to 2^53 is a double, exactly.
WHOLE_DOUBLES = 2**53


class Fields:
    """A request's fields, read by name with the JSON type the protocol
    gives them; unknown fields are refused so that a typo is no default."""

    def __init__(
        self, op: str, request: dict[str, Any], known: tuple[str, ...] | None = None
    ) -> None:
        known = KNOWN_FIELDS[op] if known is None else known
        for name in request:
            if name != "op" and name not in known:
                raise Protocol(f"{op}: unknown field {name!r}")
        self.op = op
        self.request = request

    def opt_str(self, name: str) -> str | None:
        value = self.request.get(name)
        if value is not None and not isinstance(value, str):
            raise Protocol(f"{self.op}: {name} must be a string")
        return value

    def string(self, name: str) -> str:
        value = self.opt_str(name)
        if value is None:
            raise Protocol(f"{self.op}: {name} is required")
        return value

    def opt_number(self, name: str) -> Any:
        """A JSON number, handed to the binding as it came (a fraction or a
        negative is the binding's to refuse: its parameters are Python ints).
        A JSON number is a double (docs/driver.md): a whole one up to 2^53
        written as `3.0`, `3e0` or `-0` is that integer."""
        value = self.request.get(name)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise Protocol(f"{self.op}: {name} must be a number")
        if isinstance(value, float) and value.is_integer() and abs(value) <= WHOLE_DOUBLES:
            return int(value)
        return value

    def number(self, name: str) -> Any:
        value = self.opt_number(name)
        if value is None:
            raise Protocol(f"{self.op}: {name} is required")
        return value

    def integer(self, name: str, default: int | None = None) -> int:
        """A number the driver itself uses (load's schedule): an integer."""
        value = self.request.get(name, default)
        if value is None:
            raise Protocol(f"{self.op}: {name} is required")
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise Protocol(f"{self.op}: {name} must be a non-negative integer")
        return value


def wall_ms() -> int:
    return time.time_ns() // 1_000_000


class Store:
    def __init__(self, f: Fields) -> None:
        self.kind = f.string("kind")
        self.url: str | None = None
        self.urls: list[str] | None = None
        if self.kind == "redis":
            self.url = f.string("url")
        elif self.kind == "cluster":
            urls = f.request.get("urls")
            if not isinstance(urls, list) or not urls or not all(isinstance(u, str) for u in urls):
                raise Protocol("store: urls must be a non-empty list of strings")
            self.urls = urls
        elif self.kind != "memory":
            raise Protocol(f"store: kind must be memory, redis or cluster, got {self.kind!r}")
        self.timeout_ms = f.opt_number("timeout_ms")
        self.tls_ca_file = f.opt_str("tls_ca_file")
        # The first limiter made on this store; later policies share its client.
        self.base: Limiter | None = None

    def limiter(self, policy: Policy, deny_cache: bool) -> Limiter:
        if self.base is not None:
            return self.base.with_policy(policy, deny_cache=deny_cache)
        options: dict[str, Any] = {"deny_cache": deny_cache}
        if self.timeout_ms is not None:
            options["timeout_ms"] = self.timeout_ms
        if self.tls_ca_file is not None:
            options["tls_ca_file"] = self.tls_ca_file
        if self.kind == "memory":
            # The engine has no deny cache.
            limiter = Limiter.memory(policy)
        elif self.kind == "redis":
            assert self.url is not None
            limiter = Limiter.from_url(self.url, policy, **options)
        else:
            assert self.urls is not None
            limiter = Limiter.from_cluster(self.urls, policy, **options)
        self.base = limiter
        return limiter

    def close(self) -> None:
        if self.base is not None:
            self.base.close()


class Driver:
    def __init__(self) -> None:
        self.store: Store | None = None
        # The limiter of the last policy, or the error that policy got.
        self.limiter: Limiter | slidelimit.Error | None = None

    def current(self, op: str) -> Limiter:
        if isinstance(self.limiter, slidelimit.Error):
            raise self.limiter
        if self.limiter is None:
            raise Protocol(f"{op}: no policy yet")
        return self.limiter

    def handle(self, op: str, f: Fields) -> str:
        if op == "hello":
            return dumps({"ok": True, "binding": "python", "version": slidelimit.__version__})
        if op == "exit":
            return OK
        if op == "store":
            store = Store(f)
            if self.store is not None:
                self.store.close()
            self.store, self.limiter = store, None
            return OK
        if op == "policy":
            return self.policy(f)
        # A tenant left out goes as None: the binding refuses it, as a user's.
        tenant: Any = f.opt_str("tenant")
        if op == "key":
            key = self.current(op).key(tenant)
            return dumps({"ok": True, "key": key, "slot": slidelimit.slot(key)})
        if op == "reset":
            self.current(op).reset(tenant)
            return OK
        if op == "load":
            return self.load(f)
        # The whole request is read before the limiter (or its policy's
        # error) answers: a request the driver cannot read is a protocol error.
        cost = f.opt_number("cost")
        costs = {} if cost is None else {"cost": cost}
        now_ms = f.number("now_ms") if op == "acquire_at" else f.opt_number("now_ms")
        limiter = self.current(op)
        if op == "acquire":
            d = limiter.acquire(tenant, **costs)
        elif op == "acquire_at":
            d = limiter.acquire_at(tenant, now_ms, **costs)
        else:
            d = limiter.peek(tenant, now_ms=now_ms, **costs)
        return decision_line(d)

    def policy(self, f: Fields) -> str:
        if self.store is None:
            raise Protocol("policy: no store yet")
        # Defaults are the binding's; resource, limit and window_ms have none,
        # so one left out goes to the binding as None, which it refuses.
        namespace = f.opt_str("namespace")
        resource: Any = f.opt_str("resource")
        deny_cache = f.request.get("deny_cache", False)
        if not isinstance(deny_cache, bool):
            raise Protocol("policy: deny_cache must be a boolean")
        limits = f.request.get("limits")
        if limits is not None:
            single = [n for n in LIMIT_FIELDS if f.request.get(n) is not None]
            if single:
                raise Protocol(f"policy: limits and {', '.join(single)} together")
            if not isinstance(limits, list):
                raise Protocol("policy: limits must be a list of objects")
            given = [self.limit(i, item) for i, item in enumerate(limits)]
        else:
            algorithm = f.opt_str("algorithm")
            limit = f.opt_number("limit")
            window_ms = f.opt_number("window_ms")
            buckets = f.opt_number("buckets")  # None: the binding's default
        namespace = slidelimit.DEFAULT_NAMESPACE if namespace is None else namespace
        self.limiter = None
        try:
            if limits is not None:
                policy = Policy(namespace, resource, limits=given)
            else:
                policy = Policy(
                    namespace,
                    resource,
                    slidelimit.DEFAULT_ALGORITHM if algorithm is None else algorithm,
                    limit,  # a float goes to the binding, which refuses it
                    window_ms,
                    buckets=buckets,
                )
            self.limiter = self.store.limiter(policy, deny_cache)
        except slidelimit.Error as e:
            self.limiter = e
            raise
        return OK

    @staticmethod
    def limit(index: int, item: Any) -> Limit:
        """One object of `limits`, as a Limit with its values as given."""
        if not isinstance(item, dict):
            raise Protocol(f"policy: limits[{index}] must be an object")
        f = Fields(f"policy: limits[{index}]", item, LIMIT_FIELDS)
        algorithm = f.opt_str("algorithm")
        return Limit(
            slidelimit.DEFAULT_ALGORITHM if algorithm is None else algorithm,
            f.opt_number("limit"),
            f.opt_number("window_ms"),
            f.opt_number("buckets"),
        )

    def load(self, f: Fields) -> str:
        active = f.request.get("active")
        if active is not None and not (
            isinstance(active, list)
            and all(
                isinstance(p, list)
                and len(p) == 2
                and all(isinstance(n, int) and not isinstance(n, bool) for n in p)
                for p in active
            )
        ):
            raise Protocol("load: active must be a list of [from, to] integer pairs")
        skew_ms = f.request.get("skew_ms")
        if skew_ms is not None and (
            isinstance(skew_ms, bool) or not isinstance(skew_ms, int) or abs(skew_ms) > MAX_SKEW_MS
        ):
            raise Protocol(f"load: skew_ms must be an integer within ±{MAX_SKEW_MS}")
        concurrency = f.integer("concurrency")
        if concurrency > MAX_CONCURRENCY:
            raise Protocol(f"load: concurrency must be at most {MAX_CONCURRENCY}")
        plan = Plan(
            lang=f.string("lang"),
            tenants=load_tenants(f),
            cost=f.opt_number("cost"),
            start_at_ms=f.integer("start_at_ms"),
            end_at_ms=f.integer("end_at_ms"),
            active=active,
            ramp_ms=f.integer("ramp_ms", 0),
            jitter_ms=f.integer("jitter_ms", 0),
            skew_ms=skew_ms,
        )
        out = f.string("out")
        # The whole request is read before the limiter (or its policy's
        # error) answers.
        limiter = self.current("load")
        results: list[tuple[list[str], int]] = [([], 0)] * concurrency

        def run(i: int) -> None:
            results[i] = plan.caller(limiter, i)

        threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(concurrency)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        calls = errors = 0
        try:
            with open(out, "w", encoding="utf-8") as file:
                for lines, failed in results:
                    calls += len(lines)
                    errors += failed
                    file.writelines(lines)
        except OSError as e:
            raise Protocol(f"load: cannot write out {out}: {e}") from e
        return dumps({"ok": True, "calls": calls, "errors": errors})


def load_tenants(f: Fields) -> list[str]:
    """A load's `tenant`, or its `tenants` to go round (docs/driver.md)."""
    tenants = f.request.get("tenants")
    if tenants is None:
        return [f.string("tenant")]
    if f.request.get("tenant") is not None:
        raise Protocol("load: tenant and tenants are exclusive")
    if not (
        isinstance(tenants, list)
        and 1 <= len(tenants) <= MAX_LOAD_TENANTS
        and all(isinstance(t, str) for t in tenants)
    ):
        raise Protocol(f"load: tenants must be a list of 1 to {MAX_LOAD_TENANTS} strings")
    return tenants


class Plan:
    def __init__(
        self,
        lang: str,
        tenants: list[str],
        cost: Any,
        start_at_ms: int,
        end_at_ms: int,
        active: list[list[int]] | None,
        ramp_ms: int,
        jitter_ms: int,
        skew_ms: int | None,
    ) -> None:
        # Each tenant with the head of its calls' lines ({"lang":..., and
        # ,"tenant":... when there are several).
        head = f'{{"lang":{dumps(lang)}'
        self.rounds = [
            (t, f'{head},"tenant":{dumps(t)}' if len(tenants) > 1 else head) for t in tenants
        ]
        self.costs = {} if cost is None else {"cost": cost}
        self.start_at_ms = start_at_ms
        self.end_at_ms = end_at_ms
        self.active = active
        self.ramp_ms = ramp_ms
        self.jitter_ms = jitter_ms
        # Not None: every call is acquire_at on the wall clock plus the skew
        # (caller time) instead of acquire on server time.
        self.skew_ms = skew_ms

    def wait_ms(self, now: int) -> int:
        """0 inside an active interval, else until the next one (or the end)."""
        if self.active is None or any(a <= now < b for a, b in self.active):
            return 0
        starts = [a for a, _ in self.active if a > now]
        until = min(min(starts, default=self.end_at_ms), self.end_at_ms)
        return max(until - now, 1)

    def caller(self, limiter: Limiter, index: int) -> tuple[list[str], int]:
        """Caller `index`'s lines and errors; its j-th call (from 0) is for
        tenants[(index + j) mod n]."""
        lines: list[str] = []
        errors = 0
        turn = index
        first = self.start_at_ms + random.randint(0, self.ramp_ms)
        time.sleep(max(min(first, self.end_at_ms) - wall_ms(), 0) / 1000)
        while True:
            now = wall_ms()
            if now >= self.end_at_ms:
                return lines, errors
            wait = self.wait_ms(now)
            if wait > 0:
                time.sleep(wait / 1000)
                continue
            tenant, head = self.rounds[turn % len(self.rounds)]
            turn += 1
            try:
                if self.skew_ms is None:
                    d = limiter.acquire(tenant, **self.costs)
                else:
                    d = limiter.acquire_at(tenant, wall_ms() + self.skew_ms, **self.costs)
                lines.append(
                    f'{head},"allowed":{"true" if d.allowed else "false"},'
                    f'"now_ms":{d.now_ms},"retry_after_ms":{d.retry_after_ms},'
                    f'"reset_after_ms":{d.reset_after_ms}}}\n'
                )
            except slidelimit.Error as e:
                errors += 1
                lines.append(f'{head},"error":"{e.code}","message":{dumps(e.message)}}}\n')
            pause = random.randint(0, self.jitter_ms)
            time.sleep(pause / 1000)


def answer(driver: Driver, line: bytes) -> tuple[str, bool]:
    """The reply to one request line, and whether to go on."""
    try:
        # Bytes that are not UTF-8 are no JSON either.
        request = json.loads(line.decode("utf-8"))
    except ValueError as e:
        return dumps({"error": "protocol", "message": f"bad JSON: {e}"}), True
    op = request.get("op") if isinstance(request, dict) else None
    try:
        if not isinstance(request, dict):
            raise Protocol("a request must be an object")
        if not isinstance(op, str):
            raise Protocol("op must be a string" if "op" in request else "op is required")
        if op not in KNOWN_FIELDS:
            raise Protocol(f"unknown op {op!r}")
        reply = driver.handle(op, Fields(op, request))
    except Protocol as p:
        reply = dumps({"error": "protocol", "message": str(p)})
    except slidelimit.Error as e:
        reply = error_line(e)
    return reply, op != "exit"


def main() -> int:
    driver = Driver()
    try:
        for raw in sys.stdin.buffer:
            if not raw.strip():
                continue
            reply, more = answer(driver, raw)
            try:
                sys.stdout.write(reply + "\n")
                sys.stdout.flush()
            except BrokenPipeError:
                break
            if not more:
                break
    finally:
        if driver.store is not None:
            driver.store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
