"""make test's disk check stops a build from scratch that would not fit, and
only reports on a rerun: python3 -m unittest scripts/test_disk_room.py"""

import os
import subprocess
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "disk-room.sh")
# More than any disk this runs on holds.
TOO_MUCH_MB = str(1 << 40)


def disk_room(cwd: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SCRIPT, *args], cwd=cwd, capture_output=True, text=True, timeout=30)


class DiskRoom(unittest.TestCase):
    def setUp(self) -> None:
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.dir = tmp.name

    def test_a_build_from_scratch_that_does_not_fit_stops_and_says_why(self) -> None:
        run = disk_room(self.dir, TOO_MUCH_MB)
        self.assertEqual(run.returncode, 1, run.stdout + run.stderr)
        self.assertRegex(run.stdout, r"^disk: \d+ MB free on the disk holding ")
        self.assertIn(f"writes about {TOO_MUCH_MB} MB", run.stderr)
        self.assertIn("TEST_DISK_NEED_MB=0", run.stderr)

    def test_a_tree_with_only_the_demo_built_is_still_from_scratch(self) -> None:
        os.makedirs(os.path.join(self.dir, "target", "release"))
        self.assertEqual(disk_room(self.dir, TOO_MUCH_MB).returncode, 1)

    def test_one_that_fits_goes_on(self) -> None:
        run = disk_room(self.dir, "0")
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertIn("MB free", run.stdout)

    def test_a_rerun_over_a_built_tree_only_reports(self) -> None:
        os.makedirs(os.path.join(self.dir, "target", "debug"))
        run = disk_room(self.dir, TOO_MUCH_MB)
        self.assertEqual(run.returncode, 0, run.stderr)
        self.assertIn("MB free", run.stdout)

    def test_a_need_that_is_not_a_number_is_refused(self) -> None:
        for bad in ([], ["2GB"], ["-1"], ["1", "2"]):
            run = disk_room(self.dir, *bad)
            self.assertEqual(run.returncode, 2, bad)
            self.assertIn("usage:", run.stderr)


if __name__ == "__main__":
    unittest.main()
