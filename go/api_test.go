package slidelimit_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidelimit/slidelimit/go"
	"github.com/slidelimit/slidelimit/go/internal/testredis"
)

// fmt prefers Error over String; Code's Format makes %s, %v and %q print the
// bare tag the docs promise, while Error keeps the package prefix.
func TestCodePrintsItsTag(t *testing.T) {
	code := slidelimit.ErrInvalidArgument
	for format, want := range map[string]string{
		"%s":     "invalid_argument",
		"%v":     "invalid_argument",
		"%+v":    "invalid_argument",
		"%q":     `"invalid_argument"`,
		"%-18s|": "invalid_argument  |",
		"%d":     fmt.Sprint(uint32(code)),
	} {
		if got := fmt.Sprintf(format, code); got != want {
			t.Errorf("Sprintf(%q) = %q, want %q", format, got, want)
		}
	}
	if got := fmt.Sprint(slidelimit.ErrUnavailable); got != "unavailable" {
		t.Errorf("Sprint = %q", got)
	}
	if got := code.Error(); got != "slidelimit: invalid_argument" {
		t.Errorf("Error() = %q", got)
	}
	if got := fmt.Sprintf("%s", error(code)); got != "invalid_argument" {
		t.Errorf("as an error, %%s = %q", got)
	}
}

// A closed Limiter's error is an *Error like every other failure, and its
// cause is ErrClosed, for every call and both engines.
func TestClosedIsAnError(t *testing.T) {
	client := testredis.Client(t, nil)
	for name, make := range map[string]func(slidelimit.Policy) (*slidelimit.Limiter, error){
		"memory": func(p slidelimit.Policy) (*slidelimit.Limiter, error) { return slidelimit.NewMemory(p) },
		"redis":  func(p slidelimit.Policy) (*slidelimit.Limiter, error) { return slidelimit.New(client, p) },
	} {
		l, err := make(testPolicy(t, slidelimit.SlidingLog, 3, 1000))
		if err != nil {
			t.Fatal(err)
		}
		l.Close()
		calls := map[string]error{}
		_, calls["Acquire"] = l.Acquire(ctx, "t")
		_, calls["AcquireAt"] = l.AcquireAt(ctx, "t", 1, 1000)
		_, calls["Peek"] = l.Peek(ctx, "t", 1)
		_, calls["Reset"] = l.Reset(ctx, "t")
		_, calls["Key"] = l.Key("t")
		for call, err := range calls {
			if !errors.Is(err, slidelimit.ErrClosed) {
				t.Fatalf("%s %s: want ErrClosed, got %v", name, call, err)
			}
			wantCode(t, err, slidelimit.ErrInvalidArgument, "limiter is closed")
			if code, ok := slidelimit.CodeOf(err); !ok || code != slidelimit.ErrInvalidArgument {
				t.Fatalf("%s %s: CodeOf = %v, %v", name, call, code, ok)
			}
			if got := err.Error(); got != "slidelimit: invalid_argument: limiter is closed" {
				t.Fatalf("%s %s: %q", name, call, got)
			}
		}
	}
}

// The zero Namespace and Algorithm are core's defaults, "rl" and sliding_log.
func TestPolicyDefaults(t *testing.T) {
	l := newMemoryLimiter(t, slidelimit.Policy{Resource: "geocode", Limit: 1, WindowMs: 60_000})
	key, err := l.Key("t")
	if err != nil {
		t.Fatal(err)
	}
	if key != "rl:{geocode:t}:log:60000" {
		t.Fatalf("key %q", key)
	}
	if p := l.Policy(); p.Namespace != slidelimit.DefaultNamespace || p.Algorithm != slidelimit.DefaultAlgorithm {
		t.Fatalf("Policy() = %+v", p)
	}
	if slidelimit.DefaultNamespace != "rl" || slidelimit.DefaultAlgorithm != slidelimit.SlidingLog {
		t.Fatal("the defaults are core's: rl and sliding_log")
	}
	// Redis too, and an explicit value still wins.
	client := testredis.Client(t, nil)
	r := newRedisLimiter(t, client, slidelimit.Policy{Namespace: "rl-go-test", Resource: "defaults",
		Algorithm: slidelimit.SlidingCounter, Limit: 1, WindowMs: 1000})
	if key, _ := r.Key("t"); key != "rl-go-test:{defaults:t}:counter:1000" {
		t.Fatalf("key %q", key)
	}
	r = newRedisLimiter(t, client, slidelimit.Policy{Resource: "defaults", Limit: 1, WindowMs: 1000})
	if key, _ := r.Key("t"); key != "rl:{defaults:t}:log:1000" {
		t.Fatalf("key %q", key)
	}
}

