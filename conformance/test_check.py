"""Tests of the conformance checker: python3 -m unittest conformance/test_check.py"""

import json
import os
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check  # noqa: E402

VECTORS = {
    "format": "slidelimit-vectors/1",
    "vectors": [
        {
            "name": "key/brace",
            "kind": "key",
            "comment": "c",
            "input": {
                "namespace": "rl",
                "resource": "geocode",
                "tenant": "a}b",
                "algorithm": "sliding_log",
                "window_ms": 60000,
            },
            "expect": {"key": "rl:{geocode:a%7Db}:log:60000", "slot": 11133},
        },
        {
            "name": "log/basic",
            "kind": "decision",
            "comment": "c",
            "policy": {
                "namespace": "rl",
                "resource": "geocode",
                "algorithm": "sliding_log",
                "limit": 3,
                "window_ms": 1000,
            },
            "steps": [
                {
                    "now_ms": 1000,
                    "tenant": "t-1",
                    "cost": 1,
                    "expect": {
                        "allowed": True,
                        "remaining": 2,
                        "retry_after_ms": 0,
                        "reset_after_ms": 1000,
                        "now_ms": 1000,
                    },
                },
                {"now_ms": 1000, "tenant": "t-1", "cost": 4, "expect": {"error": "invalid_argument"}},
            ],
        },
    ],
}

GOOD = [
    '{"vector":"key/brace","key":"rl:{geocode:a%7Db}:log:60000","slot":11133}',
    '{"vector":"log/basic","step":0,"allowed":true,"remaining":2,"retry_after_ms":0,'
    '"reset_after_ms":1000,"now_ms":1000}',
    '{"vector":"log/basic","step":1,"error":"invalid_argument"}',
]


class CheckTest(unittest.TestCase):
    def setUp(self):
        fd, self.path = tempfile.mkstemp(suffix=".json")
        with os.fdopen(fd, "w") as f:
            json.dump(VECTORS, f)
        self.expected = check.load(self.path)

    def tearDown(self):
        os.unlink(self.path)

    def verdict(self, lines):
        report = check.check(self.expected, "".join(line + "\n" for line in lines))
        return {name: report.status(name) for name in report.order}, report

    def test_canonical_lines_pass(self):
        self.assertEqual([e.line for e in self.expected], GOOD)
        status, report = self.verdict(GOOD)
        self.assertTrue(report.ok)
        self.assertEqual(status, {"key/brace": "pass", "log/basic": "pass"})

    def test_wrong_value_fails(self):
        status, _ = self.verdict([GOOD[0], GOOD[1].replace('"remaining":2', '"remaining":1'), GOOD[2]])
        self.assertEqual(status, {"key/brace": "pass", "log/basic": "FAIL"})

    def test_true_is_not_one(self):
        status, _ = self.verdict([GOOD[0], GOOD[1].replace("true", "1"), GOOD[2]])
        self.assertEqual(status["log/basic"], "FAIL")

    def test_missing_and_extra_lines_fail(self):
        status, _ = self.verdict(GOOD[:2])
        self.assertEqual(status["log/basic"], "FAIL")
        status, _ = self.verdict(GOOD + [GOOD[2]])
        self.assertEqual(status["log/basic"], "FAIL")

    def test_error_instead_of_decision_fails(self):
        line = '{"vector":"log/basic","step":0,"error":"unavailable"}'
        status, _ = self.verdict([GOOD[0], line, GOOD[2]])
        self.assertEqual(status["log/basic"], "FAIL")

    def test_other_byte_form_is_a_diff(self):
        spaced = GOOD[0].replace(",", ", ")
        status, report = self.verdict([spaced] + GOOD[1:])
        self.assertEqual(status, {"key/brace": "DIFF", "log/basic": "pass"})
        self.assertFalse(report.ok)

    def test_key_order_matters(self):
        swapped = '{"vector":"key/brace","slot":11133,"key":"rl:{geocode:a%7Db}:log:60000"}'
        status, _ = self.verdict([swapped] + GOOD[1:])
        self.assertEqual(status["key/brace"], "FAIL")

    def test_order_and_garbage_fail_everything(self):
        _, report = self.verdict([GOOD[1], GOOD[2], GOOD[0]])
        self.assertEqual(report.status("key/brace"), "FAIL")
        _, report = self.verdict(GOOD + ["not json"])
        self.assertFalse(report.ok)
        _, report = self.verdict(GOOD + ['{"vector":"nope","step":0}'])
        self.assertFalse(report.ok)

    def test_bad_files_are_rejected(self):
        for doc in (
            {"format": "other", "vectors": VECTORS["vectors"]},
            {"format": "slidelimit-vectors/1", "vectors": []},
            {"format": "slidelimit-vectors/1", "vectors": VECTORS["vectors"] * 2},
        ):
            with open(self.path, "w") as f:
                json.dump(doc, f)
            with self.assertRaises(check.VectorFileError):
                check.load(self.path)


if __name__ == "__main__":
    unittest.main()
