"""What every fault scenario shares: a context that collects failures, driver
sessions with timing, and the checks on replies (docs/driver.md)."""

import contextlib
import os
import re
import subprocess
import tempfile
import time

from harness.drivers import Driver, DriverError
from harness.servers import RedisServer

# A caller time far from the real clock: caller-time keys never meet server-time ones.
T = 1_800_000_000_000
ALGORITHMS = ("sliding_log", "sliding_counter")
DECISION_KEYS = ["allowed", "remaining", "retry_after_ms", "reset_after_ms", "now_ms"]
# Added to a timeout for "unavailable within the timeout": a correctness
# bound (the call does not hang), not a benchmark, on a loaded 2-core host.
SLACK_MS = 500


class Abort(Exception):
    """Ends a scenario early; its failure is already recorded."""


def now_ms():
    return int(time.time() * 1000)


class Context:
    """One scenario against one driver: failures, resources to clean up."""

    def __init__(self, launch):
        self.launch = launch  # () -> Driver
        self.failures = []
        self.checks = 0
        self._cleanup = []

    def check(self, ok, what):
        self.checks += 1
        if not ok:
            self.failures.append(what)
        return ok

    def require(self, ok, what):
        if not self.check(ok, what):
            raise Abort()

    def fail(self, what):
        self.require(False, what)

    def own(self, resource):
        """Closed (close()) when the scenario ends, last owned first."""
        self._cleanup.append(resource)
        return resource

    def redis(self, **kw):
        """A redis-server of this scenario's own, started."""
        server = self.own(RedisServer(**kw))
        server.start()
        return server

    def driver(self):
        """A fresh driver session; its hello must answer."""
        session = self.own(Session(self, self.launch()))
        hello = session.req(op="hello")
        self.require(
            hello.get("ok") is True and isinstance(hello.get("binding"), str), f"hello: {hello}"
        )
        session.hello = hello
        return session

    def close(self):
        while self._cleanup:
            # A failing cleanup must not hide the result.
            with contextlib.suppress(Exception):
                self._cleanup.pop().close()


class Session:
    """A driver process; every request is checked for protocol failures."""

    def __init__(self, ctx, driver):
        self.ctx, self.driver = ctx, driver
        self.hello = {}  # its answer to hello

    def req(self, timeout_s=60, **request):
        try:
            reply = self.driver.request(request, timeout_s=timeout_s)
        except DriverError as e:
            self.ctx.fail(f"{short(request)}: {e}{self.driver_stderr()}")
        return reply

    def timed(self, **request):
        """(reply, milliseconds the round trip took)."""
        started = time.monotonic()
        reply = self.req(**request)
        return reply, (time.monotonic() - started) * 1000

    def driver_stderr(self):
        text = getattr(self.driver, "stderr_text", lambda: "")()
        return f"\n  driver stderr: {text[-800:]}" if text.strip() else ""

    def ok(self, what, **request):
        """Sends a request that must succeed ({"ok":true,...})."""
        reply = self.req(**request)
        self.ctx.require(reply.get("ok") is True, f"{what}: {short(request)} -> {reply}")
        return reply

    def limiter(self, store, policy):
        self.ok("store", op="store", **store)
        self.ok("policy", op="policy", **policy)

    def key(self, tenant):
        return self.ok("key", op="key", tenant=tenant)["key"]

    def close(self):
        # Every session ends with `exit`, answered, and exit status 0.
        problem = self.driver.close()
        self.ctx.check(problem is None, f"{self.driver.name}: {problem}")


def short(request, n=160):
    text = ", ".join(f"{k}={v!r}" for k, v in request.items())
    return text if len(text) <= n else text[:n] + "..."


def is_decision(reply):
    """The driver's decision line (docs/driver.md): the five fields, and
    `denied_by` last for a denial by a policy of several limits."""
    if not isinstance(reply, dict):
        return False
    keys = list(reply)
    several = keys == [*DECISION_KEYS, "denied_by"] and reply["allowed"] is False
    return (
        (keys == DECISION_KEYS or several)
        and isinstance(reply["allowed"], bool)
        and all(type(reply[k]) is int and reply[k] >= 0 for k in keys[1:])
    )


def expect_decision(ctx, reply, what, **want):
    """reply is a decision whose fields equal `want`; returns it or None."""
    if not ctx.check(is_decision(reply), f"{what}: want a decision, got {reply}"):
        return None
    wrong = {k: reply[k] for k, v in want.items() if reply[k] != v}
    ctx.check(not wrong, f"{what}: want {want}, got {reply}")
    return reply


