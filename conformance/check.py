"""Checks a binding's decision log against a vector file (format
slidelimit-vectors/1). Python 3 standard library only, so that no binding's
language judges the others.

Used by conformance/run (one column, one file) and conformance/all (every
column, every file, byte-identical logs). A column is a binding's driver
(docs/driver.md): DRIVER runs the file on Redis, DRIVER:memory on the
binding's embedded engine; this module turns the vectors into driver requests
and the replies into the decision log. The canonical log line of an
expectation is compact JSON with keys in the order of docs/protocol.md:

  {"vector":N,"key":K,"slot":S}
  {"vector":N,"step":I,"allowed":B,"remaining":R,"retry_after_ms":T,"reset_after_ms":E,"now_ms":M}
  {"vector":N,"step":I,"error":C}   (or {"vector":N,"error":C} for a key vector)
"""

import json
import os
import sys
import tempfile
from dataclasses import dataclass, field

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from harness import drivers

FORMAT = "slidelimit-vectors/1"
# The per-call timeout handed to the drivers' Redis stores.
TIMEOUT_MS = 2000
DECISION_FIELDS = ("allowed", "remaining", "retry_after_ms", "reset_after_ms", "now_ms")


class VectorFileError(Exception):
    """The vector file cannot be used: unreadable, not JSON, wrong shape."""


def canonical(pairs):
    """The one byte form of a log line: compact, UTF-8, keys in order."""
    return json.dumps(dict(pairs), ensure_ascii=False, separators=(",", ":"))


@dataclass
class Expected:
    vector: str
    step: object  # int, or None for a key vector
    pairs: list  # [(key, value)] in log order

    @property
    def line(self):
        return canonical(self.pairs)

    @property
    def label(self):
        return self.vector if self.step is None else f"{self.vector} step {self.step}"


def _expect_pairs(where, expect, fields):
    if not isinstance(expect, dict):
        raise VectorFileError(f"{where}: expect must be an object")
    if set(expect) == {"error"}:
        if not isinstance(expect["error"], str):
            raise VectorFileError(f"{where}: expect.error must be a string")
        return [("error", expect["error"])]
    # A denial by a policy of several limits also names the limit (last).
    if fields == DECISION_FIELDS and set(expect) == set(fields) | {"denied_by"}:
        fields = (*DECISION_FIELDS, "denied_by")
    if set(expect) != set(fields):
        raise VectorFileError(
            f'{where}: expect must be {{"error": code}} or have exactly {", ".join(fields)}'
        )
    return [(f, whole(expect[f])) for f in fields]


def whole(value):
    """A JSON number is a double (docs/driver.md): a whole one written as
    `3.0` is the integer 3, and a log line writes it in digits."""
    if isinstance(value, float) and value.is_integer() and abs(value) <= 2**53:
        return int(value)
    return value


def load(path):
    """Reads a vector file and returns its expected log, one Expected per line."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f, parse_float=drivers.json_number)
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise VectorFileError(f"{path}: {e}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise VectorFileError(f'{path}: not a vector file (need "format": "{FORMAT}")')
    vectors = doc.get("vectors")
    if not isinstance(vectors, list) or not vectors:
        raise VectorFileError(f"{path}: vectors must be a non-empty list")
    expected, names = [], set()
    for i, v in enumerate(vectors):
        where = f"{path}: vector #{i}"
        name = v.get("name") if isinstance(v, dict) else None
        if not isinstance(name, str) or not name:
            raise VectorFileError(f"{where}: needs a name")
        where = f"{path}: vector {name}"
        if name in names:
            raise VectorFileError(f"{where}: name used twice")
        names.add(name)
        kind = v.get("kind")
        if kind == "key":
            pairs = _expect_pairs(where, v.get("expect"), ("key", "slot"))
            expected.append(Expected(name, None, [("vector", name), *pairs]))
        elif kind == "decision":
            steps = v.get("steps")
            if not isinstance(steps, list) or not steps:
                raise VectorFileError(f"{where}: steps must be a non-empty list")
            for n, step in enumerate(steps):
                if not isinstance(step, dict):
                    raise VectorFileError(f"{where} step {n}: must be an object")
                pairs = _expect_pairs(f"{where} step {n}", step.get("expect"), DECISION_FIELDS)
                expected.append(Expected(name, n, [("vector", name), ("step", n), *pairs]))
        else:
            raise VectorFileError(f'{where}: kind must be "key" or "decision"')
    return expected


def _same(a, b):
    """Strict JSON equality: true is not 1, 1.0 is not 1."""
    return type(a) is type(b) and a == b


@dataclass
class Report:
    """The verdict on one binding's log for one file."""

    order: list  # vector names in file order
    failures: dict = field(default_factory=dict)  # vector -> [messages], semantic
    format_only: dict = field(default_factory=dict)  # vector -> [messages], bytes only
    general: list = field(default_factory=list)  # problems not tied to one vector
    lines: dict = field(default_factory=dict)  # vector -> [raw lines]

    def fail(self, vector, message):
        self.failures.setdefault(vector, []).append(message)

    def status(self, vector):
        if self.general or vector in self.failures:
            return "FAIL"
        if vector in self.format_only:
            return "DIFF"
        return "pass"

    @property
    def ok(self):
        return not (self.general or self.failures or self.format_only)

    def messages(self):
        out = list(self.general)
        for name in self.order:
            out += [f"FAIL {name}: {m}" for m in self.failures.get(name, [])]
            out += [f"DIFF {name}: {m}" for m in self.format_only.get(name, [])]
        return out


