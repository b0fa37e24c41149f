package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/slidelimit/slidelimit/go"
)

// session reads the example session of docs/driver.md: request and reply
// lines in order.
func session(t *testing.T) (requests, replies []string) {
	t.Helper()
	text, err := os.ReadFile("../../../docs/driver.md")
	if err != nil {
		t.Fatal(err)
	}
	_, example, ok := strings.Cut(string(text), "## Example session")
	if !ok {
		t.Fatal("docs/driver.md has no example session")
	}
	for _, line := range strings.Split(example, "\n") {
		switch {
		case strings.HasPrefix(line, "> "):
			requests = append(requests, line[2:])
		case strings.HasPrefix(line, "< "):
			replies = append(replies, line[2:])
		}
	}
	if len(requests) < 5 || len(requests) != len(replies) {
		t.Fatalf("docs/driver.md's example session: %d requests, %d replies", len(requests), len(replies))
	}
	return requests, replies
}

// TestDocumentedSession replays the example session on the memory store (its
// decisions are the same as on Redis): every decision line is byte-identical
// to the documented one; an error has the documented code and field (the
// message is core's, whose wording may change). hello names this binding.
func TestDocumentedSession(t *testing.T) {
	requests, replies := session(t)
	d := &driver{}
	defer d.close()
	for i, request := range requests {
		var op struct {
			Op string `json:"op"`
		}
		if err := json.Unmarshal([]byte(request), &op); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if op.Op == "store" {
			request = `{"op":"store","kind":"memory"}`
		}
		got, exit := d.handle([]byte(request))
		want := replies[i]
		if exit != (op.Op == "exit") {
			t.Errorf("%s: exit %v", request, exit)
		}
		var gotFields, wantFields map[string]any
		if err := json.Unmarshal([]byte(got), &gotFields); err != nil {
			t.Fatalf("%s: reply %q is not JSON: %v", request, got, err)
		}
		if err := json.Unmarshal([]byte(want), &wantFields); err != nil {
			t.Fatalf("documented reply %q: %v", want, err)
		}
		switch {
		case op.Op == "hello":
			if gotFields["binding"] != "go" || gotFields["version"] != slidelimit.Version || gotFields["ok"] != true {
				t.Errorf("hello: %s", got)
			}
		case wantFields["error"] != nil:
			if gotFields["error"] != wantFields["error"] || gotFields["field"] != wantFields["field"] {
				t.Errorf("%s:\n got %s\nwant %s (code and field)", request, got, want)
			}
		case got != want:
			t.Errorf("%s:\n got %s\nwant %s", request, got, want)
		}
	}
}

// TestLauncherNamesTheMakeTarget runs drivers/go with no program where it
// looks: exit 2, and stderr says what to build.
func TestLauncherNamesTheMakeTarget(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "drivers"), 0o755); err != nil {
		t.Fatal(err)
	}
	launcher, err := os.ReadFile("../../../drivers/go")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(root, "drivers", "go")
	if err := os.WriteFile(path, launcher, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(path).CombinedOutput()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 2 || !strings.Contains(string(out), "make driver-go") {
		t.Fatalf("drivers/go without its program: %v, %q", err, out)
	}
}

