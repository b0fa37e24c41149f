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
//! - an error is core's code, the field at fault (if any) and the message,
//!   which the shells put on a JS `Error` as `code`, `field` and `message`;
//!   `node/lib/errors.js` only picks the matching `SlidelimitError` subclass.
//!
//! What the shells would write alike even so (getters, one-call functions) is
//! written once in [`shared_exports!`], which each expands with its attribute.

use slidelimit_core as sl;

mod shells;

/// A core error as JS receives it: the properties of the thrown `Error`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JsError {
    /// Core's code (`"invalid_argument"`).
    pub code: &'static str,
    /// The field at fault (`"cost"`), if any.
    pub field: Option<&'static str>,
    pub message: String,
}

impl From<sl::Error> for JsError {
    fn from(e: sl::Error) -> Self {
        JsError {
            code: e.code().as_str(),
            field: e.field(),
            message: e.message().to_owned(),
        }
    }
}

pub type Result<T, E = JsError> = std::result::Result<T, E>;

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
/// of an object, two arrays and six strings. Split at [`CALL_SEPARATOR`]
/// (handed to JS in [`constants_json`]) it is EVALSHA's argument list as is.
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
    /// For a denial by a policy of several limits, the position (from 0) of
    /// the limit that denied with the longest retry; `None` otherwise.
    pub denied_by: Option<f64>,
}

impl From<sl::Decision> for Decision {
    fn from(d: sl::Decision) -> Self {
        // Every field is below 2^53 by core's construction: the casts are exact.
        Decision {
            allowed: d.allowed,
            remaining: d.remaining as f64,
            retry_after_ms: d.retry_after_ms as f64,
            reset_after_ms: d.reset_after_ms as f64,
            now_ms: d.now_ms as f64,
            denied_by: d.denied_by.map(f64::from),
        }
    }
}

impl Decision {
    /// Back to core's decision (for the deny cache): each field as core's
    /// integer, refused as core refuses a double that is none.
    fn to_core(self) -> Result<sl::Decision> {
        let denied_by = self
            .denied_by
            .map(|p| sl::u64_from_f64("denied_by", p))
            .transpose()?
            .map(|p| u32::try_from(p).unwrap_or(u32::MAX));
        Ok(sl::Decision {
            allowed: self.allowed,
            remaining: sl::u64_from_f64("remaining", self.remaining)?,
            retry_after_ms: sl::u64_from_f64("retry_after_ms", self.retry_after_ms)?,
            reset_after_ms: sl::u64_from_f64("reset_after_ms", self.reset_after_ms)?,
            now_ms: sl::u64_from_f64("now_ms", self.now_ms)?,
            denied_by,
        })
    }
}

/// What [`parse_reply`] writes in the sixth element of a six-element reply
/// (a policy of several limits) when no limit denied.
pub const DENIED_BY_NONE: f64 = -1.0;

/// Parses the reply held in `buf` of a script for a policy of `limits`
/// limits (elements that were not numbers arrive as NaN) and, when it is
/// valid, writes the decision over it in field order: allowed as 0 or 1,
/// remaining, retry_after_ms, reset_after_ms, now_ms and, for the six
/// elements of a policy of several limits, denied_by (from 0;
/// [`DENIED_BY_NONE`] when none). A valid reply has exactly as many elements
/// as its decision has fields.
pub fn parse_reply(buf: &mut [f64], limits: u32) -> Result<()> {
    let d = Decision::from(sl::Decision::from_f64_reply(buf, limits as usize)?);
    buf[..sl::REPLY_LEN].copy_from_slice(&[
        f64::from(u8::from(d.allowed)),
        d.remaining,
        d.retry_after_ms,
        d.reset_after_ms,
        d.now_ms,
    ]);
    if let Some(slot) = buf.get_mut(sl::REPLY_LEN) {
        *slot = d.denied_by.unwrap_or(DENIED_BY_NONE);
    }
    Ok(())
}

/// One element of a script reply as the JS client handed it over: a number,
/// a string (ioredis `stringNumbers` hands integers over as decimal text), or
/// anything else (an error, nil, a nested array).
#[derive(Debug, Clone, PartialEq)]
pub enum ReplyValue {
    Number(f64),
    Text(String),
    Other,
}

