//! The Rust binding's driver (docs/driver.md): the public async API of the
//! `slidelimit` crate behind JSON lines on stdin and stdout, for the shared
//! harnesses (conformance/, audit/, faults/). It decides nothing itself: every
//! value goes to the binding as given and every answer is the binding's.
//!
//! Requests are read on the main thread; each op runs to completion on a
//! tokio runtime (`load` spawns its callers there as tasks) before the next
//! line is read, so replies come in request order.

#[path = "../decision_json.rs"]
mod decision_json;

use decision_json::{decision_json, error_json, json_str};
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use slidelimit::{slot, Algorithm, Error, Limit, Limiter, MemoryEngine, Options, Policy};
use std::io::{BufRead, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Callers of one `load`: far beyond any harness's need, well below what
/// would exhaust memory.
const MAX_CONCURRENCY: u64 = 100_000;

/// The largest caller-clock skew a `load` takes (docs/driver.md): an hour.
const MAX_SKEW_MS: i64 = 3_600_000;
/// The most tenants one `load` goes round (docs/driver.md).
const MAX_LOAD_TENANTS: usize = 1_000;

/// A request the driver cannot read: answered as `{"error":"protocol",...}`.
struct Protocol(String);

type OpResult = Result<String, Reply>;

/// What goes back for a request that did not succeed.
enum Reply {
    Protocol(Protocol),
    Binding(Error),
}

impl From<Protocol> for Reply {
    fn from(p: Protocol) -> Self {
        Reply::Protocol(p)
    }
}

impl From<Error> for Reply {
    fn from(e: Error) -> Self {
        Reply::Binding(e)
    }
}

fn protocol_line(p: &Protocol) -> String {
    format!("{{\"error\":\"protocol\",\"message\":{}}}", json_str(&p.0))
}

const OK: &str = "{\"ok\":true}";

/// The refusal of a policy field with no default that a request left out.
const REQUIRED: &str = "is required (the Rust API has no default)";

/// The refusal of a string that held a lone surrogate.
const LONE_SURROGATE: &str =
    "is not valid UTF-8: it holds a lone surrogate (the Rust API takes &str)";

/// A JSON number is a double (docs/driver.md): a whole one up to 2^53
/// written as `3.0`, `3e0` or `-0` is that integer, as JavaScript reads it.
fn whole_double(n: &serde_json::Number) -> Option<u64> {
    const WHOLE_DOUBLES: f64 = 9_007_199_254_740_992.0; // 2^53
    n.as_f64()
        .filter(|v| v.fract() == 0.0 && (0.0..=WHOLE_DOUBLES).contains(v))
        .map(|v| v as u64)
}

/// Why a JSON number is no u64, in the words the other bindings use.
fn beyond_u64(n: &serde_json::Number) -> String {
    let problem = if n.as_f64().is_some_and(|v| v < 0.0) {
        "must not be negative"
    } else if n
        .as_f64()
        .is_some_and(|v| v.fract() == 0.0 && v >= 18_446_744_073_709_551_616.0)
    {
        "must be at most 2^64 - 1"
    } else if n.as_f64().is_some_and(|v| v.fract() == 0.0) {
        // Whole, above 2^53, and not in digits: no exact double.
        "must be written in digits above 2^53"
    } else {
        "must be an integer"
    };
    format!("{problem}, got {n} (the Rust API takes u64)")
}

/// Why a number past the doubles' range is no u64.
fn beyond_doubles(text: &str) -> String {
    let problem = if text.starts_with('-') {
        "must not be negative"
    } else {
        "must be at most 2^64 - 1"
    };
    format!("{problem}, got {text} (the Rust API takes u64)")
}

/// The values of a request that JSON carries and `serde_json::Value` cannot
/// hold (see `parse_request`), by path (`tenant`, `limits[1].limit`); each is
/// kept in the request as its JSON text.
#[derive(Default)]
struct Unreadable {
    /// Strings holding a lone surrogate.
    lone_surrogates: Vec<String>,
    /// Numbers past the doubles' range (`1e400`), which JSON's grammar allows.
    beyond_doubles: Vec<String>,
}

/// The fields of one request, read by name with the JSON type the protocol
/// gives them; a field the op does not know is refused, so that a misspelt
/// field is no silent default.
struct Fields<'a> {
    op: &'a str,
    map: &'a Map<String, Value>,
    unreadable: &'a Unreadable,
    /// Where `map` sits in the request: "" or `limits[i].`.
    path: String,
    /// The entries of a policy's `limits`, each read as a request of its
    /// own (by `check_types`, once).
    limits: Option<Vec<Fields<'a>>>,
}