// TestProtocolErrors: what the driver cannot read is a protocol error, and
// the driver carries on.
func TestProtocolErrors(t *testing.T) {
	d := &driver{}
	defer d.close()
	for _, request := range []string{
		`not json`, `[1]`, `{"op":1}`, `{"op":"fly"}`, `{"op":"hello","x":1}`,
		`{"op":"acquire","tenant":"t"}`,                          // no policy yet
		`{"op":"policy","resource":"r","limit":1,"window_ms":1}`, // no store yet
		`{"op":"store","kind":"disk"}`,
		`{"op":"store","kind":"memory","timeout_ms":"1"}`,
		`{"op":"store","kind":"cluster","urls":"redis://127.0.0.1:1"}`,
	} {
		got, _ := d.handle([]byte(request))
		if !strings.HasPrefix(got, `{"error":"protocol","message":`) {
			t.Errorf("%s: %s", request, got)
		}
	}
	if got, _ := d.handle([]byte(`{"op":"store","kind":"memory"}`)); got != `{"ok":true}` {
		t.Fatalf("store after protocol errors: %s", got)
	}
	// A refused policy's error is every later op's answer, until one is accepted.
	refused := `{"error":"invalid_argument","field":"limit","message":"limit: must be at least 1"}`
	for _, request := range []string{`{"op":"policy","resource":"r","limit":0,"window_ms":1000}`,
		`{"op":"acquire","tenant":"t"}`, `{"op":"key","tenant":"t"}`} {
		if got, _ := d.handle([]byte(request)); got != refused {
			t.Errorf("%s:\n got %s\nwant %s", request, got, refused)
		}
	}
	if got, _ := d.handle([]byte(`{"op":"policy","resource":"r","limit":1,"window_ms":1000}`)); got != `{"ok":true}` {
		t.Fatalf("policy: %s", got)
	}
	if got, _ := d.handle([]byte(`{"op":"acquire","tenant":"t","cost":"1"}`)); !strings.HasPrefix(got, `{"error":"protocol"`) {
		t.Errorf("a cost that is no JSON number: %s", got)
	}
}

// TestNumbersNoUint64Holds: a JSON number the Go API's uint64 parameters
// cannot hold is invalid_argument on its field (docs/driver.md); in a policy
// it is the policy's refusal, answered by every later op.
func TestNumbersNoUint64Holds(t *testing.T) {
	d := &driver{}
	defer d.close()
	d.handle([]byte(`{"op":"store","kind":"memory"}`))
	d.handle([]byte(`{"op":"policy","resource":"r","limit":2,"window_ms":1000}`))
	for _, c := range []struct{ request, field, says string }{
		{`{"op":"acquire_at","tenant":"t","now_ms":-1}`, "now_ms", "must not be negative, got -1"},
		{`{"op":"acquire_at","tenant":"t","now_ms":1.5}`, "now_ms", "must be an integer, got 1.5"},
		{`{"op":"acquire","tenant":"t","cost":-2}`, "cost", "must not be negative, got -2"},
		{`{"op":"peek","tenant":"t","now_ms":18446744073709551616}`, "now_ms", "must be at most 2^64 - 1"},
		{`{"op":"store","kind":"memory","timeout_ms":-5}`, "timeout_ms", "must not be negative, got -5"},
	} {
		want := `{"error":"invalid_argument","field":"` + c.field + `","message":"` + c.field + `: ` + c.says
		if got, _ := d.handle([]byte(c.request)); !strings.HasPrefix(got, want) {
			t.Errorf("%s:\n got %s\nwant %s...", c.request, got, want)
		}
	}
	// The refused store left the memory store in place; the limiter too.
	if got, _ := d.handle([]byte(`{"op":"acquire_at","tenant":"t","now_ms":1}`)); !strings.HasPrefix(got, `{"allowed":true`) {
		t.Errorf("after refused values: %s", got)
	}
	refused, _ := d.handle([]byte(`{"op":"policy","resource":"r","limit":-2,"window_ms":1000}`))
	if want := `{"error":"invalid_argument","field":"limit","message":"limit: must not be negative, got -2`; !strings.HasPrefix(refused, want) {
		t.Fatalf("negative limit: %s", refused)
	}
	for _, request := range []string{`{"op":"acquire_at","tenant":"t","now_ms":1}`, `{"op":"key","tenant":"t"}`} {
		if got, _ := d.handle([]byte(request)); got != refused {
			t.Errorf("%s after a refused policy: %s", request, got)
		}
	}
	bad, _ := d.handle([]byte(`{"op":"policy","resource":"r","limits":[{"limit":2,"window_ms":1000},{"limit":3,"window_ms":2.5}]}`))
	if want := `{"error":"invalid_argument","field":"limits[1].window_ms","message":"limits[1].window_ms: must be an integer, got 2.5`; !strings.HasPrefix(bad, want) {
		t.Errorf("a fraction in a list of limits: %s", bad)
	}
}

