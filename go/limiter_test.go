package slidelimit_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
		{"namespace:", func(p *slidelimit.Policy) { p.Namespace = "rl:v2" }},
		{"namespace:", func(p *slidelimit.Policy) { p.Namespace = strings.Repeat("n", 65) }},
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
	wantCode(t, err, slidelimit.ErrInvalidArgument, "timeout_ms:")
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

// Acquire keeps core's call by tenant (two generations of 2,048): every
// decision stays the one a fresh call gives, every bad input is still
// refused, a tenant that fell out is built again, and a closed Limiter
// never reaches Redis with a kept call.
func TestKeptCallsDecideAsCoreBuilds(t *testing.T) {
	client := testredis.Client(t, nil)
	p := testPolicy(t, slidelimit.SlidingLog, 2, 60_000)
	// Its own namespace: go test runs this package three times on one Redis.
	p.Namespace = fmt.Sprintf("rl-kept-%d", time.Now().UnixNano())
	l := newRedisLimiter(t, client, p)
	want := func(d slidelimit.Decision, err error, allowed bool, remaining uint64) {
		t.Helper()
		if err != nil || d.Allowed != allowed || d.Remaining != remaining {
			t.Fatalf("got %+v, %v; want allowed %v, remaining %d", d, err, allowed, remaining)
		}
	}
	d, err := l.Acquire(ctx, "t-0")
	want(d, err, true, 1)
	_, err = l.AcquireN(ctx, "t-0", 0)
	wantCode(t, err, slidelimit.ErrInvalidArgument, "cost:")
	_, err = l.AcquireN(ctx, "t-0", 3)
	wantCode(t, err, slidelimit.ErrInvalidArgument, "cost:")
	for range 2 {
		_, err = l.Acquire(ctx, "")
		wantCode(t, err, slidelimit.ErrInvalidArgument, "tenant:")
	}
	const tenants = 2*2048 + 2
	for i := 1; i < tenants; i++ {
		d, err := l.Acquire(ctx, fmt.Sprintf("t-%d", i))
		want(d, err, true, 1)
	}
	d, err = l.Acquire(ctx, "t-0")
	want(d, err, true, 0)
	d, err = l.AcquireN(ctx, "t-1", 1)
	want(d, err, true, 0)
	d, err = l.AcquireN(ctx, "t-2", 2)
	want(d, err, false, 1)
	d, err = l.Peek(ctx, "t-3", 1)
	want(d, err, true, 0)

	calls := evalshaCalls(t, client)
	_ = l.Close()
	// t-1's call is kept (the young generation holds t-4096, t-4097, t-0
	// and t-1), and it has no cached denial.
	if _, err := l.Acquire(ctx, "t-1"); !errors.Is(err, slidelimit.ErrClosed) {
		t.Fatalf("a closed Limiter with the call kept: want ErrClosed, got %v", err)
	}
	if got := evalshaCalls(t, client); got != calls {
		t.Fatalf("a closed Limiter reached Redis: EVALSHA calls %d, then %d", calls, got)
	}
}