impl<'a> Fields<'a> {
    fn new(
        op: &'a str,
        map: &'a Map<String, Value>,
        unreadable: &'a Unreadable,
        path: String,
        known: &[&str],
    ) -> Result<Self, Protocol> {
        if let Some(unknown) = map
            .keys()
            .find(|k| *k != "op" && !known.contains(&k.as_str()))
        {
            return Err(Protocol(format!("{op}: unknown field {unknown:?}")));
        }
        let mut fields = Fields {
            op,
            map,
            unreadable,
            path,
            limits: None,
        };
        fields.check_types()?;
        Ok(fields)
    }

    /// Every field's JSON type, before any value reaches the binding: a
    /// request the driver cannot read is a protocol error wherever its fault
    /// sits, never a refusal of an earlier field (docs/driver.md), as the
    /// drivers of dynamic languages read it. Each entry of a policy's
    /// `limits` is read the same way, and an `acquire_at` without `now_ms`
    /// is refused here too.
    fn check_types(&mut self) -> Result<(), Protocol> {
        enum Json {
            String,
            Boolean,
            Number,
            Limits,
        }
        let map = self.map;
        for (name, value) in map.iter().filter(|(_, v)| !v.is_null()) {
            let json = match name.as_str() {
                // `url` and `urls` are read by `store` for its kind alone,
                // before any other field; `load`'s schedule is the harness's
                // own, read as it is used.
                "op" | "url" | "urls" | "active" | "tenants" => continue,
                "namespace" | "resource" | "algorithm" | "tenant" | "kind" | "tls_ca_file"
                | "lang" | "out" => Json::String,
                "deny_cache" => Json::Boolean,
                "limits" => Json::Limits,
                _ => Json::Number,
            };
            // A number past the doubles' range is kept as its text.
            let beyond_doubles = self.is_in(&self.unreadable.beyond_doubles, name);
            let (fits, want) = match json {
                Json::String => (value.is_string() && !beyond_doubles, "a string"),
                Json::Boolean => (value.is_boolean(), "a boolean"),
                Json::Number => (value.is_number() || beyond_doubles, "a JSON number"),
                Json::Limits => {
                    self.limits = self.limit_entries(value)?;
                    (self.limits.is_some(), "a list of objects")
                }
            };
            if !fits {
                return Err(self.wrong(name, want));
            }
        }
        if self.op == "acquire_at" && self.get("now_ms").is_none() {
            return Err(self.missing("now_ms"));
        }
        Ok(())
    }

    /// The entries of `value`, each read as a request of its own with a
    /// limit's fields (`check_types` on each); None unless it is a list of
    /// objects.
    fn limit_entries(&self, value: &'a Value) -> Result<Option<Vec<Fields<'a>>>, Protocol> {
        let Some(list) = value.as_array() else {
            return Ok(None);
        };
        let mut entries = Vec::with_capacity(list.len());
        for (i, entry) in list.iter().enumerate() {
            let Value::Object(map) = entry else {
                return Ok(None);
            };
            let path = format!("{}limits[{i}].", self.path);
            entries.push(Fields::new(
                "policy limits[]",
                map,
                self.unreadable,
                path,
                &LIMIT_FIELDS,
            )?);
        }
        Ok(Some(entries))
    }

    fn is_in(&self, paths: &[String], name: &str) -> bool {
        paths
            .iter()
            .any(|p| p.strip_prefix(self.path.as_str()) == Some(name))
    }

    /// A field's value; JSON `null` is the same as leaving the field out
    /// (docs/driver.md), as it is for the drivers of dynamic languages.
    fn get(&self, name: &str) -> Option<&'a Value> {
        self.map.get(name).filter(|v| !v.is_null())
    }

    fn wrong(&self, name: &str, want: &str) -> Protocol {
        Protocol(format!("{}: {name} must be {want}", self.op))
    }

    fn missing(&self, name: &str) -> Protocol {
        Protocol(format!("{}: {name} is required", self.op))
    }