// TestNullIsAbsent: null is a field left out; a policy field with no default
// left out is the Go API's zero, which the binding refuses.
func TestNullIsAbsent(t *testing.T) {
	d := &driver{}
	defer d.close()
	d.handle([]byte(`{"op":"store","kind":"memory"}`))
	if got, _ := d.handle([]byte(`{"op":"policy","namespace":null,"resource":"r","algorithm":null,"limit":2,"window_ms":1000,"buckets":null,"deny_cache":null}`)); got != `{"ok":true}` {
		t.Fatalf("nulls for the defaults: %s", got)
	}
	if got, _ := d.handle([]byte(`{"op":"key","tenant":"t"}`)); !strings.HasPrefix(got, `{"ok":true,"key":"rl:{r:t}:log:1000",`) {
		t.Errorf("key with the defaults: %s", got)
	}
	if got, _ := d.handle([]byte(`{"op":"acquire_at","tenant":"t","now_ms":1,"cost":null}`)); !strings.HasPrefix(got, `{"allowed":true,"remaining":1,`) {
		t.Errorf("a null cost is the default 1: %s", got)
	}
	for _, c := range []struct{ request, field string }{
		{`{"op":"policy","resource":"r","window_ms":1000}`, "limit"},
		{`{"op":"policy","resource":"r","limit":2,"window_ms":null}`, "window_ms"},
		{`{"op":"policy","limit":2,"window_ms":1000}`, "resource"},
		{`{"op":"policy","resource":"r","limits":[{"limit":2,"window_ms":1000},{"limit":2}]}`, "limits[1].window_ms"},
	} {
		got, _ := d.handle([]byte(c.request))
		if want := `{"error":"invalid_argument","field":"` + c.field + `",`; !strings.HasPrefix(got, want) {
			t.Errorf("%s: %s", c.request, got)
		}
		if again, _ := d.handle([]byte(`{"op":"acquire_at","tenant":"t","now_ms":1}`)); again != got {
			t.Errorf("after %s: %s", c.request, again)
		}
	}
}

// TestTenantLeftOutOrNotUTF8: a tenant left out or null is the Go API's zero
// value, and one holding a lone surrogate (JSON's \ud800) its three bytes,
// not U+FFFD as encoding/json reads it: core refuses both, naming tenant, as
// the other bindings do (docs/driver.md). A pair is one character; an
// escaped backslash is no escape.
func TestTenantLeftOutOrNotUTF8(t *testing.T) {
	d := &driver{}
	defer d.close()
	d.handle([]byte(`{"op":"store","kind":"memory"}`))
	d.handle([]byte(`{"op":"policy","resource":"r","limit":2,"window_ms":1000}`))
	for _, request := range []string{
		`{"op":"acquire_at","now_ms":1}`,
		`{"op":"acquire","tenant":null}`,
		`{"op":"peek"}`,
		`{"op":"reset"}`,
		`{"op":"key"}`,
		`{"op":"acquire_at","tenant":"a\ud800b","now_ms":1}`,
		`{"op":"peek","tenant":"\udc80","now_ms":1}`,
		`{"op":"reset","tenant":"\ude80\ud83d"}`,
		`{"op":"key","tenant":"t\uDBFF"}`,
	} {
		if got, _ := d.handle([]byte(request)); !strings.HasPrefix(got, `{"error":"invalid_argument","field":"tenant",`) {
			t.Errorf("%s: %s", request, got)
		}
	}
	if got, _ := d.handle([]byte(`{"op":"key","tenant":"\ud83d\ude80\n\"\\\/"}`)); !strings.HasPrefix(got, `{"ok":true,"key":"rl:{r:🚀%0A\"\\/}:log:1000",`) {
		t.Errorf("a pair and the other escapes: %s", got)
	}
	if got, _ := d.handle([]byte(`{"op":"acquire_at","tenant":"\\ud800","now_ms":1}`)); !strings.HasPrefix(got, `{"allowed":true,`) {
		t.Errorf("an escaped backslash: %s", got)
	}
}

