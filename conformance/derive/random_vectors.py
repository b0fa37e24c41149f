#!/usr/bin/env python3
"""Random decision vectors, every expectation derived by the independent
model (model.py), for running through the bindings beyond the scenarios:

    conformance/derive/random_vectors.py --count N --seed S --out FILE
    scripts/with-redis.sh conformance/all FILE rust go ...   # or make conformance-random

Key vectors (one in five: names and tenants with the characters the key
escapes, at and past their bounds, windows and bucket counts at theirs)
and decision vectors: policies of one limit (log, counter, bucketed window at a random divisor of
its window) and of two to four limits; random limits, windows from 1 ms to
1 min, costs from 1 to the smallest limit (now and then one above it: an
invalid_argument step), peeks, two tenants (now and then odd ones, one in
twenty of those holding a lone surrogate), bursts in one millisecond and
jumps over several windows. The exact algorithms' vectors (and policies whose
every limit is exact) also get callers whose clocks lag or lead by up to two
windows (the time rule, docs/protocol.md "Time"); the counter's times only
move forward, as its contract asks. Now and then a window past 2^51 ms (limit
1), with times anywhere up to 2^52: hints near 2^53 and the refusal of those
past it (docs/protocol.md, "Bucketed window", rule 4). Python 3 standard
library only.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.dont_write_bytecode = True

import generate  # noqa: E402
import model  # noqa: E402

ALGORITHMS = ("sliding_log", "sliding_counter", "bucketed_window")
# Windows of a few ms too: a caller-time key outlives its permits by at
# least a minute on the server's clock (docs/protocol.md, "Key expiry and
# caller clocks"), so Redis keeps it through every step.
WINDOWS = (1, 2, 7, 100, 1000, 1200, 1500, 2000, 3000, 5000, 10_000, 60_000)
LIMITS = (1, 2, 3, 5, 10, 37, 600)
# Windows past 2^51 ms, where a caller far behind the newest admission can be
# owed a hint above 2^53 (docs/protocol.md, "Bucketed window", rule 4).
HUGE_WINDOWS = (3 * 2**50, 2**52)
# 2025-11-30T04:00:00Z, as the scenarios' vectors start.
EPOCH_MS = 1_764_475_200_000


# Tenant characters: plain ones, those the key escapes (%, braces, space,
# control bytes, DEL) and multi-byte UTF-8.
TENANT_CHARS = "aZ09-_.:~!/" + "%{} \t\n\x00\x1f\x7f" + "é東京🙂"
NAME_CHARS = "".join(sorted(model.NAME_CHARS))


# A lone surrogate: JSON's \ud800 carries one, UTF-8 cannot, so such a
# string is no tenant (docs/protocol.md, "Conformance vectors").
LONE_SURROGATES = "\ud800\udbff\udc00\udfff"


def random_tenant(rng: random.Random) -> str:
    size = rng.choice([1, 2, 5, 20, rng.randint(1, 200)])
    tenant = "".join(rng.choice(TENANT_CHARS) for _ in range(size))
    if rng.random() < 0.05:
        at = rng.randint(0, len(tenant))
        tenant = tenant[:at] + rng.choice(LONE_SURROGATES) + tenant[at:]
    return tenant


def random_name(rng: random.Random) -> str:
    """Mostly valid; now and then empty, too long or with a character outside the set."""
    roll = rng.random()
    if roll < 0.03:
        return ""
    if roll < 0.06:
        return "n" * (model.MAX_NAME_LEN + 1)
    name = "".join(
        rng.choice(NAME_CHARS) for _ in range(rng.choice([1, 3, 12, model.MAX_NAME_LEN]))
    )
    if roll < 0.1:
        name = name[:-1] + rng.choice("{}:% é")
    return name


def random_key_vector(rng: random.Random, name: str) -> dict:
    algorithm = rng.choice(ALGORITHMS)
    window = rng.choice([1, 999, 1000, 60_000, 86_400_000, 2**52, 2**52 + 1])
    tenant = random_tenant(rng)
    roll = rng.random()
    if roll < 0.05:
        tenant = ""
    elif roll < 0.15:
        # At the bound of 512 UTF-8 bytes, or one byte over it.
        tenant = ("東" * 171)[:170] + rng.choice(["ab", "abc", "é"])
    inp = {
        "namespace": random_name(rng),
        "resource": random_name(rng),
        "tenant": tenant,
        "algorithm": algorithm,
        "window_ms": window,
    }
    if algorithm == "bucketed_window" and rng.random() < 0.8:
        inp["buckets"] = rng.choice([1, 60, model.MAX_BUCKETS, model.MAX_BUCKETS + 1, 7, 0])
    return {"name": name, "kind": "key", "comment": "random_vectors.py", "input": inp}


def random_limit(rng: random.Random, algorithm: str, extreme: bool = False) -> dict:
    window = rng.choice(WINDOWS)
    limit = {"algorithm": algorithm, "limit": rng.choice(LIMITS), "window_ms": window}
    if extreme:
        # Limits and windows at the contract's bounds (limit * window_ms <= 2^52,
        # the log's limit <= 10,000).
        window = rng.choice([86_400_000, 2**32, 3_600_000 * 7 * 24, *HUGE_WINDOWS])
        cap = model.MAX_LIMIT_TIMES_WINDOW // window
        if algorithm == "sliding_log":
            cap = min(cap, model.MAX_LOG_LIMIT)
        limit |= {
            "window_ms": window,
            "limit": rng.choice([cap, max(1, cap - 1), rng.randint(1, cap)]),
        }
    if algorithm == "bucketed_window":
        divisors = model.divisors(window)
        # Now and then g = 1 (the log) or one bucket (the coarsest).
        limit["buckets"] = rng.choice([divisors[0], divisors[-1], *divisors])
    return limit


def random_policy(rng: random.Random, resource: str) -> dict:
    policy = {"namespace": "rnd", "resource": resource}
    if rng.random() < 0.25:
        limits: list[dict] = []
        seen = set()
        while len(limits) < rng.randint(2, 4):
            limit = random_limit(rng, rng.choice(ALGORITHMS))
            where = (limit["algorithm"], limit["window_ms"], limit.get("buckets"))
            if where not in seen:
                seen.add(where)
                limits.append(limit)
        return policy | {"limits": limits}
    return policy | random_limit(rng, rng.choice(ALGORITHMS), extreme=rng.random() < 0.15)


def random_steps(rng: random.Random, policy: dict) -> list[dict]:
    limits = policy.get("limits", [policy])
    exact = all(limit["algorithm"] in generate.EXACT for limit in limits)
    window = min(limit["window_ms"] for limit in limits)
    smallest = min(limit["limit"] for limit in limits)
    now = EPOCH_MS + rng.randrange(window)
    huge = window in HUGE_WINDOWS
    if huge:
        # Any time up to 2^52: one window spans nearly all of them.
        now = rng.randrange(model.MAX_NOW_MS + 1)
    elif window > 60_000 and rng.random() < 0.5:
        # Near the largest now_ms (2^52), with room for the steps below.
        now = model.MAX_NOW_MS - 20 * window - rng.randrange(window)
    tenants = ["a", "b"] if rng.random() < 0.7 else [random_tenant(rng), random_tenant(rng)]
    steps = []
    # The model's brute force walks a log of 10,000 entries slowly: fewer steps there.
    big_log = any(limit["algorithm"] == "sliding_log" and limit["limit"] > 1000 for limit in limits)
    for _ in range(rng.randint(3, 10) if big_log else rng.randint(5, 60)):
        if huge:
            # Steps that stay below 2^52 (a jump of a window would pass it).
            now += rng.choice([0, 1, rng.randrange(2**20), rng.randrange(2**44)])
        else:
            now += rng.choice(
                [
                    0,
                    0,
                    1,
                    rng.randrange(window // 10 + 1),
                    rng.randrange(window + 1),
                    rng.randrange(3 * window + 1),
                ]
            )
        caller = now
        if exact and rng.random() < (0.5 if huge else 0.3):
            caller = now + rng.randrange(-2 * window, 2 * window + 1)
            if huge:
                # In [1, 2^52] (a valid now_ms, so the step decides): a caller
                # at 2^52 puts later ones in rule 4's reach; none at 0 keeps every
                # hint off exactly 2^53 (past the vector schema's bound), which
                # the log and the counter could give there.
                caller = min(max(caller, 1), model.MAX_NOW_MS)
        if rng.random() < 0.97:
            cost = rng.choice(
                [rng.randint(1, smallest), smallest, max(1, smallest // rng.randint(1, 4))]
            )
        else:
            cost = smallest + 1
        step = {"now_ms": caller, "tenant": rng.choice(tenants), "cost": cost}
        if rng.random() < 0.1:
            step["peek"] = True
        steps.append(step)
    return steps


def build(count: int, seed: int) -> str:
    rng = random.Random(seed)
    vectors = []
    for i in range(count):
        if rng.random() < 0.2:
            vectors.append(generate.derive_vector(random_key_vector(rng, f"random/{seed}/{i}")))
            continue
        resource = f"random-{seed}-{i}"
        policy = random_policy(rng, resource)
        vector = {
            "name": f"random/{seed}/{i}",
            "kind": "decision",
            "comment": f"random_vectors.py --seed {seed}, vector {i}",
            "policy": policy,
            "steps": random_steps(rng, policy),
        }
        vectors.append(generate.derive_vector(vector))
    return generate.render_file(vectors)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", required=True, help="the vector file to write")
    args = parser.parse_args()
    if args.count < 1:
        parser.error("--count must be at least 1")
    Path(args.out).write_text(build(args.count, args.seed), encoding="utf-8")
    print(f"wrote {args.out} ({args.count} random vectors, seed {args.seed})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
