"""slidelimit.celery with a real Celery worker process on a real Redis
broker (acks_late): deferrals are no retries."""

from __future__ import annotations

import datetime
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any
from unittest import mock

import pytest
from celery import Celery, Task
from celery.exceptions import Ignore

import slidelimit
from slidelimit import Algorithm, Limiter, Policy
from slidelimit.celery import DEFERRALS_HEADER, LATEST_ETA, RateLimited, rate_limited

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def worker(redis_url: str) -> Iterator[Any]:
    os.environ["SLIDELIMIT_CELERY_RESOURCE"] = "celery-" + uuid.uuid4().hex[:8]
    sys.path.insert(0, HERE)
    import celery_app

    celery_app.records().flushdb()
    env = dict(os.environ, PYTHONPATH=HERE)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "celery_app",
            "worker",
            "-E",
            "-c",
            "2",
            "--without-heartbeat",
            "--without-gossip",
            "--without-mingle",
            "-l",
            "warning",
        ],
        cwd=HERE,
        env=env,
    )
    try:
        deadline = time.monotonic() + 60
        while not celery_app.app.control.ping(timeout=0.5):
            assert proc.poll() is None, "the worker exited"
            assert time.monotonic() < deadline, "the worker did not answer a ping"
        yield celery_app
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        celery_app.records().flushdb()


class Events:
    """Every event the worker sends, captured by a real event receiver."""

    def __init__(self, app: Celery) -> None:
        self.app = app
        self.seen: list[dict[str, Any]] = []
        self.ready = threading.Event()
        self.stop = False
        threading.Thread(target=self.capture, daemon=True).start()
        assert self.ready.wait(10)

    def capture(self) -> None:
        with self.app.connection() as conn:
            receiver = self.app.events.Receiver(conn, handlers={"*": self.seen.append})
            self.ready.set()
            while not self.stop:
                try:
                    receiver.capture(limit=None, timeout=0.5, wakeup=False)
                except (TimeoutError, OSError):
                    pass
                except Exception:  # socket.timeout from kombu on an idle second
                    pass

    def of(self, task_id: str) -> list[str]:
        return [e["type"] for e in self.seen if e.get("uuid") == task_id]


def test_denied_tasks_defer_without_retries(worker: Any) -> None:
    events = Events(worker.app)
    time.sleep(0.5)
    results = [worker.geocode.delay(n, "key-1") for n in range(4)]
    other = worker.geocode.delay(10, "key-2")
    assert [r.get(timeout=60) for r in results] == [0, 2, 4, 6]
    assert other.get(timeout=60) == 20
    time.sleep(1.0)  # the last events
    events.stop = True
    r = worker.records()
    deferred_most = 0
    for result in [*results, other]:
        runs = [x.decode() for x in r.lrange(f"runs:{result.id}", 0, -1)]
        body = [x.decode() for x in r.lrange(f"body:{result.id}", 0, -1)]
        # The body ran exactly once, on the last run, with retries still 0.
        assert len(body) == 1, (result.id, body)
        assert body[0] == runs[-1]
        retries = [run.split(":")[0] for run in runs]
        deferrals = [int(run.split(":")[1]) for run in runs]
        assert set(retries) == {"0"}, runs
        assert deferrals == list(range(len(runs))), runs
        deferred_most = max(deferred_most, len(runs) - 1)
        kinds = events.of(result.id)
        assert "task-retried" not in kinds and "task-failed" not in kinds, kinds
        assert kinds.count("task-succeeded") == 1, kinds
        assert result.state == "SUCCESS"
    # Four tasks on one key at 1 per 700 ms: the last waited through several.
    assert deferred_most >= 3


def test_an_expires_before_the_next_chance_revokes(worker: Any) -> None:
    first = worker.short_lived.delay()
    assert first.get(timeout=30) == "ran"
    sent = time.monotonic()
    late = worker.short_lived.apply_async(expires=2.0)
    while late.state not in ("REVOKED", "SUCCESS", "FAILURE"):
        time.sleep(0.05)
        assert time.monotonic() - sent < 10
    # Revoked by slidelimit at once, not by Celery when the 2 s passed.
    assert late.state == "REVOKED"
    assert time.monotonic() - sent < 1.9
    assert worker.records().llen(f"body:{late.id}") == 0


