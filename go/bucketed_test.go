package slidelimit_test

import (
	"errors"
	"math/rand"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/slidelimit/slidelimit/go"
	"github.com/slidelimit/slidelimit/go/internal/testredis"
)

// replay runs one random sequence of acquires and peeks at caller times on
// both limiters and fails at the first decision where they differ.
func replay(t *testing.T, a, b *slidelimit.Limiter, seed int64, steps int, maxStep int, maxCost int) {
	t.Helper()
	rng := rand.New(rand.NewSource(seed))
	now := uint64(1_700_000_000_000)
	tenants := []string{"a", "b{c}", "zoë 東京"}
	for _, tenant := range tenants {
		if _, err := a.Reset(ctx, tenant); err != nil {
			t.Fatal(err)
		}
	}
	allowed := 0
	for i := 0; i < steps; i++ {
		now += uint64(rng.Intn(maxStep))
		tenant := tenants[rng.Intn(len(tenants))]
		cost := uint64(1 + rng.Intn(maxCost))
		var got, want slidelimit.Decision
		var errGot, errWant error
		if rng.Intn(5) == 0 {
			got, errGot = a.PeekAt(ctx, tenant, cost, now)
			want, errWant = b.PeekAt(ctx, tenant, cost, now)
		} else {
			got, errGot = a.AcquireAt(ctx, tenant, cost, now)
			want, errWant = b.AcquireAt(ctx, tenant, cost, now)
		}
		if errGot != nil || errWant != nil {
			t.Fatalf("step %d: %v / %v", i, errGot, errWant)
		}
		if got != want {
			t.Fatalf("step %d (%s cost %d at %d): %+v, want %+v", i, tenant, cost, now, got, want)
		}
		if got.Allowed {
			allowed++
		}
	}
	if allowed == 0 || allowed == steps {
		t.Fatalf("the sequence should both allow and deny, allowed %d of %d", allowed, steps)
	}
}

// A bucketed policy decides on Redis exactly as core's memory engine does,
// with a given bucket count and with core's default.
func TestBucketedWindowRedisAgreesWithMemory(t *testing.T) {
	client := testredis.Client(t, nil)
	cases := []struct {
		name                     string
		limit, windowMs, buckets uint64
		maxStep, maxCost         int
	}{
		{"ten buckets of 100ms", 5, 1000, 10, 120, 3},
		{"default 60 buckets", 20, 6000, 0, 700, 4},
		{"one bucket", 4, 1000, 1, 150, 2},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := testPolicy(t, slidelimit.BucketedWindow, c.limit, c.windowMs)
			p.Buckets = c.buckets
			replay(t, newRedisLimiter(t, client, p), newMemoryLimiter(t, p), int64(7+i), 400, c.maxStep, c.maxCost)
		})
	}
}

// docs/protocol.md: with one bucket per millisecond (Buckets == WindowMs)
// the bucketed window is the sliding log, decision for decision.
func TestBucketedWindowOfOneMillisecondBucketsIsTheLog(t *testing.T) {
	client := testredis.Client(t, nil)
	p := testPolicy(t, slidelimit.BucketedWindow, 5, 1000)
	p.Buckets = 1000
	log := testPolicy(t, slidelimit.SlidingLog, 5, 1000)
	replay(t, newRedisLimiter(t, client, p), newMemoryLimiter(t, log), 11, 400, 120, 3)
}

func TestBucketedWindowBadBucketsNameTheField(t *testing.T) {
	client := testredis.Client(t, nil)
	cases := []struct {
		name      string
		algorithm slidelimit.Algorithm
		windowMs  uint64
		buckets   uint64
	}{
		{"a count for the log", slidelimit.SlidingLog, 1000, 10},
		{"a count for the counter", slidelimit.SlidingCounter, 1000, 1},
		{"a count for the default algorithm", "", 1000, 10},
		{"not dividing the window", slidelimit.BucketedWindow, 1000, 3},
		{"above the cap", slidelimit.BucketedWindow, 7200, 3601},
		{"the default not dividing the window", slidelimit.BucketedWindow, 1000, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := slidelimit.Policy{Resource: "geocode", Algorithm: c.algorithm, Limit: 5, WindowMs: c.windowMs, Buckets: c.buckets}
			_, memErr := slidelimit.NewMemory(p)
			_, redisErr := slidelimit.New(client, p)
			for _, err := range []error{memErr, redisErr} {
				if !errors.Is(err, slidelimit.ErrInvalidArgument) {
					t.Fatalf("want ErrInvalidArgument, got %v", err)
				}
				var e *slidelimit.Error
				if !errors.As(err, &e) {
					t.Fatalf("want *slidelimit.Error, got %T", err)
				}
				if e.Field() != "buckets" || !strings.HasPrefix(e.Message, "buckets: ") {
					t.Fatalf("field %q, message %q", e.Field(), e.Message)
				}
			}
		})
	}
	// The largest count core accepts, and a window the default divides.
	for _, p := range []slidelimit.Policy{
		{Resource: "geocode", Algorithm: slidelimit.BucketedWindow, Limit: 5, WindowMs: 7200, Buckets: 3600},
		{Resource: "geocode", Algorithm: slidelimit.BucketedWindow, Limit: 5, Window: time.Minute},
	} {
		if _, err := slidelimit.NewMemory(p); err != nil {
			t.Fatalf("%+v: %v", p, err)
		}
	}
}

