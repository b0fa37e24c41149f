// Package riverlimit puts a slidelimit budget in front of River jobs.
//
// Before a job's work runs, the gate acquires a permit for the job's tenant.
// When the limiter denies, the job is snoozed for the hinted retry-after plus
// jitter and the work does not run: River (0.16 and later) does not count a
// snooze as an attempt, so a job can wait for its budget any number of times
// without moving towards MaxAttempts. When Redis is unavailable the job is
// snoozed with a backoff too (a store outage is never a failed attempt),
// unless the gate is set to fail open.
//
// Use it as middleware (global in river.Config.Middleware, or per worker from
// Worker.Middleware) with a TenantFunc, or wrap one typed worker with Wrap.
package riverlimit

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/slidelimit/slidelimit/go"
)

// Defaults of the gate's options.
const (
	DefaultMaxJitter      = 250 * time.Millisecond
	DefaultBackoffInitial = time.Second
	DefaultBackoffMax     = time.Minute
)

// TenantFunc names the tenant whose budget a job spends and the permits it
// takes (cost). ok false runs the job without a check: return it for kinds
// that are not limited. The middleware runs before River decodes the args, so
// a TenantFunc decodes job.EncodedArgs (JSON) into the worker's args type;
// returning ok false when that fails lets no work run unchecked, since River
// then fails the attempt decoding the same JSON before the work.
type TenantFunc func(job *rivertype.JobRow) (tenant string, cost uint64, ok bool)

// Gate decides, before each job's work, whether it runs now or snoozes.
type Gate struct {
	limiter   *slidelimit.Limiter
	maxJitter time.Duration
	backoff   func(snoozes int) time.Duration
	failOpen  bool
	observe   func(job *rivertype.JobRow, outcome Outcome)
}

// Outcome tells an observer what the gate did with one job.
type Outcome struct {
	// Ran is true when the work ran (allowed, or failed open).
	Ran bool
	// Snooze is the delay handed to River when the job was snoozed.
	Snooze time.Duration
	// Decision is the limiter's answer (zero when Err is set); for a policy
	// of several limits, Decision.DeniedBy names the one that snoozed the
	// job.
	Decision slidelimit.Decision
	// Err is the limiter's error, if any.
	Err error
}

// Option configures a Gate.
type Option func(*Gate)

// WithMaxJitter adds a random delay in [0, d) to every snooze, so jobs denied
// together do not all come back at the same instant. Default
// DefaultMaxJitter; d <= 0 adds none.
func WithMaxJitter(d time.Duration) Option { return func(g *Gate) { g.maxJitter = d } }

// WithBackoff sets the snooze after an unavailable Redis, given how many
// times the job was snoozed before. Default (and nil): 1 s doubling up to 1
// min. A negative duration from f (say time.Second << snoozes, overflowed)
// fails the job's attempt with an error that is ErrInvalidArgument; River's
// JobSnooze would panic on it.
func WithBackoff(f func(snoozes int) time.Duration) Option {
	return func(g *Gate) {
		if f != nil {
			g.backoff = f
		}
	}
}

// WithFailOpen runs the work when Redis is unavailable instead of snoozing:
// availability over the budget, an explicit choice.
func WithFailOpen() Option { return func(g *Gate) { g.failOpen = true } }

// WithObserver is called with what the gate did with each job (logs, tests).
func WithObserver(f func(job *rivertype.JobRow, outcome Outcome)) Option {
	return func(g *Gate) { g.observe = f }
}

// NewGate makes a gate in front of limiter.
func NewGate(limiter *slidelimit.Limiter, opts ...Option) *Gate {
	g := &Gate{limiter: limiter, maxJitter: DefaultMaxJitter, backoff: defaultBackoff}
	for _, opt := range opts {
		opt(g)
	}
	return g
}

func defaultBackoff(snoozes int) time.Duration {
	d := DefaultBackoffInitial
	for i := 0; i < snoozes && d < DefaultBackoffMax; i++ {
		d *= 2
	}
	return min(d, DefaultBackoffMax)
}

// plusJitter adds the jitter to a wait of at least 0, saturating: the
// longest Duration plus jitter would wrap negative, and JobSnooze panics on a
// negative wait.
func (g *Gate) plusJitter(wait time.Duration) time.Duration {
	if g.maxJitter <= 0 {
		return wait
	}
	if jitter := rand.N(g.maxJitter); wait <= math.MaxInt64-jitter {
		return wait + jitter
	}
	return math.MaxInt64
}

// snoozeCount is how many times River has snoozed the job so far (its
// metadata's "snoozes").
func snoozeCount(job *rivertype.JobRow) int {
	var meta struct {
		Snoozes int `json:"snoozes"`
	}
	if len(job.Metadata) > 0 {
		_ = json.Unmarshal(job.Metadata, &meta)
	}
	return meta.Snoozes
}

