"""Unit tests of the e2e run's checks and pictures (make test-e2e-tools)."""

import sys
import unittest
import xml.etree.ElementTree as ET
from pathlib import Path

# By path too (python3 -m unittest e2e/test_analysis.py): the modules under test are
# this folder's, which is on sys.path only under `unittest discover -s e2e`.
sys.path.insert(0, str(Path(__file__).resolve().parent))
import analysis


class MaxInWindow(unittest.TestCase):
    def test_window_is_half_open(self) -> None:
        # 0 has left the window (0, 1000] when 1000 arrives.
        self.assertEqual(analysis.max_in_window([0, 1000], 1000), (1, 0))
        self.assertEqual(analysis.max_in_window([0, 999.9], 1000), (2, 999.9))

    def test_finds_the_busiest_window_in_any_order(self) -> None:
        times = [5000, 0, 100, 200, 5100, 5150, 5200, 5999]
        self.assertEqual(analysis.max_in_window(times, 1000), (5, 5999))

    def test_no_events(self) -> None:
        self.assertEqual(analysis.max_in_window([], 1000), (0, 0.0))


class EarliestSchedule(unittest.TestCase):
    def test_a_burst_runs_limit_at_once_then_one_window_later(self) -> None:
        runs = analysis.earliest_schedule([0] * 5, 2, 1000)
        self.assertEqual(runs, [0, 0, 1000, 1000, 2000])

    def test_late_arrivals_run_at_arrival(self) -> None:
        runs = analysis.earliest_schedule([0, 0, 1500, 1600], 2, 1000)
        self.assertEqual(runs, [0, 0, 1500, 1600])

    def test_the_schedule_never_exceeds_the_limit(self) -> None:
        arrivals = [i * 37 % 3000 for i in range(200)]
        runs = analysis.earliest_schedule(arrivals, 7, 1000)
        self.assertLessEqual(analysis.max_in_window(runs, 1000)[0], 7)
        self.assertTrue(all(r >= a for r, a in zip(runs, sorted(arrivals))))

    def test_limit_must_be_positive(self) -> None:
        with self.assertRaisesRegex(ValueError, "limit"):
            analysis.earliest_schedule([0], 0, 1000)
        with self.assertRaisesRegex(ValueError, "limit"):
            analysis.earliest_schedule([0], 2, 1000, also=[(0, 100)])

    def test_several_limits_take_the_latest_of_their_times(self) -> None:
        # 4 per 1,000 ms and 2 per 100 ms: pairs 100 ms apart until the
        # long limit holds the fifth job back to 1,000.
        runs = analysis.earliest_schedule([0] * 6, 4, 1000, also=[(2, 100)])
        self.assertEqual(runs, [0, 0, 100, 100, 1000, 1000])
        arrivals = [i * 37 % 3000 for i in range(200)]
        runs = analysis.earliest_schedule(arrivals, 7, 1000, also=[(3, 200)])
        self.assertLessEqual(analysis.max_in_window(runs, 1000)[0], 7)
        self.assertLessEqual(analysis.max_in_window(runs, 200)[0], 3)
        # One job earlier anywhere would break a window: each run is forced.
        for i in range(3, len(runs)):
            forced = {runs[i - 7] + 1000 if i >= 7 else None, runs[i - 3] + 200}
            self.assertTrue(runs[i] == sorted(arrivals)[i] or runs[i] in forced, i)


class RollingCounts(unittest.TestCase):
    def test_counts(self) -> None:
        got = analysis.rolling_counts([0, 500, 1000, 1500], 1000, 0, 2000, 500)
        self.assertEqual(got, [(0, 1), (500, 2), (1000, 2), (1500, 2), (2000, 1)])

    def test_step_must_be_positive(self) -> None:
        with self.assertRaisesRegex(ValueError, "step_ms"):
            analysis.rolling_counts([], 1000, 0, 1, 0)


class DefaultBuckets(unittest.TestCase):
    def test_largest_divisor_up_to_cores_default(self) -> None:
        for window, buckets in ((60_000, 60), (6500, 52), (60_500, 55), (7, 7), (61, 1)):
            self.assertEqual(analysis.default_buckets(window), buckets, window)

    def test_window_must_be_positive(self) -> None:
        with self.assertRaises(ValueError):
            analysis.default_buckets(0)


class Svg(unittest.TestCase):
    def test_well_formed_with_a_panel_per_algorithm_counter_and_limit(self) -> None:
        series = {
            s: analysis.rolling_counts([100.0 * i for i in range(30)], 1000, 0, 4000, 100)
            for s in ("river", "celery")
        }
        counter = analysis.rolling_counts([50.0 * i for i in range(60)], 1000, 0, 4000, 100)
        panels = {"sliding log": series, "bucketed window": {"river": series["river"]}}
        svg = analysis.svg_tenant("t1 <&>", panels, counter, 10, 1000, panel_height=100)
        root = ET.fromstring(svg)
        ns = "{http://www.w3.org/2000/svg}"
        # An area per system and panel, the counter in both panels.
        self.assertEqual(len(root.findall(f"{ns}polygon")), 3)
        self.assertEqual(len(root.findall(f"{ns}polyline")), 2)
        texts = [t.text for t in root.iter(f"{ns}text")]
        for text in (
            "t1 <&>",
            "limit (10)",
            "sliding log",
            "bucketed window",
            "river",
            "celery",
            "sliding counter (all)",
        ):
            self.assertIn(text, texts)
        # The second panel lies below the first, inside the picture.
        frames = [r.attrib for r in root.findall(f"{ns}rect") if r.get("fill") == "none"]
        self.assertEqual([float(r["y"]) for r in frames], [30, 152])
        self.assertLess(152 + 100, float(root.attrib["height"]))

    def test_nothing_to_draw(self) -> None:
        with self.assertRaisesRegex(ValueError, "nothing"):
            analysis.svg_tenant("x", {}, None, 10, 0)
        with self.assertRaisesRegex(ValueError, "nothing"):
            analysis.svg_tenant("x", {"sliding log": {}}, None, 10, 0)


if __name__ == "__main__":
    unittest.main()
