package slidelimit_test

// Faults the Go binding meets in production, each against a real
// redis-server (issue 5): SCRIPT FLUSH between calls, a restart mid-run, an
// unreachable or hanging Redis, a slow link (a loopback proxy that adds
// latency), a key of the wrong type, an ACL user confined to its prefix, TLS
// with verification, and bad input that must write nothing. Servers other
// than the shared one are the test's own, on free loopback ports, stopped by
// their pids.

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidelimit/slidelimit/go"
	"github.com/slidelimit/slidelimit/go/internal/testredis"
)

// farT is a caller time far from the real clock, so caller-time keys never
// meet server-time ones.
const farT = uint64(1_800_000_000_000)

var algorithms = []slidelimit.Algorithm{slidelimit.SlidingLog, slidelimit.SlidingCounter}

func commandStats(t *testing.T, c *redis.Client) string {
	t.Helper()
	stats, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	return stats
}

// ---------------------------------------------------------- SCRIPT FLUSH

// With the script cache flushed before every call, every acquire and peek
// goes through the NOSCRIPT fallback and still counts exactly once.
func TestScriptFlushBetweenEveryCall(t *testing.T) {
	client := testredis.Client(t, nil)
	for _, alg := range algorithms {
		t.Run(string(alg), func(t *testing.T) {
			l := newRedisLimiter(t, client, testPolicy(t, alg, 3, 1000))
			flush := func() {
				t.Helper()
				if err := client.ScriptFlush(ctx).Err(); err != nil {
					t.Fatal(err)
				}
			}
			for i := 0; i < 5; i++ {
				flush()
				d, err := l.AcquireAt(ctx, "t", 1, farT)
				wantRemaining := uint64(max(0, 2-i))
				if err != nil || d.Allowed != (i < 3) || d.Remaining != wantRemaining {
					t.Fatalf("acquire %d: %+v %v", i, d, err)
				}
				flush()
				// A peek answers what an acquire would: one permit fewer, if allowed.
				p, err := l.PeekAt(ctx, "t", 1, farT)
				if err != nil || p.Remaining != uint64(max(0, 1-i)) || p.Allowed != (i < 2) {
					t.Fatalf("peek after acquire %d: %+v %v", i, p, err)
				}
			}
			flush()
			if d, err := l.Acquire(ctx, "server-time"); err != nil || !d.Allowed || d.Remaining != 2 {
				t.Fatalf("server time after a flush: %+v %v", d, err)
			}
		})
	}
}

// ---------------------------------------------------------------- restart

