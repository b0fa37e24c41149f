// Command slidelimit-driver puts the Go binding's public API behind the JSON
// lines of docs/driver.md: one request per line on stdin, one reply per line
// on stdout. The shared harnesses (conformance, audit, faults) drive the Go
// binding through it and nothing else. It decides nothing itself: what it
// prints is what the binding returned.
package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/slidelimit/slidelimit/go"
	"github.com/slidelimit/slidelimit/go/internal/verbatim"
)

// maxConcurrency bounds a load's callers (the Rust driver's bound).
const maxConcurrency = 100_000

// protocolError is a request the driver cannot read: answered as
// {"error":"protocol",...}, which the harness counts against the driver.
type protocolError struct{ message string }

func (p *protocolError) Error() string { return p.message }

func protocolf(format string, args ...any) error {
	return &protocolError{message: fmt.Sprintf(format, args...)}
}

// jsonString is s as a JSON string, without HTML escaping.
func jsonString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return `""` // a string always encodes
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// decisionLine is the canonical byte form of docs/driver.md (denied_by only
// when the decision names a limit).
func decisionLine(d slidelimit.Decision) string {
	deniedBy := ""
	if i, ok := d.DeniedBy(); ok {
		deniedBy = `,"denied_by":` + strconv.Itoa(i)
	}
	return `{"allowed":` + strconv.FormatBool(d.Allowed) +
		`,"remaining":` + strconv.FormatUint(d.Remaining, 10) +
		`,"retry_after_ms":` + strconv.FormatUint(d.RetryAfterMs, 10) +
		`,"reset_after_ms":` + strconv.FormatUint(d.ResetAfterMs, 10) +
		`,"now_ms":` + strconv.FormatUint(d.NowMs, 10) + deniedBy + `}`
}

// errorLine prints a failure: a protocol error, or the binding's error with
// its code, field and message as a user sees them.
func errorLine(err error) string {
	var p *protocolError
	if errors.As(err, &p) {
		return `{"error":"protocol","message":` + jsonString(p.message) + `}`
	}
	var in *inputError
	if errors.As(err, &in) {
		return `{"error":` + jsonString(slidelimit.ErrInvalidArgument.String()) + `,"field":` + jsonString(in.field) +
			`,"message":` + jsonString(in.field+": "+in.problem) + `}`
	}
	var e *slidelimit.Error
	if !errors.As(err, &e) {
		// The binding returns *Error for every failure; anything else is a bug.
		return `{"error":"internal","field":null,"message":` + jsonString(err.Error()) + `}`
	}
	field := "null"
	if f := e.Field(); f != "" {
		field = jsonString(f)
	}
	return `{"error":` + jsonString(e.Code.String()) + `,"field":` + field + `,"message":` + jsonString(messageOf(err)) + `}`
}

// messageOf is an error's text without the "slidelimit: <code>: " that
// Error() starts with: the code has its own key wherever it is printed.
func messageOf(err error) string {
	var e *slidelimit.Error
	if !errors.As(err, &e) {
		return err.Error()
	}
	return strings.TrimPrefix(e.Error(), "slidelimit: "+e.Code.String()+": ")
}

// request is one line, read by name with the JSON type each field has in the
// protocol; a field the op does not know is refused, so that a misspelt field
// is no silent default.
type request struct {
	op     string
	fields map[string]any
}

var knownFields = map[string][]string{
	"hello":      {},
	"exit":       {},
	"store":      {"kind", "url", "urls", "timeout_ms", "tls_ca_file"},
	"policy":     {"namespace", "resource", "algorithm", "limit", "window_ms", "buckets", "limits", "deny_cache"},
	"acquire":    {"tenant", "cost"},
	"acquire_at": {"tenant", "cost", "now_ms"},
	"peek":       {"tenant", "cost", "now_ms"},
	"reset":      {"tenant"},
	"key":        {"tenant"},
	"load": {"lang", "tenant", "tenants", "cost", "concurrency", "start_at_ms", "end_at_ms", "active",
		"ramp_ms", "jitter_ms", "skew_ms", "out"},
}

// dropNulls makes a JSON null the same as a field left out (docs/driver.md),
// as it is for the drivers of dynamic languages.
func dropNulls(fields map[string]any) {
	for name, v := range fields {
		if v == nil {
			delete(fields, name)
		}
	}
}

