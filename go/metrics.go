package slidelimit

import "github.com/prometheus/client_golang/prometheus"

// WaitBuckets are the buckets of ratelimit_wait_seconds, 1 ms to 10 min (the
// same in every slidelimit binding).
var WaitBuckets = []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 600}

// Metrics are the three metrics every slidelimit binding exports:
// ratelimit_allowed_total and ratelimit_denied_total (labels resource and,
// optionally, tenant) and ratelimit_wait_seconds (label resource), the
// retry-after handed to denied callers.
type Metrics struct {
	allowed, denied *prometheus.CounterVec
	wait            *prometheus.HistogramVec
	tenantLabel     bool
}

// MetricsOptions configures NewMetrics.
type MetricsOptions struct {
	// TenantLabel adds the tenant label to the counters. Leave it false when
	// tenants are unbounded: every tenant would be a new time series.
	TenantLabel bool
}

// NewMetrics registers the metrics in reg (opt-in: nothing is registered
// anywhere else). Pass the result to WithMetrics.
func NewMetrics(reg prometheus.Registerer, opts MetricsOptions) (*Metrics, error) {
	labels := []string{"resource"}
	if opts.TenantLabel {
		labels = append(labels, "tenant")
	}
	m := &Metrics{
		allowed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ratelimit_allowed_total",
			Help: "Checks that were allowed.",
		}, labels),
		denied: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "ratelimit_denied_total",
			Help: "Checks that were denied.",
		}, labels),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "ratelimit_wait_seconds",
			Help:    "retry_after handed to denied callers, in seconds.",
			Buckets: WaitBuckets,
		}, []string{"resource"}),
		tenantLabel: opts.TenantLabel,
	}
	for _, c := range []prometheus.Collector{m.allowed, m.denied, m.wait} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Observe records one acquire's decision (Limiters made WithMetrics call it).
func (m *Metrics) Observe(resource, tenant string, d Decision) {
	labels := []string{resource}
	if m.tenantLabel {
		labels = append(labels, tenant)
	}
	if d.Allowed {
		m.allowed.WithLabelValues(labels...).Inc()
		return
	}
	m.denied.WithLabelValues(labels...).Inc()
	m.wait.WithLabelValues(resource).Observe(float64(d.RetryAfterMs) / 1000)
}
