package slidelimit

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

// The benchmarks measure, in one run against one Redis: the cgo cost of a
// check (core builds the call, core parses the reply; no Redis), Acquire,
// the same script sent by hand with go-redis EVALSHA, and redis_rate's Allow.
// With CGO_ENABLED=0 the same benchmarks measure the wasm path;
// go/scripts/bench-paths.sh runs both and prints them side by side.

func benchClient(b *testing.B) *redis.Client {
	b.Helper()
	url := os.Getenv("SLIDELIMIT_TEST_REDIS_URL")
	if url == "" {
		b.Fatal("SLIDELIMIT_TEST_REDIS_URL is not set: run `make bench-go`")
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		b.Fatal(err)
	}
	// With context deadlines honoured by go-redis, Acquire adds no goroutine.
	opts.ContextTimeoutEnabled = true
	c := redis.NewClient(opts)
	b.Cleanup(func() { _ = c.Close() })
	return c
}

// A policy that always allows, so every system does its allow path.
var benchPolicy = Policy{Namespace: "rl-bench", Resource: "geocode", Algorithm: SlidingCounter, Limit: 1 << 30, WindowMs: 60_000}

func benchLimiter(b *testing.B, client *redis.Client) *Limiter {
	b.Helper()
	l, err := New(client, benchPolicy)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = l.Close() })
	return l
}

// BenchmarkCgoCheck is what the binding adds to one check: two crossings into
// core (build KEYS/ARGV, parse the reply) and the Go strings they produce.
func BenchmarkCgoCheck(b *testing.B) {
	l, err := NewMemory(benchPolicy)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	reply := []int64{1, 41, 0, 60_000, 1_764_475_200_000}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		call, err := l.handle.buildCall("tenant-17", 1, nil, modeAcquire)
		if err != nil || len(call.keys) != 1 {
			b.Fatal(err)
		}
		if _, err := parseReply(reply, 1); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckParallel is BenchmarkCgoCheck from every core at once: with
// cgo the crossings run in parallel; without cgo each takes a wasm instance
// from the pool (one per core), so this shows what the pool costs under load.
func BenchmarkCheckParallel(b *testing.B) {
	l, err := NewMemory(benchPolicy)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	reply := []int64{1, 41, 0, 60_000, 1_764_475_200_000}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			call, err := l.handle.buildCall("tenant-17", 1, nil, modeAcquire)
			if err != nil || len(call.keys) != 1 {
				b.Error(err)
				return
			}
			if _, err := parseReply(reply, 1); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkMemoryAcquire is the embedded engine through cgo (or wasm).
func BenchmarkMemoryAcquire(b *testing.B) {
	l, err := NewMemory(benchPolicy)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := l.AcquireAt(context.Background(), "tenant-17", 1, uint64(i)); err != nil {
			b.Fatal(err)
		}
	}
}

func runAcquire(b *testing.B, l *Limiter) {
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if d, err := l.Acquire(ctx, "tenant-17"); err != nil || !d.Allowed {
			b.Fatal(d, err)
		}
	}
}

// runRawEvalSha sends the very script Acquire sends, with KEYS and ARGV
// written once by hand: the floor for any Go client of this script.
func runRawEvalSha(b *testing.B, client *redis.Client, l *Limiter) {
	ctx := context.Background()
	key, err := l.Key("tenant-17")
	if err != nil {
		b.Fatal(err)
	}
	keys := []string{key}
	args := []any{"1073741824", "60000", "1", ""}
	if err := client.ScriptLoad(ctx, l.acquire.text).Err(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if err := client.EvalSha(ctx, l.acquire.sha1, keys, args...).Err(); err != nil {
			b.Fatal(err)
		}
	}
}

func runRedisRate(b *testing.B, client *redis.Client) {
	ctx := context.Background()
	limiter := redis_rate.NewLimiter(client)
	limit := redis_rate.PerMinute(1 << 30)
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := limiter.Allow(ctx, "tenant-17", limit); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRedis(b *testing.B) {
	client := benchClient(b)
	l := benchLimiter(b, client)
	b.Run("slidelimit.Acquire", func(b *testing.B) { runAcquire(b, l) })
	b.Run("go-redis.EvalSha", func(b *testing.B) { runRawEvalSha(b, client, l) })
	b.Run("redis_rate.Allow", func(b *testing.B) { runRedisRate(b, client) })
}

// BenchmarkRatios runs the three side by side, interleaved in short rounds
// so that load from elsewhere on the machine hurts all of them alike, and
// reports the speed of Acquire relative to each (1.0 = as fast; the target
// against raw EVALSHA is >= 0.9).
func BenchmarkRatios(b *testing.B) {
	client := benchClient(b)
	l := benchLimiter(b, client)
	ctx := context.Background()
	key, err := l.Key("tenant-17")
	if err != nil {
		b.Fatal(err)
	}
	keys, args := []string{key}, []any{"1073741824", "60000", "1", ""}
	rate := redis_rate.NewLimiter(client)
	perMinute := redis_rate.PerMinute(1 << 30)
	total, calls := interleaved(b, []func() error{
		func() error { _, err := l.Acquire(ctx, "tenant-17"); return err },
		func() error { return client.EvalSha(ctx, l.acquire.sha1, keys, args...).Err() },
		func() error { _, err := rate.Allow(ctx, "tenant-17", perMinute); return err },
	})
	b.ReportMetric(float64(total[0].Nanoseconds())/calls, "acquire-ns")
	b.ReportMetric(float64(total[1].Nanoseconds())/calls, "raw-evalsha-ns")
	b.ReportMetric(float64(total[2].Nanoseconds())/calls, "redis_rate-ns")
	b.ReportMetric(float64(total[1])/float64(total[0]), "acquire-speed-vs-raw")
	b.ReportMetric(float64(total[2])/float64(total[0]), "acquire-speed-vs-redis_rate")
}

// BenchmarkCancelableContext: Acquire with a context that can be canceled
// (a River job's) against context.Background(), interleaved as in
// BenchmarkRatios. go-redis reads only a context's deadline, so a cancelable
// one is waited on beside the exchange: a goroutine per check.
func BenchmarkCancelableContext(b *testing.B) {
	client := benchClient(b)
	l := benchLimiter(b, client)
	cancelable, cancel := context.WithCancel(context.Background())
	defer cancel()
	total, calls := interleaved(b, []func() error{
		func() error { _, err := l.Acquire(context.Background(), "tenant-17"); return err },
		func() error { _, err := l.Acquire(cancelable, "tenant-17"); return err },
	})
	b.ReportMetric(float64(total[0].Nanoseconds())/calls, "background-ns")
	b.ReportMetric(float64(total[1].Nanoseconds())/calls, "cancelable-ns")
	b.ReportMetric(float64(total[0])/float64(total[1]), "cancelable-speed-vs-background")
}

// interleaved runs each variant in 20 rounds of 200 calls per iteration,
// every other round in the reverse order (no variant always runs first, or
// right after the same other one), so load from elsewhere hits them alike:
// the time each took in all, and the calls each made.
func interleaved(b *testing.B, variants []func() error) ([]time.Duration, float64) {
	total := make([]time.Duration, len(variants))
	const rounds, perRound = 20, 200
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for r := 0; r < rounds; r++ {
			for k := range variants {
				v := k
				if r%2 == 1 {
					v = len(variants) - 1 - k
				}
				call := variants[v]
				start := time.Now()
				for j := 0; j < perRound; j++ {
					if err := call(); err != nil {
						b.Fatal(err)
					}
				}
				total[v] += time.Since(start)
			}
		}
	}
	return total, float64(b.N * rounds * perRound)
}
