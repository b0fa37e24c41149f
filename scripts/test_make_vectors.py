"""VECTORS reaches the harness as one argument, whatever the path holds:
python3 -m unittest scripts/test_make_vectors.py"""

import os
import shlex
import subprocess
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Spaces and a quote, as a user's checkout or download folder may have.
PATH = "/tmp/vector files/it's here.json"


def planned_command(target: str, program: str) -> list[str]:
    """The words of the recipe line that runs `program`, as the shell splits them
    (`make -n` prints recipes without running them)."""
    printed = subprocess.run(
        ["make", "--no-print-directory", "-n", "-C", ROOT, target, f"VECTORS={PATH}"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    for line in printed.replace("\\\n", " ").splitlines():
        if program in line:
            words = shlex.split(line)
            if program in words:
                return words
    raise AssertionError(f"make -n {target} runs no {program}:\n{printed}")


class VectorsPathTest(unittest.TestCase):
    def test_make_conformance_hands_the_path_over_whole(self) -> None:
        words = planned_command("conformance", "conformance/all")
        self.assertEqual(words[words.index("conformance/all") + 1], PATH)

    def test_make_conformance_cluster_hands_the_path_over_whole(self) -> None:
        words = planned_command("conformance-cluster", "conformance/all")
        self.assertEqual(words[words.index("conformance/all") + 1], PATH)

    def test_make_compat_hands_the_path_over_whole(self) -> None:
        words = planned_command("compat", "scripts/compat.sh")
        self.assertEqual(words[words.index("--vectors") + 1], PATH)


if __name__ == "__main__":
    unittest.main()