def is_error(reply, code):
    return isinstance(reply, dict) and reply.get("error") == code


def expect_error(ctx, reply, what, code, field=None, contains=(), starts=None):
    """reply is the error `code` (naming `field` when given), its message
    starting with `starts` and holding every text of `contains`."""
    if not ctx.check(is_error(reply, code), f"{what}: want {code}, got {reply}"):
        return False
    ok = True
    if field is not None:
        ok &= ctx.check(reply.get("field") == field, f"{what}: want field {field!r}, got {reply}")
    message = reply.get("message")
    ok &= ctx.check(isinstance(message, str), f"{what}: no message: {reply}")
    if starts is not None:
        ok &= ctx.check(
            isinstance(message, str) and message.startswith(starts),
            f"{what}: the message should start with {starts!r}: {message!r}",
        )
    for text in contains:
        ok &= ctx.check(
            isinstance(message, str) and text in message,
            f"{what}: the message should hold {text!r}: {message!r}",
        )
    return ok


def expect_fast_unavailable(ctx, session, what, store, policy, ops, timeout_ms, lower_ms=None):
    """Configures an unreachable store and calls each op: the first step that
    fails (store, policy or an op) is `unavailable` within the timeout, and
    at least lower_ms when given (a hanging peer: not given up early). When
    the policy failed, every later op answers that error (docs/driver.md)."""
    upper = timeout_ms + SLACK_MS

    def within(ms, step, tried=True):
        ctx.check(ms <= upper, f"{what}: {step} took {ms:.0f} ms, the timeout is {timeout_ms} ms")
        if tried and lower_ms is not None:
            ctx.check(
                ms >= lower_ms, f"{what}: {step} gave up after {ms:.0f} ms, before {lower_ms} ms"
            )

    reply, ms = session.timed(op="store", **store)
    if reply.get("ok") is not True:
        expect_error(ctx, reply, f"{what}: store", "unavailable")
        within(ms, "store")
        return
    ctx.check(ms <= upper, f"{what}: store took {ms:.0f} ms")
    reply, ms = session.timed(op="policy", **policy)
    have_limiter = reply.get("ok") is True
    if not have_limiter:
        expect_error(ctx, reply, f"{what}: policy", "unavailable")
        within(ms, "policy")
    for op in ops:
        reply, ms = session.timed(**op)
        expect_error(ctx, reply, f"{what}: {short(op)}", "unavailable")
        within(ms, short(op), tried=have_limiter)


def command_calls(admin):
    """{command: calls} from INFO commandstats."""
    calls = {}
    for name, value in admin.info("commandstats").items():
        m = re.match(r"calls=(\d+)", value)
        if name.startswith("cmdstat_") and m:
            calls[name[len("cmdstat_") :]] = int(m.group(1))
    return calls


def expect_keys_expire(ctx, admin, what):
    missing = admin.keys_without_ttl()
    ctx.check(not missing, f"{what}: keys without a TTL: {missing[:10]}")


def wait_for_window(admin, window_ms, margin_ms=3000):
    """Sleeps past a window boundary of the server's clock when one is near,
    so that a few server-time counter calls fall into one fixed window."""
    secs, micros = admin("TIME")
    t = int(secs) * 1000 + int(micros) // 1000
    left = window_ms - t % window_ms
    if left < margin_ms:
        time.sleep((left + 50) / 1000)


class StderrFile:
    """A temp file that takes a driver's stderr, readable for failure reports."""

    def __init__(self):
        fd, self.path = tempfile.mkstemp(prefix="slidelimit-faults-driver-", suffix=".log")
        self.file = os.fdopen(fd, "w+")

    def text(self):
        try:
            with open(self.path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def close(self):
        self.file.close()
        with contextlib.suppress(OSError):
            os.unlink(self.path)


def launcher(name, argv=None):
    """() -> Driver for drivers/NAME (argv: another program, for self-tests).
    The driver's stderr is kept for failure reports."""

    def launch():
        err = StderrFile()
        if argv is None:
            try:
                driver = Driver.start(name, stderr=err.file)
            except DriverError:
                err.close()
                raise
        else:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err.file,
                text=True,
                encoding="utf-8",
                bufsize=1,
            )
            driver = Driver(name, proc)
        driver.stderr_text = err.text
        close = driver.close

        def close_all():
            problem = close()
            if problem:
                problem += f"\n  driver stderr: {err.text()[-800:]}"
            err.close()
            return problem

        driver.close = close_all
        return driver

    return launch
