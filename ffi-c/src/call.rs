//! One script call: the scripts, building a call's KEYS and ARGV (as a handle
//! or into caller buffers), parsing the reply into a decision, and what to do
//! with an error reply from Redis.

use crate::boundary::{
    boundary, bytes_out, input, input_str, invalid, null, out, reference, tenant_input, too_small,
    Failure, MessageOut,
};
use crate::policy::{parse_algorithm, slidelimit_policy};
use crate::result::{slidelimit_field, slidelimit_result};
use slidelimit_core::{
    classify_server_error, map_command_error, map_server_error, map_server_error_after_retry,
    resend_pause_ms, Decision, ErrorCode, Mode, Script, ScriptCall, ServerErrorAction,
    ServerErrorKind,
};

/// Values of the `mode` parameters (passed as `uint32_t`).
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum slidelimit_mode {
    /// Records the permits when allowed.
    Acquire = 1,
    /// Same reply, records nothing (the script issues no writes).
    Peek = 2,
}

/// What a binding must do with an error reply from Redis.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum slidelimit_server_error {
    /// The script is not cached on that node: EVAL (or SCRIPT LOAD) and retry once.
    NoScript = 1,
    /// MOVED/ASK: the Cluster client should have followed it; report unavailable.
    Redirect = 2,
    /// Loading, busy, failing over: report unavailable.
    Transient = 3,
    /// Final for this call: report the code given with it.
    Final = 4,
}

/// What `slidelimit_server_error_map` tells a binding to do with an error
/// reply from Redis.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum slidelimit_server_error_action {
    /// NOSCRIPT: send the same call once as EVAL (same keys, so the same
    /// connection or Cluster node); the script did not run.
    RetryWithEval = 1,
    /// Report the code and message given with it: final for this call.
    Fail = 2,
}

/// A decision, parsed from a script reply or made by the memory engine.
/// Times are milliseconds.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct slidelimit_decision {
    pub allowed: bool,
    /// Permits of cost 1 that would still pass at `now_ms`.
    pub remaining: u64,
    /// 0 when allowed; else how long until a retry of the same cost passes.
    pub retry_after_ms: u64,
    /// How long until the key holds nothing that still counts.
    pub reset_after_ms: u64,
    /// The time the decision was made at.
    pub now_ms: u64,
    /// For a denial by a policy of several limits, the position (from 0) of
    /// the limit that denied with the longest retry; -1 when allowed and for
    /// a policy of one limit.
    pub denied_by: i32,
}

impl From<Decision> for slidelimit_decision {
    fn from(d: Decision) -> Self {
        slidelimit_decision {
            allowed: d.allowed,
            remaining: d.remaining,
            retry_after_ms: d.retry_after_ms,
            reset_after_ms: d.reset_after_ms,
            now_ms: d.now_ms,
            denied_by: d.denied_by.map_or(-1, |p| p as i32),
        }
    }
}

/// The KEYS and ARGV of one script call. Made by
/// `slidelimit_policy_build_call`, released by `slidelimit_call_free`. Byte
/// pointers handed out by its accessors live as long as the call.
pub struct slidelimit_call {
    pub(crate) inner: ScriptCall,
}

/// The most limits a policy holds (core's `MAX_LIMITS`).
pub const SLIDELIMIT_MAX_LIMITS: usize = 8;
const _: () = assert!(SLIDELIMIT_MAX_LIMITS == slidelimit_core::MAX_LIMITS);

/// A `buf` of this many bytes always holds all of a call's KEYS and ARGV
/// (`slidelimit_policy_build_call_into`): for each of up to
/// `SLIDELIMIT_MAX_LIMITS` limits the longest key (`SLIDELIMIT_KEY_MAX`) and
/// four ARGV of at most 20 bytes, and two more ARGV. A one-limit call needs
/// at most `SLIDELIMIT_KEY_MAX` + 100.
pub const SLIDELIMIT_CALL_BUF_MAX: usize = 17_088;

// Every ARGV is an integer of at most 20 digits (u64::MAX) or an algorithm's
// name (at most 15 bytes), whatever core's limits on them are.
const _: () = assert!(
    SLIDELIMIT_MAX_LIMITS * (crate::policy::SLIDELIMIT_KEY_MAX + 4 * 20) + 2 * 20
        <= SLIDELIMIT_CALL_BUF_MAX
);

/// A `part_lens` array of this many entries always holds the lengths of a
/// call's KEYS and ARGV (`slidelimit_policy_build_call_into`): 6 at most for
/// one limit (one key, four ARGV and a bucket count), 1 key and 4 ARGV per
/// limit plus 2 ARGV for several.
pub const SLIDELIMIT_CALL_PARTS_MAX: usize = 5 * SLIDELIMIT_MAX_LIMITS + 2;