def check(expected, log):
    """Compares a log (text) with the expected lines of one file. A line is
    right when it is byte for byte the canonical line; a line with the right
    content in another byte form is a DIFF; anything else, or a missing or
    extra line, is a FAIL."""
    order = list(dict.fromkeys(e.vector for e in expected))
    report = Report(order=order)
    by_vector: dict[str, list[Expected]] = {}
    for e in expected:
        by_vector.setdefault(e.vector, []).append(e)
    # vector -> [(log line number, raw line, its (key, value) pairs)]
    actual: dict[str, list[tuple[int, str, list]]] = {name: [] for name in order}
    seen_order: list[str] = []
    for number, raw in enumerate(log.splitlines(), start=1):
        try:
            pairs = json.loads(raw, object_pairs_hook=list)
        except ValueError:
            report.general.append(f"log line {number} is not JSON: {raw!r}")
            continue
        name = dict(pairs).get("vector") if isinstance(pairs, list) else None
        if name not in actual:
            report.general.append(f"log line {number} names no vector of the file: {raw}")
            continue
        if not seen_order or seen_order[-1] != name:
            seen_order.append(name)
        actual[name].append((number, raw, pairs))
        report.lines.setdefault(name, []).append(raw)
    if (
        len(seen_order) != len(set(seen_order))
        or [n for n in order if n in seen_order] != seen_order
    ):
        report.general.append("log lines are not in the order of the vectors in the file")
    for name in order:
        want, got = by_vector[name], actual[name]
        for i in range(max(len(want), len(got))):
            if i >= len(got):
                report.fail(name, f"missing line: {want[i].label}: expected {want[i].line}")
                continue
            number, raw, pairs = got[i]
            if i >= len(want):
                report.fail(name, f"extra log line {number}: {raw}")
                continue
            e = want[i]
            if raw == e.line:
                continue
            keys_match = [k for k, _ in pairs] == [k for k, _ in e.pairs]
            if keys_match and all(_same(a, b) for (_, a), (_, b) in zip(pairs, e.pairs)):
                report.format_only.setdefault(name, []).append(
                    f"log line {number} has the right content in another byte form:\n"
                    f"  expected {e.line}\n  got      {raw}"
                )
            else:
                report.fail(
                    name, f"{e.label} (log line {number}):\n  expected {e.line}\n  got      {raw}"
                )
    return report


class ColumnError(Exception):
    """The column cannot run: no such driver, or its store is not configured."""


def columns():
    """The column names: DRIVER (its binding on Redis) and DRIVER:memory (its
    embedded engine) per registered driver, and `memory` (= rust:memory)."""
    names = drivers.registered()
    out = [n for d in names for n in (d, f"{d}:memory")]
    return [*out, "memory"] if "rust" in names else out


