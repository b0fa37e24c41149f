//! wasm-bindgen build of slidelimit-core with the same surface as the napi
//! addon in `node/native`, so the `slidelimit` npm package runs on either.
//! Errors are JS `Error`s whose `code` is core's code string, followed by
//! `:<field>` when a field is at fault. As in the addon, `buildCall` returns
//! the call as one string and `parseReply` works in place on a Float64Array,
//! so that a check makes few JS values.

use js_sys::{Object, Reflect};
use slidelimit_core as sl;
use wasm_bindgen::prelude::*;

fn to_js(e: sl::Error) -> JsValue {
    let code = match e.field() {
        Some(field) => format!("{}:{field}", e.code().as_str()),
        None => e.code().as_str().to_owned(),
    };
    let err = js_sys::Error::new(e.message());
    // Setting a property on a fresh Error object cannot fail.
    let _ = Reflect::set(&err, &"code".into(), &code.into());
    err.into()
}

/// The largest integer a JS number holds exactly.
const MAX_SAFE: f64 = 9_007_199_254_740_992.0; // 2^53

fn set(obj: &Object, key: &str, value: JsValue) {
    // Defining a property on a plain object we just made cannot fail.
    let _ = Reflect::set(obj, &JsValue::from_str(key), &value);
}

/// The decision as a plain object, the same shape the napi addon returns.
fn decision(d: sl::Decision) -> JsValue {
    let obj = Object::new();
    // Every field is below 2^53 by core's construction, so f64 is exact.
    set(&obj, "allowed", d.allowed.into());
    set(&obj, "remaining", (d.remaining as f64).into());
    set(&obj, "retryAfterMs", (d.retry_after_ms as f64).into());
    set(&obj, "resetAfterMs", (d.reset_after_ms as f64).into());
    set(&obj, "nowMs", (d.now_ms as f64).into());
    obj.into()
}

/// Separates the fields of an encoded call. It cannot occur in any field:
/// SHA1s and ARGV are ASCII digits and hex, and keys percent-encode bytes
/// below 0x21.
const CALL_SEPARATOR: char = '\0';

/// A call as `sha1 NUL numkeys NUL key... NUL arg...` (the addon's encoding).
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

fn mode(peek: bool) -> sl::Mode {
    if peek {
        sl::Mode::Peek
    } else {
        sl::Mode::Acquire
    }
}

/// A validated policy (core's `Policy`).
#[wasm_bindgen]
pub struct Policy {
    inner: sl::Policy,
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
    ) -> Result<Policy, JsValue> {
        let build = || -> sl::Result<sl::Policy> {
            let algorithm = sl::Algorithm::parse(algorithm)?;
            let limit = sl::u64_from_f64("limit", limit)?;
            let window_ms = sl::u64_from_f64("window_ms", window_ms)?;
            sl::Policy::new(namespace, resource, algorithm, limit, window_ms)
        };
        build().map(|inner| Policy { inner }).map_err(to_js)
    }

    #[wasm_bindgen(getter)]
    pub fn namespace(&self) -> String {
        self.inner.namespace().to_owned()
    }

    #[wasm_bindgen(getter)]
    pub fn resource(&self) -> String {
        self.inner.resource().to_owned()
    }

    #[wasm_bindgen(getter)]
    pub fn algorithm(&self) -> String {
        self.inner.algorithm().as_str().to_owned()
    }

    #[wasm_bindgen(getter)]
    pub fn limit(&self) -> f64 {
        self.inner.limit() as f64
    }

    #[wasm_bindgen(getter = windowMs)]
    pub fn window_ms(&self) -> f64 {
        self.inner.window_ms() as f64
    }

    /// The Redis key of `tenant`.
    pub fn key(&self, tenant: &str) -> Result<String, JsValue> {
        self.inner.key(tenant).map_err(to_js)
    }

    /// Validates tenant, cost and time and builds one call, encoded by
    /// `encode_call`; `now_ms` absent means Redis `TIME`.
    #[wasm_bindgen(js_name = buildCall)]
    pub fn build_call(
        &self,
        tenant: &str,
        cost: f64,
        now_ms: Option<f64>,
        peek: bool,
    ) -> Result<String, JsValue> {
        let build = || -> sl::Result<sl::ScriptCall> {
            let cost = sl::u64_from_f64("cost", cost)?;
            let now_ms = now_ms.map(|n| sl::u64_from_f64("now_ms", n)).transpose()?;
            self.inner.build_call(tenant, cost, now_ms, mode(peek))
        };
        build().map(|call| encode_call(&call)).map_err(to_js)
    }

    /// The Lua source for EVAL after a NOSCRIPT.
    #[wasm_bindgen(js_name = scriptText)]
    pub fn script_text(&self, peek: bool) -> String {
        sl::Script::new(self.inner.algorithm(), mode(peek))
            .text()
            .to_owned()
    }
}

