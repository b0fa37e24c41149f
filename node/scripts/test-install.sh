#!/usr/bin/env bash
# make test-install-npm: installs the packed npm packages the way a user does,
# in a fresh project outside the repo with no Rust toolchain on PATH, and runs
# them: the native addon from the host's platform package, then, with that
# package removed, the @slidelimit/wasm fallback, which must decide the same.
# Host platform only (no cross build): packs main + host platform + wasm.
# Needs SLIDELIMIT_TEST_REDIS_URL (scripts/with-redis.sh) and `make node-build`.
set -euo pipefail
SECONDS=0
node_dir="$(cd "$(dirname "$0")/.." && pwd)"
: "${SLIDELIMIT_TEST_REDIS_URL:?run under scripts/with-redis.sh}"
unset SLIDELIMIT_IMPL # the loader chooses, as in a user's app
fail() { echo "test-install-npm: FAIL: $*" >&2; exit 1; }

tmp="$(mktemp -d "${TMPDIR:-/tmp}/slidelimit-npm-install.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
[[ "$tmp" != "$node_dir"/* ]] || fail "temp dir $tmp is inside the repo"

node "$node_dir/scripts/pack-npm.js" "$tmp/tgz" --platforms=host
host="$(node -p "require('$node_dir/lib/platform').platformTag()")"
version="$(node -p "require('$node_dir/package.json').version")"
ioredis="ioredis@$(node -p "require('$node_dir/package.json').devDependencies.ioredis")"

# No cargo, rustc or rustup from here on: the install must not build anything.
clean=()
IFS=: read -ra dirs <<<"$PATH"
for d in "${dirs[@]}"; do
  [[ -x "$d/cargo" || -x "$d/rustc" ]] || clean+=("$d")
done
PATH="$(IFS=:; echo "${clean[*]}")"
export PATH
if command -v cargo >/dev/null || command -v rustc >/dev/null; then fail "cargo or rustc still on PATH"; fi
command -v node >/dev/null && command -v npm >/dev/null || fail "node and npm must stay on PATH"

mkdir "$tmp/app"
cd "$tmp/app"
npm init -y >/dev/null
# The slidelimit packages come from the tarballs only; ioredis (a peer) from
# npm's cache, which `make node-deps` (npm ci) filled. --offline also keeps npm
# from asking the registry for the other platforms' optional packages.
npm_install=(npm install --no-audit --no-fund --loglevel=error
  "$tmp/tgz/slidelimit-$version.tgz" "$tmp/tgz/slidelimit-$host-$version.tgz" "$tmp/tgz/slidelimit-wasm-$version.tgz" "$ioredis")
if ! "${npm_install[@]}" --offline; then
  echo "test-install-npm: $ioredis is not in npm's cache; letting npm fetch it" >&2
  "${npm_install[@]}" --prefer-offline
fi
[[ -f "node_modules/@slidelimit/$host/slidelimit.$host.node" ]] || fail "@slidelimit/$host did not install its addon"
[[ ! -e node_modules/slidelimit/dist ]] || fail "the main package carries dist/"

# What an app sees (CommonJS): the implementation, three acquires on the
# memory engine (fixed clock) and three on Redis (limit 2: the third is denied).
cat >probe.cjs <<'EOF'
const s = require('slidelimit');
const Redis = require('ioredis');
(async () => {
  const mem = s.Limiter.memory({ resource: 'install', limit: 2, windowMs: 1000 });
  const memory = [];
  for (const nowMs of [5000, 5001, 5002]) memory.push(await mem.acquire('t', { nowMs }));
  const redis = new Redis(process.env.SLIDELIMIT_TEST_REDIS_URL);
  const l = new s.Limiter(redis, { resource: `install-${s.implementation}`, limit: 2, windowMs: 60000 });
  const onRedis = [];
  for (let i = 0; i < 3; i++) {
    const d = await l.acquire('t');
    onRedis.push({ allowed: d.allowed, remaining: d.remaining });
  }
  await redis.quit();
  let platformPackage = null;
  try {
    platformPackage = require.resolve(`@slidelimit/${process.argv[2]}`);
  } catch {}
  console.log(JSON.stringify({
    implementation: s.implementation,
    nativeLoadError: s.nativeLoadError && s.nativeLoadError.message,
    platformPackage,
    key: mem.key('a}b'),
    memory,
    onRedis,
  }));
})().catch((e) => { console.error(e); process.exit(1); });
EOF
# ES module named imports of the same package.
cat >probe.mjs <<'EOF'
import { Limiter, implementation, MemoryEngine } from 'slidelimit';
const d = await Limiter.memory({ resource: 'install', limit: 2, windowMs: 1000 }).acquire('t', { nowMs: 5000 });
console.log(JSON.stringify({ implementation, memoryEngine: typeof MemoryEngine, decision: d }));
EOF

node probe.cjs "$host" >native.json
node probe.mjs >native-esm.json
rm -rf "node_modules/@slidelimit/$host"
node probe.cjs "$host" >wasm.json
node probe.mjs >wasm-esm.json

node - "$host" <<'EOF'
const assert = require('node:assert/strict');
const fs = require('node:fs');
const host = process.argv[2];
const read = (f) => JSON.parse(fs.readFileSync(f, 'utf8'));
const [native, wasm, nativeEsm, wasmEsm] = ['native', 'wasm', 'native-esm', 'wasm-esm'].map((f) => read(`${f}.json`));

assert.equal(native.implementation, 'native');
assert.equal(native.nativeLoadError, null);
assert.match(native.platformPackage, new RegExp(`/app/node_modules/@slidelimit/${host}/`));
const first = { allowed: true, remaining: 1, retryAfterMs: 0, resetAfterMs: 1000, nowMs: 5000, deniedBy: null };
assert.deepEqual(native.memory[0], first);
assert.deepEqual(native.memory.map((d) => [d.allowed, d.remaining]), [[true, 1], [true, 0], [false, 0]]);
assert.deepEqual(native.onRedis, [{ allowed: true, remaining: 1 }, { allowed: true, remaining: 0 }, { allowed: false, remaining: 0 }]);
assert.equal(native.key, 'rl:{install:a%7Db}:log:1000');
assert.deepEqual(nativeEsm, { implementation: 'native', memoryEngine: 'function', decision: first });

assert.equal(wasm.implementation, 'wasm');
assert.equal(wasm.platformPackage, null);
assert.match(wasm.nativeLoadError, new RegExp(`@slidelimit/${host}: not installed`));
// Same decisions, keys and ESM view as the native addon.
for (const k of ['memory', 'onRedis', 'key']) assert.deepEqual(wasm[k], native[k], k);
assert.deepEqual(wasmEsm, { ...nativeEsm, implementation: 'wasm' });
EOF
echo "test-install-npm: passed in ${SECONDS} s (native @slidelimit/$host, then wasm)"