func parseRequest(line []byte) (*request, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	var fields map[string]any
	if err := dec.Decode(&fields); err != nil {
		return nil, protocolf("bad JSON: %v", err)
	}
	if dec.More() {
		return nil, protocolf("bad JSON: more than one value on the line")
	}
	if fields == nil {
		return nil, protocolf("a request must be an object")
	}
	raw, ok := fields["op"]
	if !ok {
		return nil, protocolf("op is required")
	}
	op, ok := raw.(string)
	if !ok {
		return nil, protocolf("op must be a string")
	}
	known, ok := knownFields[op]
	if !ok {
		return nil, protocolf("unknown op %q", op)
	}
	delete(fields, "op")
	dropNulls(fields)
	if err := keepLoneSurrogates(line, fields); err != nil {
		return nil, err
	}
	for name := range fields {
		if !slices.Contains(known, name) {
			return nil, protocolf("%s: unknown field %q", op, name)
		}
	}
	r := &request{op: op, fields: fields}
	if err := r.checkTypes(); err != nil {
		return nil, err
	}
	return r, nil
}

// stringFields are the fields the protocol gives as JSON strings; every
// other field but the lists and store's url is a number, deny_cache a
// boolean.
var stringFields = []string{"namespace", "resource", "algorithm", "tenant", "kind", "tls_ca_file", "lang", "out"}

// checkTypes reads every field's JSON type before any value reaches the
// binding: a request the driver cannot read is a protocol error wherever its
// fault sits, never a refusal of an earlier field (docs/driver.md), as the
// drivers of dynamic languages read it. Each entry of a policy's limits is
// read the same way, and an acquire_at without now_ms is refused here too.
func (r *request) checkTypes() error {
	// In name order: a request with several faults gets the same one each time.
	for _, name := range slices.Sorted(maps.Keys(r.fields)) {
		v := r.fields[name]
		var fits bool
		want := "a JSON number"
		switch {
		case slices.Contains(stringFields, name):
			_, fits = v.(string)
			want = "a string"
		case name == "deny_cache":
			_, fits = v.(bool)
			want = "a boolean"
		case name == "url" || name == "urls": // read by store for its kind alone, before any other field
			fits = true
		case name == "limits":
			if err := r.checkLimits(); err != nil {
				return err
			}
			fits = true
		case name == "active" || name == "tenants": // load's own, read as they are used
			fits = true
		default:
			_, fits = v.(json.Number)
		}
		if !fits {
			return r.wrong(name, want)
		}
	}
	if _, ok := r.fields["now_ms"]; r.op == "acquire_at" && !ok {
		return protocolf("%s: now_ms is required", r.op)
	}
	return nil
}

// checkLimits reads a policy's limits list as checkTypes reads a request:
// a list of objects, each with the single form's fields only, of their
// types, and no single form's field beside it.
func (r *request) checkLimits() error {
	list, ok := r.fields["limits"].([]any)
	if !ok {
		return r.wrong("limits", "a list of objects")
	}
	for _, name := range singleFields {
		if _, ok := r.fields[name]; ok {
			return protocolf("policy: limits and %s are exclusive", name)
		}
	}
	for i, item := range list {
		fields, ok := item.(map[string]any)
		if !ok {
			return r.wrong("limits", "a list of objects")
		}
		dropNulls(fields)
		entry := &request{op: fmt.Sprintf("policy limits[%d]", i), fields: fields}
		for name := range fields {
			if !slices.Contains(singleFields, name) {
				return protocolf("%s: unknown field %q", entry.op, name)
			}
		}
		if err := entry.checkTypes(); err != nil {
			return err
		}
	}
	return nil
}

// keepLoneSurrogates reads again each string field that holds a lone
// surrogate (JSON's \ud800; docs/driver.md, "Framing"): encoding/json turns
// one into U+FFFD, a valid tenant, where a Go string can hold the three
// bytes that stand for it, not valid UTF-8, as a user's string could. The
// binding then refuses them.
func keepLoneSurrogates(line []byte, fields map[string]any) error {
	if !bytes.Contains(line, []byte(`\ud`)) && !bytes.Contains(line, []byte(`\uD`)) {
		return nil
	}
	var raws map[string]json.RawMessage
	if err := json.Unmarshal(line, &raws); err != nil {
		return protocolf("bad JSON: %v", err)
	}
	for name, raw := range raws {
		if _, isString := fields[name].(string); isString {
			fields[name] = unquoteKeepingSurrogates(raw)
		}
	}
	return nil
}

