//go:build cgo

package slidelimit

// #include "slidelimit.h"
import "C"

import (
	"fmt"
	"unsafe"
)

// metricID is a slidelimit_metric value.
type metricID = C.uint32_t

const (
	metricAllowedTotal = metricID(C.SLIDELIMIT_METRIC_ALLOWED_TOTAL)
	metricDeniedTotal  = metricID(C.SLIDELIMIT_METRIC_DENIED_TOTAL)
	metricWaitSeconds  = metricID(C.SLIDELIMIT_METRIC_WAIT_SECONDS)

	metricLocalDeniedTotal = metricID(C.SLIDELIMIT_METRIC_LOCAL_DENIED_TOTAL)
)

func metricWaitSecondsOf(retryAfterMs uint64) float64 {
	return float64(C.slidelimit_metric_wait_seconds(C.uint64_t(retryAfterMs)))
}

func readMetric(id metricID) (MetricSpec, error) {
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