// TestWholeNumbersInAnyForm: a JSON number is a double, so a whole one up to
// 2^53 written as 2.0, 1e3 or -0 is that integer, as in every other driver
// (docs/driver.md); past 2^53 only digits are exact.
func TestWholeNumbersInAnyForm(t *testing.T) {
	d := &driver{}
	defer d.close()
	d.handle([]byte(`{"op":"store","kind":"memory"}`))
	if got, _ := d.handle([]byte(`{"op":"policy","resource":"r","limit":2.0,"window_ms":1e3}`)); got != `{"ok":true}` {
		t.Fatalf("policy: %s", got)
	}
	want := `{"allowed":true,"remaining":1,"retry_after_ms":0,"reset_after_ms":1000,"now_ms":0}`
	if got, _ := d.handle([]byte(`{"op":"acquire_at","tenant":"t","now_ms":-0,"cost":1.0}`)); got != want {
		t.Errorf("-0 and 1.0: %s", got)
	}
	for request, message := range map[string]string{
		`{"op":"acquire_at","tenant":"t","now_ms":1e16}`: "now_ms: must be written in digits above 2^53, got 1e16",
		`{"op":"acquire_at","tenant":"t","now_ms":-1.0}`: "now_ms: must not be negative, got -1.0",
		`{"op":"acquire_at","tenant":"t","now_ms":0.5}`:  "now_ms: must be an integer, got 0.5",
	} {
		got, _ := d.handle([]byte(request))
		if want := `{"error":"invalid_argument","field":"now_ms","message":"` + message; !strings.HasPrefix(got, want) {
			t.Errorf("%s: %s", request, got)
		}
	}
}

// TestPolicyBuckets: the optional buckets field reaches the Policy (absent:
// core's default), and core's refusal names it.
func TestPolicyBuckets(t *testing.T) {
	d := &driver{}
	defer d.close()
	for _, c := range []struct{ policy, key string }{
		{`{"op":"policy","resource":"r","algorithm":"bucketed_window","limit":2,"window_ms":1000,"buckets":10}`,
			`"key":"rl:{r:t}:bucketed:1000:10",`},
		{`{"op":"policy","resource":"r","algorithm":"bucketed_window","limit":2,"window_ms":60000}`,
			`"key":"rl:{r:t}:bucketed:60000:60",`},
	} {
		if got, _ := d.handle([]byte(`{"op":"store","kind":"memory"}`)); got != `{"ok":true}` {
			t.Fatalf("store: %s", got)
		}
		if got, _ := d.handle([]byte(c.policy)); got != `{"ok":true}` {
			t.Fatalf("%s: %s", c.policy, got)
		}
		key, _ := d.handle([]byte(`{"op":"key","tenant":"t"}`))
		if !strings.Contains(key, c.key) {
			t.Errorf("%s: key %s, want %s", c.policy, key, c.key)
		}
	}
	for _, request := range []string{
		`{"op":"policy","resource":"r","algorithm":"sliding_log","limit":2,"window_ms":1000,"buckets":10}`,
		`{"op":"policy","resource":"r","algorithm":"bucketed_window","limit":2,"window_ms":1000,"buckets":3}`,
		`{"op":"policy","resource":"r","algorithm":"bucketed_window","limit":2,"window_ms":1000}`,
	} {
		got, _ := d.handle([]byte(request))
		if !strings.HasPrefix(got, `{"error":"invalid_argument","field":"buckets","message":"buckets: `) {
			t.Errorf("%s: %s", request, got)
		}
	}
	if got, _ := d.handle([]byte(`{"op":"policy","resource":"r","algorithm":"bucketed_window","limit":2,"window_ms":1000,"buckets":"10"}`)); !strings.HasPrefix(got, `{"error":"protocol"`) {
		t.Errorf("a string for buckets: %s", got)
	}
	// A request's buckets 0 is a count of 0 for core, not the Go API's "not
	// given": refused even where the default divides the window, and for an
	// algorithm without buckets; the switch is off again for the next policy.
	for _, c := range []struct{ request, message string }{
		{`{"op":"policy","resource":"r","algorithm":"bucketed_window","limit":2,"window_ms":60000,"buckets":0}`,
			`"message":"buckets: must be at least 1"`},
		{`{"op":"policy","resource":"r","algorithm":"sliding_log","limit":2,"window_ms":60000,"buckets":0}`,
			`"message":"buckets: only the bucketed_window algorithm has buckets`},
	} {
		got, _ := d.handle([]byte(c.request))
		if !strings.HasPrefix(got, `{"error":"invalid_argument","field":"buckets",`+c.message) {
			t.Errorf("%s: %s", c.request, got)
		}
	}
	if got, _ := d.handle([]byte(`{"op":"policy","resource":"r","algorithm":"bucketed_window","limit":2,"window_ms":60000}`)); got != `{"ok":true}` {
		t.Errorf("no buckets after buckets 0: %s", got)
	}
}

