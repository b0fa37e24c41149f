// Command river is the e2e run's River worker (docs/e2e.md): it takes the
// jobs the run feeds it (Redis list e2e:feed:river), inserts them into River
// on PostgreSQL, and works them behind riverlimit: a job calls the provider
// for its tenant's API key only after slidelimit admits it, and snoozes when
// denied. Each completed job is recorded in the Redis list e2e:done with the
// River attempt it completed on. slidelimit's metrics are served on
// E2E_METRICS_PORT by promlimit.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/slidelimit/slidelimit/go"
	"github.com/slidelimit/slidelimit/go/promlimit"
	"github.com/slidelimit/slidelimit/go/riverlimit"
)

// GeocodeArgs is one e2e job: its id and the API key (slidelimit tenant) it spends.
type GeocodeArgs struct {
	ID     string `json:"id"`
	Tenant string `json:"tenant"`
	Alg    string `json:"alg"`
}

// Kind names the job for River.
func (GeocodeArgs) Kind() string { return "e2e_geocode" }

// CounterArgs is the same job under the sliding counter: one kind per
// limiter, since Wrap puts one gate in front of one worker.
type CounterArgs GeocodeArgs

// Kind names the job for River.
func (CounterArgs) Kind() string { return "e2e_geocode_counter" }

// BucketedArgs is the same job under the bucketed window.
type BucketedArgs GeocodeArgs

// Kind names the job for River.
func (BucketedArgs) Kind() string { return "e2e_geocode_bucketed" }

// MultiArgs is the same job under a policy of two limits (the provider's two).
type MultiArgs GeocodeArgs

// Kind names the job for River.
func (MultiArgs) Kind() string { return "e2e_geocode_multi" }

// multiAlg is the job's alg under the policy of two limits.
const multiAlg = "multi"

type env struct {
	redisURL, dbURL, providerURL string
	limit, buckets, shortLimit   uint64
	window, jitter, shortWindow  time.Duration
	metricsPort, concurrency     int
}

func getenv() (env, error) {
	e := env{
		redisURL:    os.Getenv("E2E_REDIS_URL"),
		dbURL:       os.Getenv("E2E_DATABASE_URL"),
		providerURL: os.Getenv("E2E_PROVIDER_URL"),
	}
	ints := map[string]*int{"E2E_METRICS_PORT": &e.metricsPort, "E2E_CONCURRENCY": &e.concurrency}
	for name, dst := range ints {
		n, err := strconv.Atoi(os.Getenv(name))
		if err != nil {
			return e, fmt.Errorf("%s: %w", name, err)
		}
		*dst = n
	}
	var err error
	if e.limit, err = strconv.ParseUint(os.Getenv("E2E_LIMIT"), 10, 64); err != nil {
		return e, fmt.Errorf("E2E_LIMIT: %w", err)
	}
	if e.buckets, err = strconv.ParseUint(os.Getenv("E2E_BUCKETS"), 10, 64); err != nil {
		return e, fmt.Errorf("E2E_BUCKETS: %w", err)
	}
	if e.shortLimit, err = strconv.ParseUint(os.Getenv("E2E_SHORT_LIMIT"), 10, 64); err != nil {
		return e, fmt.Errorf("E2E_SHORT_LIMIT: %w", err)
	}
	durations := map[string]*time.Duration{
		"E2E_WINDOW_MS": &e.window, "E2E_JITTER_MS": &e.jitter, "E2E_SHORT_WINDOW_MS": &e.shortWindow,
	}
	for name, dst := range durations {
		ms, err := strconv.ParseUint(os.Getenv(name), 10, 64)
		if err != nil {
			return e, fmt.Errorf("%s: %w", name, err)
		}
		*dst = time.Duration(ms) * time.Millisecond
	}
	if e.redisURL == "" || e.dbURL == "" || e.providerURL == "" {
		return e, errors.New("E2E_REDIS_URL, E2E_DATABASE_URL and E2E_PROVIDER_URL must be set")
	}
	return e, nil
}

