//! The C ABI of slidelimit: a thin shell over `slidelimit-core`.
//!
//! Conventions (see `docs/ffi.md`):
//! - every fallible function returns a [`slidelimit_result`]; out-params are
//!   written only when it is `SLIDELIMIT_RESULT_OK`;
//! - inputs are `const`; every byte pointer is followed by its length, so no
//!   string needs a NUL terminator (a NULL pointer is fine when the length is 0);
//! - functions that can fail for a reason worth explaining take an optional
//!   caller buffer (`msg`, `msg_cap`, `msg_len`) that receives the detailed
//!   message on failure, truncated at a UTF-8 boundary and NUL-terminated;
//! - every body runs inside a panic boundary and checks its pointers for NULL;
//! - each owned type has exactly one `*_free` function, which accepts NULL.
//!
//! Nothing here decides anything: keys, validation, scripts, reply parsing,
//! error classification and the memory engine all come from core.

#![allow(non_camel_case_types)]
#![allow(clippy::missing_safety_doc)] // The safety contract of every function is in the header docs.

use slidelimit_core::{
    classify_server_error, slot, tenant_from_bytes, Algorithm, Decision, Error, ErrorCode,
    MemoryEngine, Mode, Policy, Script, ScriptCall, ServerErrorKind,
};
use std::ffi::{c_char, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::OnceLock;

/// The result of every fallible function. Values are stable and never reused:
/// 1..=7 are core's error codes with the same numbers in every binding; 100 and
/// up are errors of the C boundary itself (a misuse by the caller).
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum slidelimit_result {
    Ok = 0,
    /// A policy, tenant, cost, time or enum value that breaks the contract.
    InvalidArgument = 1,
    /// Redis could not be reached or did not answer in time.
    Unavailable = 2,
    /// Redis ran the script and it failed.
    ScriptError = 3,
    /// The key holds a type the algorithm does not use.
    WrongType = 4,
    /// The reply is not the five integers the contract promises.
    MalformedReply = 5,
    /// The server refused the command for this user (ACL).
    PermissionDenied = 6,
    /// A bug in slidelimit (for example a panic caught at the boundary).
    Internal = 7,
    /// A required pointer was NULL.
    NullPointer = 100,
    /// The caller's buffer cannot hold the output; nothing was written.
    BufferTooSmall = 101,
}

impl slidelimit_result {
    /// Every value, for the uniqueness test and for name lookups.
    const ALL: [slidelimit_result; 10] = [
        slidelimit_result::Ok,
        slidelimit_result::InvalidArgument,
        slidelimit_result::Unavailable,
        slidelimit_result::ScriptError,
        slidelimit_result::WrongType,
        slidelimit_result::MalformedReply,
        slidelimit_result::PermissionDenied,
        slidelimit_result::Internal,
        slidelimit_result::NullPointer,
        slidelimit_result::BufferTooSmall,
    ];

    fn name(self) -> &'static str {
        match self {
            slidelimit_result::Ok => "ok",
            slidelimit_result::NullPointer => "null_pointer",
            slidelimit_result::BufferTooSmall => "buffer_too_small",
            // Core owns the names of its codes.
            other => other
                .core_code()
                .map(ErrorCode::as_str)
                .unwrap_or("unknown"),
        }
    }

    fn core_code(self) -> Option<ErrorCode> {
        ErrorCode::from_u32(self as u32)
    }
}

impl From<ErrorCode> for slidelimit_result {
    fn from(code: ErrorCode) -> Self {
        // Exhaustive on purpose: a new core code must get its C value here.
        match code {
            ErrorCode::InvalidArgument => slidelimit_result::InvalidArgument,
            ErrorCode::Unavailable => slidelimit_result::Unavailable,
            ErrorCode::ScriptError => slidelimit_result::ScriptError,
            ErrorCode::WrongType => slidelimit_result::WrongType,
            ErrorCode::MalformedReply => slidelimit_result::MalformedReply,
            ErrorCode::PermissionDenied => slidelimit_result::PermissionDenied,
            ErrorCode::Internal => slidelimit_result::Internal,
        }
    }
}

