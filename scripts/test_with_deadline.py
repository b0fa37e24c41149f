"""Tests of the hang guard the test targets run under:
python3 -m unittest scripts/test_with_deadline.py"""

import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "with-deadline.sh")


# KILL 2 s after the deadline's signal, not 30: the tests stay short.
ENV = dict(os.environ, DEADLINE_KILL_AFTER_S="2")


def guard(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SCRIPT, *args], capture_output=True, text=True, timeout=120, env=ENV)


def with_child(pid_file: str) -> list[str]:
    """A command that starts a child (its pid in pid_file) and waits for it."""
    return ["sh", "-c", f"sleep 60 & echo $! > {pid_file}; wait"]


class WithDeadlineTest(unittest.TestCase):
    def test_a_command_within_its_deadline_keeps_its_status_and_output(self) -> None:
        passed = guard("30", "TERM", "sh", "-c", "echo out; exit 0")
        self.assertEqual((passed.returncode, passed.stdout, passed.stderr), (0, "out\n", ""))
        failed = guard("30", "TERM", "sh", "-c", "exit 3")
        self.assertEqual((failed.returncode, failed.stderr), (3, ""))

    def test_a_hung_command_is_stopped_and_named(self) -> None:
        started = time.monotonic()
        hung = guard("1", "TERM", "sleep", "60")
        self.assertLess(time.monotonic() - started, 30)
        self.assertEqual(hung.returncode, 124)
        self.assertIn(
            "'sleep 60' ran past its deadline of 1 s and was stopped (SIGTERM)", hung.stderr
        )

    def test_the_signal_reaches_the_commands_children(self) -> None:
        # A suite's own child (a worker it started) must not outlive the stop.
        with tempfile.TemporaryDirectory() as tmp:
            pid_file = os.path.join(tmp, "child")
            hung = guard("1", "TERM", *with_child(pid_file))
            self.assertEqual(hung.returncode, 124)
            with open(pid_file) as f:
                child = int(f.read())
        _assert_gone(self, child)

    def test_an_interrupt_stops_the_command_and_its_children(self) -> None:
        # timeout runs them in a process group of their own, which a ^C at
        # the terminal does not reach: the script must pass it on.
        with tempfile.TemporaryDirectory() as tmp:
            pid_file = os.path.join(tmp, "child")
            wrapper = subprocess.Popen(
                [SCRIPT, "60", "TERM", *with_child(pid_file)],
                env=ENV,
                stderr=subprocess.PIPE,
                text=True,
                # As at a terminal: a shell started in the background (`make
                # test &`) inherits SIGINT ignored, and bash cannot trap it then.
                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
            )
            for _ in range(100):
                if os.path.exists(pid_file) and os.path.getsize(pid_file):
                    break
                time.sleep(0.05)
            with open(pid_file) as f:
                child = int(f.read())
            wrapper.send_signal(signal.SIGINT)
            _, stderr = wrapper.communicate(timeout=30)
        self.assertEqual(wrapper.returncode, 128 + signal.SIGTERM)
        self.assertNotIn("deadline", stderr)
        _assert_gone(self, child)

    def test_a_command_ignoring_the_signal_is_killed(self) -> None:
        started = time.monotonic()
        stubborn = guard(
            "1",
            "TERM",
            sys.executable,
            "-c",
            "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)",
        )
        self.assertEqual(stubborn.returncode, 137)
        self.assertLess(time.monotonic() - started, 30)
        self.assertIn("ran past its deadline of 1 s", stubborn.stderr)

    def test_a_command_killed_before_its_deadline_is_not_called_hung(self) -> None:
        # As when the OOM killer stops a suite: the same 137, no deadline passed.
        for command in ("kill -KILL $$", "exit 124"):
            with self.subTest(command=command):
                killed = guard("60", "TERM", "sh", "-c", command)
                self.assertEqual(killed.returncode, 137 if "KILL" in command else 124)
                self.assertNotIn("ran past", killed.stderr)

    def test_bad_usage_is_refused(self) -> None:
        for args in (
            (),
            ("10", "TERM"),
            ("0", "TERM", "true"),
            ("1.5", "TERM", "true"),
            ("ten", "TERM", "true"),
        ):
            with self.subTest(args=args):
                refused = guard(*args)
                self.assertEqual(refused.returncode, 2)
                self.assertIn("usage:", refused.stderr)


def _assert_gone(test: unittest.TestCase, pid: int) -> None:
    for _ in range(100):
        if not os.path.exists(f"/proc/{pid}") or _is_zombie(pid):
            return
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    test.fail(f"the command's child {pid} outlived the stop")


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


if __name__ == "__main__":
    unittest.main()
