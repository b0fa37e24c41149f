#!/usr/bin/env bash
# make test-install-python (under scripts/with-redis.sh and scripts/without-rust.sh):
# scripts/install/python.sh DIST_PYTHON VERSION
# pip installs the abi3 wheel from dist/python into a fresh venv (redis-py
# comes from the index), then one check on the memory engine and one on Redis.
set -euo pipefail
dist="$(cd "${1:?usage: $0 DIST_PYTHON VERSION}" && pwd)"
version="${2:?usage: $0 DIST_PYTHON VERSION}"
: "${SLIDELIMIT_TEST_REDIS_URL:?run under scripts/with-redis.sh}"
! command -v cargo >/dev/null || { echo "cargo is on PATH" >&2; exit 1; }
cd "${INSTALL_WORK:?run under scripts/without-rust.sh}"
wheels=("$dist"/slidelimit-"$version"-*-abi3-*.whl)
[[ ${#wheels[@]} == 1 && -f "${wheels[0]}" ]] || { echo "want one abi3 wheel of $version in $dist, found: ${wheels[*]}" >&2; exit 1; }
python3 -m venv venv
# --only-binary: pip must take the wheel, never build anything.
venv/bin/pip install --quiet --disable-pip-version-check --only-binary :all: "${wheels[0]}"
venv/bin/python -I - "$version" "$(basename "${wheels[0]}")" <<'PY'
import os, sys
import slidelimit
from slidelimit import Algorithm, Limiter, Policy

version = sys.argv[1]
assert slidelimit.__version__ == version, (slidelimit.__version__, version)
assert os.path.dirname(slidelimit.__file__).startswith(os.environ["INSTALL_WORK"]), slidelimit.__file__

policy = Policy("rl", "install", Algorithm.SLIDING_LOG, limit=1, window_ms=60_000)
memory = Limiter.memory(policy)
got = [memory.acquire("t").allowed for _ in range(2)]
assert got == [True, False], got

limiter = Limiter.from_url(os.environ["SLIDELIMIT_TEST_REDIS_URL"], policy)
tenant = f"t-{os.getpid()}"
first, second = limiter.acquire(tenant), limiter.acquire(tenant)
assert first.allowed and not second.allowed and second.retry_after_ms > 0, (first, second)
limiter.reset(tenant)
print(f"test-install-python: slidelimit {version} from {sys.argv[2]}: "
      f"memory {got}, redis [{first.allowed}, {second.allowed}] retry_after_ms={second.retry_after_ms}")
PY
