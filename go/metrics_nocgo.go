//go:build !cgo

package slidelimit

import (
	"encoding/binary"
	"fmt"
	"math"
)

// readMetric reads one row of core's metric table from the wasm module, as
// metrics_cgo.go does through cgo.
func readMetric(id metricID) (MetricSpec, error) {
	var what string
	var code uint32
	s, err := with(func(in *instance) (MetricSpec, error) {
		var s MetricSpec
		// A failure is in staticErr (a trap, no room) or in code (core's).
		var staticErr error
		static := func(fn int, name string, out *string, args ...uint64) bool {
			pp, pn, err := in.staticOut()
			if err != nil {
				staticErr = err
				return false
			}
			if code, err = in.result(fn, append(args, pp, pn)...); err != nil || code != resultOK {
				what, staticErr = name, err
				return false
			}
			*out = in.staticString(pp, pn)
			return true
		}
		if !static(fnMetricName, "name", &s.Name, uint64(id)) || !static(fnMetricHelp, "help", &s.Help, uint64(id)) {
			return s, staticErr
		}
		for _, withTenant := range []uint64{0, 1} {
			count, err := in.out(4)
			if err != nil {
				return s, err
			}
			if code, err = in.result(fnMetricLabelCount, uint64(id), withTenant, count); err != nil || code != resultOK {
				what = "label count"
				return s, err
			}
			labels := make([]string, int(in.u32(count)))
			for i := range labels {
				pp, pn, err := in.staticOut()
				if err != nil {
					return s, err
				}
				if code, err = in.result(fnMetricLabel, uint64(id), withTenant, uint64(i), pp, pn, 0, 0, 0, 0); err != nil || code != resultOK {
					what = "label"
					return s, err
				}
				labels[i] = in.staticString(pp, pn)
			}
			if withTenant == 1 {
				s.LabelsWithTenant = labels
			} else {
				s.Labels = labels
			}
		}
		pp, pn, err := in.staticOut()
		if err != nil {
			return s, err
		}
		if code, err = in.result(fnMetricBuckets, uint64(id), pp, pn); err != nil || code != resultOK {
			what = "buckets"
			return s, err
		}
		if n := in.u32(pn); n > 0 {
			raw, _ := in.mem.Read(in.u32(pp), 8*n)
			s.Buckets = make([]float64, int(n))
			for i := range s.Buckets {
				s.Buckets[i] = math.Float64frombits(binary.LittleEndian.Uint64(raw[8*i:]))
			}
		}
		return s, nil
	})
	if err != nil {
		return s, err
	}
	if code != resultOK {
		// After the instance is released: resultName takes one itself.
		return s, &Error{Code: ErrInternal, Message: fmt.Sprintf("reading core's metric table: metric %d: %s: %s",
			id, what, resultName(Code(code)))}
	}
	return s, nil
}