    fn opt_str(&self, name: &str) -> Result<Option<&'a str>, Protocol> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(self.wrong(name, "a string")),
        }
    }

    fn str(&self, name: &str) -> Result<&'a str, Protocol> {
        self.opt_str(name)?.ok_or_else(|| self.missing(name))
    }

    /// A string the binding takes as `&str`. One that held a lone surrogate
    /// never reaches it: no `&str` can hold one, so the type refuses it, as
    /// it refuses it for the binding's users (docs/driver.md).
    fn binding_str(&self, name: &'static str) -> Result<Option<&'a str>, Reply> {
        if self.is_in(&self.unreadable.lone_surrogates, name) {
            return Err(Error::invalid(name, LONE_SURROGATE).into());
        }
        Ok(self.opt_str(name)?)
    }

    /// The tenant of a call, reset or key: required, as the Rust API has no
    /// default for it.
    fn tenant(&self) -> Result<&'a str, Reply> {
        self.binding_str("tenant")?
            .ok_or_else(|| Error::invalid("tenant", REQUIRED).into())
    }

    /// An integer the harness's own fields (a `load`'s schedule) take.
    fn opt_u64(&self, name: &str) -> Result<Option<u64>, Protocol> {
        match self.get(name) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .map(Some)
                .ok_or_else(|| self.wrong(name, "a non-negative integer")),
        }
    }

    fn u64(&self, name: &str) -> Result<u64, Protocol> {
        self.opt_u64(name)?.ok_or_else(|| self.missing(name))
    }

    /// A number handed to one of the binding's u64 parameters. A JSON number
    /// that no u64 holds (negative, fractional, past 2^64 - 1) cannot reach a
    /// Rust API: the type refuses it before the binding runs. The driver
    /// reports that refusal as the field's `invalid_argument`
    /// (docs/driver.md), as the bindings of dynamic languages report the same
    /// value; a value of another JSON type is a protocol error.
    fn opt_arg(&self, name: &'static str) -> Result<Option<u64>, Reply> {
        if self.is_in(&self.unreadable.beyond_doubles, name) {
            let text = self.get(name).and_then(Value::as_str).unwrap_or_default();
            return Err(Error::invalid(name, beyond_doubles(text)).into());
        }
        match self.get(name) {
            None => Ok(None),
            Some(Value::Number(n)) => match n.as_u64().or_else(|| whole_double(n)) {
                Some(v) => Ok(Some(v)),
                None => Err(Error::invalid(name, beyond_u64(n)).into()),
            },
            Some(_) => Err(self.wrong(name, "a JSON number").into()),
        }
    }

    /// A policy's number that has no default: a Rust caller cannot leave it
    /// out, so an absent one is refused as such (docs/driver.md).
    fn required_arg(&self, name: &'static str) -> Result<u64, Reply> {
        self.opt_arg(name)?
            .ok_or_else(|| Error::invalid(name, REQUIRED).into())
    }

    fn arg(&self, name: &'static str) -> Result<u64, Reply> {
        self.opt_arg(name)?.ok_or_else(|| self.missing(name).into())
    }

    fn opt_bool(&self, name: &str) -> Result<Option<bool>, Protocol> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(_) => Err(self.wrong(name, "a boolean")),
        }
    }

    /// The `limits` list (its entries read by `check_types`), each entry's
    /// values converted by the single form's rules.
    fn opt_limits(&self) -> Result<Option<Vec<LimitFields>>, Reply> {
        let Some(entries) = &self.limits else {
            return Ok(None);
        };
        if entries.len() > slidelimit::MAX_LIMITS {
            // The binding refuses the count before it reads any limit.
            let mut unread = Vec::with_capacity(entries.len());
            unread.resize_with(entries.len(), LimitFields::unread);
            return Ok(Some(unread));
        }
        let read = entries.iter().enumerate().map(|(i, f)| {
            // A refused value is named as core names a field of this limit.
            LimitFields::read(f).map_err(|r| match r {
                Reply::Binding(e) => Reply::Binding(e.for_limit(i, entries.len())),
                protocol => protocol,
            })
        });
        read.collect::<Result<Vec<_>, _>>().map(Some)
    }
}

/// The fields of one limit (a `policy` op's single form, or an entry of `limits`).
const LIMIT_FIELDS: [&str; 4] = ["algorithm", "limit", "window_ms", "buckets"];

struct LimitFields {
    algorithm: Option<String>,
    limit: u64,
    window_ms: u64,
    buckets: Option<u64>,
}

impl LimitFields {
    fn read(f: &Fields) -> Result<LimitFields, Reply> {
        Ok(LimitFields {
            algorithm: f.opt_str("algorithm")?.map(str::to_owned),
            limit: f.required_arg("limit")?,
            window_ms: f.required_arg("window_ms")?,
            buckets: f.opt_arg("buckets")?,
        })
    }

    /// A limit the binding never reads (an entry of a list too long).
    fn unread() -> LimitFields {
        LimitFields {
            algorithm: None,
            limit: 1,
            window_ms: 1,
            buckets: None,
        }
    }

