package slidelimit

import (
	"slices"
	"sync"
)

// This file reads core's metric table for exporters; the package itself
// depends on no metrics library (the Prometheus collectors are in promlimit),
// so importing slidelimit does not pull one in.

// MetricSpec is one row of core's metric table. Names, help texts, label
// names and buckets are the same in every binding, so dashboards and alerts
// work with any of them; an exporter for another metrics library builds its
// instruments from these.
type MetricSpec struct {
	Name, Help string
	// Labels are the label names without the tenant label, in the order
	// label values are given: resource.
	Labels []string
	// LabelsWithTenant are the label names with it (resource, tenant); the
	// histogram has no tenant label, so for it they equal Labels.
	LabelsWithTenant []string
	// Buckets are the histogram's upper bounds in seconds, ascending; nil
	// for a counter.
	Buckets []float64
}

// MetricTable is core's metric table: the four metrics every binding exports.
type MetricTable struct {
	// Allowed is ratelimit_allowed_total, a counter of admitted acquires.
	Allowed MetricSpec
	// Denied is ratelimit_denied_total, a counter of denied acquires.
	Denied MetricSpec
	// Wait is ratelimit_wait_seconds, a histogram of the retry-after handed
	// to denied acquires (Decision.WaitSeconds).
	Wait MetricSpec
	// LocalDenied is ratelimit_local_denied_total, a counter of the denials
	// the deny cache answered without a Redis call (AcquireEvent.Local);
	// they count in Denied and Wait too.
	LocalDenied MetricSpec
}

var (
	tableOnce sync.Once
	table     MetricTable
	tableErr  error
)

// Metrics returns core's metric table, read once through the C ABI. The
// error (ErrInternal) means the linked library could not hand it over.
// Callers get their own copy of the slices.
func Metrics() (MetricTable, error) {
	tableOnce.Do(func() {
		rows := []*MetricSpec{&table.Allowed, &table.Denied, &table.Wait, &table.LocalDenied}
		ids := []metricID{metricAllowedTotal, metricDeniedTotal, metricWaitSeconds, metricLocalDeniedTotal}
		for i, id := range ids {
			if *rows[i], tableErr = readMetric(id); tableErr != nil {
				return
			}
		}
	})
	if tableErr != nil {
		return MetricTable{}, tableErr
	}
	return MetricTable{Allowed: table.Allowed.clone(), Denied: table.Denied.clone(), Wait: table.Wait.clone(),
		LocalDenied: table.LocalDenied.clone()}, nil
}

func (s MetricSpec) clone() MetricSpec {
	s.Labels = slices.Clone(s.Labels)
	s.LabelsWithTenant = slices.Clone(s.LabelsWithTenant)
	s.Buckets = slices.Clone(s.Buckets)
	return s
}

// WaitSeconds is what a denied decision adds to ratelimit_wait_seconds: its
// retry-after in seconds, converted by core as in every binding. NaN when
// core cannot be reached (without cgo: no wasm instance), which an
// observer must not record: one NaN would make the histogram's sum NaN.
func (d Decision) WaitSeconds() float64 {
	return metricWaitSecondsOf(d.RetryAfterMs)
}
