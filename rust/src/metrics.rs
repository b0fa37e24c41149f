//! Prometheus metrics with the names, help texts, labels and buckets every
//! binding shares (core's).

use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry};
use slidelimit_core::{
    wait_seconds, Decision, COUNTER_LABELS, COUNTER_LABELS_WITH_TENANT, METRIC_ALLOWED_TOTAL,
    METRIC_ALLOWED_TOTAL_HELP, METRIC_DENIED_TOTAL, METRIC_DENIED_TOTAL_HELP,
    METRIC_LOCAL_DENIED_TOTAL, METRIC_LOCAL_DENIED_TOTAL_HELP, METRIC_WAIT_SECONDS,
    METRIC_WAIT_SECONDS_HELP, WAIT_BUCKETS, WAIT_LABELS,
};

/// Counters of allowed and denied permits and a histogram of the waits
/// handed to denied callers. Register once per registry and pass in
/// [`crate::Options::metrics`].
#[derive(Clone)]
pub struct Metrics {
    allowed: IntCounterVec,
    denied: IntCounterVec,
    local_denied: IntCounterVec,
    wait: HistogramVec,
    tenant_label: bool,
}

impl Metrics {
    /// Registers the metrics in `registry`. With `tenant_label` false the
    /// counters carry only `resource`, for deployments with unbounded tenants.
    pub fn register(registry: &Registry, tenant_label: bool) -> prometheus::Result<Metrics> {
        let labels: &[&str] = if tenant_label {
            &COUNTER_LABELS_WITH_TENANT
        } else {
            &COUNTER_LABELS
        };
        let allowed = IntCounterVec::new(
            Opts::new(METRIC_ALLOWED_TOTAL, METRIC_ALLOWED_TOTAL_HELP),
            labels,
        )?;
        let denied = IntCounterVec::new(
            Opts::new(METRIC_DENIED_TOTAL, METRIC_DENIED_TOTAL_HELP),
            labels,
        )?;
        let local_denied = IntCounterVec::new(
            Opts::new(METRIC_LOCAL_DENIED_TOTAL, METRIC_LOCAL_DENIED_TOTAL_HELP),
            labels,
        )?;
        let wait = HistogramVec::new(
            HistogramOpts::new(METRIC_WAIT_SECONDS, METRIC_WAIT_SECONDS_HELP)
                .buckets(WAIT_BUCKETS.to_vec()),
            &WAIT_LABELS,
        )?;
        // All or none: a name taken in `registry` (a second register, or
        // another library's metric) leaves none of ours behind, so a retry
        // or a fallback registry starts clean.
        let collectors = || -> [Box<dyn prometheus::core::Collector>; 4] {
            [
                Box::new(allowed.clone()),
                Box::new(denied.clone()),
                Box::new(wait.clone()),
                Box::new(local_denied.clone()),
            ]
        };
        for (i, collector) in collectors().into_iter().enumerate() {
            if let Err(e) = registry.register(collector) {
                for registered in collectors().into_iter().take(i) {
                    let _ = registry.unregister(registered);
                }
                return Err(e);
            }
        }
        Ok(Metrics {
            allowed,
            denied,
            local_denied,
            wait,
            tenant_label,
        })
    }

    /// Counts an acquire's decision; `local` when the deny cache answered it.
    pub(crate) fn observe(&self, resource: &str, tenant: &str, decision: &Decision, local: bool) {
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
            if local {
                self.local_denied.with_label_values(labels).inc();
            }
            self.wait
                .with_label_values(&[resource])
                .observe(wait_seconds(decision.retry_after_ms));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_taken_name_registers_none_of_the_metrics() {
        let registry = Registry::new();
        // Another metric already holds the histogram's name, registered
        // after the two counters: they must not stay behind.
        let taken = IntCounterVec::new(Opts::new(METRIC_WAIT_SECONDS, "not ours"), &["x"]).unwrap();
        registry.register(Box::new(taken)).unwrap();
        assert!(Metrics::register(&registry, false).is_err());
        for (name, help) in [
            (METRIC_ALLOWED_TOTAL, METRIC_ALLOWED_TOTAL_HELP),
            (METRIC_DENIED_TOTAL, METRIC_DENIED_TOTAL_HELP),
            (METRIC_LOCAL_DENIED_TOTAL, METRIC_LOCAL_DENIED_TOTAL_HELP),
        ] {
            let again = IntCounterVec::new(Opts::new(name, help), &COUNTER_LABELS).unwrap();
            registry
                .register(Box::new(again))
                .unwrap_or_else(|e| panic!("{name} was left registered: {e}"));
        }
        // A registry without the conflict takes all four.
        Metrics::register(&Registry::new(), true).unwrap();
    }
}
