//! A validated policy: which algorithm, how many permits per how long, and
//! where its keys live.

use crate::error::{Error, Result};
use crate::key;

/// limit * window_ms may not exceed this: Lua numbers are doubles, and every
/// intermediate the scripts compute must stay an exact integer.
pub const MAX_LIMIT_TIMES_WINDOW: u64 = 1 << 52;
/// Caller-supplied times are bounded for the same reason.
pub const MAX_NOW_MS: u64 = 1 << 52;
/// The largest limit the sliding log accepts. The log keeps one Redis list
/// entry per permit, so a check's work grows with its cost (entries pushed)
/// and with the expired entries it trims, and Redis runs a script to the end
/// without interruption. At this cap the worst check (an acquire of cost
/// 10,000, with or without 10,000 expired entries to trim) measured 0.9 to
/// 1.5 ms of Redis time on the 2-core development machine under load
/// (docs/protocol.md, `rust/tests/script_time.rs`); higher limits belong to
/// the sliding counter. `lua/sliding_log.lua` enforces the same number.
pub const MAX_LOG_LIMIT: u64 = 10_000;

/// The bucket count a bucketed-window policy takes when the caller names none
/// (one-second buckets over a minute). Like any bucket count it must divide
/// `window_ms`.
pub const DEFAULT_BUCKETS: u64 = 60;
/// The most buckets a bucketed window accepts. A check after an idle gap
/// reads and deletes at most this many hash fields, and a tenant's state is
/// one field per bucket: the cap bounds both (docs/protocol.md).
/// `lua/bucketed_window.lua` enforces the same number.
pub const MAX_BUCKETS: u64 = 3600;

/// The namespace a binding uses when the caller names none.
pub const DEFAULT_NAMESPACE: &str = "rl";
/// The algorithm a binding uses when the caller names none: exact.
pub const DEFAULT_ALGORITHM: Algorithm = Algorithm::SlidingLog;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
pub enum Algorithm {
    /// Exact: one entry per admitted permit.
    SlidingLog,
    /// Approximate, O(1) memory: two fixed-window counts, the older weighted.
    SlidingCounter,
    /// Exact, O(buckets) memory: permits counted per bucket of `window_ms /
    /// buckets` ms, each held until its bucket's last millisecond plus the window.
    BucketedWindow,
}

impl Algorithm {
    pub const fn as_str(self) -> &'static str {
        match self {
            Algorithm::SlidingLog => "sliding_log",
            Algorithm::SlidingCounter => "sliding_counter",
            Algorithm::BucketedWindow => "bucketed_window",
        }
    }

    pub fn parse(s: &str) -> Result<Algorithm> {
        match s {
            "sliding_log" => Ok(Algorithm::SlidingLog),
            "sliding_counter" => Ok(Algorithm::SlidingCounter),
            "bucketed_window" => Ok(Algorithm::BucketedWindow),
            other => Err(Error::invalid(
                "algorithm",
                format!(
                    "must be \"sliding_log\", \"sliding_counter\" or \"bucketed_window\", \
                     got {other:?}"
                ),
            )),
        }
    }

    /// The tag in the key: `log`, `counter` or `bucketed`.
    pub fn key_tag(self) -> &'static str {
        match self {
            Algorithm::SlidingLog => "log",
            Algorithm::SlidingCounter => "counter",
            Algorithm::BucketedWindow => "bucketed",
        }
    }

    /// Every algorithm.
    pub const ALL: [Algorithm; 3] = [
        Algorithm::SlidingLog,
        Algorithm::SlidingCounter,
        Algorithm::BucketedWindow,
    ];
}

/// One limit of a policy, as a caller states it: `limit` permits per
/// `window_ms` under `algorithm`, and the bucket count of a bucketed window
/// (`None`: [`DEFAULT_BUCKETS`]). [`Policy::with_limits`] validates it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Limit {
    pub algorithm: Algorithm,
    pub limit: u64,
    pub window_ms: u64,
    pub buckets: Option<u64>,
}

impl Limit {
    pub const fn new(algorithm: Algorithm, limit: u64, window_ms: u64) -> Limit {
        Limit {
            algorithm,
            limit,
            window_ms,
            buckets: None,
        }
    }
}

/// A validated limit and its ARGV, formatted once, not per check.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Rule {
    /// As validated: `buckets` is Some for the bucketed window only.
    pub(crate) limit: Limit,
    pub(crate) limit_arg: String,
    pub(crate) window_arg: String,
    pub(crate) buckets_arg: Option<String>,
}

