package slidelimit_test

// Every ```go block of docs/go.md is (modulo indentation) in the body of an
// Example function here, in promlimit/example_test.go or in
// riverlimit/example_test.go, and
// TestDocSnippetsAreExamples fails when one is not: a snippet that no longer
// matches the API fails the build. Examples with an Output comment run in
// go test; the ones that need a Redis only compile.

import (
	"context"
	"errors"
	"fmt"
	"log"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidelimit/slidelimit/go"
)

// The quick start of docs/go.md: one limiter on Redis, one check at server
// time. It needs a Redis at 127.0.0.1:6379, so it only compiles.
func ExampleNew() {
	run := func(ctx context.Context) error {
		client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
		limiter, err := slidelimit.New(client, slidelimit.Policy{
			Resource: "geocode",        // Namespace "rl" and Algorithm SlidingLog unless set
			Limit:    600,              // 600 requests
			Window:   60 * time.Second, // per rolling 60 s per API key
		})
		if err != nil {
			return err
		}
		defer limiter.Close()

		d, err := limiter.Acquire(ctx, "api-key-17") // server time, cost 1
		switch {
		case errors.Is(err, slidelimit.ErrUnavailable): // Redis down or slow: fail open or closed, your call
		case err != nil: // a bad tenant or a bug; errors.Is works with every code
		case !d.Allowed: // come back after d.RetryAfter()
		}
		return nil
	}
	_ = run
}

// The memory engine with the caller's time: the same decisions as Redis,
// deterministic.
func ExampleNewMemory() {
	limiter, err := slidelimit.NewMemory(slidelimit.Policy{Resource: "geocode", Limit: 2, Window: time.Second})
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()

	key, err := limiter.Key("api-key-17") // (string, error): a bad tenant is an error
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(key)

	ctx := context.Background()
	for _, nowMs := range []uint64{10_000, 10_200, 10_400, 11_000} { // the caller's clock, in ms
		d, err := limiter.AcquireAt(ctx, "api-key-17", 1, nowMs)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(nowMs, d.Allowed, d.Remaining, d.RetryAfter())
	}

	removed, err := limiter.Reset(ctx, "api-key-17") // (bool, error): true if anything was recorded
	fmt.Println("reset:", removed, err)
	// Output:
	// rl:{geocode:api-key-17}:log:1000
	// 10000 true 1 0s
	// 10200 true 0 0s
	// 10400 false 0 600ms
	// 11000 true 0 0s
	// reset: true <nil>
}

// Errors: one *Error with a stable Code; %s and %v print the code's bare tag.
func ExampleCodeOf() {
	_, err := slidelimit.NewMemory(slidelimit.Policy{Resource: "geocode", Limit: 0, Window: time.Minute})
	code, ok := slidelimit.CodeOf(err) // (Code, bool): false for an error that is not slidelimit's
	fmt.Printf("%s %v\n", code, ok)
	fmt.Println(errors.Is(err, slidelimit.ErrInvalidArgument))
	fmt.Println(err)

	_, err = slidelimit.NewMemory(slidelimit.Policy{Resource: "geocode", Limit: 1, Window: 1500 * time.Microsecond})
	fmt.Println(err)
	// Output:
	// invalid_argument true
	// true
	// slidelimit: invalid_argument: limit: must be at least 1
	// slidelimit: invalid_argument: window: must be a positive whole number of milliseconds, got 1.5ms
}

// A Limiter used after Close fails like any other call: an *Error (code
// invalid_argument) whose cause is ErrClosed.
func ExampleErrClosed() {
	limiter, err := slidelimit.NewMemory(slidelimit.Policy{Resource: "geocode", Limit: 1, WindowMs: 1000})
	if err != nil {
		log.Fatal(err)
	}
	limiter.Close()

	_, err = limiter.AcquireAt(context.Background(), "api-key-17", 1, 10_000)
	var e *slidelimit.Error
	fmt.Println(errors.Is(err, slidelimit.ErrClosed), errors.As(err, &e), e.Code)
	// Output:
	// true true invalid_argument
}

// Unavailable Redis, as docs/go.md advises to configure the client. Needs a
// server address, so it only compiles.
func ExampleErrUnavailable() {
	run := func(ctx context.Context, policy slidelimit.Policy) error {
		client := redis.NewClient(&redis.Options{
			Addr:                  "127.0.0.1:6379",
			ContextTimeoutEnabled: true, // the Limiter's timeout interrupts the socket read
			MaxRetries:            -1,   // no second attempt of a failed command
			DialerRetries:         1,    // one dial: a refused connection is reported at once
		})
		limiter, err := slidelimit.New(client, policy, slidelimit.WithTimeout(500*time.Millisecond))
		if err != nil {
			return err
		}
		defer limiter.Close()

		_, err = limiter.Acquire(ctx, "api-key-17")
		if errors.Is(err, slidelimit.ErrUnavailable) && errors.Is(err, syscall.ECONNREFUSED) {
			// nothing listens at Addr: a deployment problem, not a slow server
		}
		return err
	}
	_ = run
}
