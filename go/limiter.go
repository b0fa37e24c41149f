package slidelimit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidelimit/slidelimit/go/internal/verbatim"
)

// Algorithm names a rate-limiting algorithm by its contract name. The zero
// value "" stands for DefaultAlgorithm in a Policy.
type Algorithm string

const (
	// SlidingLog is exact: one entry per admitted permit.
	SlidingLog Algorithm = "sliding_log"
	// SlidingCounter is approximate with O(1) memory per tenant.
	SlidingCounter Algorithm = "sliding_counter"
	// BucketedWindow is exact with O(buckets) memory per tenant: permits are
	// counted per bucket of WindowMs / Buckets ms, each held until its
	// bucket's last millisecond plus the window (so a denied caller may wait
	// up to one bucket longer than under SlidingLog). For limits above
	// SlidingLog's cap.
	BucketedWindow Algorithm = "bucketed_window"
)

// Core's defaults, read through the C ABI, which the zero values of
// Policy.Namespace and Policy.Algorithm stand for (as in every binding):
// "rl" and SlidingLog.
var (
	DefaultNamespace = defaultNamespace()
	DefaultAlgorithm = defaultAlgorithm()
)

// MaxLimits is the most limits a Policy's Limits may hold (core's
// MAX_LIMITS). A longer list is refused as ErrInvalidArgument on limits,
// whatever its entries hold.
const MaxLimits = maxLimits

// Policy is one rate limit: at most Limit permits per rolling window for each
// tenant, under keys `<Namespace>:{<Resource>:<tenant>}:...`; or, with
// Limits, several limits checked together. It is validated by
// slidelimit-core when a Limiter is made; a bad field is ErrInvalidArgument
// naming it.
type Policy struct {
	// Namespace prefixes every key; empty means DefaultNamespace ("rl").
	Namespace string
	Resource  string
	// Algorithm: empty means DefaultAlgorithm (SlidingLog).
	Algorithm Algorithm
	Limit     uint64
	// Window is the rolling window as a Duration, a whole number of
	// milliseconds (60 * time.Second). Set exactly one of Window and WindowMs.
	Window time.Duration
	// WindowMs is the rolling window in milliseconds (60_000).
	WindowMs uint64
	// Buckets is the bucket count of a BucketedWindow policy: 1 to 3600,
	// dividing the window, and part of the key. 0 means "not given", like an
	// empty Namespace: core's default (60: one-second buckets over a minute),
	// which must divide the window too. Any other algorithm takes 0 only; a
	// count there is ErrInvalidArgument naming buckets. Limiter.Policy
	// reports the effective count (60 for the default).
	Buckets uint64
	// Limits, instead of Algorithm, Limit, Window, WindowMs and Buckets
	// (which must then be zero; else ErrInvalidArgument naming limits), is a
	// policy of 1 to 8 limits on the same tenants, say 20 per second and 600
	// per minute: a check passes only if every limit allows it, and records
	// its permits in all of them or in none. Remaining is the smallest of the
	// limits', ResetAfterMs the largest, and a denial's RetryAfterMs the
	// longest wait of the limits that deny (Decision.DeniedBy names the
	// limit). Each limit has its own key; Reset deletes them all. With
	// several limits core's errors name the limit at fault
	// ("limits[1].window_ms"); one limit is exactly the single policy. A
	// non-nil empty Limits is refused (ErrInvalidArgument naming limits).
	Limits []Limit
}

// Limit is one limit of a Policy's Limits: its fields mean what the Policy's
// fields of the same name mean for a single limit (an empty Algorithm is
// DefaultAlgorithm, Buckets 0 is core's default count for BucketedWindow).
type Limit struct {
	Algorithm Algorithm
	Limit     uint64
	// Window or WindowMs (exactly one): the rolling window.
	Window   time.Duration
	WindowMs uint64
	Buckets  uint64
}

// withDefaults fills the zero Namespace and Algorithm (of the policy, or of
// each of its Limits) with core's defaults.
func (p Policy) withDefaults() Policy {
	if verbatim.Policy.Load() {
		return p
	}
	if p.Namespace == "" {
		p.Namespace = DefaultNamespace
	}
	if p.Limits != nil {
		p.Limits = slices.Clone(p.Limits)
		for i := range p.Limits {
			if p.Limits[i].Algorithm == "" {
				p.Limits[i].Algorithm = DefaultAlgorithm
			}
		}
		return p
	}
	if p.Algorithm == "" {
		p.Algorithm = DefaultAlgorithm
	}
	return p
}

