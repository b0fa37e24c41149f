//! Prometheus metrics with the names every binding shares.

use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry};
use slidelimit_core::Decision;

/// Counters of allowed and denied permits and a histogram of the waits
/// handed to denied callers. Register once per registry and pass in
/// [`crate::Options::metrics`].
#[derive(Clone)]
pub struct Metrics {
    allowed: IntCounterVec,
    denied: IntCounterVec,
    wait: HistogramVec,
    tenant_label: bool,
}

/// Buckets for `ratelimit_wait_seconds`, from 1 ms to 10 min.
const WAIT_BUCKETS: [f64; 12] = [
    0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 600.0,
];

impl Metrics {
    /// Registers the metrics in `registry`. With `tenant_label` false the
    /// counters carry only `resource`, for deployments with unbounded tenants.
    pub fn register(registry: &Registry, tenant_label: bool) -> prometheus::Result<Metrics> {
        let labels: &[&str] = if tenant_label {
            &["resource", "tenant"]
        } else {
            &["resource"]
        };
        let allowed = IntCounterVec::new(
            Opts::new(
                "ratelimit_allowed_total",
                "Permits admitted by the rate limiter.",
            ),
            labels,
        )?;
        let denied = IntCounterVec::new(
            Opts::new(
                "ratelimit_denied_total",
                "Acquires denied by the rate limiter.",
            ),
            labels,
        )?;
        let wait = HistogramVec::new(
            HistogramOpts::new(
                "ratelimit_wait_seconds",
                "retry_after handed to denied callers, in seconds.",
            )
            .buckets(WAIT_BUCKETS.to_vec()),
            &["resource"],
        )?;
        registry.register(Box::new(allowed.clone()))?;
        registry.register(Box::new(denied.clone()))?;
        registry.register(Box::new(wait.clone()))?;
        Ok(Metrics {
            allowed,
            denied,
            wait,
            tenant_label,
        })
    }

    pub(crate) fn observe(&self, resource: &str, tenant: &str, decision: &Decision) {
        let with_tenant = [resource, tenant];
        let labels: &[&str] = if self.tenant_label {
            &with_tenant
        } else {
            &with_tenant[..1]
        };
        if decision.allowed {
            self.allowed.with_label_values(labels).inc();
        } else {
            self.denied.with_label_values(labels).inc();
            self.wait
                .with_label_values(&[resource])
                .observe(decision.retry_after_ms as f64 / 1000.0);
        }
    }
}
