// Command slidelimit-conformance runs a conformance vector file (format
// slidelimit-vectors/1) through the Go binding against the Redis at
// SLIDELIMIT_TEST_REDIS_URL (or the Cluster at SLIDELIMIT_TEST_CLUSTER_URLS
// when SLIDELIMIT_CONFORMANCE_CLUSTER=1) and prints the decision log of docs/protocol.md:
// one compact JSON line per key vector and per step, nothing else on stdout.
//
//	slidelimit-conformance VECTOR_FILE
//
// Every key a decision vector touches is deleted first; steps run in order
// with the caller's now_ms. Exit status 2 when the file cannot be used.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/slidelimit/slidelimit/go"
	"github.com/slidelimit/slidelimit/go/internal/verbatim"
)

const format = "slidelimit-vectors/1"

type vectorFile struct {
	Format  string            `json:"format"`
	Comment string            `json:"comment,omitempty"`
	Vectors []json.RawMessage `json:"vectors"`
}

type errorExpect struct {
	Error string `json:"error"`
}

type keyVector struct {
	Name    string `json:"name"`
	Kind    string `json:"kind"`
	Comment string `json:"comment"`
	Input   struct {
		Namespace string      `json:"namespace"`
		Resource  string      `json:"resource"`
		Tenant    string      `json:"tenant"`
		Algorithm string      `json:"algorithm"`
		WindowMs  json.Number `json:"window_ms"`
	} `json:"input"`
	Expect json.RawMessage `json:"expect"`
}

type step struct {
	NowMs   json.Number     `json:"now_ms"`
	Tenant  string          `json:"tenant"`
	Cost    json.Number     `json:"cost"`
	Comment string          `json:"comment,omitempty"`
	Expect  json.RawMessage `json:"expect"`
}

type decisionVector struct {
	Name    string `json:"name"`
	Kind    string `json:"kind"`
	Comment string `json:"comment"`
	Policy  struct {
		Namespace string      `json:"namespace"`
		Resource  string      `json:"resource"`
		Algorithm string      `json:"algorithm"`
		Limit     json.Number `json:"limit"`
		WindowMs  json.Number `json:"window_ms"`
	} `json:"policy"`
	Steps []step `json:"steps"`
}

func strict(raw []byte, into any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	return dec.Decode(into)
}

// knownCode reports whether name is one of core's error codes.
func knownCode(name string) bool {
	for _, c := range []slidelimit.Code{slidelimit.ErrInvalidArgument, slidelimit.ErrUnavailable,
		slidelimit.ErrScriptError, slidelimit.ErrWrongType, slidelimit.ErrMalformedReply,
		slidelimit.ErrPermissionDenied, slidelimit.ErrInternal} {
		if c.String() == name {
			return true
		}
	}
	return false
}

// checkExpect accepts a key and slot, a full decision, or {"error": "<known code>"}; the
// comparison itself is conformance/check.py's job.
func checkExpect(raw json.RawMessage, isKey bool) error {
	var e errorExpect
	if strict(raw, &e) == nil {
		if !knownCode(e.Error) {
			return fmt.Errorf("unknown error code %q", e.Error)
		}
		return nil
	}
	if isKey {
		var k struct {
			Key  string `json:"key"`
			Slot uint16 `json:"slot"`
		}
		return strict(raw, &k)
	}
	var d struct {
		Allowed      bool   `json:"allowed"`
		Remaining    uint64 `json:"remaining"`
		RetryAfterMs uint64 `json:"retry_after_ms"`
		ResetAfterMs uint64 `json:"reset_after_ms"`
		NowMs        uint64 `json:"now_ms"`
	}
	return strict(raw, &d)
}

