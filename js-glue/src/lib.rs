//! slidelimit-js-glue: slidelimit-core in JavaScript's terms, shared by the
//! napi addon (`node/native`) and the wasm build (`wasm/`), so that neither
//! writes a function the other has. Pure Rust: the two crates add only their
//! attributes and turn a [`JsError`] into a thrown JS `Error`.
//!
//! JavaScript's terms are:
//! - numbers are doubles: every integer a caller passes goes through core's
//!   [`u64_from_f64`](sl::u64_from_f64), every integer handed back is below
//!   2^53 by core's construction, so `as f64` is exact;
//! - a call crosses as one string (see [`encode_call`]) and a reply as a
//!   `Float64Array` parsed and overwritten in place (see [`parse_reply`]), so
//!   that a check makes few JS values: each costs more than core's own work;
//! - an error is a tag, core's code followed by `:<field>` when a field is at
//!   fault (`"invalid_argument:cost"`), and a message; `node/lib/errors.js`
//!   turns it into the matching `SlidelimitError` subclass.

use slidelimit_core as sl;

/// A core error as JS receives it: `tag` becomes the `code` of the `Error`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsError {
    /// `<code>` or `<code>:<field>`.
    pub tag: String,
    pub message: String,
}

impl From<sl::Error> for JsError {
    fn from(e: sl::Error) -> Self {
        JsError {
            tag: error_tag(&e),
            message: e.message().to_owned(),
        }
    }
}

pub type Result<T, E = JsError> = std::result::Result<T, E>;

/// `<code>` or `<code>:<field>` (`node/lib/errors.js` `fromCore` splits it).
pub fn error_tag(e: &sl::Error) -> String {
    match e.field() {
        Some(field) => format!("{}:{field}", e.code().as_str()),
        None => e.code().as_str().to_owned(),
    }
}

/// JS asks with a flag; core with a [`sl::Mode`].
pub fn mode(peek: bool) -> sl::Mode {
    if peek {
        sl::Mode::Peek
    } else {
        sl::Mode::Acquire
    }
}

/// Separates the fields of an encoded call. It cannot occur in any field:
/// SHA1s and ARGV are ASCII digits and hex, and keys percent-encode bytes
/// below 0x21.
pub const CALL_SEPARATOR: char = '\0';

/// A call as `sha1 NUL numkeys NUL key... NUL arg...`: one JS string instead
/// of an object, two arrays and six strings. `node/lib/codec.js` splits it
/// into EVALSHA's argument list.
pub fn encode_call(call: &sl::ScriptCall) -> String {
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

/// What a check answered, in JS numbers; times in milliseconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Decision {
    pub allowed: bool,
    pub remaining: f64,
    pub retry_after_ms: f64,
    pub reset_after_ms: f64,
    pub now_ms: f64,
}

impl From<sl::Decision> for Decision {
    fn from(d: sl::Decision) -> Self {
        let [_, remaining, retry_after_ms, reset_after_ms, now_ms] = d.to_f64_reply();
        Decision {
            allowed: d.allowed,
            remaining,
            retry_after_ms,
            reset_after_ms,
            now_ms,
        }
    }
}

/// Parses the script reply held in `buf` (elements that were not numbers
/// arrive as NaN) and, when it is valid, writes the decision over it in field
/// order (allowed as 0 or 1); a valid reply has exactly as many elements as a
/// decision has fields.
pub fn parse_reply(buf: &mut [f64]) -> Result<()> {
    let decision = sl::Decision::from_f64_reply(buf)?;
    buf.copy_from_slice(&decision.to_f64_reply());
    Ok(())
}

/// A validated policy (core's `Policy`) with JS-typed accessors.
#[derive(Debug, Clone)]
pub struct Policy {
    inner: sl::Policy,
}