// unquoteKeepingSurrogates decodes a JSON string that encoding/json has
// already read (so it is well formed), writing a lone surrogate as its three
// bytes instead of U+FFFD.
func unquoteKeepingSurrogates(raw []byte) string {
	body := raw[1 : len(raw)-1]
	out := make([]byte, 0, len(body))
	hex := func(at int) rune {
		v, _ := strconv.ParseUint(string(body[at:at+4]), 16, 32)
		return rune(v)
	}
	for i := 0; i < len(body); i++ {
		if body[i] != '\\' {
			out = append(out, body[i])
			continue
		}
		i++
		switch body[i] {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r := hex(i + 1)
			i += 4
			if utf16.IsSurrogate(r) && r < 0xDC00 && i+6 < len(body) && body[i+1] == '\\' && body[i+2] == 'u' {
				if pair := utf16.DecodeRune(r, hex(i+3)); pair != utf8.RuneError {
					out = utf8.AppendRune(out, pair)
					i += 6
					continue
				}
			}
			if utf16.IsSurrogate(r) {
				out = append(out, byte(0xE0|r>>12), byte(0x80|(r>>6)&0x3F), byte(0x80|r&0x3F))
			} else {
				out = utf8.AppendRune(out, r)
			}
		default: // " \ /
			out = append(out, body[i])
		}
	}
	return string(out)
}

func (r *request) wrong(name, want string) error {
	return protocolf("%s: %s must be %s, got %v", r.op, name, want, r.fields[name])
}

func (r *request) optString(name string) (string, bool, error) {
	v, ok := r.fields[name]
	if !ok {
		return "", false, nil
	}
	s, isString := v.(string)
	if !isString {
		return "", false, r.wrong(name, "a string")
	}
	return s, true, nil
}

func (r *request) str(name string) (string, error) {
	s, ok, err := r.optString(name)
	if err == nil && !ok {
		err = protocolf("%s: %s is required", r.op, name)
	}
	return s, err
}

// tenant is a call's tenant; absent, the Go API's zero value "", which core
// refuses, as it would a Go user's call that names none.
func (r *request) tenant() (string, error) {
	tenant, _, err := r.optString("tenant")
	return tenant, err
}

// optUint reads a non-negative integer of the harness's own fields (a load's
// schedule).
func (r *request) optUint(name string) (uint64, bool, error) {
	n, ok, err := r.optNumber(name)
	if !ok || err != nil {
		return 0, false, err
	}
	u, err := strconv.ParseUint(n.String(), 10, 64)
	if err != nil {
		return 0, false, r.wrong(name, "an integer from 0 to 2^64 - 1")
	}
	return u, true, nil
}

// optNumber reads a field that must be a JSON number.
func (r *request) optNumber(name string) (json.Number, bool, error) {
	v, ok := r.fields[name]
	if !ok {
		return "", false, nil
	}
	n, isNumber := v.(json.Number)
	if !isNumber {
		return "", false, r.wrong(name, "a JSON number")
	}
	return n, true, nil
}

// optArg reads a number handed to one of the binding's uint64 parameters. A
// JSON number no uint64 holds (negative, fractional, past 2^64 - 1) cannot
// reach the Go API: the type refuses it before the binding runs. The driver
// reports that refusal as the field's invalid_argument (docs/driver.md), as
// the bindings of dynamic languages report the same value; a value of
// another JSON type is a protocol error.
func (r *request) optArg(name string) (uint64, bool, error) {
	n, ok, err := r.optNumber(name)
	if !ok || err != nil {
		return 0, false, err
	}
	u, err := strconv.ParseUint(n.String(), 10, 64)
	if err == nil {
		return u, true, nil
	}
	problem := "must be an integer"
	if f, err := strconv.ParseFloat(n.String(), 64); err == nil || errors.Is(err, strconv.ErrRange) {
		// A JSON number is a double (docs/driver.md): a whole one up to
		// 2^53 written as 3.0, 3e0 or -0 is that integer.
		if err == nil && f == math.Trunc(f) && f >= 0 && f <= 1<<53 {
			return uint64(f), true, nil
		}
		switch {
		case f < 0:
			problem = "must not be negative"
		case f == math.Trunc(f) && f >= 1<<64:
			problem = "must be at most 2^64 - 1"
		case f == math.Trunc(f): // whole, above 2^53, and not in digits: no exact double
			problem = "must be written in digits above 2^53"
		}
	}
	return 0, false, invalid(name, "%s, got %s (the Go API takes uint64)", problem, n)
}

func (r *request) arg(name string) (uint64, error) {
	u, ok, err := r.optArg(name)
	if err == nil && !ok {
		err = protocolf("%s: %s is required", r.op, name)
	}
	return u, err
}

func (r *request) optBool(name string) (bool, bool, error) {
	v, ok := r.fields[name]
	if !ok {
		return false, false, nil
	}
	b, isBool := v.(bool)
	if !isBool {
		return false, false, r.wrong(name, "a boolean")
	}
	return b, true, nil
}

func (r *request) uint(name string) (uint64, error) {
	u, ok, err := r.optUint(name)
	if err == nil && !ok {
		err = protocolf("%s: %s is required", r.op, name)
	}
	return u, err
}