/// Values of the `algorithm` parameters (passed as `uint32_t`, so that an
/// out-of-range value from C is an error instead of undefined behaviour).
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum slidelimit_algorithm {
    /// Exact: one entry per admitted permit (key tag `log`).
    SlidingLog = 1,
    /// Approximate, O(1) memory (key tag `counter`).
    SlidingCounter = 2,
}

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
}

impl From<Decision> for slidelimit_decision {
    fn from(d: Decision) -> Self {
        slidelimit_decision {
            allowed: d.allowed,
            remaining: d.remaining,
            retry_after_ms: d.retry_after_ms,
            reset_after_ms: d.reset_after_ms,
            now_ms: d.now_ms,
        }
    }
}

/// A validated policy. Made by `slidelimit_policy_new`, released by
/// `slidelimit_policy_free`. Immutable: safe to share between threads.
pub struct slidelimit_policy {
    inner: Policy,
}

/// The KEYS and ARGV of one script call. Made by
/// `slidelimit_policy_build_call`, released by `slidelimit_call_free`. Byte
/// pointers handed out by its accessors live as long as the call.
pub struct slidelimit_call {
    inner: ScriptCall,
}

/// An in-memory engine with the scripts' exact semantics (tests, single
/// process). Made by `slidelimit_memory_new`, released by
/// `slidelimit_memory_free`. Internally locked: safe to share between threads.
pub struct slidelimit_memory {
    inner: MemoryEngine,
}

/// A buffer of this many bytes always holds any key `slidelimit_policy_key`
/// can produce (64-byte names, a 512-byte tenant escaped to at most 1536).
pub const SLIDELIMIT_KEY_MAX: usize = 2048;

// ---------------------------------------------------------------------------
// Boundary plumbing.

/// Why a call failed: a result code and a message for people.
struct Failure {
    code: slidelimit_result,
    message: String,
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure {
            code: e.code().into(),
            message: e.message().to_owned(),
        }
    }
}

fn null(name: &str) -> Failure {
    Failure {
        code: slidelimit_result::NullPointer,
        message: format!("{name}: must not be NULL"),
    }
}

fn invalid(field: &'static str, problem: impl std::fmt::Display) -> Failure {
    Error::invalid(field, problem).into()
}

type Outcome = Result<(), Failure>;

/// The optional caller buffer that receives a failure's message.
#[derive(Clone, Copy)]
struct MessageOut {
    buf: *mut u8,
    cap: usize,
    len: *mut usize,
}

impl MessageOut {
    const NONE: MessageOut = MessageOut {
        buf: std::ptr::null_mut(),
        cap: 0,
        len: std::ptr::null_mut(),
    };

    /// Writes as much of `text` as fits (cut at a character boundary) and a NUL.
    unsafe fn write(self, text: &str) {
        let mut n = 0;
        if !self.buf.is_null() && self.cap > 0 {
            n = text.len().min(self.cap - 1);
            while !text.is_char_boundary(n) {
                n -= 1;
            }
            std::ptr::copy_nonoverlapping(text.as_ptr(), self.buf, n);
            *self.buf.add(n) = 0;
        }
        if !self.len.is_null() {
            *self.len = n;
        }
    }
}

/// Runs `body` inside the panic boundary and reports its failure.
fn boundary(msg: MessageOut, body: impl FnOnce() -> Outcome) -> slidelimit_result {
    let failure = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => return slidelimit_result::Ok,
        Ok(Err(failure)) => failure,
        Err(_) => Failure {
            code: slidelimit_result::Internal,
            message: "internal: a panic was caught at the C boundary (a bug in slidelimit)"
                .to_owned(),
        },
    };
    // Writing the message cannot panic: plain copies into the caller's buffer.
    unsafe { msg.write(&failure.message) };
    failure.code
}

/// A `(pointer, length)` input as a slice; NULL is fine only with length 0.
unsafe fn input<'a>(name: &str, ptr: *const u8, len: usize) -> Result<&'a [u8], Failure> {
    if len == 0 {
        Ok(&[])
    } else if ptr.is_null() {
        Err(null(name))
    } else {
        Ok(std::slice::from_raw_parts(ptr, len))
    }
}

