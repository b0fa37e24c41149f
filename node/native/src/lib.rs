//! napi-rs addon for the `slidelimit` npm package: a thin shell over
//! slidelimit-core. Key naming, validation, call building, reply parsing and
//! error codes all come from core; the JS side only does the I/O (ioredis).
//!
//! Every fallible function throws a JS `Error` whose `code` is core's code
//! string, followed by `:<field>` when a field is at fault
//! (`"invalid_argument:cost"`); the JS layer turns it into the matching
//! `SlidelimitError` subclass.
//!
//! The hot path crosses the boundary twice per check and keeps the number of
//! JS values made here small, since each costs more than core's own work:
//! `buildCall` returns the call as one string (see [`encode_call`]) and
//! `parseReply` reads the reply from a Float64Array and writes the decision
//! back into it.

use napi::bindgen_prelude::{Error as NapiError, FromNapiValue, Result, TypeName, ValueType};
use napi::sys;
use napi_derive::napi;
use slidelimit_core as sl;

fn to_js(e: sl::Error) -> NapiError<String> {
    let status = match e.field() {
        Some(field) => format!("{}:{field}", e.code().as_str()),
        None => e.code().as_str().to_owned(),
    };
    NapiError::new(status, e.message())
}

/// The largest integer a JS number holds exactly.
const MAX_SAFE: f64 = 9_007_199_254_740_992.0; // 2^53

/// What a check answered; times in milliseconds.
#[napi(object)]
pub struct Decision {
    pub allowed: bool,
    pub remaining: f64,
    pub retry_after_ms: f64,
    pub reset_after_ms: f64,
    pub now_ms: f64,
}

impl From<sl::Decision> for Decision {
    fn from(d: sl::Decision) -> Self {
        // Every field is below 2^53 by core's construction, so f64 is exact.
        Decision {
            allowed: d.allowed,
            remaining: d.remaining as f64,
            retry_after_ms: d.retry_after_ms as f64,
            reset_after_ms: d.reset_after_ms as f64,
            now_ms: d.now_ms as f64,
        }
    }
}

/// Separates the fields of an encoded call. It cannot occur in any field:
/// SHA1s and ARGV are ASCII digits and hex, and keys percent-encode bytes
/// below 0x21.
const CALL_SEPARATOR: char = '\0';

/// A call as `sha1 NUL numkeys NUL key... NUL arg...`: one JS string instead
/// of an object, two arrays and six strings.
fn encode_call(call: &sl::ScriptCall) -> String {
    let mut out = String::with_capacity(128);
    out.push_str(call.script.sha1());
    out.push(CALL_SEPARATOR);
    out.push_str(&call.keys.len().to_string());
    for field in call.keys.iter().chain(&call.args) {
        out.push(CALL_SEPARATOR);
        out.push_str(field);
    }
    out
}

/// Core's decision in field order (allowed as 0 or 1), as f64: every field
/// is below 2^53 by core's construction, so the conversion is exact.
fn decision_fields(d: &sl::Decision) -> [f64; sl::REPLY_LEN] {
    [
        f64::from(u8::from(d.allowed)),
        d.remaining as f64,
        d.retry_after_ms as f64,
        d.reset_after_ms as f64,
        d.now_ms as f64,
    ]
}

/// A reply element as an integer; a non-integer is `malformed_reply`.
fn reply_int(i: usize, v: f64) -> sl::Result<i64> {
    if v.is_finite() && v.fract() == 0.0 && v.abs() <= MAX_SAFE {
        Ok(v as i64)
    } else {
        Err(sl::Error::new(
            sl::ErrorCode::MalformedReply,
            format!("script reply element {i} is not an integer"),
        ))
    }
}

/// What the caller must do with a Redis error reply.
#[napi(object)]
pub struct ServerError {
    /// `noscript`, `redirect`, `transient` or `final`.
    pub kind: String,
    /// The error code for `transient` (unavailable) and `final`.
    pub code: Option<String>,
}