// Four callers acquire in a loop while their redis-server is killed and
// started again (empty, without its script cache) on the same port. Every
// failure is ErrUnavailable; once the server is back each caller succeeds
// after at most 3 errors, and the NOSCRIPT fallback reloads the script.
func TestRestartMidRunCostsBoundedUnavailableErrors(t *testing.T) {
	server := testredis.StartServer(t)
	client := redis.NewClient(&redis.Options{Addr: server.Addr, ContextTimeoutEnabled: true})
	defer client.Close()
	// The counter: a limit no run reaches (the log's is capped at 10,000,
	// which four fast callers could reach within the window).
	l := newRedisLimiter(t, client, testPolicy(t, slidelimit.SlidingCounter, 1_000_000, 60_000),
		slidelimit.WithTimeout(300*time.Millisecond))

	type attempt struct {
		at time.Time
		ok bool
	}
	var running atomic.Bool
	running.Store(true)
	logs := make([][]attempt, 4)
	errs := make(chan error, len(logs))
	var wg sync.WaitGroup
	for c := range logs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for running.Load() && len(logs[c]) < 5000 {
				started := time.Now()
				d, err := l.Acquire(ctx, "tenant-1")
				switch {
				case err == nil && d.Allowed:
					logs[c] = append(logs[c], attempt{started, true})
				case err == nil:
					errs <- fmt.Errorf("denied far below the limit: %+v", d)
					return
				case !errors.Is(err, slidelimit.ErrUnavailable):
					errs <- err
					return
				default:
					logs[c] = append(logs[c], attempt{started, false})
					time.Sleep(20 * time.Millisecond) // what a worker does: back off, retry
				}
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	server.Stop()
	time.Sleep(400 * time.Millisecond)
	server.Start()
	restarted := time.Now()
	time.Sleep(700 * time.Millisecond)
	running.Store(false)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	worst := 0
	for c, log := range logs {
		if len(log) == 0 || !log[0].ok {
			t.Fatalf("caller %d: the run should start healthy", c)
		}
		if !slices.ContainsFunc(log, func(a attempt) bool { return !a.ok }) {
			t.Fatalf("caller %d never saw the outage", c)
		}
		var after []bool
		for _, a := range log {
			if !a.at.Before(restarted) {
				after = append(after, a.ok)
			}
		}
		errorsAfter := slices.Index(after, true)
		if errorsAfter < 0 {
			t.Fatalf("caller %d did not recover after the restart: %v", c, after)
		}
		worst = max(worst, errorsAfter)
	}
	t.Logf("at most %d unavailable error(s) per caller after the server was back", worst)
	if worst > 3 {
		t.Fatalf("%d errors after the restart", worst)
	}
	admin := server.Client()
	key, _ := l.Key("tenant-1")
	if n, err := admin.Exists(ctx, key).Result(); err != nil || n != 1 {
		t.Fatalf("the restarted server holds %d keys for the tenant (%v)", n, err)
	}
	if !strings.Contains(commandStats(t, admin), "cmdstat_eval:") {
		t.Fatal("the restarted server lost its script cache: EVAL should have reloaded it")
	}
	testredis.AssertKeysExpire(t, admin)
}

// Across a restart between calls the decisions stay exact: the call made
// while the server is down is unavailable and recorded nowhere, and the
// first call on the empty server counts once through the NOSCRIPT fallback.
func TestRestartBetweenCallsKeepsDecisionsExact(t *testing.T) {
	server := testredis.StartServer(t)
	client := redis.NewClient(&redis.Options{Addr: server.Addr, ContextTimeoutEnabled: true})
	defer client.Close()
	l := newRedisLimiter(t, client, testPolicy(t, slidelimit.SlidingCounter, 3, 60_000),
		slidelimit.WithTimeout(300*time.Millisecond))
	for want := uint64(2); want >= 1; want-- {
		if d, err := l.Acquire(ctx, "t"); err != nil || d.Remaining != want {
			t.Fatalf("%+v %v", d, err)
		}
	}
	server.Stop()
	start := time.Now()
	_, err := l.Acquire(ctx, "t")
	wantCode(t, err, slidelimit.ErrUnavailable, "")
	if took := time.Since(start); took > 600*time.Millisecond {
		t.Fatalf("took %v with a 300ms timeout", took)
	}
	server.Start()
	if d, err := l.Acquire(ctx, "t"); err != nil || !d.Allowed || d.Remaining != 2 {
		t.Fatalf("first decision on the empty server: %+v %v", d, err)
	}
	stats := commandStats(t, server.Client())
	if !strings.Contains(stats, "cmdstat_eval:calls=1,") || !strings.Contains(stats, "cmdstat_evalsha:calls=1,") {
		t.Fatalf("want one EVALSHA (NOSCRIPT) then one EVAL:\n%s", stats)
	}
}

// ------------------------------------------------------------ unreachable

// Whatever makes Redis unreachable (nothing listening, a killed server, a
// server that accepts and never answers), every call is ErrUnavailable
// within the configured timeout, whether or not the client honours
// context deadlines itself.
func TestUnreachableRedisIsUnavailableWithinTheTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	stopped := testredis.StartServer(t)
	stopped.Stop()
	targets := []struct {
		name, addr string
		hangs      bool
	}{
		{"refused", testredis.Unreachable(t), false},
		{"killed", stopped.Addr, false},
		{"silent", testredis.Silent(t), true},
	}
	for _, target := range targets {
		for _, honours := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/ContextTimeoutEnabled=%v", target.name, honours), func(t *testing.T) {
				client := redis.NewClient(&redis.Options{Addr: target.addr, ContextTimeoutEnabled: honours})
				defer client.Close()
				l := newRedisLimiter(t, client, testPolicy(t, slidelimit.SlidingLog, 3, 1000), slidelimit.WithTimeout(timeout))
				calls := map[string]func() error{
					"Acquire":   func() error { _, err := l.Acquire(ctx, "t"); return err },
					"AcquireAt": func() error { _, err := l.AcquireAt(ctx, "t", 1, farT); return err },
					"Peek":      func() error { _, err := l.Peek(ctx, "t", 1); return err },
					"Reset":     func() error { _, err := l.Reset(ctx, "t"); return err },
				}
				for name, call := range calls {
					start := time.Now()
					err := call()
					took := time.Since(start)
					if !errors.Is(err, slidelimit.ErrUnavailable) {
						t.Fatalf("%s: want ErrUnavailable, got %v", name, err)
					}
					if took > timeout+200*time.Millisecond {
						t.Fatalf("%s took %v, the timeout is %v", name, took, timeout)
					}
					if target.hangs {
						if took < timeout-20*time.Millisecond {
							t.Fatalf("%s gave up after %v, before the timeout %v", name, took, timeout)
						}
						wantCode(t, err, slidelimit.ErrUnavailable, "Redis did not answer within the timeout (300ms)")
					}
					t.Logf("%s after %v: %v", name, took.Round(time.Millisecond), err)
				}
			})
		}
	}
}