// Window is a Duration in whole milliseconds; exactly one of Window and
// WindowMs is set.
func TestPolicyWindow(t *testing.T) {
	for _, c := range []struct {
		window   time.Duration
		windowMs uint64
		key      string
		err      string
	}{
		{window: 2 * time.Second, key: "rl:{geocode:t}:log:2000"},
		{window: time.Millisecond, key: "rl:{geocode:t}:log:1"},
		{windowMs: 2000, key: "rl:{geocode:t}:log:2000"},
		{window: 2 * time.Second, windowMs: 2000, err: "window: set Window or WindowMs, not both"},
		{window: 1500 * time.Microsecond, err: "window: must be a positive whole number of milliseconds, got 1.5ms"},
		{window: time.Nanosecond, err: "window: must be a positive whole number of milliseconds"},
		{window: -time.Second, err: "window: must be a positive whole number of milliseconds"},
		{err: "window_ms:"},
	} {
		p := slidelimit.Policy{Resource: "geocode", Limit: 1, Window: c.window, WindowMs: c.windowMs}
		l, err := slidelimit.NewMemory(p)
		if c.err != "" {
			wantCode(t, err, slidelimit.ErrInvalidArgument, c.err)
			continue
		}
		if err != nil {
			t.Fatalf("%+v: %v", p, err)
		}
		key, err := l.Key("t")
		l.Close()
		if err != nil || key != c.key {
			t.Fatalf("%+v: key %q, %v; want %q", p, key, err, c.key)
		}
	}
	// A window of 2 s really is 2000 ms, on Redis too.
	client := testredis.Client(t, nil)
	p := testPolicy(t, slidelimit.SlidingLog, 1, 0)
	p.Window = 2 * time.Second
	l := newRedisLimiter(t, client, p)
	if _, err := l.AcquireAt(ctx, "t", 1, 10_000); err != nil {
		t.Fatal(err)
	}
	d, err := l.AcquireAt(ctx, "t", 1, 10_000)
	if err != nil || d.Allowed || d.RetryAfterMs != 2000 {
		t.Fatalf("%+v, %v", d, err)
	}
	if key, _ := l.Key("t"); !strings.HasSuffix(key, ":log:2000") {
		t.Fatalf("key %q", key)
	}
	l.Reset(ctx, "t")
}

// A refused connection with go-redis's retries off (MaxRetries: -1 and
// DialerRetries: 1, as docs/go.md advises) is "the connection to Redis
// failed", wrapping the dial error, well before the timeout. (With go-redis's
// defaults, 3 retries of 5 dials 100 ms apart, it outlasts the 1 s timeout.)
func TestRefusedConnectionIsReportedAtOnce(t *testing.T) {
	addr := testredis.Unreachable(t)
	for _, honours := range []bool{true, false} {
		client := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: honours,
			MaxRetries: -1, DialerRetries: 1})
		l := newRedisLimiter(t, client, testPolicy(t, slidelimit.SlidingLog, 3, 1000))
		start := time.Now()
		_, err := l.Acquire(ctx, "t")
		took := time.Since(start)
		client.Close()
		wantCode(t, err, slidelimit.ErrUnavailable, "the connection to Redis failed")
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("ContextTimeoutEnabled=%v: the dial error should be the cause: %v", honours, err)
		}
		if took > slidelimit.DefaultTimeout/4 {
			t.Fatalf("ContextTimeoutEnabled=%v: took %v, the timeout is %v", honours, took, slidelimit.DefaultTimeout)
		}
	}
}

