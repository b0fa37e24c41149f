package slidelimit_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidelimit/slidelimit/go"
	"github.com/slidelimit/slidelimit/go/internal/testredis"
)

// twoLimits is a sliding log of 2 per second beside a bucketed window of 3
// per 10 s (ten 1 s buckets).
func twoLimits(t *testing.T) slidelimit.Policy {
	p := testPolicy(t, "", 0, 0)
	// A namespace of this run's own: the test runs at fixed caller times,
	// and make test-go runs it three times on one server.
	p.Namespace = testredis.UniqueNamespace("rl-go-test")
	p.Limits = []slidelimit.Limit{
		{Algorithm: slidelimit.SlidingLog, Limit: 2, Window: time.Second},
		{Algorithm: slidelimit.BucketedWindow, Limit: 3, WindowMs: 10_000, Buckets: 10},
	}
	return p
}

// dumps are DUMP of every key (nil for a missing one): equal dumps mean
// nothing was written.
func dumps(t *testing.T, client *redis.Client, keys []string) [][]byte {
	t.Helper()
	out := make([][]byte, len(keys))
	for i, k := range keys {
		s, err := client.Dump(ctx, k).Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		out[i] = []byte(s)
	}
	return out
}

// A check passes only if every limit allows it and records in all of them or
// none; the decision takes the smallest remaining, and a denial names the
// limit that denied.
func TestMultiLimitAllowsOnlyWhenEveryLimitDoesAndRecordsAllOrNone(t *testing.T) {
	client := testredis.Client(t, nil)
	l := newRedisLimiter(t, client, twoLimits(t), slidelimit.WithoutDenyCache())
	keys, err := l.Keys("t")
	if err != nil || len(keys) != 2 || keys[0] == keys[1] {
		t.Fatalf("keys %q, %v", keys, err)
	}
	first, err := l.Key("t")
	if err != nil || first != keys[0] {
		t.Fatalf("Key %q, %v; want the first limit's %q", first, err, keys[0])
	}
	slots := [2]uint16{}
	for i, k := range keys {
		if slots[i], err = slidelimit.KeySlot(k); err != nil {
			t.Fatal(err)
		}
	}
	if slots[0] != slots[1] {
		t.Fatalf("the keys lie in slots %v: a multi-key script needs one", slots)
	}

	type step struct {
		now       uint64
		allowed   bool
		remaining uint64
		deniedBy  int // -1: none
		minRetry  uint64
	}
	steps := []step{
		// Both limits admit: remaining is the log's 1 (the window's 2 left).
		{now: 1000, allowed: true, remaining: 1, deniedBy: -1},
		{now: 1001, allowed: true, remaining: 0, deniedBy: -1},
		// The log is full, the window holds 1 more: the log denies, and
		// nothing is recorded in the window either.
		{now: 1002, allowed: false, deniedBy: 0, minRetry: 1},
		// A second later the log is empty; the window takes its third.
		{now: 2500, allowed: true, remaining: 0, deniedBy: -1},
		// The log would admit (1 of 2), the window is full until its first
		// bucket leaves, more than the log's one-second window away.
		{now: 2600, allowed: false, deniedBy: 1, minRetry: 1001},
	}
	for _, s := range steps {
		before := dumps(t, client, keys)
		d, err := l.AcquireAt(ctx, "t", 1, s.now)
		if err != nil {
			t.Fatalf("at %d: %v", s.now, err)
		}
		idx, named := d.DeniedBy()
		if d.Allowed != s.allowed || d.Remaining != s.remaining || named != (s.deniedBy >= 0) ||
			named && idx != s.deniedBy || d.RetryAfterMs < s.minRetry {
			t.Fatalf("at %d: %+v (denied by %d, %v), want %+v", s.now, d, idx, named, s)
		}
		after := dumps(t, client, keys)
		for i := range keys {
			changed := !reflect.DeepEqual(before[i], after[i])
			if changed != s.allowed {
				t.Fatalf("at %d: key %s changed %v on an allowed=%v decision", s.now, keys[i], changed, s.allowed)
			}
		}
	}

	// Reset deletes every limit's key.
	if n, err := client.Exists(ctx, keys...).Result(); err != nil || n != 2 {
		t.Fatalf("%d of the keys exist before Reset (%v)", n, err)
	}
	removed, err := l.Reset(ctx, "t")
	if err != nil || !removed {
		t.Fatalf("Reset: %v, %v", removed, err)
	}
	if n, err := client.Exists(ctx, keys...).Result(); err != nil || n != 0 {
		t.Fatalf("%d keys left after Reset (%v)", n, err)
	}
	if d, err := l.AcquireAt(ctx, "t", 1, 2700); err != nil || !d.Allowed {
		t.Fatalf("after Reset: %+v, %v", d, err)
	}
}