// limitSpec is one limit as the C ABI takes it.
type limitSpec struct {
	algorithm    Algorithm
	limit        uint64
	windowMs     uint64
	buckets      uint64
	bucketsGiven bool
}

// specs is the policy's limits for core: Limits, or the single fields as one
// limit. Buckets 0 is the Go API's "not given" (core's default), like an
// empty Namespace; the driver's verbatim switch sends core a count of 0.
func (p Policy) specs() ([]limitSpec, error) {
	if p.Limits == nil {
		windowMs, err := windowMs("", p.Window, p.WindowMs)
		if err != nil {
			return nil, err
		}
		return []limitSpec{{algorithm: p.Algorithm, limit: p.Limit, windowMs: windowMs, buckets: p.Buckets,
			bucketsGiven: p.Buckets != 0 || verbatim.BucketsGiven(0)}}, nil
	}
	single := map[string]bool{"Algorithm": p.Algorithm != "", "Limit": p.Limit != 0, "Window": p.Window != 0,
		"WindowMs": p.WindowMs != 0, "Buckets": p.Buckets != 0}
	for _, name := range []string{"Algorithm", "Limit", "Window", "WindowMs", "Buckets"} {
		if single[name] {
			return nil, invalidArgument("limits", fmt.Sprintf(
				"set Limits or the single limit's fields, not both (%s is set)", name))
		}
	}
	specs := make([]limitSpec, len(p.Limits))
	if len(p.Limits) > MaxLimits {
		// Core refuses the count before it reads any limit: none is read
		// here either (limits core never reads stand in for them).
		for i := range specs {
			specs[i] = limitSpec{algorithm: DefaultAlgorithm, limit: 1, windowMs: 1}
		}
		return specs, nil
	}
	for i, l := range p.Limits {
		// Core's naming: a field of one limit is the single policy's field.
		prefix := ""
		if len(p.Limits) > 1 {
			prefix = fmt.Sprintf("limits[%d].", i)
		}
		w, err := windowMs(prefix, l.Window, l.WindowMs)
		if err != nil {
			return nil, err
		}
		specs[i] = limitSpec{algorithm: l.Algorithm, limit: l.Limit, windowMs: w, buckets: l.Buckets,
			bucketsGiven: l.Buckets != 0 || verbatim.BucketsGiven(i)}
	}
	return specs, nil
}

// windowMs is a window in milliseconds, from exactly one of window and
// windowMs (neither leaves 0, which core rejects naming window_ms); errors
// name prefix + "window".
func windowMs(prefix string, window time.Duration, windowMs uint64) (uint64, error) {
	switch {
	case window == 0:
		return windowMs, nil
	case windowMs != 0:
		return 0, invalidArgument(prefix+"window", fmt.Sprintf(
			"set Window or WindowMs, not both (Window %v, WindowMs %d)", window, windowMs))
	case window < 0 || window%time.Millisecond != 0:
		return 0, invalidArgument(prefix+"window", fmt.Sprintf(
			"must be a positive whole number of milliseconds, got %v", window))
	}
	return uint64(window / time.Millisecond), nil
}

// Decision is what a check answered. Times are milliseconds.
type Decision struct {
	Allowed bool
	// Remaining is how many permits of cost 1 would still pass at NowMs.
	Remaining uint64
	// RetryAfterMs is 0 when allowed; else how long until a retry of the same
	// cost passes, assuming no other traffic.
	RetryAfterMs uint64
	// ResetAfterMs is how long until the key holds nothing that still counts.
	ResetAfterMs uint64
	// NowMs is the time of the decision (Redis TIME, or the caller's time).
	NowMs uint64
	// deniedBy is DeniedBy's index + 1; 0 for none, so that the zero
	// Decision names no limit.
	deniedBy int
}

// DeniedBy is the position in Policy.Limits (from 0) of the limit that
// denied this request, the one with the longest retry when several did; ok
// is false when the request was allowed and for a policy of one limit.
func (d Decision) DeniedBy() (index int, ok bool) { return d.deniedBy - 1, d.deniedBy > 0 }

// RetryAfter is RetryAfterMs as a Duration. A wait longer than the longest
// Duration (about 292 years; a window near that, or a bucketed window's last
// bucket, can ask for up to twice the window) is the longest Duration, as
// time.Time.Sub saturates, never a wrapped negative; RetryAfterMs is exact.
func (d Decision) RetryAfter() time.Duration { return msDuration(d.RetryAfterMs) }

