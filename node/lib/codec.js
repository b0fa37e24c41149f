'use strict';
// Type conversions at the boundary to core (the napi addon or the wasm
// build), with few JS values per check, since each costs more than core's
// work. Every format here is core's: JS only moves values across.

const { core, constants } = require('./binding');

// Core's call comes as one string (one JS value instead of nine); split at
// core's separator it is EVALSHA's argument list [sha1, numkeys, key, ...args]
// (ioredis reads numkeys as text or number alike).
function splitCall(encoded) {
  return encoded.split(constants.callSeparator);
}

// Core's parseReply reads the reply from a Float64Array and writes the
// decision back in field order. Anything in the reply that is not a number
// goes as NaN, so core reports `malformed_reply` for it like for any other
// bad reply. `impl`: the addon or the wasm build (the loaded one by default).
function numberReplyParser(impl = core) {
  // Shared scratch space (five elements for one limit, six for several):
  // safe, the call is synchronous.
  const scratch5 = new Float64Array(5);
  const scratch6 = new Float64Array(6);
  // `limits`: how many limits the policy holds (five elements for one, six for more).
  return function parseReply(reply, limits) {
    const n = Array.isArray(reply) ? reply.length : 0;
    const buf = n === 5 ? scratch5 : n === 6 ? scratch6 : new Float64Array(n);
    for (let i = 0; i < n; i++) {
      const v = reply[i];
      buf[i] = typeof v === 'number' ? v : NaN;
    }
    impl.parseReply(buf, limits);
    return {
      allowed: buf[0] === 1,
      remaining: buf[1],
      retryAfterMs: buf[2],
      resetAfterMs: buf[3],
      nowMs: buf[4],
      // Core writes the denying limit's position (from 0) sixth, or a negative number for none.
      deniedBy: n === 6 && buf[5] >= 0 ? buf[5] : null,
    };
  };
}

// With ioredis `stringNumbers` integers arrive as decimal strings: the reply
// goes to core as it is, and core reads the text.
function textReplyParser(impl = core) {
  return (reply, limits) => impl.parseReplyValues(Array.isArray(reply) ? reply : [], limits);
}

module.exports = { splitCall, numberReplyParser, textReplyParser };