/// A message buffer of `reply_len + key_len + SLIDELIMIT_SERVER_ERROR_MESSAGE_EXTRA`
/// bytes always holds the whole message `slidelimit_server_error_map` gives
/// for a UTF-8 reply, and its NUL.
pub const SLIDELIMIT_SERVER_ERROR_MESSAGE_EXTRA: usize = 256;

pub(crate) fn parse_mode(value: u32) -> Result<Mode, Failure> {
    match value {
        v if v == slidelimit_mode::Acquire as u32 => Ok(Mode::Acquire),
        v if v == slidelimit_mode::Peek as u32 => Ok(Mode::Peek),
        other => Err(invalid(
            "mode",
            format!("unknown value {other} (1 = acquire, 2 = peek)"),
        )),
    }
}

// ---------------------------------------------------------------------------
// Scripts.

fn script(algorithm: u32, mode: u32) -> Result<Script, Failure> {
    Ok(Script::new(parse_algorithm(algorithm)?, parse_mode(mode)?))
}

/// The Lua text of one script (`slidelimit_algorithm`, `slidelimit_mode`), for
/// EVAL or SCRIPT LOAD. Static memory, not NUL-terminated: never free it.
#[no_mangle]
pub unsafe extern "C" fn slidelimit_script_text(
    algorithm: u32,
    mode: u32,
    out_ptr: *mut *const u8,
    out_len: *mut usize,
) -> slidelimit_result {
    boundary(MessageOut::NONE, || {
        bytes_out(script(algorithm, mode)?.text().as_bytes(), out_ptr, out_len)
    })
}

/// The lower-case hex SHA1 (40 bytes) of a script, as EVALSHA expects.
/// Static memory, not NUL-terminated: never free it.
#[no_mangle]
pub unsafe extern "C" fn slidelimit_script_sha1(
    algorithm: u32,
    mode: u32,
    out_ptr: *mut *const u8,
    out_len: *mut usize,
) -> slidelimit_result {
    boundary(MessageOut::NONE, || {
        bytes_out(script(algorithm, mode)?.sha1().as_bytes(), out_ptr, out_len)
    })
}

/// The Lua text and SHA1 of the script `policy`'s calls run in `mode` (a
/// `slidelimit_mode` value): its algorithm's for a policy of one limit, the
/// multi-limit script for several. Static memory, not NUL-terminated: never
/// free it. A binding loads its scripts through this, never by algorithm.
#[no_mangle]
pub unsafe extern "C" fn slidelimit_policy_script(
    policy: *const slidelimit_policy,
    mode: u32,
    out_text: *mut *const u8,
    out_text_len: *mut usize,
    out_sha1: *mut *const u8,
    out_sha1_len: *mut usize,
) -> slidelimit_result {
    boundary(MessageOut::NONE, || {
        let policy = reference("policy", policy)?;
        let script = policy.inner.script(parse_mode(mode)?);
        out("out_sha1", out_sha1)?;
        out("out_sha1_len", out_sha1_len)?;
        bytes_out(script.text().as_bytes(), out_text, out_text_len)?;
        bytes_out(script.sha1().as_bytes(), out_sha1, out_sha1_len)
    })
}

// ---------------------------------------------------------------------------
// Building a call.

/// Core's call for these C arguments.
unsafe fn build(
    policy: *const slidelimit_policy,
    tenant: *const u8,
    tenant_len: usize,
    cost: u64,
    now_ms: *const u64,
    mode: u32,
) -> Result<ScriptCall, Failure> {
    let policy = reference("policy", policy)?;
    let tenant = tenant_input(tenant, tenant_len)?;
    let mode = parse_mode(mode)?;
    Ok(policy
        .inner
        .build_call(tenant, cost, now_ms.as_ref().copied(), mode)?)
}

/// Validates tenant, cost and time and builds one call's KEYS and ARGV into
/// `*out_call` (release it with `slidelimit_call_free`). `now_ms` NULL lets
/// the script read Redis `TIME` (the production default); otherwise it points
/// at the caller's time in ms. `mode` is a `slidelimit_mode` value.
#[no_mangle]
pub unsafe extern "C" fn slidelimit_policy_build_call(
    policy: *const slidelimit_policy,
    tenant: *const u8,
    tenant_len: usize,
    cost: u64,
    now_ms: *const u64,
    mode: u32,
    out_call: *mut *mut slidelimit_call,
    msg: *mut u8,
    msg_cap: usize,
    msg_len: *mut usize,
    field: *mut slidelimit_field,
) -> slidelimit_result {
    boundary(MessageOut::new(msg, msg_cap, msg_len, field), || {
        let out_call = out("out_call", out_call)?;
        let inner = build(policy, tenant, tenant_len, cost, now_ms, mode)?;
        *out_call = Box::into_raw(Box::new(slidelimit_call { inner }));
        Ok(())
    })
}