// The memory engine runs the same policies, with the same decisions.
func TestMultiLimitOnMemoryMatchesRedis(t *testing.T) {
	client := testredis.Client(t, nil)
	p := twoLimits(t)
	r := newRedisLimiter(t, client, p)
	m := newMemoryLimiter(t, p)
	for _, now := range []uint64{1000, 1001, 1002, 1500, 2500, 2600, 9000, 12_000} {
		for _, cost := range []uint64{1, 2} {
			dr, errR := r.AcquireAt(ctx, "t", cost, now)
			dm, errM := m.AcquireAt(ctx, "t", cost, now)
			if errR != nil || errM != nil || dr != dm {
				t.Fatalf("at %d cost %d: redis %+v %v, memory %+v %v", now, cost, dr, errR, dm, errM)
			}
		}
	}
	if removed, err := m.Reset(ctx, "t"); err != nil || !removed {
		t.Fatalf("memory Reset: %v %v", removed, err)
	}
}

// A one-limit policy never names a denying limit.
func TestSingleLimitNamesNoDenyingLimit(t *testing.T) {
	l := newMemoryLimiter(t, slidelimit.Policy{Resource: "r", Limit: 1, WindowMs: 1000})
	for i := range 2 {
		d, err := l.AcquireAt(ctx, "t", 1, 1000)
		if _, named := d.DeniedBy(); err != nil || d.Allowed != (i == 0) || named {
			t.Fatalf("acquire %d: %+v, %v, named %v", i, d, err, named)
		}
	}
}

// Limits is validated by core, which names the limit at fault; Go's own
// checks (Limits beside the single fields, a Window and a WindowMs) name
// their field the same way.
func TestMultiLimitValidationNamesTheLimit(t *testing.T) {
	base := slidelimit.Policy{Resource: "geocode"}
	with := func(limits ...slidelimit.Limit) slidelimit.Policy {
		p := base
		p.Limits = append([]slidelimit.Limit{}, limits...) // never nil: with() is an empty list
		return p
	}
	log := slidelimit.Limit{Algorithm: slidelimit.SlidingLog, Limit: 2, WindowMs: 1000}
	both := with(log)
	both.Limit = 5
	cases := []struct {
		p     slidelimit.Policy
		field string
	}{
		{with(log, slidelimit.Limit{Limit: 5}), "limits[1].window_ms"},
		{with(log, slidelimit.Limit{WindowMs: 60_000}), "limits[1].limit"},
		{with(log, slidelimit.Limit{Limit: 5, Window: time.Second, WindowMs: 1000}), "limits[1].window"},
		{with(log, slidelimit.Limit{Algorithm: slidelimit.SlidingCounter, Limit: 5, WindowMs: 1000, Buckets: 10}),
			"limits[1].buckets"},
		{with(log, slidelimit.Limit{Algorithm: "fixed_window", Limit: 5, WindowMs: 1000}), "limits[1].algorithm"},
		{with(slidelimit.Limit{Algorithm: "fixed_window", Limit: 5, WindowMs: 1000}), "algorithm"},
		{with(log, log), "limits"},                      // a duplicate
		{with(slidelimit.Limit{Limit: 5}), "window_ms"}, // one limit: the single policy's names
		{with(), "limits"},                              // empty
		{with(log, log, log, log, log, log, log, log, log), "limits"},
		// Too many is the list's fault, whatever its entries hold: checked
		// before any entry's Window or Algorithm.
		{with(log, log, log, log, log, log, log, log, slidelimit.Limit{Limit: 5, Window: -time.Second}), "limits"},
		{with(log, log, log, log, log, log, log, log, slidelimit.Limit{Algorithm: "fixed_window"}), "limits"},
		{both, "limits"},
	}
	for _, c := range cases {
		for _, memory := range []bool{false, true} {
			var err error
			if memory {
				_, err = slidelimit.NewMemory(c.p)
			} else {
				_, err = slidelimit.New(testredis.Client(t, nil), c.p)
			}
			var e *slidelimit.Error
			if !errors.As(err, &e) || e.Code != slidelimit.ErrInvalidArgument || e.Field() != c.field ||
				!strings.HasPrefix(e.Message, c.field+": ") {
				t.Fatalf("%+v: %v, want invalid_argument on %s", c.p.Limits, err, c.field)
			}
		}
	}
	// A cost above any limit could never pass.
	l := newMemoryLimiter(t, with(log, slidelimit.Limit{Limit: 5, WindowMs: 60_000}))
	if _, err := l.AcquireAt(ctx, "t", 3, 1000); !errors.Is(err, slidelimit.ErrInvalidArgument) {
		t.Fatalf("cost 3 over a limit of 2: %v", err)
	}
}