// ------------------------------------------------------------- slow Redis

// Through a proxy that delays each direction by 300 ms, a 250 ms timeout is
// ErrUnavailable in time (on an open connection and when connecting), a 3 s
// timeout is served, and without the delay the short-timeout Limiter works
// again. A timed-out acquire may or may not have been counted (the request
// had left); it never lets more than the limit through.
func TestSlowRedisHonoursTheTimeout(t *testing.T) {
	server := testredis.StartServer(t)
	proxy := testredis.StartProxy(t, server.Addr)
	const delay = 300 * time.Millisecond
	for _, honours := range []bool{true, false} {
		t.Run(fmt.Sprintf("ContextTimeoutEnabled=%v", honours), func(t *testing.T) {
			proxy.SetDelay(0)
			client := redis.NewClient(&redis.Options{Addr: proxy.Addr, ContextTimeoutEnabled: honours})
			defer client.Close()
			p := testPolicy(t, slidelimit.SlidingLog, 10, 60_000)
			short := newRedisLimiter(t, client, p, slidelimit.WithTimeout(250*time.Millisecond))
			long := newRedisLimiter(t, client, p, slidelimit.WithTimeout(3*time.Second))
			if _, err := short.PeekAt(ctx, "t", 1, farT); err != nil { // an open connection
				t.Fatal(err)
			}

			proxy.SetDelay(delay)
			for i := 0; i < 2; i++ {
				start := time.Now()
				_, err := short.AcquireAt(ctx, "t", 1, farT)
				took := time.Since(start)
				wantCode(t, err, slidelimit.ErrUnavailable, "Redis did not answer")
				if took < 240*time.Millisecond || took > 750*time.Millisecond {
					t.Fatalf("timed out after %v, the timeout is 250ms", took)
				}
			}
			fresh := redis.NewClient(&redis.Options{Addr: proxy.Addr, ContextTimeoutEnabled: honours})
			defer fresh.Close()
			connecting := newRedisLimiter(t, fresh, p, slidelimit.WithTimeout(250*time.Millisecond))
			start := time.Now()
			_, err := connecting.AcquireAt(ctx, "t", 1, farT)
			wantCode(t, err, slidelimit.ErrUnavailable, "")
			if took := time.Since(start); took > 750*time.Millisecond {
				t.Fatalf("connecting timed out after %v", took)
			}

			start = time.Now()
			d, err := long.AcquireAt(ctx, "t", 1, farT)
			if err != nil || !d.Allowed {
				t.Fatalf("3s timeout over a 600ms round trip: %+v %v", d, err)
			}
			if took := time.Since(start); took < 2*delay {
				t.Fatalf("served in %v through a %v round trip", took, 2*delay)
			}

			proxy.SetDelay(0)
			d, err = short.PeekAt(ctx, "t", 1, farT)
			if err != nil {
				t.Fatalf("the short-timeout Limiter should work again: %v", err)
			}
			// 1 counted for sure, plus each timed-out acquire (2, and 1 while
			// connecting) that reached Redis anyway.
			used := p.Limit - d.Remaining
			t.Logf("%d of 4 acquires counted (1 served, 3 timed out)", used)
			if used < 1 || used > 4 {
				t.Fatalf("used %d", used)
			}
		})
	}
	testredis.AssertKeysExpire(t, server.Client())
}