/// Builds the same call as `slidelimit_policy_build_call` into caller
/// buffers instead of a handle: nothing to free, and a binding pays one
/// crossing per check (Go's cgo does).
///
/// On success `buf` holds the call's KEYS then its ARGV, back to back and
/// not NUL-terminated; `part_lens[i]` is the length of part `i`;
/// `*out_key_count` is the number of KEYS (the first parts), `*out_part_count`
/// the number of parts (KEYS and ARGV) and `*out_buf_len` the bytes used in
/// `buf`. An ARGV may be empty (now_ms, when the script reads Redis `TIME`).
///
/// When `buf_cap` or `part_lens_cap` is too small the result is
/// `SLIDELIMIT_RESULT_BUFFER_TOO_SMALL`: `buf`, `part_lens` and
/// `*out_key_count` are untouched, and `*out_buf_len` and `*out_part_count`
/// receive the sizes needed (the one failure that writes out-params, so that
/// the caller can retry; `buf` and `part_lens` may be NULL with a capacity
/// of 0 to ask for them). `SLIDELIMIT_CALL_BUF_MAX` bytes and
/// `SLIDELIMIT_CALL_PARTS_MAX` parts always suffice. Invalid input fails as
/// in `slidelimit_policy_build_call`, before any size is checked.
#[no_mangle]
pub unsafe extern "C" fn slidelimit_policy_build_call_into(
    policy: *const slidelimit_policy,
    tenant: *const u8,
    tenant_len: usize,
    cost: u64,
    now_ms: *const u64,
    mode: u32,
    buf: *mut u8,
    buf_cap: usize,
    part_lens: *mut usize,
    part_lens_cap: usize,
    out_key_count: *mut usize,
    out_part_count: *mut usize,
    out_buf_len: *mut usize,
    msg: *mut u8,
    msg_cap: usize,
    msg_len: *mut usize,
    field: *mut slidelimit_field,
) -> slidelimit_result {
    boundary(MessageOut::new(msg, msg_cap, msg_len, field), || {
        let out_key_count = out("out_key_count", out_key_count)?;
        let out_part_count = out("out_part_count", out_part_count)?;
        let out_buf_len = out("out_buf_len", out_buf_len)?;
        let call = build(policy, tenant, tenant_len, cost, now_ms, mode)?;
        let parts = || call.keys.iter().chain(&call.args);
        let part_count = call.keys.len() + call.args.len();
        let needed: usize = parts().map(String::len).sum();
        if needed > buf_cap || part_count > part_lens_cap {
            *out_buf_len = needed;
            *out_part_count = part_count;
            return Err(if needed > buf_cap {
                too_small("buf", "the call", needed, "bytes", buf_cap)
            } else {
                too_small("part_lens", "the call", part_count, "parts", part_lens_cap)
            });
        }
        let buf = out("buf", buf)?;
        let part_lens = out("part_lens", part_lens)?;
        let mut used = 0;
        for (i, part) in parts().enumerate() {
            std::ptr::copy_nonoverlapping(part.as_ptr(), buf.add(used), part.len());
            *part_lens.add(i) = part.len();
            used += part.len();
        }
        *out_key_count = call.keys.len();
        *out_part_count = part_count;
        *out_buf_len = used;
        Ok(())
    })
}

/// Releases a call from `slidelimit_policy_build_call`. NULL is ignored.
#[no_mangle]
pub unsafe extern "C" fn slidelimit_call_free(call: *mut slidelimit_call) {
    crate::boundary::free_box(call);
}

/// KEYS[index] or ARGV[index] of a call, or `invalid_argument` on `index`.
fn part<'a>(list: &'a [String], what: &str, index: usize) -> Result<&'a [u8], Failure> {
    list.get(index).map(String::as_bytes).ok_or_else(|| {
        invalid(
            "index",
            format!("{index} is out of range for {} {what}", list.len()),
        )
    })
}

/// The number of KEYS of a call (1, or one per limit of a policy of several).
#[no_mangle]
pub unsafe extern "C" fn slidelimit_call_key_count(
    call: *const slidelimit_call,
    out_count: *mut usize,
) -> slidelimit_result {
    boundary(MessageOut::NONE, || {
        let call = reference("call", call)?;
        *out("out_count", out_count)? = call.inner.keys.len();
        Ok(())
    })
}

/// KEYS[index] (0-based) of a call; the bytes live as long as the call.
#[no_mangle]
pub unsafe extern "C" fn slidelimit_call_key(
    call: *const slidelimit_call,
    index: usize,
    out_ptr: *mut *const u8,
    out_len: *mut usize,
) -> slidelimit_result {
    boundary(MessageOut::NONE, || {
        let call = reference("call", call)?;
        bytes_out(part(&call.inner.keys, "keys", index)?, out_ptr, out_len)
    })
}

