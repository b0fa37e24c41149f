#!/usr/bin/env python3
"""audit/check.py --limit N --window-ms W [--report-only] [--recorded [--reset-window-ms R]] [--max-errors E]
                [--cost LANG=C ...] [--starved-is-note] [--label TEXT] LOG...

Merges the decision logs written by the audit workers (one JSON line per
decision: {"lang", "allowed", "now_ms", "retry_after_ms", "reset_after_ms"},
or {"lang", "error"}) and counts, for every t, the permits admitted with
now_ms in (t - W, t]. Prints per language: attempts, allowed, denied, errors
and the largest rolling count of its own admissions, then the largest
rolling count of all languages together and its ratio to the limit.

With --recorded (a run on skewed caller clocks, for the sliding log and the
bucketed window) the times counted are the admissions' RECORDED times,
r = now_ms + reset_after_ms - W: for the log the time t = max(now, newest)
it was recorded at, for the bucketed window the last millisecond of t's
bucket (docs/protocol.md: every permit counts through [r, r + W) either
way). The guarantee is about those, whatever the clocks: no [x, x + W) holds
more than N. now_ms is then the caller's own clock, so its rolling count is
printed for information only. An admission with reset_after_ms < W (recorded
before its own now) counts as inconsistent.

A policy of several limits (audit/run's multi on skewed clocks) replies with
the largest reset_after_ms of its limits; audit/run makes that a log's, of
window R. Then --reset-window-ms R places each admission at its recorded
t = now_ms + reset_after_ms - R, for every limit: each evaluates at
max(now, its newest admission) and every admission is recorded in all of
them, so all record it at the same t, as long as no key expires while
another lives on, which needs caller clocks less than the shortest window
apart (docs/audit.md). A bucketed limit is then counted at t itself, not at
its bucket's end: [t, t + W) lies within the time it holds the permit, so
its count of t's may not exceed the limit either (the stricter check).

With --cost LANG=C (repeated, one per language; a run of mixed costs) every
admission of LANG took C permits: the rolling counts are of permits, each
admission counted C times at its time, and a window counts as filled when
not even the smallest cost would fit in it any more. A language in the logs
without a --cost is then an error.

Exit status 1 when any (t - W, t] holds more than N admissions, when a call
failed, when a decision is inconsistent (allowed with a retry hint, denied
without one), when a language made no attempt or got no permit (the latter
only when the run admitted at least MIN_PERMITS_PER_LANGUAGE = 50 per
language: fewer cannot go round, and a language left out is then printed as
a note; with mixed costs only the languages of the smallest cost, as a
larger cost can be starved by smaller ones, docs/protocol.md), or when the
whole run never filled a window (the audit then proved nothing). With
--report-only (the sliding counter, which is approximate by design) only
errors, inconsistent lines and idle languages fail; the overshoot is reported.
With --starved-is-note (what audit/run passes) a language that got no permit
where it should have is printed as a note and listed in the summary's
"starved"; audit/run then fails a language that got no permit in any of its
runs (docs/audit.md: under saturation the bucketed window frees its permits
in a few chunks, and a process a millisecond late for each can miss them all).
With --max-errors E (a run with a Cluster failover) a language may surface
up to E failed calls (its callers simply call again, as an application
would); the bound and every language's count are printed, more fails.
The last line is a JSON summary for scripts.
"""

import argparse
import json
import sys
from collections import OrderedDict

# Below this many admitted calls per language a language may go without a permit:
# the drivers' shares differ (Ruby's was 2 % of some runs), so a run of few
# permits can leave one out by chance. At 50 each, a 2 % share misses all of
# them with odds of about 1 in 1,200 (0.98^350, seven languages).
MIN_PERMITS_PER_LANGUAGE = 50


def largest_rolling_count(times, window_ms):
    """Largest number of entries of the sorted list `times` in any (t - W, t].

    Returns (count, t): the largest count and the newest entry of the first
    window that holds it.
    """
    best, best_t, oldest = 0, None, 0
    for newest, t in enumerate(times):
        while times[oldest] <= t - window_ms:
            oldest += 1
        if newest + 1 - oldest > best:
            best, best_t = newest + 1 - oldest, t
    return best, best_t


class Lang:
    def __init__(self):
        self.attempts = 0
        # Admitted calls; allowed and recorded hold one time per permit.
        self.admitted = 0
        self.allowed = []
        self.recorded = []
        self.denied = 0
        self.errors = OrderedDict()
        # code -> the first message logged with it (drivers since 2026-12-04)
        self.first_message = {}
        self.inconsistent = 0