// Run checks tenant's budget for job and either runs work or returns
// river.JobSnooze. Errors other than ErrUnavailable (a bad tenant, a wrong
// key type, an ACL) are returned as the job's error: they are bugs to see,
// not waits. So is any error once ctx has ended (the job's timeout, River's
// StopAndCancel): River then retries the job as any it cut short.
func (g *Gate) Run(ctx context.Context, job *rivertype.JobRow, tenant string, cost uint64, work func(context.Context) error) error {
	switch {
	case g == nil || g.limiter == nil:
		return fmt.Errorf("riverlimit: the gate has no limiter (a nil Gate, or NewGate was given nil): %w",
			slidelimit.ErrInvalidArgument)
	case work == nil:
		return fmt.Errorf("riverlimit: Run was given no work (nil): %w", slidelimit.ErrInvalidArgument)
	}
	d, err := g.limiter.AcquireN(ctx, tenant, cost)
	outcome := Outcome{Decision: d, Err: err}
	switch {
	case err != nil && ctx != nil && ctx.Err() != nil:
		// The job's own context ended (its JobTimeout, StopAndCancel): the
		// job's error, for River to retry as any work its context cut short;
		// never an outage's snooze (a timeout shorter than a check would
		// snooze the job for ever) nor, failing open, work without a permit.
		g.notify(job, outcome)
		return err
	case err != nil && errors.Is(err, slidelimit.ErrUnavailable) && g.failOpen:
		outcome.Ran = true
	case err != nil && errors.Is(err, slidelimit.ErrUnavailable):
		snoozes := snoozeCount(job)
		wait := g.backoff(snoozes)
		if wait < 0 {
			outcome.Err = fmt.Errorf("riverlimit: the backoff function returned %v after %d snoozes; "+
				"a snooze cannot be negative (the limiter: %v): %w", wait, snoozes, err, slidelimit.ErrInvalidArgument)
			g.notify(job, outcome)
			return outcome.Err
		}
		outcome.Snooze = g.plusJitter(wait)
	case err != nil:
		g.notify(job, outcome)
		return err
	case !d.Allowed:
		outcome.Snooze = g.plusJitter(d.RetryAfter())
	default:
		outcome.Ran = true
	}
	g.notify(job, outcome)
	if !outcome.Ran {
		return river.JobSnooze(outcome.Snooze)
	}
	return work(ctx)
}

func (g *Gate) notify(job *rivertype.JobRow, o Outcome) {
	if g.observe != nil {
		g.observe(job, o)
	}
}

// Middleware is a River worker middleware that gates every job tenant
// selects. Install it in river.Config.Middleware or return it from a worker's
// Middleware method.
type Middleware struct {
	river.MiddlewareDefaults
	gate   *Gate
	tenant TenantFunc
}

var _ rivertype.WorkerMiddleware = (*Middleware)(nil)

// NewMiddleware makes the middleware for gate, with tenant naming each job's tenant.
func NewMiddleware(gate *Gate, tenant TenantFunc) *Middleware {
	return &Middleware{gate: gate, tenant: tenant}
}

// Work implements rivertype.WorkerMiddleware.
func (m *Middleware) Work(ctx context.Context, job *rivertype.JobRow, doInner func(context.Context) error) error {
	if m.tenant == nil {
		return fmt.Errorf("riverlimit: the middleware has no TenantFunc (NewMiddleware was given nil): %w",
			slidelimit.ErrInvalidArgument)
	}
	tenant, cost, ok := m.tenant(job)
	if !ok {
		return doInner(ctx)
	}
	return m.gate.Run(ctx, job, tenant, cost, doInner)
}

// Wrap gates one typed worker: tenant names the tenant (and cost) of each job.
func Wrap[T river.JobArgs](worker river.Worker[T], gate *Gate, tenant func(job *river.Job[T]) (string, uint64)) river.Worker[T] {
	if worker == nil {
		return nilWorker[T]{}
	}
	return &wrapped[T]{Worker: worker, gate: gate, tenant: tenant}
}

// nilWorker stands in for a nil worker given to Wrap. River asks a worker
// for its middleware, timeout and retry policy besides Work, and a wrapper
// around nil would panic there: this has River's defaults and fails each job.
type nilWorker[T river.JobArgs] struct{ river.WorkerDefaults[T] }

func (nilWorker[T]) Work(context.Context, *river.Job[T]) error { return errNilWorkerOrTenant }

var errNilWorkerOrTenant = fmt.Errorf("riverlimit: Wrap was given a nil worker or tenant function: %w",
	slidelimit.ErrInvalidArgument)

type wrapped[T river.JobArgs] struct {
	river.Worker[T]
	gate   *Gate
	tenant func(job *river.Job[T]) (string, uint64)
}

func (w *wrapped[T]) Work(ctx context.Context, job *river.Job[T]) error {
	if w.tenant == nil {
		return errNilWorkerOrTenant
	}
	tenant, cost := w.tenant(job)
	return w.gate.Run(ctx, job.JobRow, tenant, cost, func(ctx context.Context) error {
		return w.Worker.Work(ctx, job)
	})
}
