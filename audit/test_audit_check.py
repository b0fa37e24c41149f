"""Tests of audit/check.py: python3 -m unittest audit/test_audit_check.py"""

import contextlib
import io
import json
import os
import sys
import tempfile
import unittest

# audit.check, not check: conformance/test_check.py's checker is `check`,
# and both suites may run in one process.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from audit import check


def line(lang, allowed, now, retry=None, reset=None):
    if retry is None:
        retry = 0 if allowed else 5
    d = {"lang": lang, "allowed": allowed, "now_ms": now, "retry_after_ms": retry}
    if reset is not None:
        d["reset_after_ms"] = reset
    return json.dumps(d)


def admitted(lang, now, recorded_at, window=100):
    """An admission on a caller clock reading `now`, recorded at
    `recorded_at` (reset_after_ms = recorded_at + W - now, docs/protocol.md)."""
    return line(lang, True, now, reset=recorded_at + window - now)


class RollingCount(unittest.TestCase):
    def test_windows_are_half_open(self):
        # (t - 100, t]: an entry exactly W older than t no longer counts.
        self.assertEqual(check.largest_rolling_count([0, 99, 100, 100, 199], 100), (3, 100))
        self.assertEqual(check.largest_rolling_count([0, 100, 200], 100), (1, 0))
        self.assertEqual(check.largest_rolling_count([5, 5, 5], 100), (3, 5))
        self.assertEqual(check.largest_rolling_count([], 100), (0, None))