// ResetAfter is ResetAfterMs as a Duration, saturated as RetryAfter is.
func (d Decision) ResetAfter() time.Duration { return msDuration(d.ResetAfterMs) }

// maxDurationMs is the most milliseconds a Duration holds.
const maxDurationMs = uint64(math.MaxInt64 / int64(time.Millisecond))

// msDuration is ms milliseconds as a Duration, the longest one past it.
func msDuration(ms uint64) time.Duration {
	if ms > maxDurationMs {
		return math.MaxInt64
	}
	return time.Duration(ms) * time.Millisecond
}

// DefaultTimeout bounds every Redis call unless WithTimeout says otherwise:
// core's default, 1 s, read through the C ABI.
var DefaultTimeout = msDuration(defaultTimeoutMs())

type config struct {
	timeout   time.Duration
	observers []Observer
	clock     func() time.Time
	// denyCache: whether a Limiter on Redis keeps one, and its capacity
	// (0: core's default).
	denyCache         bool
	denyCacheCapacity int
	// engine: the shared memory engine NewMemory uses (WithMemoryEngine).
	engine    *MemoryEngine
	engineSet bool
	// err: the first option that cannot work (an Option returns none), for
	// New and NewMemory to return instead of a nil call later.
	err error
}

// refuse records the first bad option.
func (c *config) refuse(field, problem string) {
	if c.err == nil {
		c.err = invalidArgument(field, problem)
	}
}

// isNil reports whether v is nil or a nil pointer, map, func, ... in an
// interface: a typed nil passes `v != nil` and panics on its first use.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch r := reflect.ValueOf(v); r.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Func, reflect.Chan, reflect.Slice, reflect.Interface:
		return r.IsNil()
	}
	return false
}

// Option configures a Limiter.
type Option func(*config)

// WithTimeout bounds each Redis call; past it the check fails with
// ErrUnavailable (never a decision). Default DefaultTimeout. Core's rule for
// every binding: 1 ms to 2^31 - 1 ms (about 24.8 days), in whole
// milliseconds; zero, a negative, a sub-millisecond timeout or one with a
// part of a millisecond (1500 * time.Microsecond) makes New and NewMemory
// fail with ErrInvalidArgument naming timeout_ms.
func WithTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// WithDenyCache sets the capacity (tenants) of the local deny cache that a
// Limiter on Redis keeps; capacity 0 is core's default (10,000), above
// core's maximum or negative is ErrInvalidArgument naming
// deny_cache_capacity. The cache is on by default.
//
// The deny cache remembers Redis's last denial per tenant: until its
// retry-after has passed (on the process's monotonic clock), an Acquire or
// AcquireN of the same or a greater cost is denied locally, without a Redis
// call, with the retry-after reduced by the time gone by; a smaller cost
// still asks Redis. It serves only Acquire and AcquireN on Redis time:
// Peek, PeekAt and AcquireAt never read or fill it. A Reset through any
// Limiter of the process forgets the tenant in every Limiter's cache; a
// reset done by another process is not seen, so the tenant stays denied here until the cached retry-after
// runs out. Local denials reach observers like any denial, with
// AcquireEvent.Local set. NewMemory ignores it.
func WithDenyCache(capacity int) Option {
	return func(c *config) { c.denyCache, c.denyCacheCapacity = true, capacity }
}

// WithoutDenyCache switches the local deny cache off (see WithDenyCache):
// every acquire asks Redis.
func WithoutDenyCache() Option { return func(c *config) { c.denyCache = false } }

// WithClock sets the clock of the memory engine, which stands in for Redis
// TIME (default time.Now); a nil now makes New and NewMemory fail with
// ErrInvalidArgument naming clock. Limiters on Redis ignore it. A time before
// 1970, or past 2^52 ms (about year 142,000) where no caller time is given,
// is ErrInvalidArgument naming clock on the check that reads it.
func WithClock(now func() time.Time) Option {
	return func(c *config) {
		if now == nil {
			c.refuse("clock", "must not be nil")
		}
		c.clock = now
	}
}

// MemoryEngine is core's in-memory store on its own, for Limiters that
// share it (NewMemory with WithMemoryEngine): whatever their policies, they
// see one another's permits where their keys agree, as Limiters on one Redis
// do. It is safe for concurrent use. Close releases its C memory; the
// Limiters on it then return ErrClosed.
type MemoryEngine struct {
	h *memoryHandle
}