/// A validated policy (core's `Policy`).
#[napi]
pub struct Policy {
    inner: sl::Policy,
}

fn mode(peek: bool) -> sl::Mode {
    if peek {
        sl::Mode::Peek
    } else {
        sl::Mode::Acquire
    }
}

#[napi]
impl Policy {
    #[napi(constructor, catch_unwind)]
    pub fn new(
        namespace: String,
        resource: String,
        algorithm: String,
        limit: f64,
        window_ms: f64,
    ) -> Result<Self, String> {
        let build = || -> sl::Result<sl::Policy> {
            let algorithm = sl::Algorithm::parse(&algorithm)?;
            let limit = sl::u64_from_f64("limit", limit)?;
            let window_ms = sl::u64_from_f64("window_ms", window_ms)?;
            sl::Policy::new(&namespace, &resource, algorithm, limit, window_ms)
        };
        build().map(|inner| Policy { inner }).map_err(to_js)
    }

    #[napi(getter)]
    pub fn namespace(&self) -> String {
        self.inner.namespace().to_owned()
    }

    #[napi(getter)]
    pub fn resource(&self) -> String {
        self.inner.resource().to_owned()
    }

    #[napi(getter)]
    pub fn algorithm(&self) -> String {
        self.inner.algorithm().as_str().to_owned()
    }

    #[napi(getter)]
    pub fn limit(&self) -> f64 {
        self.inner.limit() as f64
    }

    #[napi(getter)]
    pub fn window_ms(&self) -> f64 {
        self.inner.window_ms() as f64
    }

    /// The Redis key of `tenant`.
    #[napi(catch_unwind)]
    pub fn key(&self, tenant: String) -> Result<String, String> {
        self.inner.key(&tenant).map_err(to_js)
    }

    /// Validates tenant, cost and time and builds one call, encoded by
    /// [`encode_call`]; `now_ms` absent means Redis `TIME`.
    #[napi(catch_unwind)]
    pub fn build_call(
        &self,
        tenant: String,
        cost: f64,
        now_ms: Option<f64>,
        peek: bool,
    ) -> Result<String, String> {
        let build = || -> sl::Result<sl::ScriptCall> {
            let cost = sl::u64_from_f64("cost", cost)?;
            let now_ms = now_ms.map(|n| sl::u64_from_f64("now_ms", n)).transpose()?;
            self.inner.build_call(&tenant, cost, now_ms, mode(peek))
        };
        build().map(|call| encode_call(&call)).map_err(to_js)
    }

    /// The Lua source for EVAL after a NOSCRIPT.
    #[napi]
    pub fn script_text(&self, peek: bool) -> String {
        sl::Script::new(self.inner.algorithm(), mode(peek))
            .text()
            .to_owned()
    }
}

/// A Float64Array borrowed as a slice for one call. napi's `Float64Array`
/// takes and drops a reference to the array on every call, which cost more
/// than the parse itself; `#[napi]` functions cannot take `&mut [f64]`
/// directly (it would be read as a class reference), hence the newtype.
pub struct ReplyBuf<'a>(&'a mut [f64]);

impl FromNapiValue for ReplyBuf<'_> {
    unsafe fn from_napi_value(env: sys::napi_env, value: sys::napi_value) -> Result<Self> {
        // SAFETY: napi's own conversion; JS is blocked in this call, so the
        // array's memory is neither touched nor moved while the slice lives.
        unsafe { <&mut [f64]>::from_napi_value(env, value) }.map(ReplyBuf)
    }
}

impl TypeName for ReplyBuf<'_> {
    fn type_name() -> &'static str {
        "Float64Array"
    }

    fn value_type() -> ValueType {
        ValueType::Object
    }
}

