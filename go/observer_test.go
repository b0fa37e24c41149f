package slidelimit_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/slidelimit/slidelimit/go"
	"github.com/slidelimit/slidelimit/go/internal/testredis"
)

// recorder is an Observer that keeps what it was told.
type recorder struct {
	mu     sync.Mutex
	events []slidelimit.AcquireEvent
}

func (r *recorder) ObserveAcquire(e slidelimit.AcquireEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) take() []slidelimit.AcquireEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	events := r.events
	r.events = nil
	return events
}

// Every acquire is observed, by every observer in the order given: allowed,
// denied with its wait, failed with the caller's error and no decision.
// Peeks and resets are not.
func TestObserversSeeEveryAcquire(t *testing.T) {
	first := &recorder{}
	var order []string
	p := testPolicy(t, slidelimit.SlidingLog, 2, 1000)
	l := newMemoryLimiter(t, p,
		slidelimit.WithObserver(first),
		slidelimit.WithObserver(nil), // ignored
		slidelimit.WithObserver(slidelimit.ObserverFunc(func(e slidelimit.AcquireEvent) {
			if n := len(first.events); n == 0 || first.events[n-1] != e {
				t.Errorf("the second observer ran before the first saw %+v", e)
			}
			order = append(order, e.Tenant)
		})))

	if _, err := l.AcquireAt(ctx, "t", 2, 1000); err != nil { // allowed, spends the budget
		t.Fatal(err)
	}
	denied, err := l.AcquireAt(ctx, "t", 1, 1400) // denied: 600 ms to wait
	if err != nil || denied.Allowed {
		t.Fatalf("%+v %v", denied, err)
	}
	if _, err := l.PeekAt(ctx, "t", 1, 1500); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Reset(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	_, badTenant := l.AcquireAt(ctx, "", 1, 1500)

	events := first.take()
	if len(events) != 3 {
		t.Fatalf("%d events, want 3 (allowed, denied, failed): %+v", len(events), events)
	}
	allowed, deny, failed := events[0], events[1], events[2]
	if allowed.Resource != p.Resource || allowed.Tenant != "t" || allowed.Cost != 2 || allowed.Err != nil ||
		!allowed.Decision.Allowed || allowed.Decision.NowMs != 1000 {
		t.Errorf("allowed: %+v", allowed)
	}
	if deny.Err != nil || deny.Decision != denied || deny.Decision.RetryAfterMs != 600 || deny.Cost != 1 {
		t.Errorf("denied: %+v, the caller got %+v", deny, denied)
	}
	if failed.Err != badTenant || !errors.Is(failed.Err, slidelimit.ErrInvalidArgument) ||
		failed.Decision != (slidelimit.Decision{}) || failed.Tenant != "" {
		t.Errorf("failed: %+v, the caller got %v", failed, badTenant)
	}
	if len(order) != 3 {
		t.Errorf("the second observer saw %d acquires, want 3", len(order))
	}

	// So does one whose context the caller had already ended, or a nil one.
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	_, ended := l.AcquireAt(canceled, "t", 1, 1500)
	_, nilCtx := l.AcquireAt(nil, "t", 1, 1500) // the bad input: refused, and observed
	if events := first.take(); len(events) != 2 ||
		events[0].Err != ended || !errors.Is(ended, context.Canceled) ||
		events[1].Err != nilCtx || !errors.Is(nilCtx, slidelimit.ErrInvalidArgument) {
		t.Errorf("ended and nil contexts: %+v, the callers got %v and %v", events, ended, nilCtx)
	}

	// After Close an acquire still reaches the observers, as the error the
	// caller gets.
	l.Close()
	_, closed := l.AcquireAt(ctx, "t", 1, 2000)
	if events := first.take(); len(events) != 1 || events[0].Err != closed || !errors.Is(closed, slidelimit.ErrClosed) {
		t.Errorf("after Close: %+v, the caller got %v", events, closed)
	}
}

// An unreachable Redis reaches the observers as ErrUnavailable: the hook a
// deployment counts outages with (docs/go.md).
func TestObserversSeeUnavailableRedis(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: testredis.Unreachable(t), MaxRetries: -1, DialerRetries: 1})
	defer client.Close()
	rec := &recorder{}
	l := newRedisLimiter(t, client, testPolicy(t, slidelimit.SlidingLog, 3, 1000), slidelimit.WithObserver(rec))
	_, err := l.AcquireN(ctx, "t", 2)
	events := rec.take()
	if len(events) != 1 || events[0].Err != err || !errors.Is(events[0].Err, slidelimit.ErrUnavailable) ||
		events[0].Cost != 2 || events[0].Decision != (slidelimit.Decision{}) {
		t.Fatalf("%+v, the caller got %v", events, err)
	}
}

// With a live Redis the observers see the decisions the callers get.
func TestObserversSeeRedisDecisions(t *testing.T) {
	rec := &recorder{}
	l := newRedisLimiter(t, testredis.Client(t, nil), testPolicy(t, slidelimit.SlidingCounter, 1, 60_000),
		slidelimit.WithObserver(rec))
	var got []slidelimit.Decision
	for range 2 {
		d, err := l.Acquire(ctx, "t")
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, d)
	}
	events := rec.take()
	if len(events) != 2 || events[0].Decision != got[0] || events[1].Decision != got[1] ||
		!got[0].Allowed || got[1].Allowed || events[1].Decision.WaitSeconds() <= 0 {
		t.Fatalf("events %+v, decisions %+v", events, got)
	}
	if _, err := l.Reset(ctx, "t"); err != nil {
		t.Fatal(err)
	}
}
