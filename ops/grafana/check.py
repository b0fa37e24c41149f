#!/usr/bin/env python3
"""Checks a Grafana dashboard against the rules it relies on (make test-ops):

    ops/grafana/check.py DASHBOARD.json RULES.yml...

Every panel has a unique id and at least one query; every query parses as
PromQL (through `promtool check rules`, the dashboard's variables replaced by
plain values); every recording rule a query names (`a:b:c`) is defined in
the rule files. Exits 1 naming the panel and what is wrong.
"""

import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    dash = json.loads(Path(argv[0]).read_text())
    recorded = set()
    for path in argv[1:]:
        recorded |= set(re.findall(r"^\s*- record:\s*(\S+)", Path(path).read_text(), re.MULTILINE))
    errors = []
    ids = [p.get("id") for p in dash.get("panels", [])]
    if not ids:
        errors.append("the dashboard has no panels")
    if len(set(ids)) != len(ids):
        errors.append(f"panel ids repeat: {ids}")
    exprs = []
    for p in dash.get("panels", []):
        targets = p.get("targets") or []
        if not targets:
            errors.append(f"panel {p.get('title')!r}: no queries")
        for t in targets:
            expr = t.get("expr", "")
            # Grafana's variables, as a user's selection would fill them in.
            plain = expr.replace("$resource", "geocode").replace("$__all", ".*")
            exprs.append((p.get("title"), plain))
            for name in re.findall(r"\b[a-z_]+:[a-z0-9_]+:[a-z0-9_]+\b", plain):
                if name not in recorded:
                    errors.append(
                        f"panel {p.get('title')!r}: {name} is no recording rule of {argv[1:]}"
                    )
    with tempfile.NamedTemporaryFile("w", suffix=".yml") as f:
        rules = {
            "groups": [
                {
                    "name": "dashboard",
                    "rules": [
                        {"record": f"dashboard:panel_query:{i}", "expr": e}
                        for i, (_, e) in enumerate(exprs)
                    ],
                }
            ]
        }
        json.dump(rules, f)  # YAML is a superset of JSON
        f.flush()
        res = subprocess.run(
            ["promtool", "check", "rules", f.name], capture_output=True, text=True, check=False
        )
        if res.returncode != 0:
            errors.append("a query does not parse:\n" + res.stdout + res.stderr)
    for e in errors:
        print(f"{argv[0]}: {e}", file=sys.stderr)
    if not errors:
        print(f"{argv[0]}: {len(ids)} panels, {len(exprs)} queries: OK")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
