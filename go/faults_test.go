package slidelimit_test

// Faults only the Go binding meets. What every binding meets (SCRIPT FLUSH,
// restarts, an unreachable, hanging or slow Redis, a key of the wrong type,
// ACL, TLS, bad input) runs against every binding through its driver:
// faults/run (make faults). Here: go-redis clients that do not honour
// context deadlines themselves (the driver's do), the go-redis and x509
// errors kept as causes, and inputs only Go can pass (invalid UTF-8, uint64
// beyond 2^53, the Window duration). Servers other than the shared one are
// the test's own, on free loopback ports, stopped by their pids.

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
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

// ------------------------------------------------- clients without deadlines

// With a go-redis client that does not honour context deadlines
// (ContextTimeoutEnabled false, go-redis's default), the Limiter's own
// timeout still bounds every call: nothing listening, a killed server, a
// peer that never answers.
func TestUnreachableRedisWithoutClientDeadlines(t *testing.T) {
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
		t.Run(target.name, func(t *testing.T) {
			client := redis.NewClient(&redis.Options{Addr: target.addr})
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
			}
		})
	}
}

// Through a proxy that delays each direction by 300 ms, a 250 ms timeout on
// a client without deadlines is ErrUnavailable in time, on an open
// connection and when connecting.
func TestSlowRedisWithoutClientDeadlines(t *testing.T) {
	server := testredis.StartServer(t)
	proxy := testredis.StartProxy(t, server.Addr)
	p := testPolicy(t, slidelimit.SlidingLog, 10, 60_000)
	client := redis.NewClient(&redis.Options{Addr: proxy.Addr})
	defer client.Close()
	short := newRedisLimiter(t, client, p, slidelimit.WithTimeout(250*time.Millisecond))
	if _, err := short.PeekAt(ctx, "t", 1, farT); err != nil { // an open connection
		t.Fatal(err)
	}
	proxy.SetDelay(300 * time.Millisecond)
	fresh := redis.NewClient(&redis.Options{Addr: proxy.Addr})
	defer fresh.Close()
	connecting := newRedisLimiter(t, fresh, p, slidelimit.WithTimeout(250*time.Millisecond))
	for _, l := range []*slidelimit.Limiter{short, connecting} {
		start := time.Now()
		_, err := l.AcquireAt(ctx, "t", 1, farT)
		took := time.Since(start)
		wantCode(t, err, slidelimit.ErrUnavailable, "Redis did not answer")
		if took < 240*time.Millisecond || took > 750*time.Millisecond {
			t.Fatalf("timed out after %v, the timeout is 250ms", took)
		}
	}
	proxy.SetDelay(0)
	if _, err := short.PeekAt(ctx, "t", 1, farT); err != nil {
		t.Fatalf("the short-timeout Limiter should work again: %v", err)
	}
	testredis.AssertKeysExpire(t, server.Client())
}

// ----------------------------------------------------------- error causes