/// 2^53: the integers a JS number holds exactly (core's bound for doubles).
const MAX_SAFE: i64 = 1 << 53;

impl ReplyValue {
    /// The element as core's double carrier takes it: NaN for anything that
    /// is not an integer. Text must be an integer in Redis's own form
    /// (optional `-`, no `+`, no leading zeros) within 2^53.
    fn to_f64(&self) -> f64 {
        match self {
            ReplyValue::Number(n) => *n,
            ReplyValue::Text(s) => match s.parse::<i64>() {
                Ok(n) if n.abs() <= MAX_SAFE && n.to_string() == *s => n as f64,
                _ => f64::NAN,
            },
            ReplyValue::Other => f64::NAN,
        }
    }
}

/// Parses the reply of a script for a policy of `limits` limits whose
/// elements may be text (see [`ReplyValue`]); the slower path, for clients
/// that do not hand integers over as numbers.
pub fn parse_reply_values(values: &[ReplyValue], limits: u32) -> Result<Decision> {
    let doubles: Vec<f64> = values.iter().map(|v| v.to_f64()).collect();
    Ok(sl::Decision::from_f64_reply(&doubles, limits as usize)?.into())
}

/// One limit of a policy as JS states it (`limits: [{ algorithm, limit,
/// windowMs, buckets }]`), before core's validation.
#[derive(Debug, Clone, PartialEq)]
pub struct LimitSpec {
    pub algorithm: String,
    pub limit: f64,
    pub window_ms: f64,
    /// `None`: core's default for a bucketed window, none for the others.
    pub buckets: Option<f64>,
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
        buckets: Option<f64>,
    ) -> Result<Policy> {
        let algorithm = sl::Algorithm::parse(algorithm)?;
        let limit = sl::u64_from_f64("limit", limit)?;
        let window_ms = sl::u64_from_f64("window_ms", window_ms)?;
        // `None` is core's default (or no buckets, for the other algorithms).
        let buckets = buckets
            .map(|n| sl::u64_from_f64("buckets", n))
            .transpose()?;
        let inner =
            sl::Policy::with_buckets(namespace, resource, algorithm, limit, window_ms, buckets)?;
        Ok(Policy { inner })
    }

    /// A policy of one or several limits (core's `Policy::with_limits`). A
    /// value JS cannot hand over as core's type is refused under the name
    /// core gives the field (`limit` for one limit, `limits[1].limit` for
    /// several); a list core refuses whole (empty, too long) is core's error.
    pub fn with_limits(namespace: &str, resource: &str, specs: &[LimitSpec]) -> Result<Policy> {
        let several = specs.len() > 1;
        let mut limits = Vec::with_capacity(specs.len());
        if specs.len() > sl::MAX_LIMITS {
            // Core refuses the count before it reads any limit.
            limits.resize(specs.len(), sl::Limit::new(sl::DEFAULT_ALGORITHM, 1, 1));
        } else {
            for (index, spec) in specs.iter().enumerate() {
                let name = |field: &'static str| match several {
                    true => sl::limit_field(index, field).unwrap_or(field),
                    false => field,
                };
                let algorithm = sl::Algorithm::parse(&spec.algorithm)
                    .map_err(|e| e.for_limit(index, specs.len()))?;
                limits.push(sl::Limit {
                    algorithm,
                    limit: sl::u64_from_f64(name("limit"), spec.limit)?,
                    window_ms: sl::u64_from_f64(name("window_ms"), spec.window_ms)?,
                    buckets: spec
                        .buckets
                        .map(|n| sl::u64_from_f64(name("buckets"), n))
                        .transpose()?,
                });
            }
        }
        let inner = sl::Policy::with_limits(namespace, resource, &limits)?;
        Ok(Policy { inner })
    }

    /// [`Policy::with_limits`] from one list per field, as the shells take
    /// them from JS (`buckets`: `None` where a limit has none).
    pub fn with_limit_columns(
        namespace: &str,
        resource: &str,
        algorithms: Vec<String>,
        limits: &[f64],
        windows: &[f64],
        buckets: &[Option<f64>],
    ) -> Result<Policy> {
        let n = algorithms.len();
        if [limits.len(), windows.len(), buckets.len()] != [n; 3] {
            return Err(sl::Error::new(
                sl::ErrorCode::Internal,
                "the lists of a policy's limits differ in length",
            )
            .into());
        }
        let specs: Vec<LimitSpec> = algorithms
            .into_iter()
            .enumerate()
            .map(|(i, algorithm)| LimitSpec {
                algorithm,
                limit: limits[i],
                window_ms: windows[i],
                buckets: buckets[i],
            })
            .collect();
        Policy::with_limits(namespace, resource, &specs)
    }

    /// Every limit (buckets resolved), as a JSON list of
    /// `{"algorithm","limit","windowMs"[,"buckets"]}` objects.
    pub fn limits_json(&self) -> String {
        let limits: Vec<String> = self
            .inner
            .limits()
            .iter()
            .map(|l| {
                let buckets = l.buckets.map(|n| format!(r#","buckets":{n}"#));
                format!(
                    r#"{{"algorithm":"{}","limit":{},"windowMs":{}{}}}"#,
                    l.algorithm.as_str(),
                    l.limit,
                    l.window_ms,
                    buckets.unwrap_or_default()
                )
            })
            .collect();
        format!("[{}]", limits.join(","))
    }

    /// Every limit's Redis key of `tenant` (what a reset deletes).
    pub fn keys(&self, tenant: &str) -> Result<Vec<String>> {
        Ok(self.inner.keys(tenant)?)
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

    /// The bucket count of a bucketed window; `None` for the other algorithms.
    pub fn buckets(&self) -> Option<f64> {
        self.inner.buckets().map(|n| n as f64)
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
        self.inner.script(mode(peek)).text().to_owned()
    }

    /// Core's server-error table for an error reply (`reply`, the server's
    /// text) to this policy's call on `key` (its first key, named with the
    /// first limit's algorithm, for a policy of several limits): `None` means send the same call
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

/// Core's table for an error reply to a command that is no script call
/// (`DEL` for a reset): final, with no retry.
pub fn map_command_error(reply: &str) -> JsError {
    sl::map_command_error(reply).into()
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

/// Core's local deny cache for one limiter, in JS numbers. `mono_ms` is the
/// caller's monotonic clock in whole milliseconds. The calls that change it
/// return how many tenants it holds afterwards, so that JS can skip `check`
/// while it is empty (an empty cache answers every `check` with `None`, and
/// `record` of an admission changes nothing in it); JS then passes the
/// latest send time of any acquire to `record` (`DenyCache::note_sent`).
#[derive(Debug, Clone)]
pub struct DenyCache {
    inner: sl::DenyCache,
}

fn held(cache: &sl::DenyCache) -> u32 {
    u32::try_from(cache.len()).unwrap_or(u32::MAX)
}

impl DenyCache {
    /// A cache of `capacity` tenants; `None`: core's default capacity.
    pub fn new(capacity: Option<f64>) -> Result<DenyCache> {
        let capacity = match capacity {
            None => sl::DEFAULT_DENY_CACHE_CAPACITY,
            Some(n) => {
                let n = sl::u64_from_f64("deny_cache_capacity", n)?;
                // Past usize (wasm32) is past core's maximum too: core says so.
                usize::try_from(n).unwrap_or(usize::MAX)
            }
        };
        Ok(DenyCache {
            inner: sl::DenyCache::new(capacity)?,
        })
    }

    pub fn capacity(&self) -> f64 {
        self.inner.capacity() as f64
    }

    /// Tenants held now.
    pub fn size(&self) -> u32 {
        held(&self.inner)
    }

    /// The local denial of an acquire of `cost` (on server time) by
    /// `tenant`, or `None`: ask Redis.
    pub fn check(&mut self, tenant: &str, cost: f64, mono_ms: f64) -> Result<Option<Decision>> {
        let cost = sl::u64_from_f64("cost", cost)?;
        let mono_ms = sl::u64_from_f64("mono_ms", mono_ms)?;
        Ok(self.inner.check(tenant, cost, mono_ms).map(Decision::from))
    }

    /// Notes Redis's answer `decision` to an acquire of `cost` by `tenant`
    /// (on server time) sent at `mono_ms`, taken before the call, not when
    /// the reply came (`DenyCache::record`); `latest_sent_ms`, the latest
    /// time any acquire of this limiter was sent at (absent: every one was
    /// checked). Returns the tenants held.
    pub fn record(
        &mut self,
        tenant: &str,
        cost: f64,
        decision: Decision,
        mono_ms: f64,
        latest_sent_ms: Option<f64>,
    ) -> Result<u32> {
        let cost = sl::u64_from_f64("cost", cost)?;
        let mono_ms = sl::u64_from_f64("mono_ms", mono_ms)?;
        if let Some(latest) = latest_sent_ms {
            let latest = sl::u64_from_f64("latest_sent_ms", latest)?;
            self.inner.note_sent(latest);
        }
        self.inner
            .record(tenant, cost, &decision.to_core()?, mono_ms);
        Ok(held(&self.inner))
    }

    /// Drops `tenant` in this and every other cache of the process (a reset
    /// through this limiter). Returns the tenants held.
    pub fn forget(&mut self, tenant: &str) -> u32 {
        self.inner.forget(tenant);
        held(&self.inner)
    }

    pub fn clear(&mut self) {
        self.inner.clear();
    }
}

/// Core's name of `field` of the limit at `index` in a policy of several
/// limits (`limits[1].window_ms`); `None` past core's most limits.
pub fn limit_field(index: u32, field: &str) -> Option<String> {
    sl::limit_field(usize::try_from(index).ok()?, field).map(str::to_owned)
}

/// Core's constants a JS caller needs, as JSON (read once at load):
/// `{"defaults": {"namespace", "algorithm", "timeoutMs",
/// "denyCacheCapacity"}, "callSeparator", "metrics": {"allowedTotal":
/// {"name", "help"}, "deniedTotal": ..., "localDeniedTotal": ...,
/// "waitSeconds": ..., "labels": {"resource", "tenant"}, "waitBuckets": [...]}}`.
pub fn constants_json() -> String {
    let metric = |name: &str, help: &str| format!(r#"{{"name":"{name}","help":"{help}"}}"#);
    let buckets: Vec<String> = sl::WAIT_BUCKETS.iter().map(f64::to_string).collect();
    let names = |labels: &[&str]| {
        let quoted: Vec<String> = labels.iter().map(|l| format!(r#""{l}""#)).collect();
        format!("[{}]", quoted.join(","))
    };
    format!(
        concat!(
            r#"{{"defaults":{{"namespace":"{}","algorithm":"{}","timeoutMs":{},"denyCacheCapacity":{}}},"#,
            r#""callSeparator":"\u{:04x}","#,
            r#""metrics":{{"allowedTotal":{},"deniedTotal":{},"localDeniedTotal":{},"waitSeconds":{},"#,
            r#""labels":{{"resource":"{}","tenant":"{}","counter":{},"counterWithTenant":{},"wait":{}}},"#,
            r#""waitBuckets":[{}]}}}}"#
        ),
        sl::DEFAULT_NAMESPACE,
        sl::DEFAULT_ALGORITHM.as_str(),
        sl::DEFAULT_TIMEOUT_MS,
        sl::DEFAULT_DENY_CACHE_CAPACITY,
        u32::from(CALL_SEPARATOR),
        metric(sl::METRIC_ALLOWED_TOTAL, sl::METRIC_ALLOWED_TOTAL_HELP),
        metric(sl::METRIC_DENIED_TOTAL, sl::METRIC_DENIED_TOTAL_HELP),
        metric(
            sl::METRIC_LOCAL_DENIED_TOTAL,
            sl::METRIC_LOCAL_DENIED_TOTAL_HELP
        ),
        metric(sl::METRIC_WAIT_SECONDS, sl::METRIC_WAIT_SECONDS_HELP),
        sl::LABEL_RESOURCE,
        sl::LABEL_TENANT,
        names(&sl::COUNTER_LABELS),
        names(&sl::COUNTER_LABELS_WITH_TENANT),
        names(&sl::WAIT_LABELS),
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

/// Core's `forget_tenant`: every deny cache of this copy of core drops
/// `tenant`'s entry.
pub fn forget_tenant(tenant: &str) {
    sl::forget_tenant(tenant)
}

/// Core's `resend_pause_ms` in JS numbers: the wait before resending a
/// script call Redis answered with `reply` without running it (TRYAGAIN).
pub fn resend_pause_ms(reply: &str, attempt: u32) -> Option<f64> {
    sl::resend_pause_ms(reply, attempt).map(|ms| ms as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> Policy {
        Policy::new("rl", "geocode", "sliding_log", 3.0, 1000.0, None).unwrap()
    }

    #[test]
    fn errors_carry_code_and_field() {
        let e = Policy::new("rl", "geocode", "sliding_log", 1.5, 1000.0, None).unwrap_err();
        assert_eq!((e.code, e.field), ("invalid_argument", Some("limit")));
        assert!(e.message.starts_with("limit: "), "{}", e.message);
        let e = JsError::from(sl::Error::new(sl::ErrorCode::Unavailable, "down"));
        assert_eq!(
            (e.code, e.field, e.message.as_str()),
            ("unavailable", None, "down")
        );
    }

    #[test]
    fn buckets_go_to_core_as_u64() {
        let p = Policy::new("rl", "geocode", "bucketed_window", 3.0, 1000.0, Some(4.0)).unwrap();
        assert_eq!(p.buckets(), Some(4.0));
        assert_eq!(p.key("t").unwrap(), "rl:{geocode:t}:bucketed:1000:4");
        assert_eq!(policy().buckets(), None);
        for (algorithm, buckets) in [
            ("bucketed_window", Some(2.5)),
            ("bucketed_window", Some(-4.0)),
            ("bucketed_window", Some(f64::NAN)),
            ("bucketed_window", None), // the default 60 does not divide 1000
            ("sliding_log", Some(4.0)),
        ] {
            let e = Policy::new("rl", "geocode", algorithm, 3.0, 1000.0, buckets).unwrap_err();
            assert_eq!((e.code, e.field), ("invalid_argument", Some("buckets")));
        }
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
        assert_eq!((e.code, e.field), ("invalid_argument", Some("cost")));
        let e = p.build_call("t", 1.0, Some(f64::NAN), true).unwrap_err();
        assert_eq!((e.code, e.field), ("invalid_argument", Some("now_ms")));
        assert_ne!(p.script_text(true), p.script_text(false));
    }

    #[test]
    fn a_reply_is_parsed_in_place() {
        let mut buf = [0.0, 0.0, 250.0, 900.0, 5000.0];
        parse_reply(&mut buf, 1).unwrap();
        assert_eq!(buf, [0.0, 0.0, 250.0, 900.0, 5000.0]);
        let mut bad = [1.0, f64::NAN, 0.0, 1.0, 5.0];
        let e = parse_reply(&mut bad, 1).unwrap_err();
        assert_eq!((e.code, e.field), ("malformed_reply", None));
        assert!(bad[1].is_nan(), "a bad reply is left as it was");
    }

    #[test]
    fn a_reply_of_text_integers_is_read_as_redis_writes_them() {
        use ReplyValue::{Number, Other, Text};
        let d = parse_reply_values(
            &[
                Text("0".into()),
                Text("0".into()),
                Number(250.0),
                Text("900".into()),
                Text("5000".into()),
            ],
            1,
        )
        .unwrap();
        assert_eq!(
            (
                d.allowed,
                d.remaining,
                d.retry_after_ms,
                d.reset_after_ms,
                d.now_ms
            ),
            (false, 0.0, 250.0, 900.0, 5000.0)
        );
        let max = (1i64 << 53).to_string();
        assert_eq!(
            parse_reply_values(
                &[
                    Text("1".into()),
                    Text("0".into()),
                    Text("0".into()),
                    Text("1".into()),
                    Text(max)
                ],
                1
            )
            .unwrap()
            .now_ms,
            9_007_199_254_740_992.0
        );
        let over = ((1i64 << 53) + 1).to_string();
        for bad in [
            "+1",
            "01",
            "1.0",
            " 1",
            "",
            "1e3",
            over.as_str(),
            "99999999999999999999",
        ] {
            let e = parse_reply_values(
                &[
                    Text("1".into()),
                    Text(bad.into()),
                    Text("0".into()),
                    Text("1".into()),
                    Text("5".into()),
                ],
                1,
            )
            .unwrap_err();
            assert_eq!(e.code, "malformed_reply", "{bad:?}");
        }
        let e = parse_reply_values(
            &[Number(1.0), Other, Number(0.0), Number(1.0), Number(5.0)],
            1,
        )
        .unwrap_err();
        assert_eq!(e.code, "malformed_reply");
        let e = parse_reply_values(&[Text("1".into())], 1).unwrap_err();
        assert_eq!(e.code, "malformed_reply");
    }

    #[test]
    fn server_errors_go_through_cores_table() {
        let p = policy();
        let key = p.key("t-1").unwrap();
        let noscript = "NOSCRIPT No matching script. Please use EVAL.";
        assert_eq!(p.map_server_error(noscript, &key, false), None);
        let e = p.map_server_error(noscript, &key, true).unwrap();
        assert_eq!(e.code, "script_error");
        let e = p
            .map_server_error("WRONGTYPE Operation", &key, false)
            .unwrap();
        assert_eq!(e.code, "wrong_type");
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
        assert_eq!((e.code, e.field), ("invalid_argument", Some("cost")));
        let e = p
            .map_server_error("MOVED 1 127.0.0.1:7000", &key, false)
            .unwrap();
        assert_eq!(e.code, "unavailable");
        assert_eq!(
            map_command_error("NOPERM no DEL for you").code,
            "permission_denied"
        );
        let e = map_command_error("WRONGTYPE Operation against a key");
        assert_eq!(e.code, "wrong_type");
        assert!(
            !e.message.contains(&key),
            "no rule's key to name: {}",
            e.message
        );
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
        assert_eq!((e.code, e.field), ("invalid_argument", Some("clock_ms")));
    }

    fn spec(algorithm: &str, limit: f64, window_ms: f64, buckets: Option<f64>) -> LimitSpec {
        LimitSpec {
            algorithm: algorithm.into(),
            limit,
            window_ms,
            buckets,
        }
    }

    #[test]
    fn several_limits_go_to_core_with_their_names() {
        let p = Policy::with_limits(
            "rl",
            "geo",
            &[
                spec("sliding_log", 2.0, 1000.0, None),
                spec("bucketed_window", 5.0, 60_000.0, None),
            ],
        )
        .unwrap();
        assert_eq!(
            p.limits_json(),
            concat!(
                r#"[{"algorithm":"sliding_log","limit":2,"windowMs":1000},"#,
                r#"{"algorithm":"bucketed_window","limit":5,"windowMs":60000,"buckets":60}]"#
            )
        );
        assert_eq!(
            p.keys("t").unwrap(),
            ["rl:{geo:t}:log:1000", "rl:{geo:t}:bucketed:60000:60"]
        );
        assert_eq!(p.key("t").unwrap(), "rl:{geo:t}:log:1000");
        let call = p.build_call("t", 1.0, None, false).unwrap();
        let parts: Vec<&str> = call.split(CALL_SEPARATOR).collect();
        assert_eq!(parts[0], sl::Script::multi_limit(sl::Mode::Acquire).sha1());
        assert_eq!(parts[1], "2");
        assert_eq!(
            p.script_text(true),
            sl::Script::multi_limit(sl::Mode::Peek).text()
        );
        // A value JS cannot hand over is named as core names the field.
        let log = spec("sliding_log", 2.0, 1000.0, None);
        for (bad, field) in [
            (spec("sliding_log", 3.0, 1.5, None), "limits[1].window_ms"),
            (spec("sliding_log", -3.0, 10.0, None), "limits[1].limit"),
            (
                spec("bucketed_window", 3.0, 10.0, Some(0.5)),
                "limits[1].buckets",
            ),
            (spec("fixed", 3.0, 10.0, None), "limits[1].algorithm"),
            (spec("sliding_log", 3.0, 0.0, None), "limits[1].window_ms"),
        ] {
            let e = Policy::with_limits("rl", "geo", &[log.clone(), bad]).unwrap_err();
            assert_eq!((e.code, e.field), ("invalid_argument", Some(field)));
            assert!(
                e.message.starts_with(&format!("{field}: ")),
                "{}",
                e.message
            );
        }
        // One limit keeps the plain names.
        let e = Policy::with_limits("rl", "geo", &[spec("fixed", 3.0, 10.0, None)]).unwrap_err();
        assert_eq!(e.field, Some("algorithm"));
        assert_eq!(
            e.message,
            sl::Algorithm::parse("fixed").unwrap_err().message()
        );
        let e =
            Policy::with_limits("rl", "geo", &[spec("sliding_log", 3.0, 1.5, None)]).unwrap_err();
        assert_eq!(e.field, Some("window_ms"));
        // Empty and over-long lists are core's errors on `limits`.
        for n in [0, sl::MAX_LIMITS + 1] {
            let specs = vec![spec("nonsense", f64::NAN, -1.0, None); n];
            let e = Policy::with_limits("rl", "geo", &specs).unwrap_err();
            assert_eq!(e.field, Some("limits"), "{n}: {}", e.message);
        }
        let e = Policy::with_limit_columns(
            "rl",
            "geo",
            vec!["sliding_log".into(), "sliding_log".into()],
            &[2.0, 3.0],
            &[1000.0, 1000.0],
            &[None, None],
        )
        .unwrap_err();
        assert_eq!(e.field, Some("limits"), "duplicates: {}", e.message);
        let e = Policy::with_limit_columns("rl", "geo", vec!["sliding_log".into()], &[], &[], &[])
            .unwrap_err();
        assert_eq!(e.code, "internal");
        assert_eq!(
            limit_field(1, "window_ms").as_deref(),
            Some("limits[1].window_ms")
        );
        assert_eq!(limit_field(sl::MAX_LIMITS as u32, "limit"), None);
    }

    #[test]
    fn a_six_element_reply_carries_denied_by() {
        let mut buf = [0.0, 0.0, 250.0, 900.0, 5000.0, 2.0];
        parse_reply(&mut buf, 2).unwrap();
        assert_eq!(buf, [0.0, 0.0, 250.0, 900.0, 5000.0, 1.0]);
        let mut buf = [1.0, 3.0, 0.0, 900.0, 5000.0, 0.0];
        parse_reply(&mut buf, 3).unwrap();
        assert_eq!(buf, [1.0, 3.0, 0.0, 900.0, 5000.0, DENIED_BY_NONE]);
        let d = parse_reply_values(
            &[
                ReplyValue::Number(0.0),
                ReplyValue::Number(0.0),
                ReplyValue::Number(5.0),
                ReplyValue::Number(9.0),
                ReplyValue::Number(1.0),
                ReplyValue::Text("1".into()),
            ],
            2,
        )
        .unwrap();
        assert_eq!(d.denied_by, Some(0.0));
        let mut bad = [1.0, 3.0, 0.0, 900.0, 5000.0, 1.0];
        assert_eq!(
            parse_reply(&mut bad, 2).unwrap_err().code,
            "malformed_reply"
        );
        // A reply that fits another policy: six elements for one limit, a
        // position past the policy's last limit.
        let mut bad = [0.0, 0.0, 250.0, 900.0, 5000.0, 2.0];
        assert_eq!(
            parse_reply(&mut bad, 1).unwrap_err().code,
            "malformed_reply"
        );
        assert_eq!(parse_reply(&mut bad, 0).unwrap_err().field, Some("limits"));
        let mut bad = [0.0, 0.0, 250.0, 900.0, 5000.0, 3.0];
        assert_eq!(
            parse_reply(&mut bad, 2).unwrap_err().code,
            "malformed_reply"
        );
        assert_eq!(bad[5], 3.0, "a bad reply is left as it was");
    }

    #[test]
    fn the_deny_cache_is_cores() {
        let mut c = DenyCache::new(None).unwrap();
        assert_eq!(c.capacity(), sl::DEFAULT_DENY_CACHE_CAPACITY as f64);
        let denial = Decision {
            allowed: false,
            remaining: 0.0,
            retry_after_ms: 500.0,
            reset_after_ms: 900.0,
            now_ms: 10_000.0,
            denied_by: Some(1.0),
        };
        assert_eq!(c.check("t", 1.0, 1000.0).unwrap(), None);
        assert_eq!(c.record("t", 2.0, denial, 1000.0, None).unwrap(), 1);
        assert_eq!(c.check("t", 1.0, 1000.0).unwrap(), None, "lower cost");
        let d = c.check("t", 2.0, 1200.0).unwrap().unwrap();
        assert_eq!(
            (
                d.allowed,
                d.retry_after_ms,
                d.reset_after_ms,
                d.now_ms,
                d.denied_by
            ),
            (false, 300.0, 700.0, 10_200.0, Some(1.0))
        );
        let allowed = Decision {
            allowed: true,
            retry_after_ms: 0.0,
            denied_by: None,
            ..denial
        };
        assert_eq!(c.record("t", 1.0, allowed, 1300.0, None).unwrap(), 0);
        assert_eq!(c.check("t", 2.0, 1300.0).unwrap(), None);
        c.record("t", 2.0, denial, 1000.0, None).unwrap();
        assert_eq!(c.forget("t"), 0);
        c.record("t", 2.0, denial, 1000.0, None).unwrap();
        c.clear();
        assert_eq!(c.size(), 0);
        for bad in [0.0, 1.5, -1.0, (sl::MAX_DENY_CACHE_CAPACITY + 1) as f64] {
            let e = DenyCache::new(Some(bad)).unwrap_err();
            assert_eq!(e.field, Some("deny_cache_capacity"), "{bad}");
        }
        assert_eq!(DenyCache::new(Some(3.0)).unwrap().capacity(), 3.0);
    }

    /// JS skips `check` while the cache is empty, so two acquires can be in
    /// flight unchecked across a reset; the latest send time handed to
    /// `record` keeps the later one out too, whichever reply comes first.
    #[test]
    fn unchecked_calls_in_flight_across_a_reset_are_not_cached() {
        let denial = Decision {
            allowed: false,
            remaining: 0.0,
            retry_after_ms: 500.0,
            reset_after_ms: 500.0,
            now_ms: 10_000.0,
            denied_by: None,
        };
        let mut c = DenyCache::new(None).unwrap();
        // Sent at 90 and 100, neither checked; then a reset.
        sl::forget_tenant("glue-unchecked-t");
        c.record("glue-unchecked-t", 1.0, denial, 90.0, Some(100.0))
            .unwrap();
        assert_eq!(
            c.record("glue-unchecked-t", 1.0, denial, 100.0, Some(100.0))
                .unwrap(),
            0,
            "sent before the reset was seen"
        );
        assert_eq!(
            c.record("glue-unchecked-t", 1.0, denial, 101.0, Some(101.0))
                .unwrap(),
            1,
            "sent after it"
        );
        for bad in [f64::NAN, -1.0, 1.5] {
            let e = c
                .record("glue-unchecked-t", 1.0, denial, 101.0, Some(bad))
                .unwrap_err();
            assert_eq!(e.field, Some("latest_sent_ms"), "{bad}");
        }
    }

    #[test]
    fn constants_are_cores() {
        assert_eq!(
            constants_json(),
            concat!(
                r#"{"defaults":{"namespace":"rl","algorithm":"sliding_log","timeoutMs":1000,"denyCacheCapacity":10000},"#,
                r#""callSeparator":"\u0000","metrics":{"#,
                r#""allowedTotal":{"name":"ratelimit_allowed_total","help":"Acquires allowed by the rate limiter."},"#,
                r#""deniedTotal":{"name":"ratelimit_denied_total","help":"Acquires denied by the rate limiter."},"#,
                r#""localDeniedTotal":{"name":"ratelimit_local_denied_total","help":"Acquires denied in-process by the local deny cache, without a Redis call."},"#,
                r#""waitSeconds":{"name":"ratelimit_wait_seconds","help":"retry_after handed to denied callers, in seconds."},"#,
                r#""labels":{"resource":"resource","tenant":"tenant","counter":["resource"],"#,
                r#""counterWithTenant":["resource","tenant"],"wait":["resource"]},"#,
                r#""waitBuckets":[0.001,0.005,0.01,0.05,0.1,0.5,1,5,10,30,60,600]}}"#
            )
        );
    }

    #[test]
    fn timeouts_and_codes_come_from_core() {
        assert_eq!(check_timeout_ms(250.0).unwrap(), 250.0);
        assert_eq!(check_timeout_ms(0.0).unwrap_err().field, Some("timeout_ms"));
        assert_eq!(error_codes()[0], "invalid_argument");
        assert_eq!(error_codes().len(), sl::ErrorCode::ALL.len());
    }
}
