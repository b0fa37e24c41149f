'use strict';
// One Error subclass per core error code; `code` is core's code string and
// `field` the offending field (invalid_argument only).

class SlidelimitError extends Error {
  constructor(code, message, field) {
    super(message);
    this.name = this.constructor.name;
    this.code = code;
    if (field !== undefined) this.field = field;
  }
}

class InvalidArgumentError extends SlidelimitError {}
class UnavailableError extends SlidelimitError {}
class ScriptError extends SlidelimitError {}
class WrongTypeError extends SlidelimitError {}
class MalformedReplyError extends SlidelimitError {}
class PermissionDeniedError extends SlidelimitError {}
class InternalError extends SlidelimitError {}

const byCode = {
  invalid_argument: InvalidArgumentError,
  unavailable: UnavailableError,
  script_error: ScriptError,
  wrong_type: WrongTypeError,
  malformed_reply: MalformedReplyError,
  permission_denied: PermissionDeniedError,
  internal: InternalError,
};

function makeError(code, message, field, cause) {
  const Class = byCode[code] || InternalError;
  const err = new Class(byCode[code] ? code : 'internal', message, field);
  if (cause !== undefined) err.cause = cause;
  return err;
}

// The addon and the wasm build throw Errors (and `mapServerError` returns
// errors) with core's `code` and, when a field is at fault, its `field`.
// Anything else escaping them is a bug: `internal`. `cause`: the error of the
// client, if any.
function fromCore(e, cause) {
  if (e instanceof SlidelimitError) return e;
  const code = e && typeof e.code === 'string' ? e.code : '';
  const field = e && typeof e.field === 'string' ? e.field : undefined;
  if (byCode[code]) return makeError(code, e.message, field, cause);
  return makeError('internal', `slidelimit core failed: ${e && e.message}`, undefined, e);
}

// Type checks at the JS boundary; ranges and rules are core's.
function invalid(field, problem) {
  return new InvalidArgumentError('invalid_argument', `${field}: ${problem}`, field);
}

// An options object is a plain object: not null, and not an array (whose
// `for...in` finds no key, so `[]` would pass for `{}` without a word).
function isRecord(value) {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

// An options object holds only the keys it is read for. A misspelt key
// (`bucket`, `maxDeferals`) would otherwise leave its field at the default
// without a word, as the other bindings' keyword arguments and struct fields
// never do. `name` says how the error names a key (`limits[1].bucket`).
function onlyKnown(object, known, name = (key) => key) {
  for (const key in object) {
    if (!known.includes(key)) throw invalid(name(key), `unknown field; known: ${known.join(', ')}`);
  }
}

module.exports = {
  SlidelimitError,
  InvalidArgumentError,
  UnavailableError,
  ScriptError,
  WrongTypeError,
  MalformedReplyError,
  PermissionDeniedError,
  InternalError,
  errorClasses: byCode,
  makeError,
  fromCore,
  invalid,
  isRecord,
  onlyKnown,
};