// ErrWrongType keeps the go-redis error as its cause (errors.As), and Redis's
// reply appears once in the message.
func TestWrongTypeWrapsTheRedisError(t *testing.T) {
	client := testredis.Client(t, nil)
	for _, alg := range algorithms {
		l := newRedisLimiter(t, client, testPolicy(t, alg, 3, 1000))
		key, err := l.Key("t")
		if err != nil {
			t.Fatal(err)
		}
		// A TTL, like every key a test leaves: the TTL check runs after the Go run.
		if err := client.Set(ctx, key, "not ours", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		_, err = l.Acquire(ctx, "t")
		wantCode(t, err, slidelimit.ErrWrongType, fmt.Sprintf("key %s holds a value the %s algorithm does not use", key, alg))
		var redisErr redis.Error
		if !errors.As(err, &redisErr) || strings.Count(err.Error(), "WRONGTYPE") != 1 {
			t.Fatalf("the go-redis error should be wrapped, its text once: %v", err)
		}
		if removed, err := l.Reset(ctx, "t"); err != nil || !removed {
			t.Fatalf("reset: %v %v", removed, err)
		}
	}
}

// A refused TLS connection is ErrUnavailable "the connection to Redis
// failed", with the x509 verification error as its cause; a rediss:// URL
// never turns verification off.
func TestTLSVerificationErrorsAreTheCause(t *testing.T) {
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
	testredis.Spawn(t, []string{"--port", "0", "--tls-port", port,
		"--tls-cert-file", filepath.Join(dir, "server.crt"), "--tls-key-file", filepath.Join(dir, "server.key"),
		"--tls-ca-cert-file", filepath.Join(dir, "ca.crt"), "--tls-auth-clients", "no"},
		&redis.Options{Addr: "127.0.0.1:" + port, TLSConfig: &tls.Config{RootCAs: ca, ServerName: "localhost", MinVersion: tls.VersionTLS12}})

	var unknownAuthority x509.UnknownAuthorityError
	var wrongHost x509.HostnameError
	refused := []struct {
		name  string
		url   string
		roots *x509.CertPool
		cause any
	}{
		{"system trust store only", "rediss://localhost:" + port + "/", nil, &unknownAuthority},
		{"another CA", "rediss://localhost:" + port + "/", pool("other-ca.crt"), &unknownAuthority},
		{"a host name not in the certificate", "rediss://127.0.0.1:" + port + "/", ca, &wrongHost},
	}
	for _, c := range refused {
		opts, err := redis.ParseURL(c.url)
		if err != nil {
			t.Fatal(err)
		}
		if opts.TLSConfig == nil || opts.TLSConfig.InsecureSkipVerify {
			t.Fatal("verification must stay on")
		}
		opts.TLSConfig.RootCAs = c.roots // nil: the system's trust store
		opts.ContextTimeoutEnabled = true
		client := redis.NewClient(opts)
		t.Cleanup(func() { _ = client.Close() })
		l := newRedisLimiter(t, client, testPolicy(t, slidelimit.SlidingLog, 3, 60_000), slidelimit.WithTimeout(2*time.Second))
		_, err = l.Acquire(ctx, "t")
		wantCode(t, err, slidelimit.ErrUnavailable, "the connection to Redis failed")
		if !errors.As(err, c.cause) {
			t.Fatalf("%s: the certificate check should be the cause: %v", c.name, err)
		}
	}
}

// -------------------------------------------------------------- bad input

// Inputs only Go can pass, each ErrInvalidArgument naming its field on
// Redis and in memory, and none reaches Redis.
func TestGoOnlyBadInputWritesNothing(t *testing.T) {
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
		{"limit:", func(p *slidelimit.Policy) { p.Limit, p.WindowMs = math.MaxUint64, 2 }},
		{"resource:", func(p *slidelimit.Policy) { p.Resource = "geo\xffcode" }},
		{"window:", func(p *slidelimit.Policy) { p.Window = 2 * time.Second }}, // and WindowMs too
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
	for _, alg := range algorithms {
		p := good
		p.Algorithm = alg
		for _, l := range []*slidelimit.Limiter{newRedisLimiter(t, client, p), newMemoryLimiter(t, p)} {
			for _, tenant := range invalidUTF8 {
				for name, call := range map[string]func() error{
					"Acquire":   func() error { _, err := l.Acquire(ctx, tenant); return err },
					"AcquireAt": func() error { _, err := l.AcquireAt(ctx, tenant, 1, farT); return err },
					"Peek":      func() error { _, err := l.Peek(ctx, tenant, 1); return err },
					"Reset":     func() error { _, err := l.Reset(ctx, tenant); return err },
					"Key":       func() error { _, err := l.Key(tenant); return err },
				} {
					if err := call(); !errors.Is(err, slidelimit.ErrInvalidArgument) || !strings.Contains(err.Error(), "tenant: is not valid UTF-8") {
						t.Fatalf("%s %s(%q): want invalid_argument on the tenant, got %v", alg, name, tenant, err)
					}
				}
			}
			wantCode(t, func() error { _, err := l.AcquireN(ctx, "t", math.MaxUint64); return err }(), slidelimit.ErrInvalidArgument, "cost:")
			wantCode(t, func() error { _, err := l.PeekAt(ctx, "t", 1, math.MaxUint64); return err }(), slidelimit.ErrInvalidArgument, "now_ms:")
		}
	}
	if n, err := admin.DBSize(ctx).Result(); err != nil || n != 0 {
		t.Fatalf("bad input wrote %d keys (%v)", n, err)
	}
	stats, err := admin.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"cmdstat_evalsha:", "cmdstat_eval:", "cmdstat_del:"} {
		if strings.Contains(stats, cmd) {
			t.Fatalf("bad input reached Redis (%s):\n%s", cmd, stats)
		}
	}
}