def parse_column(column):
    """(driver, store request) of a column; the store comes from the
    environment: SLIDELIMIT_TEST_REDIS_URL, or SLIDELIMIT_TEST_CLUSTER_URLS
    when SLIDELIMIT_CONFORMANCE_CLUSTER=1."""
    if column == "memory":
        column = "rust:memory"
    name, _, engine = column.partition(":")
    if engine not in ("", "memory") or not name:
        raise ColumnError(f"column {column!r}: must be DRIVER or DRIVER:memory")
    if name not in drivers.registered():
        raise ColumnError(
            f"no driver {name!r} (registered: {', '.join(drivers.registered()) or 'none'})"
        )
    if engine == "memory":
        return name, {"op": "store", "kind": "memory"}
    if os.environ.get("SLIDELIMIT_CONFORMANCE_CLUSTER") == "1":
        urls = os.environ.get("SLIDELIMIT_TEST_CLUSTER_URLS", "")
        if not urls:
            raise ColumnError("set SLIDELIMIT_TEST_CLUSTER_URLS (scripts/with-cluster.sh does)")
        seeds = [u.strip() for u in urls.split(",") if u.strip()]
        return name, {"op": "store", "kind": "cluster", "urls": seeds, "timeout_ms": TIMEOUT_MS}
    url = os.environ.get("SLIDELIMIT_TEST_REDIS_URL", "")
    if not url:
        raise ColumnError("set SLIDELIMIT_TEST_REDIS_URL (scripts/with-redis.sh does)")
    return name, {"op": "store", "kind": "redis", "url": url, "timeout_ms": TIMEOUT_MS}


@dataclass
class Run:
    binding: str  # the column
    path: str
    log: str
    stderr: str  # empty when the driver's stderr was passed through
    report: Report


class ProtocolRefusal(drivers.DriverError):
    """The driver answered `protocol` to a request of one vector: it could not
    read it (docs/driver.md). That vector fails; the driver carries on, and so
    does the file."""


class _Session:
    """One driver process working through one vector file."""

    def __init__(self, driver, store):
        self.driver = driver
        self.store = store
        self.current = None  # the store request last sent
        self.log = []
        self.problems = []  # (vector or None, message): failures of the run
        self.noncanonical = {}  # vector -> [messages]

    def ask(self, request):
        """The reply's raw line and parsed object; a protocol reply is the
        vector's failure (ProtocolRefusal), a line that is no JSON object the
        driver's (DriverError)."""
        raw = self.driver.request_raw(request)
        try:
            obj = json.loads(raw)
        except ValueError as e:
            raise drivers.DriverError(f"reply to {request['op']} is not JSON: {raw[:200]!r}") from e
        if not isinstance(obj, dict):
            raise drivers.DriverError(f"reply to {request['op']} is not an object: {raw[:200]!r}")
        # The keys in the order the driver printed them.
        pairs = json.loads(raw, object_pairs_hook=list)
        if obj.get("error") == "protocol":
            raise ProtocolRefusal(
                f"{self.driver.name} refused {drivers.wire_json(request)[:300]}: "
                f"{obj.get('message')}"
            )
        if "error" in obj and not isinstance(obj["error"], str):
            raise drivers.DriverError(
                f"reply to {request['op']} has a non-string error: {raw[:200]!r}"
            )
        return raw, pairs, obj

    def use(self, store):
        if self.current != store:
            _, _, obj = self.ask(store)
            if obj.get("ok") is not True:
                raise drivers.DriverError(f"store {store['kind']} failed: {obj}")
            self.current = store

    def key_vector(self, name, v):
        i = v["input"]
        self.use({"op": "store", "kind": "memory"})
        # The key does not depend on the limit; 1 is always valid.
        policy = {"op": "policy", "limit": 1}
        # The fields the vector gives, as given: one left out (buckets, say)
        # is the binding's default, or its refusal where it has none.
        policy.update(
            (f, i[f])
            for f in ("namespace", "resource", "algorithm", "window_ms", "buckets")
            if f in i
        )
        _, _, obj = self.ask(policy)
        if "error" not in obj:
            key = {"op": "key"}
            if "tenant" in i:
                key["tenant"] = i["tenant"]
            _, _, obj = self.ask(key)
        if "error" in obj:
            self.log.append(canonical([("vector", name), ("error", obj["error"])]))
        else:
            self.log.append(
                canonical([("vector", name), ("key", obj.get("key")), ("slot", obj.get("slot"))])
            )

    def decision_vector(self, name, v):
        self.use(self.store)
        # Every field of the vector's policy as given, buckets included when present.
        policy = {"op": "policy"}
        policy.update(v["policy"])
        _, _, obj = self.ask(policy)
        if "error" not in obj:
            # Every vector starts from empty state. A step without a tenant
            # (or with a null one) touches no key.
            named = (s.get("tenant") for s in v["steps"])
            for tenant in dict.fromkeys(t for t in named if t is not None):
                _, _, reset = self.ask({"op": "reset", "tenant": tenant})
                # A tenant no key can be built for touches no key.
                if reset.get("error") not in (None, "invalid_argument"):
                    self.problems.append(
                        (name, f"reset of tenant {tenant!r} failed: {reset['error']}")
                    )
        # With a refused policy every step answers the policy's error.
        for n, step in enumerate(v["steps"]):
            # A peek step (docs/driver.md's peek op, on the caller's time)
            # decides as acquire would and records nothing.
            request = {"op": "peek" if step.get("peek") is True else "acquire_at"}
            # A field the step leaves out (cost, say) is left out of the request.
            request.update((f, step[f]) for f in ("tenant", "now_ms", "cost") if f in step)
            raw, pairs, obj = self.ask(request)
            head = f'{{"vector":{json.dumps(name, ensure_ascii=False)},"step":{n},'
            if "error" in obj:
                self.log.append(head + f'"error":{json.dumps(obj["error"], ensure_ascii=False)}}}')
                continue
            # The driver's bytes go into the log as they are: a binding that
            # formats a decision otherwise shows as a DIFF or FAIL.
            keys = [k for k, _ in pairs]
            if raw != canonical(pairs) or keys not in (
                list(DECISION_FIELDS),
                [*DECISION_FIELDS, "denied_by"],
            ):
                self.noncanonical.setdefault(name, []).append(
                    f"step {n}: the driver's decision is not in the canonical form "
                    f"of docs/driver.md: {raw}"
                )
            self.log.append(head + raw[1:])