/// Field names of the limits of a policy of several limits, one static
/// string per position and field (errors name their field as `&'static str`).
const LIMIT_FIELDS: [[&str; 4]; crate::decision::MAX_LIMITS] = [
    [
        "limits[0].algorithm",
        "limits[0].limit",
        "limits[0].window_ms",
        "limits[0].buckets",
    ],
    [
        "limits[1].algorithm",
        "limits[1].limit",
        "limits[1].window_ms",
        "limits[1].buckets",
    ],
    [
        "limits[2].algorithm",
        "limits[2].limit",
        "limits[2].window_ms",
        "limits[2].buckets",
    ],
    [
        "limits[3].algorithm",
        "limits[3].limit",
        "limits[3].window_ms",
        "limits[3].buckets",
    ],
    [
        "limits[4].algorithm",
        "limits[4].limit",
        "limits[4].window_ms",
        "limits[4].buckets",
    ],
    [
        "limits[5].algorithm",
        "limits[5].limit",
        "limits[5].window_ms",
        "limits[5].buckets",
    ],
    [
        "limits[6].algorithm",
        "limits[6].limit",
        "limits[6].window_ms",
        "limits[6].buckets",
    ],
    [
        "limits[7].algorithm",
        "limits[7].limit",
        "limits[7].window_ms",
        "limits[7].buckets",
    ],
];

/// The field `field` of the limit at `index`, as errors of a policy of
/// several limits name it (`limits[1].window_ms`); None past MAX_LIMITS.
pub fn limit_field(index: usize, field: &str) -> Option<&'static str> {
    let row = LIMIT_FIELDS.get(index)?;
    row.iter()
        .copied()
        .find(|f| f.split_once('.').is_some_and(|(_, name)| name == field))
}

/// A rate-limit policy that has passed validation; only [`Policy::new`],
/// [`Policy::with_buckets`] and [`Policy::with_limits`] make one. It holds
/// one limit or several (up to [`crate::MAX_LIMITS`]), all for one resource:
/// a check passes only if every limit allows it, and records in all of them
/// or in none.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Policy {
    namespace: String,
    resource: String,
    rules: Vec<Rule>,
    /// The validated limits, in the caller's order (buckets resolved).
    limits: Vec<Limit>,
}

impl Policy {
    /// Validates every field; the error names the first field at fault. A
    /// bucketed window gets [`DEFAULT_BUCKETS`]; [`Policy::with_buckets`]
    /// names another count.
    pub fn new(
        namespace: &str,
        resource: &str,
        algorithm: Algorithm,
        limit: u64,
        window_ms: u64,
    ) -> Result<Policy> {
        Policy::with_buckets(namespace, resource, algorithm, limit, window_ms, None)
    }

    /// As [`Policy::new`], with the bucket count of a bucketed window
    /// (`None`: [`DEFAULT_BUCKETS`]). A count given for another algorithm is
    /// an error on `buckets`, never ignored.
    pub fn with_buckets(
        namespace: &str,
        resource: &str,
        algorithm: Algorithm,
        limit: u64,
        window_ms: u64,
        buckets: Option<u64>,
    ) -> Result<Policy> {
        Policy::with_limits(
            namespace,
            resource,
            &[Limit {
                algorithm,
                limit,
                window_ms,
                buckets,
            }],
        )
    }

    /// A policy of one or several limits (at most [`crate::MAX_LIMITS`]),
    /// each with its own algorithm, limit and window. Errors about a limit
    /// of a policy of several name it by position (`limits[1].window_ms`);
    /// one limit is the policy of [`Policy::with_buckets`], with its field
    /// names. Two limits that would share a key (same algorithm, window and
    /// bucket count) are an error on `limits`.
    pub fn with_limits(namespace: &str, resource: &str, limits: &[Limit]) -> Result<Policy> {
        key::check_name("namespace", namespace)?;
        key::check_name("resource", resource)?;
        if limits.is_empty() {
            return Err(Error::invalid("limits", "must hold at least one limit"));
        }
        let max = crate::decision::MAX_LIMITS;
        if limits.len() > max {
            return Err(Error::invalid(
                "limits",
                format!(
                    "holds {}, more than the {max} a policy may hold",
                    limits.len()
                ),
            ));
        }
        let mut rules = Vec::with_capacity(limits.len());
        for (index, limit) in limits.iter().enumerate() {
            let rule = check_limit(limit).map_err(|e| e.for_limit(index, limits.len()))?;
            rules.push(rule);
        }
        for (i, a) in rules.iter().enumerate() {
            for (j, b) in rules.iter().enumerate().skip(i + 1) {
                let (a, b) = (&a.limit, &b.limit);
                if (a.algorithm, a.window_ms, a.buckets) == (b.algorithm, b.window_ms, b.buckets) {
                    return Err(Error::invalid(
                        "limits",
                        format!(
                            "limits[{i}] and limits[{j}] are both {} over {} ms: they would \
                             count in one key; keep the lower limit",
                            a.algorithm.as_str(),
                            a.window_ms
                        ),
                    ));
                }
            }
        }
        Ok(Policy {
            namespace: namespace.to_owned(),
            resource: resource.to_owned(),
            limits: rules.iter().map(|r| r.limit).collect(),
            rules,
        })
    }

