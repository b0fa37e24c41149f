package riverlimit_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"

	"github.com/slidelimit/slidelimit/go"
	"github.com/slidelimit/slidelimit/go/internal/testredis"
	"github.com/slidelimit/slidelimit/go/riverlimit"
)

var pool *pgxpool.Pool

// TestMain migrates the PostgreSQL that `make test-go` started
// (go/scripts/with-postgres.sh) with River's own migrations.
func TestMain(m *testing.M) {
	url := os.Getenv("SLIDELIMIT_TEST_DATABASE_URL")
	if url == "" {
		fmt.Fprintln(os.Stderr, "SLIDELIMIT_TEST_DATABASE_URL is not set: run `make test-go` (go/scripts/with-postgres.sh starts one)")
		os.Exit(1)
	}
	ctx := context.Background()
	var err error
	if pool, err = pgxpool.New(ctx, url); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err == nil {
		_, err = migrator.Migrate(ctx, rivermigrate.DirectionUp, nil)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "river migrations:", err)
		os.Exit(1)
	}
	code := m.Run()
	pool.Close()
	os.Exit(code)
}

type geocodeArgs struct {
	APIKey  string `json:"api_key"`
	Address string `json:"address"`
}

func (geocodeArgs) Kind() string { return "geocode" }

// run records what the work saw and what the gate did.
type run struct {
	mu       sync.Mutex
	attempts []int
	snoozes  []int
	outcomes []riverlimit.Outcome
}

func (r *run) work(_ context.Context, job *river.Job[geocodeArgs]) error {
	var meta struct {
		Snoozes int `json:"snoozes"`
	}
	_ = json.Unmarshal(job.Metadata, &meta)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.attempts = append(r.attempts, job.Attempt)
	r.snoozes = append(r.snoozes, meta.Snoozes)
	return nil
}

func (r *run) observe(_ *rivertype.JobRow, o riverlimit.Outcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.outcomes = append(r.outcomes, o)
}

func (r *run) snapshot() ([]int, []int, []riverlimit.Outcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]int(nil), r.attempts...), append([]int(nil), r.snoozes...), append([]riverlimit.Outcome(nil), r.outcomes...)
}

func limiter(t *testing.T, client redis.UniversalClient, limit, window uint64, opts ...slidelimit.Option) *slidelimit.Limiter {
	t.Helper()
	l, err := slidelimit.New(client, slidelimit.Policy{Namespace: "rl-go-river", Resource: "geocode-" + t.Name(),
		Algorithm: slidelimit.SlidingLog, Limit: limit, WindowMs: window}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// startRiver runs a real River client on its own queue and returns it with a
// subscription to the events the tests wait for.
func startRiver(t *testing.T, workers *river.Workers, middleware ...rivertype.Middleware) (*river.Client[pgx.Tx], <-chan *river.Event, string) {
	t.Helper()
	queue := fmt.Sprintf("q_%d", time.Now().UnixNano())
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:            map[string]river.QueueConfig{queue: {MaxWorkers: 2}},
		Workers:           workers,
		Middleware:        middleware,
		FetchCooldown:     5 * time.Millisecond,
		FetchPollInterval: 10 * time.Millisecond,
		MaxAttempts:       1, // A snooze that spent an attempt would leave none.
		TestOnly:          true,
	})
	if err != nil {
		t.Fatal(err)
	}
	events, cancel := client.Subscribe(river.EventKindJobCompleted, river.EventKindJobSnoozed, river.EventKindJobFailed)
	ctx := context.Background()
	if err := client.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		stopCtx, stop := context.WithTimeout(ctx, 10*time.Second)
		defer stop()
		_ = client.Stop(stopCtx)
	})
	return client, events, queue
}

func insert(t *testing.T, client *river.Client[pgx.Tx], queue string, args geocodeArgs) *rivertype.JobRow {
	t.Helper()
	res, err := client.Insert(context.Background(), args, &river.InsertOpts{Queue: queue})
	if err != nil {
		t.Fatal(err)
	}
	return res.Job
}

func next(t *testing.T, events <-chan *river.Event, within time.Duration) *river.Event {
	t.Helper()
	select {
	case e := <-events:
		return e
	case <-time.After(within):
		t.Fatalf("no River event within %v", within)
		return nil
	}
}

