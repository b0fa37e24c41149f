#!/usr/bin/env python3
"""scripts/compat-table.py --out DIR --bindings "B1 B2 ..." [--total-secs N] ROW...

Prints the table of `make compat` from what scripts/compat.sh left in
DIR/ROW/: one line per server (ROW), one column per binding (its
conformance/all cells over every vector: pass when all pass, else FAIL, or
DIFF when the decisions were right but the bytes differed between bindings),
then server-time, audit, faults (the scenarios whose server errors differ by
version; `n/a` on a Cluster row, or with no binding that has a driver) and
ttl (scripts/check-ttl.py afterwards), and the seconds the row took. `-` is
a step that did not run. Exit 0 only when every cell passes (or is `n/a`).
"""

import argparse
import os
import sys


def read(path, default=None):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return default


def binding_cells(text, bindings):
    """Per binding: pass, FAIL or DIFF over every vector row of conformance/all's table."""
    cells: dict[str, str | None] = {b: None for b in bindings}
    in_table = False
    for line in text.splitlines():
        words = line.split()
        if words[:1] == ["vector"] and words[1:] == bindings:
            in_table = True
            continue
        if not line.strip() or not line.startswith("  "):
            in_table = False
            continue
        if in_table and len(words) >= len(bindings) + 1:
            for b, c in zip(bindings, words[-len(bindings) :]):
                prev = cells[b]
                if c == "FAIL" or prev == "FAIL":
                    cells[b] = "FAIL"
                elif c == "DIFF" or prev == "DIFF":
                    cells[b] = "DIFF"
                elif c == "pass":
                    cells[b] = "pass"
                else:
                    cells[b] = "FAIL"
    return cells


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--bindings", required=True)
    ap.add_argument("--total-secs", type=int)
    ap.add_argument("rows", nargs="+")
    a = ap.parse_args()
    bindings = a.bindings.split()
    steps = ["server-time", "audit", "faults", "ttl"]
    head = ["server", "version", *bindings, *steps, "secs"]
    table, ok = [], True
    for row in a.rows:
        d = os.path.join(a.out, row)
        version = read(os.path.join(d, "version"), "?")
        conf_rc = read(os.path.join(d, "conformance.rc"))
        cells = binding_cells(read(os.path.join(d, "conformance.out"), ""), bindings)
        for b in bindings:
            if cells[b] is None:
                cells[b] = "-" if conf_rc is None else "FAIL"
            elif (
                conf_rc not in (None, "0")
                and cells[b] == "pass"
                and all(c == "pass" for c in cells.values())
            ):
                # conformance/all failed without a failing cell (e.g. a file it could not use)
                cells[b] = "FAIL"
        line = [row, version.replace(" ", "-"), *[cells[b] for b in bindings]]
        for s in steps:
            rc = read(os.path.join(d, f"{s}.rc"))
            cell = {None: "-", "0": "pass", "skip": "n/a"}.get(rc, "FAIL")
            line.append(cell)
        line.append(read(os.path.join(d, "secs"), "-"))
        if read(os.path.join(d, "start.rc")) is not None:
            line[1] = "no-server"
        ok = ok and all(c in ("pass", "n/a") for c in line[2:-1]) and line[1] != "no-server"
        table.append(line)
    widths = [max(len(str(r[i])) for r in [head, *table]) for i in range(len(head))]
    print()
    print(
        "compat: conformance per binding (every vector), server-time, short audit,"
        " version-bound faults, TTL check"
    )
    for r in [head, *table]:
        print("  " + "  ".join(f"{c!s:<{w}}" for c, w in zip(r, widths)).rstrip())
    if a.total_secs is not None:
        print(f"compat: {len(table)} rows in {a.total_secs} s; logs in {a.out}/ROW/")
    if not ok:
        # CI keeps only the end of the output: the failures' own words go last.
        for row in a.rows:
            d = os.path.join(a.out, row)
            for s in ["conformance", *steps]:
                rc = read(os.path.join(d, f"{s}.rc"))
                if rc not in (None, "0", "skip"):
                    err = read(os.path.join(d, f"{s}.err"), "").splitlines()
                    print(f"compat: {row}: {s} exit {rc}; the end of {d}/{s}.err:")
                    for line in err[-12:]:
                        print(f"    {line}")
    print("compat: all passed" if ok else "compat: FAILED (the failing steps' errors are above)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