func evalshaCalls(t *testing.T, client redis.UniversalClient) int {
	t.Helper()
	info, err := client.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_evalsha:calls="); ok {
			n, err := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	return 0
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
	// A stale prebuilt archive (go/lib) would report another core version.
	if v := slidelimit.CoreVersion(); v != slidelimit.Version {
		t.Fatalf("the package runs slidelimit-core %q, but Version is %q", v, slidelimit.Version)
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
	// A server of its own: packages' tests run in parallel on the shared one,
	// and their EVALs and EVALSHAs would count here (and this flush, there).
	client := testredis.StartServer(t).Client()
	l := newRedisLimiter(t, client, testPolicy(t, slidelimit.SlidingCounter, 10, 1000))
	if err := client.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	evalsBefore, evalShasBefore := commandCalls(t, client, "eval"), commandCalls(t, client, "evalsha")
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
	// EVALSHA (NOSCRIPT), EVAL, then EVALSHA of the cached script.
	evals, evalShas := commandCalls(t, client, "eval")-evalsBefore, commandCalls(t, client, "evalsha")-evalShasBefore
	if evals != 1 || evalShas != 2 {
		t.Fatalf("%d EVAL and %d EVALSHA sent, want 1 and 2", evals, evalShas)
	}
}

// commandCalls is how many times the server has run cmd (INFO commandstats;
// failed calls, such as a NOSCRIPT, included).
func commandCalls(t *testing.T, client *redis.Client, cmd string) int {
	t.Helper()
	stats, err := client.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(stats, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":calls=")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(strings.SplitN(rest, ",", 2)[0])
		if err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		return n
	}
	return 0
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

// A Redis that stops answering is unavailable after the timeout (or the
// caller's shorter deadline), whether or not the client honours context
// deadlines itself.
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
			// A caller's deadline before the Limiter's timeout is named as
			// the caller's, not as Redis missing the timeout.
			short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			defer cancel()
			_, err = l.Acquire(short, "t")
			wantCode(t, err, slidelimit.ErrUnavailable, "the caller's context deadline passed before Redis answered")
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("the cause should be the caller's deadline: %v", err)
			}
			// A cancel with no deadline at all ends the wait too, though
			// go-redis reads only deadlines from a context (River's
			// StopAndCancel cancels so).
			long := newRedisLimiter(t, client, testPolicy(t, slidelimit.SlidingLog, 3, 1000), slidelimit.WithTimeout(time.Second))
			canceled, cancel := context.WithCancel(ctx)
			time.AfterFunc(50*time.Millisecond, cancel)
			start = time.Now()
			_, err = long.Acquire(canceled, "t")
			if took := time.Since(start); took > 500*time.Millisecond {
				t.Fatalf("a cancel after 50ms returned after %v, the timeout is 1s", took)
			}
			wantCode(t, err, slidelimit.ErrUnavailable, "the caller's context was canceled before Redis answered")
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("the cause should be the caller's cancel: %v", err)
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

// A context the caller has ended stops a check before anything is sent or
// recorded, in memory as on Redis; a nil one is refused, never a panic.
func TestEndedOrNilContext(t *testing.T) {
	p := testPolicy(t, slidelimit.SlidingLog, 3, 1000)
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	expired, cancelExpired := context.WithDeadline(ctx, time.Now().Add(-time.Second))
	defer cancelExpired()
	limiters := map[string]*slidelimit.Limiter{
		"redis":  newRedisLimiter(t, testredis.Client(t, nil), p),
		"memory": newMemoryLimiter(t, p),
	}
	for name, l := range limiters {
		t.Run(name, func(t *testing.T) {
			for _, c := range []struct {
				ctx     context.Context
				cause   error
				message string
			}{
				{canceled, context.Canceled, "the caller's context was canceled"},
				{expired, context.DeadlineExceeded, "the caller's context deadline passed"},
			} {
				_, err := l.Acquire(c.ctx, "ended")
				wantCode(t, err, slidelimit.ErrUnavailable, c.message)
				if !errors.Is(err, c.cause) {
					t.Fatalf("the cause should be %v: %v", c.cause, err)
				}
				_, err = l.Reset(c.ctx, "ended")
				wantCode(t, err, slidelimit.ErrUnavailable, c.message)
			}
			// Nothing was recorded.
			d, err := l.Peek(ctx, "ended", 3)
			if err != nil || !d.Allowed {
				t.Fatalf("after ended contexts: %+v, %v", d, err)
			}
			// A nil context is the bad input under test.
			_, err = l.Acquire(nil, "ended")
			wantCode(t, err, slidelimit.ErrInvalidArgument, "ctx: must not be nil")
			if field := err.(*slidelimit.Error).Field(); field != "ctx" {
				t.Fatalf("field %q", field)
			}
			_, err = l.Reset(nil, "ended")
			wantCode(t, err, slidelimit.ErrInvalidArgument, "ctx: must not be nil")
		})
	}
}

