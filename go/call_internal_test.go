package slidelimit

import (
	"errors"
	"strings"
	"testing"
)

// newTestHandle is the policy handle of p, as a Limiter makes it.
func newTestHandle(p Policy) (*policyHandle, error) {
	specs, err := p.specs()
	if err != nil {
		return nil, err
	}
	return newPolicyHandle(p.Namespace, p.Resource, specs)
}

// Core builds a call into one Go buffer; when the first guess is too small
// (here: far too small, one byte short, exact, roomy), core says how much it
// needs and the second try is exact.
func TestBuildCallRetriesWithTheSizeCoreNeeds(t *testing.T) {
	h, err := newTestHandle(Policy{Namespace: "rl", Resource: "geocode", Algorithm: SlidingCounter, Limit: 600, WindowMs: 60_000})
	if err != nil {
		t.Fatal(err)
	}
	defer h.free()
	tenant := strings.Repeat("{", 512)
	want := scriptCall{
		keys: []string{"rl:{geocode:" + strings.Repeat("%7B", 512) + "}:counter:60000"},
		args: []any{"600", "60000", "2", ""},
	}
	for _, size := range []int{1, 100, len(want.keys[0]) + 8, len(want.keys[0]) + 9, 4096} {
		h.mu.RLock()
		call, err := h.buildCallSized(tenant, 2, nil, modeAcquire, size)
		h.mu.RUnlock()
		if err != nil {
			t.Fatalf("first buffer %d: %v", size, err)
		}
		if len(call.keys) != 1 || call.keys[0] != want.keys[0] || len(call.args) != 4 {
			t.Fatalf("first buffer %d: %q", size, call)
		}
		for i, arg := range call.args {
			if arg != want.args[i] {
				t.Fatalf("first buffer %d: arg %d is %q, want %q", size, i, arg, want.args[i])
			}
		}
	}
	h.mu.RLock()
	_, err = h.buildCallSized("t", 0, nil, modeAcquire, 1)
	h.mu.RUnlock()
	var e *Error
	if !errors.As(err, &e) || e.Code != ErrInvalidArgument || !strings.HasPrefix(e.Message, "cost:") {
		t.Fatalf("invalid cost with a small buffer: %v", err)
	}
}

// Error replies map by core's table, with core's codes, fields and messages:
// Go adds nothing.
func TestServerErrorsMapByCoresTable(t *testing.T) {
	h, err := newTestHandle(Policy{Namespace: "rl", Resource: "geocode", Algorithm: SlidingLog, Limit: 3, WindowMs: 1000})
	if err != nil {
		t.Fatal(err)
	}
	defer h.free()
	const key = "rl:{geocode:t}:log:1000"
	cases := []struct {
		reply      string
		afterRetry bool
		retry      bool
		code       Code
		field      string
		message    string
	}{
		{"NOSCRIPT No matching script. Please use EVAL.", false, true, 0, "", ""},
		{"NOSCRIPT No matching script. Please use EVAL.", true, false, ErrScriptError, "", "NOSCRIPT No matching script. Please use EVAL."},
		{"MOVED 3999 127.0.0.1:7001", false, false, ErrUnavailable, "", "redis unavailable: the cluster's slot map is changing; retry (MOVED 3999 127.0.0.1:7001)"},
		{"LOADING Redis is loading", true, false, ErrUnavailable, "", "redis unavailable: LOADING Redis is loading"},
		{"WRONGTYPE Operation against a key", false, false, ErrWrongType, "", "key " + key + " holds a value the sliding_log algorithm does not use"},
		{"NOPERM User rl has no permissions", false, false, ErrPermissionDenied, "", "NOPERM User rl has no permissions"},
		{"WRONGPASS invalid username-password pair or user is disabled.", false, false, ErrPermissionDenied, "", "WRONGPASS invalid username-password pair"},
		{"ERR slidelimit invalid_argument cost: must be at least 1", false, false, ErrInvalidArgument, "cost", "cost: must be at least 1"},
		// A name core does not know is no field, whatever the message says.
		{"ERR slidelimit invalid_argument speed: too fast", false, false, ErrInvalidArgument, "", "speed: too fast"},
		{"ERR Error running script: boom", false, false, ErrScriptError, "", "ERR Error running script: boom"},
	}
	cause := errors.New("the client's error")
	for _, c := range cases {
		retry, e := h.mapServerError(c.reply, key, c.afterRetry, cause)
		switch {
		case retry != c.retry:
			t.Errorf("%q (after retry %v): retry %v, want %v", c.reply, c.afterRetry, retry, c.retry)
		case retry && e != nil:
			t.Errorf("%q (after retry %v): a retry with an error %v", c.reply, c.afterRetry, e)
		case !retry && (e.Code != c.code || e.Field() != c.field || !strings.HasPrefix(e.Message, c.message) || e.Err != cause):
			t.Errorf("%q (after retry %v): %v field %q %q (cause %v); want %v field %q %q...",
				c.reply, c.afterRetry, e.Code, e.Field(), e.Message, e.Err, c.code, c.field, c.message)
		}
		// A command that is no script call (Reset's DEL): never a retry, and
		// a WRONGTYPE names no key.
		e = mapCommandError(c.reply, cause)
		wantCode, wantMessage := c.code, c.message
		if c.retry {
			wantCode, wantMessage = ErrScriptError, c.reply
		} else if c.code == ErrWrongType {
			wantMessage = c.reply
		}
		if e.Code != wantCode || e.Field() != c.field || !strings.HasPrefix(e.Message, wantMessage) || e.Err != cause {
			t.Errorf("%q as a command: %v field %q %q, want %v field %q %q...",
				c.reply, e.Code, e.Field(), e.Message, wantCode, c.field, wantMessage)
		}
	}
}
