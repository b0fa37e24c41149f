#!/usr/bin/env python3
"""One version everywhere: scripts/check-versions.py [ROOT]

The workspace version in Cargo.toml ([workspace.package] version) is the
source of truth. Every other place a release number is written must equal it:
each workspace crate, core's version in [workspace.dependencies], the npm
package and its @slidelimit/* platform packages (and the main package's pins
on them), the Python project, the gem and the Go constant `Version`
(go/version.go), and CHANGELOG.md must have an entry for it. Exits 1 with one
line per mismatch. Reads files only (no cargo, no network): it runs in
`make test`.
"""

import glob
import json
import os
import re
import sys

import tomllib

# The Go module's release number; the Go tag is "v" + this.
GO_VERSION_FILE = "go/version.go"
GEMSPEC = "ruby/slidelimit.gemspec"
GEM_VERSION_FILE = "ruby/lib/slidelimit/version.rb"


class Mismatch(Exception):
    pass


def read(root, rel):
    path = os.path.join(root, rel)
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        raise Mismatch(f"{rel}: missing") from None


def load_toml(root, rel):
    return tomllib.loads(read(root, rel))


def crate_versions(root, workspace):
    """(place, version) of every workspace member, and core's dependency pin."""
    out = []
    for member in workspace["workspace"]["members"]:
        rel = f"{member}/Cargo.toml"
        package = load_toml(root, rel)["package"]
        version = package.get("version")
        if isinstance(version, dict) and version.get("workspace") is True:
            continue  # inherits the workspace version
        out.append((f"{rel} [package] version", version))
    for name, dep in workspace["workspace"].get("dependencies", {}).items():
        # A path dependency on one of our crates carries the version cargo
        # package writes into the published manifest.
        if name.startswith("slidelimit") and isinstance(dep, dict) and "version" in dep:
            out.append((f"Cargo.toml [workspace.dependencies] {name}", dep["version"].lstrip("=")))
    return out


def npm_versions(root):
    """The main package, each @slidelimit/* package under node/ (any depth, not
    node_modules), and the main package's pins on them."""
    out = []
    main = json.loads(read(root, "node/package.json"))
    out.append(("node/package.json version", main.get("version")))
    for section in ("optionalDependencies", "dependencies"):
        for name, spec in main.get(section, {}).items():
            if name.startswith("@slidelimit/"):
                out.append((f"node/package.json {section} {name}", spec))
    found = glob.glob(os.path.join(root, "node", "**", "package.json"), recursive=True)
    for path in sorted(found):
        rel = os.path.relpath(path, root)
        if "node_modules" in rel.split(os.sep) or rel == os.path.join("node", "package.json"):
            continue
        with open(path, encoding="utf-8") as f:
            pkg = json.load(f)
        if str(pkg.get("name", "")).startswith("@slidelimit/"):
            out.append((f"{rel} ({pkg['name']}) version", pkg.get("version")))
    return out


def python_version(root):
    project = load_toml(root, "python/pyproject.toml")["project"]
    if "version" in project:
        return [("python/pyproject.toml [project] version", project["version"])]
    if "version" in project.get("dynamic", []):
        # maturin then takes python/Cargo.toml's version, a workspace member
        # checked above.
        return []
    raise Mismatch("python/pyproject.toml: [project] has neither version nor dynamic version")


def gem_version(root):
    spec = read(root, GEMSPEC)
    m = re.search(r"^\s*spec\.version\s*=\s*(.+?)\s*$", spec, re.MULTILINE)
    if not m:
        raise Mismatch(f"{GEMSPEC}: no spec.version line")
    value = m.group(1)
    literal = re.fullmatch(r'["\']([^"\']+)["\'](?:\.freeze)?', value)
    if literal:
        return [(f"{GEMSPEC} spec.version", literal.group(1))]
    if value != "Slidelimit::VERSION":
        raise Mismatch(
            f"{GEMSPEC}: spec.version = {value} is neither a string nor Slidelimit::VERSION"
        )
    m = re.search(
        r'^\s*VERSION\s*=\s*["\']([^"\']+)["\']', read(root, GEM_VERSION_FILE), re.MULTILINE
    )
    if not m:
        raise Mismatch(f'{GEM_VERSION_FILE}: no VERSION = "..." line')
    return [(f"{GEM_VERSION_FILE} Slidelimit::VERSION (the gemspec's version)", m.group(1))]


def go_version(root):
    try:
        text = read(root, GO_VERSION_FILE)
    except Mismatch:
        raise Mismatch(
            f"{GO_VERSION_FILE}: missing; the Go module must declare "
            f'`const Version = "<workspace version>"` there'
        ) from None
    # `const Version = "..."` or `Version = "..."` inside a const block.
    m = re.search(r'^\s*(?:const\s+)?Version\s*(?:string\s*)?=\s*"([^"]*)"', text, re.MULTILINE)
    if not m:
        raise Mismatch(f'{GO_VERSION_FILE}: no `const Version = "..."`')
    return [(f"{GO_VERSION_FILE} Version", m.group(1))]


def changelog(root, want):
    text = read(root, "CHANGELOG.md")
    # Keep a Changelog: "## [0.1.0] - 2026-12-01"
    if not re.search(rf"^## \[{re.escape(want)}\]", text, re.MULTILINE):
        raise Mismatch(f"CHANGELOG.md: no '## [{want}]' entry")


def check(root):
    """Returns (the workspace version, a list of problems)."""
    workspace = load_toml(root, "Cargo.toml")
    want = workspace["workspace"]["package"]["version"]
    problems = []
    places = []
    sources = [
        lambda: crate_versions(root, workspace),
        lambda: npm_versions(root),
        lambda: python_version(root),
        lambda: gem_version(root),
        lambda: go_version(root),
        lambda: changelog(root, want) or [],
    ]
    for source in sources:
        try:
            places += source()
        except Mismatch as e:
            problems.append(str(e))
    for place, version in places:
        if version != want:
            problems.append(
                f"{place} is {version!r}, want {want!r} (Cargo.toml [workspace.package])"
            )
    return want, problems


def main(argv):
    root = argv[1] if len(argv) > 1 else os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    want, problems = check(root)
    if problems:
        for p in problems:
            print(f"check-versions: {p}", file=sys.stderr)
        return 1
    print(f"check-versions: {want} everywhere")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
