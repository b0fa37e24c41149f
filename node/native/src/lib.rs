//! napi-rs addon for the `slidelimit` npm package: napi attributes over
//! `slidelimit-js-glue` (`js-glue/`), which the wasm build shares; every
//! decision comes from slidelimit-core through it, and the JS side only does
//! the I/O (ioredis). Only what is napi's own lives here: turning the glue's
//! error into a thrown JS `Error` and borrowing the reply's Float64Array.
//!
//! Every fallible function throws a JS `Error` whose `code` is the glue's
//! error tag, core's code followed by `:<field>` when a field is at fault
//! (`"invalid_argument:cost"`); the JS layer turns it into the matching
//! `SlidelimitError` subclass.

use napi::bindgen_prelude::{Error as NapiError, FromNapiValue, Result, TypeName, ValueType};
use napi::sys;
use napi_derive::napi;
use slidelimit_js_glue as glue;

fn to_js(e: glue::JsError) -> NapiError<String> {
    NapiError::new(e.tag, e.message)
}

/// What a check answered; times in milliseconds.
#[napi(object)]
pub struct Decision {
    pub allowed: bool,
    pub remaining: f64,
    pub retry_after_ms: f64,
    pub reset_after_ms: f64,
    pub now_ms: f64,
}

impl From<glue::Decision> for Decision {
    fn from(d: glue::Decision) -> Self {
        let glue::Decision {
            allowed,
            remaining,
            retry_after_ms,
            reset_after_ms,
            now_ms,
        } = d;
        Decision {
            allowed,
            remaining,
            retry_after_ms,
            reset_after_ms,
            now_ms,
        }
    }
}

/// A server error the call ends with, as thrown errors carry it: `code` is
/// the error tag.
#[napi(object)]
pub struct ServerFailure {
    pub code: String,
    pub message: String,
}

/// A validated policy (core's `Policy`).
#[napi]
pub struct Policy {
    inner: glue::Policy,
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
        glue::Policy::new(&namespace, &resource, &algorithm, limit, window_ms)
            .map(|inner| Policy { inner })
            .map_err(to_js)
    }

    #[napi(getter)]
    pub fn namespace(&self) -> String {
        self.inner.namespace()
    }

    #[napi(getter)]
    pub fn resource(&self) -> String {
        self.inner.resource()
    }

    #[napi(getter)]
    pub fn algorithm(&self) -> String {
        self.inner.algorithm()
    }

    #[napi(getter)]
    pub fn limit(&self) -> f64 {
        self.inner.limit()
    }

    #[napi(getter)]
    pub fn window_ms(&self) -> f64 {
        self.inner.window_ms()
    }

    /// The Redis key of `tenant`.
    #[napi(catch_unwind)]
    pub fn key(&self, tenant: String) -> Result<String, String> {
        self.inner.key(&tenant).map_err(to_js)
    }

    /// One call as one string (`glue::encode_call`); `now_ms` absent means Redis `TIME`.
    #[napi(catch_unwind)]
    pub fn build_call(
        &self,
        tenant: String,
        cost: f64,
        now_ms: Option<f64>,
        peek: bool,
    ) -> Result<String, String> {
        self.inner
            .build_call(&tenant, cost, now_ms, peek)
            .map_err(to_js)
    }

    /// The Lua source for EVAL after a NOSCRIPT.
    #[napi]
    pub fn script_text(&self, peek: bool) -> String {
        self.inner.script_text(peek)
    }

    /// Core's server-error table: null means send the same call once as
    /// EVAL; otherwise the error the call ends with.
    #[napi]
    pub fn map_server_error(
        &self,
        reply: String,
        key: String,
        after_retry: bool,
    ) -> Option<ServerFailure> {
        self.inner
            .map_server_error(&reply, &key, after_retry)
            .map(|e| ServerFailure {
                code: e.tag,
                message: e.message,
            })
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

/// Parses the script reply in `buf` and writes the decision over it (`glue::parse_reply`).
#[napi(catch_unwind)]
pub fn parse_reply(buf: ReplyBuf<'_>) -> Result<(), String> {
    glue::parse_reply(buf.0).map_err(to_js)
}

/// Every error code core defines, in numeric order.
#[napi]
pub fn error_codes() -> Vec<String> {
    glue::error_codes()
}

/// Core's defaults and metric names as JSON (`glue::constants_json`).
#[napi]
pub fn constants_json() -> String {
    glue::constants_json()
}

#[napi]
pub fn version() -> String {
    glue::version()
}

/// Checks the limiter's per-call timeout in ms; returns it unchanged.
#[napi(catch_unwind)]
pub fn check_timeout_ms(timeout_ms: f64) -> Result<f64, String> {
    glue::check_timeout_ms(timeout_ms).map_err(to_js)
}

#[napi]
pub fn escape_tenant(tenant: String) -> String {
    glue::escape_tenant(&tenant)
}

/// Cluster slot of a key.
#[napi]
pub fn slot(key: String) -> u32 {
    glue::slot(&key)
}

/// Core's in-memory engine: same decisions as Redis, no server.
#[napi]
#[derive(Default)]
pub struct MemoryEngine {
    inner: glue::MemoryEngine,
}

#[napi]
impl MemoryEngine {
    #[napi(constructor)]
    pub fn new() -> Self {
        Self::default()
    }

    /// Acquires `cost` permits. `now_ms` is the caller's time (absent: decide
    /// at `clock_ms`); `clock_ms` is the real clock, passed on every call: it
    /// alone expires keys, as Redis's PEXPIRE runs on the server's clock.
    #[napi(catch_unwind)]
    pub fn acquire(
        &self,
        policy: &Policy,
        tenant: String,
        cost: f64,
        now_ms: Option<f64>,
        clock_ms: f64,
    ) -> Result<Decision, String> {
        self.inner
            .check(&policy.inner, &tenant, cost, now_ms, clock_ms, false)
            .map(Decision::from)
            .map_err(to_js)
    }

    /// What `acquire` would answer with the same times, recording nothing.
    #[napi(catch_unwind)]
    pub fn peek(
        &self,
        policy: &Policy,
        tenant: String,
        cost: f64,
        now_ms: Option<f64>,
        clock_ms: f64,
    ) -> Result<Decision, String> {
        self.inner
            .check(&policy.inner, &tenant, cost, now_ms, clock_ms, true)
            .map(Decision::from)
            .map_err(to_js)
    }

    /// Forgets `tenant` under `policy`; true if anything was recorded.
    #[napi(catch_unwind)]
    pub fn reset(&self, policy: &Policy, tenant: String) -> Result<bool, String> {
        self.inner.reset(&policy.inner, &tenant).map_err(to_js)
    }

    #[napi(getter)]
    pub fn key_count(&self) -> u32 {
        self.inner.key_count()
    }
}