// ------------------------------------------------------------- wrong type

// A key of another type (another program's, or the other algorithm's) is
// ErrWrongType, the message names the key, and the key is left as it was.
func TestWrongTypeNamesTheKeyAndLeavesItAlone(t *testing.T) {
	client := testredis.Client(t, nil)
	for _, alg := range algorithms {
		t.Run(string(alg), func(t *testing.T) {
			l := newRedisLimiter(t, client, testPolicy(t, alg, 3, 1000))
			key, err := l.Key("t")
			if err != nil {
				t.Fatal(err)
			}
			// Each with a TTL, like every key a test leaves: the TTL check runs
			// after the whole Go run.
			writers := map[string]func() error{
				"string": func() error { return client.Set(ctx, key, "not ours", time.Minute).Err() },
				"set": func() error {
					_, err := client.TxPipelined(ctx, func(p redis.Pipeliner) error {
						p.SAdd(ctx, key, "x")
						p.PExpire(ctx, key, time.Minute)
						return nil
					})
					return err
				},
				"the other algorithm's": func() error {
					_, err := client.TxPipelined(ctx, func(p redis.Pipeliner) error {
						if alg == slidelimit.SlidingLog {
							p.HSet(ctx, key, "1", "1")
						} else {
							p.RPush(ctx, key, "1")
						}
						p.PExpire(ctx, key, time.Minute)
						return nil
					})
					return err
				},
			}
			for kind, write := range writers {
				if err := write(); err != nil {
					t.Fatal(err)
				}
				before, _ := client.Type(ctx, key).Result()
				calls := map[string]func() error{
					"Acquire":   func() error { _, err := l.Acquire(ctx, "t"); return err },
					"AcquireAt": func() error { _, err := l.AcquireAt(ctx, "t", 1, farT); return err },
					"Peek":      func() error { _, err := l.Peek(ctx, "t", 1); return err },
				}
				for name, call := range calls {
					err := call()
					// Core's message, the same in every binding.
					wantCode(t, err, slidelimit.ErrWrongType, fmt.Sprintf("key %s holds a value the %s algorithm does not use", key, alg))
					if !strings.Contains(err.Error(), "WRONGTYPE") || strings.Count(err.Error(), "WRONGTYPE") != 1 {
						t.Fatalf("%s on a %s key: the message should keep Redis's reply, once: %v", name, kind, err)
					}
					var redisErr redis.Error
					if !errors.As(err, &redisErr) {
						t.Fatalf("the go-redis error should be wrapped: %v", err)
					}
				}
				after, _ := client.Type(ctx, key).Result()
				ttl, _ := client.PTTL(ctx, key).Result()
				if after != before || ttl <= 0 {
					t.Fatalf("%s key changed: type %s -> %s, ttl %v", kind, before, after, ttl)
				}
				if removed, err := l.Reset(ctx, "t"); err != nil || !removed {
					t.Fatalf("reset deletes a key of any type: %v %v", removed, err)
				}
			}
		})
	}
}