/// The number of ARGV of a call (4: limit, window_ms, cost, now_ms; 5 for a
/// bucketed window, with its bucket count).
#[no_mangle]
pub unsafe extern "C" fn slidelimit_call_arg_count(
    call: *const slidelimit_call,
    out_count: *mut usize,
) -> slidelimit_result {
    boundary(MessageOut::NONE, || {
        let call = reference("call", call)?;
        *out("out_count", out_count)? = call.inner.args.len();
        Ok(())
    })
}

/// ARGV[index] (0-based) of a call; the bytes live as long as the call. The
/// now_ms argument is empty (length 0) when the script reads Redis `TIME`.
#[no_mangle]
pub unsafe extern "C" fn slidelimit_call_arg(
    call: *const slidelimit_call,
    index: usize,
    out_ptr: *mut *const u8,
    out_len: *mut usize,
) -> slidelimit_result {
    boundary(MessageOut::NONE, || {
        let call = reference("call", call)?;
        bytes_out(part(&call.inner.args, "args", index)?, out_ptr, out_len)
    })
}

/// The SHA1 of the call's script (static memory, 40 bytes).
#[no_mangle]
pub unsafe extern "C" fn slidelimit_call_sha1(
    call: *const slidelimit_call,
    out_ptr: *mut *const u8,
    out_len: *mut usize,
) -> slidelimit_result {
    boundary(MessageOut::NONE, || {
        let call = reference("call", call)?;
        bytes_out(call.inner.script.sha1().as_bytes(), out_ptr, out_len)
    })
}

/// The Lua text of the call's script (static memory), for the NOSCRIPT fallback.
#[no_mangle]
pub unsafe extern "C" fn slidelimit_call_script_text(
    call: *const slidelimit_call,
    out_ptr: *mut *const u8,
    out_len: *mut usize,
) -> slidelimit_result {
    boundary(MessageOut::NONE, || {
        let call = reference("call", call)?;
        bytes_out(call.inner.script.text().as_bytes(), out_ptr, out_len)
    })
}

/// The Cluster slot of the call's keys, and whether its script is read-only
/// (a peek, which may also run with EVALSHA_RO on a replica).
#[no_mangle]
pub unsafe extern "C" fn slidelimit_call_info(
    call: *const slidelimit_call,
    out_slot: *mut u16,
    out_read_only: *mut bool,
) -> slidelimit_result {
    boundary(MessageOut::NONE, || {
        let call = reference("call", call)?;
        let out_slot = out("out_slot", out_slot)?;
        let out_read_only = out("out_read_only", out_read_only)?;
        *out_slot = call.inner.slot();
        *out_read_only = call.inner.script.is_read_only();
        Ok(())
    })
}

// ---------------------------------------------------------------------------
// Replies and server errors.

/// Parses the reply of a script for a policy of `limits` limits
/// (`slidelimit_policy_limit_count`), given as its integers (`reply` may be
/// NULL when `reply_len` is 0), into `*out_decision`. Anything but a
/// consistent reply of that policy (five integers for one limit; six for
/// several, the sixth 0 or one of its limits) is
/// `SLIDELIMIT_RESULT_MALFORMED_REPLY`; `limits` outside 1..=8 is
/// `SLIDELIMIT_RESULT_INVALID_ARGUMENT` naming `limits`. A reply element that
/// is not an integer at all is for the caller to report as malformed.
#[no_mangle]
pub unsafe extern "C" fn slidelimit_decision_from_reply(
    reply: *const i64,
    reply_len: usize,
    limits: usize,
    out_decision: *mut slidelimit_decision,
    msg: *mut u8,
    msg_cap: usize,
    msg_len: *mut usize,
    field: *mut slidelimit_field,
) -> slidelimit_result {
    boundary(MessageOut::new(msg, msg_cap, msg_len, field), || {
        let out_decision = out("out_decision", out_decision)?;
        let reply = input("reply", reply, reply_len)?;
        *out_decision = Decision::from_reply(reply, limits)?.into();
        Ok(())
    })
}

/// How long to wait before sending a script call again that Redis answered
/// with the error `text` (any bytes; invalid UTF-8 is replaced) without
/// running it, at the `attempt`-th resend (from 0): core's
/// `resend_pause_ms`: TRYAGAIN (a Cluster node whose migrating slot holds
/// only some of a call's keys) at every attempt, a MOVED or ASK the client
/// did not follow at the first. `*out_pause_ms` is 0 for a reply that is
/// not to be resent; then, or when the wait would pass the call's timeout,
/// map the reply with `slidelimit_server_error_map`.
#[no_mangle]
pub unsafe extern "C" fn slidelimit_server_error_resend_pause_ms(
    text: *const u8,
    text_len: usize,
    attempt: u32,
    out_pause_ms: *mut u64,
) -> slidelimit_result {
    boundary(MessageOut::NONE, || {
        let out_pause_ms = out("out_pause_ms", out_pause_ms)?;
        let text = String::from_utf8_lossy(input("text", text, text_len)?);
        *out_pause_ms = resend_pause_ms(&text, attempt).unwrap_or(0);
        Ok(())
    })
}

