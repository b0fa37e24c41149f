//! napi-rs addon for the `slidelimit` npm package: napi attributes over
//! `slidelimit-js-glue` (`js-glue/`), which the wasm build shares; every
//! decision comes from slidelimit-core through it, and the JS side only does
//! the I/O (ioredis). Only what is napi's own lives here: turning the glue's
//! error into a thrown JS `Error`, reading reply elements of any JS type and
//! borrowing the reply's Float64Array.
//!
//! Every fallible function throws a JS `Error` whose `code` is core's code
//! and whose `field` names the field at fault, if any; the JS layer picks the
//! matching `SlidelimitError` subclass.

use napi::bindgen_prelude::{
    Env, Error as NapiError, FromNapiValue, JsObjectValue, JsValue, Result, Status, TypeName,
    Unknown, ValueType,
};
use napi::sys;
use napi_derive::napi;
use slidelimit_js_glue as glue;

/// The glue's error as an `Error` object with `code` and `field` set (a
/// napi `Error` alone carries one string as `code`).
fn to_js(env: &Env, e: glue::JsError) -> NapiError {
    let build = || -> Result<NapiError> {
        let mut err =
            env.create_error(NapiError::new(Status::GenericFailure, e.message.as_str()))?;
        err.set_named_property("code", e.code)?;
        if let Some(field) = e.field {
            err.set_named_property("field", field)?;
        }
        Ok(NapiError::from(err.to_unknown()))
    };
    build().unwrap_or_else(|failed| failed)
}

/// What a check answered; times in milliseconds. `deniedBy` is null unless
/// a policy of several limits denied.
#[napi(object, use_nullable = true)]
pub struct Decision {
    pub allowed: bool,
    pub remaining: f64,
    pub retry_after_ms: f64,
    pub reset_after_ms: f64,
    pub now_ms: f64,
    pub denied_by: Option<f64>,
}

impl From<glue::Decision> for Decision {
    fn from(d: glue::Decision) -> Self {
        let glue::Decision {
            allowed,
            remaining,
            retry_after_ms,
            reset_after_ms,
            now_ms,
            denied_by,
        } = d;
        Decision {
            allowed,
            remaining,
            retry_after_ms,
            reset_after_ms,
            now_ms,
            denied_by,
        }
    }
}

/// A server error the call ends with, as thrown errors carry it.
#[napi(object)]
pub struct ServerFailure {
    pub code: String,
    pub field: Option<String>,
    pub message: String,
}

impl From<glue::JsError> for ServerFailure {
    fn from(e: glue::JsError) -> Self {
        ServerFailure {
            code: e.code.to_owned(),
            field: e.field.map(str::to_owned),
            message: e.message,
        }
    }
}

