package slidelimit_test

import (
	"slices"
	"testing"

	"github.com/slidelimit/slidelimit/go"
	"github.com/slidelimit/slidelimit/go/internal/protocoldoc"
)

// TestMetricTableIsTheDocumentedOne compares core's table, as the package
// hands it to exporters, with docs/protocol.md: names, help texts, labels
// (with and without the optional tenant) and buckets.
func TestMetricTableIsTheDocumentedOne(t *testing.T) {
	documented, buckets, err := protocoldoc.Metrics("../docs/protocol.md")
	if err != nil {
		t.Fatalf("docs/protocol.md: %v", err)
	}
	table, err := slidelimit.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	rows := []slidelimit.MetricSpec{table.Allowed, table.Denied, table.Wait, table.LocalDenied}
	if len(rows) != len(documented) {
		t.Fatalf("%d rows, docs/protocol.md lists %d", len(rows), len(documented))
	}
	for i, want := range documented {
		got := rows[i]
		// A row whose help text the document leaves to core (Help "") is
		// checked by name.
		if got.Name != want.Name || want.Help != "" && got.Help != want.Help || got.Help == "" {
			t.Errorf("row %d: %q %q, docs/protocol.md says %q %q", i, got.Name, got.Help, want.Name, want.Help)
		}
		if !slices.Equal(got.LabelsWithTenant, want.Labels) {
			t.Errorf("%s: labels with tenant %v, docs/protocol.md says %v", want.Name, got.LabelsWithTenant, want.Labels)
		}
		withoutTenant := slices.DeleteFunc(slices.Clone(want.Labels), func(l string) bool { return l == "tenant" })
		if !slices.Equal(got.Labels, withoutTenant) {
			t.Errorf("%s: labels %v, want %v", want.Name, got.Labels, withoutTenant)
		}
		wantBuckets := []float64(nil)
		if want.Kind == "histogram" {
			wantBuckets = buckets
		}
		if !slices.Equal(got.Buckets, wantBuckets) {
			t.Errorf("%s (%s): buckets %v, want %v", want.Name, want.Kind, got.Buckets, wantBuckets)
		}
	}

	// Each call hands out its own slices: an exporter that edits them does
	// not change what the next one gets.
	table.Wait.Buckets[0] = 42
	table.Allowed.Labels[0] = "edited"
	again, err := slidelimit.Metrics()
	if err != nil {
		t.Fatal(err)
	}
	if again.Wait.Buckets[0] != buckets[0] || again.Allowed.Labels[0] != "resource" {
		t.Fatalf("an edit of a returned table leaked into the next: %v %v", again.Wait.Buckets, again.Allowed.Labels)
	}
}

// WaitSeconds is core's conversion: the retry-after in seconds.
func TestDecisionWaitSeconds(t *testing.T) {
	for ms, want := range map[uint64]float64{0: 0, 1: 0.001, 1500: 1.5, 600_000: 600} {
		if got := (slidelimit.Decision{RetryAfterMs: ms}).WaitSeconds(); got != want {
			t.Errorf("RetryAfterMs %d: %v s, want %v", ms, got, want)
		}
	}
}