    fn to_limit(&self) -> Result<Limit, Error> {
        let algorithm = match &self.algorithm {
            Some(a) => Algorithm::parse(a)?,
            None => slidelimit_core::DEFAULT_ALGORITHM,
        };
        Ok(Limit {
            algorithm,
            limit: self.limit,
            window_ms: self.window_ms,
            buckets: self.buckets,
        })
    }
}

#[derive(Clone)]
enum StoreKind {
    /// One engine per store: every policy's limiter shares it, as they
    /// would share one Redis.
    Memory(Arc<MemoryEngine>),
    Redis(String),
    Cluster(Vec<String>),
}

#[derive(Clone)]
struct Store {
    kind: StoreKind,
    options: Options,
}

#[derive(Default)]
struct Driver {
    store: Option<Store>,
    /// The limiter of the last `policy`, or the error that policy got.
    limiter: Option<Result<Limiter, Error>>,
}

/// A limiter for `policy` on the store: the memory engine's, or one that
/// connects to Redis on its first call, as a worker that may start before
/// Redis does would make it (docs/driver.md).
async fn open(kind: &StoreKind, policy: Policy, options: Options) -> Result<Limiter, Error> {
    match kind {
        StoreKind::Memory(engine) => Ok(Limiter::memory_on(engine.clone(), policy, options)),
        StoreKind::Redis(url) => Limiter::connect_lazy(url, policy, options).await,
        StoreKind::Cluster(urls) => {
            let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
            Limiter::connect_cluster_lazy(&urls, policy, options).await
        }
    }
}

impl Driver {
    fn limiter(&self, op: &str) -> Result<&Limiter, Reply> {
        match &self.limiter {
            Some(Ok(l)) => Ok(l),
            Some(Err(e)) => Err(Reply::Binding(e.clone())),
            None => Err(Protocol(format!("{op}: no policy yet")).into()),
        }
    }

    fn store(&mut self, f: &Fields) -> OpResult {
        let kind = match f.str("kind")? {
            "memory" => StoreKind::Memory(Arc::new(MemoryEngine::new())),
            "redis" => StoreKind::Redis(f.str("url")?.to_owned()),
            "cluster" => {
                // A number past the doubles' range is kept as its text.
                let urls = match f.get("urls") {
                    Some(Value::Array(a))
                        if a.is_empty()
                            || (f.unreadable.beyond_doubles.iter())
                                .any(|p| p.starts_with("urls[")) =>
                    {
                        return Err(f.wrong("urls", "a non-empty list of strings").into())
                    }
                    Some(Value::Array(a)) => a
                        .iter()
                        .map(|u| u.as_str().map(str::to_owned))
                        .collect::<Option<Vec<_>>>()
                        .ok_or_else(|| f.wrong("urls", "a non-empty list of strings"))?,
                    Some(_) => return Err(f.wrong("urls", "a non-empty list of strings").into()),
                    None => return Err(f.missing("urls").into()),
                };
                StoreKind::Cluster(urls)
            }
            other => {
                return Err(Protocol(format!(
                    "store: kind must be memory, redis or cluster, got {other:?}"
                ))
                .into())
            }
        };
        let mut options = Options::default();
        if let Some(ms) = f.opt_arg("timeout_ms")? {
            options.timeout = Duration::from_millis(ms);
        }
        if let Some(path) = f.opt_str("tls_ca_file")? {
            // The binding takes the CA's PEM bytes; reading the file is the
            // user's part, and a file that cannot be read fails here.
            let pem = std::fs::read(Path::new(path))
                .map_err(|e| Error::invalid("tls_ca_file", format!("cannot read {path}: {e}")))?;
            options.tls_ca_pem = Some(pem);
        }
        self.store = Some(Store { kind, options });
        self.limiter = None;
        Ok(OK.to_owned())
    }