def read_logs(paths, window_ms=None, costs=None):
    """Per language (in order of first appearance): its Lang record. With
    window_ms (--recorded: the window whose reset_after_ms the decisions
    carry), each admission's recorded time too, from its reset_after_ms.
    With costs (language -> permits per admission), an admission's time is
    listed once per permit; a language costs leaves out is an error."""
    langs: OrderedDict[str, Lang] = OrderedDict()
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    d = json.loads(line)
                    lang = langs.setdefault(str(d["lang"]), Lang())
                    lang.attempts += 1
                    if "error" in d:
                        code = str(d["error"])
                        lang.errors[code] = lang.errors.get(code, 0) + 1
                        lang.first_message.setdefault(code, d.get("message"))
                        continue
                    allowed, now, retry = d["allowed"], d["now_ms"], d["retry_after_ms"]
                    # Only the recorded times need it (older logs lack it).
                    reset = d["reset_after_ms"] if window_ms is not None and allowed is True else 0
                except (ValueError, KeyError, TypeError) as e:
                    raise SystemExit(
                        f"{path}:{number}: not an audit line ({e}): {line[:200]}"
                    ) from e
                if not isinstance(allowed, bool) or not all(
                    isinstance(n, int) and not isinstance(n, bool) and n >= 0
                    for n in (now, retry, reset)
                ):
                    raise SystemExit(f"{path}:{number}: bad field types: {line[:200]}")
                if allowed:
                    cost = 1
                    if costs is not None:
                        if d["lang"] not in costs:
                            raise SystemExit(f"{path}:{number}: no --cost for language {d['lang']}")
                        cost = costs[d["lang"]]
                    lang.admitted += 1
                    lang.allowed += [now] * cost
                    lang.inconsistent += retry != 0
                    if window_ms is not None:
                        lang.recorded += [now + reset - window_ms] * cost
                        lang.inconsistent += reset < window_ms
                else:
                    lang.denied += 1
                    lang.inconsistent += retry == 0
    return langs


def first_message(lang, code):
    """', the first: <message>' when the log carried one, else nothing."""
    message = lang.first_message.get(code)
    return f", the first: {message[:300]!r}" if isinstance(message, str) else ""


def check(
    langs,
    limit,
    window_ms,
    report_only,
    max_errors=0,
    recorded=False,
    costs=None,
    starved_is_note=False,
):
    """Prints the table; returns (problems, summary). With recorded, the
    counts are of the recorded times (see --recorded). Counts are of
    permits (costs: language -> permits per admission, default 1 each); a
    window is filled once the smallest cost no longer fits. With
    starved_is_note a language that got no permit when it should have is
    listed in summary["starved"] instead of failing (--starved-is-note)."""
    smallest_cost = min(costs.values()) if costs else 1
    problems = []

    def times(lang):
        return lang.recorded if recorded else lang.allowed

    merged = sorted(t for lang in langs.values() for t in times(lang))
    overall, at = largest_rolling_count(merged, window_ms)

    idle = []
    head = f"{'lang':<12} {'attempts':>9} {'allowed':>8} {'denied':>9} {'errors':>7} {'largest rolling':>16}"
    print(head)
    rows = {}
    tolerated = []
    for name, lang in langs.items():
        own, _ = largest_rolling_count(sorted(times(lang)), window_ms)
        errors = sum(lang.errors.values())
        print(
            f"{name:<12} {lang.attempts:>9} {lang.admitted:>8} {lang.denied:>9} "
            f"{errors:>7} {own:>16}"
        )
        rows[name] = {
            "attempts": lang.attempts,
            "allowed": lang.admitted,
            "denied": lang.denied,
            "errors": errors,
            "largest_rolling": own,
        }
        if errors > max_errors:
            detail = ", ".join(
                f"{n} {code}" + first_message(lang, code) for code, n in lang.errors.items()
            )
            bound = f", more than the bound of {max_errors}" if max_errors else ""
            problems.append(f"{name}: {errors} call(s) failed ({detail}){bound}")
        elif errors:
            # within the bound: not a failure, but what failed is worth seeing
            for code, n in lang.errors.items():
                tolerated.append(f"{name}: {n} {code}{first_message(lang, code)}")
        if lang.inconsistent:
            what = "retry_after_ms or reset_after_ms" if recorded else "retry_after_ms"
            problems.append(f"{name}: {lang.inconsistent} decision(s) with an inconsistent {what}")
        # (Every language here logged an attempt; audit/run checks that each
        # driver's log has a line per call of its load.)
        if not lang.allowed:
            idle.append(name)

    total = sum(r["attempts"] for r in rows.values())
    span = (merged[-1] - merged[0]) if merged else 0
    ratio = overall / limit
    basis = "recorded time" if recorded else "now_ms"
    where = f" (window ending at {basis} {at})" if at is not None else ""
    print(
        f"{'all':<12} {total:>9} {sum(r['allowed'] for r in rows.values()):>8} "
        f"{sum(r['denied'] for r in rows.values()):>9} "
        f"{sum(r['errors'] for r in rows.values()):>7} {overall:>16}"
    )
    what = "recorded admission times" if recorded else "admissions"
    print(
        f"largest rolling count {overall} of limit {limit} per {window_ms} ms = "
        f"{ratio:.3f} x the limit{where}; {what} spread over {span} ms"
    )
    by_now = None
    if recorded:
        # The callers' own clocks disagree: for information, not a criterion.
        by_now, now_at = largest_rolling_count(
            sorted(t for lang in langs.values() for t in lang.allowed), window_ms
        )
        print(
            f"for information, by the callers' now_ms (skewed clocks): largest rolling count "
            f"{by_now} = {by_now / limit:.3f} x the limit"
            + (f" (window ending at now_ms {now_at})" if now_at is not None else "")
        )
    if max_errors:
        worst = max((r["errors"] for r in rows.values()), default=0)
        print(f"errors surfaced per process: at most {worst}, bound {max_errors}")
    for line in tolerated:
        print(f"tolerated errors, {line}")
    if not langs:
        problems.append("no decision logged at all")
    # A language without a permit took no part in sharing the budget, unless
    # the run had too few permits to go round (a limit of 1, say).
    # Admitted calls, not permits: with mixed costs a call of cost 5 is one
    # chance at the budget, not five.
    # A language of a cost above the smallest may go without: permits come
    # free one expiry at a time, and callers of the smallest cost take each
    # one before a larger cost fits (docs/protocol.md: no reservation for a
    # large request). The smallest cost's languages show every driver calls.
    admitted = sum(lang.admitted for lang in langs.values())
    enough = admitted >= MIN_PERMITS_PER_LANGUAGE * len(langs)
    starved = []
    for name in idle:
        cost = costs.get(name, 1) if costs else 1
        if enough and cost == smallest_cost:
            if not starved_is_note:
                problems.append(
                    f"{name}: no permit admitted: this language took no part in the run"
                )
                continue
            starved.append(name)
            print(
                f"note: {name}: no permit admitted in this run; not failed here: the audit fails a "
                f"language that gets no permit in any of its runs"
            )
        elif enough:
            print(
                f"note: {name}: no permit admitted; reported, not failed: its cost of {cost} "
                f"competes with callers of cost {smallest_cost}, which take each permit that frees first"
            )
        else:
            print(
                f"note: {name}: no permit admitted; reported, not failed: the run admitted "
                f"{admitted} calls for {len(langs)} languages, fewer than {MIN_PERMITS_PER_LANGUAGE} each"
            )
    if not report_only:
        if overall > limit:
            of = " of recorded times" if recorded else ""
            problems.append(
                f"OVER-ADMISSION: {overall} permits in one rolling window{of}, limit {limit}"
            )
        elif overall + smallest_cost <= limit:
            room = f", room for a cost of {smallest_cost}" if smallest_cost > 1 else ""
            problems.append(
                f"no rolling window ever filled ({overall} < {limit}{room}): the run proved nothing"
            )
    summary = {
        "limit": limit,
        "max_errors": max_errors,
        "window_ms": window_ms,
        "basis": "recorded" if recorded else "now_ms",
        "largest_rolling": overall,
        "ratio": round(ratio, 4),
        "langs": rows,
        "starved": starved,
    }
    if recorded:
        summary["largest_rolling_now_ms"] = by_now
    return problems, summary