// A nil *Limiter, a zero Limiter{} and a zero MemoryEngine{} are no
// constructor's result; each method says so instead of dereferencing nil.
func TestUnmadeLimiterIsAnError(t *testing.T) {
	for name, l := range map[string]*slidelimit.Limiter{"nil": nil, "zero": {}} {
		t.Run(name, func(t *testing.T) {
			const message = "limiter: must be made by New or NewMemory"
			calls := map[string]func() error{
				"Acquire":   func() error { _, err := l.Acquire(ctx, "t"); return err },
				"AcquireN":  func() error { _, err := l.AcquireN(ctx, "t", 1); return err },
				"AcquireAt": func() error { _, err := l.AcquireAt(ctx, "t", 1, 1000); return err },
				"Peek":      func() error { _, err := l.Peek(ctx, "t", 1); return err },
				"PeekAt":    func() error { _, err := l.PeekAt(ctx, "t", 1, 1000); return err },
				"Reset":     func() error { _, err := l.Reset(ctx, "t"); return err },
				"Key":       func() error { _, err := l.Key("t"); return err },
				"Keys":      func() error { _, err := l.Keys("t"); return err },
				"Close":     l.Close,
			}
			for method, call := range calls {
				err := call()
				wantCode(t, err, slidelimit.ErrInvalidArgument, message)
				if field := err.(*slidelimit.Error).Field(); field != "limiter" {
					t.Fatalf("%s: field %q", method, field)
				}
			}
			if p := l.Policy(); p.Resource != "" || p.Limits != nil {
				t.Fatalf("Policy of an unmade limiter: %+v", p)
			}
		})
	}
	for name, e := range map[string]*slidelimit.MemoryEngine{"nil": nil, "zero": {}} {
		err := e.Close()
		wantCode(t, err, slidelimit.ErrInvalidArgument, "memory_engine: must be made by NewMemoryEngine")
		if field := err.(*slidelimit.Error).Field(); field != "memory_engine" {
			t.Fatalf("%s engine: field %q", name, field)
		}
	}
}

