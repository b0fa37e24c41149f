package testredis

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Proxy is a loopback TCP proxy that delays every chunk, in both directions,
// by the current delay: latency without a bandwidth limit (chunks keep their
// order and are not delayed by each other).
type Proxy struct {
	// Addr is where clients connect (127.0.0.1:<port>).
	Addr string

	upstream string
	delay    atomic.Int64
	ln       net.Listener
	mu       sync.Mutex
	conns    []net.Conn
	wg       sync.WaitGroup
}

// StartProxy listens on a free loopback port and forwards to upstream; it is
// closed, with every connection it opened, when the test ends.
func StartProxy(t testing.TB, upstream string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{Addr: ln.Addr().String(), upstream: upstream, ln: ln}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.close)
	return p
}

// SetDelay sets the one-way delay of every chunk from now on.
func (p *Proxy) SetDelay(d time.Duration) { p.delay.Store(int64(d)) }

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		server, err := net.DialTimeout("tcp", p.upstream, 2*time.Second)
		if err != nil {
			client.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, client, server)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(client, server)
		go p.pipe(server, client)
	}
}

// pipe copies from -> to, each chunk written `delay` after it was read.
func (p *Proxy) pipe(from, to net.Conn) {
	defer p.wg.Done()
	type chunk struct {
		due  time.Time
		data []byte
	}
	queue := make(chan chunk, 256)
	go func() {
		defer close(queue)
		for {
			buf := make([]byte, 16<<10)
			n, err := from.Read(buf)
			if n > 0 {
				queue <- chunk{time.Now().Add(time.Duration(p.delay.Load())), buf[:n]}
			}
			if err != nil {
				return
			}
		}
	}()
	for c := range queue {
		time.Sleep(time.Until(c.due))
		if _, err := to.Write(c.data); err != nil {
			break
		}
	}
	// One side is gone: close both so the other side sees it, and let the
	// reader finish (closing `from` ends its Read).
	from.Close()
	to.Close()
	for range queue {
	}
}

func (p *Proxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// Silent is an address that accepts connections and never answers: a Redis
// that hangs (or a network that drops replies). Closed when the test ends.
func Silent(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return ln.Addr().String()
}

// Certificates is a directory with a test CA (ca.crt, ca.key), a server
// certificate for DNS name localhost only (server.crt, server.key), signed by
// that CA, and an unrelated CA (other-ca.crt), made with the openssl CLI.
func Certificates(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	openssl := func(args ...string) {
		t.Helper()
		cmd := exec.Command("openssl", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("openssl %v: %v\n%s (scripts/deps.sh installs openssl)", args, err, out)
		}
	}
	ec := []string{"-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"}
	for _, ca := range []string{"ca", "other-ca"} {
		openssl(append([]string{"req", "-x509"}, append(ec, "-keyout", ca+".key", "-out", ca+".crt",
			"-days", "2", "-subj", "/CN=slidelimit go test "+ca)...)...)
	}
	openssl(append([]string{"req"}, append(ec, "-keyout", "server.key", "-out", "server.csr",
		"-subj", "/CN=localhost")...)...)
	ext := "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost\n"
	if err := os.WriteFile(filepath.Join(dir, "server.ext"), []byte(ext), 0o600); err != nil {
		t.Fatal(err)
	}
	openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-set_serial", "2",
		"-days", "2", "-extfile", "server.ext", "-out", "server.crt")
	return dir
}

// AssertKeysExpire fails the test when any key on the server has no TTL:
// every key slidelimit writes must expire by itself.
func AssertKeysExpire(t testing.TB, c *redis.Client) {
	t.Helper()
	if err := KeysExpire(context.Background(), c); err != nil {
		t.Fatal(err)
	}
}

// KeysExpire SCANs the server and returns an error naming the first key
// without a TTL (safe to call from any goroutine, e.g. ForEachMaster).
func KeysExpire(ctx context.Context, c *redis.Client) error {
	var cursor uint64
	for i := 0; i < 10_000; i++ {
		keys, next, err := c.Scan(ctx, cursor, "*", 1000).Result()
		if err != nil {
			return err
		}
		for _, key := range keys {
			ttl, err := c.PTTL(ctx, key).Result()
			if err != nil {
				return err
			}
			if ttl == -1 { // go-redis keeps PTTL's -1 (no TTL) as is
				return fmt.Errorf("%s: key %q has no TTL", c.Options().Addr, key)
			}
		}
		if cursor = next; cursor == 0 {
			return nil
		}
	}
	return fmt.Errorf("%s: SCAN did not finish", c.Options().Addr)
}