// A denied job snoozes for the retry-after hint plus jitter without running
// its work, and the snooze spends no attempt: River decrements it, so the
// run that finally works sees Attempt 1 and one snooze in its metadata.
func TestDeniedJobSnoozesWithoutSpendingAnAttempt(t *testing.T) {
	rc := testredis.Client(t, nil)
	l := limiter(t, rc, 1, 1500)
	if _, err := l.Reset(context.Background(), "key-1"); err != nil {
		t.Fatal(err)
	}
	// Another worker (any binding) has just spent the budget.
	if d, err := l.Acquire(context.Background(), "key-1"); err != nil || !d.Allowed {
		t.Fatalf("%+v %v", d, err)
	}
	var r run
	gate := riverlimit.NewGate(l, riverlimit.WithMaxJitter(100*time.Millisecond), riverlimit.WithObserver(r.observe))
	workers := river.NewWorkers()
	river.AddWorker(workers, riverlimit.Wrap[geocodeArgs](river.WorkFunc(r.work), gate,
		func(job *river.Job[geocodeArgs]) (string, uint64) { return job.Args.APIKey, 1 }))
	client, events, queue := startRiver(t, workers)

	start := time.Now()
	insert(t, client, queue, geocodeArgs{APIKey: "key-1", Address: "1 Main St"})

	snoozed := next(t, events, 10*time.Second)
	if snoozed.Kind != river.EventKindJobSnoozed {
		t.Fatalf("first event %s, want job_snoozed", snoozed.Kind)
	}
	if snoozed.Job.Attempt != 0 || len(snoozed.Job.Errors) != 0 {
		t.Fatalf("a snooze must not spend an attempt: attempt %d, errors %v", snoozed.Job.Attempt, snoozed.Job.Errors)
	}
	done := next(t, events, 10*time.Second)
	if done.Kind != river.EventKindJobCompleted {
		t.Fatalf("second event %s, want job_completed", done.Kind)
	}
	elapsed := time.Since(start)

	attempts, snoozes, outcomes := r.snapshot()
	if len(attempts) != 1 || attempts[0] != 1 || snoozes[0] != 1 {
		t.Fatalf("the work should run once, at attempt 1 after 1 snooze: attempts %v, snoozes %v", attempts, snoozes)
	}
	if done.Job.Attempt != 1 || len(done.Job.Errors) != 0 {
		t.Fatalf("completed job: attempt %d, errors %v", done.Job.Attempt, done.Job.Errors)
	}
	if len(outcomes) != 2 || outcomes[0].Ran || !outcomes[1].Ran {
		t.Fatalf("outcomes %+v", outcomes)
	}
	hint := outcomes[0].Decision.RetryAfter()
	if hint <= 0 || outcomes[0].Snooze < hint || outcomes[0].Snooze >= hint+100*time.Millisecond {
		t.Fatalf("snooze %v should be the hint %v plus jitter below 100ms", outcomes[0].Snooze, hint)
	}
	if elapsed < hint {
		t.Fatalf("the work ran after %v, before the budget came back (%v)", elapsed, hint)
	}
}

// Redis unreachable: the job snoozes with a growing backoff, never runs its
// work and never records a failed attempt.
func TestUnavailableRedisSnoozesWithBackoff(t *testing.T) {
	rc := redis.NewClient(&redis.Options{Addr: testredis.Unreachable(t), MaxRetries: -1})
	defer rc.Close()
	l := limiter(t, rc, 10, 1000, slidelimit.WithTimeout(200*time.Millisecond))
	var r run
	gate := riverlimit.NewGate(l, riverlimit.WithMaxJitter(0), riverlimit.WithObserver(r.observe),
		riverlimit.WithBackoff(func(snoozes int) time.Duration { return time.Duration(snoozes+1) * 150 * time.Millisecond }))
	workers := river.NewWorkers()
	river.AddWorker(workers, riverlimit.Wrap[geocodeArgs](river.WorkFunc(r.work), gate,
		func(job *river.Job[geocodeArgs]) (string, uint64) { return job.Args.APIKey, 1 }))
	client, events, queue := startRiver(t, workers)
	insert(t, client, queue, geocodeArgs{APIKey: "key-1"})

	for i := 0; i < 3; i++ {
		e := next(t, events, 10*time.Second)
		if e.Kind != river.EventKindJobSnoozed || e.Job.Attempt != 0 || len(e.Job.Errors) != 0 {
			t.Fatalf("event %d: %s, attempt %d, errors %v", i, e.Kind, e.Job.Attempt, e.Job.Errors)
		}
	}
	attempts, _, outcomes := r.snapshot()
	if len(attempts) != 0 {
		t.Fatalf("the work ran without a budget: %v", attempts)
	}
	for i, o := range outcomes[:3] {
		if o.Ran || o.Snooze != time.Duration(i+1)*150*time.Millisecond {
			t.Fatalf("outcome %d: %+v", i, o)
		}
		if code, _ := slidelimit.CodeOf(o.Err); code != slidelimit.ErrUnavailable {
			t.Fatalf("outcome %d: %v", i, o.Err)
		}
	}
}

