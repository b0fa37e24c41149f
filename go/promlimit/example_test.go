package promlimit_test

// The metrics snippets of docs/go.md (checked by the slidelimit package's
// TestDocSnippetsAreExamples).

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/redis/go-redis/v9"

	"github.com/slidelimit/slidelimit/go"
	"github.com/slidelimit/slidelimit/go/promlimit"
)

// The metrics every binding exports, on the memory engine: one allowed and
// one denied acquire, and the wait the denied one was told.
func ExampleNewMetrics() {
	registry := prometheus.NewRegistry()
	m, err := promlimit.NewMetrics(registry, promlimit.Options{TenantLabel: false})
	if err != nil {
		log.Fatal(err)
	}
	limiter, err := slidelimit.NewMemory(slidelimit.Policy{Resource: "geocode", Limit: 1, Window: time.Second},
		slidelimit.WithObserver(m))
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()

	for _, nowMs := range []uint64{10_000, 10_400} {
		if _, err := limiter.AcquireAt(context.Background(), "api-key-17", 1, nowMs); err != nil {
			log.Fatal(err)
		}
	}
	families, err := registry.Gather()
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range families {
		s := f.GetMetric()[0]
		switch f.GetName() {
		case "ratelimit_wait_seconds":
			fmt.Println(f.GetName(), s.GetHistogram().GetSampleCount(), s.GetHistogram().GetSampleSum())
		default:
			fmt.Println(f.GetName(), s.GetCounter().GetValue())
		}
	}
	// Output:
	// ratelimit_allowed_total 1
	// ratelimit_denied_total 1
	// ratelimit_wait_seconds 1 0.6
}

// Core's metrics plus a counter of acquires that found Redis down, which
// core's three metrics do not show. Redis here is an address nothing listens
// on, so the one acquire fails and is counted.
func ExampleNewMetrics_unavailable() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	client := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
	defer client.Close()
	policy := slidelimit.Policy{Resource: "geocode", Limit: 600, Window: time.Minute}
	ctx := context.Background()

	var unavailable *prometheus.CounterVec
	setup := func(registry *prometheus.Registry) (*slidelimit.Limiter, error) {
		m, err := promlimit.NewMetrics(registry, promlimit.Options{})
		if err != nil {
			return nil, err
		}
		// Not one of core's metrics: a name of your own.
		unavailable = prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "app_ratelimit_unavailable_total",
			Help: "Acquires that found Redis down or slow (no decision).",
		}, []string{"resource"})
		registry.MustRegister(unavailable)
		outages := slidelimit.ObserverFunc(func(e slidelimit.AcquireEvent) {
			if errors.Is(e.Err, slidelimit.ErrUnavailable) {
				unavailable.WithLabelValues(e.Resource).Inc()
			}
		})
		return slidelimit.New(client, policy, slidelimit.WithObserver(m), slidelimit.WithObserver(outages))
	}

	limiter, err := setup(prometheus.NewRegistry())
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()
	_, err = limiter.Acquire(ctx, "api-key-17")
	fmt.Println(errors.Is(err, slidelimit.ErrUnavailable), testutil.ToFloat64(unavailable.WithLabelValues("geocode")))
	// Output:
	// true 1
}