// store is what the last store op set up: a Redis client, or the memory
// engine every policy's Limiter shares (as they would share one Redis), and
// the Limiter options every policy gets.
type store struct {
	client  redis.UniversalClient // nil: memory
	engine  *slidelimit.MemoryEngine
	options []slidelimit.Option
}

type driver struct {
	store   *store
	limiter *slidelimit.Limiter
	// policyErr is the error of the last refused policy, which every op that
	// needs a limiter answers until a policy is accepted.
	policyErr error
}

func (d *driver) dropLimiter() {
	if d.limiter != nil {
		d.limiter.Close()
		d.limiter = nil
	}
	d.policyErr = nil
}

func (d *driver) close() {
	d.dropLimiter()
	if d.store != nil && d.store.client != nil {
		d.store.client.Close()
	}
	if d.store != nil && d.store.engine != nil {
		d.store.engine.Close()
	}
	d.store = nil
}

// inputError is the error a Go user meets before the binding is involved (a
// URL go-redis cannot parse, a CA file that cannot be read), reported with
// the binding's code for a bad argument and the field named, as the Rust
// binding reports the same. It is the driver's own type: a *slidelimit.Error
// carries only the fields core or the package named.
type inputError struct{ field, problem string }

func (e *inputError) Error() string { return e.field + ": " + e.problem }

func invalid(field, format string, args ...any) error {
	return &inputError{field: field, problem: fmt.Sprintf(format, args...)}
}

// tlsWithCA makes the URL's TLS settings trust only the CA in path; the
// server's name is verified (go-redis sets ServerName from the URL's host).
func tlsWithCA(cfg *tls.Config, path string) (*tls.Config, error) {
	if cfg == nil {
		return nil, invalid("tls_ca_file", "needs a rediss:// URL")
	}
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, invalid("tls_ca_file", "cannot read %s: %v", path, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, invalid("tls_ca_file", "%s holds no PEM certificate", path)
	}
	cfg = cfg.Clone()
	cfg.RootCAs = pool
	return cfg, nil
}

// The client settings docs/go.md recommends: the Limiter's timeout
// interrupts the socket read, a failed command is not retried (a retried
// EVALSHA whose script ran would count twice) and a refused connection is
// reported at once. poolSize lets a load's callers all be in flight.
const poolSize = 128

func (d *driver) opStore(r *request) (string, error) {
	kind, err := r.str("kind")
	if err != nil {
		return "", err
	}
	var options []slidelimit.Option
	timeoutMs, hasTimeout, err := r.optArg("timeout_ms")
	if err != nil {
		return "", err
	}
	if hasTimeout {
		if timeoutMs > math.MaxInt64/uint64(time.Millisecond) {
			return "", r.wrong("timeout_ms", "at most what a time.Duration holds")
		}
		options = append(options, slidelimit.WithTimeout(time.Duration(timeoutMs)*time.Millisecond))
	}
	caFile, hasCA, err := r.optString("tls_ca_file")
	if err != nil {
		return "", err
	}
	var client redis.UniversalClient
	var engine *slidelimit.MemoryEngine
	switch kind {
	case "memory":
		if engine, err = slidelimit.NewMemoryEngine(); err != nil {
			return "", err
		}
	case "redis":
		url, err := r.str("url")
		if err != nil {
			return "", err
		}
		opts, err := redis.ParseURL(url)
		if err != nil {
			return "", invalid("url", "%v", err)
		}
		if hasCA {
			if opts.TLSConfig, err = tlsWithCA(opts.TLSConfig, caFile); err != nil {
				return "", err
			}
		}
		opts.ContextTimeoutEnabled, opts.MaxRetries, opts.DialerRetries, opts.PoolSize = true, -1, 1, poolSize
		client = redis.NewClient(opts)
	case "cluster":
		raw, ok := r.fields["urls"].([]any)
		if !ok || len(raw) == 0 {
			return "", r.wrong("urls", "a non-empty list of strings")
		}
		// go-redis's own retries stay on for a Cluster: they are how a call
		// caught in a failover reaches the slot's new master (without them
		// the audit's failover run surfaced hundreds of unavailable errors).
		cluster := &redis.ClusterOptions{ContextTimeoutEnabled: true, PoolSize: poolSize}
		for i, u := range raw {
			url, ok := u.(string)
			if !ok {
				return "", r.wrong("urls", "a non-empty list of strings")
			}
			opts, err := redis.ParseURL(url)
			if err != nil {
				return "", invalid("urls", "%v", err)
			}
			cluster.Addrs = append(cluster.Addrs, opts.Addr)
			if i == 0 { // the seeds share credentials and TLS settings
				cluster.Username, cluster.Password, cluster.TLSConfig = opts.Username, opts.Password, opts.TLSConfig
			}
		}
		if hasCA {
			if cluster.TLSConfig, err = tlsWithCA(cluster.TLSConfig, caFile); err != nil {
				return "", err
			}
		}
		client = redis.NewClusterClient(cluster)
	default:
		return "", protocolf("store: kind must be memory, redis or cluster, got %q", kind)
	}
	d.close()
	d.store = &store{client: client, engine: engine, options: options}
	return `{"ok":true}`, nil
}