// NewMemoryEngine makes an empty engine.
func NewMemoryEngine() (*MemoryEngine, error) {
	h, err := newMemoryHandle()
	if err != nil {
		return nil, err
	}
	return &MemoryEngine{h: h}, nil
}

// Close releases the engine. Safe to call more than once; a nil or zero
// MemoryEngine, which NewMemoryEngine never returns, holds nothing and is
// ErrInvalidArgument naming memory_engine.
func (e *MemoryEngine) Close() error {
	if e == nil || e.h == nil {
		return invalidArgument("memory_engine", "must be made by NewMemoryEngine, not nil or a zero MemoryEngine")
	}
	e.h.free()
	return nil
}

// WithMemoryEngine makes NewMemory's Limiter use e, shared with other
// Limiters, instead of an engine of its own; closing the Limiter leaves e
// open. A nil e makes NewMemory fail with ErrInvalidArgument naming
// memory_engine. Limiters on Redis ignore it.
func WithMemoryEngine(e *MemoryEngine) Option {
	return func(c *config) { c.engine, c.engineSet = e, true }
}

// Limiter checks one Policy, on Redis (New) or in memory (NewMemory). It is
// safe for concurrent use. Close releases the C memory it holds.
type Limiter struct {
	policy Policy
	handle *policyHandle
	cfg    config

	// On Redis:
	client           redis.UniversalClient
	acquire, peek    script
	clientHonoursCtx bool
	// deny is the local deny cache (nil when off); monoStart is the origin
	// of its monotonic clock.
	deny *denyCacheHandle
	// calls keeps core's call for Acquire(tenant) by tenant.
	calls     keptCalls
	monoStart time.Time

	// In memory:
	memory *memoryHandle
	// sharedMemory: memory belongs to a MemoryEngine, which frees it.
	sharedMemory bool
}

// New makes a Limiter that runs core's scripts on Redis through client (a
// *redis.Client, *redis.ClusterClient or any UniversalClient). Checks use
// Redis TIME unless a ...At method passes the caller's time.
//
// go-redis ignores context deadlines unless the client was made with
// ContextTimeoutEnabled; with such a client the timeout interrupts the socket
// read directly, otherwise the Limiter stops waiting for the reply itself.
func New(client redis.UniversalClient, p Policy, opts ...Option) (*Limiter, error) {
	if isNil(client) {
		return nil, invalidArgument("client", "must not be nil")
	}
	l, err := newLimiter(p, opts)
	if err != nil {
		return nil, err
	}
	// The scripts the policy's calls run: its algorithm's for one limit,
	// the multi-limit script for several (core's choice).
	if l.acquire, err = l.handle.script(modeAcquire); err == nil {
		l.peek, err = l.handle.script(modePeek)
	}
	if err == nil && l.cfg.denyCache {
		if l.cfg.denyCacheCapacity < 0 {
			err = invalidArgument("deny_cache_capacity", fmt.Sprintf("must not be negative, got %d", l.cfg.denyCacheCapacity))
		} else {
			l.deny, err = newDenyCacheHandle(uint64(l.cfg.denyCacheCapacity))
			l.monoStart = time.Now()
		}
	}
	if err != nil {
		l.Close()
		return nil, err
	}
	l.client = client
	l.clientHonoursCtx = honoursContext(client)
	return l, nil
}

