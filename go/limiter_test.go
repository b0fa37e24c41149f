package slidelimit_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/slidelimit/slidelimit/go"
	"github.com/slidelimit/slidelimit/go/internal/testredis"
)

var ctx = context.Background()

// testPolicy gives each test its own resource, so tests never share keys.
func testPolicy(t *testing.T, alg slidelimit.Algorithm, limit, window uint64) slidelimit.Policy {
	name := strings.Map(func(r rune) rune {
		if r < 128 && (r == '_' || r == '.' || r == '-' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9') {
			return r
		}
		return '-'
	}, t.Name())
	if len(name) > 64 {
		name = name[len(name)-64:]
	}
	return slidelimit.Policy{Namespace: "rl-go-test", Resource: name, Algorithm: alg, Limit: limit, WindowMs: window}
}

func newRedisLimiter(t *testing.T, client redis.UniversalClient, p slidelimit.Policy, opts ...slidelimit.Option) *slidelimit.Limiter {
	t.Helper()
	l, err := slidelimit.New(client, p, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func newMemoryLimiter(t *testing.T, p slidelimit.Policy, opts ...slidelimit.Option) *slidelimit.Limiter {
	t.Helper()
	l, err := slidelimit.NewMemory(p, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func wantCode(t *testing.T, err error, code slidelimit.Code, prefix string) {
	t.Helper()
	if !errors.Is(err, code) {
		t.Fatalf("want %v, got %v", code, err)
	}
	var e *slidelimit.Error
	if !errors.As(err, &e) {
		t.Fatalf("want *slidelimit.Error, got %T", err)
	}
	if !strings.HasPrefix(e.Message, prefix) {
		t.Fatalf("message %q should start with %q", e.Message, prefix)
	}
}

func TestPolicyValidationNamesTheField(t *testing.T) {
	good := slidelimit.Policy{Namespace: "rl", Resource: "geocode", Algorithm: slidelimit.SlidingLog, Limit: 600, WindowMs: 60_000}
	cases := []struct {
		field  string
		modify func(*slidelimit.Policy)
	}{
		{"namespace:", func(p *slidelimit.Policy) { p.Namespace = "" }},
		{"resource:", func(p *slidelimit.Policy) { p.Resource = "geo:code" }},
		{"resource:", func(p *slidelimit.Policy) { p.Resource = "\xff" }},
		{"algorithm:", func(p *slidelimit.Policy) { p.Algorithm = "fixed_window" }},
		{"limit:", func(p *slidelimit.Policy) { p.Limit = 0 }},
		{"window_ms:", func(p *slidelimit.Policy) { p.WindowMs = 0 }},
		{"limit:", func(p *slidelimit.Policy) { p.Limit, p.WindowMs = 1<<30, 1<<30 }},
	}
	client := testredis.Client(t, nil)
	for _, c := range cases {
		p := good
		c.modify(&p)
		_, err := slidelimit.NewMemory(p)
		wantCode(t, err, slidelimit.ErrInvalidArgument, c.field)
		_, err = slidelimit.New(client, p)
		wantCode(t, err, slidelimit.ErrInvalidArgument, c.field)
	}
	_, err := slidelimit.New(nil, good)
	wantCode(t, err, slidelimit.ErrInvalidArgument, "client:")
	_, err = slidelimit.NewMemory(good, slidelimit.WithTimeout(0))
	wantCode(t, err, slidelimit.ErrInvalidArgument, "timeout:")
}

func TestBadCallsNeverReachRedis(t *testing.T) {
	client := testredis.Client(t, nil)
	l := newRedisLimiter(t, client, testPolicy(t, slidelimit.SlidingLog, 3, 1000))
	_, err := l.Acquire(ctx, "")
	wantCode(t, err, slidelimit.ErrInvalidArgument, "tenant:")
	_, err = l.AcquireN(ctx, "t", 0)
	wantCode(t, err, slidelimit.ErrInvalidArgument, "cost:")
	_, err = l.AcquireN(ctx, "t", 4)
	wantCode(t, err, slidelimit.ErrInvalidArgument, "cost:")
	_, err = l.AcquireAt(ctx, "t", 1, 1<<53)
	wantCode(t, err, slidelimit.ErrInvalidArgument, "now_ms:")
	_, err = l.Peek(ctx, strings.Repeat("x", 513), 1)
	wantCode(t, err, slidelimit.ErrInvalidArgument, "tenant:")
	_, err = l.Acquire(ctx, "bad\xffutf8")
	wantCode(t, err, slidelimit.ErrInvalidArgument, "tenant:")
	_, err = l.Reset(ctx, "")
	wantCode(t, err, slidelimit.ErrInvalidArgument, "tenant:")
}

func TestKeysComeFromCore(t *testing.T) {
	l := newMemoryLimiter(t, slidelimit.Policy{Namespace: "rl", Resource: "geocode", Algorithm: slidelimit.SlidingLog, Limit: 600, WindowMs: 60_000})
	key, err := l.Key("a}b")
	if err != nil || key != "rl:{geocode:a%7Db}:log:60000" {
		t.Fatalf("key %q, %v", key, err)
	}
	// Long tenants take the slow path of the key buffer.
	long := strings.Repeat("{", 512)
	key, err = l.Key(long)
	if err != nil || key != "rl:{geocode:"+strings.Repeat("%7B", 512)+"}:log:60000" {
		t.Fatalf("long key: %v", err)
	}
	if _, err := l.Acquire(ctx, long); err != nil {
		t.Fatal(err)
	}
	slot, err := slidelimit.KeySlot("foo")
	if err != nil || slot != 12182 {
		t.Fatalf("slot %d, %v", slot, err)
	}
	if slidelimit.Version() == "" {
		t.Fatal("empty version")
	}
}

// The same calls at the same caller times give the same decisions on Redis
// and in core's memory engine, for both algorithms.
func TestRedisAgreesWithMemory(t *testing.T) {
	client := testredis.Client(t, nil)
	for _, alg := range []slidelimit.Algorithm{slidelimit.SlidingLog, slidelimit.SlidingCounter} {
		t.Run(string(alg), func(t *testing.T) {
			p := testPolicy(t, alg, 5, 1000)
			onRedis := newRedisLimiter(t, client, p)
			inMemory := newMemoryLimiter(t, p)
			rng := rand.New(rand.NewSource(7))
			now := uint64(1_700_000_000_000)
			tenants := []string{"a", "b{c}", "zoë 東京"}
			for _, tenant := range tenants {
				if _, err := onRedis.Reset(ctx, tenant); err != nil {
					t.Fatal(err)
				}
			}
			allowed := 0
			for i := 0; i < 400; i++ {
				now += uint64(rng.Intn(120))
				tenant := tenants[rng.Intn(len(tenants))]
				cost := uint64(1 + rng.Intn(3))
				peek := rng.Intn(5) == 0
				var got, want slidelimit.Decision
				var errGot, errWant error
				if peek {
					got, errGot = onRedis.PeekAt(ctx, tenant, cost, now)
					want, errWant = inMemory.PeekAt(ctx, tenant, cost, now)
				} else {
					got, errGot = onRedis.AcquireAt(ctx, tenant, cost, now)
					want, errWant = inMemory.AcquireAt(ctx, tenant, cost, now)
				}
				if errGot != nil || errWant != nil {
					t.Fatalf("step %d: %v / %v", i, errGot, errWant)
				}
				if got != want {
					t.Fatalf("step %d (%s cost %d at %d): redis %+v, memory %+v", i, tenant, cost, now, got, want)
				}
				if got.Allowed {
					allowed++
				}
			}
			if allowed == 0 || allowed == 400 {
				t.Fatalf("the sequence should both allow and deny, allowed %d", allowed)
			}
		})
	}
}

func TestServerTimeIsTheDefault(t *testing.T) {
	client := testredis.Client(t, nil)
	l := newRedisLimiter(t, client, testPolicy(t, slidelimit.SlidingLog, 2, 60_000))
	if _, err := l.Reset(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	before := time.Now()
	d, err := l.Acquire(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	at := time.UnixMilli(int64(d.NowMs))
	if at.Before(before.Add(-5*time.Second)) || at.After(time.Now().Add(5*time.Second)) {
		t.Fatalf("decision time %v is not Redis's clock (now %v)", at, before)
	}
	if !d.Allowed || d.Remaining != 1 || d.ResetAfter() != time.Minute {
		t.Fatalf("%+v", d)
	}
	if d, err = l.AcquireN(ctx, "t", 2); err != nil || d.Allowed || d.RetryAfter() <= 0 {
		t.Fatalf("%+v %v", d, err)
	}
	if d, err = l.Peek(ctx, "t", 1); err != nil || !d.Allowed || d.Remaining != 0 {
		t.Fatalf("peek %+v %v", d, err)
	}
	removed, err := l.Reset(ctx, "t")
	if err != nil || !removed {
		t.Fatalf("reset %v %v", removed, err)
	}
	if removed, err = l.Reset(ctx, "t"); err != nil || removed {
		t.Fatalf("second reset %v %v", removed, err)
	}
}

func TestNoScriptFallsBackToEval(t *testing.T) {
	client := testredis.Client(t, nil)
	l := newRedisLimiter(t, client, testPolicy(t, slidelimit.SlidingCounter, 10, 1000))
	if err := client.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	d, err := l.AcquireAt(ctx, "t", 1, 5000)
	if err != nil || !d.Allowed {
		t.Fatalf("%+v %v", d, err)
	}
	// EVAL cached the script, and it ran exactly once (remaining 9, not 8).
	if d.Remaining != 9 {
		t.Fatalf("remaining %d", d.Remaining)
	}
	if d, err = l.AcquireAt(ctx, "t", 1, 5000); err != nil || d.Remaining != 8 {
		t.Fatalf("%+v %v", d, err)
	}
	calls := client.Info(ctx, "commandstats").Val()
	if !strings.Contains(calls, "cmdstat_eval:") {
		t.Fatalf("EVAL was never sent:\n%s", calls)
	}
}

func TestWrongTypeIsReported(t *testing.T) {
	client := testredis.Client(t, nil)
	l := newRedisLimiter(t, client, testPolicy(t, slidelimit.SlidingLog, 3, 1000))
	key, err := l.Key("t")
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Set(ctx, key, "not a log", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	_, err = l.Acquire(ctx, "t")
	wantCode(t, err, slidelimit.ErrWrongType, "")
	var redisErr redis.Error
	if !errors.As(err, &redisErr) {
		t.Fatalf("the go-redis error should be wrapped: %v", err)
	}
	client.Del(ctx, key)
}

func TestUnreachableRedisIsUnavailable(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: testredis.Unreachable(t), MaxRetries: -1})
	defer client.Close()
	l := newRedisLimiter(t, client, testPolicy(t, slidelimit.SlidingLog, 3, 1000))
	_, err := l.Acquire(ctx, "t")
	wantCode(t, err, slidelimit.ErrUnavailable, "")
	_, err = l.Reset(ctx, "t")
	wantCode(t, err, slidelimit.ErrUnavailable, "")
}

// A Redis that stops answering is unavailable after the timeout, whether or
// not the client honours context deadlines itself.
func TestSlowRedisTimesOut(t *testing.T) {
	addr := testredis.Start(t)
	admin := redis.NewClient(&redis.Options{Addr: addr})
	defer admin.Close()
	for _, honours := range []bool{true, false} {
		t.Run(fmt.Sprintf("ContextTimeoutEnabled=%v", honours), func(t *testing.T) {
			client := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: honours, MaxRetries: -1})
			defer client.Close()
			l := newRedisLimiter(t, client, testPolicy(t, slidelimit.SlidingLog, 3, 1000), slidelimit.WithTimeout(150*time.Millisecond))
			if _, err := l.Acquire(ctx, "t"); err != nil {
				t.Fatal(err)
			}
			if err := admin.Do(ctx, "CLIENT", "PAUSE", "1500", "ALL").Err(); err != nil {
				t.Fatal(err)
			}
			defer admin.Do(ctx, "CLIENT", "UNPAUSE")
			start := time.Now()
			_, err := l.Acquire(ctx, "t")
			took := time.Since(start)
			if took > time.Second {
				t.Fatalf("took %v, the timeout is 150ms", took)
			}
			wantCode(t, err, slidelimit.ErrUnavailable, "Redis did not answer")
			// The deadline ends the wait: go-redis reports it as a socket
			// timeout when it honours contexts, the Limiter as the context's.
			var netErr net.Error
			if !errors.Is(err, context.DeadlineExceeded) && !(errors.As(err, &netErr) && netErr.Timeout()) {
				t.Fatalf("the cause should be the deadline: %v", err)
			}
		})
	}
}

func TestCanceledContextIsUnavailable(t *testing.T) {
	client := testredis.Client(t, nil)
	l := newRedisLimiter(t, client, testPolicy(t, slidelimit.SlidingLog, 3, 1000))
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	_, err := l.Acquire(canceled, "t")
	wantCode(t, err, slidelimit.ErrUnavailable, "")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("%v", err)
	}
}

func TestCloseIsSafeTwice(t *testing.T) {
	client := testredis.Client(t, nil)
	p := testPolicy(t, slidelimit.SlidingLog, 3, 1000)
	for _, l := range []*slidelimit.Limiter{newRedisLimiter(t, client, p), newMemoryLimiter(t, p)} {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := l.Acquire(ctx, "t"); !errors.Is(err, slidelimit.ErrClosed) {
			t.Fatalf("want ErrClosed, got %v", err)
		}
		if _, err := l.Reset(ctx, "t"); !errors.Is(err, slidelimit.ErrClosed) {
			t.Fatalf("want ErrClosed, got %v", err)
		}
	}
}

// Limiters dropped without Close are released by their finalizers; the
// process neither crashes nor keeps them (run with GODEBUG=cgocheck=1 too).
func TestFinalizersReleaseDroppedLimiters(t *testing.T) {
	p := testPolicy(t, slidelimit.SlidingCounter, 3, 1000)
	for i := 0; i < 200; i++ {
		l, err := slidelimit.NewMemory(p)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := l.AcquireAt(ctx, "t", 1, 1); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.GC()
}

// Many goroutines on one budget: exactly `limit` permits pass.
func TestConcurrentAcquiresShareOneBudget(t *testing.T) {
	client := testredis.Client(t, func(o *redis.Options) { o.PoolSize = 32 })
	l := newRedisLimiter(t, client, testPolicy(t, slidelimit.SlidingLog, 100, 60_000))
	if _, err := l.Reset(ctx, "shared"); err != nil {
		t.Fatal(err)
	}
	var allowed atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				d, err := l.Acquire(ctx, "shared")
				if err != nil {
					errs <- err
					return
				}
				if d.Allowed {
					allowed.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if allowed.Load() != 100 {
		t.Fatalf("allowed %d of 320, limit 100", allowed.Load())
	}
}

func TestMetrics(t *testing.T) {
	for _, tenantLabel := range []bool{false, true} {
		reg := prometheus.NewRegistry()
		m, err := slidelimit.NewMetrics(reg, slidelimit.MetricsOptions{TenantLabel: tenantLabel})
		if err != nil {
			t.Fatal(err)
		}
		p := testPolicy(t, slidelimit.SlidingLog, 2, 1000)
		l := newMemoryLimiter(t, p, slidelimit.WithMetrics(m))
		for i := 0; i < 5; i++ {
			if _, err := l.AcquireAt(ctx, "t", 1, 1000); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := l.PeekAt(ctx, "t", 1, 1000); err != nil { // peeks are not counted
			t.Fatal(err)
		}
		wantLabels := 1
		if tenantLabel {
			wantLabels = 2
		}
		if got := counterValue(t, reg, "ratelimit_allowed_total", wantLabels); got != 2 {
			t.Fatalf("allowed %v", got)
		}
		if got := counterValue(t, reg, "ratelimit_denied_total", wantLabels); got != 3 {
			t.Fatalf("denied %v", got)
		}
		expected := fmt.Sprintf(`
# HELP ratelimit_wait_seconds retry_after handed to denied callers, in seconds.
# TYPE ratelimit_wait_seconds histogram
ratelimit_wait_seconds_bucket{resource=%[1]q,le="0.001"} 0
ratelimit_wait_seconds_bucket{resource=%[1]q,le="0.005"} 0
ratelimit_wait_seconds_bucket{resource=%[1]q,le="0.01"} 0
ratelimit_wait_seconds_bucket{resource=%[1]q,le="0.05"} 0
ratelimit_wait_seconds_bucket{resource=%[1]q,le="0.1"} 0
ratelimit_wait_seconds_bucket{resource=%[1]q,le="0.5"} 0
ratelimit_wait_seconds_bucket{resource=%[1]q,le="1"} 3
ratelimit_wait_seconds_bucket{resource=%[1]q,le="5"} 3
ratelimit_wait_seconds_bucket{resource=%[1]q,le="10"} 3
ratelimit_wait_seconds_bucket{resource=%[1]q,le="30"} 3
ratelimit_wait_seconds_bucket{resource=%[1]q,le="60"} 3
ratelimit_wait_seconds_bucket{resource=%[1]q,le="600"} 3
ratelimit_wait_seconds_bucket{resource=%[1]q,le="+Inf"} 3
ratelimit_wait_seconds_sum{resource=%[1]q} 3
ratelimit_wait_seconds_count{resource=%[1]q} 3
`, p.Resource)
		if err := testutil.GatherAndCompare(reg, strings.NewReader(expected), "ratelimit_wait_seconds"); err != nil {
			t.Fatal(err)
		}
	}
}

// counterValue is the value of the one series of a counter family, whose
// label count is checked too.
func counterValue(t *testing.T, reg *prometheus.Registry, name string, labels int) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		if len(f.Metric) != 1 || len(f.Metric[0].Label) != labels {
			t.Fatalf("%s: %v", name, f.Metric)
		}
		return f.Metric[0].GetCounter().GetValue()
	}
	t.Fatalf("%s not registered", name)
	return 0
}

func TestMemoryEngineUsesItsClock(t *testing.T) {
	now := time.UnixMilli(1_000_000)
	l := newMemoryLimiter(t, testPolicy(t, slidelimit.SlidingLog, 1, 1000), slidelimit.WithClock(func() time.Time { return now }))
	if d, err := l.Acquire(ctx, "t"); err != nil || !d.Allowed || d.NowMs != 1_000_000 {
		t.Fatalf("%+v %v", d, err)
	}
	now = now.Add(400 * time.Millisecond)
	if d, err := l.Acquire(ctx, "t"); err != nil || d.Allowed || d.RetryAfterMs != 600 {
		t.Fatalf("%+v %v", d, err)
	}
	now = now.Add(600 * time.Millisecond)
	if d, err := l.Acquire(ctx, "t"); err != nil || !d.Allowed {
		t.Fatalf("%+v %v", d, err)
	}
	removed, err := l.Reset(ctx, "t")
	if err != nil || !removed {
		t.Fatalf("%v %v", removed, err)
	}
}

func TestCodesAreCoreNames(t *testing.T) {
	want := map[slidelimit.Code]string{
		slidelimit.ErrInvalidArgument:  "invalid_argument",
		slidelimit.ErrUnavailable:      "unavailable",
		slidelimit.ErrScriptError:      "script_error",
		slidelimit.ErrWrongType:        "wrong_type",
		slidelimit.ErrMalformedReply:   "malformed_reply",
		slidelimit.ErrPermissionDenied: "permission_denied",
		slidelimit.ErrInternal:         "internal",
	}
	for code, name := range want {
		if code.String() != name {
			t.Errorf("%d: %q, want %q", uint32(code), code.String(), name)
		}
	}
	err := fmt.Errorf("wrapped: %w", &slidelimit.Error{Code: slidelimit.ErrUnavailable, Message: "x"})
	if !errors.Is(err, slidelimit.ErrUnavailable) || errors.Is(err, slidelimit.ErrInternal) {
		t.Fatal("errors.Is must match exactly the error's code")
	}
	if code, ok := slidelimit.CodeOf(err); !ok || code != slidelimit.ErrUnavailable {
		t.Fatal("CodeOf")
	}
	if _, ok := slidelimit.CodeOf(errors.New("other")); ok {
		t.Fatal("CodeOf of a foreign error")
	}
}