def main(argv):
    parser = argparse.ArgumentParser(
        description=__doc__.strip().splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--limit", type=int, required=True)
    parser.add_argument("--window-ms", type=int, required=True)
    parser.add_argument("--report-only", action="store_true")
    parser.add_argument("--recorded", action="store_true")
    parser.add_argument(
        "--reset-window-ms", type=int, help="with --recorded: the window reset_after_ms is of"
    )
    parser.add_argument("--max-errors", type=int, default=0)
    parser.add_argument(
        "--cost",
        action="append",
        default=[],
        metavar="LANG=C",
        help="every admission of LANG took C permits (one per language)",
    )
    parser.add_argument(
        "--starved-is-note",
        action="store_true",
        help="a language that should have got a permit and got none is a note and listed "
        "in the summary's starved, not a failure (audit/run judges it over all its runs)",
    )
    parser.add_argument("--label", default="")
    parser.add_argument("logs", nargs="+")
    args = parser.parse_args(argv)
    if args.limit < 1 or args.window_ms < 1:
        parser.error("--limit and --window-ms must be at least 1")
    if args.max_errors < 0:
        parser.error("--max-errors must not be negative")
    if args.reset_window_ms is not None and not (args.recorded and args.reset_window_ms >= 1):
        parser.error("--reset-window-ms needs --recorded and must be at least 1")
    costs: dict[str, int] | None = None
    if args.cost:
        costs = {}
        for item in args.cost:
            lang, _, cost = item.partition("=")
            if not (lang and cost.isdigit() and int(cost) >= 1) or lang in costs:
                parser.error(f"--cost {item}: expected LANG=C, C at least 1, once per language")
            costs[lang] = int(cost)
    if args.label:
        print(f"== {args.label}")
    window = (args.reset_window_ms or args.window_ms) if args.recorded else None
    problems, summary = check(
        read_logs(args.logs, window, costs),
        args.limit,
        args.window_ms,
        args.report_only,
        args.max_errors,
        args.recorded,
        costs,
        args.starved_is_note,
    )
    if costs:
        summary["costs"] = costs
    for p in problems:
        print(f"FAIL: {p}")
    summary["label"] = args.label
    summary["ok"] = not problems
    print("summary " + json.dumps(summary, separators=(",", ":")))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
