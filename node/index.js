'use strict';
// slidelimit: distributed sliding-window rate limiting on Redis, one budget
// shared with the Rust, Go and other slidelimit workers.
//
// One `exports.name = ...` per export: Node's ESM loader finds the named
// exports of a CommonJS module by scanning for exactly this form, so each one
// is importable as `import { name } from 'slidelimit'` too.

const binding = require('./lib/binding');
const errors = require('./lib/errors');
const limiter = require('./lib/limiter');
const metrics = require('./lib/metrics');

const { core } = binding;

exports.Limiter = limiter.Limiter;
exports.MemoryLimiter = limiter.MemoryLimiter;
exports.MemoryEngine = core.MemoryEngine;
exports.Metrics = metrics.Metrics;
/** 'native' (napi addon) or 'wasm'. */
exports.implementation = binding.implementation;
/** Why the native addon did not load when `implementation` is 'wasm' by fallback. */
exports.nativeLoadError = binding.nativeError;
/** slidelimit-core's version. */
exports.version = core.version();
/** Every error code, from core. */
exports.errorCodes = Object.freeze(core.errorCodes());
exports.SlidelimitError = errors.SlidelimitError;
exports.InvalidArgumentError = errors.InvalidArgumentError;
exports.UnavailableError = errors.UnavailableError;
exports.ScriptError = errors.ScriptError;
exports.WrongTypeError = errors.WrongTypeError;
exports.MalformedReplyError = errors.MalformedReplyError;
exports.PermissionDeniedError = errors.PermissionDeniedError;
exports.InternalError = errors.InternalError;
/** Cluster slot of a key (CRC16/XMODEM mod 16384), from core. */
exports.slot = (key) => {
  // napi would throw its own error and wasm would coerce: both refuse it here.
  if (typeof key !== 'string') throw errors.invalid('key', `must be a string, got ${typeof key}`);
  return core.slot(key);
};
