"""The load op's tenants (docs/driver.md) in every registered driver, on its
memory store: python3 -m unittest audit/test_load.py (needs make drivers)."""

import json
import os
import sys
import tempfile
import time
import unittest
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
from harness import drivers  # noqa: E402

# Characters a tenant's JSON string must carry through: a quote, a brace
# (the key escapes it) and one outside ASCII.
TENANTS = ["a", 'b"{x}', "c-é"]
LIMIT = 5
CONCURRENCY = 4


class LoadTenants(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def driver(self, name):
        # Diagnostics inherited: a failing driver's reasons show in the test output.
        d = drivers.Driver.start(name)
        # The session ends as docs/driver.md says: exit answered, status 0.
        self.addCleanup(lambda: self.assertIsNone(d.close(), name))
        for request in (
            {"op": "store", "kind": "memory"},
            # A minute's window: each tenant's budget is spent once in the run.
            {"op": "policy", "resource": "load", "limit": LIMIT, "window_ms": 60_000},
        ):
            self.assertEqual(d.request(request), {"ok": True}, f"{name} {request['op']}")
        return d

    def load(self, d, name, **fields):
        out = os.path.join(self.tmp.name, f"{name}.jsonl")
        start = time.time_ns() // 1_000_000 + 200
        request = dict(
            op="load",
            lang=name,
            concurrency=CONCURRENCY,
            start_at_ms=start,
            end_at_ms=start + 400,
            jitter_ms=5,
            out=out,
            **fields,
        )
        # request_raw: a protocol error is a reply here, not a DriverError.
        reply = json.loads(d.request_raw(request, timeout_s=60))
        if "error" in reply:
            return reply, []
        with open(out, encoding="utf-8") as f:
            return reply, [json.loads(line) for line in f]

    def test_callers_go_round_the_tenants_each_on_its_own_budget(self):
        for name in drivers.registered():
            with self.subTest(driver=name):
                d = self.driver(name)
                reply, lines = self.load(d, name, tenants=TENANTS)
                self.assertEqual(reply["calls"], len(lines))
                self.assertEqual(reply["errors"], 0)
                self.assertTrue(all(list(line)[:2] == ["lang", "tenant"] for line in lines))
                calls = Counter(line["tenant"] for line in lines)
                self.assertEqual(set(calls), set(TENANTS))
                # Every caller goes round: its counts per tenant differ by
                # at most one, so the totals by at most one per caller.
                self.assertLessEqual(max(calls.values()) - min(calls.values()), CONCURRENCY)
                # Each call was made for the tenant its line names: every
                # tenant's budget admitted exactly LIMIT, none more.
                admitted = Counter(line["tenant"] for line in lines if line["allowed"])
                self.assertEqual(admitted, Counter({t: LIMIT for t in TENANTS}))

    def test_one_tenant_lines_name_none(self):
        for name in drivers.registered():
            with self.subTest(driver=name):
                d = self.driver(name)
                _, lines = self.load(d, name, tenant="solo")
                self.assertGreater(len(lines), LIMIT)
                self.assertTrue(all("tenant" not in line for line in lines))
                self.assertEqual(sum(line["allowed"] for line in lines), LIMIT)

    def test_bad_tenants_are_protocol_errors(self):
        for name in drivers.registered():
            d = self.driver(name)
            bad: tuple[dict[str, object], ...] = (
                {"tenant": "a", "tenants": ["b"]},
                {"tenants": []},
                {"tenants": ["a", 1]},
                {"tenants": "a"},
                {"tenants": ["t"] * 1001},
                {},
            )
            for fields in bad:
                with self.subTest(driver=name, fields=fields):
                    reply, _ = self.load(d, name, **fields)
                    self.assertEqual(reply.get("error"), "protocol", reply)
                    self.assertIn("tenant", reply["message"])


if __name__ == "__main__":
    unittest.main()