/// Parses the script reply held in `buf` (elements that were not numbers
/// arrive as NaN) and, when it is valid, writes the decision over it in field
/// order (allowed as 0 or 1); a valid reply has exactly as many elements as a
/// decision has fields.
#[wasm_bindgen(js_name = parseReply)]
pub fn parse_reply(buf: &mut [f64]) -> Result<(), JsValue> {
    let parse = |fields: &[f64]| -> sl::Result<sl::Decision> {
        let reply = fields
            .iter()
            .enumerate()
            .map(|(i, v)| reply_int(i, *v))
            .collect::<sl::Result<Vec<i64>>>()?;
        sl::Decision::from_reply(&reply)
    };
    let d = parse(buf).map_err(to_js)?;
    // Every field is below 2^53 by core's construction, so f64 is exact.
    buf.copy_from_slice(&[
        f64::from(u8::from(d.allowed)),
        d.remaining as f64,
        d.retry_after_ms as f64,
        d.reset_after_ms as f64,
        d.now_ms as f64,
    ]);
    Ok(())
}

/// Classifies the text of a Redis error reply: `{ kind, code }` with kind
/// `noscript`, `redirect`, `transient` or `final`.
#[wasm_bindgen(js_name = classifyServerError)]
pub fn classify_server_error(message: &str) -> JsValue {
    let (kind, code) = match sl::classify_server_error(message) {
        sl::ServerErrorKind::NoScript => ("noscript", None),
        sl::ServerErrorKind::Redirect => ("redirect", None),
        sl::ServerErrorKind::Transient => ("transient", Some(sl::ErrorCode::Unavailable)),
        sl::ServerErrorKind::Final(code) => ("final", Some(code)),
    };
    let obj = Object::new();
    set(&obj, "kind", kind.into());
    set(
        &obj,
        "code",
        code.map_or(JsValue::NULL, |c| c.as_str().into()),
    );
    obj.into()
}

/// Every error code core defines, in numeric order.
#[wasm_bindgen(js_name = errorCodes)]
pub fn error_codes() -> Vec<String> {
    sl::ErrorCode::ALL
        .iter()
        .map(|c| c.as_str().to_owned())
        .collect()
}

#[wasm_bindgen]
pub fn version() -> String {
    sl::VERSION.to_owned()
}

#[wasm_bindgen(js_name = escapeTenant)]
pub fn escape_tenant(tenant: &str) -> String {
    sl::escape_tenant(tenant)
}

/// Cluster slot of a key.
#[wasm_bindgen]
pub fn slot(key: &str) -> u32 {
    u32::from(sl::slot(key))
}

/// Core's in-memory engine: same decisions as Redis, no server.
#[wasm_bindgen]
#[derive(Default)]
pub struct MemoryEngine {
    inner: sl::MemoryEngine,
}

#[wasm_bindgen]
impl MemoryEngine {
    #[wasm_bindgen(constructor)]
    pub fn new() -> MemoryEngine {
        MemoryEngine::default()
    }

    pub fn acquire(
        &self,
        policy: &Policy,
        tenant: &str,
        cost: f64,
        now_ms: f64,
    ) -> Result<JsValue, JsValue> {
        self.run(policy, tenant, cost, now_ms, false)
    }

    pub fn peek(
        &self,
        policy: &Policy,
        tenant: &str,
        cost: f64,
        now_ms: f64,
    ) -> Result<JsValue, JsValue> {
        self.run(policy, tenant, cost, now_ms, true)
    }

    /// Forgets `tenant` under `policy`; true if anything was recorded.
    pub fn reset(&self, policy: &Policy, tenant: &str) -> Result<bool, JsValue> {
        self.inner.reset(&policy.inner, tenant).map_err(to_js)
    }

    #[wasm_bindgen(getter = keyCount)]
    pub fn key_count(&self) -> u32 {
        u32::try_from(self.inner.key_count()).unwrap_or(u32::MAX)
    }

    fn run(
        &self,
        policy: &Policy,
        tenant: &str,
        cost: f64,
        now_ms: f64,
        peek: bool,
    ) -> Result<JsValue, JsValue> {
        let run = || -> sl::Result<sl::Decision> {
            let cost = sl::u64_from_f64("cost", cost)?;
            let now_ms = sl::u64_from_f64("now_ms", now_ms)?;
            if peek {
                self.inner.peek(&policy.inner, tenant, cost, now_ms)
            } else {
                self.inner.acquire(&policy.inner, tenant, cost, now_ms)
            }
        };
        run().map(decision).map_err(to_js)
    }
}