// geocoder calls the provider and records the completion.
type geocoder struct {
	rdb      *redis.Client
	provider string
	http     *http.Client
}

// snoozes is how many times River snoozed the job (its metadata's "snoozes").
func snoozes(metadata []byte) int {
	var meta struct {
		Snoozes int `json:"snoozes"`
	}
	_ = json.Unmarshal(metadata, &meta)
	return meta.Snoozes
}

func (g *geocoder) call(ctx context.Context, a GeocodeArgs, attempt, deferrals int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, g.provider+"/geocode?address="+a.ID, nil)
	if err != nil {
		return err
	}
	req.Header.Set("X-Api-Key", a.Tenant)
	req.Header.Set("X-Job-Id", a.ID)
	req.Header.Set("X-System", "river")
	req.Header.Set("X-Sent-Ms", strconv.FormatInt(time.Now().UnixMilli(), 10))
	resp, err := g.http.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	// A 429 is recorded, not retried: the run counts it (the counter's overshoot).
	rec, _ := json.Marshal(map[string]any{
		"id": a.ID, "system": "river", "tenant": a.Tenant, "alg": a.Alg, "status": resp.StatusCode,
		"attempt": attempt, "deferrals": deferrals, "ms": time.Now().UnixMilli(),
	})
	return g.rdb.RPush(ctx, "e2e:done", rec).Err()
}

type logWorker struct {
	river.WorkerDefaults[GeocodeArgs]
	g *geocoder
}

func (w logWorker) Work(ctx context.Context, job *river.Job[GeocodeArgs]) error {
	return w.g.call(ctx, job.Args, job.Attempt, snoozes(job.Metadata))
}

type counterWorker struct {
	river.WorkerDefaults[CounterArgs]
	g *geocoder
}

func (w counterWorker) Work(ctx context.Context, job *river.Job[CounterArgs]) error {
	return w.g.call(ctx, GeocodeArgs(job.Args), job.Attempt, snoozes(job.Metadata))
}

type bucketedWorker struct {
	river.WorkerDefaults[BucketedArgs]
	g *geocoder
}

func (w bucketedWorker) Work(ctx context.Context, job *river.Job[BucketedArgs]) error {
	return w.g.call(ctx, GeocodeArgs(job.Args), job.Attempt, snoozes(job.Metadata))
}

type multiWorker struct {
	river.WorkerDefaults[MultiArgs]
	g *geocoder
}

func (w multiWorker) Work(ctx context.Context, job *river.Job[MultiArgs]) error {
	return w.g.call(ctx, GeocodeArgs(job.Args), job.Attempt, snoozes(job.Metadata))
}

func main() {
	if err := run(); err != nil {
		log.Fatal(err)
	}
}