unsafe fn input_str<'a>(
    name: &'static str,
    ptr: *const u8,
    len: usize,
) -> Result<&'a str, Failure> {
    let bytes = input(name, ptr, len)?;
    std::str::from_utf8(bytes).map_err(|e| {
        invalid(
            name,
            format!("is not valid UTF-8 (at byte {})", e.valid_up_to()),
        )
    })
}

unsafe fn tenant_input<'a>(ptr: *const u8, len: usize) -> Result<&'a str, Failure> {
    Ok(tenant_from_bytes(input("tenant", ptr, len)?)?)
}

unsafe fn reference<'a, T>(name: &str, ptr: *const T) -> Result<&'a T, Failure> {
    ptr.as_ref().ok_or_else(|| null(name))
}

/// Checks an out-pointer up front, so that nothing is computed for nothing.
fn out<T>(name: &str, ptr: *mut T) -> Result<*mut T, Failure> {
    if ptr.is_null() {
        Err(null(name))
    } else {
        Ok(ptr)
    }
}

fn parse_algorithm(value: u32) -> Result<Algorithm, Failure> {
    match value {
        v if v == slidelimit_algorithm::SlidingLog as u32 => Ok(Algorithm::SlidingLog),
        v if v == slidelimit_algorithm::SlidingCounter as u32 => Ok(Algorithm::SlidingCounter),
        other => Err(invalid(
            "algorithm",
            format!("unknown value {other} (1 = sliding_log, 2 = sliding_counter)"),
        )),
    }
}

fn parse_mode(value: u32) -> Result<Mode, Failure> {
    match value {
        v if v == slidelimit_mode::Acquire as u32 => Ok(Mode::Acquire),
        v if v == slidelimit_mode::Peek as u32 => Ok(Mode::Peek),
        other => Err(invalid(
            "mode",
            format!("unknown value {other} (1 = acquire, 2 = peek)"),
        )),
    }
}

/// Hands out a pointer into memory that outlives the call (static or owned by
/// an object the caller holds).
unsafe fn bytes_out(bytes: &[u8], out_ptr: *mut *const u8, out_len: *mut usize) -> Outcome {
    let out_ptr = out("out_ptr", out_ptr)?;
    let out_len = out("out_len", out_len)?;
    *out_ptr = bytes.as_ptr();
    *out_len = bytes.len();
    Ok(())
}

// ---------------------------------------------------------------------------
// Version and result names.

/// The version of slidelimit (core's), as a static NUL-terminated string.
#[no_mangle]
pub extern "C" fn slidelimit_version() -> *const c_char {
    static VERSION: OnceLock<CString> = OnceLock::new();
    catch_unwind(|| {
        VERSION
            .get_or_init(|| CString::new(slidelimit_core::VERSION).unwrap_or_default())
            .as_ptr()
    })
    .unwrap_or(c"".as_ptr())
}

/// The stable name of a result code (`"ok"`, `"invalid_argument"`,
/// `"unavailable"`, ..., `"null_pointer"`, `"buffer_too_small"`), the same tag
/// every binding reports; `"unknown"` for a value that is not a code. Static,
/// NUL-terminated: never free it.
#[no_mangle]
pub extern "C" fn slidelimit_result_name(code: u32) -> *const c_char {
    static NAMES: OnceLock<Vec<(u32, CString)>> = OnceLock::new();
    catch_unwind(|| {
        let names = NAMES.get_or_init(|| {
            slidelimit_result::ALL
                .iter()
                .map(|r| (*r as u32, CString::new(r.name()).unwrap_or_default()))
                .collect()
        });
        names
            .iter()
            .find(|(n, _)| *n == code)
            .map_or(c"unknown".as_ptr(), |(_, name)| name.as_ptr())
    })
    .unwrap_or(c"unknown".as_ptr())
}

/// Parses an algorithm name (`"sliding_log"`, `"sliding_counter"`) into its
/// `slidelimit_algorithm` value.
#[no_mangle]
pub unsafe extern "C" fn slidelimit_algorithm_parse(
    name: *const u8,
    name_len: usize,
    out_algorithm: *mut u32,
    msg: *mut u8,
    msg_cap: usize,
    msg_len: *mut usize,
) -> slidelimit_result {
    boundary(
        MessageOut {
            buf: msg,
            cap: msg_cap,
            len: msg_len,
        },
        || {
            let out_algorithm = out("out_algorithm", out_algorithm)?;
            let name = input_str("algorithm", name, name_len)?;
            let value = match Algorithm::parse(name)? {
                Algorithm::SlidingLog => slidelimit_algorithm::SlidingLog,
                Algorithm::SlidingCounter => slidelimit_algorithm::SlidingCounter,
            };
            *out_algorithm = value as u32;
            Ok(())
        },
    )
}