    pub fn namespace(&self) -> &str {
        &self.namespace
    }
    pub fn resource(&self) -> &str {
        &self.resource
    }
    /// Every limit, in the order given (a bucketed window's `buckets` resolved).
    pub fn limits(&self) -> &[Limit] {
        &self.limits
    }
    /// The first limit's algorithm (the only one's, for a policy of one limit).
    pub fn algorithm(&self) -> Algorithm {
        self.limits[0].algorithm
    }
    /// The first limit's permits per window.
    pub fn limit(&self) -> u64 {
        self.limits[0].limit
    }
    /// The first limit's window.
    pub fn window_ms(&self) -> u64 {
        self.limits[0].window_ms
    }
    /// The first limit's bucket count if it is a bucketed window; `None` for
    /// the other algorithms.
    pub fn buckets(&self) -> Option<u64> {
        self.limits[0].buckets
    }

    pub(crate) fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The Redis key of `tenant` under this policy: its first limit's key
    /// ([`Policy::keys`] has every limit's; they share one Cluster slot).
    pub fn key(&self, tenant: &str) -> Result<String> {
        self.key_of(0, tenant)
    }

    /// The key of every limit for `tenant`, in the policy's order: what a
    /// check reads and writes, and what `reset` deletes. One hash tag, so
    /// one Cluster slot.
    pub fn keys(&self, tenant: &str) -> Result<Vec<String>> {
        (0..self.limits.len())
            .map(|i| self.key_of(i, tenant))
            .collect()
    }

    fn key_of(&self, index: usize, tenant: &str) -> Result<String> {
        let l = &self.limits[index];
        key::build(
            &self.namespace,
            &self.resource,
            tenant,
            l.algorithm,
            l.window_ms,
            l.buckets,
        )
    }

    /// Checks a cost against this policy: 1 <= cost <= every limit.
    pub fn check_cost(&self, cost: u64) -> Result<()> {
        if self.limits.len() == 1 {
            return check_cost(self.limit(), cost);
        }
        let (index, lowest) = self
            .limits
            .iter()
            .enumerate()
            .min_by_key(|(_, l)| l.limit)
            .map(|(i, l)| (i, l.limit))
            .expect("a policy holds at least one limit");
        check_cost(lowest, cost).map_err(|e| match cost >= 1 {
            true => Error::invalid(
                "cost",
                format!(
                    "{cost} exceeds the limit {lowest} of limits[{index}]; such a request \
                     could never pass"
                ),
            ),
            false => e,
        })
    }
}

/// One limit's rules: limit and window, then buckets.
fn check_limit(l: &Limit) -> Result<Rule> {
    check_limit_and_window(l.algorithm, l.limit, l.window_ms)?;
    let buckets = match (l.algorithm, l.buckets) {
        (Algorithm::BucketedWindow, n) => {
            let count = n.unwrap_or(DEFAULT_BUCKETS);
            check_buckets(l.window_ms, count, n.is_none())?;
            Some(count)
        }
        (_, None) => None,
        (other, Some(_)) => {
            return Err(Error::invalid(
                "buckets",
                format!(
                    "only the bucketed_window algorithm has buckets, not {}",
                    other.as_str()
                ),
            ))
        }
    };
    let limit = Limit { buckets, ..*l };
    Ok(Rule {
        limit,
        limit_arg: l.limit.to_string(),
        window_arg: l.window_ms.to_string(),
        buckets_arg: buckets.map(|n| n.to_string()),
    })
}

