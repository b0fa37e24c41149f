"""Tests of the one-version check on temp trees:
python3 -m unittest scripts/test_check_versions.py"""

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "check-versions.py")
sys.path.insert(0, os.path.dirname(HERE))
from harness.scripts import load_script  # noqa: E402

check_versions = load_script(SCRIPT, "check_versions")

# A tree shaped like the repository, every version 1.2.3: a file's text, or
# its JSON document.
TREE: dict[str, Any] = {
    "Cargo.toml": """
        [workspace]
        members = ["core", "rust"]
        [workspace.package]
        version = "1.2.3"
        [workspace.dependencies]
        slidelimit-core = { path = "core", version = "1.2.3" }
        serde = "1"
    """,
    "core/Cargo.toml": """
        [package]
        name = "slidelimit-core"
        version.workspace = true
    """,
    "rust/Cargo.toml": """
        [package]
        name = "slidelimit"
        version = "1.2.3"
    """,
    "python/pyproject.toml": """
        [project]
        name = "slidelimit"
        version = "1.2.3"
    """,
    "ruby/slidelimit.gemspec": """
        Gem::Specification.new do |spec|
          spec.name = "slidelimit"
          spec.version = Slidelimit::VERSION
        end
    """,
    "ruby/lib/slidelimit/version.rb": """
        module Slidelimit
          VERSION = "1.2.3"
        end
    """,
    "go/version.go": """
        package slidelimit

        // Version is the release of this module.
        const Version = "1.2.3"
    """,
    "CHANGELOG.md": """
        # Changelog
        ## [Unreleased]
        ## [1.2.3] - 2026-01-01
    """,
    "node/package.json": {
        "name": "slidelimit",
        "version": "1.2.3",
        "optionalDependencies": {"@slidelimit/linux-x64-gnu": "1.2.3", "other": "9.9.9"},
    },
    "node/npm/linux-x64-gnu/package.json": {
        "name": "@slidelimit/linux-x64-gnu",
        "version": "1.2.3",
    },
    # Not ours, and under node_modules: never read.
    "node/node_modules/@slidelimit/linux-x64-gnu/package.json": {
        "name": "@slidelimit/linux-x64-gnu",
        "version": "0.0.1",
    },
    "node/examples/package.json": {"name": "example", "version": "0.0.1"},
}


class CheckVersionsTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.root = self.dir.name
        for rel, content in TREE.items():
            self.write(rel, content)

    def tearDown(self):
        self.dir.cleanup()

    def write(self, rel, content):
        path = os.path.join(self.root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            if isinstance(content, dict):
                json.dump(content, f)
            else:
                f.write(textwrap.dedent(content))

    def problems(self):
        want, problems = check_versions.check(self.root)
        self.assertEqual(want, "1.2.3")
        return problems

    def assert_one_problem(self, *parts):
        problems = self.problems()
        self.assertEqual(len(problems), 1, problems)
        for part in parts:
            self.assertIn(part, problems[0])

    def test_consistent_tree_passes(self):
        self.assertEqual(self.problems(), [])

    def test_crate_with_other_version_fails(self):
        self.write("rust/Cargo.toml", '[package]\nname = "slidelimit"\nversion = "1.2.4"\n')
        self.assert_one_problem("rust/Cargo.toml", "'1.2.4'", "'1.2.3'")

    def test_core_dependency_pin_fails(self):
        cargo = textwrap.dedent(TREE["Cargo.toml"]).replace(
            'version = "1.2.3" }', 'version = "1.2.0" }'
        )
        self.write("Cargo.toml", cargo)
        self.assert_one_problem("[workspace.dependencies] slidelimit-core", "'1.2.0'")

    def test_npm_main_package_fails(self):
        self.write("node/package.json", {**TREE["node/package.json"], "version": "1.3.0"})
        self.assert_one_problem("node/package.json version", "'1.3.0'")

    def test_platform_package_found_by_glob_fails(self):
        self.write(
            "node/npm/linux-arm64-gnu/package.json",
            {"name": "@slidelimit/linux-arm64-gnu", "version": "1.2.2"},
        )
        self.assert_one_problem("node/npm/linux-arm64-gnu/package.json", "'1.2.2'")

    def test_pin_on_platform_package_fails(self):
        pkg = {
            **TREE["node/package.json"],
            "optionalDependencies": {"@slidelimit/linux-x64-gnu": "^1.2.0"},
        }
        self.write("node/package.json", pkg)
        self.assert_one_problem("optionalDependencies @slidelimit/linux-x64-gnu", "'^1.2.0'")

    def test_python_project_fails(self):
        self.write(
            "python/pyproject.toml", '[project]\nname = "slidelimit"\nversion = "1.2.3.post1"\n'
        )
        self.assert_one_problem("python/pyproject.toml", "'1.2.3.post1'")

    def test_dynamic_python_version_defers_to_cargo(self):
        self.write(
            "python/pyproject.toml", '[project]\nname = "slidelimit"\ndynamic = ["version"]\n'
        )
        self.assertEqual(self.problems(), [])

    def test_gem_fails(self):
        self.write(
            "ruby/lib/slidelimit/version.rb", 'module Slidelimit\n  VERSION = "1.2.1"\nend\n'
        )
        self.assert_one_problem("Slidelimit::VERSION", "'1.2.1'")

    def test_gemspec_literal_version_fails(self):
        self.write(
            "ruby/slidelimit.gemspec",
            'Gem::Specification.new do |spec|\n  spec.version = "2.0.0"\nend\n',
        )
        self.assert_one_problem("ruby/slidelimit.gemspec", "'2.0.0'")

    def test_go_constant_fails(self):
        self.write("go/version.go", 'package slidelimit\n\nconst (\n\tVersion = "v1.2.3"\n)\n')
        self.assert_one_problem("go/version.go", "'v1.2.3'")

    def test_missing_go_constant_fails_clearly(self):
        os.remove(os.path.join(self.root, "go/version.go"))
        self.assert_one_problem("go/version.go: missing", "const Version")

    def test_changelog_without_entry_fails(self):
        self.write("CHANGELOG.md", "# Changelog\n## [Unreleased]\n## [1.2.2] - 2025-01-01\n")
        self.assert_one_problem("CHANGELOG.md", "[1.2.3]")

    def test_command_exits_1_and_names_the_file(self):
        self.write(
            "node/npm/wasm32-wasi/package.json",
            {"name": "@slidelimit/wasm32-wasi", "version": "1.0.0"},
        )
        bad = subprocess.run(
            [sys.executable, SCRIPT, self.root], check=False, capture_output=True, text=True
        )
        self.assertEqual(bad.returncode, 1)
        self.assertIn("node/npm/wasm32-wasi/package.json", bad.stderr)
        os.remove(os.path.join(self.root, "node/npm/wasm32-wasi/package.json"))
        good = subprocess.run(
            [sys.executable, SCRIPT, self.root], check=False, capture_output=True, text=True
        )
        self.assertEqual(good.returncode, 0, good.stderr)
        self.assertIn("1.2.3 everywhere", good.stdout)


if __name__ == "__main__":
    unittest.main()
