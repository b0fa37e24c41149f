// Package testredis starts real redis-server processes for tests: a
// standalone server or a local Cluster, each on free loopback ports (from
// scripts/free-port.sh), stopped by their own pids when the test ends.
package testredis

import (
	"context"
	"fmt"
	"net"
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

// clusterPort is a free port whose Cluster bus port (port + 10000) is free
// too, which Redis requires to be at most 65535.
func clusterPort(t testing.TB) string {
	t.Helper()
	for i := 0; i < 100; i++ {
		port := FreePort(t)
		n, err := strconv.Atoi(port)
		if err != nil || n > 55535 {
			continue
		}
		bus, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", n+10000))
		if err != nil {
			continue
		}
		bus.Close()
		return port
	}
	t.Fatal("no free port pair for a Cluster node")
	return ""
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
		err := c.Ping(context.Background()).Err()
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

// Cluster starts a Redis Cluster of `masters` nodes (no replicas) and
// returns their addresses once every slot is served.
func Cluster(t testing.TB, masters int) []string {
	t.Helper()
	addrs := make([]string, masters)
	for i := range addrs {
		addrs[i] = start(t, clusterPort(t), "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "2000")
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command("redis-cli", args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, addr := range addrs {
		c := redis.NewClient(&redis.Options{Addr: addr})
		for {
			info, err := c.ClusterInfo(context.Background()).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				c.Close()
				t.Fatalf("cluster node %s not ready: %v %s", addr, err, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
		c.Close()
	}
	return addrs
}

// Unreachable is an address on which nothing listens.
func Unreachable(t testing.TB) string {
	return fmt.Sprintf("127.0.0.1:%s", FreePort(t))
}