// TestErrorFieldNamesTheField: every invalid_argument names its field, from
// core's messages and the package's own; other codes and a closed Limiter
// name none.
func TestErrorFieldNamesTheField(t *testing.T) {
	field := func(err error) string {
		t.Helper()
		var e *slidelimit.Error
		if !errors.As(err, &e) {
			t.Fatalf("%v is not an *Error", err)
		}
		return e.Field()
	}
	ok := slidelimit.Policy{Resource: "geocode", Limit: 1, Window: time.Second}
	_, err := slidelimit.NewMemory(slidelimit.Policy{Resource: "geocode", Limit: 0, Window: time.Second})
	if f := field(err); f != "limit" {
		t.Errorf("limit 0: field %q", f)
	}
	_, err = slidelimit.NewMemory(slidelimit.Policy{Resource: "geocode", Limit: 1, Window: 1500 * time.Microsecond})
	if f := field(err); f != "window" {
		t.Errorf("a sub-millisecond window: field %q", f)
	}
	_, err = slidelimit.NewMemory(ok, slidelimit.WithTimeout(0))
	if f := field(err); f != "timeout_ms" {
		t.Errorf("timeout 0: field %q", f)
	}
	_, err = slidelimit.New(nil, ok)
	if f := field(err); f != "client" {
		t.Errorf("nil client: field %q", f)
	}
	l, err := slidelimit.NewMemory(ok)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := l.AcquireAt(ctx, "", 1, 1000); field(err) != "tenant" {
		t.Errorf("empty tenant: field %q", field(err))
	}
	if _, err := l.AcquireAt(ctx, "t", 2, 1000); field(err) != "cost" {
		t.Errorf("cost over the limit: field %q", field(err))
	}
	l.Close()
	if _, err := l.AcquireAt(ctx, "t", 1, 1000); field(err) != "" {
		t.Errorf("closed limiter: field %q, want none", field(err))
	}
	if f := (&slidelimit.Error{Code: slidelimit.ErrUnavailable, Message: "x: y"}).Field(); f != "" {
		t.Errorf("unavailable: field %q, want none", f)
	}
}