// ---------------------------------------------------------------------------
// Policy.

/// Validates a policy and returns it in `*out_policy` (release it with
/// `slidelimit_policy_free`). `ns` (the namespace) and `resource` are UTF-8 bytes;
/// `algorithm` is a `slidelimit_algorithm` value. On failure the message
/// names the field at fault.
#[no_mangle]
pub unsafe extern "C" fn slidelimit_policy_new(
    ns: *const u8,
    ns_len: usize,
    resource: *const u8,
    resource_len: usize,
    algorithm: u32,
    limit: u64,
    window_ms: u64,
    out_policy: *mut *mut slidelimit_policy,
    msg: *mut u8,
    msg_cap: usize,
    msg_len: *mut usize,
) -> slidelimit_result {
    boundary(
        MessageOut {
            buf: msg,
            cap: msg_cap,
            len: msg_len,
        },
        || {
            let out_policy = out("out_policy", out_policy)?;
            let namespace = input_str("namespace", ns, ns_len)?;
            let resource = input_str("resource", resource, resource_len)?;
            let algorithm = parse_algorithm(algorithm)?;
            let inner = Policy::new(namespace, resource, algorithm, limit, window_ms)?;
            *out_policy = Box::into_raw(Box::new(slidelimit_policy { inner }));
            Ok(())
        },
    )
}

/// Releases a policy from `slidelimit_policy_new`. NULL is ignored.
#[no_mangle]
pub unsafe extern "C" fn slidelimit_policy_free(policy: *mut slidelimit_policy) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        if !policy.is_null() {
            drop(Box::from_raw(policy));
        }
    }));
}

/// Writes the Redis key of `tenant` (UTF-8 bytes, 1..=512) under `policy`
/// into `buf` (not NUL-terminated) and its length into `*out_len`, and the
/// key's Cluster slot into `*out_slot` when that is not NULL. A buffer of
/// `SLIDELIMIT_KEY_MAX` bytes always suffices; a smaller one that cannot hold
/// the key gives `SLIDELIMIT_RESULT_BUFFER_TOO_SMALL` and writes nothing.
#[no_mangle]
pub unsafe extern "C" fn slidelimit_policy_key(
    policy: *const slidelimit_policy,
    tenant: *const u8,
    tenant_len: usize,
    buf: *mut u8,
    buf_cap: usize,
    out_len: *mut usize,
    out_slot: *mut u16,
    msg: *mut u8,
    msg_cap: usize,
    msg_len: *mut usize,
) -> slidelimit_result {
    boundary(
        MessageOut {
            buf: msg,
            cap: msg_cap,
            len: msg_len,
        },
        || {
            let policy = reference("policy", policy)?;
            let out_len = out("out_len", out_len)?;
            let tenant = tenant_input(tenant, tenant_len)?;
            let key = policy.inner.key(tenant)?;
            if key.len() > buf_cap {
                return Err(Failure {
                    code: slidelimit_result::BufferTooSmall,
                    message: format!(
                        "buf: the key needs {} bytes, buf_cap is {buf_cap}",
                        key.len()
                    ),
                });
            }
            let buf = out("buf", buf)?;
            std::ptr::copy_nonoverlapping(key.as_ptr(), buf, key.len());
            *out_len = key.len();
            if !out_slot.is_null() {
                *out_slot = slot(&key);
            }
            Ok(())
        },
    )
}

