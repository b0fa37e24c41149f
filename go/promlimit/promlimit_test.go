package promlimit_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"

	"github.com/slidelimit/slidelimit/go"
	"github.com/slidelimit/slidelimit/go/internal/protocoldoc"
	"github.com/slidelimit/slidelimit/go/internal/testredis"
	"github.com/slidelimit/slidelimit/go/promlimit"
)

var ctx = context.Background()

func newMetrics(t *testing.T, opts promlimit.Options) (*prometheus.Registry, *promlimit.Metrics) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := promlimit.NewMetrics(reg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return reg, m
}

func newMemory(t *testing.T, p slidelimit.Policy, opts ...slidelimit.Option) *slidelimit.Limiter {
	t.Helper()
	l, err := slidelimit.NewMemory(p, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// TestMetricsExposeTheDocumentedTable gathers what a Limiter on Redis with
// metrics exports after one allowed acquire, one Redis denial and one denial
// of the deny cache (and a peek, which counts nothing) and compares every
// family with docs/protocol.md.
func TestMetricsExposeTheDocumentedTable(t *testing.T) {
	documented, buckets, err := protocoldoc.Metrics("../../docs/protocol.md")
	if err != nil {
		t.Fatalf("docs/protocol.md: %v", err)
	}
	registry, m := newMetrics(t, promlimit.Options{TenantLabel: true})
	client := testredis.Client(t, nil)
	l, err := slidelimit.New(client, slidelimit.Policy{Namespace: testredis.UniqueNamespace("prom"),
		Resource: "geocode", Limit: 1, Window: 10 * time.Second}, slidelimit.WithObserver(m))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var waits float64
	for i := range 3 { // allowed, denied by Redis, denied by the cache
		d, err := l.Acquire(ctx, "t-1")
		if err != nil || d.Allowed != (i == 0) {
			t.Fatalf("acquire %d: %+v, %v", i, d, err)
		}
		waits += d.WaitSeconds()
	}
	if _, err := l.Peek(ctx, "t-1", 1); err != nil {
		t.Fatal(err)
	}
	counts := map[string]float64{"ratelimit_allowed_total": 1, "ratelimit_denied_total": 2,
		"ratelimit_local_denied_total": 1}
	families, err := registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*dto.MetricFamily{}
	for _, f := range families {
		got[f.GetName()] = f
	}
	if len(got) != len(documented) {
		t.Errorf("registered %d families, docs/protocol.md lists %d", len(got), len(documented))
	}
	for _, want := range documented {
		f := got[want.Name]
		if f == nil {
			t.Errorf("%s: not exported", want.Name)
			continue
		}
		if want.Help != "" && f.GetHelp() != want.Help {
			t.Errorf("%s: help %q, docs/protocol.md says %q", want.Name, f.GetHelp(), want.Help)
		}
		if kind := strings.ToLower(f.GetType().String()); kind != want.Kind {
			t.Errorf("%s: type %s, docs/protocol.md says %s", want.Name, kind, want.Kind)
		}
		if len(f.GetMetric()) != 1 {
			t.Errorf("%s: %d series, want 1", want.Name, len(f.GetMetric()))
			continue
		}
		series := f.GetMetric()[0]
		var names []string
		for _, p := range series.GetLabel() {
			names = append(names, p.GetName())
		}
		slices.Sort(names)
		wantNames := slices.Sorted(slices.Values(want.Labels))
		if !slices.Equal(names, wantNames) {
			t.Errorf("%s: labels %v, docs/protocol.md says %v", want.Name, names, wantNames)
		}
		switch want.Kind {
		case "counter":
			if v := series.GetCounter().GetValue(); v != counts[want.Name] {
				t.Errorf("%s = %v, want %v (one allowed, two denied of which one locally; the peek counts nothing)",
					want.Name, v, counts[want.Name])
			}
		case "histogram":
			h := series.GetHistogram()
			var bounds []float64
			for _, b := range h.GetBucket() {
				bounds = append(bounds, b.GetUpperBound())
			}
			if !slices.Equal(bounds, buckets) {
				t.Errorf("%s: buckets %v, docs/protocol.md says %v", want.Name, bounds, buckets)
			}
			// Both denials wait until the admission leaves the 10 s window.
			if h.GetSampleCount() != 2 || h.GetSampleSum() != waits || waits <= 10 || waits > 20 {
				t.Errorf("%s: %d samples summing to %v, want 2 summing to %v (in (10, 20])", want.Name,
					h.GetSampleCount(), h.GetSampleSum(), waits)
			}
		}
	}
}

// TestMetricsCountAcquires: with and without the tenant label, allowed and
// denied acquires are counted per series, waits land in their buckets, and
// peeks count nothing.
func TestMetricsCountAcquires(t *testing.T) {
	for _, tenantLabel := range []bool{false, true} {
		reg, m := newMetrics(t, promlimit.Options{TenantLabel: tenantLabel})
		l := newMemory(t, slidelimit.Policy{Resource: "geocode", Limit: 2, WindowMs: 1000}, slidelimit.WithObserver(m))
		for i := 0; i < 5; i++ {
			if _, err := l.AcquireAt(ctx, "t", 1, 1000); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := l.PeekAt(ctx, "t", 1, 1000); err != nil { // peeks are not counted
			t.Fatal(err)
		}
		tenant := ""
		if tenantLabel {
			tenant = `,tenant="t"`
		}
		expected := `
# HELP ratelimit_allowed_total Acquires allowed by the rate limiter.
# TYPE ratelimit_allowed_total counter
ratelimit_allowed_total{resource="geocode"` + tenant + `} 2
# HELP ratelimit_denied_total Acquires denied by the rate limiter.
# TYPE ratelimit_denied_total counter
ratelimit_denied_total{resource="geocode"` + tenant + `} 3
# HELP ratelimit_wait_seconds retry_after handed to denied callers, in seconds.
# TYPE ratelimit_wait_seconds histogram
ratelimit_wait_seconds_bucket{resource="geocode",le="0.001"} 0
ratelimit_wait_seconds_bucket{resource="geocode",le="0.005"} 0
ratelimit_wait_seconds_bucket{resource="geocode",le="0.01"} 0
ratelimit_wait_seconds_bucket{resource="geocode",le="0.05"} 0
ratelimit_wait_seconds_bucket{resource="geocode",le="0.1"} 0
ratelimit_wait_seconds_bucket{resource="geocode",le="0.5"} 0
ratelimit_wait_seconds_bucket{resource="geocode",le="1"} 3
ratelimit_wait_seconds_bucket{resource="geocode",le="5"} 3
ratelimit_wait_seconds_bucket{resource="geocode",le="10"} 3
ratelimit_wait_seconds_bucket{resource="geocode",le="30"} 3
ratelimit_wait_seconds_bucket{resource="geocode",le="60"} 3
ratelimit_wait_seconds_bucket{resource="geocode",le="600"} 3
ratelimit_wait_seconds_bucket{resource="geocode",le="+Inf"} 3
ratelimit_wait_seconds_sum{resource="geocode"} 3
ratelimit_wait_seconds_count{resource="geocode"} 3
`
		if err := testutil.GatherAndCompare(reg, strings.NewReader(expected)); err != nil {
			t.Fatalf("TenantLabel=%v: %v", tenantLabel, err)
		}
	}
}

// One Metrics serves several Limiters (one registration), each counted
// under its own resource.
func TestMetricsAreSharedBetweenLimiters(t *testing.T) {
	reg, m := newMetrics(t, promlimit.Options{})
	a := newMemory(t, slidelimit.Policy{Resource: "geocode", Limit: 5, WindowMs: 1000}, slidelimit.WithObserver(m))
	b := newMemory(t, slidelimit.Policy{Resource: "search", Limit: 5, WindowMs: 1000}, slidelimit.WithObserver(m))
	for i, l := range []*slidelimit.Limiter{a, b, b} {
		if _, err := l.AcquireAt(ctx, "t", 1, uint64(1000+i)); err != nil {
			t.Fatal(err)
		}
	}
	expected := `
# HELP ratelimit_allowed_total Acquires allowed by the rate limiter.
# TYPE ratelimit_allowed_total counter
ratelimit_allowed_total{resource="geocode"} 1
ratelimit_allowed_total{resource="search"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(expected), "ratelimit_allowed_total"); err != nil {
		t.Fatal(err)
	}
}

// Failed acquires (a bad tenant, an unreachable Redis) count nothing: core's
// table has no metric for them, and a failure is neither allowed nor denied.
func TestFailuresAreNotCounted(t *testing.T) {
	reg, m := newMetrics(t, promlimit.Options{TenantLabel: true})
	mem := newMemory(t, slidelimit.Policy{Resource: "geocode", Limit: 5, WindowMs: 1000}, slidelimit.WithObserver(m))
	if _, err := mem.AcquireAt(ctx, "", 1, 1000); !errors.Is(err, slidelimit.ErrInvalidArgument) {
		t.Fatalf("empty tenant: %v", err)
	}
	client := redis.NewClient(&redis.Options{Addr: testredis.Unreachable(t), MaxRetries: -1, DialerRetries: 1})
	defer client.Close()
	down, err := slidelimit.New(client, slidelimit.Policy{Resource: "geocode", Limit: 5, WindowMs: 1000},
		slidelimit.WithObserver(m))
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()
	if _, err := down.Acquire(ctx, "t"); !errors.Is(err, slidelimit.ErrUnavailable) {
		t.Fatalf("unreachable Redis: %v", err)
	}
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 0 {
		t.Fatalf("%d series after two failed acquires (err %v), want 0", n, err)
	}
}

// A registry that already holds one of the metrics refuses NewMetrics, which
// then leaves it as it was: no half-registered set.
func TestRegistrationIsAllOrNothing(t *testing.T) {
	table, err := slidelimit.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	// Someone else's collector, identical to the last of the three, holds it.
	taken := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: table.Wait.Name, Help: table.Wait.Help,
		Buckets: table.Wait.Buckets}, table.Wait.Labels)
	reg.MustRegister(taken)
	var already prometheus.AlreadyRegisteredError
	if m, err := promlimit.NewMetrics(reg, promlimit.Options{}); !errors.As(err, &already) || m != nil {
		t.Fatalf("NewMetrics next to a registered %s: %v, %v", table.Wait.Name, m, err)
	}
	// The two counters it registered before the conflict were taken back:
	// once the conflict is gone, NewMetrics succeeds (it would fail on them).
	reg.Unregister(taken)
	if _, err := promlimit.NewMetrics(reg, promlimit.Options{}); err != nil {
		t.Fatalf("after the conflict is gone: %v", err)
	}
	if _, err := promlimit.NewMetrics(reg, promlimit.Options{}); !errors.As(err, &already) {
		t.Fatalf("a second NewMetrics on one registry: %v, want prometheus.AlreadyRegisteredError", err)
	}
}

// A nil registry is an error naming it, not a nil dereference inside.
func TestANilRegistryIsAnInvalidArgument(t *testing.T) {
	for name, reg := range map[string]prometheus.Registerer{
		"nil":                              nil,
		"a typed nil *prometheus.Registry": (*prometheus.Registry)(nil),
	} {
		if m, err := promlimit.NewMetrics(reg, promlimit.Options{}); m != nil || !errors.Is(err, slidelimit.ErrInvalidArgument) {
			t.Errorf("%s: want ErrInvalidArgument, got %v, %v", name, m, err)
		}
	}
}