/// Classifies the text of a Redis error reply (any bytes; invalid UTF-8 is
/// replaced) so every binding treats the same server error the same way.
/// `*out_code` is the code to report when the binding gives up on it:
/// unavailable for redirects and transient errors, script_error for a
/// NOSCRIPT that survived the one retry, the final code otherwise. The same
/// table as `slidelimit_server_error_map`, which also gives the message
/// every binding reports (naming the key of a WRONGTYPE): prefer it.
#[no_mangle]
pub unsafe extern "C" fn slidelimit_server_error_classify(
    text: *const u8,
    text_len: usize,
    out_kind: *mut slidelimit_server_error,
    out_code: *mut slidelimit_result,
) -> slidelimit_result {
    boundary(MessageOut::NONE, || {
        let out_kind = out("out_kind", out_kind)?;
        let out_code = out("out_code", out_code)?;
        let text = String::from_utf8_lossy(input("text", text, text_len)?);
        let (kind, code) = match classify_server_error(&text) {
            ServerErrorKind::NoScript => {
                (slidelimit_server_error::NoScript, ErrorCode::ScriptError)
            }
            ServerErrorKind::Redirect => {
                (slidelimit_server_error::Redirect, ErrorCode::Unavailable)
            }
            ServerErrorKind::Transient => {
                (slidelimit_server_error::Transient, ErrorCode::Unavailable)
            }
            ServerErrorKind::Final(code) => (slidelimit_server_error::Final, code),
        };
        *out_kind = kind;
        *out_code = code.into();
        Ok(())
    })
}

/// Maps an error reply from Redis to a script call by core's one table
/// (`map_server_error`), so that every binding reports the same code and
/// message for it. `reply` is the server's error text with its prefix
/// (`"NOSCRIPT No matching script..."`; any bytes, invalid UTF-8 is
/// replaced); `key` is the call's KEYS[1] and `algorithm` its
/// `slidelimit_algorithm` value, which a WRONGTYPE message names.
///
/// `after_retry` false maps the reply to EVALSHA: a NOSCRIPT is
/// `SLIDELIMIT_SERVER_ERROR_ACTION_RETRY_WITH_EVAL` (`*out_code` OK, an empty
/// message). `after_retry` true maps the reply to the EVAL sent after it, or
/// to a command that is never retried (a reset's DEL): every reply, a
/// NOSCRIPT included, is `SLIDELIMIT_SERVER_ERROR_ACTION_FAIL`.
///
/// On FAIL, `*out_code` is the code to report and `out_message` (optional,
/// like `msg`) receives its message, cut at a character boundary if needed and
/// NUL-terminated; `reply_len + key_len + SLIDELIMIT_SERVER_ERROR_MESSAGE_EXTRA`
/// bytes always hold it for a UTF-8 reply. `*out_field` (optional) is the
/// field of that error (a script's `invalid_argument` names one of core's
/// fields), or none. `msg` and `field` are for this function's own
/// failures (a NULL pointer, an unknown algorithm, a key that is not UTF-8).
#[no_mangle]
pub unsafe extern "C" fn slidelimit_server_error_map(
    reply: *const u8,
    reply_len: usize,
    key: *const u8,
    key_len: usize,
    algorithm: u32,
    after_retry: bool,
    out_action: *mut slidelimit_server_error_action,
    out_code: *mut slidelimit_result,
    out_message: *mut u8,
    out_message_cap: usize,
    out_message_len: *mut usize,
    out_field: *mut slidelimit_field,
    msg: *mut u8,
    msg_cap: usize,
    msg_len: *mut usize,
    field: *mut slidelimit_field,
) -> slidelimit_result {
    boundary(MessageOut::new(msg, msg_cap, msg_len, field), || {
        let out_action = out("out_action", out_action)?;
        let out_code = out("out_code", out_code)?;
        let reply = String::from_utf8_lossy(input("reply", reply, reply_len)?);
        let key = input_str("key", key, key_len)?;
        let algorithm = parse_algorithm(algorithm)?;
        if out_message.is_null() && out_message_cap > 0 {
            return Err(null("out_message"));
        }
        let action = if after_retry {
            ServerErrorAction::Fail(map_server_error_after_retry(&reply, key, algorithm))
        } else {
            map_server_error(&reply, key, algorithm)
        };
        let (action, code, field, message) = match &action {
            ServerErrorAction::RetryWithEval => (
                slidelimit_server_error_action::RetryWithEval,
                slidelimit_result::Ok,
                None,
                "",
            ),
            ServerErrorAction::Fail(e) => (
                slidelimit_server_error_action::Fail,
                e.code().into(),
                e.field(),
                e.message(),
            ),
        };
        MessageOut::new(out_message, out_message_cap, out_message_len, out_field)
            .report(field, message);
        *out_action = action;
        *out_code = code;
        Ok(())
    })
}