/// The Redis Cluster slot of any key (UTF-8 bytes), by Redis's hash-tag rule.
#[no_mangle]
pub unsafe extern "C" fn slidelimit_key_slot(
    key: *const u8,
    key_len: usize,
    out_slot: *mut u16,
) -> slidelimit_result {
    boundary(MessageOut::NONE, || {
        let out_slot = out("out_slot", out_slot)?;
        let key = input_str("key", key, key_len)?;
        *out_slot = slot(key);
        Ok(())
    })
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

// ---------------------------------------------------------------------------
// One call.

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
) -> slidelimit_result {
    boundary(
        MessageOut {
            buf: msg,
            cap: msg_cap,
            len: msg_len,
        },
        || {
            let policy = reference("policy", policy)?;
            let out_call = out("out_call", out_call)?;
            let tenant = tenant_input(tenant, tenant_len)?;
            let mode = parse_mode(mode)?;
            let inner = policy
                .inner
                .build_call(tenant, cost, now_ms.as_ref().copied(), mode)?;
            *out_call = Box::into_raw(Box::new(slidelimit_call { inner }));
            Ok(())
        },
    )
}

/// Releases a call from `slidelimit_policy_build_call`. NULL is ignored.
#[no_mangle]
pub unsafe extern "C" fn slidelimit_call_free(call: *mut slidelimit_call) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        if !call.is_null() {
            drop(Box::from_raw(call));
        }
    }));
}

/// The number of KEYS of a call (1 for every current script).
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
        let key = call.inner.keys.get(index).ok_or_else(|| {
            invalid(
                "index",
                format!("{index} is out of range for {} keys", call.inner.keys.len()),
            )
        })?;
        bytes_out(key.as_bytes(), out_ptr, out_len)
    })
}

/// The number of ARGV of a call (4: limit, window_ms, cost, now_ms).
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
        let arg = call.inner.args.get(index).ok_or_else(|| {
            invalid(
                "index",
                format!("{index} is out of range for {} args", call.inner.args.len()),
            )
        })?;
        bytes_out(arg.as_bytes(), out_ptr, out_len)
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

/// Parses a script reply, given as its integers (`reply` may be NULL when
/// `reply_len` is 0), into `*out_decision`. Anything but a consistent
/// five-integer reply is `SLIDELIMIT_RESULT_MALFORMED_REPLY`. A reply element
/// that is not an integer at all is for the caller to report as malformed.
#[no_mangle]
pub unsafe extern "C" fn slidelimit_decision_from_reply(
    reply: *const i64,
    reply_len: usize,
    out_decision: *mut slidelimit_decision,
    msg: *mut u8,
    msg_cap: usize,
    msg_len: *mut usize,
) -> slidelimit_result {
    boundary(
        MessageOut {
            buf: msg,
            cap: msg_cap,
            len: msg_len,
        },
        || {
            let out_decision = out("out_decision", out_decision)?;
            let reply: &[i64] = if reply_len == 0 {
                &[]
            } else if reply.is_null() {
                return Err(null("reply"));
            } else {
                std::slice::from_raw_parts(reply, reply_len)
            };
            *out_decision = Decision::from_reply(reply)?.into();
            Ok(())
        },
    )
}

/// Classifies the text of a Redis error reply (any bytes; invalid UTF-8 is
/// replaced) so every binding treats the same server error the same way.
/// `*out_code` is the code to report when the binding gives up on it:
/// unavailable for redirects and transient errors, script_error for a
/// NOSCRIPT that survived the one retry, the final code otherwise.
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

// ---------------------------------------------------------------------------
// Memory engine.

/// Makes an empty in-memory engine in `*out_memory` (release it with
/// `slidelimit_memory_free`).
#[no_mangle]
pub unsafe extern "C" fn slidelimit_memory_new(
    out_memory: *mut *mut slidelimit_memory,
) -> slidelimit_result {
    boundary(MessageOut::NONE, || {
        let out_memory = out("out_memory", out_memory)?;
        *out_memory = Box::into_raw(Box::new(slidelimit_memory {
            inner: MemoryEngine::new(),
        }));
        Ok(())
    })
}

/// Releases an engine from `slidelimit_memory_new`. NULL is ignored.
#[no_mangle]
pub unsafe extern "C" fn slidelimit_memory_free(memory: *mut slidelimit_memory) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        if !memory.is_null() {
            drop(Box::from_raw(memory));
        }
    }));
}