// Fail-open is an explicit choice: with it, an unreachable Redis lets the work run.
func TestFailOpenRunsTheWork(t *testing.T) {
	rc := redis.NewClient(&redis.Options{Addr: testredis.Unreachable(t), MaxRetries: -1})
	defer rc.Close()
	l := limiter(t, rc, 10, 1000, slidelimit.WithTimeout(200*time.Millisecond))
	var r run
	gate := riverlimit.NewGate(l, riverlimit.WithFailOpen(), riverlimit.WithObserver(r.observe))
	workers := river.NewWorkers()
	river.AddWorker(workers, riverlimit.Wrap[geocodeArgs](river.WorkFunc(r.work), gate,
		func(job *river.Job[geocodeArgs]) (string, uint64) { return job.Args.APIKey, 1 }))
	client, events, queue := startRiver(t, workers)
	insert(t, client, queue, geocodeArgs{APIKey: "key-1"})
	if e := next(t, events, 10*time.Second); e.Kind != river.EventKindJobCompleted || e.Job.Attempt != 1 {
		t.Fatalf("%s attempt %d", e.Kind, e.Job.Attempt)
	}
	attempts, _, outcomes := r.snapshot()
	if len(attempts) != 1 || !outcomes[0].Ran || outcomes[0].Err == nil {
		t.Fatalf("attempts %v outcomes %+v", attempts, outcomes)
	}
}

// As global middleware: the tenant comes from the encoded args, a job the
// TenantFunc skips runs unchecked, and a budget of 2 lets exactly 2 of 5
// jobs of one tenant run now while the other 3 snooze.
func TestMiddlewareGatesEveryJob(t *testing.T) {
	rc := testredis.Client(t, nil)
	l := limiter(t, rc, 2, 60_000)
	if _, err := l.Reset(context.Background(), "key-2"); err != nil {
		t.Fatal(err)
	}
	var r run
	gate := riverlimit.NewGate(l, riverlimit.WithObserver(r.observe))
	mw := riverlimit.NewMiddleware(gate, func(job *rivertype.JobRow) (string, uint64, bool) {
		var args geocodeArgs
		if err := json.Unmarshal(job.EncodedArgs, &args); err != nil || args.APIKey == "" {
			return "", 0, false
		}
		return args.APIKey, 1, true
	})
	workers := river.NewWorkers()
	river.AddWorker(workers, river.WorkFunc(r.work))
	client, events, queue := startRiver(t, workers, mw)
	for i := 0; i < 5; i++ {
		insert(t, client, queue, geocodeArgs{APIKey: "key-2", Address: fmt.Sprint(i)})
	}
	insert(t, client, queue, geocodeArgs{Address: "internal job, no API key"})
	completed, snoozed := 0, 0
	for completed+snoozed < 6 {
		switch e := next(t, events, 10*time.Second); e.Kind {
		case river.EventKindJobCompleted:
			completed++
		case river.EventKindJobSnoozed:
			snoozed++
			if e.Job.Attempt != 0 {
				t.Fatalf("snoozed job at attempt %d", e.Job.Attempt)
			}
		default:
			t.Fatalf("unexpected %s", e.Kind)
		}
	}
	if completed != 3 || snoozed != 3 {
		t.Fatalf("completed %d (2 within budget + 1 unchecked), snoozed %d", completed, snoozed)
	}
	_, _, outcomes := r.snapshot()
	if len(outcomes) != 5 {
		t.Fatalf("the unchecked job must not reach the gate: %d outcomes", len(outcomes))
	}
}