func TestCloseIsSafeTwice(t *testing.T) {
	client := testredis.Client(t, nil)
	p := testPolicy(t, slidelimit.SlidingLog, 3, 1000)
	base := settledHandles(t)
	// A Limiter on Redis holds a policy and a deny cache; one in memory a
	// policy and an engine.
	limiters := []struct {
		l       *slidelimit.Limiter
		handles int64
	}{{newRedisLimiter(t, client, p), 2}, {newMemoryLimiter(t, p), 2}}
	live := base + 4
	if got := slidelimit.LiveHandles(); got != live {
		t.Fatalf("%d live C handles, want %d", got, live)
	}
	for i, c := range limiters {
		l := c.l
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		// Close frees at once, not at some later GC.
		live -= c.handles
		if got := slidelimit.LiveHandles(); got != live {
			t.Fatalf("limiter %d: %d live C handles after Close, want %d", i, got, live)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		if got := slidelimit.LiveHandles(); got != live {
			t.Fatalf("limiter %d: a second Close changed the count to %d, want %d", i, got, live)
		}
		if _, err := l.Acquire(ctx, "t"); !errors.Is(err, slidelimit.ErrClosed) {
			t.Fatalf("want ErrClosed, got %v", err)
		}
		if _, err := l.Reset(ctx, "t"); !errors.Is(err, slidelimit.ErrClosed) {
			t.Fatalf("want ErrClosed, got %v", err)
		}
		if _, err := l.Key("t"); !errors.Is(err, slidelimit.ErrClosed) {
			t.Fatalf("want ErrClosed, got %v", err)
		}
	}
}

// settledHandles runs the GC until the finalizers of Limiters dropped
// earlier (by other tests) have run, and returns the live C handle count.
func settledHandles(t *testing.T) int64 {
	t.Helper()
	prev := int64(-1)
	for i := 0; i < 100; i++ {
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
		n := slidelimit.LiveHandles()
		if n == prev {
			return n
		}
		prev = n
	}
	t.Fatalf("the live C handle count never settled (last %d)", prev)
	return 0
}

// Limiters dropped without Close are released by their finalizers: the count
// of live C handles, up by 400 while 200 Limiters exist, comes back down once
// they are dropped. runtime.GC does not wait for finalizers, so the test
// polls, up to a deadline. `make test-go` runs it with GODEBUG=cgocheck=1 too.
func TestFinalizersReleaseDroppedLimiters(t *testing.T) {
	client := testredis.Client(t, nil)
	p := testPolicy(t, slidelimit.SlidingCounter, 3, 1000)
	base := settledHandles(t)
	func() {
		limiters := make([]*slidelimit.Limiter, 0, 200)
		for i := 0; i < 100; i++ {
			inMemory, err := slidelimit.NewMemory(p)
			if err != nil {
				t.Fatal(err)
			}
			onRedis, err := slidelimit.New(client, p)
			if err != nil {
				t.Fatal(err)
			}
			for _, l := range []*slidelimit.Limiter{inMemory, onRedis} {
				if _, err := l.AcquireAt(ctx, "t", 1, 1); err != nil {
					t.Fatal(err)
				}
			}
			limiters = append(limiters, inMemory, onRedis)
		}
		// 100 in memory (a policy and an engine each), 100 on Redis (a
		// policy and a deny cache each).
		if got, want := slidelimit.LiveHandles(), base+400; got != want {
			t.Fatalf("%d live C handles with 200 Limiters, want %d", got, want)
		}
		runtime.KeepAlive(limiters)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		n := slidelimit.LiveHandles()
		if n <= base {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d live C handles 10s after dropping 200 Limiters, want %d: finalizers did not free them", n, base)
		}
		time.Sleep(10 * time.Millisecond)
	}
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

func TestMemoryEngineExpiresKeysOnItsClockNotCallerTime(t *testing.T) {
	// Redis expires a key by PEXPIRE on its own clock; caller time is only the
	// script's notion of now. So neither a peek at a far caller time nor other
	// tenants' calls may make the engine forget A (limit 1 per 60 s): the
	// answers are Redis's, on the real clock (WithClock left at time.Now).
	want := map[slidelimit.Algorithm]slidelimit.Decision{
		slidelimit.SlidingLog:     {Allowed: false, Remaining: 0, RetryAfterMs: 59_999, ResetAfterMs: 59_999, NowMs: 1001},
		slidelimit.SlidingCounter: {Allowed: false, Remaining: 0, RetryAfterMs: 118_999, ResetAfterMs: 118_999, NowMs: 1001},
	}
	for _, alg := range []slidelimit.Algorithm{slidelimit.SlidingLog, slidelimit.SlidingCounter} {
		t.Run(string(alg), func(t *testing.T) {
			p := testPolicy(t, alg, 1, 60_000)
			// A peek of A itself, far ahead of A's permit.
			l := newMemoryLimiter(t, p)
			if d, err := l.AcquireAt(ctx, "A", 1, 1000); err != nil || !d.Allowed {
				t.Fatalf("%+v %v", d, err)
			}
			if d, err := l.PeekAt(ctx, "A", 1, 1_000_000); err != nil || !d.Allowed {
				t.Fatalf("%+v %v", d, err)
			}
			if d, err := l.AcquireAt(ctx, "A", 1, 1001); err != nil || d != want[alg] {
				t.Fatalf("after a far peek: %+v %v, want %+v", d, err, want[alg])
			}
			// 5,000 peeks on other tenants, far ahead, span a sweep.
			l = newMemoryLimiter(t, p)
			if d, err := l.AcquireAt(ctx, "A", 1, 1000); err != nil || !d.Allowed {
				t.Fatalf("%+v %v", d, err)
			}
			for i := 0; i < 5000; i++ {
				if _, err := l.PeekAt(ctx, fmt.Sprintf("other-%d", i), 1, 5_000_000); err != nil {
					t.Fatal(err)
				}
			}
			if d, err := l.AcquireAt(ctx, "A", 1, 1001); err != nil || d != want[alg] {
				t.Fatalf("after other tenants' peeks: %+v %v, want %+v", d, err, want[alg])
			}
		})
	}
}

func TestMemoryEngineKeyExpiresOnTheClock(t *testing.T) {
	// Caller time 1000, clock 1,000,000: the key lives through clock + 120 s,
	// 60 s until nothing counts plus one window for caller time
	// (docs/protocol.md, "Key expiry and caller clocks"; Redis keeps a key
	// through its expiry's millisecond), then is gone.
	clock := time.UnixMilli(1_000_000)
	l := newMemoryLimiter(t, testPolicy(t, slidelimit.SlidingLog, 1, 60_000), slidelimit.WithClock(func() time.Time { return clock }))
	if d, err := l.AcquireAt(ctx, "A", 1, 1000); err != nil || !d.Allowed {
		t.Fatalf("%+v %v", d, err)
	}
	clock = clock.Add(120_000 * time.Millisecond)
	if d, err := l.PeekAt(ctx, "A", 1, 1001); err != nil || d.Allowed {
		t.Fatalf("at the expiry: %+v %v", d, err)
	}
	clock = clock.Add(time.Millisecond)
	if d, err := l.PeekAt(ctx, "A", 1, 1001); err != nil || !d.Allowed {
		t.Fatalf("after the expiry: %+v %v", d, err)
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

func TestTimeoutFollowsCoresRule(t *testing.T) {
	// One rule in every binding: a check always has a deadline of at least
	// 1 ms (and at most 2^31 - 1 ms); anything else names timeout_ms.
	good := testPolicy(t, slidelimit.SlidingLog, 1, 1000)
	client := testredis.Client(t, nil)
	for _, d := range []time.Duration{0, -time.Second, 500 * time.Microsecond, 1500 * time.Microsecond,
		2*time.Second + 1, (1 << 31) * time.Millisecond} {
		_, err := slidelimit.New(client, good, slidelimit.WithTimeout(d))
		wantCode(t, err, slidelimit.ErrInvalidArgument, "timeout_ms:")
		_, err = slidelimit.NewMemory(good, slidelimit.WithTimeout(d))
		wantCode(t, err, slidelimit.ErrInvalidArgument, "timeout_ms:")
	}
	var e *slidelimit.Error
	_, err := slidelimit.New(client, good, slidelimit.WithTimeout(0))
	if !errors.As(err, &e) || !strings.Contains(e.Message, "at least 1 ms") {
		t.Fatalf("message of a zero timeout: %v", err)
	}
	_ = newRedisLimiter(t, client, good, slidelimit.WithTimeout(time.Millisecond))
	l := newRedisLimiter(t, client, good, slidelimit.WithTimeout((1<<31-1)*time.Millisecond))
	if d, err := l.Acquire(ctx, "t"); err != nil || !d.Allowed {
		t.Fatalf("%+v %v", d, err)
	}
}

func TestRESP2AndRESP3ClientsShareOneBudget(t *testing.T) {
	// go-redis v9 speaks RESP3 by default (Protocol 3, HELLO 3) and RESP2 on
	// request; the script's reply must decode to the same decision either way,
	// on the same key, with caller time and with Redis TIME.
	p := testPolicy(t, slidelimit.SlidingLog, 3, 60_000)
	clients := map[int]*redis.Client{}
	for _, protocol := range []int{2, 3} {
		clients[protocol] = testredis.Client(t, func(o *redis.Options) { o.Protocol = protocol })
		info, err := clients[protocol].Do(ctx, "CLIENT", "INFO").Text()
		if err != nil || !strings.Contains(" "+strings.TrimSpace(info)+" ", fmt.Sprintf(" resp=%d ", protocol)) {
			t.Fatalf("protocol %d not in use: %q %v", protocol, info, err)
		}
	}
	resp2 := newRedisLimiter(t, clients[2], p)
	resp3 := newRedisLimiter(t, clients[3], p)
	// `make test-go` runs the suite twice on one Redis, within the window.
	for _, tenant := range []string{"t", "server-time"} {
		if _, err := resp3.Reset(ctx, tenant); err != nil {
			t.Fatal(err)
		}
	}
	var last slidelimit.Decision
	for i, l := range []*slidelimit.Limiter{resp3, resp2, resp3} {
		d, err := l.AcquireAt(ctx, "t", 1, 1_000_000+uint64(i))
		if err != nil {
			t.Fatal(err)
		}
		if !d.Allowed || d.Remaining != uint64(2-i) {
			t.Fatalf("step %d: %+v", i, d)
		}
		last = d
	}
	for _, l := range []*slidelimit.Limiter{resp2, resp3} {
		d, err := l.AcquireAt(ctx, "t", 1, 1_000_010)
		if err != nil {
			t.Fatal(err)
		}
		want := slidelimit.Decision{Allowed: false, Remaining: 0, RetryAfterMs: 59_990, ResetAfterMs: 59_992, NowMs: 1_000_010}
		if d != want {
			t.Fatalf("denied: %+v, want %+v (last allowed %+v)", d, want, last)
		}
	}
	for i, l := range []*slidelimit.Limiter{resp2, resp3} {
		if d, err := l.Acquire(ctx, "server-time"); err != nil || !d.Allowed {
			t.Fatalf("server time: %+v %v", d, err)
		}
		if d, err := l.Peek(ctx, "server-time", 1); err != nil || d.Remaining != uint64(1-i) {
			t.Fatalf("peek %d: %+v %v", i, d, err)
		}
	}
	if removed, err := resp3.Reset(ctx, "t"); err != nil || !removed {
		t.Fatalf("reset over RESP3: %v %v", removed, err)
	}
}

// A bucketed window of one bucket holds a permit until the end of the next
// window, so its hints reach twice the window: past the longest Duration
// (about 292 years) for a window of 200 years. The Durations saturate there;
// the millisecond fields stay exact.
func TestRetryAndResetSaturateAtTheLongestDuration(t *testing.T) {
	const year = 365 * 24 * 3600 * 1000
	const window = 200 * year
	l, err := slidelimit.NewMemory(slidelimit.Policy{
		Resource: "lifetime", Algorithm: slidelimit.BucketedWindow, Limit: 1, WindowMs: window, Buckets: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	d, err := l.AcquireAt(ctx, "t", 1, 0)
	if err != nil || !d.Allowed || d.ResetAfterMs != 2*window-1 || d.ResetAfter() != math.MaxInt64 {
		t.Fatalf("%+v (reset %v) %v", d, d.ResetAfter(), err)
	}
	d, err = l.AcquireAt(ctx, "t", 1, 1)
	if err != nil || d.Allowed || d.RetryAfterMs != 2*window-2 || d.RetryAfter() != math.MaxInt64 {
		t.Fatalf("%+v (retry %v) %v", d, d.RetryAfter(), err)
	}
	// Up to the longest Duration's milliseconds, exact.
	longest := uint64(math.MaxInt64 / int64(time.Millisecond))
	for _, ms := range []uint64{0, 1, 60_000, longest} {
		d := slidelimit.Decision{RetryAfterMs: ms, ResetAfterMs: ms}
		want := time.Duration(ms) * time.Millisecond
		if d.RetryAfter() != want || d.ResetAfter() != want {
			t.Errorf("%d ms: %v and %v, want %v", ms, d.RetryAfter(), d.ResetAfter(), want)
		}
	}
	for _, ms := range []uint64{longest + 1, 1 << 53} {
		d := slidelimit.Decision{RetryAfterMs: ms, ResetAfterMs: ms}
		if d.RetryAfter() != math.MaxInt64 || d.ResetAfter() != math.MaxInt64 {
			t.Errorf("%d ms: %v and %v, want the longest Duration", ms, d.RetryAfter(), d.ResetAfter())
		}
	}
}
