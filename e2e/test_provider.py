"""The fake provider over real HTTP on loopback (make test-e2e-tools)."""

import argparse
import contextlib
import io
import json
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request
from http.server import ThreadingHTTPServer
from pathlib import Path

# By path too (python3 -m unittest e2e/test_provider.py): the modules under test are
# this folder's, which is on sys.path only under `unittest discover -s e2e`.
sys.path.insert(0, str(Path(__file__).resolve().parent))
import provider


class ProviderTest(unittest.TestCase):
    def setUp(self) -> None:
        self.dir = tempfile.TemporaryDirectory()
        self.log = Path(self.dir.name) / "requests.jsonl"
        self.provider = provider.Provider(provider.Budget(3, 400), str(self.log))
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), provider.make_handler(self.provider))
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def tearDown(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.provider.close()
        self.dir.cleanup()

    def get(self, path: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        req = urllib.request.Request(self.url + path, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=5) as resp:
                return resp.status, resp.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def geocode(self, key: str, job: str = "") -> int:
        return self.get(
            "/geocode?address=x", {"X-Api-Key": key, "X-Job-Id": job, "X-System": "test"}
        )[0]

    def test_limit_per_key_then_429_until_the_window_passes(self) -> None:
        self.assertEqual([self.geocode("a") for _ in range(4)], [200, 200, 200, 429])
        self.assertEqual(self.geocode("b"), 200)  # another key, its own budget
        time.sleep(0.45)
        self.assertEqual(self.geocode("a"), 200)

    def test_a_refused_request_does_not_count(self) -> None:
        statuses = [self.geocode("a") for _ in range(10)]
        self.assertEqual(statuses.count(200), 3)
        time.sleep(0.45)
        self.assertEqual([self.geocode("a") for _ in range(4)], [200, 200, 200, 429])

    def test_a_key_has_a_429_series_from_its_first_request(self) -> None:
        self.geocode("new")
        text = self.get("/metrics")[1].decode()
        self.assertIn('geocoder_responses_total{status="200",key="new"} 1', text)
        self.assertIn('geocoder_responses_total{status="429",key="new"} 0', text)

    def test_log_and_metrics(self) -> None:
        for i in range(4):
            self.geocode("k", f"job-{i}")
        rows = [json.loads(line) for line in self.log.read_text().splitlines()]
        self.assertEqual([r["status"] for r in rows], [200, 200, 200, 429])
        self.assertEqual([r["job"] for r in rows], ["job-0", "job-1", "job-2", "job-3"])
        self.assertTrue(all(r["key"] == "k" and r["system"] == "test" for r in rows))
        self.assertEqual(sorted(r["ms"] for r in rows), [r["ms"] for r in rows])
        status, body = self.get("/metrics")
        self.assertEqual(status, 200)
        text = body.decode()
        self.assertIn('geocoder_responses_total{status="200",key="k"} 3', text)
        self.assertIn('geocoder_responses_total{status="429",key="k"} 1', text)

    def test_missing_key_and_unknown_path(self) -> None:
        status, body = self.get("/geocode?address=x")
        self.assertEqual(status, 400)
        self.assertIn("X-Api-Key", json.loads(body)["error"])
        self.assertEqual(self.get("/nope")[0], 404)


class TwoLimits(unittest.TestCase):
    def test_a_suffixed_key_must_fit_both_windows(self) -> None:
        # 4 per 1,000 ms, and keys ending in -multi also 2 per 100 ms
        # (times given, no clock: the budget alone).
        budget = provider.Budget(4, 1000, ("-multi", 2, 100))
        self.assertEqual(budget.limits("t-log"), [(4, 1000)])
        self.assertEqual(budget.limits("t-multi"), [(4, 1000), (2, 100)])
        multi = [budget.admit("t-multi", t) for t in (0, 10, 20, 100, 110, 150, 400, 500)]
        # 20: a third in (-80, 20]; 100 (0 has left the short window) and
        # 110 (10 has too) pass; 150: a third in (50, 150]; 400 and 500: the
        # long window holds 0, 10, 100 and 110 until 1,000.
        self.assertEqual(multi, [True, True, False, True, True, False, False, False])
        self.assertTrue(budget.admit("t-multi", 1000.5))
        # The same times on a key without the suffix: the long limit only.
        plain = [budget.admit("t-log", t) for t in (0, 10, 20, 100, 110)]
        self.assertEqual(plain, [True, True, True, True, False])

    def test_also_is_parsed_and_checked(self) -> None:
        with self.assertRaises(SystemExit) as e, contextlib.redirect_stderr(io.StringIO()):
            provider.main(["--log", "/dev/null", "--also=-multi:0:100"])
        self.assertEqual(e.exception.code, 2)
        self.assertEqual(provider.also_limit("-multi:150:10000"), ("-multi", 150, 10000.0))
        for bad in ("-multi:0:100", "-multi:5", ":5:100", "-multi:x:100", "-multi:5:-1"):
            with self.assertRaises(argparse.ArgumentTypeError, msg=bad):
                provider.also_limit(bad)


class Arguments(unittest.TestCase):
    def test_limit_must_be_positive(self) -> None:
        with self.assertRaises(SystemExit), open("/dev/null", "w") as devnull:
            import contextlib

            with contextlib.redirect_stderr(devnull):
                provider.main(["--limit", "0", "--log", "/dev/null"])


if __name__ == "__main__":
    unittest.main()