def vectors_of(path):
    """The vectors of a file (checked by load first), as parsed."""
    with open(path, encoding="utf-8") as f:
        return json.load(f, parse_float=drivers.json_number)["vectors"]


def run_column(column, path, expected, capture_stderr=False):
    """Runs the file through the column's driver (docs/driver.md) and checks
    the log it yields. Raises ColumnError when the column cannot run at all."""
    name, store = parse_column(column)
    # Closed in the finally below; the driver writes to it all along the run.
    errors = tempfile.TemporaryFile(mode="w+", encoding="utf-8") if capture_stderr else None  # noqa: SIM115
    session = None
    try:
        vectors = vectors_of(path)
        try:
            with drivers.Driver.start(name, stderr=errors) as driver:
                session = _Session(driver, store)
                for v in vectors:
                    try:
                        if v["kind"] == "key":
                            session.key_vector(v["name"], v)
                        else:
                            session.decision_vector(v["name"], v)
                    except (KeyError, TypeError) as e:
                        raise VectorFileError(f"{path}: vector {v.get('name')}: missing {e}") from e
                    except ProtocolRefusal as e:
                        session.problems.append((v["name"], f"driver {name}: {e}"))
            if driver.exit_problem:
                session.problems.append((None, f"driver {name} {driver.exit_problem}"))
        except drivers.DriverError as e:
            session = session or _Session(None, store)
            session.problems.append((None, f"driver {name} failed: {e}"))
        log = "".join(line + "\n" for line in session.log)
        report = check(expected, log)
        for vector, message in session.problems:
            if vector is None:
                report.general.append(message)
            else:
                report.fail(vector, message)
        for vector, messages in session.noncanonical.items():
            report.format_only.setdefault(vector, []).extend(messages)
        stderr = ""
        if errors is not None:
            errors.seek(0)
            stderr = errors.read()
        return Run(column, path, log, stderr, report)
    finally:
        if errors is not None:
            errors.close()


def main(argv):
    """conformance/check.py VECTOR_FILE LOG_FILE: checks a log kept in a file."""
    if len(argv) != 2:
        print("usage: check.py VECTOR_FILE LOG_FILE", file=sys.stderr)
        return 2
    try:
        expected = load(argv[0])
        with open(argv[1], encoding="utf-8") as f:
            log = f.read()
    except (VectorFileError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    report = check(expected, log)
    for m in report.messages():
        print(m, file=sys.stderr)
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