// singleFields are a policy op's fields of one limit, which limits replaces.
var singleFields = []string{"algorithm", "limit", "window_ms", "buckets"}

// limitFields reads one limit: the single fields of a policy op, or an entry
// of its limits list (a request of its own, op "policy limits[i]").
type limitFields struct {
	algorithm                   string
	hasAlgorithm                bool
	limit, windowMs             uint64
	buckets                     uint64
	hasBuckets                  bool
	emptyAlgorithm, zeroBuckets bool
}

func readLimit(r *request) (limitFields, error) {
	var f limitFields
	var err error
	if f.algorithm, f.hasAlgorithm, err = r.optString("algorithm"); err != nil {
		return f, err
	}
	// Left out, a limit or window is the Go API's zero, which the binding
	// refuses, as it does for a Go user who leaves the field out.
	if f.limit, _, err = r.optArg("limit"); err != nil {
		return f, err
	}
	if f.windowMs, _, err = r.optArg("window_ms"); err != nil {
		return f, err
	}
	// Absent is the Go API's 0: core's default for the bucketed window.
	if f.buckets, f.hasBuckets, err = r.optArg("buckets"); err != nil {
		return f, err
	}
	f.emptyAlgorithm = f.hasAlgorithm && f.algorithm == ""
	f.zeroBuckets = f.hasBuckets && f.buckets == 0
	return f, nil
}

// readLimits reads the limits list, nil when absent.
func readLimits(r *request) ([]limitFields, error) {
	// checkTypes has read the list: objects of a limit's fields, of their
	// types, with none of the single form's fields beside it.
	list, ok := r.fields["limits"].([]any)
	if !ok {
		return nil, nil
	}
	if len(list) > slidelimit.MaxLimits {
		// The binding refuses the count before it reads any limit.
		return make([]limitFields, len(list)), nil
	}
	limits := make([]limitFields, 0, len(list))
	for i, item := range list {
		fields, ok := item.(map[string]any)
		if !ok {
			return nil, r.wrong("limits", "a list of objects")
		}
		entry := &request{op: fmt.Sprintf("policy limits[%d]", i), fields: fields}
		f, err := readLimit(entry)
		var in *inputError
		if errors.As(err, &in) && len(list) > 1 {
			// Named as the binding names a field of one of several limits.
			in.field = fmt.Sprintf("limits[%d].%s", i, in.field)
		}
		if err != nil {
			return nil, err
		}
		limits = append(limits, f)
	}
	return limits, nil
}

