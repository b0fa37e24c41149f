// Command geocode is an example River worker for the geocoding case: the
// provider allows 600 requests per rolling 60 s per API key, and every worker
// (this one, a Rust or Node worker, any number of processes) spends the same
// budget in Redis. A job over budget snoozes until the budget comes back,
// without spending an attempt.
//
//	go run ./examples/geocode -redis redis://127.0.0.1:6379/ \
//	    -database postgres://user@127.0.0.1:5432/db -jobs 20 -limit 5 -window 2s
//
// It migrates River's tables, inserts -jobs jobs for two API keys, works them
// for -run, and prints what happened to each.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"

	"github.com/slidelimit/slidelimit/go"
	"github.com/slidelimit/slidelimit/go/promlimit"
	"github.com/slidelimit/slidelimit/go/riverlimit"
)

// GeocodeArgs is one address to geocode with one customer's API key.
type GeocodeArgs struct {
	APIKey  string `json:"api_key"`
	Address string `json:"address"`
}

// Kind names the job for River.
func (GeocodeArgs) Kind() string { return "geocode" }

// GeocodeWorker would call the provider; here it only logs.
type GeocodeWorker struct {
	river.WorkerDefaults[GeocodeArgs]
}

// Work runs only when the API key's budget allows it.
func (GeocodeWorker) Work(_ context.Context, job *river.Job[GeocodeArgs]) error {
	log.Printf("geocoding %q with key %s (attempt %d)", job.Args.Address, job.Args.APIKey, job.Attempt)
	return nil
}

func main() {
	redisURL := flag.String("redis", os.Getenv("SLIDELIMIT_TEST_REDIS_URL"), "Redis URL")
	dbURL := flag.String("database", os.Getenv("SLIDELIMIT_TEST_DATABASE_URL"), "PostgreSQL URL")
	jobs := flag.Int("jobs", 20, "jobs to insert")
	limit := flag.Uint64("limit", 600, "requests per window and API key")
	window := flag.Duration("window", time.Minute, "rolling window")
	runFor := flag.Duration("run", 10*time.Second, "how long to work")
	flag.Parse()
	if err := run(*redisURL, *dbURL, *jobs, *limit, *window, *runFor); err != nil {
		log.Fatal(err)
	}
}

func run(redisURL, dbURL string, jobs int, limit uint64, window, runFor time.Duration) error {
	ctx := context.Background()
	opts, err := redis.ParseURL(redisURL)
	if err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	opts.ContextTimeoutEnabled = true
	rdb := redis.NewClient(opts)
	defer rdb.Close()

	metrics, err := promlimit.NewMetrics(prometheus.DefaultRegisterer, promlimit.Options{})
	if err != nil {
		return err
	}
	limiter, err := slidelimit.New(rdb, slidelimit.Policy{
		Namespace: "rl", Resource: "geocode", Algorithm: slidelimit.SlidingLog,
		Limit: limit, Window: window,
	}, slidelimit.WithObserver(metrics))
	if err != nil {
		return err
	}
	defer limiter.Close()

	pool, err := pgxpool.New(ctx, dbURL)
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

	gate := riverlimit.NewGate(limiter, riverlimit.WithObserver(func(job *rivertype.JobRow, o riverlimit.Outcome) {
		switch {
		case o.Ran:
		case o.Err != nil:
			log.Printf("job %d snoozed for %v: %v", job.ID, o.Snooze.Round(time.Millisecond), o.Err)
		default:
			log.Printf("job %d over budget, snoozed for %v", job.ID, o.Snooze.Round(time.Millisecond))
		}
	}))
	workers := river.NewWorkers()
	river.AddWorker(workers, riverlimit.Wrap[GeocodeArgs](GeocodeWorker{}, gate,
		func(job *river.Job[GeocodeArgs]) (string, uint64) { return job.Args.APIKey, 1 }))
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 10}},
		Workers: workers,
	})
	if err != nil {
		return err
	}
	for i := 0; i < jobs; i++ {
		args := GeocodeArgs{APIKey: []string{"key-a", "key-b"}[i%2], Address: fmt.Sprintf("%d Main St", i+1)}
		if _, err := client.Insert(ctx, args, nil); err != nil {
			return err
		}
	}
	if err := client.Start(ctx); err != nil {
		return err
	}
	time.Sleep(runFor)
	stopCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := client.Stop(stopCtx); err != nil {
		return err
	}
	families, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		return err
	}
	for _, f := range families {
		if f.GetName() == "ratelimit_allowed_total" || f.GetName() == "ratelimit_denied_total" {
			out, _ := json.Marshal(f.Metric)
			log.Printf("%s %s", f.GetName(), out)
		}
	}
	return nil
}