// NewMemory makes a Limiter on core's in-memory engine, with the same
// decisions as Redis: for tests and single-process use. The engine is the
// Limiter's own unless WithMemoryEngine gives one that Limiters share.
func NewMemory(p Policy, opts ...Option) (*Limiter, error) {
	l, err := newLimiter(p, opts)
	if err != nil {
		return nil, err
	}
	if l.cfg.engineSet {
		if l.cfg.engine == nil {
			l.Close()
			return nil, invalidArgument("memory_engine", "must not be nil")
		}
		if l.cfg.engine.h == nil {
			l.Close()
			return nil, invalidArgument("memory_engine", "must be made by NewMemoryEngine, not a zero MemoryEngine")
		}
		l.memory, l.sharedMemory = l.cfg.engine.h, true
		return l, nil
	}
	if l.memory, err = newMemoryHandle(); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

func newLimiter(p Policy, opts []Option) (*Limiter, error) {
	cfg := config{timeout: DefaultTimeout, clock: time.Now, denyCache: true}
	for i, opt := range opts {
		if opt == nil {
			cfg.refuse("options", fmt.Sprintf("option %d is nil", i))
			continue
		}
		opt(&cfg)
	}
	if cfg.err != nil {
		return nil, cfg.err
	}
	if err := checkTimeout(cfg.timeout); err != nil {
		return nil, err
	}
	p = p.withDefaults()
	specs, err := p.specs()
	if err != nil {
		return nil, err
	}
	h, err := newPolicyHandle(p.Namespace, p.Resource, specs)
	if err != nil {
		return nil, err
	}
	// Policy() reports the counts core uses, not the zeros that stood for
	// them.
	buckets, err := h.buckets()
	if err != nil {
		h.free()
		return nil, err
	}
	if p.Limits == nil {
		p.Buckets = buckets[0]
	} else {
		for i := range p.Limits {
			p.Limits[i].Buckets = buckets[i]
		}
	}
	return &Limiter{policy: p, handle: h, cfg: cfg}, nil
}

// checkTimeout applies core's rule to d in whole milliseconds (a negative
// duration is checked as 0).
func checkTimeout(d time.Duration) error {
	// Whole milliseconds: 1.5 ms is refused, as the bindings that take
	// timeout_ms refuse 1.5, never cut to 1 ms.
	if d > time.Millisecond && d%time.Millisecond != 0 {
		return invalidArgument("timeout_ms", fmt.Sprintf("must be a whole number of milliseconds, got %v", d))
	}
	var ms uint64
	if d > 0 {
		ms = uint64(d / time.Millisecond)
	}
	return checkTimeoutMs(ms)
}

func honoursContext(client redis.UniversalClient) bool {
	switch c := client.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	}
	return false
}

// Policy is the policy the Limiter checks, with an empty Namespace or
// Algorithm filled in with the defaults, and Buckets the count core uses: a
// BucketedWindow's given count or core's default (60) for a zero Buckets,
// and 0 for the other algorithms. A policy of Limits reports them so, in
// their order (Policy.Limits is a copy of the Limiter's). New or NewMemory
// with it makes the same policy (the same keys).
func (l *Limiter) Policy() Policy {
	if l == nil {
		return Policy{}
	}
	p := l.policy
	p.Limits = slices.Clone(p.Limits)
	return p
}

// Close releases the C memory the Limiter holds; it does not close the Redis
// client. Safe to call more than once; later checks return ErrClosed.
func (l *Limiter) Close() error {
	if err := l.made(); err != nil {
		return err
	}
	l.calls.close()
	l.handle.free()
	if l.memory != nil && !l.sharedMemory {
		l.memory.free()
	}
	if l.deny != nil {
		l.deny.free()
	}
	return nil
}

// Key is the Redis key of tenant under the Limiter's policy (the first
// limit's, for a policy of several: Keys has them all).
func (l *Limiter) Key(tenant string) (string, error) {
	if err := l.made(); err != nil {
		return "", err
	}
	return l.handle.key(tenant)
}

// Keys are the Redis keys of tenant, one per limit of the policy in their
// order (one for a single limit); they share one Cluster slot.
func (l *Limiter) Keys(tenant string) ([]string, error) {
	if err := l.made(); err != nil {
		return nil, err
	}
	return l.handle.keys(tenant)
}

// made refuses a nil *Limiter or a zero Limiter{}, which no constructor
// returns: a clear error where a method would dereference nil.
func (l *Limiter) made() error {
	if l == nil || l.handle == nil {
		return invalidArgument("limiter", "must be made by New or NewMemory, not nil or a zero Limiter")
	}
	return nil
}

// Acquire takes one permit for tenant, at Redis time (answered by the deny
// cache while tenant's last denial holds; see WithDenyCache).
func (l *Limiter) Acquire(ctx context.Context, tenant string) (Decision, error) {
	return l.check(ctx, tenant, 1, nil, modeAcquire)
}

// AcquireN takes cost permits for tenant at once (all or none), at Redis
// time (answered by the deny cache while tenant's last denial holds for this
// cost; see WithDenyCache).
func (l *Limiter) AcquireN(ctx context.Context, tenant string, cost uint64) (Decision, error) {
	return l.check(ctx, tenant, cost, nil, modeAcquire)
}

// AcquireAt is AcquireN at the caller's time nowMs (milliseconds since the
// epoch, or any clock every worker shares): for tests and replays. It always
// asks Redis (the deny cache is for Redis time only).
func (l *Limiter) AcquireAt(ctx context.Context, tenant string, cost, nowMs uint64) (Decision, error) {
	return l.check(ctx, tenant, cost, &nowMs, modeAcquire)
}