#[allow(clippy::too_many_arguments)] // Mirrors the C signatures it serves.
unsafe fn memory_check(
    memory: *const slidelimit_memory,
    policy: *const slidelimit_policy,
    tenant: *const u8,
    tenant_len: usize,
    cost: u64,
    now_ms: u64,
    mode: Mode,
    out_decision: *mut slidelimit_decision,
) -> Outcome {
    let memory = reference("memory", memory)?;
    let policy = reference("policy", policy)?;
    let out_decision = out("out_decision", out_decision)?;
    let tenant = tenant_input(tenant, tenant_len)?;
    let decision = match mode {
        Mode::Acquire => memory.inner.acquire(&policy.inner, tenant, cost, now_ms)?,
        Mode::Peek => memory.inner.peek(&policy.inner, tenant, cost, now_ms)?,
    };
    *out_decision = decision.into();
    Ok(())
}

/// Acquires `cost` permits for `tenant` at `now_ms` in the memory engine.
#[no_mangle]
pub unsafe extern "C" fn slidelimit_memory_acquire(
    memory: *const slidelimit_memory,
    policy: *const slidelimit_policy,
    tenant: *const u8,
    tenant_len: usize,
    cost: u64,
    now_ms: u64,
    out_decision: *mut slidelimit_decision,
    msg: *mut u8,
    msg_cap: usize,
    msg_len: *mut usize,
) -> slidelimit_result {
    boundary(
        MessageOut {
            buf: msg,
            cap: msg_cap,
            len: msg_len,
        },
        || {
            memory_check(
                memory,
                policy,
                tenant,
                tenant_len,
                cost,
                now_ms,
                Mode::Acquire,
                out_decision,
            )
        },
    )
}

/// What `slidelimit_memory_acquire` would answer, recording nothing.
#[no_mangle]
pub unsafe extern "C" fn slidelimit_memory_peek(
    memory: *const slidelimit_memory,
    policy: *const slidelimit_policy,
    tenant: *const u8,
    tenant_len: usize,
    cost: u64,
    now_ms: u64,
    out_decision: *mut slidelimit_decision,
    msg: *mut u8,
    msg_cap: usize,
    msg_len: *mut usize,
) -> slidelimit_result {
    boundary(
        MessageOut {
            buf: msg,
            cap: msg_cap,
            len: msg_len,
        },
        || {
            memory_check(
                memory,
                policy,
                tenant,
                tenant_len,
                cost,
                now_ms,
                Mode::Peek,
                out_decision,
            )
        },
    )
}

/// Forgets everything recorded for `tenant` under `policy`;
/// `*out_removed` tells whether anything was.
#[no_mangle]
pub unsafe extern "C" fn slidelimit_memory_reset(
    memory: *const slidelimit_memory,
    policy: *const slidelimit_policy,
    tenant: *const u8,
    tenant_len: usize,
    out_removed: *mut bool,
    msg: *mut u8,
    msg_cap: usize,
    msg_len: *mut usize,
) -> slidelimit_result {
    boundary(
        MessageOut {
            buf: msg,
            cap: msg_cap,
            len: msg_len,
        },
        || {
            let memory = reference("memory", memory)?;
            let policy = reference("policy", policy)?;
            let out_removed = out("out_removed", out_removed)?;
            let tenant = tenant_input(tenant, tenant_len)?;
            *out_removed = memory.inner.reset(&policy.inner, tenant)?;
            Ok(())
        },
    )
}

