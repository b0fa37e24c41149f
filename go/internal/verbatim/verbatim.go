// Package verbatim switches off the Go API's zero-value defaults for one
// process: the conformance runner sets Policy to true so that a vector's
// empty namespace or algorithm reaches core as it is (and core rejects it, as
// in every binding), instead of standing for "rl" and sliding_log.
package verbatim

import "sync/atomic"

// Policy, when true, makes slidelimit pass Policy.Namespace and
// Policy.Algorithm to core unchanged, empty or not.
var Policy atomic.Bool