// Peek answers what AcquireN would, recording nothing.
func (l *Limiter) Peek(ctx context.Context, tenant string, cost uint64) (Decision, error) {
	return l.check(ctx, tenant, cost, nil, modePeek)
}

// PeekAt is Peek at the caller's time nowMs.
func (l *Limiter) PeekAt(ctx context.Context, tenant string, cost, nowMs uint64) (Decision, error) {
	return l.check(ctx, tenant, cost, &nowMs, modePeek)
}

// Reset forgets everything recorded for tenant (every limit's key, and the
// tenant's entry in every Limiter's deny cache of the process, this one's
// cache on or off); true if anything was.
func (l *Limiter) Reset(ctx context.Context, tenant string) (bool, error) {
	if err := l.made(); err != nil {
		return false, err
	}
	if err := checkContext(ctx); err != nil {
		return false, err
	}
	if l.memory != nil {
		return l.memory.reset(l.handle, tenant)
	}
	keys, err := l.handle.keys(tenant)
	if err != nil {
		return false, err
	}
	l.forgetDenials(tenant)
	var removed int64
	err = l.bounded(ctx, func(ctx context.Context) error {
		n, err := l.client.Del(ctx, keys...).Result()
		removed = n
		if isServerError(err) {
			return mapCommandError(err.Error(), err)
		}
		return err
	})
	// Again: a denial Redis gave before the DEL may have come back, and been
	// cached, while it ran.
	l.forgetDenials(tenant)
	if err != nil {
		return false, l.redisError(err)
	}
	return removed > 0, nil
}

// forgetDenials drops tenant's cached denial in every Limiter's cache of the
// process, this one's cache on or off.
func (l *Limiter) forgetDenials(tenant string) {
	if l.deny != nil {
		l.deny.forget(tenant)
	} else {
		forgetTenant(tenant)
	}
}

func (l *Limiter) check(ctx context.Context, tenant string, cost uint64, now *uint64, mode callMode) (Decision, error) {
	if err := l.made(); err != nil {
		return Decision{}, err
	}
	if err := checkContext(ctx); err != nil {
		// An acquire the caller's context refused is still one the
		// observers count, as the error the caller gets.
		if mode == modeAcquire {
			l.observe(tenant, cost, Decision{}, err)
		}
		return Decision{}, err
	}
	var d Decision
	var err error
	if l.memory != nil {
		// The clock stands in for Redis's: it expires keys even when the
		// caller passes its own now, as Redis's PEXPIRE runs on server time.
		// Core refuses one past 2^52 ms where it is the script's time.
		clock := l.cfg.clock().UnixMilli()
		if clock < 0 {
			return Decision{}, invalidArgument("clock", fmt.Sprintf("read %d ms, before 1970; the engine's clock must be Unix time", clock))
		}
		d, err = l.memory.check(l.handle, tenant, cost, now, uint64(clock), mode)
	} else if call, callErr := l.callFor(tenant, cost, now, mode); callErr != nil {
		// Core checks the call before the deny cache may answer it: a cost
		// over the limit is the caller's bug, cached denial or not.
		err = callErr
	} else if l.deny != nil && mode == modeAcquire && now == nil {
		// Only acquires on Redis time use the deny cache.
		mono := l.monoMs()
		if local, hit := l.deny.check(tenant, cost, mono); hit {
			l.observeLocal(tenant, cost, local)
			return local, nil
		}
		if d, err = l.checkRedis(ctx, call, mode); err == nil {
			// The time before the call: the cached wait never outlasts Redis's.
			l.deny.record(tenant, cost, d, mono)
		}
	} else {
		d, err = l.checkRedis(ctx, call, mode)
	}
	if mode == modeAcquire {
		l.observe(tenant, cost, d, err)
	}
	return d, err
}

// monoMs is the deny cache's clock: milliseconds on the monotonic clock
// since the Limiter was made.
func (l *Limiter) monoMs() uint64 { return uint64(max(time.Since(l.monoStart).Milliseconds(), 0)) }

// keptCallsMax is how many tenants' calls each generation of keptCalls holds.
const keptCallsMax = 2048