// -------------------------------------------------------------------- ACL

// The commands a Limiter needs, and nothing else: EVALSHA (every call), EVAL
// (the NOSCRIPT fallback), DEL (Reset), and what the scripts call (Redis
// checks each, TIME included when the script reads the server's clock).
var aclCommands = []string{"-@all", "+evalsha", "+eval", "+del", "+time", "+lrange", "+llen", "+lindex",
	"+lpop", "+ltrim", "+rpush", "+pexpire", "+hmget", "+hincrby", "+hkeys", "+hdel"}

// A user limited to `~acl-go:*` and those commands gets every kind of
// decision; with a policy in another namespace it gets ErrPermissionDenied
// and writes nothing, and a plain SET inside its own prefix is refused too.
func TestACLUserConfinedToItsPrefix(t *testing.T) {
	server := testredis.StartServer(t)
	admin := server.Client()
	args := []any{"ACL", "SETUSER", "limiter", "reset", "on", ">go-test-password", "~acl-go:*", "resetchannels"}
	for _, c := range aclCommands {
		args = append(args, c)
	}
	if err := admin.Do(ctx, args...).Err(); err != nil {
		t.Fatal(err)
	}
	user := redis.NewClient(&redis.Options{Addr: server.Addr, Username: "limiter", Password: "go-test-password",
		ContextTimeoutEnabled: true})
	defer user.Close()

	for _, alg := range algorithms {
		p := slidelimit.Policy{Namespace: "acl-go", Resource: "geocode", Algorithm: alg, Limit: 2, WindowMs: 60_000}
		l := newRedisLimiter(t, user, p)
		// Server time: allowed, allowed, denied; a peek sees the denial.
		for i, want := range []bool{true, true, false} {
			if d, err := l.Acquire(ctx, "t"); err != nil || d.Allowed != want {
				t.Fatalf("%s server time %d: %+v %v", alg, i, d, err)
			}
		}
		if d, err := l.Peek(ctx, "t", 1); err != nil || d.Allowed {
			t.Fatalf("%s peek: %+v %v", alg, d, err)
		}
		// Caller time, then trimming after an idle window.
		for i, at := range []uint64{farT, farT + 1, farT + 2, farT + 2*60_000} {
			if d, err := l.AcquireAt(ctx, "c", 1, at); err != nil || d.Allowed != (i != 2) {
				t.Fatalf("%s caller time %d: %+v %v", alg, i, d, err)
			}
		}
		// The EVAL fallback after the cache is flushed.
		if err := admin.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if d, err := l.AcquireAt(ctx, "after-flush", 1, farT); err != nil || d.Remaining != 1 {
			t.Fatalf("%s after SCRIPT FLUSH: %+v %v", alg, d, err)
		}
		if removed, err := l.Reset(ctx, "t"); err != nil || !removed {
			t.Fatalf("%s reset: %v %v", alg, removed, err)
		}

		outside := p
		outside.Namespace = "other"
		lo := newRedisLimiter(t, user, outside)
		calls := map[string]func() error{
			"Acquire":   func() error { _, err := lo.Acquire(ctx, "t"); return err },
			"AcquireAt": func() error { _, err := lo.AcquireAt(ctx, "t", 1, farT); return err },
			"Peek":      func() error { _, err := lo.Peek(ctx, "t", 1); return err },
			"Reset":     func() error { _, err := lo.Reset(ctx, "t"); return err },
		}
		for name, call := range calls {
			if err := call(); !errors.Is(err, slidelimit.ErrPermissionDenied) {
				t.Fatalf("%s %s outside the prefix: want ErrPermissionDenied, got %v", alg, name, err)
			}
		}
		key, _ := lo.Key("t")
		if n, err := admin.Exists(ctx, key).Result(); err != nil || n != 0 {
			t.Fatalf("%s: %s was written (%v)", alg, key, err)
		}
	}
	if err := user.Set(ctx, "acl-go:plain", "1", time.Minute).Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("a plain SET should be refused: %v", err)
	}
	keys, err := admin.Keys(ctx, "*").Result()
	if err != nil || len(keys) == 0 {
		t.Fatalf("keys %v %v", keys, err)
	}
	for _, key := range keys {
		if !strings.HasPrefix(key, "acl-go:") {
			t.Fatalf("a key outside the prefix: %s", key)
		}
	}
	testredis.AssertKeysExpire(t, admin)
}