def eager_app() -> Celery:
    app = Celery("eager", broker="memory://", backend="cache+memory://")
    app.conf.task_always_eager = True
    return app


def recording_task(app: Celery, limiter: Limiter, ran: list[int]) -> Any:
    """A task of `app` limited by `limiter` (tenant "t") whose body notes its argument in `ran`."""

    @app.task(bind=True)
    @rate_limited(limiter, tenant="t")
    def job(self: Any, n: int) -> int:
        ran.append(n)
        return n

    return job


def test_eager_mode_raises_instead_of_recursing() -> None:
    app = eager_app()
    limiter = Limiter.memory(
        Policy("rl", "eager", Algorithm.SLIDING_LOG, limit=1, window_ms=60_000)
    )
    ran: list[int] = []
    job = recording_task(app, limiter, ran)

    assert job.delay(1).get() == 1
    with pytest.raises(RateLimited) as info:
        job.apply(args=(2,)).get()
    assert info.value.decision.retry_after_ms > 0
    assert ran == [1]


def test_a_task_called_as_a_function_raises_instead_of_publishing() -> None:
    # Not eager: a broker is configured, but a plain call has no message to
    # publish again (its id is None), as Celery's own retry knows.
    app = Celery("direct", broker="memory://", backend="cache+memory://")
    policy = Policy("rl", "direct", Algorithm.SLIDING_LOG, limit=1, window_ms=60_000)
    limiter = Limiter.memory(policy)
    down = Limiter.from_url("redis://127.0.0.1:1/", policy, timeout_ms=200)
    ran: list[int] = []
    job = recording_task(app, limiter, ran)

    @app.task(bind=True)
    @rate_limited(down, tenant="t")
    def job_on_a_down_redis(self: Any) -> str:
        return "ran"

    published: list[Any] = []
    with mock.patch.object(Task, "apply_async", lambda *a, **k: published.append(a)):
        assert job(1) == 1
        with pytest.raises(RateLimited) as info:
            job(2)
        with pytest.raises(slidelimit.Unavailable):
            job_on_a_down_redis()
    assert info.value.decision.retry_after_ms > 0
    assert ran == [1]
    assert published == []


def test_unavailable_redis_runs_or_fails_as_told() -> None:
    app = eager_app()
    policy = Policy("rl", "down", Algorithm.SLIDING_LOG, limit=1, window_ms=1_000)
    down = Limiter.from_url("redis://127.0.0.1:1/", policy, timeout_ms=200)

    @app.task(bind=True)
    @rate_limited(down, tenant="t", on_unavailable="run")
    def fail_open(self: Any) -> str:
        return "ran"

    @app.task(bind=True)
    @rate_limited(down, tenant="t", on_unavailable="fail")
    def fail_closed(self: Any) -> str:
        return "ran"

    assert fail_open.apply().get() == "ran"
    with pytest.raises(slidelimit.Unavailable):
        fail_closed.apply().get()


