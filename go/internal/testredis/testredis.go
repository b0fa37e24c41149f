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
	dir := t.TempDir()
	args := append([]string{"--port", port, "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--appendonly", "no", "--daemonize", "no"}, extra...)
	cmd := exec.Command("redis-server", args...)
	log, err := os.Create(filepath.Join(dir, "redis.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatalf("redis-server: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = log.Close()
	})
	addr := "127.0.0.1:" + port
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for c.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			body, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
			t.Fatalf("redis-server on %s did not start:\n%s", addr, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return addr
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
