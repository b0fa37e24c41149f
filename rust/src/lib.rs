//! slidelimit: distributed sliding-window rate limiting on Redis.
//!
//! Every worker, in any language, runs the same Lua script on the same key and
//! shares one budget. This crate is the Rust binding: [`slidelimit_core`] owns
//! the contract (keys, scripts, validation, replies); this crate only moves the
//! call to Redis with the `redis` crate, standalone or Cluster, and back.
//!
//! ```no_run
//! # async fn example() -> slidelimit::Result<()> {
//! use slidelimit::{Algorithm, Limiter, Options, Policy};
//!
//! let policy = Policy::new("rl", "geocode", Algorithm::SlidingLog, 600, 60_000)?;
//! let limiter = Limiter::connect("redis://127.0.0.1/", policy, Options::default()).await?;
//! let decision = limiter.acquire("tenant-17").await?;
//! if !decision.allowed {
//!     // defer the job by decision.retry_after_ms instead of failing it
//! }
//! # Ok(()) }
//! ```
//!
//! Tenants are compared byte for byte, with no Unicode normalization: `"é"`
//! and `"e\u{301}"` are two budgets. Normalize ids from user input first.

pub mod blocking;
mod metrics;
mod redis_io;

pub use metrics::Metrics;
pub use slidelimit_core::{
    check_server_info, escape_tenant, slot, Algorithm, Decision, Error, ErrorCode, Finding, Limit,
    MemoryEngine, Mode, Policy, Result, Script, ScriptCall, Severity, DEFAULT_BUCKETS,
    DEFAULT_DENY_CACHE_CAPACITY, MAX_BUCKETS, MAX_LIMITS,
};

use redis_io::Connection;
use slidelimit_core::DenyCache;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How a [`Limiter`] talks to its store.
#[derive(Clone)]
pub struct Options {
    /// Upper bound for one call, connecting and the NOSCRIPT retry included.
    /// When it passes the call fails with `unavailable`, never with a decision.
    /// Core's rule for every binding: 1 ms to 2^31 - 1 ms (about 24.8 days),
    /// in whole milliseconds; anything else (zero, under 1 ms, 1.5 ms)
    /// makes `connect` fail with `invalid_argument` naming `timeout_ms`.
    pub timeout: Duration,
    /// Prometheus metrics to update on every decision; `None` records nothing.
    pub metrics: Option<Metrics>,
    /// PEM certificate(s) of the CA to trust for `rediss://` URLs instead of
    /// the system's trust store (a private CA). The server's certificate is
    /// always verified, host name included; `None` trusts the system roots.
    pub tls_ca_pem: Option<Vec<u8>>,
    /// The local deny cache's capacity in tenants, or `None` to switch it
    /// off. After Redis denies an acquire of cost c with retry R, an acquire
    /// of cost >= c for the same tenant within R is denied in-process,
    /// without a Redis call (server-time acquires only; never peeks or
    /// caller-time calls; not on the memory engine). A `reset(tenant)`
    /// through any limiter of this process, its own cache on or off, clears
    /// the tenant's entry in every cache of the process (a tenant's reset drops it for every
    /// resource and policy: at worst one more Redis call); a reset by
    /// another process is not seen, so the tenant stays denied here until
    /// the cached retry runs out. Default:
    /// [`DEFAULT_DENY_CACHE_CAPACITY`]; from 1 to 2^24 tenants, else the
    /// limiter is not made (`invalid_argument` naming
    /// `deny_cache_capacity`, core's name for this field).
    pub deny_cache: Option<usize>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            timeout: Duration::from_millis(slidelimit_core::DEFAULT_TIMEOUT_MS),
            metrics: None,
            tls_ca_pem: None,
            deny_cache: Some(DEFAULT_DENY_CACHE_CAPACITY),
        }
    }
}

