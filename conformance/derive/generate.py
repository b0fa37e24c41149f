#!/usr/bin/env python3
"""Writes conformance/vectors/*.json from the scenarios (scenarios.py) with
every expectation derived by the independent model (model.py).

    conformance/derive/generate.py            rewrite the vector files
    conformance/derive/generate.py --check    exit 1 if any file differs

The model cross-checks its brute force against the contract's closed forms
while deriving; any disagreement stops generation with a ModelError.
Python 3 standard library only.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
# Leave no __pycache__ in the work tree.
sys.dont_write_bytecode = True

import model  # noqa: E402
import scenarios  # noqa: E402

FORMAT = "slidelimit-vectors/1"
VECTORS_DIR = HERE.parent / "vectors"
# Keys of the model's own bookkeeping in a scenario, never written out.
PRIVATE = ("_hits", "_clock_regression", "_field")
# Algorithms that follow the time rule (docs/protocol.md, "Time"): only their
# vectors may go back in time, and only when marked clock_regression.
EXACT = ("sliding_log", "bucketed_window")
# The bucketed window's largest bucket count (a bucket of 1 ms needs N = W).
MAX_BUCKETS = model.MAX_BUCKETS
# Every denial case of the contract must be reached by some vector.
ALL_CASES = {
    "log-denied-k=1",
    "log-denied-k>1",
    "counter-retry-same-window",
    "counter-retry-next-window",
    "counter-retry-next-window-over-limit",
    "counter-retry-next-window-weight",
    "counter-retry-next-window-start",
    "counter-retry-window-after-next",
    "bucketed-denied-oldest-bucket",
    "bucketed-denied-later-bucket",
    "bucketed-denied-where-log-allows",
    "bucketed-lagging-caller",
    "bucketed-leading-denied",
    "multi-denied-by-one",
    "multi-denied-by-several",
}


LONE_SURROGATE = re.compile("[\ud800-\udfff]")


class ScenarioError(Exception):
    pass


def dump(value) -> str:
    # UTF-8 as it is, so tenants such as "東京" stay readable; DEL is escaped
    # so that no invisible byte sits in the file, and so is a lone surrogate,
    # which UTF-8 cannot hold at all (JSON's \ud800 can).
    text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    text = LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return text.replace("\x7f", "\\u007f")


def render_vector(v: dict) -> str:
    lines = ["    {"]
    fields = [
        f'      "name": {dump(v["name"])}',
        f'      "kind": {dump(v["kind"])}',
        f'      "comment": {dump(v["comment"])}',
    ]
    if v["kind"] == "key":
        fields += [f'      "input": {dump(v["input"])}', f'      "expect": {dump(v["expect"])}']
    else:
        steps = ",\n".join(f"        {dump(s)}" for s in v["steps"])
        fields += [f'      "policy": {dump(v["policy"])}', f'      "steps": [\n{steps}\n      ]']
    lines.append(",\n".join(fields))
    lines.append("    }")
    return "\n".join(lines)


def render_file(vectors: list[dict]) -> str:
    body = ",\n".join(render_vector(v) for v in vectors)
    return f'{{\n  "format": "{FORMAT}",\n  "vectors": [\n{body}\n  ]\n}}\n'


def derive_vector(v: dict, hits: set | None = None) -> dict:
    """A copy of the vector with every expectation derived by the model."""
    if v["kind"] == "key":
        return {**v, "expect": model.derive_key_expect(v["input"])}
    steps = [{k: s[k] for k in ("now_ms", "tenant", "cost", "peek") if k in s} for s in v["steps"]]
    expects = model.derive_decision_steps(v["policy"], steps, hits)
    return {**v, "steps": [{**s, "expect": e} for s, e in zip(steps, expects)]}


def check_scenario(v: dict, derived: dict, reached: set) -> None:
    name = v["name"]
    if v["kind"] != "decision":
        return
    steps = derived["steps"]
    decided = [s for s in steps if "error" not in s["expect"]]
    if not name.startswith("validation/") and len(decided) != len(steps):
        raise ScenarioError(f"{name}: a step fails validation outside validation/")
    # A policy of several limits is checked limit by limit.
    limits = v["policy"].get("limits", [v["policy"]])
    times = [s["now_ms"] for s in steps]
    goes_back = any(b < a for a, b in zip(times, times[1:]))
    exact = all(limit["algorithm"] in EXACT for limit in limits)
    if goes_back and not (v["_clock_regression"] and exact):
        raise ScenarioError(f"{name}: now_ms goes backwards")
    if v["_clock_regression"] and not goes_back:
        raise ScenarioError(f"{name}: marked clock_regression but time never goes back")
    missing = v["_hits"] - reached
    if missing:
        raise ScenarioError(f"{name}: claims {sorted(missing)} but the model never reaches them")
    if v.get("_field") is not None:
        # Which field the error names is not in the log; the model's order
        # of the rules is pinned here instead.
        got = model.first_error_field(v["policy"], v["steps"][0])
        if got != v["_field"]:
            raise ScenarioError(
                f"{name}: the first step's error names {got}, the scenario says {v['_field']}"
            )
    policy = v["policy"]
    if "limits" in policy:
        return
    if policy["algorithm"] == "bucketed_window":
        if "buckets" not in policy and "default-buckets" not in name:
            # The default of 60 is a binding's convenience; vectors name N,
            # except those that show the default itself.
            raise ScenarioError(f"{name}: a bucketed policy names its buckets")
        if decided and model.buckets_of(policy) == policy["window_ms"]:
            check_log_equivalence(v, derived)


def log_policy(policy: dict) -> dict:
    return {k: x for k, x in policy.items() if k != "buckets"} | {"algorithm": "sliding_log"}


def check_log_equivalence(v: dict, derived: dict) -> None:
    """g = 1 (buckets = window_ms): the bucketed window is exactly the sliding
    log. Every step's expectation must equal the log model's for the same
    steps, error or decision."""
    steps = [{k: s[k] for k in ("now_ms", "tenant", "cost", "peek") if k in s} for s in v["steps"]]
    want = model.derive_decision_steps(log_policy(v["policy"]), steps)
    for i, (got, log) in enumerate(zip((s["expect"] for s in derived["steps"]), want)):
        if got != log:
            raise ScenarioError(
                f"{v['name']} step {i}: g = 1 gives {got}, the sliding log gives {log}"
            )


def check_replays(files: dict) -> None:
    """Every sliding-log decision vector whose window allows N = W has its
    replay at g = 1 in bucketed_window.json (which check_log_equivalence
    compares with the log step by step)."""
    replays = {v["name"] for v in files.get("bucketed_window.json", [])}
    for v in files["sliding_log.json"]:
        if v["kind"] == "decision" and v["policy"]["window_ms"] <= MAX_BUCKETS:
            want = "bucketed/g1/" + v["name"].removeprefix("log/")
            if want not in replays:
                raise ScenarioError(f"{v['name']}: no replay {want} at g = 1")


def build() -> dict[str, str]:
    """File name -> exact file text."""
    names: set[str] = set()
    all_cases: set[str] = set()
    out = {}
    model.self_test()
    for file_name, vectors in scenarios.FILES.items():
        derived_all = []
        for v in vectors:
            if v["name"] in names:
                raise ScenarioError(f"duplicate vector name {v['name']}")
            names.add(v["name"])
            reached: set[str] = set()
            derived = derive_vector(v, reached)
            check_scenario(v, derived, reached)
            all_cases |= reached
            derived_all.append({k: x for k, x in derived.items() if k not in PRIVATE})
        out[file_name] = render_file(derived_all)
    check_replays(scenarios.FILES)
    if ALL_CASES - all_cases:
        raise ScenarioError(f"no vector reaches {sorted(ALL_CASES - all_cases)}")
    return out


def fuzz(sequences: int, seed: int) -> None:
    """Random sequences through the model, beyond the vectors: every decision
    it derives checks brute force against the closed forms (ModelError on any
    disagreement). Small windows, so every search is also walked ms by ms."""
    rng = random.Random(seed)
    for _ in range(sequences):
        algorithm = rng.choice(["sliding_log", "sliding_counter", "bucketed_window"])
        window = rng.choice([1, 2, 3, 7, 10, 100, 1000, 1500])
        limit = rng.choice([1, 2, 3, 5, 10, 37])
        policy = {
            "namespace": "rl",
            "resource": "fuzz",
            "algorithm": algorithm,
            "limit": limit,
            "window_ms": window,
        }
        if algorithm == "bucketed_window":
            # A third at g = 1, where the log's model must agree step by step.
            policy["buckets"] = (
                window if rng.random() < 0.33 else rng.choice(model.divisors(window))
            )
        now = rng.randrange(0, 5 * window)
        steps = []
        for _ in range(rng.randrange(1, 40)):
            # Mostly bursts inside one window, sometimes a jump over several.
            now += rng.choice([0, 0, 1, rng.randrange(window + 1), rng.randrange(4 * window + 1)])
            caller = now
            if algorithm in EXACT and rng.random() < 0.3:
                # Clocks that disagree (the time rule): a caller behind or ahead.
                caller = max(0, now + rng.randrange(-2 * window, 2 * window + 1))
            steps.append(
                {"now_ms": caller, "tenant": rng.choice(["a", "b"]), "cost": rng.randint(1, limit)}
            )
            if rng.random() < 0.1:
                steps[-1]["peek"] = True
        got = model.derive_decision_steps(policy, steps)
        if algorithm == "bucketed_window" and policy["buckets"] == window:
            agree_log = model.derive_decision_steps(log_policy(policy), steps)
            if got != agree_log:
                raise model.ModelError(f"g = 1 differs from the sliding log: {policy} {steps}")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--check", action="store_true", help="compare instead of writing; exit 1 on any difference"
    )
    parser.add_argument(
        "--fuzz",
        type=int,
        metavar="N",
        default=0,
        help="also run N random sequences through the model's brute-force/formula cross-check",
    )
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if args.fuzz:
        fuzz(args.fuzz, args.seed)
        print(f"fuzz: {args.fuzz} random sequences, brute force and closed forms agree")
    files = build()
    stale = []
    for file_name, text in files.items():
        path = VECTORS_DIR / file_name
        if args.check:
            if not path.exists() or path.read_bytes() != text.encode("utf-8"):
                stale.append(str(path))
        else:
            path.write_bytes(text.encode("utf-8"))
            count = text.count('"kind": ')
            print(f"wrote {path} ({count} vectors)")
    if stale:
        print(
            "out of date with the derivation (run conformance/derive/generate.py):",
            *stale,
            sep="\n  ",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