    async fn policy(&mut self, f: &Fields<'_>) -> OpResult {
        let store = self
            .store
            .clone()
            .ok_or_else(|| Protocol("policy: no store yet".to_owned()))?;
        // Defaults are the binding's; resource, limit and window_ms have none.
        let namespace = f
            .binding_str("namespace")
            .map(|n| n.unwrap_or(slidelimit_core::DEFAULT_NAMESPACE));
        let resource = f
            .binding_str("resource")
            .and_then(|r| r.ok_or_else(|| Reply::Binding(Error::invalid("resource", REQUIRED))));
        let limits = match f.opt_limits() {
            Ok(Some(limits)) => {
                if let Some(single) = LIMIT_FIELDS.iter().find(|n| f.get(n).is_some()) {
                    return Err(
                        Protocol(format!("policy: limits and {single} are exclusive")).into(),
                    );
                }
                Ok(limits)
            }
            Ok(None) => LimitFields::read(f).map(|single| vec![single]),
            Err(e) => Err(e),
        };
        let read = namespace.and_then(|n| resource.and_then(|r| limits.map(|l| (n, r, l))));
        let (namespace, resource, limits) = match read {
            Ok(read) => read,
            // A value the API's types refuse, or one it cannot leave out, is
            // a refused policy: every op that needs a limiter answers its
            // error until the next policy.
            Err(Reply::Binding(e)) => {
                self.limiter = Some(Err(e.clone()));
                return Err(Reply::Binding(e));
            }
            Err(protocol) => return Err(protocol),
        };
        // Off unless asked for: the harnesses switch it on where they mean to.
        let mut options = store.options.clone();
        if f.opt_bool("deny_cache")? != Some(true) {
            options.deny_cache = None;
        }
        self.limiter = None;
        let built = async {
            // A bad algorithm is named as core names any field of a limit.
            let limits = limits
                .iter()
                .enumerate()
                .map(|(i, l)| l.to_limit().map_err(|e| e.for_limit(i, limits.len())))
                .collect::<Result<Vec<_>, _>>()?;
            let policy = Policy::with_limits(namespace, resource, &limits)?;
            open(&store.kind, policy, options).await
        }
        .await;
        let reply = match &built {
            Ok(_) => Ok(OK.to_owned()),
            Err(e) => Err(Reply::Binding(e.clone())),
        };
        self.limiter = Some(built);
        reply
    }

    async fn call(&self, op: &str, f: &Fields<'_>) -> OpResult {
        let limiter = self.limiter(op)?;
        let tenant = f.tenant()?;
        let cost = f.opt_arg("cost")?;
        let decision = match op {
            "acquire" => match cost {
                None => limiter.acquire(tenant).await,
                Some(cost) => limiter.acquire_n(tenant, cost).await,
            },
            "acquire_at" => {
                let now_ms = f.arg("now_ms")?;
                limiter.acquire_at(tenant, cost.unwrap_or(1), now_ms).await
            }
            _ => match f.opt_arg("now_ms")? {
                None => limiter.peek(tenant, cost.unwrap_or(1)).await,
                Some(now_ms) => limiter.peek_at(tenant, cost.unwrap_or(1), now_ms).await,
            },
        }?;
        Ok(decision_json(&decision))
    }

    async fn reset(&self, f: &Fields<'_>) -> OpResult {
        let limiter = self.limiter("reset")?;
        limiter.reset(f.tenant()?).await?;
        Ok(OK.to_owned())
    }

    fn key(&self, f: &Fields) -> OpResult {
        let key = self.limiter("key")?.policy().key(f.tenant()?)?;
        Ok(format!(
            "{{\"ok\":true,\"key\":{},\"slot\":{}}}",
            json_str(&key),
            slot(&key)
        ))
    }

    async fn load(&self, f: &Fields<'_>) -> OpResult {
        // The whole request is read before the limiter (or its policy's
        // error) answers.
        let plan = Plan::read(f)?;
        let out = f.str("out")?.to_owned();
        let limiter = self.limiter("load")?.clone();
        let (calls, errors, text) = plan.run(limiter).await;
        std::fs::write(&out, text)
            .map_err(|e| Protocol(format!("load: cannot write out {out}: {e}")))?;
        Ok(format!(
            "{{\"ok\":true,\"calls\":{calls},\"errors\":{errors}}}"
        ))
    }
}

/// The schedule of a `load`, shared by all its callers.
struct Plan {
    /// Each tenant with the head of its calls' lines (`{"lang":...`, and
    /// `,"tenant":...` when there are several). Caller i's j-th call (from
    /// 0) is for `rounds[(i + j) % len]`.
    rounds: Vec<(String, String)>,
    cost: Option<u64>,
    concurrency: u64,
    start_at_ms: u64,
    end_at_ms: u64,
    /// `[from, to)` intervals; `None`: the whole run is active.
    active: Option<Vec<(u64, u64)>>,
    ramp_ms: u64,
    jitter_ms: u64,
    /// Some: every call is `acquire_at` on the wall clock plus this skew
    /// (caller time); None: `acquire` on server time.
    skew_ms: Option<i64>,
}

fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A xorshift64 step: enough randomness for ramps and pauses.
fn next_random(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

async fn sleep_ms(ms: u64) {
    if ms > 0 {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
}

impl Plan {
    fn read(f: &Fields) -> Result<Plan, Protocol> {
        let active = match f.get("active") {
            None => None,
            Some(Value::Array(list)) => Some(
                list.iter()
                    .map(|pair| match pair.as_array().map(Vec::as_slice) {
                        Some([a, b]) => a.as_u64().zip(b.as_u64()),
                        _ => None,
                    })
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| f.wrong("active", "a list of [from, to] integer pairs"))?,
            ),
            Some(_) => return Err(f.wrong("active", "a list of [from, to] integer pairs")),
        };
        let skew_ms =
            match f.get("skew_ms") {
                None => None,
                Some(v) => Some(v.as_i64().filter(|s| s.abs() <= MAX_SKEW_MS).ok_or_else(
                    || f.wrong("skew_ms", &format!("an integer within ±{MAX_SKEW_MS}")),
                )?),
            };
        let concurrency = f.u64("concurrency")?;
        if concurrency > MAX_CONCURRENCY {
            return Err(f.wrong("concurrency", &format!("at most {MAX_CONCURRENCY}")));
        }
        let lang = format!("{{\"lang\":{}", json_str(f.str("lang")?));
        let tenants = Plan::tenants(f)?;
        let several = tenants.len() > 1;
        let rounds = tenants
            .into_iter()
            .map(|t| {
                let head = if several {
                    format!("{lang},\"tenant\":{}", json_str(&t))
                } else {
                    lang.clone()
                };
                (t, head)
            })
            .collect();
        Ok(Plan {
            rounds,
            cost: f.opt_u64("cost")?,
            concurrency,
            start_at_ms: f.u64("start_at_ms")?,
            end_at_ms: f.u64("end_at_ms")?,
            active,
            ramp_ms: f.opt_u64("ramp_ms")?.unwrap_or(0),
            jitter_ms: f.opt_u64("jitter_ms")?.unwrap_or(0),
            skew_ms,
        })
    }

    /// A load's `tenant`, or its `tenants` to go round.
    fn tenants(f: &Fields) -> Result<Vec<String>, Protocol> {
        let Some(list) = f.get("tenants") else {
            return Ok(vec![f.str("tenant")?.to_owned()]);
        };
        if f.get("tenant").is_some() {
            return Err(Protocol("load: tenant and tenants are exclusive".into()));
        }
        let wrong = || {
            f.wrong(
                "tenants",
                &format!("a list of 1 to {MAX_LOAD_TENANTS} strings"),
            )
        };
        let list = list.as_array().ok_or_else(wrong)?;
        if list.is_empty() || list.len() > MAX_LOAD_TENANTS {
            return Err(wrong());
        }
        list.iter()
            .map(|t| t.as_str().map(str::to_owned).ok_or_else(wrong))
            .collect()
    }

    /// How long a caller waits at `now` before it may call: 0 inside an
    /// active interval, else until the next one starts (or the run ends).
    fn wait_ms(&self, now: u64) -> u64 {
        let Some(active) = &self.active else {
            return 0;
        };
        if active.iter().any(|&(from, to)| from <= now && now < to) {
            return 0;
        }
        let next = active
            .iter()
            .map(|&(from, _)| from)
            .filter(|&from| from > now)
            .min()
            .unwrap_or(self.end_at_ms);
        next.min(self.end_at_ms).saturating_sub(now).max(1)
    }

    /// One caller's log lines and its count of errors.
    async fn caller(
        self: Arc<Self>,
        limiter: Limiter,
        index: usize,
        seed: u64,
    ) -> (Vec<String>, u64) {
        let (mut lines, mut errors) = (Vec::new(), 0);
        let mut turn = index;
        let mut random = seed | 1;
        let ramp = next_random(&mut random) % self.ramp_ms.saturating_add(1);
        let first = self.start_at_ms.saturating_add(ramp);
        sleep_ms(first.min(self.end_at_ms).saturating_sub(wall_ms())).await;
        loop {
            let now = wall_ms();
            if now >= self.end_at_ms {
                return (lines, errors);
            }
            let wait = self.wait_ms(now);
            if wait > 0 {
                sleep_ms(wait).await;
                continue;
            }
            let (tenant, head) = &self.rounds[turn % self.rounds.len()];
            turn += 1;
            let result = match (self.skew_ms, self.cost) {
                (Some(skew), cost) => {
                    let at = wall_ms().saturating_add_signed(skew);
                    limiter.acquire_at(tenant, cost.unwrap_or(1), at).await
                }
                (None, None) => limiter.acquire(tenant).await,
                (None, Some(cost)) => limiter.acquire_n(tenant, cost).await,
            };
            lines.push(match result {
                Ok(d) => format!(
                    "{head},\"allowed\":{},\"now_ms\":{},\"retry_after_ms\":{},\"reset_after_ms\":{}}}\n",
                    d.allowed, d.now_ms, d.retry_after_ms, d.reset_after_ms
                ),
                Err(e) => {
                    errors += 1;
                    format!(
                        "{head},\"error\":\"{}\",\"message\":{}}}\n",
                        e.code(),
                        json_str(e.message())
                    )
                }
            });
            sleep_ms(next_random(&mut random) % self.jitter_ms.saturating_add(1)).await;
        }
    }

    /// Runs every caller to its end: (calls, errors, the log's text).
    async fn run(self, limiter: Limiter) -> (u64, u64, String) {
        let plan = Arc::new(self);
        let seed = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
            ^ u64::from(std::process::id());
        let tasks: Vec<_> = (0..plan.concurrency)
            .map(|i| {
                let seed = seed.wrapping_add(i.wrapping_mul(0x9E37_79B9_7F4A_7C15));
                tokio::spawn(plan.clone().caller(limiter.clone(), i as usize, seed))
            })
            .collect();
        let (mut calls, mut errors, mut text) = (0, 0, String::new());
        for task in tasks {
            // A caller only panics on a bug; its calls are then lost, and
            // the missing lines show in the audit's counts.
            let (lines, failed) = task.await.unwrap_or_else(|e| {
                eprintln!("slidelimit-driver: a load caller failed: {e}");
                (Vec::new(), 0)
            });
            calls += lines.len() as u64;
            errors += failed;
            lines.iter().for_each(|line| text.push_str(line));
        }
        (calls, errors, text)
    }
}

/// The fields each op accepts (besides `op`).
fn known_fields(op: &str) -> Option<&'static [&'static str]> {
    Some(match op {
        "hello" | "exit" => &[],
        "store" => &["kind", "url", "urls", "timeout_ms", "tls_ca_file"],
        "policy" => &[
            "namespace",
            "resource",
            "algorithm",
            "limit",
            "window_ms",
            "buckets",
            "limits",
            "deny_cache",
        ],
        "acquire" => &["tenant", "cost"],
        "acquire_at" | "peek" => &["tenant", "cost", "now_ms"],
        "reset" | "key" => &["tenant"],
        "load" => &[
            "lang",
            "tenant",
            "tenants",
            "cost",
            "concurrency",
            "start_at_ms",
            "end_at_ms",
            "active",
            "ramp_ms",
            "jitter_ms",
            "skew_ms",
            "out",
        ],
        _ => return None,
    })
}