/// Core's table for an error reply to a command that is no script call
/// (`DEL` for a reset): the error the command ends with.
#[napi]
pub fn map_command_error(reply: String) -> ServerFailure {
    glue::map_command_error(&reply).into()
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
        env: &Env,
        namespace: String,
        resource: String,
        algorithm: String,
        limit: f64,
        window_ms: f64,
        buckets: Option<f64>,
    ) -> Result<Self> {
        glue::Policy::new(&namespace, &resource, &algorithm, limit, window_ms, buckets)
            .map(|inner| Policy { inner })
            .map_err(|e| to_js(env, e))
    }

    /// A policy of one or several limits, one list per field (`buckets`:
    /// null or undefined where a limit names none).
    #[napi(factory, catch_unwind)]
    pub fn with_limits(
        env: &Env,
        namespace: String,
        resource: String,
        algorithms: Vec<String>,
        limits: Vec<f64>,
        windows: Vec<f64>,
        buckets: Vec<Option<f64>>,
    ) -> Result<Self> {
        glue::Policy::with_limit_columns(
            &namespace, &resource, algorithms, &limits, &windows, &buckets,
        )
        .map(|inner| Policy { inner })
        .map_err(|e| to_js(env, e))
    }

    /// The Redis key of `tenant` (the first limit's).
    #[napi(catch_unwind)]
    pub fn key(&self, env: &Env, tenant: String) -> Result<String> {
        self.inner.key(&tenant).map_err(|e| to_js(env, e))
    }

    /// Every limit's Redis key of `tenant`: what a reset deletes.
    #[napi(catch_unwind)]
    pub fn keys(&self, env: &Env, tenant: String) -> Result<Vec<String>> {
        self.inner.keys(&tenant).map_err(|e| to_js(env, e))
    }

    /// One call as one string (`glue::encode_call`); `now_ms` absent means Redis `TIME`.
    #[napi(catch_unwind)]
    pub fn build_call(
        &self,
        env: &Env,
        tenant: String,
        cost: f64,
        now_ms: Option<f64>,
        peek: bool,
    ) -> Result<String> {
        self.inner
            .build_call(&tenant, cost, now_ms, peek)
            .map_err(|e| to_js(env, e))
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
            .map(ServerFailure::from)
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

/// Parses the reply in `buf` of a script for a policy of `limits` limits and
/// writes the decision over it (`glue::parse_reply`).
#[napi(catch_unwind)]
pub fn parse_reply(env: &Env, buf: ReplyBuf<'_>, limits: u32) -> Result<()> {
    glue::parse_reply(buf.0, limits).map_err(|e| to_js(env, e))
}

/// Parses a script reply whose elements may be of any JS type (strings from
/// ioredis `stringNumbers`): `glue::parse_reply_values`.
#[napi(catch_unwind)]
pub fn parse_reply_values(env: &Env, values: Vec<Unknown<'_>>, limits: u32) -> Result<Decision> {
    let values = values
        .iter()
        .map(|v| {
            // SAFETY (both casts): the value was just found to be of that type.
            Ok(match v.get_type()? {
                ValueType::Number => glue::ReplyValue::Number(unsafe { v.cast::<f64>() }?),
                ValueType::String => glue::ReplyValue::Text(unsafe { v.cast::<String>() }?),
                _ => glue::ReplyValue::Other,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    glue::parse_reply_values(&values, limits)
        .map(Decision::from)
        .map_err(|e| to_js(env, e))
}

/// Checks the limiter's per-call timeout in ms; returns it unchanged.
#[napi(catch_unwind)]
pub fn check_timeout_ms(env: &Env, timeout_ms: f64) -> Result<f64> {
    glue::check_timeout_ms(timeout_ms).map_err(|e| to_js(env, e))
}

/// Core's in-memory engine: same decisions as Redis, no server.
#[napi]
#[derive(Default)]
pub struct MemoryEngine {
    inner: glue::MemoryEngine,
}

#[napi]
impl MemoryEngine {
    /// Acquires `cost` permits. `now_ms` is the caller's time (absent: decide
    /// at `clock_ms`); `clock_ms` is the real clock, passed on every call: it
    /// alone expires keys, as Redis's PEXPIRE runs on the server's clock.
    #[napi(catch_unwind)]
    pub fn acquire(
        &self,
        env: &Env,
        policy: &Policy,
        tenant: String,
        cost: f64,
        now_ms: Option<f64>,
        clock_ms: f64,
    ) -> Result<Decision> {
        self.inner
            .check(&policy.inner, &tenant, cost, now_ms, clock_ms, false)
            .map(Decision::from)
            .map_err(|e| to_js(env, e))
    }

    /// What `acquire` would answer with the same times, recording nothing.
    #[napi(catch_unwind)]
    pub fn peek(
        &self,
        env: &Env,
        policy: &Policy,
        tenant: String,
        cost: f64,
        now_ms: Option<f64>,
        clock_ms: f64,
    ) -> Result<Decision> {
        self.inner
            .check(&policy.inner, &tenant, cost, now_ms, clock_ms, true)
            .map(Decision::from)
            .map_err(|e| to_js(env, e))
    }

    /// Forgets `tenant` under `policy`; true if anything was recorded.
    #[napi(catch_unwind)]
    pub fn reset(&self, env: &Env, policy: &Policy, tenant: String) -> Result<bool> {
        self.inner
            .reset(&policy.inner, &tenant)
            .map_err(|e| to_js(env, e))
    }
}

/// Core's local deny cache of one limiter (`glue::DenyCache`).
#[napi]
pub struct DenyCache {
    inner: glue::DenyCache,
}

#[napi]
impl DenyCache {
    /// A cache of `capacity` tenants; absent: core's default.
    #[napi(constructor, catch_unwind)]
    pub fn new(env: &Env, capacity: Option<f64>) -> Result<Self> {
        glue::DenyCache::new(capacity)
            .map(|inner| DenyCache { inner })
            .map_err(|e| to_js(env, e))
    }

    /// The local denial of an acquire on server time, or null: ask Redis.
    #[napi(catch_unwind)]
    pub fn check(
        &mut self,
        env: &Env,
        tenant: String,
        cost: f64,
        mono_ms: f64,
    ) -> Result<Option<Decision>> {
        self.inner
            .check(&tenant, cost, mono_ms)
            .map(|d| d.map(Decision::from))
            .map_err(|e| to_js(env, e))
    }

    /// Notes Redis's decision for an acquire on server time; returns the tenants held.
    #[allow(clippy::too_many_arguments)]
    #[napi(catch_unwind)]
    pub fn record(
        &mut self,
        env: &Env,
        tenant: String,
        cost: f64,
        allowed: bool,
        remaining: f64,
        retry_after_ms: f64,
        reset_after_ms: f64,
        now_ms: f64,
        denied_by: Option<f64>,
        mono_ms: f64,
        latest_sent_ms: Option<f64>,
    ) -> Result<u32> {
        let decision = glue::Decision {
            allowed,
            remaining,
            retry_after_ms,
            reset_after_ms,
            now_ms,
            denied_by,
        };
        self.inner
            .record(&tenant, cost, decision, mono_ms, latest_sent_ms)
            .map_err(|e| to_js(env, e))
    }
}

// The getters and one-call functions both shells have (js-glue/src/shells.rs);
// after the structs, which napi must have seen before their impl blocks.
glue::shared_exports!(napi);