func (d *driver) opPolicy(r *request) (string, error) {
	if d.store == nil {
		return "", protocolf("policy: no store yet")
	}
	namespace, hasNamespace, err := r.optString("namespace")
	if err != nil {
		return "", err
	}
	// Left out, the Go API's zero: the binding refuses it.
	resource, _, err := r.optString("resource")
	if err != nil {
		return "", err
	}
	limits, err := readLimits(r)
	if err == nil && limits == nil {
		var single limitFields
		single, err = readLimit(r)
		limits = []limitFields{single}
	}
	if err != nil {
		// A value the API's types refuse is a refused policy: every op that
		// needs a limiter answers its error until the next policy.
		var in *inputError
		if errors.As(err, &in) {
			d.dropLimiter()
			d.policyErr = err
		}
		return "", err
	}
	// Off unless asked for: the harnesses switch it on where they mean to.
	denyCache, _, err := r.optBool("deny_cache")
	if err != nil {
		return "", err
	}
	d.dropLimiter()
	p := slidelimit.Policy{Namespace: namespace, Resource: resource}
	specs := make([]slidelimit.Limit, len(limits))
	verbatimPolicy := hasNamespace && namespace == ""
	var zeroBuckets uint32
	for i, f := range limits {
		specs[i] = slidelimit.Limit{Algorithm: slidelimit.Algorithm(f.algorithm), Limit: f.limit,
			WindowMs: f.windowMs, Buckets: f.buckets}
		verbatimPolicy = verbatimPolicy || f.emptyAlgorithm
		if f.zeroBuckets && i < 32 {
			zeroBuckets |= 1 << i
		}
	}
	if _, ok := r.fields["limits"]; ok {
		p.Limits = specs
	} else {
		s := specs[0]
		p.Algorithm, p.Limit, p.WindowMs, p.Buckets = s.Algorithm, s.Limit, s.WindowMs, s.Buckets
	}
	// In the Go API an empty Namespace or Algorithm stands for the default,
	// so a Go user cannot send core an empty one; a request that does (the
	// key vector namespace-empty) reaches core as it is through the internal
	// switch, and a field left out still gets the package's default.
	if verbatimPolicy {
		if !hasNamespace {
			p.Namespace = slidelimit.DefaultNamespace
		}
		if p.Limits == nil && !limits[0].hasAlgorithm {
			p.Algorithm = slidelimit.DefaultAlgorithm
		}
		for i := range p.Limits {
			if !limits[i].hasAlgorithm {
				p.Limits[i].Algorithm = slidelimit.DefaultAlgorithm
			}
		}
		verbatim.Policy.Store(true)
		defer verbatim.Policy.Store(false)
	}
	// Likewise a request's buckets 0 reaches core as a count of 0 (which it
	// rejects), not as the Go API's "not given".
	if zeroBuckets != 0 {
		verbatim.Buckets.Store(zeroBuckets)
		defer verbatim.Buckets.Store(0)
	}
	options := slices.Clone(d.store.options)
	if denyCache {
		options = append(options, slidelimit.WithDenyCache(0))
	} else {
		options = append(options, slidelimit.WithoutDenyCache())
	}
	var l *slidelimit.Limiter
	if d.store.client == nil {
		l, err = slidelimit.NewMemory(p, append(options, slidelimit.WithMemoryEngine(d.store.engine))...)
	} else {
		l, err = slidelimit.New(d.store.client, p, options...)
	}
	if err != nil {
		d.policyErr = err
		return "", err
	}
	d.limiter = l
	return `{"ok":true}`, nil
}

func (d *driver) needLimiter(op string) (*slidelimit.Limiter, error) {
	switch {
	case d.limiter != nil:
		return d.limiter, nil
	case d.policyErr != nil:
		return nil, d.policyErr
	}
	return nil, protocolf("%s: no policy yet", op)
}

func (d *driver) opCheck(ctx context.Context, r *request) (string, error) {
	l, err := d.needLimiter(r.op)
	if err != nil {
		return "", err
	}
	tenant, err := r.tenant()
	if err != nil {
		return "", err
	}
	cost, hasCost, err := r.optArg("cost")
	if err != nil {
		return "", err
	}
	if !hasCost {
		cost = 1 // the default of Acquire, which the ...N and ...At methods spell out
	}
	var decision slidelimit.Decision
	switch r.op {
	case "acquire":
		if hasCost {
			decision, err = l.AcquireN(ctx, tenant, cost)
		} else {
			decision, err = l.Acquire(ctx, tenant)
		}
	case "acquire_at":
		var now uint64
		if now, err = r.arg("now_ms"); err != nil {
			return "", err
		}
		decision, err = l.AcquireAt(ctx, tenant, cost, now)
	default: // peek
		now, hasNow, e := r.optArg("now_ms")
		if e != nil {
			return "", e
		}
		if hasNow {
			decision, err = l.PeekAt(ctx, tenant, cost, now)
		} else {
			decision, err = l.Peek(ctx, tenant, cost)
		}
	}
	if err != nil {
		return "", err
	}
	return decisionLine(decision), nil
}

func (d *driver) opReset(ctx context.Context, r *request) (string, error) {
	l, err := d.needLimiter("reset")
	if err != nil {
		return "", err
	}
	tenant, err := r.tenant()
	if err != nil {
		return "", err
	}
	if _, err := l.Reset(ctx, tenant); err != nil {
		return "", err
	}
	return `{"ok":true}`, nil
}

func (d *driver) opKey(r *request) (string, error) {
	l, err := d.needLimiter("key")
	if err != nil {
		return "", err
	}
	tenant, err := r.tenant()
	if err != nil {
		return "", err
	}
	key, err := l.Key(tenant)
	if err != nil {
		return "", err
	}
	slot, err := slidelimit.KeySlot(key)
	if err != nil {
		return "", err
	}
	return `{"ok":true,"key":` + jsonString(key) + `,"slot":` + strconv.Itoa(int(slot)) + `}`, nil
}

// plan is the schedule of a load, shared by all its callers.
type plan struct {
	// Each tenant with the head of its calls' lines ({"lang":..., and
	// ,"tenant":... when there are several). Caller i's j-th call (from 0)
	// is for rounds[(i + j) % len(rounds)].
	rounds             []round
	cost               uint64
	hasCost            bool
	concurrency        int
	startAtMs, endAtMs uint64
	active             [][2]uint64 // [from, to); nil: the whole run
	rampMs, jitterMs   uint64
	// hasSkew: every call is AcquireAt on the wall clock plus skewMs (caller
	// time) instead of Acquire on server time.
	skewMs  int64
	hasSkew bool
}