/// One request line. serde_json refuses a whole line for one value its
/// `Value` cannot hold: a string with a lone surrogate (JSON's `\ud800`;
/// docs/driver.md, "Framing") or a number past the doubles' range (`1e400`).
/// The line is then read value by value (`read_raw`), so that the op
/// refuses that value as its field, as the other drivers do.
fn parse_request(line: &str) -> Result<(Value, Unreadable), Protocol> {
    let refused = match serde_json::from_str(line) {
        Ok(v) => return Ok((v, Unreadable::default())),
        Err(e) => Protocol(format!("bad JSON: {e}")),
    };
    let mut unreadable = Unreadable::default();
    match serde_json::from_str::<&RawValue>(line) {
        Ok(raw) => match read_raw(raw, String::new(), &mut unreadable) {
            Some(value) => Ok((value, unreadable)),
            None => Err(refused),
        },
        Err(_) => Err(refused),
    }
}

/// One value of a line serde_json refused; None when it is bad JSON after
/// all. A raw read checks the grammar, every escape and control byte, but
/// computes no number: so a string it accepts and a `Value` refuses holds a
/// lone surrogate, and such a number is past the doubles' range. Either is
/// kept as its JSON text, named by its path in `unreadable`.
fn read_raw(raw: &RawValue, path: String, unreadable: &mut Unreadable) -> Option<Value> {
    if let Ok(value) = serde_json::from_str(raw.get()) {
        return Some(value);
    }
    let text = raw.get();
    match text.as_bytes().first() {
        Some(b'{') => {
            let fields: std::collections::BTreeMap<String, &RawValue> =
                serde_json::from_str(text).ok()?;
            let mut map = Map::new();
            for (name, value) in fields {
                let inner = match path.as_str() {
                    "" => name.clone(),
                    _ => format!("{path}.{name}"),
                };
                map.insert(name, read_raw(value, inner, unreadable)?);
            }
            Some(Value::Object(map))
        }
        Some(b'[') => {
            let items: Vec<&RawValue> = serde_json::from_str(text).ok()?;
            let list = items
                .into_iter()
                .enumerate()
                .map(|(i, item)| read_raw(item, format!("{path}[{i}]"), unreadable))
                .collect::<Option<Vec<_>>>()?;
            Some(Value::Array(list))
        }
        Some(b'"') => {
            unreadable.lone_surrogates.push(path);
            Some(Value::String(text[1..text.len() - 1].to_owned()))
        }
        Some(b'-' | b'0'..=b'9') => {
            unreadable.beyond_doubles.push(path);
            Some(Value::String(text.to_owned()))
        }
        _ => None,
    }
}

