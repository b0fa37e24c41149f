// Package verbatim switches off the Go API's zero-value defaults for one
// process: the driver (cmd/slidelimit-driver) sets Policy to true while it
// builds a policy whose request names an empty namespace or algorithm, so
// that the empty value reaches core as it is (and core rejects it, as in
// every binding), instead of standing for "rl" and sliding_log; and Buckets
// while it builds one whose request names buckets 0 (for one limit or
// several), so that core gets a count of 0 (and rejects it) instead of no
// count (its default). A Go user cannot ask for that: in the API a zero value
// means the default.
package verbatim

import "sync/atomic"

// Policy, when true, makes slidelimit pass Policy.Namespace and
// Policy.Algorithm to core unchanged, empty or not.
var Policy atomic.Bool

// Buckets holds a bit per limit (bit 0: Policy.Buckets or Policy.Limits[0],
// bit i: Policy.Limits[i]): a set bit makes slidelimit pass that limit's
// Buckets 0 to core as a count of 0 instead of "not given".
var Buckets atomic.Uint32

// BucketsGiven tells whether limit i's Buckets 0 goes to core as a count.
func BucketsGiven(i int) bool { return i < 32 && Buckets.Load()&(1<<i) != 0 }
