#!/usr/bin/env bash
# make test-dist: scripts/check-dist.sh DIST VERSION
# dist/SHA256SUMS matches every file, lists every file in dist/ and nothing
# else, and each package's file name carries the one version.
set -euo pipefail
dist="${1:?usage: $0 DIST VERSION}"
version="${2:?usage: $0 DIST VERSION}"
cd "$dist"
[[ -s SHA256SUMS ]] || { echo "$dist/SHA256SUMS is missing: run make dist" >&2; exit 1; }
sha256sum --check --strict --quiet SHA256SUMS
listed="$(sed 's/^[0-9a-f]\{64\}  //' SHA256SUMS | LC_ALL=C sort)"
present="$(find . -type f ! -name SHA256SUMS -printf '%P\n' | LC_ALL=C sort)"
if [[ "$listed" != "$present" ]]; then
  echo "SHA256SUMS does not list exactly the files in $dist:" >&2
  diff <(echo "$listed") <(echo "$present") >&2 || true
  exit 1
fi
# One artifact of this version per kind; a stale one of another version fails.
expect() { # GLOB WHAT
  local found=() f
  for f in $1; do [[ -e "$f" ]] && found+=("$f"); done
  [[ ${#found[@]} -ge 1 ]] || { echo "no $2 ($1) in $dist" >&2; exit 1; }
}
expect "python/slidelimit-$version-*-abi3-*.whl" "abi3 wheel"
expect "python/slidelimit-$version.tar.gz" "sdist"
expect "ruby/slidelimit-$version-*.gem" "platform gem"
expect "crates/slidelimit-core-$version.crate" "core crate"
for f in c/slidelimit.h c/libslidelimit_ffi.a c/libslidelimit_ffi.so c/slidelimit.pc c/slidelimit-static.pc; do
  [[ -s "$f" ]] || { echo "$dist/$f is missing" >&2; exit 1; }
done
# npm pins its platform and wasm packages when it packs (node/scripts/pack-npm.js),
# so the packed manifests are checked here, not by check-versions.py.
expect "npm/slidelimit-$version.tgz" "main npm tarball"
for tgz in npm/*.tgz; do
  tar -xOzf "$tgz" package/package.json | python3 -c '
import json, sys
tgz, want = sys.argv[1], sys.argv[2]
pkg = json.load(sys.stdin)
pins = {n: v for key in ("dependencies", "optionalDependencies") for n, v in pkg.get(key, {}).items()
        if n == "slidelimit" or n.startswith("@slidelimit/")}
bad = {n: v for n, v in {pkg["name"]: pkg["version"], **pins}.items() if v != want}
sys.exit(f"{tgz}: versions {bad}, want {want}" if bad else 0)
' "$tgz" "$version"
done
stale="$(find python ruby crates npm -type f ! -name "*$version*" 2>/dev/null || true)"
[[ -z "$stale" ]] || { echo "artifacts without version $version in their name: $stale" >&2; exit 1; }
echo "test-dist: $(wc -l <SHA256SUMS) files verified against SHA256SUMS, version $version"