/// Parses the script reply held in `buf` (elements that were not numbers
/// arrive as NaN) and, when it is valid, writes the decision over it in field
/// order; a valid reply has exactly as many elements as a decision has fields.
#[napi(catch_unwind)]
pub fn parse_reply(buf: ReplyBuf<'_>) -> Result<(), String> {
    let fields = buf.0;
    let parse = |fields: &[f64]| -> sl::Result<sl::Decision> {
        let reply = fields
            .iter()
            .enumerate()
            .map(|(i, v)| reply_int(i, *v))
            .collect::<sl::Result<Vec<i64>>>()?;
        sl::Decision::from_reply(&reply)
    };
    let decision = parse(fields).map_err(to_js)?;
    fields.copy_from_slice(&decision_fields(&decision));
    Ok(())
}

/// Classifies the text of a Redis error reply (core's rule, shared by every binding).
#[napi]
pub fn classify_server_error(message: String) -> ServerError {
    let (kind, code) = match sl::classify_server_error(&message) {
        sl::ServerErrorKind::NoScript => ("noscript", None),
        sl::ServerErrorKind::Redirect => ("redirect", None),
        sl::ServerErrorKind::Transient => ("transient", Some(sl::ErrorCode::Unavailable)),
        sl::ServerErrorKind::Final(code) => ("final", Some(code)),
    };
    ServerError {
        kind: kind.to_owned(),
        code: code.map(|c| c.as_str().to_owned()),
    }
}

/// Every error code core defines, in numeric order.
#[napi]
pub fn error_codes() -> Vec<String> {
    sl::ErrorCode::ALL
        .iter()
        .map(|c| c.as_str().to_owned())
        .collect()
}

#[napi]
pub fn version() -> String {
    sl::VERSION.to_owned()
}

#[napi]
pub fn escape_tenant(tenant: String) -> String {
    sl::escape_tenant(&tenant)
}

/// Cluster slot of a key.
#[napi]
pub fn slot(key: String) -> u32 {
    u32::from(sl::slot(&key))
}

/// Core's in-memory engine: same decisions as Redis, no server.
#[napi]
#[derive(Default)]
pub struct MemoryEngine {
    inner: sl::MemoryEngine,
}

#[napi]
impl MemoryEngine {
    #[napi(constructor)]
    pub fn new() -> Self {
        Self::default()
    }

    #[napi(catch_unwind)]
    pub fn acquire(
        &self,
        policy: &Policy,
        tenant: String,
        cost: f64,
        now_ms: f64,
    ) -> Result<Decision, String> {
        self.run(policy, tenant, cost, now_ms, false)
    }

    #[napi(catch_unwind)]
    pub fn peek(
        &self,
        policy: &Policy,
        tenant: String,
        cost: f64,
        now_ms: f64,
    ) -> Result<Decision, String> {
        self.run(policy, tenant, cost, now_ms, true)
    }

    /// Forgets `tenant` under `policy`; true if anything was recorded.
    #[napi(catch_unwind)]
    pub fn reset(&self, policy: &Policy, tenant: String) -> Result<bool, String> {
        self.inner.reset(&policy.inner, &tenant).map_err(to_js)
    }

    #[napi(getter)]
    pub fn key_count(&self) -> u32 {
        u32::try_from(self.inner.key_count()).unwrap_or(u32::MAX)
    }

    fn run(
        &self,
        policy: &Policy,
        tenant: String,
        cost: f64,
        now_ms: f64,
        peek: bool,
    ) -> Result<Decision, String> {
        let run = || -> sl::Result<sl::Decision> {
            let cost = sl::u64_from_f64("cost", cost)?;
            let now_ms = sl::u64_from_f64("now_ms", now_ms)?;
            if peek {
                self.inner.peek(&policy.inner, &tenant, cost, now_ms)
            } else {
                self.inner.acquire(&policy.inner, &tenant, cost, now_ms)
            }
        };
        run().map(Decision::from).map_err(to_js)
    }
}