def test_a_thread_pool_makes_one_limiter_per_process() -> None:
    app = eager_app()
    policy = Policy("rl", "threads", Algorithm.SLIDING_LOG, limit=100, window_ms=60_000)
    made: list[Limiter] = []

    def factory() -> Limiter:
        time.sleep(0.05)  # as a first connect takes a while, so the threads meet here
        made.append(Limiter.memory(policy))
        return made[-1]

    @app.task(bind=True)
    @rate_limited(factory, tenant="t")
    def job(self: Any) -> int:
        return 1

    threads = [threading.Thread(target=lambda: job.apply().get()) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(made) == 1
    # Every run counted on the one limiter: 20, and the peek's own cost of 1.
    assert made[0].peek("t").remaining == 100 - 20 - 1


def test_a_forked_child_makes_its_own_limiter_even_mid_making() -> None:
    # Celery's prefork pool forks children from a process that may already
    # have made a limiter, or be making one on another thread.
    app = eager_app()
    policy = Policy("rl", "fork", Algorithm.SLIDING_LOG, limit=100, window_ms=60_000)
    parent = os.getpid()
    made_by: list[int] = []  # the pid of each call of a function, in this process
    entered, release = threading.Event(), threading.Event()

    def made_at_once() -> Limiter:
        made_by.append(os.getpid())
        return Limiter.memory(policy)

    def slow_in_the_parent() -> Limiter:
        if os.getpid() == parent:
            entered.set()
            release.wait(30)  # holds the task's lock while the process forks
        return Limiter.memory(policy)

    @app.task(bind=True)
    @rate_limited(made_at_once, tenant="t")
    def first(self: Any) -> str:
        return "ran"

    @app.task(bind=True)
    @rate_limited(slow_in_the_parent, tenant="t")
    def second(self: Any) -> str:
        return "ran"

    assert first.apply().get() == "ran"
    assert made_by == [parent]
    making = threading.Thread(target=lambda: second.apply().get())
    making.start()
    assert entered.wait(10)
    pid = os.fork()
    if pid == 0:  # the child: its own limiter, and a lock nobody holds
        status = 1
        try:
            signal.alarm(10)  # a lock held for good would hang here
            ok = first.apply().get() == "ran" and made_by == [parent, os.getpid()]
            ok = ok and second.apply().get() == "ran"
            status = 0 if ok else 3
        finally:
            os._exit(status)
    release.set()
    making.join(10)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    # The parent keeps the limiter it made.
    assert first.apply().get() == "ran" and made_by == [parent]


def test_options_are_checked() -> None:
    limiter = Limiter.memory(Policy("rl", "x", Algorithm.SLIDING_LOG, limit=1, window_ms=1))
    # (option, a wrong Python type, so also a TypeError)
    for bad, wrong_type in (
        ({"on_unavailable": "retry"}, False),
        ({"max_deferrals": -1}, False),
        ({"jitter_ms": 1.5}, True),
        ({"tenant": 5}, True),
        ({"unavailable_backoff_ms": (1, 2, 3)}, True),
        ({"unavailable_backoff_ms": 1000}, True),
        ({"unavailable_backoff_ms": (1000, -1)}, False),
        ({"unavailable_backoff_ms": (1000, "60000")}, True),
        # Base over max would clamp every backoff to max without a word.
        ({"unavailable_backoff_ms": (5, 1)}, False),
        # Past u64 a deferral's countdown would overflow a float.
        ({"jitter_ms": 10**400}, False),
        ({"unavailable_backoff_ms": (10**400, 10**401)}, False),
        # The cost is checked when the task is decorated, not when it runs.
        ({"cost": 0}, False),
        ({"cost": -1}, False),
        ({"cost": 2**64}, False),
        ({"cost": True}, True),
        ({"cost": 1.5}, True),
        ({"cost": None}, True),
        # Over the policy's limit of 1: no check could ever pass it.
        ({"cost": 2}, False),
        # A constant tenant core refuses, refused now rather than at every run.
        ({"tenant": ""}, False),
        ({"tenant": "x" * 513}, False),
    ):
        options: dict[str, Any] = {"tenant": "t", **bad}
        with pytest.raises(slidelimit.InvalidArgument) as info:
            rate_limited(limiter, **options)
        assert info.value.field == next(iter(bad))
        assert isinstance(info.value, TypeError) is wrong_type, bad
    # A factory's limiter is not at hand: core's policy-free rule now, the
    # limit's bound at each check.
    rate_limited(lambda: limiter, "t", cost=2)
    with pytest.raises(slidelimit.InvalidArgument) as info:
        rate_limited(lambda: limiter, "t", cost=0)
    assert info.value.field == "cost"
    # What is neither a Limiter nor a function of none returning one.
    for not_a_limiter in (None, 5, "redis://", limiter.policy):
        with pytest.raises(slidelimit.InvalidType) as info:
            rate_limited(not_a_limiter, "t")  # type: ignore[arg-type]
        assert info.value.field == "limiter"


def test_a_factory_that_returns_no_limiter_fails_the_task_naming_it() -> None:
    app = Celery("factory", set_as_current=False)
    app.conf.task_always_eager = True

    @app.task(bind=True)
    @rate_limited(lambda: None, "t")  # type: ignore[arg-type,return-value]
    def task(self: Any) -> str:
        return "ran"

    with pytest.raises(slidelimit.InvalidType) as info:
        task.apply(throw=True)
    assert info.value.field == "limiter" and "NoneType" in str(info.value)


def test_an_outage_defers_with_backoff_up_to_the_cap(worker: Any) -> None:
    result = worker.during_outage.delay()
    with pytest.raises(Exception) as info:
        result.get(timeout=30)
    assert type(info.value).__name__ == "DeferralLimitExceeded"
    assert "deferred 2 times" in str(info.value)
    runs = [x.decode() for x in worker.records().lrange(f"runs:{result.id}", 0, -1)]
    # Three runs (two deferrals), retries never moved, the body never ran.
    assert runs == ["0:0", "0:1", "0:2"]
    assert worker.records().llen(f"body:{result.id}") == 0


def test_a_wait_past_year_9999_defers_to_the_last_eta_celery_holds(worker: Any) -> None:
    # The second call of a 10,000-year budget is owed about 10,000 years; a
    # datetime stops at 9999, so the deferral is saturated there, never an
    # OverflowError that fails the task.
    first = worker.once_ever.delay()
    assert first.get(timeout=30) == "ran"
    second = worker.once_ever.delay()
    deadline = time.monotonic() + 30
    scheduled: list[dict[str, Any]] = []
    while not scheduled:
        assert time.monotonic() < deadline, second.state
        assert second.state == "PENDING", second.state
        found = worker.app.control.inspect(timeout=1).scheduled() or {}
        scheduled = [
            t for tasks in found.values() for t in tasks if t["request"]["id"] == second.id
        ]
    eta = datetime.datetime.fromisoformat(scheduled[0]["eta"])
    # Celery adds the countdown to its own clock, read a moment later.
    late = LATEST_ETA + datetime.timedelta(minutes=1)
    assert LATEST_ETA - datetime.timedelta(minutes=1) <= eta <= late, eta
    assert worker.records().llen(f"body:{second.id}") == 0
    runs = [x.decode() for x in worker.records().lrange(f"runs:{second.id}", 0, -1)]
    assert runs == ["0:0"]


def test_a_count_on_the_task_that_is_no_count_fails_naming_it() -> None:
    """The middleware writes its counts as ints; a garbage one read as 0
    would start max_deferrals over."""
    from types import SimpleNamespace

    from slidelimit.celery import DEFERRALS_HEADER, _header

    def task(headers: dict[str, object]) -> Any:
        return SimpleNamespace(request=SimpleNamespace(headers=headers))

    assert _header(task({}), DEFERRALS_HEADER) == 0
    assert _header(task({DEFERRALS_HEADER: 3}), DEFERRALS_HEADER) == 3
    assert _header(task({DEFERRALS_HEADER: "2"}), DEFERRALS_HEADER) == 2
    for bad in ("abc", "-5", "", -5, 1.5, True, [1]):
        with pytest.raises(slidelimit.InvalidArgument) as info:
            _header(task({DEFERRALS_HEADER: bad}), DEFERRALS_HEADER)
        assert info.value.field == DEFERRALS_HEADER, bad


def test_a_deferral_leaves_rabbitmqs_dead_letter_headers_off() -> None:
    # As Celery's own retry does: a message sent again with RabbitMQ's x-death
    # headers could be taken for a dead-letter cycle. Other headers stay.
    app = Celery("deadletter", broker="memory://", backend="cache+memory://")
    policy = Policy("rl", "deadletter", Algorithm.SLIDING_LOG, limit=1, window_ms=60_000)
    limiter = Limiter.memory(policy)
    limiter.acquire("t")  # the budget is spent

    @app.task(bind=True)
    @rate_limited(limiter, tenant="t", jitter_ms=0)
    def job(self: Any, n: int) -> int:
        return n

    published: list[dict[str, Any]] = []
    headers = {"x-death": [{"count": 1}], "x-first-death-queue": "geo", "tracing": "abc"}
    job.push_request(
        id="task-1", args=(1,), kwargs={}, headers=headers, called_directly=False, is_eager=False
    )
    publish = mock.patch.object(Task, "apply_async", lambda _t, *_a, **o: published.append(o))
    try:
        with publish, pytest.raises(Ignore):
            job.run(1)
    finally:
        job.pop_request()
    (options,) = published
    assert options["headers"]["tracing"] == "abc"
    assert options["headers"][DEFERRALS_HEADER] == 1
    assert not {"x-death", "x-first-death-queue"} & options["headers"].keys()
