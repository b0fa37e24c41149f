// Package slidelimit is distributed sliding-window rate limiting on Redis,
// sharing one budget with every other slidelimit binding (Rust, Node, ...).
//
// It is a thin shell: key naming, validation, the Lua scripts, reply parsing,
// the server-error table (codes and messages) and the in-memory engine all
// come from slidelimit-core through its C ABI (ffi-c/); go-redis v9 runs the
// scripts, standalone or Cluster, with EVALSHA and the NOSCRIPT fallback.
//
//	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379"})
//	limiter, err := slidelimit.New(client, slidelimit.Policy{
//		Resource: "geocode", // Namespace "rl" and Algorithm SlidingLog unless set
//		Limit:    600,
//		Window:   60 * time.Second,
//	})
//	if err != nil {
//		return err
//	}
//	defer limiter.Close()
//	d, err := limiter.Acquire(ctx, "tenant-17")
//	switch {
//	case errors.Is(err, slidelimit.ErrUnavailable): // Redis down or slow: your call
//	case err != nil: // a bug or a bad tenant
//	case !d.Allowed: // come back after d.RetryAfter()
//	}
//
// The examples (ExampleNew, ExampleNewMemory, ExampleCodeOf, ...) are the
// snippets of docs/go.md, compiled and run by go test.
//
// A Policy may hold several limits (Policy.Limits: 20 per second and 600 per
// minute), checked and recorded together; Decision.DeniedBy names the limit
// that denied. A Limiter on Redis keeps a local deny cache (WithDenyCache,
// WithoutDenyCache): while a tenant's last denial holds, Acquire answers it
// without a Redis call.
//
// Redis errors are never decisions: an unreachable or slow Redis is
// ErrUnavailable, never "denied" and never "allowed".
//
// The package depends on go-redis and nothing else outside the standard
// library, but for wazero when built without cgo (its WebAssembly path).
// Metrics are opt-in and live in their own packages: WithObserver
// hands every acquire's outcome to an Observer, and the subpackage promlimit
// provides the Prometheus metrics every binding exports; riverlimit gates
// River jobs.
package slidelimit