impl Policy {
    pub fn new(
        namespace: &str,
        resource: &str,
        algorithm: &str,
        limit: f64,
        window_ms: f64,
    ) -> Result<Policy> {
        let algorithm = sl::Algorithm::parse(algorithm)?;
        let limit = sl::u64_from_f64("limit", limit)?;
        let window_ms = sl::u64_from_f64("window_ms", window_ms)?;
        let inner = sl::Policy::new(namespace, resource, algorithm, limit, window_ms)?;
        Ok(Policy { inner })
    }

    pub fn namespace(&self) -> String {
        self.inner.namespace().to_owned()
    }

    pub fn resource(&self) -> String {
        self.inner.resource().to_owned()
    }

    pub fn algorithm(&self) -> String {
        self.inner.algorithm().as_str().to_owned()
    }

    pub fn limit(&self) -> f64 {
        self.inner.limit() as f64
    }

    pub fn window_ms(&self) -> f64 {
        self.inner.window_ms() as f64
    }

    /// The Redis key of `tenant`.
    pub fn key(&self, tenant: &str) -> Result<String> {
        Ok(self.inner.key(tenant)?)
    }

    /// Validates tenant, cost and time and builds one call, encoded by
    /// [`encode_call`]; `now_ms` absent means Redis `TIME`.
    pub fn build_call(
        &self,
        tenant: &str,
        cost: f64,
        now_ms: Option<f64>,
        peek: bool,
    ) -> Result<String> {
        let cost = sl::u64_from_f64("cost", cost)?;
        let now_ms = now_ms.map(|n| sl::u64_from_f64("now_ms", n)).transpose()?;
        let call = self.inner.build_call(tenant, cost, now_ms, mode(peek))?;
        Ok(encode_call(&call))
    }

    /// The Lua source for EVAL after a NOSCRIPT.
    pub fn script_text(&self, peek: bool) -> String {
        sl::Script::new(self.inner.algorithm(), mode(peek))
            .text()
            .to_owned()
    }

    /// Core's server-error table for an error reply (`reply`, the server's
    /// text) to this policy's call on `key`: `None` means send the same call
    /// once as EVAL; otherwise the error, final for the call. `after_retry`:
    /// the reply answered that EVAL (or a command with no retry, like DEL).
    pub fn map_server_error(&self, reply: &str, key: &str, after_retry: bool) -> Option<JsError> {
        let algorithm = self.inner.algorithm();
        if after_retry {
            return Some(sl::map_server_error_after_retry(reply, key, algorithm).into());
        }
        match sl::map_server_error(reply, key, algorithm) {
            sl::ServerErrorAction::RetryWithEval => None,
            sl::ServerErrorAction::Fail(e) => Some(e.into()),
        }
    }
}

/// Core's in-memory engine: same decisions as Redis, no server.
#[derive(Debug, Default)]
pub struct MemoryEngine {
    inner: sl::MemoryEngine,
}

impl MemoryEngine {
    /// Acquires (or, with `peek`, only asks for) `cost` permits. `now_ms` is
    /// the caller's time (absent: decide at `clock_ms`); `clock_ms` is the real
    /// clock, passed on every call: it alone expires keys, as Redis's PEXPIRE
    /// runs on the server's clock.
    pub fn check(
        &self,
        policy: &Policy,
        tenant: &str,
        cost: f64,
        now_ms: Option<f64>,
        clock_ms: f64,
        peek: bool,
    ) -> Result<Decision> {
        let cost = sl::u64_from_f64("cost", cost)?;
        let now_ms = now_ms.map(|n| sl::u64_from_f64("now_ms", n)).transpose()?;
        let clock_ms = sl::u64_from_f64("clock_ms", clock_ms)?;
        let decision =
            self.inner
                .check(&policy.inner, tenant, cost, now_ms, clock_ms, mode(peek))?;
        Ok(decision.into())
    }

    /// Forgets `tenant` under `policy`; true if anything was recorded.
    pub fn reset(&self, policy: &Policy, tenant: &str) -> Result<bool> {
        Ok(self.inner.reset(&policy.inner, tenant)?)
    }

    pub fn key_count(&self) -> u32 {
        u32::try_from(self.inner.key_count()).unwrap_or(u32::MAX)
    }
}

