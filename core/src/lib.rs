//! slidelimit-core: the contract of slidelimit, with no I/O.
//!
//! Everything a binding needs to rate-limit through Redis and nothing that
//! touches a socket or a clock: the Lua scripts and their SHA1, key naming
//! (Cluster hash tags, tenant escaping, slot), policy validation, the KEYS and
//! ARGV of one call, parsing the reply into a [`Decision`], one error taxonomy,
//! and an in-memory engine with the same semantics. The normative description
//! is `docs/protocol.md`.
//!
//! ```
//! use slidelimit_core::{Algorithm, Decision, Mode, Policy};
//!
//! let policy = Policy::new("rl", "geocode", Algorithm::SlidingLog, 600, 60_000)?;
//! let call = policy.build_call("tenant-17", 1, None, Mode::Acquire)?;
//! assert_eq!(call.keys, ["rl:{geocode:tenant-17}:log:60000"]);
//! // A binding sends EVALSHA call.script.sha1() with call.keys and call.args,
//! // then parses the five integers it gets back (six for several limits):
//! let decision = Decision::from_reply(&[1, 599, 0, 60_000, 1_764_475_200_000], policy.limits().len())?;
//! assert!(decision.allowed);
//! # Ok::<(), slidelimit_core::Error>(())
//! ```

mod decision;
mod deny_cache;
mod engine;
mod error;
mod key;
mod metrics;
mod number;
mod policy;
mod script;
mod server_check;
mod server_error;
mod timeout;

pub use decision::{Decision, MAX_LIMITS, MULTI_REPLY_LEN, REPLY_LEN};
pub use deny_cache::{
    forget_tenant, DenyCache, DEFAULT_DENY_CACHE_CAPACITY, MAX_DENY_CACHE_CAPACITY,
};
pub use engine::MemoryEngine;
pub use error::{classify_server_error, Error, ErrorCode, Result, ServerErrorKind};
pub use key::{
    escape_tenant, slot, tenant_from_bytes, CLUSTER_SLOTS, MAX_NAME_LEN, MAX_TENANT_BYTES,
};
pub use metrics::{
    wait_seconds, COUNTER_LABELS, COUNTER_LABELS_WITH_TENANT, LABEL_RESOURCE, LABEL_TENANT,
    METRIC_ALLOWED_TOTAL, METRIC_ALLOWED_TOTAL_HELP, METRIC_DENIED_TOTAL, METRIC_DENIED_TOTAL_HELP,
    METRIC_LOCAL_DENIED_TOTAL, METRIC_LOCAL_DENIED_TOTAL_HELP, METRIC_WAIT_SECONDS,
    METRIC_WAIT_SECONDS_HELP, WAIT_BUCKETS, WAIT_LABELS,
};
pub use number::u64_from_f64;
pub use policy::{
    check_cost_without_policy, check_now_ms, limit_field, Algorithm, Limit, Policy,
    DEFAULT_ALGORITHM, DEFAULT_BUCKETS, DEFAULT_NAMESPACE, MAX_BUCKETS, MAX_LIMIT_TIMES_WINDOW,
    MAX_LOG_LIMIT, MAX_NOW_MS,
};
pub use script::{Mode, Script, ScriptCall, ScriptKind};
pub use server_check::{check_server_info, Finding, Severity};
pub use server_error::{
    map_command_error, map_server_error, map_server_error_after_retry, resend_pause_ms,
    ServerErrorAction, FIRST_RESEND_PAUSE_MS, MAX_RESEND_PAUSE_MS,
};
pub use timeout::{check_timeout_ms, DEFAULT_TIMEOUT_MS, MAX_TIMEOUT_MS, MIN_TIMEOUT_MS};

/// The crate version, reported by every binding.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
