// Command slidelimit-audit-worker is the Go process of the cross-language
// audit (audit/run): -concurrency goroutines share one Limiter and call
// Acquire on one tenant with server time (Redis TIME) from -start-at-ms for
// -duration-ms, then every decision goes to -out as a JSON line
// {"lang":..,"allowed":..,"now_ms":..,"retry_after_ms":..} (an error as
// {"lang":..,"error":"<code>"}). audit/check.py merges the logs of all
// workers; the Rust and Node workers take the same flags.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidelimit/slidelimit/go"
)

type config struct {
	lang, redisURL, namespace, resource, tenant, algorithm, pattern, out string
	cluster                                                              bool
	limit, windowMs, startAtMs, durationMs, timeoutMs, jitterMs, rampMs  uint64
	concurrency                                                          int
}

type outcome struct {
	allowed      bool
	nowMs        uint64
	retryAfterMs uint64
	err          string
}

func wallMs() uint64 { return uint64(time.Now().UnixMilli()) }

// waitMs is how long to wait at t before the next call; the same rule in
// every worker. Time is the local wall clock: Redis runs on the same host.
// "burst" cycles through three windows: calls only in the last tenth of the
// first, all through the second, none in the third.
func waitMs(pattern string, startAt, window, t uint64) uint64 {
	if t < startAt {
		return startAt - t
	}
	if pattern == "uniform" {
		return 0
	}
	rel := t - startAt
	n, e := (rel/window)%3, rel%window
	burst := max(window/10, 1)
	switch {
	case n == 0 && e >= window-burst:
		return 0
	case n == 0:
		return window - burst - e
	case n == 1:
		return 0
	default:
		return (window - e) + (window - burst)
	}
}

func connect(c *config) (redis.UniversalClient, error) {
	var addrs []string
	for _, u := range strings.Split(c.redisURL, ",") {
		opts, err := redis.ParseURL(strings.TrimSpace(u))
		if err != nil {
			return nil, err
		}
		if !c.cluster {
			opts.PoolSize = c.concurrency
			opts.ContextTimeoutEnabled = true
			return redis.NewClient(opts), nil
		}
		addrs = append(addrs, opts.Addr)
	}
	return redis.NewClusterClient(&redis.ClusterOptions{
		Addrs: addrs, PoolSize: c.concurrency, ContextTimeoutEnabled: true,
	}), nil
}

func caller(l *slidelimit.Limiter, c *config) []outcome {
	ctx := context.Background()
	end := c.startAtMs + c.durationMs
	var out []outcome
	first := c.startAtMs + rand.Uint64N(c.rampMs+1)
	if now, until := wallMs(), min(first, end); until > now {
		time.Sleep(time.Duration(until-now) * time.Millisecond)
	}
	for {
		now := wallMs()
		if now >= end {
			return out
		}
		if wait := waitMs(c.pattern, c.startAtMs, c.windowMs, now); wait > 0 {
			time.Sleep(time.Duration(min(wait, end-now)) * time.Millisecond)
			continue
		}
		d, err := l.Acquire(ctx, c.tenant)
		if err != nil {
			code, ok := slidelimit.CodeOf(err)
			if !ok {
				code = slidelimit.ErrInternal
			}
			out = append(out, outcome{err: code.String()})
		} else {
			out = append(out, outcome{allowed: d.Allowed, nowMs: d.NowMs, retryAfterMs: d.RetryAfterMs})
		}
		if pause := rand.Uint64N(c.jitterMs + 1); pause > 0 {
			time.Sleep(time.Duration(pause) * time.Millisecond)
		}
	}
}

func run(c *config) (int, error) {
	if c.pattern != "uniform" && c.pattern != "burst" {
		return 0, fmt.Errorf("-pattern must be uniform or burst, got %q", c.pattern)
	}
	if strings.ContainsAny(c.lang, `"\`) {
		return 0, fmt.Errorf("-lang must not hold quotes or backslashes")
	}
	client, err := connect(c)
	if err != nil {
		return 0, err
	}
	defer client.Close()
	l, err := slidelimit.New(client, slidelimit.Policy{Namespace: c.namespace, Resource: c.resource,
		Algorithm: slidelimit.Algorithm(c.algorithm), Limit: c.limit, WindowMs: c.windowMs},
		slidelimit.WithTimeout(time.Duration(c.timeoutMs)*time.Millisecond))
	if err != nil {
		return 0, err
	}
	defer l.Close()
	if c.startAtMs == 0 {
		c.startAtMs = wallMs()
	}
	results := make([][]outcome, c.concurrency)
	var wg sync.WaitGroup
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = caller(l, c)
		}()
	}
	wg.Wait()

	f, err := os.Create(c.out)
	if err != nil {
		return 0, err
	}
	w := bufio.NewWriter(f)
	lines := 0
	for _, r := range results {
		for _, o := range r {
			lines++
			if o.err != "" {
				fmt.Fprintf(w, "{\"lang\":\"%s\",\"error\":\"%s\"}\n", c.lang, o.err)
			} else {
				fmt.Fprintf(w, "{\"lang\":\"%s\",\"allowed\":%t,\"now_ms\":%d,\"retry_after_ms\":%d}\n",
					c.lang, o.allowed, o.nowMs, o.retryAfterMs)
			}
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return 0, err
	}
	return lines, f.Close()
}

func main() {
	var c config
	flag.StringVar(&c.lang, "lang", "go", "label written into every line")
	flag.StringVar(&c.redisURL, "redis", "", "Redis URL (with -cluster: comma-separated URLs of Cluster nodes)")
	flag.BoolVar(&c.cluster, "cluster", false, "the URLs are nodes of a Redis Cluster")
	flag.StringVar(&c.namespace, "namespace", "", "key namespace")
	flag.StringVar(&c.resource, "resource", "audit", "resource")
	flag.StringVar(&c.tenant, "tenant", "tenant-1", "tenant")
	flag.StringVar(&c.algorithm, "algorithm", "sliding_log", "sliding_log or sliding_counter")
	flag.Uint64Var(&c.limit, "limit", 50, "permits per window")
	flag.Uint64Var(&c.windowMs, "window-ms", 2000, "window")
	flag.Uint64Var(&c.startAtMs, "start-at-ms", 0, "Unix ms at which every worker starts calling (0: at once)")
	flag.Uint64Var(&c.durationMs, "duration-ms", 6000, "how long to call")
	flag.IntVar(&c.concurrency, "concurrency", 32, "calls in flight at any time")
	flag.StringVar(&c.pattern, "pattern", "uniform", "uniform or burst")
	flag.Uint64Var(&c.jitterMs, "jitter-ms", 3, "after each call pause a random 0..jitter-ms ms, so the processes' calls interleave at Redis")
	flag.Uint64Var(&c.rampMs, "ramp-ms", 0, "each caller makes its first call at a random point of the first ramp-ms ms, so the first window is not filled by whichever process fires first")
	flag.Uint64Var(&c.timeoutMs, "timeout-ms", 2000, "per-call timeout")
	flag.StringVar(&c.out, "out", "", "where the JSON lines go")
	flag.Parse()
	if c.redisURL == "" || c.namespace == "" || c.out == "" || c.concurrency < 1 || c.windowMs < 1 {
		fmt.Fprintln(os.Stderr, "usage: slidelimit-audit-worker -redis URL -namespace NS -out FILE [flags]")
		flag.PrintDefaults()
		os.Exit(2)
	}
	lines, err := run(&c)
	if err != nil {
		fmt.Fprintf(os.Stderr, "audit worker %s: %v\n", c.lang, err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "audit worker %s: %d decisions logged\n", c.lang, lines)
}
