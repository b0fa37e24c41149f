"""Tests of the conformance checker: python3 -m unittest conformance/test_check.py"""

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest
from typing import Any
from unittest import mock

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check
from check import drivers

VECTORS: dict[str, Any] = {
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
                {
                    "now_ms": 1000,
                    "tenant": "t-1",
                    "cost": 4,
                    "expect": {"error": "invalid_argument"},
                },
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
        status, _ = self.verdict(
            [GOOD[0], GOOD[1].replace('"remaining":2', '"remaining":1'), GOOD[2]]
        )
        self.assertEqual(status, {"key/brace": "pass", "log/basic": "FAIL"})

    def test_true_is_not_one(self):
        status, _ = self.verdict([GOOD[0], GOOD[1].replace("true", "1"), GOOD[2]])
        self.assertEqual(status["log/basic"], "FAIL")

    def test_missing_and_extra_lines_fail(self):
        status, _ = self.verdict(GOOD[:2])
        self.assertEqual(status["log/basic"], "FAIL")
        status, _ = self.verdict([*GOOD, GOOD[2]])
        self.assertEqual(status["log/basic"], "FAIL")

    def test_error_instead_of_decision_fails(self):
        line = '{"vector":"log/basic","step":0,"error":"unavailable"}'
        status, _ = self.verdict([GOOD[0], line, GOOD[2]])
        self.assertEqual(status["log/basic"], "FAIL")

    def test_other_byte_form_is_a_diff(self):
        spaced = GOOD[0].replace(",", ", ")
        status, report = self.verdict([spaced, *GOOD[1:]])
        self.assertEqual(status, {"key/brace": "DIFF", "log/basic": "pass"})
        self.assertFalse(report.ok)

    def test_key_order_matters(self):
        swapped = '{"vector":"key/brace","slot":11133,"key":"rl:{geocode:a%7Db}:log:60000"}'
        status, _ = self.verdict([swapped, *GOOD[1:]])
        self.assertEqual(status["key/brace"], "FAIL")

    def test_order_and_garbage_fail_everything(self):
        _, report = self.verdict([GOOD[1], GOOD[2], GOOD[0]])
        self.assertEqual(report.status("key/brace"), "FAIL")
        _, report = self.verdict([*GOOD, "not json"])
        self.assertFalse(report.ok)
        _, report = self.verdict([*GOOD, '{"vector":"nope","step":0}'])
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


# A driver of docs/driver.md in a few lines, for the harness's own tests: a
# trivial model (every call allowed while cost <= limit), with misbehaviours
# chosen by FAKE_MODE. It logs every request it reads to FAKE_REQUESTS.
FAKE_DRIVER = textwrap.dedent(
    """\
    #!/usr/bin/env python3
    import json, os, sys
    mode = os.environ.get("FAKE_MODE", "good")
    limit = window = None
    log = open(os.environ["FAKE_REQUESTS"], "a")
    def say(text):
        sys.stdout.write(text + "\\n")
        sys.stdout.flush()
    for line in sys.stdin:
        r = json.loads(line)
        log.write(line)
        log.flush()
        op = r["op"]
        if op == "exit":
            if mode == "exit-silent":
                sys.exit(0)
            say('{"ok":true}')
            if mode == "exit-1":
                sys.exit(1)
            break
        if op == "policy":
            limit, window = r["limit"], r["window_ms"]
            if limit < 1:
                limit = None
                say('{"error":"invalid_argument","field":"limit","message":"limit: must be at least 1"}')
                continue
            say('{"ok":true}')
        elif op in ("reset", "key", "acquire_at", "peek") and limit is None:
            say('{"error":"invalid_argument","field":"limit","message":"limit: must be at least 1"}')
        elif op == "reset" and mode in ("reset-invalid", "reset-down"):
            code = "invalid_argument" if mode == "reset-invalid" else "unavailable"
            say('{"error":"%s","field":null,"message":"no"}' % code)
        elif op == "key":
            t = r["tenant"].replace("}", "%7D")
            say(json.dumps({"ok": True, "key": "rl:{geocode:" + t + "}:log:60000", "slot": 11133},
                           separators=(",", ":")))
        elif op in ("acquire_at", "peek"):
            if mode == "die" and r.get("cost", 1) > 1:
                sys.exit(3)
            if mode == "protocol" and r.get("cost", 1) > 1:
                say('{"error":"protocol","message":"acquire_at: cost must be a number"}')
            elif r.get("cost", 1) > limit:
                say('{"error":"invalid_argument","field":"cost","message":"cost: above the limit"}')
            else:
                rest = limit - r.get("cost", 1)
                if mode == "spaced":
                    say('{"allowed": true, "remaining": %d, "retry_after_ms": 0, '
                        '"reset_after_ms": %d, "now_ms": %d}' % (rest, window, r["now_ms"]))
                elif mode == "reordered":
                    say('{"remaining":%d,"allowed":true,"retry_after_ms":0,'
                        '"reset_after_ms":%d,"now_ms":%d}' % (rest, window, r["now_ms"]))
                else:
                    say('{"allowed":true,"remaining":%d,"retry_after_ms":0,'
                        '"reset_after_ms":%d,"now_ms":%d}' % (rest, window, r["now_ms"]))
        else:
            say('{"ok":true}')
    """
)

HERE = os.path.dirname(os.path.abspath(__file__))


class DriverHarnessTest(unittest.TestCase):
    """conformance/check.py's run_column and conformance/all against fake drivers."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = os.path.join(self.tmp.name, "drivers")
        os.mkdir(self.dir)
        for name in ("fake", "rust"):
            path = os.path.join(self.dir, name)
            with open(path, "w") as f:
                f.write(FAKE_DRIVER)
            os.chmod(path, 0o755)
        self.requests = os.path.join(self.tmp.name, "requests.jsonl")
        self.path = os.path.join(self.tmp.name, "vectors.json")
        self.write(VECTORS)
        env = {
            "SLIDELIMIT_DRIVERS_DIR": self.dir,
            "FAKE_REQUESTS": self.requests,
            "FAKE_MODE": "good",
            "SLIDELIMIT_TEST_REDIS_URL": "redis://127.0.0.1:1/",
        }
        patcher = mock.patch.dict(os.environ, env)
        patcher.start()
        self.addCleanup(patcher.stop)
        os.environ.pop("SLIDELIMIT_CONFORMANCE_CLUSTER", None)

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, doc):
        with open(self.path, "w") as f:
            json.dump(doc, f)

    def run_column(self, column, mode="good"):
        os.environ["FAKE_MODE"] = mode
        run = check.run_column(column, self.path, check.load(self.path), capture_stderr=True)
        return {n: run.report.status(n) for n in run.report.order}, run

    def sent(self):
        with open(self.requests) as f:
            return [json.loads(line) for line in f]

    def test_a_right_driver_passes_with_its_bytes_in_the_log(self):
        status, run = self.run_column("fake:memory")
        self.assertEqual(status, {"key/brace": "pass", "log/basic": "pass"}, run.report.messages())
        self.assertEqual(run.log, "".join(line + "\n" for line in GOOD))

    def test_the_requests_follow_the_vectors(self):
        self.run_column("fake")
        sent = self.sent()
        self.assertEqual(
            [r["op"] for r in sent],
            [
                "store",
                "policy",
                "key",
                "store",
                "policy",
                "reset",
                "acquire_at",
                "acquire_at",
                "exit",
            ],
        )
        self.assertEqual(sent[0], {"op": "store", "kind": "memory"})
        self.assertEqual(
            sent[1],
            {
                "op": "policy",
                "limit": 1,
                "namespace": "rl",
                "resource": "geocode",
                "algorithm": "sliding_log",
                "window_ms": 60000,
            },
        )
        self.assertEqual(
            sent[3],
            {
                "op": "store",
                "kind": "redis",
                "url": "redis://127.0.0.1:1/",
                "timeout_ms": check.TIMEOUT_MS,
            },
        )
        self.assertEqual(sent[4]["limit"], 3)
        self.assertEqual(sent[5], {"op": "reset", "tenant": "t-1"})
        self.assertEqual(sent[7], {"op": "acquire_at", "tenant": "t-1", "now_ms": 1000, "cost": 4})

    def test_buckets_and_peek_steps_reach_the_driver(self):
        doc = json.loads(json.dumps(VECTORS))
        doc["vectors"][0]["input"].update(algorithm="bucketed_window", buckets=600)
        doc["vectors"][1]["policy"].update(algorithm="bucketed_window", buckets=10)
        doc["vectors"][1]["steps"][0]["peek"] = True
        # A bucketed key vector without buckets leaves the default to the binding.
        no_buckets = json.loads(json.dumps(doc["vectors"][0]))
        no_buckets["name"] = "key/default"
        del no_buckets["input"]["buckets"]
        doc["vectors"].append(no_buckets)
        self.write(doc)
        status, run = self.run_column("fake:memory")
        self.assertEqual(status["log/basic"], "pass", run.report.messages())
        policies = [r for r in self.sent() if r["op"] == "policy"]
        self.assertEqual(policies[0]["buckets"], 600)
        self.assertEqual(policies[0]["algorithm"], "bucketed_window")
        self.assertEqual(policies[1]["buckets"], 10)
        self.assertNotIn("buckets", policies[2])
        steps = [r for r in self.sent() if r["op"] in ("acquire_at", "peek")]
        self.assertEqual(steps[0], {"op": "peek", "tenant": "t-1", "now_ms": 1000, "cost": 1})
        self.assertEqual(steps[1]["op"], "acquire_at")

    def test_the_cluster_store_takes_the_seed_urls(self):
        os.environ["SLIDELIMIT_CONFORMANCE_CLUSTER"] = "1"
        os.environ["SLIDELIMIT_TEST_CLUSTER_URLS"] = (
            "redis://127.0.0.1:7000, redis://127.0.0.1:7001"
        )
        self.run_column("fake")
        stores = [r for r in self.sent() if r["op"] == "store"]
        self.assertEqual(stores[1]["kind"], "cluster")
        self.assertEqual(stores[1]["urls"], ["redis://127.0.0.1:7000", "redis://127.0.0.1:7001"])

    def test_spaced_decision_bytes_are_a_diff(self):
        status, run = self.run_column("fake:memory", "spaced")
        self.assertEqual(status, {"key/brace": "pass", "log/basic": "DIFF"})
        self.assertIn('"step":0,"allowed": true, "remaining": 2', run.log)
        self.assertTrue(any("canonical form" in m for m in run.report.messages()))

    def test_decision_keys_in_another_order_fail(self):
        status, _ = self.run_column("fake:memory", "reordered")
        self.assertEqual(status["log/basic"], "FAIL")

    def test_a_dead_driver_fails_the_file(self):
        status, run = self.run_column("fake:memory", "die")
        self.assertEqual(status["log/basic"], "FAIL")
        self.assertTrue(any("driver fake failed" in m for m in run.report.messages()))

    def test_a_driver_that_ends_badly_fails_the_file(self):
        # docs/driver.md: exit is answered with {"ok":true}, then exit status 0.
        for mode, words in (("exit-1", "exit status 1"), ("exit-silent", "did not answer exit")):
            status, run = self.run_column("fake:memory", mode)
            self.assertEqual(set(status.values()), {"FAIL"}, mode)
            self.assertTrue(any(words in m for m in run.report.messages()), run.report.messages())

    def test_a_protocol_reply_fails_its_vector_and_the_file_goes_on(self):
        doc = json.loads(json.dumps(VECTORS))
        after = json.loads(json.dumps(doc["vectors"][1]))
        after["name"] = "log/after"
        after["steps"] = after["steps"][:1]
        doc["vectors"].append(after)
        self.write(doc)
        status, run = self.run_column("fake:memory", "protocol")
        self.assertEqual(status, {"key/brace": "pass", "log/basic": "FAIL", "log/after": "pass"})
        failures = run.report.failures["log/basic"]
        self.assertTrue(any("fake refused" in m and "cost must be a number" in m for m in failures))
        self.assertEqual(run.report.general, [])

    def test_fields_a_vector_leaves_out_are_left_out_of_the_requests(self):
        doc = json.loads(json.dumps(VECTORS))
        del doc["vectors"][0]["input"]["namespace"]
        del doc["vectors"][1]["steps"][0]["cost"]
        del doc["vectors"][1]["policy"]["algorithm"]
        self.write(doc)
        status, run = self.run_column("fake:memory")
        self.assertEqual(status["log/basic"], "pass", run.report.messages())
        policies = [r for r in self.sent() if r["op"] == "policy"]
        self.assertNotIn("namespace", policies[0])
        self.assertEqual(policies[0]["resource"], "geocode")
        self.assertNotIn("algorithm", policies[1])
        steps = [r for r in self.sent() if r["op"] == "acquire_at"]
        self.assertEqual(steps[0], {"op": "acquire_at", "tenant": "t-1", "now_ms": 1000})
        self.assertEqual(steps[1]["cost"], 4)

    def test_a_lone_surrogate_goes_escaped_and_a_step_without_tenant_resets_nothing(self):
        doc = json.loads(json.dumps(VECTORS))
        steps = doc["vectors"][1]["steps"]
        steps[1]["tenant"] = "t\ud800"  # cost 4: the fake refuses it on cost
        steps.append({**steps[1], "tenant": None})
        steps.append({k: v for k, v in steps[1].items() if k != "tenant"})
        self.write(doc)
        status, run = self.run_column("fake")
        self.assertEqual(status["log/basic"], "pass", run.report.messages())
        resets = [r["tenant"] for r in self.sent() if r["op"] == "reset"]
        self.assertEqual(resets, ["t-1", "t\ud800"])
        with open(self.requests, encoding="utf-8") as f:
            self.assertIn('"tenant":"t\\ud800"', f.read())
        self.assertEqual(drivers.wire_json({"t": "é\x7f"}), '{"t":"é\x7f"}')
        self.assertEqual(drivers.wire_json({"t": "é\udc80"}), '{"t":"\\u00e9\\udc80"}')

    def test_whole_numbers_written_as_floats_are_integers(self):
        doc = json.loads(json.dumps(VECTORS))
        vector = doc["vectors"][1]
        vector["policy"]["limit"] = 3.0
        vector["steps"][0] |= {"now_ms": 1000.0, "cost": 1.0}
        vector["steps"][0]["expect"] |= {"remaining": 2.0, "now_ms": 1e3}
        self.write(doc)
        status, run = self.run_column("fake")
        self.assertEqual(status["log/basic"], "pass", run.report.messages())
        self.assertIn('"step":0,"allowed":true,"remaining":2,', run.log)
        # The requests carry them as the vector wrote them.
        steps = [r for r in self.sent() if r["op"] == "acquire_at"]
        self.assertEqual(steps[0]["now_ms"], 1000.0)

    def test_a_number_past_the_doubles_range_goes_as_written(self):
        doc = json.loads(json.dumps(VECTORS))
        self.assertEqual(doc["vectors"][1]["steps"][1]["cost"], 4)  # refused on cost
        doc["vectors"][1]["steps"][1]["cost"] = 7.25
        with open(self.path, "w") as f:
            f.write(json.dumps(doc).replace("7.25", "1e400"))
        status, run = self.run_column("fake")
        self.assertEqual(status["log/basic"], "pass", run.report.messages())
        with open(self.requests, encoding="utf-8") as f:
            steps = [line for line in f if '"acquire_at"' in line]
        self.assertIn(',"cost":1e400}', steps[1])
        # Nested, negative, beside a lone surrogate, and a string that reads
        # "Infinity": only numbers change.
        value = json.loads(
            '{"l":[{"w":-2E999}],"t":"Infinity\\ud800","n":1.5}', parse_float=drivers.json_number
        )
        self.assertEqual(
            drivers.wire_json(value), '{"l":[{"w":-2E999}],"t":"Infinity\\ud800","n":1.5}'
        )
        self.assertEqual(drivers.wire_json({"x": float("-inf")}), '{"x":-1e400}')

    def test_a_refused_policy_is_logged_for_every_step_without_a_reset(self):
        doc = json.loads(json.dumps(VECTORS))
        doc["vectors"][1]["policy"]["limit"] = 0
        for step in doc["vectors"][1]["steps"]:
            step["expect"] = {"error": "invalid_argument"}
        self.write(doc)
        status, run = self.run_column("fake")
        self.assertEqual(status["log/basic"], "pass", run.report.messages())
        self.assertNotIn("reset", [r["op"] for r in self.sent()])
        self.assertIn('{"vector":"log/basic","step":1,"error":"invalid_argument"}', run.log)

    def test_a_reset_may_refuse_the_tenant_but_not_fail(self):
        status, run = self.run_column("fake", "reset-invalid")
        self.assertEqual(status["log/basic"], "pass", run.report.messages())
        status, run = self.run_column("fake", "reset-down")
        self.assertEqual(status, {"key/brace": "pass", "log/basic": "FAIL"})
        self.assertIn(
            "FAIL log/basic: reset of tenant 't-1' failed: unavailable", run.report.messages()
        )

    def test_columns_and_their_errors(self):
        self.assertEqual(check.columns(), ["fake", "fake:memory", "rust", "rust:memory", "memory"])
        self.assertEqual(check.parse_column("memory"), ("rust", {"op": "store", "kind": "memory"}))
        for bad in ("nope", "fake:disk", ":memory"):
            with self.assertRaises(check.ColumnError, msg=bad):
                check.parse_column(bad)
        del os.environ["SLIDELIMIT_TEST_REDIS_URL"]
        with self.assertRaises(check.ColumnError):
            check.parse_column("fake")

    def test_all_prints_the_table_and_fails_on_a_diff(self):
        def table(mode):
            return subprocess.run(
                [os.path.join(HERE, "all"), self.path, "fake:memory", "memory"],
                env=dict(os.environ, FAKE_MODE=mode),
                capture_output=True,
                text=True,
            )

        good = table("good")
        self.assertEqual(good.returncode, 0, good.stderr)
        self.assertRegex(good.stdout, r"log/basic\s+pass\s+pass")
        bad = table("spaced")
        self.assertEqual(bad.returncode, 1)
        self.assertRegex(bad.stdout, r"log/basic\s+DIFF\s+DIFF")
        self.assertIn("2 vector", bad.stdout)
        # A directory is every vector file under it, in subdirectories too.
        nested = os.path.join(self.tmp.name, "suite", "more")
        os.makedirs(nested)
        os.rename(self.path, os.path.join(nested, "vectors.json"))
        suite = subprocess.run(
            [os.path.join(HERE, "all"), os.path.dirname(nested), "fake:memory"],
            env=dict(os.environ, FAKE_MODE="good"),
            capture_output=True,
            text=True,
        )
        self.assertEqual(suite.returncode, 0, suite.stderr)
        self.assertIn("1 file(s)", suite.stdout)
        self.assertIn("2 passed, 0 failed", suite.stdout)
        unknown = subprocess.run(
            [os.path.join(HERE, "all"), self.path, "go"], capture_output=True, text=True
        )
        self.assertEqual(unknown.returncode, 2)
        self.assertIn("no driver 'go'", unknown.stderr)


if __name__ == "__main__":
    unittest.main()
