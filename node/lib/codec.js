'use strict';
// How calls and replies cross the boundary to core (the napi addon or the
// wasm build): few JS values per check, since each costs more than core's work.

// Core's call comes as one string, `sha1 NUL numkeys NUL key... NUL arg...`
// (one JS value instead of nine; encoded by `encode_call` in js-glue/, the one
// definition the addon and the wasm build share); split, it is EVALSHA's
// argument list.
function decodeCall(encoded) {
  const parts = encoded.split('\0');
  parts[1] = Number(parts[1]);
  return parts;
}

// A Redis integer reply as ioredis `stringNumbers` hands it over: at most 16
// digits, so that Number() reads it exactly or core sees it out of range.
const INTEGER_TEXT = /^-?(0|[1-9][0-9]{0,15})$/;

function fromText(v) {
  return typeof v === 'string' && INTEGER_TEXT.test(v) ? Number(v) : NaN;
}

// Core's parseReply reads the reply from a Float64Array and writes the
// decision back in field order. Anything in the reply that is not a number
// goes as NaN, so core reports `malformed_reply` for it like for any other
// bad reply. With `stringNumbers` (the client's ioredis option: integer
// replies arrive as decimal strings) such strings are read as their number.
function replyParser(core, { stringNumbers = false } = {}) {
  // Shared scratch space: safe, the call is synchronous.
  const scratch = new Float64Array(5);
  return function parseReply(reply) {
    const n = Array.isArray(reply) ? reply.length : 0;
    const buf = n === scratch.length ? scratch : new Float64Array(n);
    for (let i = 0; i < n; i++) {
      const v = reply[i];
      buf[i] = typeof v === 'number' ? v : stringNumbers ? fromText(v) : NaN;
    }
    core.parseReply(buf);
    return { allowed: buf[0] === 1, remaining: buf[1], retryAfterMs: buf[2], resetAfterMs: buf[3], nowMs: buf[4] };
  };
}

module.exports = { decodeCall, replyParser };
