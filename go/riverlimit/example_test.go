package riverlimit_test

// The River snippet of docs/go.md (checked by the slidelimit package's
// TestDocSnippetsAreExamples). It needs Redis and PostgreSQL, so it only
// compiles; riverlimit_test.go runs the same calls against real servers.

import (
	"context"
	"encoding/json"

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