// TestLoadSkew: with skew_ms every call of a load is AcquireAt on the wall
// clock plus the skew, so that caller time is the decisions' now_ms, and
// every decision record carries reset_after_ms; a skew beyond an hour, or
// not an integer, is a protocol error.
func TestLoadSkew(t *testing.T) {
	d := &driver{}
	defer d.close()
	out := filepath.Join(t.TempDir(), "go.jsonl")
	for _, request := range []string{`{"op":"store","kind":"memory"}`,
		`{"op":"policy","resource":"r","limit":5,"window_ms":1000}`} {
		if got, _ := d.handle([]byte(request)); got != `{"ok":true}` {
			t.Fatalf("%s: %s", request, got)
		}
	}
	const skew = 3_600_000 // behind: far from the wall clock a memory store would use
	before := uint64(time.Now().UnixMilli())
	start, end := before+100, before+400
	reply, _ := d.handle(fmt.Appendf(nil, `{"op":"load","lang":"go","tenant":"t","concurrency":4,`+
		`"start_at_ms":%d,"end_at_ms":%d,"jitter_ms":2,"skew_ms":-%d,"out":%q}`, start, end, skew, out))
	after := uint64(time.Now().UnixMilli())
	text, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(text)), "\n")
	if want := fmt.Sprintf(`{"ok":true,"calls":%d,"errors":0}`, len(lines)); reply != want || len(lines) <= 5 {
		t.Fatalf("load: %s, %d lines", reply, len(lines))
	}
	allowed := 0
	for _, line := range lines {
		var rec struct {
			Allowed      bool    `json:"allowed"`
			NowMs        uint64  `json:"now_ms"`
			ResetAfterMs *uint64 `json:"reset_after_ms"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil || rec.ResetAfterMs == nil {
			t.Fatalf("record %s: %v", line, err)
		}
		if rec.NowMs < start-skew || rec.NowMs > after-skew {
			t.Errorf("now_ms %d is not the caller clock %d..%d", rec.NowMs, start-skew, after-skew)
		}
		if rec.Allowed {
			allowed++
			// The log records at now + reset_after - W, on the caller clock too.
			if r := rec.NowMs + *rec.ResetAfterMs - 1000; r < start-skew || r > after-skew {
				t.Errorf("recorded at %d, outside %d..%d", r, start-skew, after-skew)
			}
		}
	}
	if allowed != 5 {
		t.Errorf("%d admitted, want the limit 5 within one window", allowed)
	}
	for _, bad := range []string{"3600001", "-3600001", "1.5", `"5"`} {
		request := fmt.Sprintf(`{"op":"load","lang":"go","tenant":"t","concurrency":1,"start_at_ms":0,`+
			`"end_at_ms":0,"skew_ms":%s,"out":%q}`, bad, out)
		if got, _ := d.handle([]byte(request)); !strings.HasPrefix(got, `{"error":"protocol","message":"load: skew_ms must be`) {
			t.Errorf("skew_ms %s: %s", bad, got)
		}
	}
}