/// Core's constants a JS caller needs, as JSON (read once at load):
/// `{"defaults": {"namespace", "algorithm"}, "metrics": {"allowedTotal":
/// {"name", "help"}, "deniedTotal": ..., "waitSeconds": ..., "labels":
/// {"resource", "tenant"}, "waitBuckets": [...]}}`.
pub fn constants_json() -> String {
    let metric = |name: &str, help: &str| format!(r#"{{"name":"{name}","help":"{help}"}}"#);
    let buckets: Vec<String> = sl::WAIT_BUCKETS.iter().map(f64::to_string).collect();
    format!(
        concat!(
            r#"{{"defaults":{{"namespace":"{}","algorithm":"{}"}},"#,
            r#""metrics":{{"allowedTotal":{},"deniedTotal":{},"waitSeconds":{},"#,
            r#""labels":{{"resource":"{}","tenant":"{}"}},"waitBuckets":[{}]}}}}"#
        ),
        sl::DEFAULT_NAMESPACE,
        sl::DEFAULT_ALGORITHM.as_str(),
        metric(sl::METRIC_ALLOWED_TOTAL, sl::METRIC_ALLOWED_TOTAL_HELP),
        metric(sl::METRIC_DENIED_TOTAL, sl::METRIC_DENIED_TOTAL_HELP),
        metric(sl::METRIC_WAIT_SECONDS, sl::METRIC_WAIT_SECONDS_HELP),
        sl::LABEL_RESOURCE,
        sl::LABEL_TENANT,
        buckets.join(","),
    )
}

/// Every error code core defines, in numeric order.
pub fn error_codes() -> Vec<String> {
    sl::ErrorCode::ALL
        .iter()
        .map(|c| c.as_str().to_owned())
        .collect()
}

pub fn version() -> String {
    sl::VERSION.to_owned()
}

/// Checks the limiter's per-call timeout in ms (core's rule: 1 ..= 2^31 - 1);
/// returns it unchanged.
pub fn check_timeout_ms(timeout_ms: f64) -> Result<f64> {
    let ms = sl::u64_from_f64("timeout_ms", timeout_ms).and_then(sl::check_timeout_ms)?;
    Ok(ms as f64)
}

pub fn escape_tenant(tenant: &str) -> String {
    sl::escape_tenant(tenant)
}

/// Cluster slot of a key.
pub fn slot(key: &str) -> u32 {
    u32::from(sl::slot(key))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> Policy {
        Policy::new("rl", "geocode", "sliding_log", 3.0, 1000.0).unwrap()
    }

    #[test]
    fn errors_carry_code_and_field() {
        let e = Policy::new("rl", "geocode", "sliding_log", 1.5, 1000.0).unwrap_err();
        assert_eq!(e.tag, "invalid_argument:limit");
        assert!(e.message.starts_with("limit: "), "{}", e.message);
        let e = JsError::from(sl::Error::new(sl::ErrorCode::Unavailable, "down"));
        assert_eq!(
            (e.tag.as_str(), e.message.as_str()),
            ("unavailable", "down")
        );
    }

    #[test]
    fn a_call_is_one_string_of_evalshas_arguments() {
        let p = policy();
        let encoded = p.build_call("t}1", 2.0, Some(5000.0), false).unwrap();
        let parts: Vec<&str> = encoded.split(CALL_SEPARATOR).collect();
        let call = p
            .inner
            .build_call("t}1", 2, Some(5000), sl::Mode::Acquire)
            .unwrap();
        assert_eq!(parts[0], call.script.sha1());
        assert_eq!(parts[1], "1");
        assert_eq!(parts[2], "rl:{geocode:t%7D1}:log:1000");
        assert_eq!(
            parts[3..],
            call.args.iter().map(String::as_str).collect::<Vec<_>>()[..]
        );
        let e = p.build_call("t", -1.0, None, true).unwrap_err();
        assert_eq!(e.tag, "invalid_argument:cost");
        let e = p.build_call("t", 1.0, Some(f64::NAN), true).unwrap_err();
        assert_eq!(e.tag, "invalid_argument:now_ms");
        assert_ne!(p.script_text(true), p.script_text(false));
    }

    #[test]
    fn a_reply_is_parsed_in_place() {
        let mut buf = [0.0, 0.0, 250.0, 900.0, 5000.0];
        parse_reply(&mut buf).unwrap();
        assert_eq!(buf, [0.0, 0.0, 250.0, 900.0, 5000.0]);
        let mut bad = [1.0, f64::NAN, 0.0, 1.0, 5.0];
        let e = parse_reply(&mut bad).unwrap_err();
        assert_eq!(e.tag, "malformed_reply");
        assert!(bad[1].is_nan(), "a bad reply is left as it was");
    }

    #[test]
    fn server_errors_go_through_cores_table() {
        let p = policy();
        let key = p.key("t-1").unwrap();
        let noscript = "NOSCRIPT No matching script. Please use EVAL.";
        assert_eq!(p.map_server_error(noscript, &key, false), None);
        let e = p.map_server_error(noscript, &key, true).unwrap();
        assert_eq!(e.tag, "script_error");
        let e = p
            .map_server_error("WRONGTYPE Operation", &key, false)
            .unwrap();
        assert_eq!(e.tag, "wrong_type");
        assert!(e
            .message
            .starts_with(&format!("key {key} holds a value the sliding_log")));
        let e = p
            .map_server_error(
                "ERR slidelimit invalid_argument cost: must be at least 1",
                &key,
                false,
            )
            .unwrap();
        assert_eq!(e.tag, "invalid_argument:cost");
        let e = p
            .map_server_error("MOVED 1 127.0.0.1:7000", &key, false)
            .unwrap();
        assert_eq!(e.tag, "unavailable");
    }

    #[test]
    fn the_memory_engine_checks_by_mode() {
        let (engine, p) = (MemoryEngine::default(), policy());
        let d = engine.check(&p, "t", 1.0, None, 1000.0, true).unwrap();
        assert_eq!((d.allowed, d.remaining), (true, 2.0));
        assert_eq!(engine.key_count(), 0, "a peek records nothing");
        let d = engine
            .check(&p, "t", 3.0, Some(1000.0), 1000.0, false)
            .unwrap();
        assert_eq!((d.allowed, d.remaining, d.now_ms), (true, 0.0, 1000.0));
        let d = engine.check(&p, "t", 1.0, None, 1500.0, false).unwrap();
        assert_eq!((d.allowed, d.retry_after_ms), (false, 500.0));
        assert!(engine.reset(&p, "t").unwrap());
        let e = engine.check(&p, "t", 1.0, None, -1.0, false).unwrap_err();
        assert_eq!(e.tag, "invalid_argument:clock_ms");
    }

    #[test]
    fn constants_are_cores() {
        assert_eq!(
            constants_json(),
            concat!(
                r#"{"defaults":{"namespace":"rl","algorithm":"sliding_log"},"metrics":{"#,
                r#""allowedTotal":{"name":"ratelimit_allowed_total","help":"Acquires allowed by the rate limiter."},"#,
                r#""deniedTotal":{"name":"ratelimit_denied_total","help":"Acquires denied by the rate limiter."},"#,
                r#""waitSeconds":{"name":"ratelimit_wait_seconds","help":"retry_after handed to denied callers, in seconds."},"#,
                r#""labels":{"resource":"resource","tenant":"tenant"},"#,
                r#""waitBuckets":[0.001,0.005,0.01,0.05,0.1,0.5,1,5,10,30,60,600]}}"#
            )
        );
    }

    #[test]
    fn timeouts_and_codes_come_from_core() {
        assert_eq!(check_timeout_ms(250.0).unwrap(), 250.0);
        assert_eq!(
            check_timeout_ms(0.0).unwrap_err().tag,
            "invalid_argument:timeout_ms"
        );
        assert_eq!(error_codes()[0], "invalid_argument");
        assert_eq!(error_codes().len(), sl::ErrorCode::ALL.len());
    }
}