// load reads and checks the whole file first, so a bad file prints no log.
func load(path string) ([]any, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var file vectorFile
	if err := strict(text, &file); err != nil {
		return nil, err
	}
	if file.Format != format {
		return nil, fmt.Errorf("format is %q, expected %q", file.Format, format)
	}
	var out []any
	for i, raw := range file.Vectors {
		var head struct {
			Name string `json:"name"`
			Kind string `json:"kind"`
		}
		if err := json.Unmarshal(raw, &head); err != nil {
			return nil, fmt.Errorf("vector #%d: %w", i, err)
		}
		switch head.Kind {
		case "key":
			var v keyVector
			if err := strict(raw, &v); err != nil {
				return nil, fmt.Errorf("vector %s: %w", head.Name, err)
			}
			if err := checkExpect(v.Expect, true); err != nil {
				return nil, fmt.Errorf("vector %s: %w", head.Name, err)
			}
			out = append(out, &v)
		case "decision":
			var v decisionVector
			if err := strict(raw, &v); err != nil {
				return nil, fmt.Errorf("vector %s: %w", head.Name, err)
			}
			for _, s := range v.Steps {
				if err := checkExpect(s.Expect, false); err != nil {
					return nil, fmt.Errorf("vector %s: %w", head.Name, err)
				}
			}
			out = append(out, &v)
		default:
			return nil, fmt.Errorf("vector %s: kind must be \"key\" or \"decision\", got %q", head.Name, head.Kind)
		}
	}
	return out, nil
}

// integer is a JSON number as the non-negative integer the contract takes;
// anything else is invalid_argument.
func integer(field string, n json.Number) (uint64, error) {
	v, err := strconv.ParseUint(n.String(), 10, 64)
	if err != nil {
		return 0, &slidelimit.Error{Code: slidelimit.ErrInvalidArgument, Message: field + ": must be a non-negative integer, got " + n.String()}
	}
	return v, nil
}