/// The number of keys the engine holds (expired ones until they are swept).
#[no_mangle]
pub unsafe extern "C" fn slidelimit_memory_key_count(
    memory: *const slidelimit_memory,
    out_count: *mut usize,
) -> slidelimit_result {
    boundary(MessageOut::NONE, || {
        let memory = reference("memory", memory)?;
        *out("out_count", out_count)? = memory.inner.key_count();
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;
    use std::ptr::{null, null_mut};

    #[test]
    fn result_codes_are_unique_and_match_core() {
        let mut values: Vec<u32> = slidelimit_result::ALL.iter().map(|r| *r as u32).collect();
        values.sort_unstable();
        values.dedup();
        assert_eq!(values.len(), slidelimit_result::ALL.len());
        for code in ErrorCode::ALL {
            let ours = slidelimit_result::from(code);
            assert_eq!(ours as u32, code.as_u32(), "{code}");
            assert_eq!(ours.name(), code.as_str());
        }
        // The boundary's own codes are outside core's range.
        assert!(ErrorCode::from_u32(slidelimit_result::NullPointer as u32).is_none());
        assert!(ErrorCode::from_u32(slidelimit_result::BufferTooSmall as u32).is_none());
        let mut names: Vec<&str> = slidelimit_result::ALL.iter().map(|r| r.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), slidelimit_result::ALL.len());
    }

    #[test]
    fn result_names_are_static_c_strings() {
        let name = |c: u32| {
            unsafe { CStr::from_ptr(slidelimit_result_name(c)) }
                .to_str()
                .unwrap()
        };
        assert_eq!(name(0), "ok");
        assert_eq!(name(1), "invalid_argument");
        assert_eq!(name(7), "internal");
        assert_eq!(name(101), "buffer_too_small");
        assert_eq!(name(8), "unknown");
        let version = unsafe { CStr::from_ptr(slidelimit_version()) };
        assert_eq!(version.to_str().unwrap(), slidelimit_core::VERSION);
    }

    #[test]
    fn panics_become_internal_with_a_message() {
        let mut buf = [0xAAu8; 128];
        let mut len = 0usize;
        let msg = MessageOut {
            buf: buf.as_mut_ptr(),
            cap: buf.len(),
            len: &mut len,
        };
        let r = boundary(msg, || panic!("boom"));
        assert_eq!(r, slidelimit_result::Internal);
        assert!(std::str::from_utf8(&buf[..len])
            .unwrap()
            .starts_with("internal:"));
        assert_eq!(buf[len], 0);
    }

    #[test]
    fn messages_are_cut_at_a_character_boundary() {
        let mut buf = [0xAAu8; 4];
        let mut len = 99usize;
        let msg = MessageOut {
            buf: buf.as_mut_ptr(),
            cap: buf.len(),
            len: &mut len,
        };
        // "aé" is 3 bytes; "aéé" needs 5: only "aé" and the NUL fit.
        unsafe { msg.write("aéé") };
        assert_eq!(len, 3);
        assert_eq!(&buf[..4], "aé\0".as_bytes());
    }

    #[test]
    fn key_max_holds_the_largest_key() {
        let name = "n".repeat(64);
        let policy = Policy::new(&name, &name, Algorithm::SlidingCounter, 1, 1 << 52).unwrap();
        let worst = policy.key(&"%".repeat(512)).unwrap();
        assert!(worst.len() <= SLIDELIMIT_KEY_MAX, "{}", worst.len());
    }

    #[test]
    fn out_params_are_untouched_on_failure() {
        let mut policy: *mut slidelimit_policy = null_mut();
        let mut buf = [0u8; 64];
        let mut len = 0usize;
        let r = unsafe {
            slidelimit_policy_new(
                b"rl".as_ptr(),
                2,
                b"geo".as_ptr(),
                3,
                1,
                0,
                1000,
                &mut policy,
                buf.as_mut_ptr(),
                buf.len(),
                &mut len,
            )
        };
        assert_eq!(r, slidelimit_result::InvalidArgument);
        assert!(policy.is_null());
        assert!(std::str::from_utf8(&buf[..len])
            .unwrap()
            .starts_with("limit:"));

        let mut d = slidelimit_decision {
            allowed: true,
            remaining: 9,
            retry_after_ms: 9,
            reset_after_ms: 9,
            now_ms: 9,
        };
        let before = d;
        let r =
            unsafe { slidelimit_decision_from_reply(null(), 0, &mut d, null_mut(), 0, null_mut()) };
        assert_eq!(r, slidelimit_result::MalformedReply);
        assert_eq!(d, before);
        let r =
            unsafe { slidelimit_decision_from_reply(null(), 5, &mut d, null_mut(), 0, null_mut()) };
        assert_eq!(r, slidelimit_result::NullPointer);
    }

    #[test]
    fn build_call_uses_core() {
        let p = Box::into_raw(Box::new(slidelimit_policy {
            inner: Policy::new("rl", "geocode", Algorithm::SlidingLog, 600, 60_000).unwrap(),
        }));
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
            slidelimit_policy_free(p);
        }
    }
}