// keptCalls holds core's call for Acquire(tenant) (cost 1, Redis TIME) by
// tenant: it depends on the tenant alone, and building it is much of the
// binding's CPU per check. Two generations approximate LRU without
// reordering on every hit (a hit in the old one moves to the young one; a
// full young one replaces the old), as in the other bindings. The calls
// are never written after core built them, so checks share them.
type keptCalls struct {
	mu         sync.Mutex
	young, old map[string]scriptCall
	// closed: the Limiter is closed, so every check goes to core (ErrClosed).
	closed bool
}

func (k *keptCalls) get(tenant string) (scriptCall, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return scriptCall{}, false
	}
	if c, ok := k.young[tenant]; ok {
		return c, true
	}
	c, ok := k.old[tenant]
	if ok {
		delete(k.old, tenant)
		k.keepLocked(tenant, c)
	}
	return c, ok
}

func (k *keptCalls) keep(tenant string, c scriptCall) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.closed {
		k.keepLocked(tenant, c)
	}
}

func (k *keptCalls) keepLocked(tenant string, c scriptCall) {
	if k.young == nil || len(k.young) >= keptCallsMax {
		k.old, k.young = k.young, make(map[string]scriptCall)
	}
	k.young[tenant] = c
}

func (k *keptCalls) close() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.closed, k.young, k.old = true, nil, nil
}

// callFor is core's call for a check: a kept one for Acquire(tenant) on
// Redis time, else built (and checked) by core.
func (l *Limiter) callFor(tenant string, cost uint64, now *uint64, mode callMode) (scriptCall, error) {
	if cost != 1 || now != nil || mode != modeAcquire {
		return l.handle.buildCall(tenant, cost, now, mode)
	}
	if c, ok := l.calls.get(tenant); ok {
		return c, nil
	}
	// Core refuses a bad tenant here, so only good calls are kept.
	c, err := l.handle.buildCall(tenant, 1, nil, modeAcquire)
	if err == nil {
		l.calls.keep(tenant, c)
	}
	return c, err
}

func (l *Limiter) checkRedis(ctx context.Context, call scriptCall, mode callMode) (Decision, error) {
	sc := l.acquire
	if mode == modePeek {
		sc = l.peek
	}
	var reply any
	err := l.bounded(ctx, func(ctx context.Context) error {
		var err error
		reply, err = l.evalSha(ctx, sc, call)
		return err
	})
	if err != nil {
		return Decision{}, l.redisError(err)
	}
	ints, err := replyInts(reply)
	if err != nil {
		return Decision{}, err
	}
	return parseReply(ints, l.handle.limitCount())
}

// evalSha sends EVALSHA and, on NOSCRIPT (a restarted node, a failover, a
// Cluster node never used before), EVAL on the same keys, so on the same node,
// exactly once. A NOSCRIPT never double-counts: the script did not run.
// Error replies come back mapped by core (an *Error); other errors as they are.
//
// A call Redis refused without running it (TRYAGAIN while a slot migrates
// under a policy's keys) goes again after core's pause, while the context's
// deadline leaves room for the wait.
func (l *Limiter) evalSha(ctx context.Context, sc script, call scriptCall) (any, error) {
	key := call.keys[0]
	reply, err := l.client.EvalSha(ctx, sc.sha1, call.keys, call.args...).Result()
	for attempt := 0; isServerError(err); attempt++ {
		pause, resend := resendPause(err.Error(), attempt)
		if !resend || !waitWithin(ctx, pause) {
			break
		}
		reply, err = l.client.EvalSha(ctx, sc.sha1, call.keys, call.args...).Result()
	}
	if !isServerError(err) {
		return reply, err
	}
	if retry, e := l.serverError(err, key, false); !retry {
		return nil, e
	}
	reply, err = l.client.Eval(ctx, sc.text, call.keys, call.args...).Result()
	if isServerError(err) {
		_, e := l.serverError(err, key, true)
		return nil, e
	}
	return reply, err
}

