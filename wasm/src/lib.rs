//! wasm-bindgen build of slidelimit-core with the same surface as the napi
//! addon in `node/native`, so the `slidelimit` npm package runs on either:
//! wasm-bindgen attributes over `slidelimit-js-glue` (`js-glue/`), which the
//! addon shares. Only what is wasm-bindgen's own lives here: turning the
//! glue's error into a JS `Error`, reply elements into the glue's values and
//! the decision into a plain object.
//!
//! Errors are JS `Error`s whose `code` is core's code and whose `field` names
//! the field at fault, if any.

use js_sys::{Object, Reflect};
use slidelimit_js_glue as glue;
use wasm_bindgen::prelude::*;

fn to_js(e: glue::JsError) -> JsValue {
    let err = js_sys::Error::new(&e.message);
    // Setting a property on a fresh Error object cannot fail.
    let _ = Reflect::set(&err, &"code".into(), &e.code.into());
    if let Some(field) = e.field {
        let _ = Reflect::set(&err, &"field".into(), &field.into());
    }
    err.into()
}

/// The decision as a plain object, the same shape the napi addon returns.
fn decision(d: glue::Decision) -> JsValue {
    let obj = Object::new();
    for (key, value) in [
        ("allowed", JsValue::from(d.allowed)),
        ("remaining", d.remaining.into()),
        ("retryAfterMs", d.retry_after_ms.into()),
        ("resetAfterMs", d.reset_after_ms.into()),
        ("nowMs", d.now_ms.into()),
        ("deniedBy", d.denied_by.map_or(JsValue::NULL, JsValue::from)),
    ] {
        // Defining a property on a plain object we just made cannot fail.
        let _ = Reflect::set(&obj, &JsValue::from_str(key), &value);
    }
    obj.into()
}

/// A validated policy (core's `Policy`).
#[wasm_bindgen]
pub struct Policy {
    inner: glue::Policy,
}

#[wasm_bindgen]
impl Policy {
    #[wasm_bindgen(constructor)]
    pub fn new(
        namespace: &str,
        resource: &str,
        algorithm: &str,
        limit: f64,
        window_ms: f64,
        buckets: Option<f64>,
    ) -> Result<Policy, JsValue> {
        glue::Policy::new(namespace, resource, algorithm, limit, window_ms, buckets)
            .map(|inner| Policy { inner })
            .map_err(to_js)
    }

    /// A policy of one or several limits, one list per field (`buckets`:
    /// null or undefined where a limit names none).
    #[wasm_bindgen(js_name = withLimits)]
    pub fn with_limits(
        namespace: &str,
        resource: &str,
        algorithms: Vec<String>,
        limits: Vec<f64>,
        windows: Vec<f64>,
        buckets: Vec<JsValue>,
    ) -> Result<Policy, JsValue> {
        let buckets: Vec<Option<f64>> = buckets.iter().map(JsValue::as_f64).collect();
        glue::Policy::with_limit_columns(
            namespace, resource, algorithms, &limits, &windows, &buckets,
        )
        .map(|inner| Policy { inner })
        .map_err(to_js)
    }

    /// The Redis key of `tenant` (the first limit's).
    pub fn key(&self, tenant: &str) -> Result<String, JsValue> {
        self.inner.key(tenant).map_err(to_js)
    }

    /// Every limit's Redis key of `tenant`: what a reset deletes.
    pub fn keys(&self, tenant: &str) -> Result<Vec<String>, JsValue> {
        self.inner.keys(tenant).map_err(to_js)
    }

    /// One call as one string (`glue::encode_call`); `now_ms` absent means Redis `TIME`.
    #[wasm_bindgen(js_name = buildCall)]
    pub fn build_call(
        &self,
        tenant: &str,
        cost: f64,
        now_ms: Option<f64>,
        peek: bool,
    ) -> Result<String, JsValue> {
        self.inner
            .build_call(tenant, cost, now_ms, peek)
            .map_err(to_js)
    }

    /// Core's server-error table: null means send the same call once as
    /// EVAL; otherwise the error the call ends with (not thrown).
    #[wasm_bindgen(js_name = mapServerError)]
    pub fn map_server_error(&self, reply: &str, key: &str, after_retry: bool) -> JsValue {
        self.inner
            .map_server_error(reply, key, after_retry)
            .map_or(JsValue::NULL, to_js)
    }
}

/// Parses the reply in `buf` of a script for a policy of `limits` limits and
/// writes the decision over it (`glue::parse_reply`).
#[wasm_bindgen(js_name = parseReply)]
pub fn parse_reply(buf: &mut [f64], limits: u32) -> Result<(), JsValue> {
    glue::parse_reply(buf, limits).map_err(to_js)
}

