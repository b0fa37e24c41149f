// Package testredis gives tests real redis-server processes: the standalone
// server and the six-node Cluster that `make test-go` starts, and servers of
// a test's own on free loopback ports (from scripts/free-port.sh), stopped by
// their own pids when the test ends.
package testredis

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// URL is the Redis that `make test-go` started (scripts/with-redis.sh). A
// test without it fails: it never skips.
func URL(t testing.TB) string {
	t.Helper()
	url := os.Getenv("SLIDELIMIT_TEST_REDIS_URL")
	if url == "" {
		t.Fatal("SLIDELIMIT_TEST_REDIS_URL is not set: run `make test-go` (or scripts/with-redis.sh go test ./...)")
	}
	return url
}

// Client connects to URL with the given option tweak (nil for none).
func Client(t testing.TB, tweak func(*redis.Options)) *redis.Client {
	t.Helper()
	opts, err := redis.ParseURL(URL(t))
	if err != nil {
		t.Fatal(err)
	}
	if tweak != nil {
		tweak(opts)
	}
	c := redis.NewClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// FreePort asks the project's script for a loopback port nothing listens on.
func FreePort(t testing.TB) string {
	t.Helper()
	out, err := exec.Command(filepath.Join(repoRoot(), "scripts", "free-port.sh")).Output()
	if err != nil {
		t.Fatalf("free-port.sh: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// Start runs one redis-server of this test's own (extra options appended)
// and returns its address; it is stopped by pid when the test ends.
func Start(t testing.TB, extra ...string) string {
	t.Helper()
	return start(t, FreePort(t), extra...)
}

func start(t testing.TB, port string, extra ...string) string {
	t.Helper()
	args := append([]string{"--port", port}, extra...)
	return Spawn(t, args, &redis.Options{Addr: "127.0.0.1:" + port}).Addr
}

// Server is a redis-server of the test's own: it can be killed and started
// again on the same port (with the same options, and empty: nothing is saved).
type Server struct {
	// Addr is 127.0.0.1:<port> (the TLS port for a TLS server).
	Addr string

	t     testing.TB
	args  []string
	ready *redis.Options
	dir   string
	cmd   *exec.Cmd
	log   *os.File
}

// StartServer runs a redis-server on a free port, stopped by its pid when the
// test ends unless the test stopped it already.
func StartServer(t testing.TB, extra ...string) *Server {
	t.Helper()
	port := FreePort(t)
	return Spawn(t, append([]string{"--port", port}, extra...), &redis.Options{Addr: "127.0.0.1:" + port})
}

// Spawn runs redis-server with args (which must choose the ports) and waits
// until a client made with ready answers PING. ready.Addr becomes Server.Addr.
func Spawn(t testing.TB, args []string, ready *redis.Options) *Server {
	t.Helper()
	s := &Server{Addr: ready.Addr, t: t, ready: ready, dir: t.TempDir(),
		args: append([]string{"--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
			"--daemonize", "no"}, args...)}
	s.Start()
	t.Cleanup(s.Stop)
	return s
}

// Start starts the server again after Stop, on the same port.
func (s *Server) Start() {
	s.t.Helper()
	if s.cmd != nil {
		s.t.Fatal("testredis: Start on a running server")
	}
	log, err := os.OpenFile(filepath.Join(s.dir, "redis.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		s.t.Fatal(err)
	}
	cmd := exec.Command("redis-server", append(s.args, "--dir", s.dir)...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		s.t.Fatalf("redis-server: %v", err)
	}
	s.cmd, s.log = cmd, log
	c := redis.NewClient(s.ready)
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		// The server answering must be this process: another may have taken
		// the port between the kernel choosing it (or Stop) and now.
		err := s.answersAsOwnPid(c)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			body, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
			s.Stop()
			s.t.Fatalf("redis-server on %s did not start (%v):\n%s", s.Addr, err, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *Server) answersAsOwnPid(c *redis.Client) error {
	info, err := c.Info(context.Background(), "server").Result()
	if err != nil {
		return err
	}
	want := "process_id:" + strconv.Itoa(s.cmd.Process.Pid)
	for _, line := range strings.Split(info, "\n") {
		if strings.TrimSpace(line) == want {
			return nil
		}
	}
	return fmt.Errorf("another process answers on %s (no %q in INFO server)", s.Addr, want)
}

// Stop kills the server by its pid (SIGKILL: a crash, nothing is saved) and
// waits for it to exit. Safe to call when it is not running.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	_ = s.log.Close()
	s.cmd, s.log = nil, nil
}

// Client is a client of this server made from the readiness options, closed
// when the test ends.
func (s *Server) Client() *redis.Client {
	opts := *s.ready
	c := redis.NewClient(&opts)
	s.t.Cleanup(func() { _ = c.Close() })
	return c
}

// ClusterAddrs are the nodes of the six-node Cluster (three masters, three
// replicas) that `make test-go` started (scripts/with-cluster.sh). Tests
// share it, so each writes under a namespace of its own (UniqueNamespace). A
// test without it fails: it never skips.
func ClusterAddrs(t testing.TB) []string {
	t.Helper()
	urls := os.Getenv("SLIDELIMIT_TEST_CLUSTER_URLS")
	if urls == "" {
		t.Fatal("SLIDELIMIT_TEST_CLUSTER_URLS is not set: run `make test-go` " +
			"(or scripts/with-cluster.sh go test ./...), which starts a local Redis Cluster of its own")
	}
	var addrs []string
	for _, url := range strings.Split(urls, ",") {
		opts, err := redis.ParseURL(url)
		if err != nil {
			t.Fatalf("SLIDELIMIT_TEST_CLUSTER_URLS: %q: %v", url, err)
		}
		addrs = append(addrs, opts.Addr)
	}
	return addrs
}

// UniqueNamespace is a key namespace no other test, run or process uses:
// tests sharing one server (and the two `go test` runs of `make test-go`)
// never see each other's keys.
func UniqueNamespace(prefix string) string {
	return fmt.Sprintf("%s-%d-%s", prefix, os.Getpid(), strconv.FormatInt(time.Now().UnixNano(), 36))
}

// Unreachable is an address on which nothing listens.
func Unreachable(t testing.TB) string {
	return fmt.Sprintf("127.0.0.1:%s", FreePort(t))
}