/// The numeric rules of a policy, in the order the scripts check them (so
/// that Redis and the in-memory engine name the same field): 1 <= limit,
/// 1 <= window_ms, limit * window_ms <= 2^52, and limit <= MAX_LOG_LIMIT for
/// the sliding log.
pub(crate) fn check_limit_and_window(
    algorithm: Algorithm,
    limit: u64,
    window_ms: u64,
) -> Result<()> {
    if limit < 1 {
        return Err(Error::invalid("limit", "must be at least 1"));
    }
    if window_ms < 1 {
        return Err(Error::invalid("window_ms", "must be at least 1"));
    }
    match limit.checked_mul(window_ms) {
        Some(product) if product <= MAX_LIMIT_TIMES_WINDOW => {}
        _ => {
            return Err(Error::invalid(
                "limit",
                format!(
                    "limit * window_ms = {limit} * {window_ms} exceeds 2^52; \
                     lower the limit or the window"
                ),
            ))
        }
    }
    if algorithm == Algorithm::SlidingLog && limit > MAX_LOG_LIMIT {
        return Err(Error::invalid(
            "limit",
            format!(
                "{limit} exceeds {MAX_LOG_LIMIT}, the most the sliding log accepts: it keeps one \
                 Redis list entry per permit, so a check's Redis time grows with the limit; use \
                 sliding_counter or, exact, bucketed_window for higher limits"
            ),
        ));
    }
    Ok(())
}

/// A bucketed window's count: 1 <= buckets <= MAX_BUCKETS, dividing
/// window_ms (so every bucket is a whole number of milliseconds).
pub(crate) fn check_buckets(window_ms: u64, buckets: u64, defaulted: bool) -> Result<()> {
    if buckets < 1 {
        return Err(Error::invalid("buckets", "must be at least 1"));
    }
    if buckets > MAX_BUCKETS {
        return Err(Error::invalid(
            "buckets",
            format!(
                "{buckets} exceeds {MAX_BUCKETS}, the most a bucketed window accepts (its state \
                 and the work of a check after an idle gap grow with it)"
            ),
        ));
    }
    if !window_ms.is_multiple_of(buckets) {
        let which = if defaulted { " (the default)" } else { "" };
        return Err(Error::invalid(
            "buckets",
            format!(
                "{buckets}{which} does not divide window_ms {window_ms}; choose a bucket count \
                 that does, so every bucket is a whole number of milliseconds"
            ),
        ));
    }
    Ok(())
}

/// The part of the cost rule that needs no policy: at least 1. For a cost
/// given before any limiter exists (a Celery task decorated, a Sidekiq
/// worker configured); `Policy::check_cost` adds the bound by the limit.
pub fn check_cost_without_policy(cost: u64) -> Result<()> {
    if cost < 1 {
        return Err(Error::invalid("cost", "must be at least 1"));
    }
    Ok(())
}

/// 1 <= cost <= limit.
pub(crate) fn check_cost(limit: u64, cost: u64) -> Result<()> {
    check_cost_without_policy(cost)?;
    if cost > limit {
        return Err(Error::invalid(
            "cost",
            format!("{cost} exceeds the limit {limit}; such a request could never pass"),
        ));
    }
    Ok(())
}