/// The deny cache of a Redis-backed limiter and the origin of its monotonic clock.
struct LocalDenials {
    cache: Mutex<DenyCache>,
    start: Instant,
}

impl LocalDenials {
    fn now_ms(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, DenyCache> {
        self.cache.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[derive(Clone)]
enum Store {
    Redis(Connection),
    /// The embedded engine; the process's clock stands in for Redis `TIME`.
    Memory(Arc<MemoryEngine>),
}

/// Tenants whose default call a limiter keeps (each generation).
const KEPT_CALLS: usize = 2048;

/// Core's call for `acquire(tenant)` (cost 1, Redis `TIME`) by tenant: it
/// depends on the tenant alone, and building it is much of the binding's
/// CPU per check. Two generations approximate LRU without reordering on
/// every hit (a hit in the old one moves to the young one; a full young one
/// replaces the old), as in the Node and Python bindings.
#[derive(Default)]
struct KeptCalls {
    young: HashMap<String, Arc<ScriptCall>>,
    old: HashMap<String, Arc<ScriptCall>>,
}

impl KeptCalls {
    fn get(&mut self, tenant: &str) -> Option<Arc<ScriptCall>> {
        if let Some(call) = self.young.get(tenant) {
            return Some(call.clone());
        }
        let (tenant, call) = self.old.remove_entry(tenant)?;
        self.keep(tenant, call.clone());
        Some(call)
    }

    fn keep(&mut self, tenant: String, call: Arc<ScriptCall>) {
        if self.young.len() >= KEPT_CALLS {
            self.old = std::mem::take(&mut self.young);
        }
        self.young.insert(tenant, call);
    }
}

/// A rate limiter for one policy; cheap to clone, safe to share across tasks.
#[derive(Clone)]
pub struct Limiter {
    policy: Arc<Policy>,
    store: Store,
    options: Options,
    denials: Option<Arc<LocalDenials>>,
    calls: Arc<Mutex<KeptCalls>>,
}

fn unavailable_after(timeout: Duration, what: &str) -> Error {
    Error::new(
        ErrorCode::Unavailable,
        format!("redis did not answer {what} within {timeout:?}"),
    )
}

/// `call` on `connection`, or `unavailable` once `timeout` has passed (the
/// connection is told: a Cluster connection that stopped is replaced).
async fn within<T>(
    timeout: Duration,
    connection: &Connection,
    what: &str,
    call: impl std::future::Future<Output = Result<T>>,
) -> Result<T> {
    match tokio::time::timeout(timeout, call).await {
        Ok(result) => result,
        Err(_) => {
            connection.ran_out_of_time();
            Err(unavailable_after(timeout, what))
        }
    }
}

/// The timeout by core's rule (`check_timeout_ms`), whole milliseconds:
/// a `Duration` with a part of a millisecond past the first (1.5 ms) is
/// refused, as the bindings that take `timeout_ms` refuse 1.5.
fn check_timeout(timeout: Duration) -> Result<()> {
    // The range first, so that `Duration::MAX` is too long, not fractional.
    let ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
    slidelimit_core::check_timeout_ms(ms)?;
    if !timeout.subsec_nanos().is_multiple_of(1_000_000) {
        return Err(Error::invalid(
            "timeout_ms",
            format!("must be a whole number of milliseconds, got {timeout:?}"),
        ));
    }
    Ok(())
}

/// Checks every option before a connect, so that a bad one is
/// `invalid_argument` even when Redis is out of reach; the deny cache they
/// ask for.
fn checked_options(options: &Options) -> Result<Option<Arc<LocalDenials>>> {
    check_timeout(options.timeout)?;
    let Some(capacity) = options.deny_cache else {
        return Ok(None);
    };
    Ok(Some(Arc::new(LocalDenials {
        cache: Mutex::new(DenyCache::new(capacity)?),
        start: Instant::now(),
    })))
}

/// What the standalone server (or Cluster node) at `url` says in `INFO`
/// about running slidelimit on it ([`check_server_info`]: eviction, a
/// replica, a full memory, failed saves, ...; docs/protocol.md, "What the
/// server needs"). Of `options`, `timeout` bounds the connect and the
/// command and `tls_ca_pem` is the CA a `rediss://` server is checked with.
/// A server out of reach is `unavailable`; an ACL user without `INFO`
/// `permission_denied`.
pub async fn check_server(url: &str, options: &Options) -> Result<Vec<Finding>> {
    check_timeout(options.timeout)?;
    let timeout = options.timeout;
    let asking = async {
        let connection =
            Connection::standalone(url, timeout, options.tls_ca_pem.as_deref(), false).await?;
        connection.info().await
    };
    let info = tokio::time::timeout(timeout, asking)
        .await
        .map_err(|_| unavailable_after(timeout, "INFO"))??;
    Ok(check_server_info(&info))
}

/// Where a limiter's Redis is.
enum Target<'a> {
    Standalone(&'a str),
    Cluster(&'a [&'a str]),
}

fn system_now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl Limiter {
    /// Connects to a standalone Redis (`redis://`, or `rediss://` for TLS).
    /// The connection reconnects by itself after a restart. A Redis out of
    /// reach is `unavailable` here; [`Limiter::connect_lazy`] connects on
    /// the first call instead.
    pub async fn connect(url: &str, policy: Policy, options: Options) -> Result<Limiter> {
        Self::on_redis(Target::Standalone(url), policy, options, false).await
    }

    /// A limiter on a standalone Redis that connects on its first call, and
    /// on the next call again after a connect failed: made without I/O, so a
    /// worker can start while Redis is down, each check meanwhile
    /// `unavailable` within the timeout, as the other bindings' clients do.
    /// The URL, the TLS CA and the options are checked here.
    pub async fn connect_lazy(url: &str, policy: Policy, options: Options) -> Result<Limiter> {
        Self::on_redis(Target::Standalone(url), policy, options, true).await
    }

    /// Connects to a Redis Cluster through any of its nodes.
    ///
    /// While a slot moves, an `ASK` the client gives up on is sent once more
    /// to the node it names, with `ASKING` in the same write. A call that
    /// times out when the connection has answered nothing for half a
    /// timeout starts a new connection in the background, and later calls
    /// wait for it: redis-rs 1.8's Cluster client can stop answering for
    /// good while a slot moves (docs/audit.md, "Slot migration"). The call
    /// that timed out is not sent again, since Redis may have run it.
    /// redis-rs's Cluster client keeps its own retries, which follow
    /// redirects and failovers; a node's connection that breaks after a
    /// script was written is among them, so that script can run twice and
    /// count two permits (never more than the limit admits).
    pub async fn connect_cluster(
        urls: &[&str],
        policy: Policy,
        options: Options,
    ) -> Result<Limiter> {
        Self::on_redis(Target::Cluster(urls), policy, options, false).await
    }

    /// [`Limiter::connect_cluster`], connecting on the first call as
    /// [`Limiter::connect_lazy`] does: one connect for the calls that wait
    /// for it, and after a failed one the next call tries again.
    pub async fn connect_cluster_lazy(
        urls: &[&str],
        policy: Policy,
        options: Options,
    ) -> Result<Limiter> {
        Self::on_redis(Target::Cluster(urls), policy, options, true).await
    }

    /// A limiter on `target`, every option checked before any I/O.
    async fn on_redis(
        target: Target<'_>,
        policy: Policy,
        options: Options,
        lazy: bool,
    ) -> Result<Limiter> {
        let denials = checked_options(&options)?;
        let timeout = options.timeout;
        let tls_ca = options.tls_ca_pem.as_deref();
        let connecting = async {
            match target {
                Target::Standalone(url) => Connection::standalone(url, timeout, tls_ca, lazy).await,
                Target::Cluster(urls) => Connection::cluster(urls, timeout, tls_ca, lazy).await,
            }
        };
        let connection = tokio::time::timeout(timeout, connecting)
            .await
            .map_err(|_| unavailable_after(timeout, "the connect"))??;
        Ok(Self::with_redis(policy, connection, options, denials))
    }

    fn with_redis(
        policy: Policy,
        connection: Connection,
        options: Options,
        denials: Option<Arc<LocalDenials>>,
    ) -> Limiter {
        let mut limiter = Self::with_store(policy, Store::Redis(connection), options);
        limiter.denials = denials;
        limiter
    }

    /// A limiter on the embedded in-memory engine: one process, no Redis,
    /// the same decisions. The engine is the limiter's own (and its clones');
    /// [`Limiter::memory_on`] shares one between limiters. Of `options` only
    /// `metrics` applies: with no I/O, `timeout`, `tls_ca_pem` and
    /// `deny_cache` are neither read nor checked.
    pub fn memory(policy: Policy, options: Options) -> Limiter {
        Self::memory_on(Arc::new(MemoryEngine::new()), policy, options)
    }

    /// A limiter on `engine`, which other limiters may share whatever their
    /// policies, as limiters on one Redis share its keys: a limiter of a
    /// changed policy then sees what the earlier one recorded.
    pub fn memory_on(engine: Arc<MemoryEngine>, policy: Policy, options: Options) -> Limiter {
        Self::with_store(policy, Store::Memory(engine), options)
    }

    fn with_store(policy: Policy, store: Store, options: Options) -> Limiter {
        Limiter {
            policy: Arc::new(policy),
            store,
            options,
            denials: None,
            calls: Arc::default(),
        }
    }

    /// Core's call for `acquire(tenant)` (cost 1, Redis time), kept by tenant.
    fn kept_call(&self, tenant: &str) -> Result<Arc<ScriptCall>> {
        let mut calls = self.calls.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(call) = calls.get(tenant) {
            return Ok(call);
        }
        // Core refuses a bad tenant here, so only good calls are kept.
        let call = Arc::new(self.policy.build_call(tenant, 1, None, Mode::Acquire)?);
        calls.keep(tenant.to_owned(), call.clone());
        Ok(call)
    }

    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Takes one permit for `tenant`, on the server's clock.
    pub async fn acquire(&self, tenant: &str) -> Result<Decision> {
        self.check(tenant, 1, None, Mode::Acquire).await
    }

    /// Takes `cost` permits at once (1 <= cost <= limit), on the server's clock.
    pub async fn acquire_n(&self, tenant: &str, cost: u64) -> Result<Decision> {
        self.check(tenant, cost, None, Mode::Acquire).await
    }

    /// Takes `cost` permits at the caller's time `now_ms` (replays, tests).
    pub async fn acquire_at(&self, tenant: &str, cost: u64, now_ms: u64) -> Result<Decision> {
        self.check(tenant, cost, Some(now_ms), Mode::Acquire).await
    }

    /// What `acquire_n(tenant, cost)` would answer now; records nothing.
    pub async fn peek(&self, tenant: &str, cost: u64) -> Result<Decision> {
        self.check(tenant, cost, None, Mode::Peek).await
    }

    /// What `acquire_at` would answer at `now_ms`; records nothing.
    pub async fn peek_at(&self, tenant: &str, cost: u64, now_ms: u64) -> Result<Decision> {
        self.check(tenant, cost, Some(now_ms), Mode::Peek).await
    }

    /// Forgets every permit recorded for `tenant` under this policy (every
    /// limit's key), and the tenant's cached denial in every limiter of this
    /// process, this one's cache on or off.
    pub async fn reset(&self, tenant: &str) -> Result<()> {
        let keys = self.policy.keys(tenant)?;
        match &self.store {
            Store::Memory(engine) => {
                engine.reset(&self.policy, tenant)?;
                Ok(())
            }
            Store::Redis(connection) => {
                let timeout = self.options.timeout;
                self.forget_denials(tenant);
                // Again once the DEL has answered, failed or been dropped
                // with this future: a denial Redis gave before the DEL may
                // have come back, and been cached, while it ran.
                let _again = ForgetOnDrop {
                    limiter: self,
                    tenant,
                };
                within(timeout, connection, "DEL", connection.delete(&keys)).await
            }
        }
    }

    fn forget_denials(&self, tenant: &str) {
        match &self.denials {
            Some(denials) => denials.lock().forget(tenant),
            None => slidelimit_core::forget_tenant(tenant),
        }
    }

    async fn check(
        &self,
        tenant: &str,
        cost: u64,
        now_ms: Option<u64>,
        mode: Mode,
    ) -> Result<Decision> {
        // The default acquire's call is kept; any other is built (and
        // checked) by core each time.
        let (kept, built);
        let call: &ScriptCall = if cost == 1 && now_ms.is_none() && mode == Mode::Acquire {
            kept = self.kept_call(tenant)?;
            &kept
        } else {
            built = self.policy.build_call(tenant, cost, now_ms, mode)?;
            &built
        };
        // Only server-time acquires use the deny cache: a caller's time has
        // nothing to do with this process's clock.
        // The monotonic time is taken before the call: Redis decides after
        // it, so a denial's retry counted from here never outlasts Redis's
        // (counted from a slow reply it would).
        let cache = match (mode, now_ms) {
            (Mode::Acquire, None) => self.denials.as_deref().map(|d| (d, d.now_ms())),
            _ => None,
        };
        if let Some((denials, sent_ms)) = cache {
            let local = denials.lock().check(tenant, cost, sent_ms);
            if let Some(decision) = local {
                if let Some(metrics) = &self.options.metrics {
                    metrics.observe(self.policy.resource(), tenant, &decision, true);
                }
                return Ok(decision);
            }
        }
        let reply = match &self.store {
            Store::Memory(engine) => engine.eval(call, system_now_ms())?,
            Store::Redis(connection) => {
                let timeout = self.options.timeout;
                let deadline = tokio::time::Instant::now() + timeout;
                within(
                    timeout,
                    connection,
                    "the script",
                    connection.run_script(call, deadline),
                )
                .await?
            }
        };
        let decision = Decision::from_reply(&reply, self.policy.limits().len())?;
        if let Some((denials, sent_ms)) = cache {
            denials.lock().record(tenant, cost, &decision, sent_ms);
        }
        if let (Some(metrics), Mode::Acquire) = (&self.options.metrics, mode) {
            metrics.observe(self.policy.resource(), tenant, &decision, false);
        }
        Ok(decision)
    }
}

/// Forgets a tenant's cached denials when dropped: at the end of a reset,
/// however it ends.
struct ForgetOnDrop<'a> {
    limiter: &'a Limiter,
    tenant: &'a str,
}

impl Drop for ForgetOnDrop<'_> {
    fn drop(&mut self) {
        self.limiter.forget_denials(self.tenant);
    }
}

#[cfg(test)]
mod timeout_tests {
    use super::*;

    #[test]
    fn a_timeout_is_whole_milliseconds_in_cores_range() {
        assert!(check_timeout(Duration::from_millis(1)).is_ok());
        assert!(check_timeout(Duration::from_millis((1 << 31) - 1)).is_ok());
        for (timeout, says) in [
            (Duration::MAX, "must be at most"),
            (Duration::from_millis(1 << 31), "must be at most"),
            (Duration::from_micros(500), "must be at least 1 ms"),
            (Duration::from_micros(1500), "whole number of milliseconds"),
        ] {
            let e = check_timeout(timeout).unwrap_err();
            assert_eq!(e.field(), Some("timeout_ms"), "{e}");
            assert!(e.message().contains(says), "{timeout:?}: {e}");
        }
    }
}
