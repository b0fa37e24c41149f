"""Tests of audit/run's schedule and driver handling, with fake drivers:
python3 -m unittest audit/test_run.py"""

import importlib.machinery
import importlib.util
import json
import os
import subprocess
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
RUN = os.path.join(HERE, "run")


def load_run():
    loader = importlib.machinery.SourceFileLoader("audit_run", RUN)
    spec = importlib.util.spec_from_loader("audit_run", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


run = load_run()

# A driver that answers every op and, on load, records when the request came,
# waits until the run's end, writes one admission and one denial, and answers.
FAKE = textwrap.dedent(
    """\
    #!/usr/bin/env python3
    import json, os, sys, time
    name = os.path.basename(sys.argv[0])
    for line in sys.stdin:
        r = json.loads(line)
        if r["op"] == "load":
            got = time.time_ns() // 1_000_000
            with open(os.path.join(os.environ["FAKE_DIR"], name + ".load"), "w") as f:
                json.dump(dict(r, received_ms=got), f)
            time.sleep(max(0, r["end_at_ms"] / 1000 - time.time()))
            with open(r["out"], "w") as f:
                t = r["start_at_ms"]
                f.write(json.dumps({"lang": r["lang"], "allowed": True, "now_ms": t,
                                    "retry_after_ms": 0}) + "\\n")
                f.write(json.dumps({"lang": r["lang"], "allowed": False, "now_ms": t + 1,
                                    "retry_after_ms": 5}) + "\\n")
            print('{"ok":true,"calls":2,"errors":0}', flush=True)
        elif r["op"] == "hello":
            print('{"ok":true,"binding":"%s","version":"0"}' % name, flush=True)
        else:
            print('{"ok":true}', flush=True)
            if r["op"] == "exit":
                break
    """
)


class Schedule(unittest.TestCase):
    def test_burst_cycles_of_three_windows(self):
        # W = 1000: calls in [900, 2000) of every 3,000 ms cycle.
        self.assertEqual(
            run.burst_intervals(0, 9000, 1000), [[900, 2000], [3900, 5000], [6900, 8000]]
        )
        # A run that ends inside a burst is cut at its end; one that ends
        # before the next burst starts gets no empty interval.
        self.assertEqual(run.burst_intervals(0, 4500, 1000), [[900, 2000], [3900, 4500]])
        self.assertEqual(run.burst_intervals(0, 3500, 1000), [[900, 2000]])
        # Windows under 10 ms still get a burst of 1 ms.
        self.assertEqual(run.burst_intervals(10, 19, 5), [[14, 19]])


class Drivers(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        self.dir = os.path.join(self.tmp.name, "drivers")
        os.mkdir(self.dir)
        for name in ("alpha", "beta"):
            path = os.path.join(self.dir, name)
            with open(path, "w") as f:
                f.write(FAKE)
            os.chmod(path, 0o755)
        self.env = dict(
            os.environ,
            SLIDELIMIT_DRIVERS_DIR=self.dir,
            FAKE_DIR=self.tmp.name,
            SLIDELIMIT_TEST_REDIS_URL="redis://127.0.0.1:1/",
        )

    def audit(self, *args):
        return subprocess.run(
            [RUN, "--out", os.path.join(self.tmp.name, "out"), "--limit", "2",
             "--window-ms", "400", "--windows", "3", *args],
            env=self.env, capture_output=True, text=True, timeout=60,
        )

    def loads(self):
        out = {}
        for name in ("alpha", "beta"):
            with open(os.path.join(self.tmp.name, name + ".load")) as f:
                out[name] = json.load(f)
        return out

    def test_every_load_is_sent_before_any_reply_is_read(self):
        proc = self.audit("--runs", "log:burst")
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        loads = self.loads()
        # Each fake answers only at the run's end: had audit/run waited for
        # one reply before sending the next load, that load would come late.
        for r in loads.values():
            self.assertLess(r["received_ms"], r["end_at_ms"])
        a, b = loads["alpha"], loads["beta"]
        self.assertEqual((a["lang"], b["lang"]), ("alpha", "beta"))
        self.assertEqual(a["start_at_ms"] % 400, 0, "starts on a window boundary")
        self.assertEqual(a["end_at_ms"] - a["start_at_ms"], 1200)
        self.assertEqual(a["active"], [[a["start_at_ms"] + 360, a["start_at_ms"] + 800]])
        self.assertEqual(a["active"], b["active"])
        self.assertEqual(a["ramp_ms"], 0)
        self.assertIn("alpha", proc.stdout)
        self.assertIn("audit: all runs passed", proc.stdout)

    def test_uniform_has_no_intervals_and_a_quarter_window_ramp(self):
        proc = self.audit("--runs", "log:uniform", "--drivers", "beta", "--limit", "1")
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        with open(os.path.join(self.tmp.name, "beta.load")) as f:
            r = json.load(f)
        self.assertNotIn("active", r)
        self.assertEqual(r["ramp_ms"], 100)
        self.assertFalse(os.path.exists(os.path.join(self.tmp.name, "alpha.load")))

    def test_a_driver_that_does_not_start_fails_the_run(self):
        with open(os.path.join(self.dir, "gamma"), "w") as f:
            f.write("#!/bin/sh\necho 'drivers/gamma: run make driver-gamma' >&2\nexit 2\n")
        os.chmod(os.path.join(self.dir, "gamma"), 0o755)
        proc = self.audit("--runs", "log:uniform")
        self.assertEqual(proc.returncode, 1)
        self.assertIn("make driver-gamma", proc.stderr)
        self.assertIn("audit FAILED", proc.stdout)

    def test_bad_arguments_are_refused(self):
        for args in (["--drivers", "nope"], ["--runs", "log:fast"], ["--targets", "moon"],
                     ["--windows", "0"]):
            proc = self.audit(*args)
            self.assertEqual(proc.returncode, 2, args)


if __name__ == "__main__":
    unittest.main()
