//! `slidelimit replay FILE [--redis URL [--cluster]]`: runs a conformance
//! vector file (format `slidelimit-vectors/1`) and prints the decision log of
//! docs/protocol.md, one compact JSON line per key vector and per step.

use crate::Failure;
use clap::Args;
use serde::Deserialize;
use serde_json::{Number, Value};
use slidelimit::{
    blocking, slot, Algorithm, Decision, Error, ErrorCode, MemoryEngine, Options, Policy, Result,
};
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::PathBuf;
use std::time::Duration;

pub const FORMAT: &str = "slidelimit-vectors/1";

#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The vector file (JSON, format slidelimit-vectors/1).
    file: PathBuf,
    /// Run the decision vectors on this Redis (caller time; every key a vector
    /// touches is reset first) instead of the embedded engine.
    #[arg(long, value_name = "URL")]
    redis: Option<String>,
    /// --redis holds comma-separated URLs of Redis Cluster nodes.
    #[arg(long, requires = "redis")]
    cluster: bool,
    /// Per-call timeout with --redis.
    #[arg(long, default_value_t = 2000)]
    timeout_ms: u64,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct VectorFile {
    format: String,
    #[serde(default)]
    #[allow(dead_code)]
    comment: Option<String>,
    vectors: Vec<Value>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyVector {
    name: String,
    #[allow(dead_code)]
    kind: String,
    #[allow(dead_code)]
    comment: String,
    input: KeyInput,
    #[allow(dead_code)]
    expect: KeyExpect,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyInput {
    namespace: String,
    resource: String,
    tenant: String,
    algorithm: String,
    window_ms: Number,
}

// Expectations are parsed only so that a malformed file is rejected; the
// checker (conformance/check.py) compares them with the log.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
#[allow(dead_code)]
enum KeyExpect {
    Key(ExpectKey),
    Error(ExpectError),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct ExpectKey {
    key: String,
    slot: u16,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExpectError {
    error: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct DecisionVector {
    name: String,
    #[allow(dead_code)]
    kind: String,
    #[allow(dead_code)]
    comment: String,
    policy: PolicyInput,
    steps: Vec<Step>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyInput {
    namespace: String,
    resource: String,
    algorithm: String,
    limit: Number,
    window_ms: Number,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Step {
    now_ms: Number,
    tenant: String,
    cost: Number,
    #[serde(default)]
    #[allow(dead_code)]
    comment: Option<String>,
    #[allow(dead_code)]
    expect: StepExpect,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
#[allow(dead_code)]
enum StepExpect {
    Decision(ExpectDecision),
    Error(ExpectError),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)]
struct ExpectDecision {
    allowed: bool,
    remaining: u64,
    retry_after_ms: u64,
    reset_after_ms: u64,
    now_ms: u64,
}

enum Vector {
    Key(KeyVector),
    Decision(DecisionVector),
}

fn bad_file(path: &std::path::Path, problem: impl std::fmt::Display) -> Error {
    Error::new(
        ErrorCode::InvalidArgument,
        format!("vector file {}: {problem}", path.display()),
    )
}

/// Reads and checks the whole file before anything runs, so a bad file
/// prints no partial log.
fn load(path: &std::path::Path) -> Result<Vec<Vector>> {
    let text = std::fs::read_to_string(path).map_err(|e| bad_file(path, e))?;
    let file: VectorFile = serde_json::from_str(&text).map_err(|e| bad_file(path, e))?;
    if file.format != FORMAT {
        return Err(bad_file(
            path,
            format!("format is {:?}, expected {FORMAT:?}", file.format),
        ));
    }
    let mut vectors = Vec::with_capacity(file.vectors.len());
    for (i, v) in file.vectors.into_iter().enumerate() {
        let kind = v.get("kind").and_then(Value::as_str).unwrap_or_default();
        let name = v
            .get("name")
            .and_then(Value::as_str)
            .map_or_else(|| format!("#{i}"), str::to_owned);
        let at = |e: serde_json::Error| bad_file(path, format!("vector {name}: {e}"));
        let vector = match kind {
            "key" => Vector::Key(serde_json::from_value(v).map_err(at)?),
            "decision" => Vector::Decision(serde_json::from_value(v).map_err(at)?),
            other => {
                return Err(bad_file(
                    path,
                    format!("vector {name}: kind must be \"key\" or \"decision\", got {other:?}"),
                ))
            }
        };
        let codes = match &vector {
            Vector::Key(k) => match &k.expect {
                KeyExpect::Error(e) => vec![e.error.as_str()],
                KeyExpect::Key(_) => vec![],
            },
            Vector::Decision(d) => d
                .steps
                .iter()
                .filter_map(|s| match &s.expect {
                    StepExpect::Error(e) => Some(e.error.as_str()),
                    StepExpect::Decision(_) => None,
                })
                .collect(),
        };
        if let Some(bad) = codes.iter().find(|c| ErrorCode::parse(c).is_none()) {
            return Err(bad_file(
                path,
                format!("vector {name}: unknown error code {bad:?}"),
            ));
        }
        vectors.push(vector);
    }
    Ok(vectors)
}

/// A JSON number as the non-negative integer the contract takes; anything
/// else (negative, fractional, too large) is invalid_argument naming the field.
fn integer(field: &'static str, n: &Number) -> Result<u64> {
    n.as_u64()
        .ok_or_else(|| Error::invalid(field, format!("must be a non-negative integer, got {n}")))
}

fn json_str(s: &str) -> String {
    serde_json::to_string(s).expect("a string always serializes")
}

fn key_line(v: &KeyVector) -> String {
    let result = (|| {
        let i = &v.input;
        let algorithm = Algorithm::parse(&i.algorithm)?;
        let window_ms = integer("window_ms", &i.window_ms)?;
        // The key does not depend on the limit; 1 is always valid.
        let policy = Policy::new(&i.namespace, &i.resource, algorithm, 1, window_ms)?;
        policy.key(&i.tenant)
    })();
    match result {
        Ok(key) => format!(
            "{{\"vector\":{},\"key\":{},\"slot\":{}}}",
            json_str(&v.name),
            json_str(&key),
            slot(&key)
        ),
        Err(e) => format!(
            "{{\"vector\":{},\"error\":\"{}\"}}",
            json_str(&v.name),
            e.code()
        ),
    }
}

pub fn step_line(vector: &str, step: usize, result: &Result<Decision>) -> String {
    let mut line = format!("{{\"vector\":{},\"step\":{step},", json_str(vector));
    let _ = match result {
        Ok(d) => write!(
            line,
            "\"allowed\":{},\"remaining\":{},\"retry_after_ms\":{},\"reset_after_ms\":{},\"now_ms\":{}}}",
            d.allowed, d.remaining, d.retry_after_ms, d.reset_after_ms, d.now_ms
        ),
        Err(e) => write!(line, "\"error\":\"{}\"}}", e.code()),
    };
    line
}

/// The Redis a replay runs on.
#[derive(Clone, Copy)]
struct Store<'a> {
    url: &'a str,
    cluster: bool,
    timeout: Duration,
}

/// Where one decision vector runs, always from empty state.
enum Session {
    Memory(MemoryEngine, Policy),
    Redis(blocking::Limiter),
}

impl Session {
    fn open(redis: Option<Store>, policy: Policy, tenants: &[&str]) -> Result<Session> {
        let Some(store) = redis else {
            return Ok(Session::Memory(MemoryEngine::new(), policy));
        };
        let options = Options {
            timeout: store.timeout,
            ..Options::default()
        };
        let limiter = if store.cluster {
            let urls: Vec<&str> = store.url.split(',').map(str::trim).collect();
            blocking::Limiter::connect_cluster(&urls, policy, options)?
        } else {
            blocking::Limiter::connect(store.url, policy, options)?
        };
        for tenant in tenants {
            match limiter.reset(tenant) {
                // A tenant the key cannot be built for touches no key.
                Err(e) if e.code() == ErrorCode::InvalidArgument => {}
                other => other?,
            }
        }
        Ok(Session::Redis(limiter))
    }

    fn acquire(&self, tenant: &str, cost: u64, now_ms: u64) -> Result<Decision> {
        match self {
            Session::Memory(engine, policy) => engine.acquire(policy, tenant, cost, now_ms),
            Session::Redis(limiter) => limiter.acquire_at(tenant, cost, now_ms),
        }
    }
}

fn decision_lines(v: &DecisionVector, redis: Option<Store>) -> Vec<String> {
    let p = &v.policy;
    let session = (|| {
        let algorithm = Algorithm::parse(&p.algorithm)?;
        let limit = integer("limit", &p.limit)?;
        let window_ms = integer("window_ms", &p.window_ms)?;
        let policy = Policy::new(&p.namespace, &p.resource, algorithm, limit, window_ms)?;
        let tenants: BTreeSet<&str> = v.steps.iter().map(|s| s.tenant.as_str()).collect();
        Session::open(redis, policy, &tenants.into_iter().collect::<Vec<_>>())
    })();
    v.steps
        .iter()
        .enumerate()
        .map(|(i, step)| {
            let result = session.as_ref().map_err(Clone::clone).and_then(|s| {
                let cost = integer("cost", &step.cost)?;
                let now_ms = integer("now_ms", &step.now_ms)?;
                s.acquire(&step.tenant, cost, now_ms)
            });
            step_line(&v.name, i, &result)
        })
        .collect()
}

pub fn run(args: &ReplayArgs) -> std::result::Result<(), Failure> {
    if args.redis.is_some() {
        // Once, up front: not as an error line for every decision vector.
        slidelimit_core::check_timeout_ms(args.timeout_ms)?;
    }
    let vectors = load(&args.file)?;
    let redis = args.redis.as_deref().map(|url| Store {
        url,
        cluster: args.cluster,
        timeout: Duration::from_millis(args.timeout_ms),
    });
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    for vector in &vectors {
        let lines = match vector {
            Vector::Key(k) => vec![key_line(k)],
            Vector::Decision(d) => decision_lines(d, redis),
        };
        for line in lines {
            writeln!(out, "{line}").map_err(Failure::io)?;
        }
    }
    out.flush().map_err(Failure::io)
}