// A Redis that accepts connections and never answers: each check gives up at
// the limiter's timeout, the job snoozes without running its work, and after
// several snoozes River still holds it at attempt 0 with no error recorded.
func TestHangingRedisSnoozesWithinTheTimeout(t *testing.T) {
	const timeout = 200 * time.Millisecond
	rc := redis.NewClient(&redis.Options{Addr: testredis.Silent(t), ContextTimeoutEnabled: true})
	defer rc.Close()
	l := limiter(t, rc, 10, 1000, slidelimit.WithTimeout(timeout))
	var r run
	gate := riverlimit.NewGate(l, riverlimit.WithMaxJitter(0), riverlimit.WithObserver(r.observe),
		riverlimit.WithBackoff(func(int) time.Duration { return 100 * time.Millisecond }))

	// The gate alone: a snooze, in about the timeout, and no work.
	start := time.Now()
	err := gate.Run(context.Background(), &rivertype.JobRow{}, "key-1", 1, func(context.Context) error {
		t.Fatal("the work ran without a budget")
		return nil
	})
	took := time.Since(start)
	var snooze *river.JobSnoozeError
	if !errors.As(err, &snooze) || snooze.Duration != 100*time.Millisecond {
		t.Fatalf("want a 100ms snooze, got %v", err)
	}
	if took < timeout-20*time.Millisecond || took > timeout+200*time.Millisecond {
		t.Fatalf("the check gave up after %v, the timeout is %v", took, timeout)
	}

	// The same through a real River client.
	workers := river.NewWorkers()
	river.AddWorker(workers, riverlimit.Wrap[geocodeArgs](river.WorkFunc(r.work), gate,
		func(job *river.Job[geocodeArgs]) (string, uint64) { return job.Args.APIKey, 1 }))
	client, events, queue := startRiver(t, workers)
	job := insert(t, client, queue, geocodeArgs{APIKey: "key-1"})
	for i := 0; i < 3; i++ {
		e := next(t, events, 10*time.Second)
		if e.Kind != river.EventKindJobSnoozed || e.Job.Attempt != 0 || len(e.Job.Errors) != 0 {
			t.Fatalf("event %d: %s, attempt %d, errors %v", i, e.Kind, e.Job.Attempt, e.Job.Errors)
		}
	}
	// Stop fetching first: a run in flight holds attempt 1 until it snoozes,
	// and Stop waits for it to finish and be recorded.
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := client.Stop(stopCtx); err != nil {
		t.Fatal(err)
	}
	row, err := client.JobGet(context.Background(), job.ID)
	if err != nil {
		t.Fatal(err)
	}
	if row.Attempt != 0 || len(row.Errors) != 0 || row.State == rivertype.JobStateDiscarded || row.State == rivertype.JobStateRetryable {
		t.Fatalf("stored job: attempt %d, state %s, errors %v", row.Attempt, row.State, row.Errors)
	}
	attempts, _, outcomes := r.snapshot()
	if len(attempts) != 0 {
		t.Fatalf("the work ran: %v", attempts)
	}
	for i, o := range outcomes {
		if o.Ran || !errors.Is(o.Err, slidelimit.ErrUnavailable) {
			t.Fatalf("outcome %d: %+v", i, o)
		}
	}
}

// badGeocodeArgs has geocodeArgs' kind and JSON that does not decode into it.
type badGeocodeArgs struct {
	APIKey int `json:"api_key"`
}

func (badGeocodeArgs) Kind() string { return "geocode" }

// The middleware's TenantFunc runs before River decodes the args for the
// worker. Returning ok = false when they do not decode (as docs/go.md does)
// lets no work run unchecked: River decodes the same args before the work,
// fails the attempt with the decode error, and the gate is never asked.
func TestUndecodableArgsFailWithoutRunningTheWork(t *testing.T) {
	l := limiter(t, testredis.Client(t, nil), 5, 60_000)
	var r run
	gate := riverlimit.NewGate(l, riverlimit.WithObserver(r.observe))
	var decodeErrs atomic.Int32
	mw := riverlimit.NewMiddleware(gate, func(job *rivertype.JobRow) (string, uint64, bool) {
		if job.Kind != (geocodeArgs{}).Kind() {
			return "", 0, false
		}
		var args geocodeArgs
		if err := json.Unmarshal(job.EncodedArgs, &args); err != nil {
			decodeErrs.Add(1)
			return "", 0, false
		}
		return args.APIKey, 1, true
	})
	workers := river.NewWorkers()
	river.AddWorker(workers, river.WorkFunc(r.work))
	client, events, queue := startRiver(t, workers, mw)
	if _, err := client.Insert(context.Background(), badGeocodeArgs{APIKey: 17}, &river.InsertOpts{Queue: queue}); err != nil {
		t.Fatal(err)
	}
	e := next(t, events, 10*time.Second)
	if e.Kind != river.EventKindJobFailed || e.Job.Attempt != 1 || len(e.Job.Errors) != 1 {
		t.Fatalf("%s at attempt %d, errors %v", e.Kind, e.Job.Attempt, e.Job.Errors)
	}
	attempts, _, outcomes := r.snapshot()
	if n := decodeErrs.Load(); n != 1 || len(attempts) != 0 || len(outcomes) != 0 {
		t.Fatalf("decode errors %d, work ran %d times, gate asked %d times; want 1, 0, 0",
			n, len(attempts), len(outcomes))
	}
}