// -------------------------------------------------------------------- TLS

// A redis-server that speaks only TLS, with a certificate for localhost made
// by the test's own CA. Verification is on in every client: trusting that CA
// with the right name works; anything else is ErrUnavailable.
func TestTLSWithVerification(t *testing.T) {
	dir := testredis.Certificates(t)
	pool := func(file string) *x509.CertPool {
		pem, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		p := x509.NewCertPool()
		if !p.AppendCertsFromPEM(pem) {
			t.Fatalf("%s holds no certificate", file)
		}
		return p
	}
	ca := pool("ca.crt")
	port := testredis.FreePort(t)
	server := testredis.Spawn(t, []string{"--port", "0", "--tls-port", port,
		"--tls-cert-file", filepath.Join(dir, "server.crt"), "--tls-key-file", filepath.Join(dir, "server.key"),
		"--tls-ca-cert-file", filepath.Join(dir, "ca.crt"), "--tls-auth-clients", "no"},
		&redis.Options{Addr: "127.0.0.1:" + port, TLSConfig: &tls.Config{RootCAs: ca, ServerName: "localhost", MinVersion: tls.VersionTLS12}})

	connect := func(url string, roots *x509.CertPool) *slidelimit.Limiter {
		t.Helper()
		opts, err := redis.ParseURL(url)
		if err != nil {
			t.Fatal(err)
		}
		if opts.TLSConfig != nil {
			if opts.TLSConfig.InsecureSkipVerify {
				t.Fatal("verification must stay on")
			}
			opts.TLSConfig.RootCAs = roots // nil: the system's trust store
		}
		opts.ContextTimeoutEnabled = true
		client := redis.NewClient(opts)
		t.Cleanup(func() { _ = client.Close() })
		return newRedisLimiter(t, client, slidelimit.Policy{Namespace: "tls-go", Resource: "geocode",
			Algorithm: slidelimit.SlidingLog, Limit: 3, WindowMs: 60_000}, slidelimit.WithTimeout(2*time.Second))
	}

	// rediss://localhost with the test CA: the name and the chain check out.
	l := connect("rediss://localhost:"+port+"/", ca)
	for i, want := range []uint64{2, 1, 0} {
		if d, err := l.Acquire(ctx, "t"); err != nil || !d.Allowed || d.Remaining != want {
			t.Fatalf("acquire %d over TLS: %+v %v", i, d, err)
		}
	}
	if d, err := l.AcquireAt(ctx, "t", 1, farT); err != nil || !d.Allowed {
		t.Fatalf("%+v %v", d, err)
	}
	if removed, err := l.Reset(ctx, "t"); err != nil || !removed {
		t.Fatalf("reset over TLS: %v %v", removed, err)
	}

	var unknownAuthority x509.UnknownAuthorityError
	var wrongHost x509.HostnameError
	refused := []struct {
		name  string
		url   string
		roots *x509.CertPool
		cause any // what the verification error must be, nil for none
	}{
		{"system trust store only", "rediss://localhost:" + port + "/", nil, &unknownAuthority},
		{"another CA", "rediss://localhost:" + port + "/", pool("other-ca.crt"), &unknownAuthority},
		{"a host name not in the certificate", "rediss://127.0.0.1:" + port + "/", ca, &wrongHost},
		{"plain text on the TLS port", "redis://127.0.0.1:" + port + "/", nil, nil},
	}
	for _, c := range refused {
		l := connect(c.url, c.roots)
		start := time.Now()
		_, err := l.Acquire(ctx, "t")
		if !errors.Is(err, slidelimit.ErrUnavailable) {
			t.Fatalf("%s: want ErrUnavailable, got %v", c.name, err)
		}
		if took := time.Since(start); took > 2500*time.Millisecond {
			t.Fatalf("%s: took %v with a 2s timeout", c.name, took)
		}
		// Not a timeout: the message says so.
		wantCode(t, err, slidelimit.ErrUnavailable, "the connection to Redis failed")
		if c.cause != nil && !errors.As(err, c.cause) {
			t.Fatalf("%s: the certificate check should be the cause: %v", c.name, err)
		}
		t.Logf("%s: %v", c.name, err)
	}
	admin := server.Client()
	if n, err := admin.DBSize(ctx).Result(); err != nil || n != 0 {
		t.Fatalf("refused clients wrote %d keys (%v)", n, err)
	}
}

