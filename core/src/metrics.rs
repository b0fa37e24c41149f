//! The metrics every binding registers in its own ecosystem's metrics library
//! (prometheus, prom-client, client_golang): one set of names, help texts,
//! labels and buckets, so dashboards and alerts (`ops/`) work with any binding.
//! An acquire's decision counts once; a peek counts nothing.

/// Counter of acquires that were allowed (one per acquire, whatever its cost).
pub const METRIC_ALLOWED_TOTAL: &str = "ratelimit_allowed_total";
pub const METRIC_ALLOWED_TOTAL_HELP: &str = "Acquires allowed by the rate limiter.";

/// Counter of acquires that were denied.
pub const METRIC_DENIED_TOTAL: &str = "ratelimit_denied_total";
pub const METRIC_DENIED_TOTAL_HELP: &str = "Acquires denied by the rate limiter.";

/// Counter of the denied acquires the local deny cache answered in-process,
/// without a Redis call (each also counts in `ratelimit_denied_total`, so
/// Redis denials are the difference). Same labels as the other counters.
pub const METRIC_LOCAL_DENIED_TOTAL: &str = "ratelimit_local_denied_total";
pub const METRIC_LOCAL_DENIED_TOTAL_HELP: &str =
    "Acquires denied in-process by the local deny cache, without a Redis call.";

/// Histogram of the retry_after handed to denied callers, in seconds.
pub const METRIC_WAIT_SECONDS: &str = "ratelimit_wait_seconds";
pub const METRIC_WAIT_SECONDS_HELP: &str = "retry_after handed to denied callers, in seconds.";

/// The resource label (every metric).
pub const LABEL_RESOURCE: &str = "resource";
/// The tenant label: on the two counters only, and only when the caller asks
/// for it (every tenant is a new time series; leave it off for unbounded tenants).
pub const LABEL_TENANT: &str = "tenant";

/// Labels of the counters without and with the tenant label.
pub const COUNTER_LABELS: [&str; 1] = [LABEL_RESOURCE];
pub const COUNTER_LABELS_WITH_TENANT: [&str; 2] = [LABEL_RESOURCE, LABEL_TENANT];
/// Labels of the wait histogram.
pub const WAIT_LABELS: [&str; 1] = [LABEL_RESOURCE];

/// Buckets of `ratelimit_wait_seconds`, 1 ms to 10 min.
pub const WAIT_BUCKETS: [f64; 12] = [
    0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 600.0,
];

/// The value a denied decision's `retry_after_ms` adds to the wait histogram.
pub fn wait_seconds(retry_after_ms: u64) -> f64 {
    retry_after_ms as f64 / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_ascend_and_wait_is_in_seconds() {
        assert!(WAIT_BUCKETS.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(wait_seconds(1500), 1.5);
        assert_eq!(COUNTER_LABELS_WITH_TENANT[..1], COUNTER_LABELS);
    }
}