// Limiters on one MemoryEngine share its keys whatever their policies, as
// Limiters on one Redis do; closing a Limiter leaves the engine open, and
// closing the engine closes every Limiter on it.
func TestLimitersOnOneMemoryEngineShareItsKeys(t *testing.T) {
	engine, err := slidelimit.NewMemoryEngine()
	if err != nil {
		t.Fatal(err)
	}
	of := func(limit uint64) *slidelimit.Limiter {
		l, err := slidelimit.NewMemory(slidelimit.Policy{Resource: "geocode", Limit: limit, Window: time.Second},
			slidelimit.WithMemoryEngine(engine))
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	ctx := context.Background()
	first, second := of(5), of(3)
	if d, err := first.AcquireAt(ctx, "t", 2, 1000); err != nil || d.Remaining != 3 {
		t.Fatalf("first: %+v, %v", d, err)
	}
	first.Close()
	if d, err := second.AcquireAt(ctx, "t", 1, 1001); err != nil || !d.Allowed || d.Remaining != 0 {
		t.Fatalf("the second Limiter must count the first's 2: %+v, %v", d, err)
	}
	if d, err := second.AcquireAt(ctx, "t", 1, 1002); err != nil || d.Allowed {
		t.Fatalf("over the limit of 3: %+v, %v", d, err)
	}
	own, err := slidelimit.NewMemory(slidelimit.Policy{Resource: "geocode", Limit: 3, Window: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	if d, err := own.AcquireAt(ctx, "t", 1, 1003); err != nil || d.Remaining != 2 {
		t.Fatalf("an engine of its own is empty: %+v, %v", d, err)
	}
	engine.Close()
	if _, err := second.AcquireAt(ctx, "t", 1, 1004); !errors.Is(err, slidelimit.ErrClosed) {
		t.Fatalf("after the engine's Close: want ErrClosed, got %v", err)
	}
	second.Close()

	_, err = slidelimit.NewMemory(slidelimit.Policy{Resource: "geocode", Limit: 1, Window: time.Second},
		slidelimit.WithMemoryEngine(nil))
	var e *slidelimit.Error
	if !errors.As(err, &e) || !errors.Is(err, slidelimit.ErrInvalidArgument) || e.Field() != "memory_engine" {
		t.Fatalf("a nil engine: want ErrInvalidArgument on memory_engine, got %v", err)
	}
}

// What an option or argument cannot work with is an ErrInvalidArgument
// naming it when the Limiter is made (or on the check that reads the clock),
// never a nil call or a nil dereference later: typed nils pass `!= nil`.
func TestOptionsThatWouldPanicAreInvalidArguments(t *testing.T) {
	p := slidelimit.Policy{Resource: "geocode", Limit: 5, Window: time.Second}
	field := func(err error) string {
		var e *slidelimit.Error
		if !errors.As(err, &e) || !errors.Is(err, slidelimit.ErrInvalidArgument) {
			return fmt.Sprintf("not an invalid argument: %v", err)
		}
		return e.Field()
	}
	made := []struct {
		name, field string
		make        func() (*slidelimit.Limiter, error)
	}{
		{"a typed nil *redis.Client", "client", func() (*slidelimit.Limiter, error) {
			return slidelimit.New((*redis.Client)(nil), p)
		}},
		{"a typed nil *redis.ClusterClient", "client", func() (*slidelimit.Limiter, error) {
			return slidelimit.New((*redis.ClusterClient)(nil), p)
		}},
		{"a typed nil *redis.Ring", "client", func() (*slidelimit.Limiter, error) {
			return slidelimit.New((*redis.Ring)(nil), p)
		}},
		{"a zero MemoryEngine", "memory_engine", func() (*slidelimit.Limiter, error) {
			return slidelimit.NewMemory(p, slidelimit.WithMemoryEngine(&slidelimit.MemoryEngine{}))
		}},
		{"a nil clock", "clock", func() (*slidelimit.Limiter, error) {
			return slidelimit.NewMemory(p, slidelimit.WithClock(nil))
		}},
		{"a nil ObserverFunc", "observer", func() (*slidelimit.Limiter, error) {
			return slidelimit.NewMemory(p, slidelimit.WithObserver(slidelimit.ObserverFunc(nil)))
		}},
		{"a nil Option", "options", func() (*slidelimit.Limiter, error) {
			return slidelimit.NewMemory(p, slidelimit.WithTimeout(time.Second), nil)
		}},
		{"a nil Option on Redis", "options", func() (*slidelimit.Limiter, error) {
			return slidelimit.New(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}), p, nil)
		}},
	}
	for _, c := range made {
		l, err := c.make()
		if f := field(err); f != c.field {
			t.Errorf("%s: want ErrInvalidArgument on %s, got %q (%v)", c.name, c.field, f, err)
		}
		if l != nil {
			t.Errorf("%s: a Limiter came back with the error", c.name)
		}
	}

	ctx := context.Background()
	for _, c := range []struct {
		name  string
		clock time.Time
	}{
		{"before 1970", time.UnixMilli(-1)},
		{"past 2^52 ms (a clock in nanoseconds)", time.UnixMilli(1 << 53)},
	} {
		l, err := slidelimit.NewMemory(p, slidelimit.WithClock(func() time.Time { return c.clock }))
		if err != nil {
			t.Fatal(err)
		}
		if d, err := l.Acquire(ctx, "t"); field(err) != "clock" {
			t.Errorf("a clock %s: want ErrInvalidArgument on clock, got %+v, %v", c.name, d, err)
		}
		l.Close()
	}
}
