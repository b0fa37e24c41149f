package slidelimit

import "fmt"

// AcquireEvent is what an Observer learns about one acquire (Acquire,
// AcquireN or AcquireAt; peeks and resets are not observed). Exactly one of
// three things happened:
//
//   - allowed: Err is nil and Decision.Allowed is true;
//   - denied: Err is nil, Decision.Allowed is false and Decision.RetryAfter()
//     is the wait handed to the caller (Decision.WaitSeconds() in seconds);
//   - failed: Err is the *Error the caller got (ErrUnavailable when Redis is
//     down or slow) and Decision is zero.
type AcquireEvent struct {
	// Resource is the Limiter's Policy.Resource.
	Resource string
	Tenant   string
	Cost     uint64
	Decision Decision
	Err      error
	// Local is true for a denial the Limiter's deny cache answered without
	// a Redis call (WithDenyCache): counted as a denial, and in
	// ratelimit_local_denied_total too.
	Local bool
}

// Observer is told about every acquire of the Limiters it is given to with
// WithObserver, after the decision and before the caller gets it, on the
// caller's goroutine: it must be safe for concurrent use and should be quick.
// promlimit.Metrics is one (the Prometheus metrics every binding exports);
// ObserverFunc makes one from a function.
type Observer interface {
	ObserveAcquire(AcquireEvent)
}

// ObserverFunc is a function used as an Observer.
type ObserverFunc func(AcquireEvent)

// ObserveAcquire calls f(e).
func (f ObserverFunc) ObserveAcquire(e AcquireEvent) { f(e) }

// WithObserver adds o to the Limiter's observers; each is called in the order
// given. A nil o is ignored; a typed nil (a nil ObserverFunc or
// *promlimit.Metrics) makes New and NewMemory fail with ErrInvalidArgument
// naming observer, since calling it would panic.
func WithObserver(o Observer) Option {
	return func(c *config) {
		switch {
		case o == nil:
		case isNil(o):
			c.refuse("observer", fmt.Sprintf("must not be a nil %T", o))
		default:
			c.observers = append(c.observers, o)
		}
	}
}

// observe tells every observer about one acquire.
func (l *Limiter) observe(tenant string, cost uint64, d Decision, err error) {
	l.notify(AcquireEvent{Resource: l.policy.Resource, Tenant: tenant, Cost: cost, Decision: d, Err: err})
}

// observeLocal tells every observer about a denial of the deny cache.
func (l *Limiter) observeLocal(tenant string, cost uint64, d Decision) {
	l.notify(AcquireEvent{Resource: l.policy.Resource, Tenant: tenant, Cost: cost, Decision: d, Local: true})
}

func (l *Limiter) notify(e AcquireEvent) {
	if len(l.cfg.observers) == 0 {
		return
	}
	if e.Err != nil {
		e.Decision = Decision{}
	}
	for _, o := range l.cfg.observers {
		o.ObserveAcquire(e)
	}
}