// Policy reports the limits as core uses them: the default algorithm and
// bucket count filled in; it makes the same policy again.
func TestPolicyReportsTheLimits(t *testing.T) {
	p := slidelimit.Policy{Resource: "geocode", Limits: []slidelimit.Limit{
		{Limit: 20, WindowMs: 1000},
		{Algorithm: slidelimit.BucketedWindow, Limit: 600, Window: time.Minute},
	}}
	l := newMemoryLimiter(t, p)
	got := l.Policy()
	want := slidelimit.Policy{Namespace: slidelimit.DefaultNamespace, Resource: "geocode", Limits: []slidelimit.Limit{
		{Algorithm: slidelimit.DefaultAlgorithm, Limit: 20, WindowMs: 1000},
		{Algorithm: slidelimit.BucketedWindow, Limit: 600, Window: time.Minute, Buckets: 60},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Policy() = %+v, want %+v", got, want)
	}
	got.Limits[0].Limit = 1 // a copy: the Limiter's own is untouched
	if l.Policy().Limits[0].Limit != 20 || p.Limits[0].Algorithm != "" {
		t.Fatal("Policy() shares its Limits with the Limiter or the caller's policy")
	}
	again := newMemoryLimiter(t, l.Policy())
	k1, err1 := l.Keys("t")
	k2, err2 := again.Keys("t")
	if err1 != nil || err2 != nil || !reflect.DeepEqual(k1, k2) {
		t.Fatalf("keys %q %v, again %q %v", k1, err1, k2, err2)
	}
}

// The deny cache's tests run on a server of their own: they count its
// EVALSHA calls, which other packages' tests would add to.
func denyCacheServer(t *testing.T) *redis.Client {
	return testredis.StartServer(t).Client()
}

// evalShas counts EVALSHA calls to the server during f.
func evalShas(t *testing.T, client *redis.Client, f func()) int {
	t.Helper()
	before := commandCalls(t, client, "evalsha")
	f()
	return commandCalls(t, client, "evalsha") - before
}

func acquireN(t *testing.T, l *slidelimit.Limiter, tenant string, cost uint64) slidelimit.Decision {
	t.Helper()
	d, err := l.AcquireN(ctx, tenant, cost)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// After Redis denies an acquire, the same or a greater cost is denied
// locally (no Redis call) with the wait reduced by the time gone by; a
// smaller cost asks Redis.
func TestDenyCacheAnswersRepeatedDenialsLocally(t *testing.T) {
	client := denyCacheServer(t)
	var events []slidelimit.AcquireEvent
	l := newRedisLimiter(t, client, testPolicy(t, slidelimit.SlidingLog, 2, 60_000),
		slidelimit.WithObserver(slidelimit.ObserverFunc(func(e slidelimit.AcquireEvent) { events = append(events, e) })))
	var denied slidelimit.Decision
	calls := evalShas(t, client, func() {
		if d := acquireN(t, l, "t", 2); !d.Allowed {
			t.Fatalf("first: %+v", d)
		}
		if denied = acquireN(t, l, "t", 2); denied.Allowed {
			t.Fatalf("second: %+v", denied)
		}
	})
	if calls != 2 {
		t.Fatalf("%d EVALSHA for two acquires", calls)
	}
	time.Sleep(5 * time.Millisecond)
	calls = evalShas(t, client, func() {
		for _, cost := range []uint64{2, 2} {
			d := acquireN(t, l, "t", cost)
			if d.Allowed || d.RetryAfterMs == 0 || d.RetryAfterMs >= denied.RetryAfterMs || d.NowMs <= denied.NowMs {
				t.Fatalf("local denial %+v after Redis's %+v", d, denied)
			}
		}
	})
	if calls != 0 {
		t.Fatalf("%d EVALSHA for denials the cache holds, want 0", calls)
	}
	// A smaller cost is not covered: it asks Redis (which denies it too:
	// the log is full).
	if calls = evalShas(t, client, func() {
		if d := acquireN(t, l, "t", 1); d.Allowed {
			t.Fatalf("cost 1: %+v", d)
		}
	}); calls != 1 {
		t.Fatalf("%d EVALSHA for a smaller cost, want 1", calls)
	}
	var local []bool
	for _, e := range events {
		local = append(local, e.Local)
	}
	if want := []bool{false, false, true, true, false}; !reflect.DeepEqual(local, want) {
		t.Fatalf("observers saw Local %v, want %v", local, want)
	}
}

// Peeks and caller-time acquires never read or fill the cache.
func TestDenyCacheServesServerTimeAcquiresOnly(t *testing.T) {
	client := denyCacheServer(t)
	l := newRedisLimiter(t, client, testPolicy(t, slidelimit.SlidingLog, 1, 60_000))
	acquireN(t, l, "t", 1)
	denied := acquireN(t, l, "t", 1) // cached
	if denied.Allowed {
		t.Fatalf("%+v", denied)
	}
	calls := evalShas(t, client, func() {
		if d, err := l.AcquireAt(ctx, "t", 1, denied.NowMs); err != nil || d.Allowed {
			t.Fatalf("AcquireAt: %+v %v", d, err)
		}
		if d, err := l.Peek(ctx, "t", 1); err != nil || d.Allowed {
			t.Fatalf("Peek: %+v %v", d, err)
		}
		if d, err := l.PeekAt(ctx, "t", 1, denied.NowMs); err != nil || d.Allowed {
			t.Fatalf("PeekAt: %+v %v", d, err)
		}
	})
	if calls != 3 {
		t.Fatalf("%d EVALSHA for AcquireAt, Peek and PeekAt, want 3", calls)
	}
	// Caller-time denials are not cached: the next server-time acquire of
	// another tenant asks Redis.
	now := uint64(time.Now().UnixMilli())
	for range 2 {
		if _, err := l.AcquireAt(ctx, "u", 1, now); err != nil {
			t.Fatal(err)
		}
	}
	if calls = evalShas(t, client, func() { acquireN(t, l, "u", 1) }); calls != 1 {
		t.Fatalf("%d EVALSHA after caller-time denials, want 1", calls)
	}
}

// The Limiter's own Reset forgets the tenant; without the cache every
// acquire asks Redis.
func TestDenyCacheResetAndOff(t *testing.T) {
	client := denyCacheServer(t)
	l := newRedisLimiter(t, client, testPolicy(t, slidelimit.SlidingLog, 1, 60_000))
	acquireN(t, l, "t", 1)
	acquireN(t, l, "t", 1) // cached
	if removed, err := l.Reset(ctx, "t"); err != nil || !removed {
		t.Fatalf("Reset: %v %v", removed, err)
	}
	if calls := evalShas(t, client, func() {
		if d := acquireN(t, l, "t", 1); !d.Allowed {
			t.Fatalf("after Reset: %+v", d)
		}
	}); calls != 1 {
		t.Fatalf("%d EVALSHA after Reset, want 1", calls)
	}

	p := testPolicy(t, slidelimit.SlidingLog, 1, 60_000)
	p.Resource += "-off"
	off := newRedisLimiter(t, client, p, slidelimit.WithoutDenyCache())
	acquireN(t, off, "t", 1)
	if calls := evalShas(t, client, func() {
		for range 3 {
			if d := acquireN(t, off, "t", 1); d.Allowed {
				t.Fatalf("%+v", d)
			}
		}
	}); calls != 3 {
		t.Fatalf("%d EVALSHA for three denials without the cache, want 3", calls)
	}
}

// A Reset through any Limiter of the process reaches every Limiter's cache:
// a tenant denied locally by one asks Redis again after another resets it.
func TestDenyCacheSeesAResetThroughAnotherLimiter(t *testing.T) {
	client := denyCacheServer(t)
	p := testPolicy(t, slidelimit.SlidingLog, 1, 60_000)
	// The resetter's own cache is off: the reset reaches the others all the same.
	resetter := newRedisLimiter(t, client, p, slidelimit.WithoutDenyCache())
	cached := newRedisLimiter(t, client, p)
	acquireN(t, cached, "t", 1)
	if calls := evalShas(t, client, func() { acquireN(t, cached, "t", 1) }); calls != 1 {
		t.Fatalf("%d EVALSHA for the first denial, want 1", calls)
	}
	if calls := evalShas(t, client, func() { acquireN(t, cached, "t", 1) }); calls != 0 {
		t.Fatalf("%d EVALSHA for a cached denial, want 0", calls)
	}
	if removed, err := resetter.Reset(ctx, "t"); err != nil || !removed {
		t.Fatalf("Reset: %v %v", removed, err)
	}
	if calls := evalShas(t, client, func() {
		if d := acquireN(t, cached, "t", 1); !d.Allowed {
			t.Fatalf("after another Limiter's Reset: %+v", d)
		}
	}); calls != 1 {
		t.Fatalf("%d EVALSHA after another Limiter's Reset, want 1", calls)
	}
}

// A denial Redis gave before a Reset's DEL, whose reply comes back only
// after the Reset has returned, is not cached: the tenant starts afresh in
// Redis, so the next Acquire must ask it.
func TestDenyCacheDropsADenialAResetOvertook(t *testing.T) {
	server := testredis.StartServer(t)
	direct := server.Client()
	proxy := testredis.StartProxy(t, server.Addr)
	p := testPolicy(t, slidelimit.SlidingLog, 1, 60_000)
	slow := redis.NewClient(&redis.Options{Addr: proxy.Addr})
	defer slow.Close()
	cached := newRedisLimiter(t, slow, p, slidelimit.WithTimeout(10*time.Second))
	resetter := newRedisLimiter(t, direct, p, slidelimit.WithoutDenyCache())
	acquireN(t, cached, "t", 1)
	before := commandCalls(t, direct, "evalsha")
	proxy.SetDelay(time.Second)
	type answer struct {
		d   slidelimit.Decision
		err error
	}
	late := make(chan answer, 1)
	go func() {
		d, err := cached.AcquireN(ctx, "t", 1)
		late <- answer{d, err}
	}()
	// Redis has run it (and denied) once the count moves; its reply is
	// still a second away when the Reset runs.
	for deadline := time.Now().Add(10 * time.Second); commandCalls(t, direct, "evalsha") == before; {
		if time.Now().After(deadline) {
			t.Fatal("the acquire never reached Redis")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if removed, err := resetter.Reset(ctx, "t"); err != nil || !removed {
		t.Fatalf("Reset: %v %v", removed, err)
	}
	select {
	case <-late:
		t.Fatal("the reply came back before the Reset returned: nothing was overtaken")
	default:
	}
	if a := <-late; a.err != nil || a.d.Allowed {
		t.Fatalf("Redis ran it before the Reset, so it was denied: %+v %v", a.d, a.err)
	}
	proxy.SetDelay(0)
	if calls := evalShas(t, direct, func() {
		if d := acquireN(t, cached, "t", 1); !d.Allowed {
			t.Fatalf("the denial from before the Reset was cached: %+v", d)
		}
	}); calls != 1 {
		t.Fatalf("%d EVALSHA after the Reset, want 1", calls)
	}
}

// A local denial of a policy of several limits names the limit Redis named.
func TestDenyCacheKeepsDeniedBy(t *testing.T) {
	client := denyCacheServer(t)
	p := testPolicy(t, "", 0, 0)
	p.Limits = []slidelimit.Limit{
		{Algorithm: slidelimit.SlidingLog, Limit: 5, WindowMs: 60_000},
		{Algorithm: slidelimit.SlidingCounter, Limit: 1, WindowMs: 60_000},
	}
	l := newRedisLimiter(t, client, p)
	acquireN(t, l, "t", 1)
	var redisDenial, local slidelimit.Decision
	calls := evalShas(t, client, func() { redisDenial = acquireN(t, l, "t", 1) })
	calls += evalShas(t, client, func() { local = acquireN(t, l, "t", 1) })
	i, named := redisDenial.DeniedBy()
	j, localNamed := local.DeniedBy()
	if calls != 1 || !named || i != 1 || !localNamed || j != 1 || local.Allowed {
		t.Fatalf("%d calls; Redis %+v (%d %v), local %+v (%d %v)", calls, redisDenial, i, named, local, j, localNamed)
	}
}

// The capacity is core's to check; the memory engine has no cache.
func TestDenyCacheCapacity(t *testing.T) {
	client := testredis.Client(t, nil)
	p := testPolicy(t, slidelimit.SlidingLog, 1, 1000)
	for _, capacity := range []int{-1, 1 << 25} {
		_, err := slidelimit.New(client, p, slidelimit.WithDenyCache(capacity))
		var e *slidelimit.Error
		if !errors.As(err, &e) || e.Code != slidelimit.ErrInvalidArgument || e.Field() != "deny_cache_capacity" {
			t.Fatalf("capacity %d: %v", capacity, err)
		}
	}
	for _, capacity := range []int{0, 1, 1 << 24} {
		l, err := slidelimit.New(client, p, slidelimit.WithDenyCache(capacity))
		if err != nil {
			t.Fatalf("capacity %d: %v", capacity, err)
		}
		l.Close()
	}
	// NewMemory ignores it (the option is for Redis round trips).
	m := newMemoryLimiter(t, p, slidelimit.WithDenyCache(-1))
	for i := range 3 {
		if d, err := m.Acquire(ctx, "t"); err != nil || d.Allowed != (i == 0) {
			t.Fatalf("memory %d: %+v %v", i, d, err)
		}
	}
}