/// Parses a script reply whose elements may be of any JS type (strings from
/// ioredis `stringNumbers`): `glue::parse_reply_values`.
#[wasm_bindgen(js_name = parseReplyValues)]
pub fn parse_reply_values(values: Vec<JsValue>, limits: u32) -> Result<JsValue, JsValue> {
    let values: Vec<glue::ReplyValue> = values
        .iter()
        .map(|v| match (v.as_f64(), v.as_string()) {
            (Some(n), _) => glue::ReplyValue::Number(n),
            (None, Some(text)) => glue::ReplyValue::Text(text),
            (None, None) => glue::ReplyValue::Other,
        })
        .collect();
    glue::parse_reply_values(&values, limits)
        .map(decision)
        .map_err(to_js)
}

/// Core's table for an error reply to a command that is no script call
/// (`DEL` for a reset): the error the command ends with (not thrown).
#[wasm_bindgen(js_name = mapCommandError)]
pub fn map_command_error(reply: &str) -> JsValue {
    to_js(glue::map_command_error(reply))
}

/// Checks the limiter's per-call timeout in ms; returns it unchanged.
#[wasm_bindgen(js_name = checkTimeoutMs)]
pub fn check_timeout_ms(timeout_ms: f64) -> Result<f64, JsValue> {
    glue::check_timeout_ms(timeout_ms).map_err(to_js)
}

/// Core's in-memory engine: same decisions as Redis, no server.
#[wasm_bindgen]
#[derive(Default)]
pub struct MemoryEngine {
    inner: glue::MemoryEngine,
}

#[wasm_bindgen]
impl MemoryEngine {
    /// Acquires `cost` permits. `now_ms` is the caller's time (absent: decide
    /// at `clock_ms`); `clock_ms` is the real clock, passed on every call: it
    /// alone expires keys, as Redis's PEXPIRE runs on the server's clock.
    pub fn acquire(
        &self,
        policy: &Policy,
        tenant: &str,
        cost: f64,
        now_ms: Option<f64>,
        clock_ms: f64,
    ) -> Result<JsValue, JsValue> {
        self.inner
            .check(&policy.inner, tenant, cost, now_ms, clock_ms, false)
            .map(decision)
            .map_err(to_js)
    }

    /// What `acquire` would answer with the same times, recording nothing.
    pub fn peek(
        &self,
        policy: &Policy,
        tenant: &str,
        cost: f64,
        now_ms: Option<f64>,
        clock_ms: f64,
    ) -> Result<JsValue, JsValue> {
        self.inner
            .check(&policy.inner, tenant, cost, now_ms, clock_ms, true)
            .map(decision)
            .map_err(to_js)
    }

    /// Forgets `tenant` under `policy`; true if anything was recorded.
    pub fn reset(&self, policy: &Policy, tenant: &str) -> Result<bool, JsValue> {
        self.inner.reset(&policy.inner, tenant).map_err(to_js)
    }
}

/// Core's local deny cache of one limiter (`glue::DenyCache`).
#[wasm_bindgen]
pub struct DenyCache {
    inner: glue::DenyCache,
}

#[wasm_bindgen]
impl DenyCache {
    /// A cache of `capacity` tenants; absent: core's default.
    #[wasm_bindgen(constructor)]
    pub fn new(capacity: Option<f64>) -> Result<DenyCache, JsValue> {
        glue::DenyCache::new(capacity)
            .map(|inner| DenyCache { inner })
            .map_err(to_js)
    }

    /// The local denial of an acquire on server time, or null: ask Redis.
    pub fn check(&mut self, tenant: &str, cost: f64, mono_ms: f64) -> Result<JsValue, JsValue> {
        match self.inner.check(tenant, cost, mono_ms) {
            Ok(found) => Ok(found.map_or(JsValue::NULL, decision)),
            Err(e) => Err(to_js(e)),
        }
    }

    /// Notes Redis's decision for an acquire on server time; returns the tenants held.
    #[allow(clippy::too_many_arguments)]
    pub fn record(
        &mut self,
        tenant: &str,
        cost: f64,
        allowed: bool,
        remaining: f64,
        retry_after_ms: f64,
        reset_after_ms: f64,
        now_ms: f64,
        denied_by: Option<f64>,
        mono_ms: f64,
        latest_sent_ms: Option<f64>,
    ) -> Result<u32, JsValue> {
        let d = glue::Decision {
            allowed,
            remaining,
            retry_after_ms,
            reset_after_ms,
            now_ms,
            denied_by,
        };
        self.inner
            .record(tenant, cost, d, mono_ms, latest_sent_ms)
            .map_err(to_js)
    }
}

// The getters and one-call functions both shells have (js-glue/src/shells.rs);
// after the structs, as the napi shell must have it.
glue::shared_exports!(wasm_bindgen);
