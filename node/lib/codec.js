'use strict';
// How calls and replies cross the boundary to core (the napi addon or the
// wasm build): few JS values per check, since each costs more than core's work.

// Core's call comes as one string, `sha1 NUL numkeys NUL key... NUL arg...`
// (one JS value instead of nine); split, it is EVALSHA's argument list.
function decodeCall(encoded) {
  const parts = encoded.split('\0');
  parts[1] = Number(parts[1]);
  return parts;
}

// Core's parseReply reads the reply from a Float64Array and writes the
// decision back in field order. Anything in the reply that is not a number
// goes as NaN, so core reports `malformed_reply` for it like for any other
// bad reply.
function replyParser(core) {
  // Shared scratch space: safe, the call is synchronous.
  const scratch = new Float64Array(5);
  return function parseReply(reply) {
    const n = Array.isArray(reply) ? reply.length : 0;
    const buf = n === scratch.length ? scratch : new Float64Array(n);
    for (let i = 0; i < n; i++) buf[i] = typeof reply[i] === 'number' ? reply[i] : NaN;
    core.parseReply(buf);
    return { allowed: buf[0] === 1, remaining: buf[1], retryAfterMs: buf[2], resetAfterMs: buf[3], nowMs: buf[4] };
  };
}

module.exports = { decodeCall, replyParser };