func TestBucketedWindowKey(t *testing.T) {
	client := testredis.Client(t, nil)
	ns := testredis.UniqueNamespace("rl-go-bucketed")
	defaulted := newRedisLimiter(t, client, slidelimit.Policy{Namespace: ns, Resource: "geocode",
		Algorithm: slidelimit.BucketedWindow, Limit: 2, Window: time.Minute})
	tenTimes := newRedisLimiter(t, client, slidelimit.Policy{Namespace: ns, Resource: "geocode",
		Algorithm: slidelimit.BucketedWindow, Limit: 2, WindowMs: 60_000, Buckets: 10})
	// A permit is held to its bucket's last millisecond plus the window: the
	// TTL is from the window up to the window and one bucket.
	for _, c := range []struct {
		l      *slidelimit.Limiter
		want   string
		bucket time.Duration
	}{
		{defaulted, ns + ":{geocode:a%7Db}:bucketed:60000:60", time.Second},
		{tenTimes, ns + ":{geocode:a%7Db}:bucketed:60000:10", 6 * time.Second},
	} {
		key, err := c.l.Key("a}b")
		if err != nil || key != c.want {
			t.Fatalf("key %q, %v; want %q", key, err, c.want)
		}
		// The check writes that key, as a string with a TTL.
		if _, err := c.l.Acquire(ctx, "a}b"); err != nil {
			t.Fatal(err)
		}
		if typ := client.Type(ctx, key).Val(); typ != "string" {
			t.Fatalf("%s is a %q", key, typ)
		}
		if ttl := client.PTTL(ctx, key).Val(); ttl < time.Minute-time.Second || ttl >= time.Minute+c.bucket {
			t.Fatalf("%s TTL %v", key, ttl)
		}
	}
	// Two bucket counts are two keys: each policy still has its own budget.
	for _, l := range []*slidelimit.Limiter{defaulted, tenTimes} {
		d, err := l.Acquire(ctx, "a}b")
		if err != nil || !d.Allowed || d.Remaining != 0 {
			t.Fatalf("second permit: %+v, %v", d, err)
		}
		d, err = l.Acquire(ctx, "a}b")
		if err != nil || d.Allowed {
			t.Fatalf("third permit: %+v, %v", d, err)
		}
	}
	for _, l := range []*slidelimit.Limiter{defaulted, tenTimes} {
		if _, err := l.Reset(ctx, "a}b"); err != nil {
			t.Fatal(err)
		}
	}
}

// Buckets 0 is the Go API's "not given": core's default of 60, the same
// policy (and key) as Buckets 60, and Limiter.Policy reports the 60 core
// uses; the algorithms without buckets report 0.
func TestBucketedWindowZeroBucketsIsTheDefault(t *testing.T) {
	client := testredis.Client(t, nil)
	zero := slidelimit.Policy{Resource: "geocode", Algorithm: slidelimit.BucketedWindow, Limit: 2, Window: time.Minute}
	sixty := zero
	sixty.Buckets = 60
	ten := zero
	ten.Buckets = 10
	for _, c := range []struct {
		p       slidelimit.Policy
		buckets uint64
		key     string
	}{
		{zero, 60, "rl:{geocode:t}:bucketed:60000:60"},
		{sixty, 60, "rl:{geocode:t}:bucketed:60000:60"},
		{ten, 10, "rl:{geocode:t}:bucketed:60000:10"},
		{slidelimit.Policy{Resource: "geocode", Limit: 2, Window: time.Minute}, 0, "rl:{geocode:t}:log:60000"},
		{slidelimit.Policy{Resource: "geocode", Algorithm: slidelimit.SlidingCounter, Limit: 2, Window: time.Minute},
			0, "rl:{geocode:t}:counter:60000"},
	} {
		for _, l := range []*slidelimit.Limiter{newMemoryLimiter(t, c.p), newRedisLimiter(t, client, c.p)} {
			got := l.Policy()
			if got.Buckets != c.buckets {
				t.Fatalf("%+v: Policy().Buckets = %d, want %d", c.p, got.Buckets, c.buckets)
			}
			key, err := l.Key("t")
			if err != nil || key != c.key {
				t.Fatalf("%+v: key %q, %v; want %q", c.p, key, err, c.key)
			}
			// The reported policy makes the same policy again.
			again := newMemoryLimiter(t, got)
			if k, err := again.Key("t"); err != nil || k != c.key || !reflect.DeepEqual(again.Policy(), got) {
				t.Fatalf("%+v: again %q, %v, %+v", got, k, err, again.Policy())
			}
		}
	}
}
