package riverlimit_test

// The River snippets of docs/go.md (checked by the slidelimit package's
// TestDocSnippetsAreExamples). They need Redis and PostgreSQL, so they only
// compile; riverlimit_test.go runs the same calls against real servers.

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/slidelimit/slidelimit/go"
	"github.com/slidelimit/slidelimit/go/riverlimit"
)

// GeocodeArgs is one address to geocode with one customer's API key.
type GeocodeArgs struct {
	APIKey  string `json:"api_key"`
	Address string `json:"address"`
}

func (GeocodeArgs) Kind() string { return "geocode" }

type GeocodeWorker struct {
	river.WorkerDefaults[GeocodeArgs]
}

func (GeocodeWorker) Work(context.Context, *river.Job[GeocodeArgs]) error { return nil }

func ExampleNewGate() {
	setup := func(limiter *slidelimit.Limiter, workers *river.Workers) *river.Config {
		gate := riverlimit.NewGate(limiter)
		// One typed worker:
		river.AddWorker(workers, riverlimit.Wrap[GeocodeArgs](GeocodeWorker{}, gate,
			func(job *river.Job[GeocodeArgs]) (string, uint64) { return job.Args.APIKey, 1 }))
		// Or every job, as middleware (river.Config.Middleware or Worker.Middleware):
		mw := riverlimit.NewMiddleware(gate, func(job *rivertype.JobRow) (string, uint64, bool) {
			if job.Kind != (GeocodeArgs{}).Kind() {
				return "", 0, false // ok = false: this job runs without a permit
			}
			var args GeocodeArgs // the middleware sees the row: decode the JSON args
			if err := json.Unmarshal(job.EncodedArgs, &args); err != nil {
				return "", 0, false
			}
			return args.APIKey, 1, true
		})
		return &river.Config{Workers: workers, Middleware: []rivertype.Middleware{mw}}
	}
	_ = setup
}

// When Redis is down: the client settings that report an outage at once, and
// a longer backoff than the default.
func ExampleWithBackoff() {
	setup := func(policy slidelimit.Policy) (*riverlimit.Gate, error) {
		client := redis.NewClient(&redis.Options{
			Addr:                  "127.0.0.1:6379",
			ContextTimeoutEnabled: true, // the limiter's timeout interrupts the socket read
			MaxRetries:            -1,   // no second attempt of a failed command
			DialerRetries:         1,    // a refused connection is reported at once
		})
		limiter, err := slidelimit.New(client, policy, slidelimit.WithTimeout(500*time.Millisecond))
		if err != nil {
			return nil, err
		}
		gate := riverlimit.NewGate(limiter,
			// Redis down: snooze 2 s, 4 s, 8 s, ... up to 5 min (default 1 s to 1 min).
			riverlimit.WithBackoff(func(snoozes int) time.Duration {
				return min(2*time.Second<<min(snoozes, 8), 5*time.Minute)
			}),
			// riverlimit.WithFailOpen(), // or: run the work anyway while Redis is down
		)
		return gate, nil
	}
	_ = setup
}

// What the gate did with each job, as a counter of snoozes by job kind and
// reason, next to the limiter's own metrics (promlimit).
func ExampleWithObserver() {
	setup := func(registry *prometheus.Registry, limiter *slidelimit.Limiter) *riverlimit.Gate {
		snoozed := prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "app_jobs_snoozed_total",
			Help: "Jobs the rate-limit gate snoozed, by kind and reason.",
		}, []string{"kind", "reason"})
		registry.MustRegister(snoozed)
		gate := riverlimit.NewGate(limiter, riverlimit.WithObserver(func(job *rivertype.JobRow, o riverlimit.Outcome) {
			switch {
			case o.Ran: // allowed, or failed open
			case errors.Is(o.Err, slidelimit.ErrUnavailable):
				snoozed.WithLabelValues(job.Kind, "redis_unavailable").Inc()
			case o.Err == nil:
				snoozed.WithLabelValues(job.Kind, "over_budget").Inc()
			} // any other error failed the job: River records it
		}))
		return gate
	}
	_ = setup
}