// A retry past the longest Duration (a bucketed window of one bucket holds a
// permit up to twice its 200 years) snoozes the job for the longest Duration:
// adding the jitter must not wrap it negative, which JobSnooze panics on.
func TestARetryPastTheLongestDurationSnoozesThatLong(t *testing.T) {
	const year = 365 * 24 * 3600 * 1000
	l, err := slidelimit.NewMemory(slidelimit.Policy{
		Resource: "lifetime", Algorithm: slidelimit.BucketedWindow, Limit: 1, WindowMs: 200 * year, Buckets: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if d, err := l.Acquire(ctx, "key-1"); err != nil || !d.Allowed {
		t.Fatalf("%+v %v", d, err)
	}
	var r run
	gate := riverlimit.NewGate(l, riverlimit.WithMaxJitter(time.Second), riverlimit.WithObserver(r.observe))
	err = gate.Run(ctx, &rivertype.JobRow{}, "key-1", 1, func(context.Context) error {
		t.Error("the work ran without a permit")
		return nil
	})
	var snooze *rivertype.JobSnoozeError
	if !errors.As(err, &snooze) || snooze.Duration != math.MaxInt64 {
		t.Fatalf("want a snooze of the longest Duration, got %v", err)
	}
	if _, _, outcomes := r.snapshot(); len(outcomes) != 1 || outcomes[0].Decision.RetryAfterMs <= uint64(math.MaxInt64/int64(time.Millisecond)) {
		t.Fatalf("outcomes %+v", outcomes)
	}
}

// What a gate's options can hand River is checked before River sees it:
// JobSnooze panics on a negative wait, so a backoff that returns one (an
// overflowed shift, say) fails the attempt with an error instead; the
// longest backoff plus jitter saturates; a nil backoff is the default and a
// nil limiter an error, neither a nil call.
func TestBadGateOptionsAreErrorsNotPanics(t *testing.T) {
	rc := redis.NewClient(&redis.Options{Addr: testredis.Unreachable(t), MaxRetries: -1})
	defer rc.Close()
	l := limiter(t, rc, 10, 1000, slidelimit.WithTimeout(100*time.Millisecond))
	ctx := context.Background()
	job := &rivertype.JobRow{Metadata: []byte(`{"snoozes":40}`)}
	work := func(context.Context) error {
		t.Error("the work ran without a permit")
		return nil
	}

	shifted := riverlimit.NewGate(l, riverlimit.WithBackoff(func(snoozes int) time.Duration { return time.Second << snoozes }))
	err := shifted.Run(ctx, job, "key-1", 1, work)
	if !errors.Is(err, slidelimit.ErrInvalidArgument) || errors.Is(err, slidelimit.ErrUnavailable) ||
		!strings.Contains(err.Error(), "after 40 snoozes") {
		t.Fatalf("a negative backoff: want ErrInvalidArgument naming it, got %v", err)
	}

	longest := riverlimit.NewGate(l, riverlimit.WithMaxJitter(time.Second),
		riverlimit.WithBackoff(func(int) time.Duration { return math.MaxInt64 }))
	var snooze *rivertype.JobSnoozeError
	if err := longest.Run(ctx, job, "key-1", 1, work); !errors.As(err, &snooze) || snooze.Duration != math.MaxInt64 {
		t.Fatalf("the longest backoff plus jitter: want a snooze of the longest Duration, got %v", err)
	}

	var r run
	byDefault := riverlimit.NewGate(l, riverlimit.WithBackoff(nil), riverlimit.WithMaxJitter(0), riverlimit.WithObserver(r.observe))
	if err := byDefault.Run(ctx, &rivertype.JobRow{}, "key-1", 1, work); !errors.As(err, &snooze) ||
		snooze.Duration != riverlimit.DefaultBackoffInitial {
		t.Fatalf("WithBackoff(nil): want the default's first snooze, got %v", err)
	}

	if err := riverlimit.NewGate(nil).Run(ctx, job, "key-1", 1, work); !errors.Is(err, slidelimit.ErrInvalidArgument) {
		t.Fatalf("a nil limiter: want ErrInvalidArgument, got %v", err)
	}

	// Nil parts of the middleware and of Wrap: errors on the job, never a
	// nil call in the worker.
	tenantOf := func(*rivertype.JobRow) (string, uint64, bool) { return "key-1", 1, true }
	inner := func(context.Context) error { return nil }
	var nilGate *riverlimit.Gate
	for name, err := range map[string]error{
		"a nil Gate's Run":          nilGate.Run(ctx, job, "key-1", 1, work),
		"Run with nil work":         byDefault.Run(ctx, job, "key-1", 1, nil),
		"a middleware's nil gate":   riverlimit.NewMiddleware(nil, tenantOf).Work(ctx, job, inner),
		"a middleware's nil tenant": riverlimit.NewMiddleware(byDefault, nil).Work(ctx, job, inner),
		"Wrap's nil worker": riverlimit.Wrap[geocodeArgs](nil, byDefault,
			func(*river.Job[geocodeArgs]) (string, uint64) { return "key-1", 1 }).Work(ctx, &river.Job[geocodeArgs]{JobRow: job}),
		"Wrap's nil tenant": riverlimit.Wrap[geocodeArgs](river.WorkFunc(func(context.Context, *river.Job[geocodeArgs]) error { return nil }),
			byDefault, nil).Work(ctx, &river.Job[geocodeArgs]{JobRow: job}),
	} {
		if !errors.Is(err, slidelimit.ErrInvalidArgument) {
			t.Errorf("%s: want ErrInvalidArgument, got %v", name, err)
		}
	}
	// River asks a worker for these before Work: a wrapped nil worker answers
	// River's defaults instead of panicking.
	nilWorker := riverlimit.Wrap[geocodeArgs](nil, byDefault,
		func(*river.Job[geocodeArgs]) (string, uint64) { return "key-1", 1 })
	typed := &river.Job[geocodeArgs]{JobRow: job}
	if m, timeout, retry := nilWorker.Middleware(job), nilWorker.Timeout(typed), nilWorker.NextRetry(typed); m != nil ||
		timeout != 0 || !retry.IsZero() {
		t.Errorf("a wrapped nil worker: middleware %v, timeout %v, next retry %v; want River's defaults", m, timeout, retry)
	}
}

// A job whose own context has ended (its JobTimeout, River's StopAndCancel)
// gets the limiter's error as its own, for River to retry: never an outage's
// snooze, which a timeout shorter than a check would repeat for ever, nor,
// failing open, work without a permit.
func TestAnEndedJobContextIsTheJobsError(t *testing.T) {
	hanging := redis.NewClient(&redis.Options{Addr: testredis.Silent(t), ContextTimeoutEnabled: true})
	defer hanging.Close()
	up := limiter(t, testredis.Client(t, nil), 10, 1000)
	stuck := limiter(t, hanging, 10, 1000, slidelimit.WithTimeout(2*time.Second))
	work := func(context.Context) error {
		t.Error("the work ran")
		return nil
	}
	want := func(what string, err, cause error) {
		t.Helper()
		var snooze *river.JobSnoozeError
		if errors.As(err, &snooze) || !errors.Is(err, cause) || !errors.Is(err, slidelimit.ErrUnavailable) {
			t.Fatalf("%s: want the job's error (%v), got %v", what, cause, err)
		}
	}
	for _, failOpen := range []bool{false, true} {
		opts := []riverlimit.Option{}
		if failOpen {
			opts = append(opts, riverlimit.WithFailOpen())
		}
		canceled, cancel := context.WithCancel(context.Background())
		cancel()
		for name, l := range map[string]*slidelimit.Limiter{"redis up": up, "redis hanging": stuck} {
			err := riverlimit.NewGate(l, opts...).Run(canceled, &rivertype.JobRow{}, "key-1", 1, work)
			want(fmt.Sprintf("%s, fail open %v, canceled before", name, failOpen), err, context.Canceled)
		}
		// The job's timeout passes while the check waits on Redis.
		timed, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		err := riverlimit.NewGate(stuck, opts...).Run(timed, &rivertype.JobRow{}, "key-1", 1, work)
		cancel()
		want(fmt.Sprintf("fail open %v, a deadline during the check", failOpen), err, context.DeadlineExceeded)
	}
}