func run() error {
	e, err := getenv()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	opts, err := redis.ParseURL(e.redisURL)
	if err != nil {
		return fmt.Errorf("E2E_REDIS_URL: %w", err)
	}
	opts.ContextTimeoutEnabled = true
	opts.PoolSize = e.concurrency + 4
	rdb := redis.NewClient(opts)
	defer rdb.Close()

	registry := prometheus.NewRegistry()
	metrics, err := promlimit.NewMetrics(registry, promlimit.Options{TenantLabel: true})
	if err != nil {
		return err
	}
	limiters := map[slidelimit.Algorithm]*slidelimit.Limiter{}
	for _, alg := range []slidelimit.Algorithm{slidelimit.SlidingLog, slidelimit.BucketedWindow, slidelimit.SlidingCounter} {
		policy := slidelimit.Policy{Namespace: "rl", Resource: "geocode", Algorithm: alg, Limit: e.limit, Window: e.window}
		// Buckets only for the bucketed window: core refuses them with another algorithm.
		if alg == slidelimit.BucketedWindow {
			policy.Buckets = e.buckets
		}
		l, err := slidelimit.New(rdb, policy, slidelimit.WithObserver(metrics))
		if err != nil {
			return err
		}
		defer l.Close()
		limiters[alg] = l
	}
	// The provider's two limits, checked and recorded together: the short
	// one as a log, the long one as a bucketed window.
	multi, err := slidelimit.New(rdb, slidelimit.Policy{Namespace: "rl", Resource: "geocode", Limits: []slidelimit.Limit{
		{Algorithm: slidelimit.SlidingLog, Limit: e.shortLimit, Window: e.shortWindow},
		{Algorithm: slidelimit.BucketedWindow, Limit: e.limit, Window: e.window, Buckets: e.buckets},
	}}, slidelimit.WithObserver(metrics))
	if err != nil {
		return err
	}
	defer multi.Close()
	srv := &http.Server{Addr: fmt.Sprintf("127.0.0.1:%d", e.metricsPort),
		Handler: promhttp.HandlerFor(registry, promhttp.HandlerOpts{}), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Fatalf("metrics: %v", err)
		}
	}()
	defer srv.Close()

	pool, err := pgxpool.New(ctx, e.dbURL)
	if err != nil {
		return fmt.Errorf("database: %w", err)
	}
	defer pool.Close()
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("river migrations: %w", err)
	}

	g := &geocoder{rdb: rdb, provider: e.providerURL, http: &http.Client{Timeout: 10 * time.Second}}
	workers := river.NewWorkers()
	river.AddWorker(workers, riverlimit.Wrap[GeocodeArgs](logWorker{g: g},
		riverlimit.NewGate(limiters[slidelimit.SlidingLog], riverlimit.WithMaxJitter(e.jitter)),
		func(job *river.Job[GeocodeArgs]) (string, uint64) { return job.Args.Tenant, 1 }))
	river.AddWorker(workers, riverlimit.Wrap[BucketedArgs](bucketedWorker{g: g},
		riverlimit.NewGate(limiters[slidelimit.BucketedWindow], riverlimit.WithMaxJitter(e.jitter)),
		func(job *river.Job[BucketedArgs]) (string, uint64) { return job.Args.Tenant, 1 }))
	river.AddWorker(workers, riverlimit.Wrap[MultiArgs](multiWorker{g: g},
		riverlimit.NewGate(multi, riverlimit.WithMaxJitter(e.jitter)),
		func(job *river.Job[MultiArgs]) (string, uint64) { return job.Args.Tenant, 1 }))
	river.AddWorker(workers, riverlimit.Wrap[CounterArgs](counterWorker{g: g},
		riverlimit.NewGate(limiters[slidelimit.SlidingCounter], riverlimit.WithMaxJitter(e.jitter)),
		func(job *river.Job[CounterArgs]) (string, uint64) { return job.Args.Tenant, 1 }))
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: e.concurrency}},
		Workers: workers,
		// Snoozes are short in the scaled run: look for due jobs often.
		FetchCooldown:     20 * time.Millisecond,
		FetchPollInterval: 100 * time.Millisecond,
	})
	if err != nil {
		return err
	}
	if err := client.Start(ctx); err != nil {
		return err
	}
	log.Printf("river worker ready (metrics on :%d)", e.metricsPort)
	feedErr := feed(ctx, rdb, client)
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := client.Stop(stopCtx); err != nil {
		return err
	}
	if feedErr != nil && !errors.Is(feedErr, context.Canceled) {
		return feedErr
	}
	return nil
}

// feed inserts every job the run pushes to e2e:feed:river until ctx ends.
func feed(ctx context.Context, rdb *redis.Client, client *river.Client[pgx.Tx]) error {
	for {
		res, err := rdb.BLPop(ctx, time.Second, "e2e:feed:river").Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return err
		}
		var a GeocodeArgs
		if err := json.Unmarshal([]byte(res[1]), &a); err != nil {
			return fmt.Errorf("feed: %w", err)
		}
		var args river.JobArgs = a
		switch a.Alg {
		case string(slidelimit.SlidingCounter):
			args = CounterArgs(a)
		case string(slidelimit.BucketedWindow):
			args = BucketedArgs(a)
		case multiAlg:
			args = MultiArgs(a)
		}
		if _, err := client.Insert(ctx, args, nil); err != nil {
			return fmt.Errorf("insert: %w", err)
		}
	}
}
