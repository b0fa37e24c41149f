#!/usr/bin/env python3
"""Instructions per check of Lua script texts, counted by callgrind.

A wall-clock benchmark on a busy two-core machine moves by a few percent
between runs; callgrind counts instructions, which it does not. This starts
one redis-server (default: the one on PATH) under
`valgrind --tool=callgrind --toggle-collect=evalGenericCommand` on a free
loopback port (everything an EVALSHA does: the Lua, every redis.call, the
reply), loads every script given, fills one key per script, then runs the
same checks against each and prints the instructions per check:

    scripts/script-instructions.py denied 1000 old.lua new.lua
    scripts/script-instructions.py --baseline allowed 1000 new.lua

Each script file is a whole text as core sends it (`cat lua/prelude.lua
lua/bucketed_window.lua > new.lua`); its kind comes from its name: a name
holding `log`, `counter` or `bucketed` (limit 600 per 60,000 ms; the
bucketed window with 60 buckets). `--baseline` adds the sorted-set baseline
of rust/benches/redis_side.rs. The regimes are those of redis_side:

- denied: the key full (600 permits over the last 60 s), time fixed;
- allowed: time advancing 100 ms per check of cost 1 (the limit's rate).

The server and its files are this script's own (harness/servers.py's
RedisServer, in temporary directories); it stops the server it started, by
pid. Stdlib and harness/ only.
"""

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
from harness.resp import ReplyError  # noqa: E402
from harness.servers import RedisServer  # noqa: E402

T0 = 1_800_000_000_000
LIMIT, WINDOW, BUCKETS = 600, 60_000, 60


def baseline_lua():
    """The sorted-set baseline, from the one copy (rust/benches/redis_side.rs)."""
    with open(os.path.join(ROOT, "rust", "benches", "redis_side.rs")) as f:
        text = f.read()
    start = text.index('const BASELINE_LUA: &str = r#"') + len('const BASELINE_LUA: &str = r#"')
    return text[start : text.index('"#;', start)].lstrip("\n")


def kind_of(name):
    for kind in ("baseline", "bucketed", "counter", "log"):
        if kind in os.path.basename(name):
            return kind
    sys.exit(f"{name}: the name must hold log, counter or bucketed")


def arguments(kind, now, cost):
    if kind == "baseline":
        return [LIMIT, WINDOW, now, f"{now}-m"]
    args = [LIMIT, WINDOW, cost, now]
    return [*args, BUCKETS] if kind == "bucketed" else args


def fill(con, kind, sha, key):
    """600 permits over the 60 s before T0 + 60,000."""
    if kind == "baseline":
        calls = [("ZADD", key, T0 + 100 * i, f"{T0 + 100 * i}-{i}") for i in range(600)]
    elif kind == "bucketed":
        calls = [("EVALSHA", sha, 1, key, *arguments(kind, T0 + 1000 * i, 10)) for i in range(60)]
    else:
        calls = [("EVALSHA", sha, 1, key, *arguments(kind, T0 + 100 * i, 1)) for i in range(600)]
    try:
        replies = con.pipeline(*calls)
    except ReplyError as e:
        sys.exit(f"filling {key}: {e}")
    for reply in replies:
        if isinstance(reply, list) and reply[0] != 1:
            sys.exit(f"filling {key}: {reply}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--baseline", action="store_true", help="add the sorted-set baseline")
    parser.add_argument("--server", default="redis-server", help="the redis-server to run")
    parser.add_argument("regime", choices=["denied", "allowed"])
    parser.add_argument("checks", type=int)
    parser.add_argument("scripts", nargs="+")
    opts = parser.parse_args()
    if opts.checks < 1:
        sys.exit("checks: must be at least 1")
    for tool in ("valgrind", "callgrind_control", opts.server):
        if not shutil.which(tool):
            sys.exit(f"{tool} not found")

    texts = [("baseline", baseline_lua())] if opts.baseline else []
    for name in opts.scripts:
        with open(name) as f:
            texts.append((name, f.read()))
    workdir = tempfile.mkdtemp(prefix="script-instructions.")  # callgrind's files
    server = RedisServer(
        server=opts.server,
        wrapper=[
            "valgrind",
            "--tool=callgrind",
            "--toggle-collect=evalGenericCommand",
            f"--callgrind-out-file={workdir}/callgrind.out",
        ],
    )
    try:
        # valgrind runs the server in its own process: the pid is the server's.
        pid = str(server.start(timeout_s=30).proc.pid)
        # Generous: every reply waits for a server under valgrind.
        con = server.client(timeout=120, decode=True)
        loaded = []
        for i, (name, text) in enumerate(texts):
            kind = kind_of(name)
            try:
                sha = con("SCRIPT", "LOAD", text)
            except ReplyError as e:
                sys.exit(f"{name}: {e}")
            key = f"si:{{t{i}}}"
            fill(con, kind, sha, key)
            loaded.append((name, kind, sha, key))
        results = []
        for i, (name, kind, sha, key) in enumerate(loaded):
            subprocess.run(
                ["callgrind_control", "-z", pid],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                check=True,
            )
            calls = []
            for j in range(opts.checks):
                if opts.regime == "allowed":
                    now, cost = T0 + 60_000 + 100 * j, 1
                else:
                    now, cost = T0 + 59_950, 10 if kind == "bucketed" else 1
                calls.append(("EVALSHA", sha, 1, key, *arguments(kind, now, cost)))
            replies = []
            try:
                for start in range(0, len(calls), 100):
                    replies += con.pipeline(*calls[start : start + 100])
            except ReplyError as e:
                sys.exit(f"{name}: {e}")
            admitted = sum(1 for r in replies if r[0] == 1)
            subprocess.run(
                ["callgrind_control", "-d", f"phase{i}", pid],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                check=True,
            )
            results.append((name, admitted))
        server.stop()  # the phases are dumped already
        totals = {}
        for path in glob.glob(f"{workdir}/callgrind.out*"):
            phase, total = None, None
            with open(path) as f:
                for line in f:
                    if line.startswith("desc: Trigger: dump phase"):
                        phase = int(line.rsplit("phase", 1)[1])
                    elif line.startswith(("summary:", "totals:")):
                        total = int(line.split()[1])
            if phase is not None:
                totals[phase] = total
        print("| script | regime | admitted | instructions/check |")
        print("|---|---|---:|---:|")
        for i, (name, admitted) in enumerate(results):
            print(
                f"| {name} | {opts.regime} | {admitted}/{opts.checks} | {totals[i] // opts.checks:,} |"
            )
    finally:
        server.close()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