// maxSkewMs bounds a load's skew_ms (docs/driver.md): an hour either way.
const maxSkewMs = 3_600_000

// round is one tenant of a load and the head of its calls' lines.
type round struct{ tenant, head string }

// maxLoadTenants bounds the tenants one load goes round (docs/driver.md).
const maxLoadTenants = 1_000

// loadTenants is a load's tenant, or its tenants to go round.
func loadTenants(r *request) ([]string, error) {
	raw, ok := r.fields["tenants"]
	if !ok || raw == nil {
		tenant, err := r.str("tenant")
		return []string{tenant}, err
	}
	if tenant, both := r.fields["tenant"]; both && tenant != nil {
		return nil, protocolf("load: tenant and tenants are exclusive")
	}
	wrong := r.wrong("tenants", fmt.Sprintf("a list of 1 to %d strings", maxLoadTenants))
	list, ok := raw.([]any)
	if !ok || len(list) == 0 || len(list) > maxLoadTenants {
		return nil, wrong
	}
	tenants := make([]string, len(list))
	for i, v := range list {
		if tenants[i], ok = v.(string); !ok {
			return nil, wrong
		}
	}
	return tenants, nil
}

func readPlan(r *request) (*plan, error) {
	var p plan
	var err error
	lang, err := r.str("lang")
	if err != nil {
		return nil, err
	}
	tenants, err := loadTenants(r)
	if err != nil {
		return nil, err
	}
	langHead := `{"lang":` + jsonString(lang)
	for _, t := range tenants {
		head := langHead
		if len(tenants) > 1 {
			head += `,"tenant":` + jsonString(t)
		}
		p.rounds = append(p.rounds, round{t, head})
	}
	if p.cost, p.hasCost, err = r.optUint("cost"); err != nil {
		return nil, err
	}
	concurrency, err := r.uint("concurrency")
	if err != nil {
		return nil, err
	}
	if concurrency > maxConcurrency {
		return nil, r.wrong("concurrency", fmt.Sprintf("at most %d", maxConcurrency))
	}
	p.concurrency = int(concurrency)
	if p.startAtMs, err = r.uint("start_at_ms"); err != nil {
		return nil, err
	}
	if p.endAtMs, err = r.uint("end_at_ms"); err != nil {
		return nil, err
	}
	if p.rampMs, _, err = r.optUint("ramp_ms"); err != nil {
		return nil, err
	}
	if p.jitterMs, _, err = r.optUint("jitter_ms"); err != nil {
		return nil, err
	}
	if raw, ok := r.fields["skew_ms"]; ok {
		n, isNumber := raw.(json.Number)
		skew, err := strconv.ParseInt(string(n), 10, 64)
		if !isNumber || err != nil || skew < -maxSkewMs || skew > maxSkewMs {
			return nil, r.wrong("skew_ms", fmt.Sprintf("an integer within ±%d", maxSkewMs))
		}
		p.skewMs, p.hasSkew = skew, true
	}
	if raw, ok := r.fields["active"]; ok {
		list, ok := raw.([]any)
		if !ok {
			return nil, r.wrong("active", "a list of [from, to] integer pairs")
		}
		p.active = [][2]uint64{}
		for _, item := range list {
			pair, ok := item.([]any)
			if !ok || len(pair) != 2 {
				return nil, r.wrong("active", "a list of [from, to] integer pairs")
			}
			var bounds [2]uint64
			for i, v := range pair {
				n, ok := v.(json.Number)
				u, err := strconv.ParseUint(string(n), 10, 64)
				if !ok || err != nil {
					return nil, r.wrong("active", "a list of [from, to] integer pairs")
				}
				bounds[i] = u
			}
			p.active = append(p.active, bounds)
		}
	}
	return &p, nil
}

func wallMs() uint64 { return uint64(max(time.Now().UnixMilli(), 0)) }

func sleepMs(ms uint64) {
	if ms > 0 {
		time.Sleep(time.Duration(ms) * time.Millisecond)
	}
}

// waitMs is how long a caller waits at now before it may call: 0 inside an
// active interval, else until the next one starts (or the run ends).
func (p *plan) waitMs(now uint64) uint64 {
	if p.active == nil {
		return 0
	}
	next := p.endAtMs
	for _, a := range p.active {
		if a[0] <= now && now < a[1] {
			return 0
		}
		if a[0] > now {
			next = min(next, a[0])
		}
	}
	return max(next-now, 1) // now < end_at_ms, and next is a start after now or the end
}