// waitWithin waits d unless ctx ends first or its deadline is nearer than d
// (then at once); true when the wait ran its course.
func waitWithin(ctx context.Context, d time.Duration) bool {
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) <= d {
		return false
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// isServerError tells an error reply from Redis (go-redis's redis.Error)
// from everything else; redis.Nil is a reply, not an error.
func isServerError(err error) bool {
	var serverErr redis.Error
	return err != nil && errors.As(err, &serverErr) && !errors.Is(err, redis.Nil)
}

// serverError maps an error reply to a script call on key by core's table,
// the same in every binding: retry for a NOSCRIPT to EVALSHA, else the code
// and message (a WRONGTYPE names the key and the algorithm), with go-redis's
// error kept as the cause.
func (l *Limiter) serverError(err error, key string, afterRetry bool) (retry bool, e *Error) {
	return l.handle.mapServerError(err.Error(), key, afterRetry, err)
}

// checkContext refuses a nil context, and one the caller has already ended
// (canceled, or past its deadline): then nothing is sent or recorded, on
// Redis and in memory alike.
func checkContext(ctx context.Context) error {
	if ctx == nil {
		return invalidArgument("ctx", "must not be nil; pass context.Background() for no deadline")
	}
	if err := ctx.Err(); err != nil {
		return callerEnded(err)
	}
	return nil
}

// callerEnded is the error of a call the caller's own context ended (its
// cancel, or its deadline before the Limiter's timeout): ErrUnavailable, never
// a decision, with ctx.Err() as the cause.
func callerEnded(ctxErr error) *Error {
	message := "the caller's context was canceled before Redis answered"
	if errors.Is(ctxErr, context.DeadlineExceeded) {
		message = "the caller's context deadline passed before Redis answered"
	}
	return &Error{Code: ErrUnavailable, Message: message, Err: ctxErr}
}

// bounded runs one Redis exchange within the timeout. When the client would
// ignore the context deadline, the Limiter stops waiting on its own.
func (l *Limiter) bounded(caller context.Context, exchange func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(caller, l.cfg.timeout)
	defer cancel()
	var err error
	if l.clientHonoursCtx && caller.Done() == nil {
		err = exchange(ctx)
	} else {
		// go-redis honours a context's deadline (as socket deadlines) but not
		// its cancel, which a caller's context may bring without any deadline
		// (River's StopAndCancel): waited on here, or it would go unseen until
		// the timeout.
		done := make(chan error, 1)
		go func() { done <- exchange(ctx) }()
		select {
		case err = <-done:
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	// Not "Redis did not answer within the timeout" when the caller's own
	// deadline or cancel came first; a reply Redis gave stays what it was.
	var reply *Error
	if err == nil || errors.As(err, &reply) {
		return err
	}
	if ended := callerErr(caller); ended != nil {
		e := callerEnded(ended)
		if !errors.Is(err, ended) {
			e.Err = endedBy{ctxErr: ended, err: err}
		}
		return e
	}
	return err
}

// callerErr is ctx.Err(), or DeadlineExceeded already when the deadline has
// passed: a client that sets its socket deadline from the context may time
// out a moment before the context's own timer ends it.
func callerErr(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if deadline, ok := ctx.Deadline(); ok && !time.Now().Before(deadline) {
		return context.DeadlineExceeded
	}
	return nil
}

// endedBy is the client's error (a socket timeout, say) of a call the
// caller's context ended: errors.Is finds both.
type endedBy struct{ ctxErr, err error }

func (e endedBy) Error() string   { return e.err.Error() }
func (e endedBy) Unwrap() []error { return []error{e.ctxErr, e.err} }

// redisError maps what go-redis returned to a slidelimit error: error
// replies arrive mapped by core (serverError); everything else (network,
// timeout, closed pool) means Redis is unavailable, never a decision.
func (l *Limiter) redisError(err error) *Error {
	var mapped *Error
	if errors.As(err, &mapped) {
		return mapped
	}
	if errors.Is(err, redis.Nil) {
		return &Error{Code: ErrMalformedReply, Message: "script reply is nil"}
	}
	// Say what happened: a timeout and a refused connection or failed TLS
	// handshake call for different fixes.
	message := "the connection to Redis failed"
	var netErr net.Error
	// The caller's own cancel or deadline arrives as callerEnded's *Error.
	if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &netErr) && netErr.Timeout() {
		message = fmt.Sprintf("Redis did not answer within the timeout (%v)", l.cfg.timeout)
	}
	return &Error{Code: ErrUnavailable, Message: message, Err: err}
}

// replyInts checks that every element of the reply is an integer (the RESP
// types are the binding's business); core checks the rest.
func replyInts(reply any) ([]int64, error) {
	items, ok := reply.([]any)
	if !ok {
		return nil, &Error{Code: ErrMalformedReply, Message: fmt.Sprintf("script reply is %T, not an array", reply)}
	}
	ints := make([]int64, len(items))
	for i, item := range items {
		n, ok := item.(int64)
		if !ok {
			return nil, &Error{Code: ErrMalformedReply, Message: fmt.Sprintf("script reply element %d is %T, not an integer", i, item)}
		}
		ints[i] = n
	}
	return ints, nil
}
