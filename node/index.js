'use strict';
// slidelimit: distributed sliding-window rate limiting on Redis, one budget
// shared with the Rust, Go and other slidelimit workers.

const binding = require('./lib/binding');
const errors = require('./lib/errors');
const { Limiter, MemoryLimiter } = require('./lib/limiter');
const { Metrics } = require('./lib/metrics');

const { core } = binding;

module.exports = {
  Limiter,
  MemoryLimiter,
  MemoryEngine: core.MemoryEngine,
  Metrics,
  /** 'native' (napi addon) or 'wasm'. */
  implementation: binding.implementation,
  /** Why the native addon did not load when `implementation` is 'wasm' by fallback. */
  nativeLoadError: binding.nativeError,
  /** slidelimit-core's version. */
  version: core.version(),
  /** Every error code, from core. */
  errorCodes: Object.freeze(core.errorCodes()),
  SlidelimitError: errors.SlidelimitError,
  InvalidArgumentError: errors.InvalidArgumentError,
  UnavailableError: errors.UnavailableError,
  ScriptError: errors.ScriptError,
  WrongTypeError: errors.WrongTypeError,
  MalformedReplyError: errors.MalformedReplyError,
  PermissionDeniedError: errors.PermissionDeniedError,
  InternalError: errors.InternalError,
  /** Cluster slot of a key (CRC16/XMODEM mod 16384), from core. */
  slot: (key) => core.slot(key),
};
