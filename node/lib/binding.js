'use strict';
// Picks the implementation of slidelimit-core: the napi addon built for this
// platform, or the wasm build when the addon is missing or fails to load.
// SLIDELIMIT_IMPL=native|wasm forces one (and fails loudly if it cannot load).

const path = require('node:path');
const { addonFile } = require('./platform');

const dist = path.join(__dirname, '..', 'dist');

function loadNative() {
  return require(path.join(dist, addonFile()));
}

function loadWasm() {
  return require(path.join(dist, 'wasm', 'slidelimit_wasm.js'));
}

function load() {
  const forced = process.env.SLIDELIMIT_IMPL;
  if (forced === 'native') return { core: loadNative(), implementation: 'native', nativeError: null };
  if (forced === 'wasm') return { core: loadWasm(), implementation: 'wasm', nativeError: null };
  if (forced !== undefined && forced !== '' && forced !== 'auto') {
    throw new Error(`SLIDELIMIT_IMPL must be native, wasm or auto, got ${JSON.stringify(forced)}`);
  }
  try {
    return { core: loadNative(), implementation: 'native', nativeError: null };
  } catch (nativeError) {
    return { core: loadWasm(), implementation: 'wasm', nativeError };
  }
}

const loaded = load();
// Core's defaults and metric names (one JSON string, read once).
loaded.constants = Object.freeze(JSON.parse(loaded.core.constantsJson()));

module.exports = loaded;