/// Answers one request line; false after `exit`.
fn handle(driver: &mut Driver, runtime: &tokio::runtime::Runtime, line: &str) -> (String, bool) {
    let (request, unreadable) = match parse_request(line) {
        Ok(parsed) => parsed,
        Err(p) => return (protocol_line(&p), true),
    };
    let Some(map) = request.as_object() else {
        return (
            protocol_line(&Protocol("a request must be an object".into())),
            true,
        );
    };
    let op = match map.get("op") {
        Some(Value::String(op)) => op.as_str(),
        Some(_) => return (protocol_line(&Protocol("op must be a string".into())), true),
        None => return (protocol_line(&Protocol("op is required".into())), true),
    };
    let Some(known) = known_fields(op) else {
        return (protocol_line(&Protocol(format!("unknown op {op:?}"))), true);
    };
    let result = Fields::new(op, map, &unreadable, String::new(), known)
        .map_err(Reply::from)
        .and_then(|f| {
            runtime.block_on(async {
                match op {
                    "hello" => Ok(format!(
                        "{{\"ok\":true,\"binding\":\"rust\",\"version\":{}}}",
                        json_str(slidelimit_core::VERSION)
                    )),
                    "exit" => Ok(OK.to_owned()),
                    "store" => driver.store(&f),
                    "policy" => driver.policy(&f).await,
                    "key" => driver.key(&f),
                    "reset" => driver.reset(&f).await,
                    "load" => driver.load(&f).await,
                    _ => driver.call(op, &f).await,
                }
            })
        });
    let line = match result {
        Ok(line) => line,
        Err(Reply::Binding(e)) => error_json(&e),
        Err(Reply::Protocol(p)) => protocol_line(&p),
    };
    (line, op != "exit")
}

fn main() -> std::process::ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("slidelimit-driver: cannot start the tokio runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let mut driver = Driver::default();
    let mut stdin = std::io::stdin().lock();
    let mut stdout = std::io::stdout().lock();
    let mut raw = Vec::new();
    loop {
        raw.clear();
        match stdin.read_until(b'\n', &mut raw) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => {
                eprintln!("slidelimit-driver: reading stdin: {e}");
                break;
            }
        }
        let (reply, more) = match std::str::from_utf8(&raw) {
            Ok(line) if line.trim().is_empty() => continue,
            Ok(line) => handle(&mut driver, &runtime, line),
            // Bytes that are not UTF-8 are no JSON either.
            Err(e) => (protocol_line(&Protocol(format!("bad JSON: {e}"))), true),
        };
        if writeln!(stdout, "{reply}")
            .and_then(|()| stdout.flush())
            .is_err()
        {
            // The harness went away: nobody is left to answer.
            break;
        }
        if !more {
            break;
        }
    }
    // Closes the clients before the runtime they run on.
    drop(driver);
    runtime.shutdown_timeout(Duration::from_secs(1));
    std::process::ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::Plan;

    fn plan(active: Option<Vec<(u64, u64)>>) -> Plan {
        Plan {
            rounds: vec![("t".into(), r#"{"lang":"rust""#.into())],
            cost: None,
            concurrency: 1,
            start_at_ms: 1000,
            end_at_ms: 5000,
            active,
            ramp_ms: 0,
            jitter_ms: 0,
            skew_ms: None,
        }
    }

    #[test]
    fn callers_wait_for_the_next_active_interval_or_the_end() {
        let p = plan(Some(vec![(3000, 4000), (1500, 2000)]));
        assert_eq!(p.wait_ms(1000), 500, "before the first interval");
        assert_eq!(p.wait_ms(1500), 0, "intervals include their start");
        assert_eq!(p.wait_ms(1999), 0);
        assert_eq!(p.wait_ms(2000), 1000, "and exclude their end");
        assert_eq!(p.wait_ms(3500), 0);
        assert_eq!(p.wait_ms(4000), 1000, "after the last: until the run ends");
        assert_eq!(plan(None).wait_ms(1000), 0, "no intervals: always active");
        assert_eq!(plan(Some(vec![])).wait_ms(1000), 4000, "none active");
    }
}