// caller runs caller index to the end of the run: its log lines and errors.
func (p *plan) caller(l *slidelimit.Limiter, index int) (lines []byte, calls, errs int) {
	ctx := context.Background()
	turn := index
	first := p.startAtMs + rand.Uint64N(p.rampMs+1)
	if now := wallMs(); min(first, p.endAtMs) > now {
		sleepMs(min(first, p.endAtMs) - now)
	}
	for {
		now := wallMs()
		if now >= p.endAtMs {
			return lines, calls, errs
		}
		if wait := p.waitMs(now); wait > 0 {
			sleepMs(wait)
			continue
		}
		call := p.rounds[turn%len(p.rounds)]
		turn++
		var d slidelimit.Decision
		var err error
		switch {
		case p.hasSkew:
			cost := p.cost
			if !p.hasCost {
				cost = 1 // Acquire's default, which AcquireAt spells out
			}
			d, err = l.AcquireAt(ctx, call.tenant, cost, uint64(max(int64(wallMs())+p.skewMs, 0)))
		case p.hasCost:
			d, err = l.AcquireN(ctx, call.tenant, p.cost)
		default:
			d, err = l.Acquire(ctx, call.tenant)
		}
		calls++
		if err != nil {
			errs++
			code, ok := slidelimit.CodeOf(err)
			if !ok {
				code = slidelimit.ErrInternal
			}
			lines = fmt.Appendf(lines, "%s,\"error\":\"%s\",\"message\":%s}\n", call.head, code, jsonString(messageOf(err)))
		} else {
			lines = fmt.Appendf(lines,
				"%s,\"allowed\":%t,\"now_ms\":%d,\"retry_after_ms\":%d,\"reset_after_ms\":%d}\n",
				call.head, d.Allowed, d.NowMs, d.RetryAfterMs, d.ResetAfterMs)
		}
		sleepMs(rand.Uint64N(p.jitterMs + 1))
	}
}

func (d *driver) opLoad(r *request) (string, error) {
	// The whole request is read before the limiter (or its policy's error)
	// answers.
	p, err := readPlan(r)
	if err != nil {
		return "", err
	}
	out, err := r.str("out")
	if err != nil {
		return "", err
	}
	l, err := d.needLimiter("load")
	if err != nil {
		return "", err
	}
	logs := make([][]byte, p.concurrency)
	calls := make([]int, p.concurrency)
	errs := make([]int, p.concurrency)
	var wg sync.WaitGroup
	for i := range p.concurrency {
		wg.Go(func() { logs[i], calls[i], errs[i] = p.caller(l, i) })
	}
	wg.Wait()
	if err := os.WriteFile(out, slices.Concat(logs...), 0o644); err != nil {
		return "", protocolf("load: cannot write out %s: %v", out, err)
	}
	var totalCalls, totalErrs int
	for i := range calls {
		totalCalls += calls[i]
		totalErrs += errs[i]
	}
	return fmt.Sprintf(`{"ok":true,"calls":%d,"errors":%d}`, totalCalls, totalErrs), nil
}

// handle answers one request; exit is true after the exit op.
func (d *driver) handle(line []byte) (reply string, exit bool) {
	r, err := parseRequest(line)
	if err != nil {
		return errorLine(err), false
	}
	ctx := context.Background()
	switch r.op {
	case "hello":
		return `{"ok":true,"binding":"go","version":` + jsonString(slidelimit.Version) + `}`, false
	case "exit":
		return `{"ok":true}`, true
	case "store":
		reply, err = d.opStore(r)
	case "policy":
		reply, err = d.opPolicy(r)
	case "acquire", "acquire_at", "peek":
		reply, err = d.opCheck(ctx, r)
	case "reset":
		reply, err = d.opReset(ctx, r)
	case "key":
		reply, err = d.opKey(r)
	case "load":
		reply, err = d.opLoad(r)
	}
	if err != nil {
		return errorLine(err), false
	}
	return reply, false
}

func main() {
	d := &driver{}
	defer d.close()
	in := bufio.NewReaderSize(os.Stdin, 1<<16)
	out := bufio.NewWriter(os.Stdout)
	for {
		line, readErr := in.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			reply, exit := d.handle(line)
			out.WriteString(reply)
			out.WriteByte('\n')
			if err := out.Flush(); err != nil {
				fmt.Fprintln(os.Stderr, "slidelimit-driver: writing stdout:", err)
				return
			}
			if exit {
				return
			}
		}
		if readErr != nil {
			if readErr != io.EOF {
				fmt.Fprintln(os.Stderr, "slidelimit-driver: reading stdin:", readErr)
			}
			return
		}
	}
}