// -------------------------------------------------------------- bad input

// Every bad input is ErrInvalidArgument naming its field, on Redis and in
// memory, and nothing reaches Redis: no key is written, no script is sent.
// Braces in a tenant are not an error and make exactly the one expected key.
func TestBadInputWritesNothing(t *testing.T) {
	server := testredis.StartServer(t)
	admin := server.Client()
	client := redis.NewClient(&redis.Options{Addr: server.Addr, ContextTimeoutEnabled: true})
	defer client.Close()
	if err := admin.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}

	good := slidelimit.Policy{Namespace: "bad", Resource: "geocode", Algorithm: slidelimit.SlidingLog, Limit: 3, WindowMs: 1000}
	policies := []struct {
		field  string
		modify func(*slidelimit.Policy)
	}{
		{"limit:", func(p *slidelimit.Policy) { p.Limit = 0 }},
		{"window_ms:", func(p *slidelimit.Policy) { p.WindowMs = 0 }},
		{"limit:", func(p *slidelimit.Policy) { p.Limit, p.WindowMs = 1<<26, 1<<26+1 }}, // limit * window > 2^52
		{"limit:", func(p *slidelimit.Policy) { p.Limit, p.WindowMs = math.MaxUint64, 2 }},
		{"namespace:", func(p *slidelimit.Policy) { p.Namespace = "rl:v2" }}, // "" is DefaultNamespace
		{"namespace:", func(p *slidelimit.Policy) { p.Namespace = "a{b}" }},
		{"namespace:", func(p *slidelimit.Policy) { p.Namespace = strings.Repeat("n", 65) }},
		{"resource:", func(p *slidelimit.Policy) { p.Resource = "}" }},
		{"resource:", func(p *slidelimit.Policy) { p.Resource = "geo\xffcode" }},
		{"algorithm:", func(p *slidelimit.Policy) { p.Algorithm = "sliding log" }}, // "" is DefaultAlgorithm
		{"window:", func(p *slidelimit.Policy) { p.Window = 2 * time.Second }},     // and WindowMs too
		{"window:", func(p *slidelimit.Policy) { p.WindowMs, p.Window = 0, time.Millisecond/2 }},
	}
	for _, c := range policies {
		p := good
		c.modify(&p)
		_, err := slidelimit.New(client, p)
		wantCode(t, err, slidelimit.ErrInvalidArgument, c.field)
		_, err = slidelimit.NewMemory(p)
		wantCode(t, err, slidelimit.ErrInvalidArgument, c.field)
	}

	invalidUTF8 := []string{
		"\xff", "\xfe\xff", "\x80", "ok\x80", // stray bytes
		"ab\xc3",           // cut in the middle of a character
		"\xc0\xaf",         // an overlong '/'
		"\xed\xa0\x80",     // a UTF-16 surrogate
		"\xf4\x90\x80\x80", // above U+10FFFF
	}
	tenants := []struct{ tenant, message string }{
		{"", "tenant: must not be empty"},
		{strings.Repeat("x", 513), "tenant: is 513 bytes"},
		{strings.Repeat("é", 257), "tenant: is 514 bytes"},
	}
	for _, s := range invalidUTF8 {
		tenants = append(tenants, struct{ tenant, message string }{s, "tenant: is not valid UTF-8"})
	}
	for _, alg := range algorithms {
		p := good
		p.Algorithm = alg
		limiters := []*slidelimit.Limiter{newRedisLimiter(t, client, p), newMemoryLimiter(t, p)}
		for _, l := range limiters {
			for _, c := range tenants {
				for name, call := range map[string]func() error{
					"Acquire":   func() error { _, err := l.Acquire(ctx, c.tenant); return err },
					"AcquireN":  func() error { _, err := l.AcquireN(ctx, c.tenant, 1); return err },
					"AcquireAt": func() error { _, err := l.AcquireAt(ctx, c.tenant, 1, farT); return err },
					"Peek":      func() error { _, err := l.Peek(ctx, c.tenant, 1); return err },
					"PeekAt":    func() error { _, err := l.PeekAt(ctx, c.tenant, 1, farT); return err },
					"Reset":     func() error { _, err := l.Reset(ctx, c.tenant); return err },
					"Key":       func() error { _, err := l.Key(c.tenant); return err },
				} {
					err := call()
					if !errors.Is(err, slidelimit.ErrInvalidArgument) || !strings.Contains(err.Error(), c.message) {
						t.Fatalf("%s %s(%q): want invalid_argument %q, got %v", alg, name, c.tenant, c.message, err)
					}
				}
			}
			numbers := []struct {
				field string
				call  func() error
			}{
				{"cost:", func() error { _, err := l.AcquireN(ctx, "t", 0); return err }},
				{"cost:", func() error { _, err := l.AcquireN(ctx, "t", 4); return err }},
				{"cost:", func() error { _, err := l.AcquireN(ctx, "t", math.MaxUint64); return err }},
				{"cost:", func() error { _, err := l.Peek(ctx, "t", 0); return err }},
				{"cost:", func() error { _, err := l.PeekAt(ctx, "t", 4, farT); return err }},
				{"cost:", func() error { _, err := l.AcquireAt(ctx, "t", 4, farT); return err }},
				{"now_ms:", func() error { _, err := l.AcquireAt(ctx, "t", 1, 1<<52+1); return err }},
				{"now_ms:", func() error { _, err := l.PeekAt(ctx, "t", 1, math.MaxUint64); return err }},
			}
			for _, c := range numbers {
				wantCode(t, c.call(), slidelimit.ErrInvalidArgument, c.field)
			}
		}
	}
	if n, err := admin.DBSize(ctx).Result(); err != nil || n != 0 {
		t.Fatalf("bad input wrote %d keys (%v)", n, err)
	}
	stats := commandStats(t, admin)
	for _, cmd := range []string{"cmdstat_evalsha:", "cmdstat_eval:", "cmdstat_del:"} {
		if strings.Contains(stats, cmd) {
			t.Fatalf("bad input reached Redis (%s):\n%s", cmd, stats)
		}
	}

	// Braces are escaped, not refused: one key, the one core names.
	l := newRedisLimiter(t, client, good)
	if d, err := l.Acquire(ctx, "}{a}{{b}}"); err != nil || !d.Allowed {
		t.Fatalf("%+v %v", d, err)
	}
	keys, err := admin.Keys(ctx, "*").Result()
	want := "bad:{geocode:%7D%7Ba%7D%7B%7Bb%7D%7D}:log:1000"
	if err != nil || len(keys) != 1 || keys[0] != want {
		t.Fatalf("keys %q (%v), want exactly %q", keys, err, want)
	}
	testredis.AssertKeysExpire(t, admin)
}
