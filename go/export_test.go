package slidelimit

// LiveHandles is the number of C objects (policies and memory engines) the
// process holds, for the external tests: each Limiter adds one or two, and
// Close or its finalizers take them away again.
func LiveHandles() int64 { return liveHandles.Load() }

// CoreVersion is the version of the slidelimit-core the package runs.
func CoreVersion() string { return coreVersion() }
