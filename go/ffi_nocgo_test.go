//go:build !cgo

package slidelimit

import (
	"context"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// ffi_nocgo.go spells some of the header's values as Go constants (the cgo
// path reads them from the header): they must be the header's.
func TestWasmConstantsMatchTheHeader(t *testing.T) {
	header, err := os.ReadFile("../ffi-c/include/slidelimit.h")
	if err != nil {
		t.Fatal(err)
	}
	value := func(name string) int {
		t.Helper()
		m := regexp.MustCompile(`(?m)^\s*(?:#define\s+)?` + name + `\s*=?\s*(\d+)`).FindSubmatch(header)
		if m == nil {
			t.Fatalf("%s is not in the header", name)
		}
		n, err := strconv.Atoi(string(m[1]))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for name, got := range map[string]int{
		"SLIDELIMIT_RESULT_OK":                           resultOK,
		"SLIDELIMIT_RESULT_BUFFER_TOO_SMALL":             resultBufferTooSmall,
		"SLIDELIMIT_RESULT_INVALID_ARGUMENT":             int(ErrInvalidArgument),
		"SLIDELIMIT_RESULT_UNAVAILABLE":                  int(ErrUnavailable),
		"SLIDELIMIT_RESULT_SCRIPT_ERROR":                 int(ErrScriptError),
		"SLIDELIMIT_RESULT_WRONG_TYPE":                   int(ErrWrongType),
		"SLIDELIMIT_RESULT_MALFORMED_REPLY":              int(ErrMalformedReply),
		"SLIDELIMIT_RESULT_PERMISSION_DENIED":            int(ErrPermissionDenied),
		"SLIDELIMIT_RESULT_INTERNAL":                     int(ErrInternal),
		"SLIDELIMIT_KEY_MAX":                             keyMax,
		"SLIDELIMIT_CALL_BUF_MAX":                        callBufMax,
		"SLIDELIMIT_MAX_LIMITS":                          maxLimits,
		"SLIDELIMIT_SERVER_ERROR_MESSAGE_EXTRA":          serverErrorMsgExtra,
		"SLIDELIMIT_SERVER_ERROR_ACTION_RETRY_WITH_EVAL": serverErrorRetry,
		"SLIDELIMIT_MODE_ACQUIRE":                        int(modeAcquire),
		"SLIDELIMIT_MODE_PEEK":                           int(modePeek),
		"SLIDELIMIT_METRIC_ALLOWED_TOTAL":                int(metricAllowedTotal),
		"SLIDELIMIT_METRIC_DENIED_TOTAL":                 int(metricDeniedTotal),
		"SLIDELIMIT_METRIC_WAIT_SECONDS":                 int(metricWaitSeconds),
		"SLIDELIMIT_METRIC_LOCAL_DENIED_TOTAL":           int(metricLocalDeniedTotal),
	} {
		if want := value(name); got != want {
			t.Errorf("%s: Go says %d, the header %d", name, got, want)
		}
	}
	// The header spells this one as an expression of SLIDELIMIT_MAX_LIMITS.
	const partsMax = "#define SLIDELIMIT_CALL_PARTS_MAX ((5 * SLIDELIMIT_MAX_LIMITS) + 2)\n"
	if !strings.Contains(string(header), partsMax) || callPartsMax != 5*value("SLIDELIMIT_MAX_LIMITS")+2 {
		t.Errorf("SLIDELIMIT_CALL_PARTS_MAX: Go says %d, the header is not %q", callPartsMax, partsMax)
	}
}

// Calls from many goroutines spread over the pool: it never grows past its
// cap, a policy answers in every instance, and one memory engine (in one
// instance) counts every acquire exactly once.
func TestWasmPoolUnderConcurrency(t *testing.T) {
	l, err := NewMemory(Policy{Namespace: "rl", Resource: "pool", Algorithm: SlidingLog, Limit: 1000, WindowMs: 60_000})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const workers, each = 16, 40
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i++ {
				if _, err := l.handle.buildCall("t", 1, nil, modeAcquire); err != nil {
					errs <- err
					return
				}
				if _, err := l.AcquireAt(context.Background(), "t", 1, 1_000); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	d, err := l.PeekAt(context.Background(), "t", 1, 1_000)
	if err != nil {
		t.Fatal(err)
	}
	// A peek answers as the acquire it stands for: what remains after it.
	if want := uint64(1000 - workers*each - 1); d.Remaining != want {
		t.Errorf("remaining %d after %d acquires, want %d", d.Remaining, workers*each, want)
	}
	if n := len(*pool.all.Load()); n < 1 || n > pool.max || pool.max > maxInstances {
		t.Errorf("%d instances, cap %d (at most %d)", n, pool.max, maxInstances)
	}
}

// Two caches in two instances (two copies of core, two memories): a reset
// through one still drops the tenant's entry in the other.
func TestWasmResetReachesACacheInAnotherInstance(t *testing.T) {
	first, err := newDenyCacheHandle(0)
	if err != nil {
		t.Fatal(err)
	}
	defer first.free()
	// The pool may hold two instances however few CPUs there are (its cap
	// is GOMAXPROCS); with first's instance busy it hands out, or makes,
	// another.
	pool.grow.Lock()
	capped := pool.max
	pool.max = max(capped, 2)
	pool.grow.Unlock()
	defer func() {
		pool.grow.Lock()
		pool.max = capped
		pool.grow.Unlock()
	}()
	first.in.mu.Lock()
	second, err := newDenyCacheHandle(0)
	first.in.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	defer second.free()
	if first.in == second.in {
		t.Fatal("both caches are in one instance: the test proves nothing")
	}
	denied := Decision{RetryAfterMs: 500, ResetAfterMs: 500, NowMs: 1000}
	second.record("t", 1, denied, 0)
	if _, hit := second.check("t", 1, 10); !hit {
		t.Fatal("the denial is not cached")
	}
	first.forget("t")
	if d, hit := second.check("t", 1, 20); hit {
		t.Fatalf("a reset through another instance's cache left %+v", d)
	}
	// A reset through a Limiter without a cache tells every instance too.
	second.record("t", 1, denied, 30)
	if _, hit := second.check("t", 1, 40); !hit {
		t.Fatal("the denial is not cached")
	}
	forgetTenant("t")
	if d, hit := second.check("t", 1, 50); hit {
		t.Fatalf("a reset without a cache left %+v", d)
	}
}

// Rust reads the limit, window and bucket arrays of
// slidelimit_policy_new_limits as *const u64: each must be 8-aligned for
// any count of limits (an odd count put them at 4 mod 8 once), and no two
// arrays may overlap or leave the block.
func TestPolicyArraysAreAlignedAndApart(t *testing.T) {
	const base = 1 << 16
	for n := 0; n <= 9; n++ {
		limits, windows, buckets, algs, given := policyArrays(base, n)
		m := uint64(max(n, 1))
		arrays := []struct {
			name        string
			start, size uint64
			align       uint64
		}{
			{"limits", limits, 8 * m, 8},
			{"windows", windows, 8 * m, 8},
			{"buckets", buckets, 8 * m, 8},
			{"algorithms", algs, 4 * m, 4},
			{"given", given, m, 1},
		}
		end := uint64(base)
		for _, a := range arrays {
			if a.start%a.align != 0 {
				t.Errorf("%d limits: %s at %d is not %d-aligned", n, a.name, a.start, a.align)
			}
			if a.start < end {
				t.Errorf("%d limits: %s at %d overlaps the array before it (ending at %d)", n, a.name, a.start, end)
			}
			end = a.start + a.size
		}
		if limit := uint64(base + policyArraysSize(n)); end > limit {
			t.Errorf("%d limits: the arrays end at %d, past the block's end %d", n, end, limit)
		}
	}
}
