'use strict';
// Picks the implementation of slidelimit-core, napi-rs style: the platform
// package (@slidelimit/linux-x64-gnu, ...) that npm installed as an optional
// dependency, else the @slidelimit/wasm package. In a checkout the files
// `make node-build` puts in node/dist/ come after each (they are not packed).
// SLIDELIMIT_IMPL=native|wasm forces one (and fails loudly if it cannot load).

const fs = require('node:fs');
const path = require('node:path');
const { addonFile, platformPackage, platformTag } = require('./platform');

const pkgRoot = path.join(__dirname, '..');
const dist = path.join(pkgRoot, 'dist');
const { version } = require('../package.json');
// A checkout, not an installed package: native/ (the addon's Rust) is never packed.
const inRepo = fs.existsSync(path.join(pkgRoot, 'native', 'Cargo.toml'));

// A platform package of another release may export another API: refused
// rather than half-working (npm installs the exact version; a stale
// node_modules or a hand-copied package may not be).
function requirePackage(name) {
  let found;
  try {
    found = require(`${name}/package.json`).version;
  } catch (e) {
    if (e.code === 'MODULE_NOT_FOUND') throw new Error(`not installed (Cannot find module '${name}')`);
    throw e;
  }
  if (found !== version) {
    throw new Error(`${name} is version ${found}, slidelimit is ${version}: install the same version of both`);
  }
  return require(name);
}

function requireLocal(file) {
  if (!fs.existsSync(file)) throw new Error(`not built (Cannot find module '${file}'): make node-build`);
  return require(file);
}

const candidates = { native: [], wasm: [] };
candidates.native.push({ from: platformPackage(), load: () => requirePackage(platformPackage()) });
candidates.wasm.push({ from: '@slidelimit/wasm', load: () => requirePackage('@slidelimit/wasm') });
if (inRepo) {
  for (const [kind, file] of [
    ['native', path.join(dist, addonFile())],
    ['wasm', path.join(dist, 'wasm', 'slidelimit_wasm.js')],
  ]) {
    candidates[kind].push({ from: path.relative(process.cwd(), file) || file, load: () => requireLocal(file) });
  }
}

// The first candidate of `kind` that loads, or an Error naming each one tried
// and why it failed (`attempts` keeps the original errors).
function loadKind(kind) {
  const attempts = [];
  for (const c of candidates[kind]) {
    try {
      return { core: c.load(), from: c.from };
    } catch (error) {
      attempts.push({ from: c.from, error });
    }
  }
  const tried = attempts.map((a) => `  ${a.from}: ${a.error.message.split('\n')[0]}`).join('\n');
  const err = new Error(`no ${kind} build of slidelimit loaded; tried:\n${tried}`);
  err.attempts = attempts;
  return { error: err };
}

function must(kind) {
  const r = loadKind(kind);
  if (r.error) throw r.error;
  return r;
}

function load() {
  const forced = process.env.SLIDELIMIT_IMPL;
  if (forced === 'native' || forced === 'wasm') return { ...must(forced), implementation: forced, nativeError: null };
  if (forced !== undefined && forced !== '' && forced !== 'auto') {
    throw new Error(`SLIDELIMIT_IMPL must be native, wasm or auto, got ${JSON.stringify(forced)}`);
  }
  const native = loadKind('native');
  if (!native.error) return { ...native, implementation: 'native', nativeError: null };
  const wasm = loadKind('wasm');
  if (!wasm.error) return { ...wasm, implementation: 'wasm', nativeError: native.error };
  throw new Error(
    `slidelimit could not load for ${platformTag()}: ` +
      `neither the native addon nor the wasm build.\n${native.error.message}\n${wasm.error.message}\n` +
      'Reinstall slidelimit with npm (it depends on @slidelimit/wasm), or in a checkout run `make node-build`.',
  );
}

const loaded = load();
// Core's defaults and metric names (one JSON string, read once).
loaded.constants = Object.freeze(JSON.parse(loaded.core.constantsJson()));

module.exports = loaded;