// jsonString writes s as serde_json does (the reference log's byte form):
// only '"', '\\' and control characters are escaped.
func jsonString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if r < 0x20 {
				fmt.Fprintf(&b, `\u%04x`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

func errorCode(err error) string {
	if code, ok := slidelimit.CodeOf(err); ok {
		return code.String()
	}
	return slidelimit.ErrInternal.String()
}

func keyLine(v *keyVector) string {
	key, err := func() (string, error) {
		window, err := integer("window_ms", v.Input.WindowMs)
		if err != nil {
			return "", err
		}
		// The key does not depend on the limit; 1 is always valid.
		l, err := slidelimit.NewMemory(slidelimit.Policy{Namespace: v.Input.Namespace, Resource: v.Input.Resource,
			Algorithm: slidelimit.Algorithm(v.Input.Algorithm), Limit: 1, WindowMs: window})
		if err != nil {
			return "", err
		}
		defer l.Close()
		return l.Key(v.Input.Tenant)
	}()
	if err != nil {
		return fmt.Sprintf(`{"vector":%s,"error":"%s"}`, jsonString(v.Name), errorCode(err))
	}
	slot, err := slidelimit.KeySlot(key)
	if err != nil {
		return fmt.Sprintf(`{"vector":%s,"error":"%s"}`, jsonString(v.Name), errorCode(err))
	}
	return fmt.Sprintf(`{"vector":%s,"key":%s,"slot":%d}`, jsonString(v.Name), jsonString(key), slot)
}

func stepLine(name string, i int, d slidelimit.Decision, err error) string {
	if err != nil {
		return fmt.Sprintf(`{"vector":%s,"step":%d,"error":"%s"}`, jsonString(name), i, errorCode(err))
	}
	return fmt.Sprintf(`{"vector":%s,"step":%d,"allowed":%t,"remaining":%d,"retry_after_ms":%d,"reset_after_ms":%d,"now_ms":%d}`,
		jsonString(name), i, d.Allowed, d.Remaining, d.RetryAfterMs, d.ResetAfterMs, d.NowMs)
}

func decisionLines(ctx context.Context, client redis.UniversalClient, v *decisionVector) []string {
	limiter, err := func() (*slidelimit.Limiter, error) {
		limit, err := integer("limit", v.Policy.Limit)
		if err != nil {
			return nil, err
		}
		window, err := integer("window_ms", v.Policy.WindowMs)
		if err != nil {
			return nil, err
		}
		l, err := slidelimit.New(client, slidelimit.Policy{Namespace: v.Policy.Namespace, Resource: v.Policy.Resource,
			Algorithm: slidelimit.Algorithm(v.Policy.Algorithm), Limit: limit, WindowMs: window},
			slidelimit.WithTimeout(2*time.Second))
		if err != nil {
			return nil, err
		}
		// Empty state: delete every key the vector will touch.
		tenants := map[string]bool{}
		for _, s := range v.Steps {
			tenants[s.Tenant] = true
		}
		sorted := make([]string, 0, len(tenants))
		for t := range tenants {
			sorted = append(sorted, t)
		}
		sort.Strings(sorted)
		for _, t := range sorted {
			if _, err := l.Reset(ctx, t); err != nil {
				if code, _ := slidelimit.CodeOf(err); code == slidelimit.ErrInvalidArgument {
					continue // a tenant no key can be built for touches no key
				}
				l.Close()
				return nil, err
			}
		}
		return l, nil
	}()
	if limiter != nil {
		defer limiter.Close()
	}
	lines := make([]string, len(v.Steps))
	for i, s := range v.Steps {
		d, stepErr := slidelimit.Decision{}, err
		if stepErr == nil {
			var cost, now uint64
			if cost, stepErr = integer("cost", s.Cost); stepErr == nil {
				if now, stepErr = integer("now_ms", s.NowMs); stepErr == nil {
					d, stepErr = limiter.AcquireAt(ctx, s.Tenant, cost, now)
				}
			}
		}
		lines[i] = stepLine(v.Name, i, d, stepErr)
	}
	return lines
}

// connect opens the Redis at SLIDELIMIT_TEST_REDIS_URL or, with
// SLIDELIMIT_CONFORMANCE_CLUSTER=1, the Cluster whose nodes are listed
// (comma-separated URLs) in SLIDELIMIT_TEST_CLUSTER_URLS.
func connect() (redis.UniversalClient, error) {
	if os.Getenv("SLIDELIMIT_CONFORMANCE_CLUSTER") == "1" {
		urls := os.Getenv("SLIDELIMIT_TEST_CLUSTER_URLS")
		if urls == "" {
			return nil, fmt.Errorf("set SLIDELIMIT_TEST_CLUSTER_URLS (scripts/with-cluster.sh does)")
		}
		var addrs []string
		for _, u := range strings.Split(urls, ",") {
			opts, err := redis.ParseURL(strings.TrimSpace(u))
			if err != nil {
				return nil, fmt.Errorf("SLIDELIMIT_TEST_CLUSTER_URLS: %w", err)
			}
			addrs = append(addrs, opts.Addr)
		}
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, ContextTimeoutEnabled: true}), nil
	}
	url := os.Getenv("SLIDELIMIT_TEST_REDIS_URL")
	if url == "" {
		return nil, fmt.Errorf("set SLIDELIMIT_TEST_REDIS_URL (scripts/with-redis.sh does)")
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		return nil, fmt.Errorf("SLIDELIMIT_TEST_REDIS_URL: %w", err)
	}
	opts.ContextTimeoutEnabled = true
	return redis.NewClient(opts), nil
}

func main() {
	// A vector's fields reach core as they are: an empty namespace or
	// algorithm is core's invalid_argument, not the Go API's default.
	verbatim.Policy.Store(true)
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: slidelimit-conformance VECTOR_FILE")
		os.Exit(2)
	}
	vectors, err := load(os.Args[1])
	if err != nil {
		fmt.Fprintf(os.Stderr, "vector file %s: %v\n", os.Args[1], err)
		os.Exit(2)
	}
	client, err := connect()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	defer client.Close()

	ctx := context.Background()
	out := bufio.NewWriter(os.Stdout)
	for _, v := range vectors {
		switch v := v.(type) {
		case *keyVector:
			fmt.Fprintln(out, keyLine(v))
		case *decisionVector:
			for _, line := range decisionLines(ctx, client, v) {
				fmt.Fprintln(out, line)
			}
		}
	}
	if err := out.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
