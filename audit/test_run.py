"""Tests of audit/run's schedule and driver handling, with fake drivers:
python3 -m unittest audit/test_run.py"""

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import types
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
RUN = os.path.join(HERE, "run")
sys.path.insert(0, os.path.dirname(HERE))
from harness.scripts import load_script  # noqa: E402

run = load_script(RUN, "audit_run")

# A driver that answers every op and records its policy; on load it records
# when the request came (in <name>.<algorithm>.load), waits until the run's
# end, writes FAKE_ADMITS admissions (default 1; FAKE_ADMITS_<name> and
# FAKE_ADMITS_<name>_<algorithm> say it for one driver) and one denial (then
# a line that is not JSON if FAKE_GARBAGE is set), and answers. A load of
# several tenants gets those lines for each, each naming its tenant (but for
# the first denial when FAKE_UNNAMED is set). Its reply counts the lines it
# wrote, or FAKE_CALLS; FAKE_LANG_<name> is the lang its lines carry.
FAKE = textwrap.dedent(
    """\
    #!/usr/bin/env python3
    import json, os, sys, time
    name = os.path.basename(sys.argv[0])
    policy = {"algorithm": "none"}
    for line in sys.stdin:
        r = json.loads(line)
        if r["op"] == "policy":
            policy = r
            # A policy of several limits replies with its longest window's reset.
            window = max(lim["window_ms"] for lim in r.get("limits", [r]))
        if r["op"] == "load":
            got = time.time_ns() // 1_000_000
            path = os.path.join(os.environ["FAKE_DIR"], f"{name}.{policy.get('algorithm', 'multi')}.load")
            with open(path, "w") as f:
                json.dump(dict(r, received_ms=got, policy=policy), f)
            time.sleep(max(0, r["end_at_ms"] / 1000 - time.time()))
            lang = os.environ.get(f"FAKE_LANG_{name}", r["lang"])
            with open(r["out"], "w") as f:
                t = r["start_at_ms"]
                admits = os.environ.get(f"FAKE_ADMITS_{name}_{policy.get('algorithm')}",
                                        os.environ.get(f"FAKE_ADMITS_{name}", os.environ.get("FAKE_ADMITS", "1")))
                for k, tenant in enumerate(r.get("tenants", [None])):
                    head = {"lang": lang} if tenant is None else {"lang": lang, "tenant": tenant}
                    for _ in range(int(admits)):
                        f.write(json.dumps(dict(head, allowed=True, now_ms=t,
                                                retry_after_ms=0, reset_after_ms=window)) + "\\n")
                    if k == 0 and os.environ.get("FAKE_UNNAMED"):
                        head = {"lang": lang}
                    f.write(json.dumps(dict(head, allowed=False, now_ms=t + 1,
                                            retry_after_ms=5)) + "\\n")
                if os.environ.get("FAKE_GARBAGE"):
                    f.write("not json\\n")
            with open(r["out"]) as f:
                calls = int(os.environ.get("FAKE_CALLS", len(f.readlines())))
            print(json.dumps({"ok": True, "calls": calls, "errors": 0}), flush=True)
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

    def test_skews_spread_evenly_over_the_range(self):
        self.assertEqual(run.skews(50, 6), [-50, -30, -10, 10, 30, 50])
        self.assertEqual(run.skews(50, 2), [-50, 50])
        self.assertEqual(run.skews(50, 3), [-50, 0, 50])
        self.assertEqual(run.skews(10, 4), [-10, -3, 3, 10])
        self.assertEqual(run.skews(50, 1), [0])

    def test_slot_ranges_of_cluster_nodes(self):
        # CLUSTER NODES lists ranges, single slots and, on a node migrating a
        # slot, `[slot->-id]` marks, which own nothing.
        ranges = ["0-5460", "7000", "[5461->-4ab9]"]
        for slot, owned in ((0, True), (5460, True), (7000, True), (5461, False), (6999, False)):
            self.assertEqual(run.owns(ranges, slot), owned, slot)

    def test_default_buckets_divide_the_window(self):
        # Core's default 60 where it divides the window, else the largest
        # count below it that does.
        for window, buckets in (
            (60_000, 60),
            (2000, 50),
            (6500, 52),
            (60_500, 55),
            (7, 7),
            (61, 1),
        ):
            self.assertEqual(run.default_buckets(window), buckets, window)
            self.assertEqual(window % buckets, 0)


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

    def audit(self, *args, env=None):
        return subprocess.run(
            [
                RUN,
                "--out",
                os.path.join(self.tmp.name, "out"),
                "--limit",
                "2",
                "--window-ms",
                "400",
                "--windows",
                "3",
                *args,
            ],
            env=dict(self.env, **(env or {})),
            capture_output=True,
            text=True,
            timeout=60,
        )

    def loads(self, algorithm="sliding_log", names=("alpha", "beta")):
        out = {}
        for name in names:
            with open(os.path.join(self.tmp.name, f"{name}.{algorithm}.load")) as f:
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
        r = self.loads(names=("beta",))["beta"]
        self.assertNotIn("active", r)
        self.assertEqual(r["ramp_ms"], 100)
        self.assertFalse(os.path.exists(os.path.join(self.tmp.name, "alpha.sliding_log.load")))

    def test_algorithms_joined_by_plus_run_at_once_on_keys_of_their_own(self):
        proc = self.audit("--runs", "log+bucketed:uniform", "--buckets", "8", "--windows", "1")
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        log, bucketed = self.loads("sliding_log"), self.loads("bucketed_window")
        for name in ("alpha", "beta"):
            # One schedule for both, each load sent before any reply came.
            self.assertEqual(log[name]["start_at_ms"], bucketed[name]["start_at_ms"])
            self.assertLess(bucketed[name]["received_ms"], bucketed[name]["end_at_ms"])
            self.assertLess(log[name]["received_ms"], bucketed[name]["end_at_ms"])
            self.assertEqual(bucketed[name]["policy"]["buckets"], 8)
            self.assertNotIn("buckets", log[name]["policy"])
            self.assertNotEqual(
                log[name]["policy"]["namespace"], bucketed[name]["policy"]["namespace"]
            )
            self.assertNotEqual(log[name]["out"], bucketed[name]["out"])
        self.assertIn("== log/uniform on standalone", proc.stdout)
        self.assertIn("== bucketed/uniform on standalone", proc.stdout)

    def test_over_admission_fails_the_exact_algorithms_only(self):
        # Two admissions in one window at limit 1: the log and the bucketed
        # window fail, the counter (approximate) reports it and passes.
        proc = self.audit(
            "--runs",
            "log+bucketed+counter:uniform",
            "--drivers",
            "alpha",
            "--limit",
            "1",
            "--windows",
            "1",
            env={"FAKE_ADMITS": "2"},
        )
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        # No --buckets: 50, the largest count up to core's 60 that divides 400 ms.
        self.assertEqual(
            self.loads("bucketed_window", names=("alpha",))["alpha"]["policy"]["buckets"], 50
        )
        self.assertIn(
            "audit FAILED: log/uniform on standalone, bucketed/uniform on standalone\n", proc.stdout
        )
        bucketed = proc.stdout.split("== bucketed/uniform")[1].split("== counter/uniform")[0]
        self.assertIn("FAIL: OVER-ADMISSION: 2 permits in one rolling window, limit 1", bucketed)
        counter = proc.stdout.split("== counter/uniform")[1].split("audit FAILED")[0]
        self.assertIn("largest rolling count 2 of limit 1", counter)
        self.assertNotIn("FAIL", counter)

    def test_a_passing_run_keeps_its_checks_but_not_its_decision_logs(self):
        def logs(run_dir):
            d = os.path.join(self.tmp.name, "out", run_dir)
            return sorted(n for n in os.listdir(d) if n != "check.txt" and not n.endswith(".err"))

        alpha = ("--drivers", "alpha", "--limit", "1", "--windows", "1")
        # The bucketed run over-admits (2 per window at limit 1), the log's does not.
        env = {"FAKE_ADMITS": "1", "FAKE_ADMITS_alpha_bucketed_window": "2"}
        proc = self.audit("--runs", "log+bucketed:uniform", *alpha, env=env)
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        self.assertEqual(logs("standalone-log-uniform"), [])
        self.assertEqual(logs("standalone-bucketed-uniform"), ["alpha.jsonl"])
        with open(os.path.join(self.tmp.name, "out", "standalone-log-uniform", "check.txt")) as f:
            self.assertIn("largest rolling count 1 of limit 1", f.read())

        proc = self.audit("--runs", "log:uniform", *alpha, "--keep-logs")
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertEqual(logs("standalone-log-uniform"), ["alpha.jsonl"])
        self.assertIn("all runs passed (logs in", proc.stdout)

    def test_a_language_without_a_permit_in_one_run_is_judged_over_all_runs(self):
        # 100 permits per run at limit 100, two drivers: enough to go round.
        # beta gets none in the bucketed run but 50 in the log's: a note.
        env = {"FAKE_ADMITS": "50", "FAKE_ADMITS_beta_bucketed_window": "0"}
        runs = ("--runs", "log:uniform,bucketed:uniform", "--limit", "100", "--windows", "1")
        env["FAKE_ADMITS_alpha_bucketed_window"] = "100"
        proc = self.audit(*runs, env=env)
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        bucketed = proc.stdout.split("== bucketed/uniform")[1]
        self.assertIn("note: beta: no permit admitted in this run; not failed here", bucketed)
        # None in either run: the audit fails and names both.
        env = {"FAKE_ADMITS_alpha": "100", "FAKE_ADMITS_beta": "0"}
        proc = self.audit(*runs, env=env)
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        self.assertIn(
            "FAIL: beta: no permit admitted in any run (it should have in log/uniform on "
            "standalone, bucketed/uniform on standalone)",
            proc.stdout,
        )
        self.assertIn("audit FAILED: beta: no permit admitted in any run", proc.stdout)

    def test_a_log_the_checker_cannot_read_fails_its_run(self):
        proc = self.audit("--runs", "log:uniform", "--windows", "1", env={"FAKE_GARBAGE": "1"})
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        self.assertIn("not an audit line", proc.stderr)
        self.assertIn("audit FAILED: log/uniform on standalone\n", proc.stdout)
        self.assertNotIn("Traceback", proc.stderr)

    def test_a_log_without_a_line_per_call_of_its_own_lang_fails_its_run(self):
        # docs/driver.md: one line per call, each naming its driver's lang.
        for env, words in (
            ({"FAKE_CALLS": "99"}, "the alpha driver logged 2 line(s) for the 99 call(s)"),
            ({"FAKE_CALLS": "0"}, "the alpha driver's load made no call"),
            ({"FAKE_LANG_beta": "alpha"}, "the beta driver logged lines of another lang: 'alpha'"),
        ):
            proc = self.audit("--runs", "log:uniform", "--windows", "1", env=env)
            self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
            self.assertIn(words, proc.stderr, env)

    def test_skew_ms_gives_each_driver_its_skew_and_checks_recorded_times(self):
        proc = self.audit("--runs", "log+bucketed:uniform", "--skew-ms", "50", "--windows", "1")
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        for algorithm in ("sliding_log", "bucketed_window"):
            loads = self.loads(algorithm)
            self.assertEqual((loads["alpha"]["skew_ms"], loads["beta"]["skew_ms"]), (-50, 50))
            self.assertIn("-skew50" + os.sep, loads["alpha"]["out"])
        self.assertIn("audit: caller clocks, skew_ms per driver: alpha -50, beta +50", proc.stderr)
        self.assertIn("== log/uniform on standalone, caller clocks skewed ±50 ms", proc.stdout)
        self.assertIn("for information, by the callers' now_ms", proc.stdout)
        self.assertIn('"basis":"recorded"', proc.stdout)
        # Without --skew-ms: server time, no skew_ms, the now_ms check.
        proc = self.audit("--runs", "log:uniform", "--windows", "1")
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertNotIn("skew_ms", self.loads()["alpha"])
        self.assertIn('"basis":"now_ms"', proc.stdout)

    def test_skew_ms_fails_an_over_admission_in_recorded_times(self):
        # Two admissions recorded at one time, limit 1: the exact algorithms
        # fail on their recorded times, the counter only reports.
        proc = self.audit(
            "--runs",
            "log+counter:uniform",
            "--drivers",
            "alpha",
            "--limit",
            "1",
            "--windows",
            "1",
            "--skew-ms",
            "50",
            env={"FAKE_ADMITS": "2"},
        )
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        self.assertEqual(self.loads(names=("alpha",))["alpha"]["skew_ms"], 0, "one driver: no skew")
        self.assertIn(
            "FAIL: OVER-ADMISSION: 2 permits in one rolling window of recorded times, limit 1",
            proc.stdout,
        )
        self.assertIn(
            "audit FAILED: log/uniform on standalone, caller clocks skewed ±50 ms\n", proc.stdout
        )

    def test_multi_on_skewed_clocks_swaps_its_algorithms_and_places_admissions_by_the_log(self):
        # Three admissions at one recorded time: over the first limit (2 per
        # 400 ms), under the second (4 per 1,600 ms: never filled), each
        # checked on its own by the recorded times the log's reset gives.
        proc = self.audit(
            "--runs",
            "multi:uniform",
            "--drivers",
            "alpha",
            "--skew-ms",
            "50",
            "--windows",
            "1",
            env={"FAKE_ADMITS": "3"},
        )
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        load = self.loads("multi", names=("alpha",))["alpha"]
        self.assertEqual(
            load["policy"]["limits"],
            [
                {"algorithm": "bucketed_window", "limit": 2, "window_ms": 400, "buckets": 50},
                {"algorithm": "sliding_log", "limit": 4, "window_ms": 1600},
            ],
        )
        self.assertIn(
            "limits bucketed_window 2 per 400 ms (50 buckets) and sliding_log 4 per 1600 ms",
            proc.stderr,
        )
        first = proc.stdout.split(", limits[0] 2 per 400 ms\n")[1].split("\n== ")[0]
        second = proc.stdout.split(", limits[1] 4 per 1600 ms\n")[1]
        # reset_after_ms is the 1,600 ms log's: recorded at now_ms itself.
        self.assertIn(f"window ending at recorded time {load['start_at_ms']})", first)
        self.assertIn(
            "FAIL: OVER-ADMISSION: 3 permits in one rolling window of recorded times, limit 2",
            first,
        )
        self.assertIn("no rolling window ever filled (3 < 4)", second)
        self.assertIn(
            "audit FAILED: multi/uniform on standalone, caller clocks skewed ±50 ms\n", proc.stdout
        )
        # Without skew the log has the short window and the bucketed one the long.
        proc = self.audit("--runs", "multi:uniform", "--drivers", "alpha", "--windows", "1")
        self.assertEqual(
            [
                lim["algorithm"]
                for lim in self.loads("multi", names=("alpha",))["alpha"]["policy"]["limits"]
            ],
            ["sliding_log", "bucketed_window"],
        )

    def test_costs_go_to_the_drivers_in_turn_and_are_counted_as_permits(self):
        # alpha asks for 1 permit per call, beta for 2: one admission each in
        # one window is 3 permits, over a limit of 2, within a limit of 3.
        proc = self.audit("--runs", "log:uniform", "--windows", "1", "--costs", "1,2")
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        loads = self.loads()
        self.assertEqual((loads["alpha"]["cost"], loads["beta"]["cost"]), (1, 2))
        self.assertIn("-costs1-2" + os.sep, loads["alpha"]["out"])
        self.assertIn(
            "audit: mixed costs, permits per call per driver: alpha 1, beta 2", proc.stderr
        )
        self.assertIn("== log/uniform on standalone, costs 1/2", proc.stdout)
        self.assertIn("FAIL: OVER-ADMISSION: 3 permits in one rolling window, limit 2", proc.stdout)
        proc = self.audit(
            "--runs", "log:uniform", "--windows", "1", "--costs", "1,2", "--limit", "3"
        )
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertIn('"costs":{"alpha":1,"beta":2}', proc.stdout)
        # Without --costs every call costs 1.
        proc = self.audit("--runs", "log:uniform", "--windows", "1")
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertEqual({r["cost"] for r in self.loads().values()}, {1})
        self.assertNotIn('"costs"', proc.stdout)

    def test_tenants_are_gone_round_and_each_checked_apart(self):
        # Two admissions per tenant and driver in one window: four per
        # tenant, within a limit of 4 each, though twelve in all.
        flags = ["--runs", "log:uniform", "--windows", "1", "--limit", "4", "--tenants", "3"]
        proc = self.audit(*flags, env={"FAKE_ADMITS": "2"})
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        for r in self.loads().values():
            self.assertEqual(r["tenants"], ["tenant-1", "tenant-2", "tenant-3"])
            self.assertNotIn("tenant", r)
        for n in (1, 2, 3):
            self.assertIn(f"== log/uniform on standalone, tenant-{n} of 3 tenants\n", proc.stdout)
        self.assertEqual(proc.stdout.count("largest rolling count 4 of limit 4"), 3)
        run_dir = os.path.join(self.tmp.name, "out", "standalone-log-uniform")
        self.assertEqual(
            sorted(os.listdir(run_dir)),
            ["alpha.err", "beta.err", "tenant-1", "tenant-2", "tenant-3"],
        )
        # Over the limit in every tenant: each check fails on its own.
        flags = ["--runs", "log:uniform", "--windows", "1", "--limit", "3", "--tenants", "2"]
        proc = self.audit(*flags, env={"FAKE_ADMITS": "2"})
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        self.assertEqual(
            proc.stdout.count("FAIL: OVER-ADMISSION: 4 permits in one rolling window, limit 3"), 2
        )
        # One tenant, as before: no tenants field, one check of the whole log.
        proc = self.audit("--runs", "log:uniform", "--windows", "1")
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertEqual({r["tenant"] for r in self.loads().values()}, {"tenant-1"})
        self.assertNotIn("tenants", self.loads()["alpha"])

    def test_a_line_of_no_tenant_of_the_run_fails_it(self):
        flags = ["--runs", "log:uniform", "--windows", "1", "--tenants", "2"]
        proc = self.audit(*flags, env={"FAKE_UNNAMED": "1"})
        self.assertEqual(proc.returncode, 1, proc.stdout + proc.stderr)
        self.assertIn("audit: 2 decision lines name no tenant of the run", proc.stderr)
        self.assertIn("audit FAILED: log/uniform on standalone", proc.stdout)
        self.assertEqual(
            self.audit("--runs", "log:uniform", "--windows", "1", "--tenants", "0").returncode, 2
        )

    def test_tenant_logs_are_split_and_errors_counted_over_all_tenants(self):
        out = os.path.join(self.tmp.name, "split")
        os.mkdir(out)

        def line(tenant, error=0):
            record = {"lang": "alpha", "tenant": tenant}
            record.update({"error": "unavailable"} if error else {"allowed": True})
            return json.dumps(record) + "\n"

        with open(os.path.join(out, "alpha.jsonl"), "w") as f:
            for tenant, error in [("tenant-1", 1), ("tenant-2", 1), ("tenant-2", 1)]:
                f.write(line(tenant, error))
            f.writelines([line("tenant-2"), line("tenant-9")])
        args = types.SimpleNamespace(tenants=2, drivers=["alpha", "beta"], max_errors=2)
        dirs, errors, stray = run.tenant_logs(args, out)
        self.assertEqual(
            dirs,
            [
                ("tenant-1", os.path.join(out, "tenant-1")),
                ("tenant-2", os.path.join(out, "tenant-2")),
            ],
        )
        self.assertEqual(stray, 1)
        self.assertEqual(errors, {"alpha": 3})
        with open(os.path.join(out, "tenant-2", "alpha.jsonl")) as f:
            self.assertEqual(len(f.readlines()), 3)
        with open(os.path.join(out, "unattributed.jsonl")) as f:
            self.assertIn("tenant-9", f.read())
        self.assertFalse(os.path.exists(os.path.join(out, "alpha.jsonl")))
        # At most 2 a tenant, 3 in all: over a bound of 2.
        self.assertFalse(run.errors_within_bound(args, "log", errors))
        self.assertTrue(run.errors_within_bound(args, "log", {"alpha": 2, "beta": 0}))

    def test_multi_on_clocks_a_window_apart_is_refused(self):
        proc = self.audit("--runs", "multi:uniform", "--skew-ms", "400")
        self.assertEqual(proc.returncode, 2)
        self.assertIn(
            "multi runs on skewed clocks need --skew-ms below --window-ms (400)", proc.stderr
        )
        self.assertEqual(
            self.audit("--runs", "log:uniform", "--skew-ms", "400", "--windows", "1").returncode, 0
        )

    def test_a_driver_that_does_not_start_fails_the_run(self):
        with open(os.path.join(self.dir, "gamma"), "w") as f:
            f.write("#!/bin/sh\necho 'drivers/gamma: run make driver-gamma' >&2\nexit 2\n")
        os.chmod(os.path.join(self.dir, "gamma"), 0o755)
        proc = self.audit("--runs", "log:uniform")
        self.assertEqual(proc.returncode, 1)
        self.assertIn("make driver-gamma", proc.stderr)
        self.assertIn("audit FAILED", proc.stdout)

    def test_bad_arguments_are_refused(self):
        for args in (
            ["--drivers", "nope"],
            ["--runs", "log:fast"],
            ["--targets", "moon"],
            ["--windows", "0"],
            ["--runs", "log+log:uniform"],
            ["--runs", "log+sliding:uniform"],
            ["--buckets", "0"],
            ["--skew-ms", "-1"],
            ["--skew-ms", "3600001"],
            ["--costs", "0"],
            ["--costs", "1,3"],
            ["--costs", "1,x"],
            ["--costs", ""],
        ):
            proc = self.audit(*args)
            self.assertEqual(proc.returncode, 2, args)

    def test_buckets_that_do_not_divide_the_window_are_refused(self):
        proc = self.audit("--runs", "bucketed:uniform", "--buckets", "7")
        self.assertEqual(proc.returncode, 2)
        self.assertIn(
            "--buckets 7 must be a positive divisor of --window-ms 400 (e.g. 50)", proc.stderr
        )


if __name__ == "__main__":
    unittest.main()