/// Maps an error reply from Redis to a command that is no script call (a
/// reset's DEL, a connection's AUTH) by the same table as
/// `slidelimit_server_error_map` (core's `map_command_error`): never a retry,
/// and a WRONGTYPE message is the reply alone, as such a command is about no
/// rule's key. `*out_code` is the code to report; `out_message` (optional)
/// receives its message and `*out_field` (optional) its field as in
/// `slidelimit_server_error_map` (`reply_len +
/// SLIDELIMIT_SERVER_ERROR_MESSAGE_EXTRA` bytes hold the message).
#[no_mangle]
pub unsafe extern "C" fn slidelimit_server_error_map_command(
    reply: *const u8,
    reply_len: usize,
    out_code: *mut slidelimit_result,
    out_message: *mut u8,
    out_message_cap: usize,
    out_message_len: *mut usize,
    out_field: *mut slidelimit_field,
) -> slidelimit_result {
    boundary(MessageOut::NONE, || {
        let out_code = out("out_code", out_code)?;
        let reply = String::from_utf8_lossy(input("reply", reply, reply_len)?);
        if out_message.is_null() && out_message_cap > 0 {
            return Err(null("out_message"));
        }
        let error = map_command_error(&reply);
        MessageOut::new(out_message, out_message_cap, out_message_len, out_field)
            .report(error.field(), error.message());
        *out_code = error.code().into();
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use slidelimit_core::{Algorithm, Policy, MAX_NOW_MS};
    use std::ptr::{null, null_mut};

    fn policy(alg: Algorithm, limit: u64, window: u64) -> *mut slidelimit_policy {
        Box::into_raw(Box::new(slidelimit_policy {
            inner: Policy::new("rl", "geocode", alg, limit, window).unwrap(),
        }))
    }

    #[test]
    fn tryagain_and_a_first_redirect_get_a_resend_pause() {
        let mut pause = 7u64;
        let tryagain = b"TRYAGAIN Multiple keys request during rehashing of slot";
        for (text, attempt, want) in [
            (&tryagain[..], 0, 5),
            (&tryagain[..], 3, 40),
            (&tryagain[..], 99, 100),
            (&b"NOSCRIPT No matching script."[..], 0, 0),
            (&b"MOVED 3999 127.0.0.1:7001"[..], 0, 5),
            (&b"MOVED 3999 127.0.0.1:7001"[..], 1, 0),
            (&b"\xffTRYAGAIN"[..], 0, 0),
        ] {
            let r = unsafe {
                slidelimit_server_error_resend_pause_ms(
                    text.as_ptr(),
                    text.len(),
                    attempt,
                    &mut pause,
                )
            };
            assert_eq!(
                (r, pause),
                (slidelimit_result::Ok, want),
                "{text:?} {attempt}"
            );
        }
        let r = unsafe { slidelimit_server_error_resend_pause_ms(null(), 3, 0, &mut pause) };
        assert_eq!(r, slidelimit_result::NullPointer);
        let r =
            unsafe { slidelimit_server_error_resend_pause_ms(tryagain.as_ptr(), 8, 0, null_mut()) };
        assert_eq!(r, slidelimit_result::NullPointer);
    }

    #[test]
    fn decision_out_param_is_untouched_on_failure() {
        let mut d = slidelimit_decision {
            allowed: true,
            remaining: 9,
            retry_after_ms: 9,
            reset_after_ms: 9,
            now_ms: 9,
            denied_by: 9,
        };
        let before = d;
        let mut field = slidelimit_field::NONE;
        let mut parse = |reply: *const i64, len: usize, limits: usize| unsafe {
            slidelimit_decision_from_reply(
                reply,
                len,
                limits,
                &mut d,
                null_mut(),
                0,
                null_mut(),
                &mut field,
            )
        };
        // A reply that fits another policy: six integers for one limit.
        let six = [0i64, 0, 250, 900, 5000, 1];
        for (reply, len, limits, want) in [
            (null(), 0, 1, slidelimit_result::MalformedReply),
            (null(), 5, 1, slidelimit_result::NullPointer),
            (six.as_ptr(), 6, 1, slidelimit_result::MalformedReply),
            (six.as_ptr(), 6, 9, slidelimit_result::InvalidArgument),
        ] {
            assert_eq!(parse(reply, len, limits), want, "{len} of {limits}");
        }
        assert_eq!(field.name(), Some("limits"));
        assert_eq!(d, before);
    }

    #[test]
    fn build_call_uses_core() {
        let p = policy(Algorithm::SlidingLog, 600, 60_000);
        let mut call: *mut slidelimit_call = null_mut();
        let now = 1234u64;
        let r = unsafe {
            slidelimit_policy_build_call(
                p,
                b"t-1".as_ptr(),
                3,
                2,
                &now,
                1,
                &mut call,
                null_mut(),
                0,
                null_mut(),
                null_mut(),
            )
        };
        assert_eq!(r, slidelimit_result::Ok);
        let expected = unsafe { &*p }
            .inner
            .build_call("t-1", 2, Some(1234), Mode::Acquire)
            .unwrap();
        assert_eq!(unsafe { &(*call).inner }, &expected);
        unsafe {
            slidelimit_call_free(call);
            crate::policy::slidelimit_policy_free(p);
        }
    }

    /// Runs `slidelimit_policy_build_call_into` and reads the parts back.
    unsafe fn build_into(
        p: *const slidelimit_policy,
        tenant: &str,
        now: Option<u64>,
        buf_cap: usize,
        lens_cap: usize,
    ) -> (slidelimit_result, Vec<String>, usize, usize, usize) {
        let mut buf = vec![0u8; buf_cap];
        let mut lens = vec![0usize; lens_cap];
        let (mut keys, mut parts, mut used) = (99, 99, 99);
        let now = now.as_ref().map_or(null(), |n| n as *const u64);
        let r = slidelimit_policy_build_call_into(
            p,
            tenant.as_ptr(),
            tenant.len(),
            1,
            now,
            1,
            buf.as_mut_ptr(),
            buf_cap,
            lens.as_mut_ptr(),
            lens_cap,
            &mut keys,
            &mut parts,
            &mut used,
            null_mut(),
            0,
            null_mut(),
            null_mut(),
        );
        let mut strings = Vec::new();
        if r == slidelimit_result::Ok {
            let mut at = 0;
            for n in &lens[..parts] {
                strings.push(String::from_utf8(buf[at..at + n].to_vec()).unwrap());
                at += n;
            }
        }
        (r, strings, keys, parts, used)
    }

    #[test]
    fn build_call_into_copies_cores_call() {
        let p = policy(Algorithm::SlidingCounter, 600, 60_000);
        for now in [None, Some(1234)] {
            let expected = unsafe { &*p }
                .inner
                .build_call("t-1", 1, now, Mode::Acquire)
                .unwrap();
            let want: Vec<String> = expected
                .keys
                .iter()
                .chain(&expected.args)
                .cloned()
                .collect();
            let size: usize = want.iter().map(String::len).sum();
            // Exactly the size needed, and the documented maximum.
            for (cap, lens) in [(size, want.len()), (SLIDELIMIT_CALL_BUF_MAX, 8)] {
                let (r, parts, keys, count, used) = unsafe { build_into(p, "t-1", now, cap, lens) };
                assert_eq!(r, slidelimit_result::Ok);
                assert_eq!((parts, keys, count, used), (want.clone(), 1, 5, size));
            }
            // One byte or one part short: the sizes needed, nothing else.
            let (r, _, keys, count, used) = unsafe { build_into(p, "t-1", now, size - 1, 5) };
            assert_eq!(r, slidelimit_result::BufferTooSmall);
            assert_eq!((keys, count, used), (99, 5, size));
            let (r, _, keys, count, used) = unsafe { build_into(p, "t-1", now, size, 4) };
            assert_eq!(r, slidelimit_result::BufferTooSmall);
            assert_eq!((keys, count, used), (99, 5, size));
        }
        unsafe { crate::policy::slidelimit_policy_free(p) };
    }

    #[test]
    fn call_maxima_hold_the_largest_call() {
        let name = "n".repeat(64);
        // The bucketed window's call is the largest: a longer key tag, the
        // count in the key and a fifth ARGV.
        let policy = Policy::with_buckets(
            &name,
            &name,
            Algorithm::BucketedWindow,
            1 << 26,
            1 << 26,
            Some(2048),
        )
        .unwrap();
        let call = policy
            .build_call(&"%".repeat(512), 1 << 26, Some(MAX_NOW_MS), Mode::Acquire)
            .unwrap();
        assert_eq!(call.args.len(), 5);
        let bytes: usize = call.keys.iter().chain(&call.args).map(String::len).sum();
        assert!(bytes <= SLIDELIMIT_CALL_BUF_MAX, "{bytes}");
        assert!(call.keys.len() + call.args.len() <= SLIDELIMIT_CALL_PARTS_MAX);
    }

    /// Runs `slidelimit_server_error_map` with a large message buffer.
    fn map(
        reply: &str,
        after_retry: bool,
    ) -> (
        slidelimit_server_error_action,
        slidelimit_result,
        Option<&'static str>,
        String,
    ) {
        let key = "rl:{geocode:t}:log:1000";
        let mut action = slidelimit_server_error_action::Fail;
        let mut code = slidelimit_result::Internal;
        let mut buf = [0xAAu8; 1024];
        let mut len = 99usize;
        // Garbage a retry must clear.
        let mut field = slidelimit_field::of(Some("resource"));
        let r = unsafe {
            slidelimit_server_error_map(
                reply.as_ptr(),
                reply.len(),
                key.as_ptr(),
                key.len(),
                1,
                after_retry,
                &mut action,
                &mut code,
                buf.as_mut_ptr(),
                buf.len(),
                &mut len,
                &mut field,
                null_mut(),
                0,
                null_mut(),
                null_mut(),
            )
        };
        assert_eq!(r, slidelimit_result::Ok);
        assert_eq!(buf[len], 0);
        (
            action,
            code,
            field.name(),
            String::from_utf8(buf[..len].to_vec()).unwrap(),
        )
    }

    #[test]
    fn server_errors_map_by_cores_table() {
        use slidelimit_server_error_action::*;
        let key = "rl:{geocode:t}:log:1000";
        let replies = [
            "NOSCRIPT No matching script. Please use EVAL.",
            "MOVED 3999 127.0.0.1:7001",
            "LOADING Redis is loading the dataset in memory",
            "WRONGTYPE Operation against a key holding the wrong kind of value",
            "NOPERM User rl has no permissions to access the 'x' key",
            "ERR slidelimit invalid_argument cost: must be at least 1",
            "ERR Error running script (call to f_x): @user_script:9: boom",
            "",
        ];
        for reply in replies {
            for after_retry in [false, true] {
                let got = map(reply, after_retry);
                let want = if after_retry {
                    ServerErrorAction::Fail(map_server_error_after_retry(
                        reply,
                        key,
                        Algorithm::SlidingLog,
                    ))
                } else {
                    map_server_error(reply, key, Algorithm::SlidingLog)
                };
                match want {
                    ServerErrorAction::RetryWithEval => {
                        assert_eq!(
                            got,
                            (RetryWithEval, slidelimit_result::Ok, None, String::new())
                        )
                    }
                    ServerErrorAction::Fail(e) => {
                        assert_eq!(
                            got,
                            (Fail, e.code().into(), e.field(), e.message().to_owned())
                        );
                        let bound = reply.len() + key.len() + SLIDELIMIT_SERVER_ERROR_MESSAGE_EXTRA;
                        assert!(e.message().len() < bound, "{e}");
                    }
                }
            }
        }
        // A command that is no script call: the same table, no retry, a
        // WRONGTYPE without a key.
        for reply in replies {
            let mut code = slidelimit_result::Internal;
            let mut buf = [0xAAu8; 512];
            let mut len = 99usize;
            let mut field = slidelimit_field::of(Some("resource"));
            let r = unsafe {
                slidelimit_server_error_map_command(
                    reply.as_ptr(),
                    reply.len(),
                    &mut code,
                    buf.as_mut_ptr(),
                    buf.len(),
                    &mut len,
                    &mut field,
                )
            };
            assert_eq!(r, slidelimit_result::Ok);
            let e = map_command_error(reply);
            assert_eq!(code, e.code().into(), "{reply}");
            assert_eq!(field.name(), e.field(), "{reply}");
            assert_eq!(&buf[..len], e.message().as_bytes());
            assert_eq!(buf[len], 0);
            assert!(e.message().len() < reply.len() + SLIDELIMIT_SERVER_ERROR_MESSAGE_EXTRA);
        }
        // The disagreements the table settles: a redirect is unavailable, a
        // NOSCRIPT after the retry a script error, a WRONGTYPE names the key.
        assert_eq!(map(replies[1], false).1, slidelimit_result::Unavailable);
        assert_eq!(map(replies[0], true).1, slidelimit_result::ScriptError);
        // A script's invalid_argument names core's field; other rows none.
        let (_, code, field, _) = map(replies[5], false);
        assert_eq!(
            (code, field),
            (slidelimit_result::InvalidArgument, Some("cost"))
        );
        assert_eq!(map(replies[4], false).2, None);
        let (_, code, _, message) = map(replies[3], false);
        assert_eq!(code, slidelimit_result::WrongType);
        assert!(
            message.starts_with(&format!("key {key} holds")),
            "{message}"
        );
        assert!(message.contains("sliding_log"), "{message}");
    }
}