/// Checks a caller-supplied time: 0 <= now_ms <= 2^52.
pub fn check_now_ms(now_ms: u64) -> Result<()> {
    if now_ms > MAX_NOW_MS {
        return Err(Error::invalid("now_ms", "must be at most 2^52"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorCode;

    fn field_of(r: Result<Policy>) -> &'static str {
        let e = r.unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidArgument);
        e.field().unwrap()
    }

    #[test]
    fn validation_names_the_field() {
        let log = Algorithm::SlidingLog;
        assert_eq!(field_of(Policy::new("", "geo", log, 1, 1)), "namespace");
        assert_eq!(field_of(Policy::new("rl", "ge:o", log, 1, 1)), "resource");
        assert_eq!(field_of(Policy::new("rl", "geo", log, 0, 1)), "limit");
        assert_eq!(field_of(Policy::new("rl", "geo", log, 1, 0)), "window_ms");
        assert_eq!(
            field_of(Policy::new("rl", "geo", log, (1 << 26) + 1, 1 << 26)),
            "limit"
        );
        assert_eq!(
            field_of(Policy::new("rl", "geo", log, u64::MAX, 2)),
            "limit"
        );
        assert!(Policy::new("rl", "geo", log, MAX_LOG_LIMIT, 1 << 26).is_ok());
        let counter = Algorithm::SlidingCounter;
        assert!(Policy::new("rl", "geo", counter, 1 << 26, 1 << 26).is_ok());
        assert_eq!(
            field_of(Policy::new("rl", "geo", counter, (1 << 26) + 1, 1 << 26)),
            "limit"
        );
    }

    #[test]
    fn the_log_limit_is_capped() {
        let log = Algorithm::SlidingLog;
        assert!(Policy::new("rl", "geo", log, MAX_LOG_LIMIT, 60_000).is_ok());
        let e = Policy::new("rl", "geo", log, MAX_LOG_LIMIT + 1, 60_000).unwrap_err();
        assert_eq!(
            (e.code(), e.field()),
            (ErrorCode::InvalidArgument, Some("limit"))
        );
        assert!(e.message().contains("sliding_counter"), "{e}");
        // The counter keeps O(1) state: no cap beyond limit * window_ms <= 2^52.
        let counter = Algorithm::SlidingCounter;
        assert!(Policy::new("rl", "geo", counter, MAX_LOG_LIMIT + 1, 60_000).is_ok());
        assert!(Policy::new("rl", "geo", counter, 1 << 42, 1024).is_ok());
    }

    #[test]
    fn the_scripts_enforce_the_same_bounds() {
        // The Lua holds its own copies of the numbers; they must be core's.
        // The shared bound lives in the prelude (sent in front of both
        // scripts), the log's cap in the log's file.
        let prelude = include_str!("../lua/prelude.lua");
        let log = include_str!("../lua/sliding_log.lua");
        let counter = include_str!("../lua/sliding_counter.lua");
        let bucketed = include_str!("../lua/bucketed_window.lua");
        assert!(log.contains(&format!("\nlocal max_limit = {MAX_LOG_LIMIT}\n")));
        assert!(bucketed.contains(&format!("\nlocal max_buckets = {MAX_BUCKETS}\n")));
        assert_eq!(MAX_LIMIT_TIMES_WINDOW, MAX_NOW_MS);
        assert!(prelude.contains(&format!("\nlocal max_number = {MAX_LIMIT_TIMES_WINDOW}\n")));
        for script in [log, counter, bucketed] {
            assert!(!script.contains("local max_number"), "no second copy");
        }
    }

    #[test]
    fn buckets_belong_to_the_bucketed_window_and_divide_the_window() {
        let bucketed = Algorithm::BucketedWindow;
        let with = |algorithm, window, buckets| {
            Policy::with_buckets("rl", "geo", algorithm, 600, window, buckets)
        };
        let p = with(bucketed, 60_000, None).unwrap();
        assert_eq!(p.buckets(), Some(DEFAULT_BUCKETS));
        assert_eq!(p.key("t").unwrap(), "rl:{geo:t}:bucketed:60000:60");
        assert_eq!(with(bucketed, 60_000, Some(1)).unwrap().buckets(), Some(1));
        assert!(with(bucketed, 3_600_000, Some(MAX_BUCKETS)).is_ok());
        for (window, buckets) in [(60_000, Some(0)), (60_000, Some(7)), (1000, None)] {
            assert_eq!(field_of(with(bucketed, window, buckets)), "buckets");
        }
        let e = with(bucketed, 3_600_000, Some(MAX_BUCKETS + 1)).unwrap_err();
        assert!(e.message().contains("3600"), "{e}");
        let e = with(bucketed, 1000, None).unwrap_err();
        assert!(e.message().contains("(the default)"), "{e}");
        // Never ignored on another algorithm.
        for other in [Algorithm::SlidingLog, Algorithm::SlidingCounter] {
            assert_eq!(with(other, 60_000, None).unwrap().buckets(), None);
            assert_eq!(field_of(with(other, 60_000, Some(60))), "buckets");
        }
        // Rules on limit and window come first, cost after (the scripts' order).
        assert_eq!(field_of(with(bucketed, 0, Some(7))), "window_ms");
        let p = with(bucketed, 60_000, Some(60)).unwrap();
        assert_eq!(p.check_cost(601).unwrap_err().field(), Some("cost"));
    }

    #[test]
    fn cost_must_fit_the_limit() {
        let p = Policy::new("rl", "geo", Algorithm::SlidingCounter, 3, 1000).unwrap();
        // The policy's rule is the policy-free one plus the bound by the limit.
        let e = check_cost_without_policy(0).unwrap_err();
        assert_eq!(
            (e.field(), e.message()),
            (Some("cost"), "cost: must be at least 1")
        );
        assert_eq!(p.check_cost(0).unwrap_err(), e);
        assert!(check_cost_without_policy(1).is_ok());
        assert!(check_cost_without_policy(u64::MAX).is_ok());
        assert!(p.check_cost(1).is_ok());
        assert!(p.check_cost(3).is_ok());
        assert_eq!(p.check_cost(0).unwrap_err().field(), Some("cost"));
        assert_eq!(p.check_cost(4).unwrap_err().field(), Some("cost"));
    }

    #[test]
    fn algorithm_names_round_trip() {
        for a in Algorithm::ALL {
            assert_eq!(Algorithm::parse(a.as_str()).unwrap(), a);
        }
        assert_eq!(
            Algorithm::parse("fixed").unwrap_err().field(),
            Some("algorithm")
        );
    }
}
