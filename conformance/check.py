"""Checks a binding's decision log against a vector file (format
slidelimit-vectors/1). Python 3 standard library only, so that no binding's
language judges the others.

Used by conformance/run (one binding, one file) and conformance/all (every
binding, every file, byte-identical logs). The canonical log line of an
expectation is compact JSON with keys in the order of docs/protocol.md:

  {"vector":N,"key":K,"slot":S}
  {"vector":N,"step":I,"allowed":B,"remaining":R,"retry_after_ms":T,"reset_after_ms":E,"now_ms":M}
  {"vector":N,"step":I,"error":C}   (or {"vector":N,"error":C} for a key vector)
"""

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field

FORMAT = "slidelimit-vectors/1"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUNNERS = os.path.join(ROOT, "conformance", "runners")
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
    if set(expect) != set(fields):
        raise VectorFileError(
            f"{where}: expect must be {{\"error\": code}} or have exactly {', '.join(fields)}"
        )
    return [(f, expect[f]) for f in fields]


def load(path):
    """Reads a vector file and returns its expected log, one Expected per line."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
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
            expected.append(Expected(name, None, [("vector", name)] + pairs))
        elif kind == "decision":
            steps = v.get("steps")
            if not isinstance(steps, list) or not steps:
                raise VectorFileError(f"{where}: steps must be a non-empty list")
            for n, step in enumerate(steps):
                if not isinstance(step, dict):
                    raise VectorFileError(f"{where} step {n}: must be an object")
                pairs = _expect_pairs(f"{where} step {n}", step.get("expect"), DECISION_FIELDS)
                expected.append(Expected(name, n, [("vector", name), ("step", n)] + pairs))
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
    by_vector = {}
    for e in expected:
        by_vector.setdefault(e.vector, []).append(e)
    actual = {name: [] for name in order}
    seen_order = []
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
    if len(seen_order) != len(set(seen_order)) or [
        n for n in order if n in seen_order
    ] != seen_order:
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


def bindings():
    try:
        return sorted(
            n for n in os.listdir(RUNNERS) if os.access(os.path.join(RUNNERS, n), os.X_OK)
        )
    except OSError:
        return []


@dataclass
class Run:
    binding: str
    path: str
    returncode: int
    log: str
    stderr: str  # empty when the runner's stderr was passed through
    report: Report


def run_binding(binding, path, expected, capture_stderr=False):
    """Runs conformance/runners/<binding> on the file (absolute path, so the
    runner may change directory) and checks its log."""
    runner = os.path.join(RUNNERS, binding)
    if not os.access(runner, os.X_OK):
        raise VectorFileError(
            f"no runner for binding {binding!r} (have: {', '.join(bindings()) or 'none'})"
        )
    proc = subprocess.run(
        [runner, os.path.abspath(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE if capture_stderr else None,
        stdin=subprocess.DEVNULL,
        check=False,
    )
    log = proc.stdout.decode("utf-8", errors="replace")
    report = check(expected, log)
    if proc.returncode != 0:
        report.general.insert(0, f"runner {binding} exited with status {proc.returncode}")
    stderr = proc.stderr.decode("utf-8", errors="replace") if capture_stderr else ""
    return Run(binding, path, proc.returncode, log, stderr, report)


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
