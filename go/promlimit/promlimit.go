// Package promlimit exports a slidelimit Limiter's decisions as the
// Prometheus metrics every slidelimit binding exports:
// ratelimit_allowed_total, ratelimit_denied_total and
// ratelimit_local_denied_total (the denials the Limiter's deny cache answered
// without a Redis call, also counted as denied) with labels resource and,
// optionally, tenant; and ratelimit_wait_seconds (label resource), the
// retry-after handed to denied callers. Names, help texts, labels and buckets
// come from slidelimit-core (slidelimit.Metrics), so dashboards and alerts
// work with workers in any language.
//
// It is a package of its own so that importing slidelimit alone does not
// pull in the Prometheus client:
//
//	m, err := promlimit.NewMetrics(registry, promlimit.Options{})
//	limiter, err := slidelimit.New(client, policy, slidelimit.WithObserver(m))
package promlimit

import (
	"fmt"
	"math"
	"reflect"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/slidelimit/slidelimit/go"
)

// Metrics are the four collectors, registered by NewMetrics. They are a
// slidelimit.Observer: give them to any number of Limiters with
// slidelimit.WithObserver.
type Metrics struct {
	allowed, denied *prometheus.CounterVec
	localDenied     *prometheus.CounterVec
	wait            *prometheus.HistogramVec
	tenantLabel     bool
}

var _ slidelimit.Observer = (*Metrics)(nil)

// Options configures NewMetrics.
type Options struct {
	// TenantLabel adds the tenant label to the counters. Leave it false when
	// tenants are unbounded: every tenant would be a new time series.
	TenantLabel bool
}

// NewMetrics registers the metrics in reg (opt-in: nothing is registered
// anywhere else). A registry that already holds metrics of these names (a
// second NewMetrics on it) gives reg.Register's error and registers nothing;
// share one Metrics between Limiters instead.
func NewMetrics(reg prometheus.Registerer, opts Options) (*Metrics, error) {
	if reg == nil || reflect.ValueOf(reg).Kind() == reflect.Pointer && reflect.ValueOf(reg).IsNil() {
		return nil, fmt.Errorf("promlimit: the registry is nil (prometheus.NewRegistry() makes one): %w",
			slidelimit.ErrInvalidArgument)
	}
	table, err := slidelimit.Metrics()
	if err != nil {
		return nil, err
	}
	counterLabels := func(s slidelimit.MetricSpec) []string {
		if opts.TenantLabel {
			return s.LabelsWithTenant
		}
		return s.Labels
	}
	m := &Metrics{
		allowed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: table.Allowed.Name, Help: table.Allowed.Help},
			counterLabels(table.Allowed)),
		denied: prometheus.NewCounterVec(prometheus.CounterOpts{Name: table.Denied.Name, Help: table.Denied.Help},
			counterLabels(table.Denied)),
		localDenied: prometheus.NewCounterVec(prometheus.CounterOpts{Name: table.LocalDenied.Name,
			Help: table.LocalDenied.Help}, counterLabels(table.LocalDenied)),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: table.Wait.Name, Help: table.Wait.Help,
			Buckets: table.Wait.Buckets}, table.Wait.Labels),
		tenantLabel: opts.TenantLabel,
	}
	collectors := []prometheus.Collector{m.allowed, m.denied, m.wait, m.localDenied}
	for i, c := range collectors {
		if err := reg.Register(c); err != nil {
			// All or nothing: a failed call leaves reg as it was.
			for _, done := range collectors[:i] {
				reg.Unregister(done)
			}
			return nil, err
		}
	}
	return m, nil
}

// ObserveAcquire counts one acquire: allowed, or denied with its wait (and
// as a local denial when the deny cache answered it).
// Failed acquires (e.Err set) are not counted: core's table has no metric
// for them; count them with an Observer of your own (docs/go.md shows one).
func (m *Metrics) ObserveAcquire(e slidelimit.AcquireEvent) {
	if e.Err != nil {
		return
	}
	// Label values go in core's label order: resource, then tenant.
	labels := []string{e.Resource}
	if m.tenantLabel {
		labels = append(labels, e.Tenant)
	}
	if e.Decision.Allowed {
		m.allowed.WithLabelValues(labels...).Inc()
		return
	}
	m.denied.WithLabelValues(labels...).Inc()
	if e.Local {
		m.localDenied.WithLabelValues(labels...).Inc()
	}
	if wait := e.Decision.WaitSeconds(); !math.IsNaN(wait) {
		m.wait.WithLabelValues(e.Resource).Observe(wait)
	}
}
