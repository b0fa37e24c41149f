"""Self-tests of the fault harness: its checks must be able to fail.

Broken drivers (faults/fake_driver.py) must FAIL the scenarios meant to
catch their fault, and the same wrapper without a fault must pass them (so
the FAIL comes from the fault). The wrapped driver is FAULTS_SELFTEST_DRIVER
(default rust; `make faults` builds it).

    python3 -m unittest -v faults/test_harness.py
"""

import io
import os
import sys
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from faults.lib import launcher  # noqa: E402
from faults.scenarios import SCENARIOS  # noqa: E402
from harness.scripts import load_script  # noqa: E402

FAKE = os.path.join(ROOT, "faults", "fake_driver.py")
BASE = os.environ.get("FAULTS_SELFTEST_DRIVER", "rust")


RUNNER = load_script(os.path.join(ROOT, "faults", "run"), "faults_run")


def grid(name, argv, scenarios):
    """{scenario: passed} for the fake driver `argv` named `name`."""
    err = io.StringIO()
    results = RUNNER.run(
        [name], scenarios, launchers={name: launcher(name, argv)}, out=io.StringIO(), err=err
    )
    return {s: results[s, name] for s in scenarios}, err.getvalue()


def wrapped(mutation):
    return [sys.executable, FAKE, "wrap", BASE, mutation]


class BrokenDriversFail(unittest.TestCase):
    def assertFails(self, mutation, scenarios):
        passed, log = grid(f"{BASE}+{mutation}", wrapped(mutation), scenarios)
        self.assertEqual(
            [s for s, ok in passed.items() if ok], [], f"{mutation} went unnoticed:\n{log}"
        )

    def test_a_driver_that_allows_everything_fails_every_scenario(self):
        passed, log = grid("fake-allowed", [sys.executable, FAKE, "allowed"], list(SCENARIOS))
        self.assertEqual([s for s, ok in passed.items() if ok], [], log)

    def test_an_unregistered_driver_fails_instead_of_skipping(self):
        passed, log = grid("no-such-driver", None, ["script_flush", "bad_input"])
        self.assertEqual(passed, {"script_flush": False, "bad_input": False}, log)
        self.assertIn("no driver 'no-such-driver'", log)

    def test_a_registered_driver_that_is_not_built_fails_naming_its_target(self):
        # What a launcher does when its program is missing (docs/driver.md).
        argv = ["bash", "-c", "echo 'drivers/unbuilt: run make driver-unbuilt' >&2; exit 2"]
        passed, log = grid("unbuilt", argv, ["script_flush", "tls"])
        self.assertEqual(passed, {"script_flush": False, "tls": False}, log)
        self.assertIn("run make driver-unbuilt", log)

    def test_the_wrapper_without_a_fault_passes(self):
        scenarios = [
            "script_flush",
            "restart_between_calls",
            "unreachable",
            "hanging",
            "wrong_type",
            "acl",
            "bad_input",
            "deny_cache",
            "deny_cache_slow_reply",
            "malformed_reply",
            "tryagain",
        ]
        passed, log = grid(f"{BASE}+none", wrapped("none"), scenarios)
        self.assertEqual([s for s, ok in passed.items() if not ok], [], log)

    def test_decisions_that_always_allow(self):
        self.assertFails("always-allowed", ["script_flush", "acl", "tls"])

    def test_a_count_twice(self):
        self.assertFails("double-count", ["script_flush", "restart_between_calls", "acl"])

    def test_unavailable_reported_as_a_denial(self):
        self.assertFails(
            "unavailable-as-denial", ["restart_between_calls", "unreachable", "hanging"]
        )

    def test_a_limiter_without_its_deny_cache(self):
        self.assertFails("cache-off", ["deny_cache", "deny_cache_slow_reply"])

    def test_a_deny_cache_counting_from_the_reply(self):
        self.assertFails("deny-from-reply", ["deny_cache_slow_reply"])

    def test_a_malformed_reply_read_as_a_denial(self):
        self.assertFails("malformed-as-denial", ["malformed_reply"])

    def test_unavailable_after_the_timeout(self):
        self.assertFails("late-unavailable", ["unreachable", "hanging"])

    def test_invalid_argument_naming_another_field(self):
        self.assertFails("wrong-field", ["bad_input"])

    def test_a_driver_that_crashes_on_its_way_out(self):
        self.assertFails("exit-1", ["script_flush", "bad_input"])

    def test_errors_mapped_to_another_code(self):
        self.assertFails(
            "errors-as-script-error", ["wrong_type", "acl", "unreachable", "bad_input", "tryagain"]
        )


if __name__ == "__main__":
    unittest.main()
