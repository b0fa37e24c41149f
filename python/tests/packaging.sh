#!/usr/bin/env bash
# The packaging test: python/tests/packaging.sh DIST_DIR (under scripts/with-redis.sh).
# Installs the built abi3 wheel into a fresh venv outside the repository and
# checks it against Redis from there; then builds a wheel from the sdist
# (what pip does on a platform without a wheel) and checks that one too.
set -euo pipefail
dist="$(cd "${1:?usage: $0 DIST_DIR}" && pwd)"
repo="$(cd "$(dirname "$0")/../.." && pwd)"
: "${SLIDELIMIT_TEST_REDIS_URL:?run under scripts/with-redis.sh}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
wheel=$(ls "$dist"/slidelimit-*.whl)
sdist=$(ls "$dist"/slidelimit-*.tar.gz)

check() { # VENV: the installed package, from outside the repository
  (cd "$work" && "$1/bin/python" -I - "$repo" <<'PY'
import os, sys
import slidelimit, redis
from slidelimit import Algorithm, Limiter, Policy
repo = sys.argv[1]
here = os.path.dirname(slidelimit.__file__)
assert not here.startswith(repo + os.sep), f"imported from the repository: {here}"
for name in ("py.typed", "_core.pyi"):
    assert os.path.exists(os.path.join(here, name)), f"{name} is not installed"
url = os.environ["SLIDELIMIT_TEST_REDIS_URL"]
policy = Policy("rl", "packaging", Algorithm.SLIDING_LOG, limit=1, window_ms=60_000)
limiter = Limiter.from_url(url, policy)
first, second = limiter.acquire("t"), limiter.acquire("t")
assert first.allowed and not second.allowed and second.retry_after_ms > 0, (first, second)
assert redis.Redis.from_url(url).pttl(limiter.key("t")) > 0
limiter.reset("t")
try:
    limiter.acquire("t", cost=True)
except slidelimit.InvalidArgument as e:
    assert e.field == "cost"
else:
    raise AssertionError("cost=True was accepted")
# asyncio too: its client takes other options than the synchronous one.
import asyncio
from slidelimit import AsyncLimiter

async def on_asyncio() -> None:
    limiter = AsyncLimiter.from_url(url, policy)
    first, second = await limiter.acquire("t"), await limiter.acquire("t")
    assert first.allowed and not second.allowed, (first, second)
    await limiter.reset("t")
    await limiter.aclose()

asyncio.run(on_asyncio())
print(f"packaging: slidelimit {slidelimit.__version__} with redis-py {redis.__version__} from {here}: ok")
PY
  )
}

python3 -m venv "$work/venv"
"$work/venv/bin/pip" install --quiet "$wheel"
check "$work/venv"

# The oldest redis-py the package declares (pyproject.toml's redis>=N): the
# options the limiter gives its clients must suit it too.
oldest=$(sed -n 's/.*"redis>=\([0-9.]*\)".*/\1/p' "$repo/python/pyproject.toml")
[[ -n "$oldest" ]] || { echo "packaging: no redis>= floor in pyproject.toml" >&2; exit 1; }
python3 -m venv "$work/venv-oldest"
"$work/venv-oldest/bin/pip" install --quiet "$wheel" "redis==$oldest"
check "$work/venv-oldest"

# From the sdist: pip builds it with maturin in an isolated environment. The
# Rust build is cached in .tmp/ so that a rerun of the same sdist only links.
# Only of the same one: maturin gives every file in an sdist one fixed mtime,
# so cargo would take a changed source for the one it built before.
python3 -m venv "$work/venv-sdist"
sdist_target="$repo/.tmp/python/sdist-target"
sdist_sum=$(sha256sum "$sdist" | cut -d' ' -f1)
if [[ "$(cat "$sdist_target/.sdist-sha256" 2>/dev/null)" != "$sdist_sum" ]]; then
  rm -rf "$sdist_target"
  mkdir -p "$sdist_target"
  echo "$sdist_sum" > "$sdist_target/.sdist-sha256"
fi
CARGO_TARGET_DIR="$sdist_target" \
  "$work/venv-sdist/bin/pip" install --quiet "$sdist"
check "$work/venv-sdist"
