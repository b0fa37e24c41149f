package slidelimit

// #include "slidelimit.h"
import "C"

import (
	"fmt"
	"slices"
	"sync"
	"unsafe"
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

// MetricTable is core's metric table: the three metrics every binding exports.
type MetricTable struct {
	// Allowed is ratelimit_allowed_total, a counter of admitted acquires.
	Allowed MetricSpec
	// Denied is ratelimit_denied_total, a counter of denied acquires.
	Denied MetricSpec
	// Wait is ratelimit_wait_seconds, a histogram of the retry-after handed
	// to denied acquires (Decision.WaitSeconds).
	Wait MetricSpec
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
		rows := []*MetricSpec{&table.Allowed, &table.Denied, &table.Wait}
		ids := []C.uint32_t{C.SLIDELIMIT_METRIC_ALLOWED_TOTAL, C.SLIDELIMIT_METRIC_DENIED_TOTAL,
			C.SLIDELIMIT_METRIC_WAIT_SECONDS}
		for i, id := range ids {
			if *rows[i], tableErr = readMetric(id); tableErr != nil {
				return
			}
		}
	})
	if tableErr != nil {
		return MetricTable{}, tableErr
	}
	return MetricTable{Allowed: table.Allowed.clone(), Denied: table.Denied.clone(), Wait: table.Wait.clone()}, nil
}

func (s MetricSpec) clone() MetricSpec {
	s.Labels = slices.Clone(s.Labels)
	s.LabelsWithTenant = slices.Clone(s.LabelsWithTenant)
	s.Buckets = slices.Clone(s.Buckets)
	return s
}

// WaitSeconds is what a denied decision adds to ratelimit_wait_seconds: its
// retry-after in seconds, converted by core as in every binding.
func (d Decision) WaitSeconds() float64 {
	return float64(C.slidelimit_metric_wait_seconds(C.uint64_t(d.RetryAfterMs)))
}

func readMetric(id C.uint32_t) (MetricSpec, error) {
	fail := func(what string, r C.slidelimit_result) error {
		return &Error{Code: ErrInternal, Message: fmt.Sprintf("reading core's metric table: metric %d: %s: %s",
			id, what, resultName(Code(r)))}
	}
	var s MetricSpec
	var p *C.uint8_t
	var n C.size_t
	if r := C.slidelimit_metric_name(id, &p, &n); r != C.SLIDELIMIT_RESULT_OK {
		return s, fail("name", r)
	}
	s.Name = staticString(p, n)
	if r := C.slidelimit_metric_help(id, &p, &n); r != C.SLIDELIMIT_RESULT_OK {
		return s, fail("help", r)
	}
	s.Help = staticString(p, n)
	for _, withTenant := range []bool{false, true} {
		var count C.size_t
		if r := C.slidelimit_metric_label_count(id, C.bool(withTenant), &count); r != C.SLIDELIMIT_RESULT_OK {
			return s, fail("label count", r)
		}
		labels := make([]string, int(count))
		for i := range labels {
			r := C.slidelimit_metric_label(id, C.bool(withTenant), C.size_t(i), &p, &n, nil, 0, nil, nil)
			if r != C.SLIDELIMIT_RESULT_OK {
				return s, fail("label", r)
			}
			labels[i] = staticString(p, n)
		}
		if withTenant {
			s.LabelsWithTenant = labels
		} else {
			s.Labels = labels
		}
	}
	var b *C.double
	if r := C.slidelimit_metric_buckets(id, &b, &n); r != C.SLIDELIMIT_RESULT_OK {
		return s, fail("buckets", r)
	}
	if n > 0 {
		s.Buckets = make([]float64, int(n))
		copy(s.Buckets, unsafe.Slice((*float64)(unsafe.Pointer(b)), int(n)))
	}
	return s, nil
}