class Check(unittest.TestCase):
    def run_check(self, lines, *flags):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "log.jsonl")
            with open(path, "w", encoding="utf-8") as f:
                f.write("\n".join(lines) + "\n")
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                status = check.main(["--limit", "2", "--window-ms", "100", *flags, path])
        summary = json.loads(out.getvalue().rsplit("summary ", 1)[1])
        return status, out.getvalue(), summary

    def test_a_full_window_across_languages_passes(self):
        status, out, summary = self.run_check(
            [
                line("rust", True, 0),
                line("go", True, 50),
                line("go", False, 60),
                line("rust", True, 100),
            ]
        )
        self.assertEqual(status, 0, out)
        self.assertEqual(summary["largest_rolling"], 2)
        self.assertEqual(
            summary["langs"]["go"],
            {
                "attempts": 2,
                "allowed": 1,
                "denied": 1,
                "errors": 0,
                "largest_rolling": 1,
            },
        )

    def test_an_over_admission_across_languages_fails(self):
        status, out, summary = self.run_check(
            [line("rust", True, 0), line("go", True, 50), line("node", True, 99)]
        )
        self.assertEqual(status, 1)
        self.assertIn("OVER-ADMISSION: 3 permits", out)
        self.assertEqual(summary["ratio"], 1.5)

    def test_report_only_reports_the_overshoot(self):
        status, out, summary = self.run_check(
            [line("rust", True, 0), line("go", True, 50), line("node", True, 99)], "--report-only"
        )
        self.assertEqual(status, 0, out)
        self.assertEqual(summary["largest_rolling"], 3)

    def test_errors_and_bad_hints_fail(self):
        status, out, _ = self.run_check(
            [
                line("rust", True, 0),
                line("rust", True, 10),
                line("go", False, 20),
                line("go", True, 200, retry=7),
                json.dumps({"lang": "node", "error": "unavailable"}),
            ],
            "--report-only",
        )
        self.assertEqual(status, 1)
        self.assertIn("node: 1 call(s) failed (1 unavailable)", out)
        self.assertIn("go: 1 decision(s) with an inconsistent retry_after_ms", out)

    def test_a_language_without_a_permit_fails_when_there_were_enough(self):
        # 150 admissions for three languages (50 each), two per window of
        # 100 ms, all rust's and go's; node only denied.
        lines = [line("rust" if i % 2 else "go", True, 50 * i) for i in range(150)]
        lines += [line("node", False, 50 * i + 1) for i in range(150)]
        status, out, _ = self.run_check(lines)
        self.assertEqual(status, 1, out)
        self.assertIn("node: no permit admitted: this language took no part in the run", out)
        # One admission fewer: too few to go round; node is a note.
        status, out, _ = self.run_check(lines[1:])
        self.assertEqual(status, 0, out)
        self.assertIn(
            "note: node: no permit admitted; reported, not failed: the run admitted 149 calls", out
        )
        # Calls, not permits: 100 admissions of cost 3 (300 permits, two per
        # window at limit 6) are still too few to go round three languages.
        lines = [line("rust" if i % 2 else "go", True, 50 * i) for i in range(100)]
        lines += [line("node", False, 50 * i + 1) for i in range(100)]
        costs = ["--cost", "rust=3", "--cost", "go=3", "--cost", "node=3"]
        status, out, summary = self.run_check(lines, "--limit", "6", *costs)
        self.assertEqual(status, 0, out)
        self.assertEqual(summary["largest_rolling"], 6)
        self.assertIn("the run admitted 100 calls for 3 languages", out)

    def test_starved_is_note_lists_the_language_instead_of_failing(self):
        lines = [line("rust" if i % 2 else "go", True, 50 * i) for i in range(150)]
        lines += [line("node", False, 50 * i + 1) for i in range(150)]
        status, out, summary = self.run_check(lines, "--starved-is-note")
        self.assertEqual(status, 0, out)
        self.assertEqual(summary["starved"], ["node"])
        self.assertIn("note: node: no permit admitted in this run; not failed here", out)
        # Without the flag it fails, and a run where everyone got some lists none.
        status, _, summary = self.run_check(lines)
        self.assertEqual((status, summary["starved"]), (1, []))
        status, _, summary = self.run_check(lines[:150], "--starved-is-note")
        self.assertEqual((status, summary["starved"]), (0, []))
        # Too few to go round stays a note of its own, not starved.
        status, _, summary = self.run_check(lines[1:], "--starved-is-note")
        self.assertEqual((status, summary["starved"]), (0, []))

    def test_with_mixed_costs_only_the_smallest_cost_must_get_a_permit(self):
        # 150 admissions of cost 1 (rust, go) and none of node's cost 3:
        # enough to go round, but the cost-1 callers take each permit first.
        lines = [line("rust" if i % 2 else "go", True, 50 * i) for i in range(150)]
        lines += [line("node", False, 50 * i + 1) for i in range(150)]
        costs = ["--cost", "rust=1", "--cost", "go=1", "--cost", "node=3"]
        status, out, _ = self.run_check(lines, *costs)
        self.assertEqual(status, 0, out)
        self.assertIn("note: node: no permit admitted; reported, not failed: its cost of 3", out)
        # A language of the smallest cost with none fails as ever.
        costs = ["--cost", "rust=3", "--cost", "go=3", "--cost", "node=1"]
        status, out, _ = self.run_check(lines, "--limit", "6", *costs)
        self.assertEqual(status, 1, out)
        self.assertIn("node: no permit admitted: this language took no part in the run", out)

    def test_errors_within_the_failover_bound_pass_and_beyond_it_fail(self):
        lines = [
            line("rust", True, 0),
            line("go", True, 50),
            json.dumps({"lang": "go", "error": "unavailable"}),
            json.dumps({"lang": "go", "error": "unavailable"}),
        ]
        status, out, summary = self.run_check(lines, "--max-errors", "2")
        self.assertEqual(status, 0, out)
        self.assertIn("errors surfaced per process: at most 2, bound 2", out)
        self.assertEqual(summary["langs"]["go"]["errors"], 2)
        status, out, _ = self.run_check(lines, "--max-errors", "1")
        self.assertEqual(status, 1)
        self.assertIn("go: 2 call(s) failed (2 unavailable), more than the bound of 1", out)

    def test_the_first_message_of_each_code_is_shown(self):
        lines = [
            line("go", True, 0),
            line("go", True, 50),
            json.dumps({"lang": "go", "error": "unavailable", "message": "TRYAGAIN first"}),
            json.dumps({"lang": "go", "error": "unavailable", "message": "TRYAGAIN second"}),
            json.dumps({"lang": "go", "error": "script_error"}),  # an older driver: no message
        ]
        status, out, _ = self.run_check(lines, "--max-errors", "3")
        self.assertEqual(status, 0, out)
        self.assertIn("tolerated errors, go: 2 unavailable, the first: 'TRYAGAIN first'", out)
        self.assertIn("tolerated errors, go: 1 script_error\n", out)
        self.assertNotIn("second", out)
        status, out, _ = self.run_check(lines, "--max-errors", "2")
        self.assertEqual(status, 1)
        self.assertIn(
            "go: 3 call(s) failed (2 unavailable, the first: 'TRYAGAIN first', 1 script_error), "
            "more than the bound of 2",
            out,
        )

    def test_recorded_times_pass_a_skewed_but_valid_log(self):
        # Limit 2 per 100 ms. go's clock lags 50 ms, so its now_ms put three
        # admissions in one (t - 100, t] (70, 90, 120); but go's call at now
        # 70 was evaluated and recorded at t = max(70, newest 100) = 100, and
        # the recorded times 0, 100, 100, 200, 210 hold at most 2 per window.
        lines = [
            admitted("rust", 0, 0),
            admitted("rust", 90, 100),  # bucketed: recorded at its bucket's last ms
            admitted("go", 70, 100),
            line("go", False, 80, reset=30),
            admitted("rust", 200, 200),
            admitted("go", 120, 210),
        ]
        status, out, summary = self.run_check(lines, "--recorded")
        self.assertEqual(status, 0, out)
        self.assertEqual((summary["basis"], summary["largest_rolling"]), ("recorded", 2))
        self.assertEqual(summary["largest_rolling_now_ms"], 3)
        self.assertIn(
            "for information, by the callers' now_ms (skewed clocks): largest rolling count 3", out
        )
        # By now_ms, without --recorded, the same log is an over-admission.
        status, out, _ = self.run_check(lines)
        self.assertEqual(status, 1)
        self.assertIn("OVER-ADMISSION: 3 permits in one rolling window, limit 2", out)

    def test_an_over_admission_in_recorded_times_fails(self):
        # now_ms spread out by the callers' clocks (0, 60, 150: at most 2 per
        # window), but recorded at 0, 60 and 99: three in [0, 100).
        lines = [admitted("rust", 0, 0), admitted("go", 60, 60), admitted("node", 150, 99)]
        status, out, summary = self.run_check(lines, "--recorded")
        self.assertEqual(status, 1)
        self.assertIn(
            "OVER-ADMISSION: 3 permits in one rolling window of recorded times, limit 2", out
        )
        self.assertEqual((summary["largest_rolling"], summary["largest_rolling_now_ms"]), (3, 2))
        self.assertEqual(self.run_check(lines)[0], 0, "by now_ms alone it would pass")

    def test_recorded_times_need_a_consistent_reset_after_ms(self):
        # An admission recorded before its own now (reset_after_ms < W) is
        # impossible under the time rule; one without reset_after_ms cannot
        # be placed at all.
        status, out, _ = self.run_check(
            [admitted("rust", 0, 0), admitted("go", 50, 50), line("go", True, 150, reset=99)],
            "--recorded",
        )
        self.assertEqual(status, 1)
        self.assertIn(
            "go: 1 decision(s) with an inconsistent retry_after_ms or reset_after_ms", out
        )
        with self.assertRaises(SystemExit) as e:
            self.run_check([admitted("rust", 0, 0), line("go", True, 50)], "--recorded")
        self.assertIn("not an audit line", str(e.exception))

    def test_a_policy_of_several_limits_is_placed_by_its_longest_windows_reset(self):
        # The decisions carry the reset of a 400 ms log; the limit checked is
        # 2 per 100 ms. Recorded at 0, 100, 100, 210; by now_ms three fall in
        # (20, 120].
        lines = [
            admitted("rust", 0, 0, window=400),
            admitted("go", 70, 100, window=400),
            admitted("rust", 90, 100, window=400),
            admitted("go", 120, 210, window=400),
        ]
        status, out, summary = self.run_check(lines, "--recorded", "--reset-window-ms", "400")
        self.assertEqual(status, 0, out)
        self.assertEqual((summary["largest_rolling"], summary["largest_rolling_now_ms"]), (2, 3))
        self.assertIn("(window ending at recorded time 100)", out)
        status, out, _ = self.run_check(
            [*lines, admitted("node", 150, 99, window=400)],
            "--recorded",
            "--reset-window-ms",
            "400",
        )
        self.assertEqual(status, 1)
        self.assertIn(
            "OVER-ADMISSION: 3 permits in one rolling window of recorded times, limit 2", out
        )
        # A reset under 400 ms would put its admission before its own now.
        status, out, _ = self.run_check(
            [*lines, line("node", True, 300, reset=399)], "--recorded", "--reset-window-ms", "400"
        )
        self.assertEqual(status, 1)
        self.assertIn(
            "node: 1 decision(s) with an inconsistent retry_after_ms or reset_after_ms", out
        )
        for flags in (["--reset-window-ms", "400"], ["--recorded", "--reset-window-ms", "0"]):
            with self.assertRaises(SystemExit) as e, contextlib.redirect_stderr(io.StringIO()):
                self.run_check(lines, *flags)
            self.assertEqual(e.exception.code, 2, flags)

    def test_a_run_that_never_fills_a_window_proves_nothing(self):
        status, out, _ = self.run_check([line("rust", True, 0), line("go", True, 500)])
        self.assertEqual(status, 1)
        self.assertIn("no rolling window ever filled", out)

    def test_a_run_that_admits_nothing_proves_nothing(self):
        # A binding that denies every call (with a consistent hint) is no
        # evidence either.
        status, out, _ = self.run_check([line("rust", False, 0), line("go", False, 10)])
        self.assertEqual(status, 1, out)
        self.assertIn("no rolling window ever filled (0 < 2)", out)

    def test_mixed_costs_count_permits_not_calls(self):
        # Limit 2: rust's admission took 2 permits at 0, go's 1 at 50. Three
        # permits in one window, though only two calls were admitted.
        lines = [line("rust", True, 0), line("go", True, 50)]
        self.assertEqual(self.run_check(lines)[0], 0, "counted as calls it would pass")
        status, out, summary = self.run_check(lines, "--cost", "rust=2", "--cost", "go=1")
        self.assertEqual(status, 1, out)
        self.assertIn("OVER-ADMISSION: 3 permits in one rolling window, limit 2", out)
        self.assertEqual(summary["costs"], {"rust": 2, "go": 1})
        self.assertEqual(summary["langs"]["rust"]["allowed"], 1, "allowed counts calls")
        self.assertEqual(summary["langs"]["rust"]["largest_rolling"], 2, "rolling counts permits")
        # Apart by a window, they pass.
        status, out, summary = self.run_check(
            [line("rust", True, 0), line("go", True, 100)], "--cost", "rust=2", "--cost", "go=1"
        )
        self.assertEqual(status, 0, out)
        self.assertEqual(summary["largest_rolling"], 2)

    def test_mixed_costs_count_recorded_times_per_permit(self):
        # Recorded at 0 (cost 2) and 99 (cost 1): three in [0, 100).
        lines = [admitted("rust", 0, 0), admitted("go", 150, 99)]
        status, out, _ = self.run_check(lines, "--recorded", "--cost", "rust=2", "--cost", "go=1")
        self.assertEqual(status, 1, out)
        self.assertIn(
            "OVER-ADMISSION: 3 permits in one rolling window of recorded times, limit 2", out
        )

    def test_a_window_is_filled_when_the_smallest_cost_no_longer_fits(self):
        # Limit 5, costs 2 and 3: a window of 4 permits has no room for a 2.
        lines = [line("rust", True, 0), line("rust", True, 10), line("go", True, 200)]
        status, out, _ = self.run_check(lines, "--limit", "5", "--cost", "rust=2", "--cost", "go=3")
        self.assertEqual(status, 0, out)
        # With a cost of 1 among them, 4 of 5 left room: never filled.
        status, out, _ = self.run_check(lines, "--limit", "5", "--cost", "rust=2", "--cost", "go=1")
        self.assertEqual(status, 1, out)
        self.assertIn("no rolling window ever filled (4 < 5)", out)
        status, out, _ = self.run_check(
            [line("rust", True, 0), line("go", True, 200)],
            "--limit",
            "5",
            "--cost",
            "rust=2",
            "--cost",
            "go=3",
        )
        self.assertEqual(status, 1, out)
        self.assertIn("no rolling window ever filled (3 < 5, room for a cost of 2)", out)

    def test_costs_must_name_every_admitting_language_once(self):
        with self.assertRaises(SystemExit) as e:
            self.run_check([line("rust", True, 0), line("go", True, 50)], "--cost", "rust=1")
        self.assertIn("no --cost for language go", str(e.exception))
        for flags in (
            ["--cost", "rust"],
            ["--cost", "rust=0"],
            ["--cost", "=2"],
            ["--cost", "rust=1", "--cost", "rust=2"],
            ["--cost", "rust=1.5"],
        ):
            with self.assertRaises(SystemExit) as e, contextlib.redirect_stderr(io.StringIO()):
                self.run_check([line("rust", True, 0)], *flags)
            self.assertEqual(e.exception.code, 2, flags)


if __name__ == "__main__":
    unittest.main()
