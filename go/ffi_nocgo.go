//go:build !cgo

package slidelimit

// Without cgo the same C ABI runs as WebAssembly: ffi-c/ compiled for
// wasm32-unknown-unknown (go/internal/wasm, rebuilt by `make go-wasm`),
// executed in-process by wazero, a runtime in pure Go. Every function here
// mirrors the one of the same name in ffi.go and calls the same C function,
// so keys, validation, scripts, reply parsing, the error table, the memory
// engine and the metric table are core's on both paths, with the same
// codes, fields and messages.
//
// A wasm instance runs one call at a time, so calls take an instance from a
// small pool (one per core, at most maxInstances): each instance has a
// mutex, a call takes the first free one, and a new instance is made only
// when all are busy. A policy is made in each instance that uses it, on
// first use there (the same inputs, so the same result); a memory engine
// lives in one instance, and its checks wait for that one.

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/slidelimit/slidelimit/go/internal/wasm"
	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
)

// Values of the header (ffi-c/include/slidelimit.h) that the cgo path reads
// from it; ffi_nocgo_test.go compares them with the header.
const (
	resultOK             = 0
	resultBufferTooSmall = 101
	keyMax               = 2048
	callBufMax           = 17088
	callPartsMax         = 42
	maxLimits            = 8
	serverErrorMsgExtra  = 256
	serverErrorRetry     = 1 // SLIDELIMIT_SERVER_ERROR_ACTION_RETRY_WITH_EVAL
)

// msgCap is the size of the buffer that receives a failure's message.
const msgCap = 512

// liveHandles counts the C objects (policies and memory engines) this
// process holds, as in ffi.go.
var liveHandles atomic.Int64

// callMode is a slidelimit_mode value.
type callMode = uint32

const (
	modeAcquire callMode = 1 // SLIDELIMIT_MODE_ACQUIRE
	modePeek    callMode = 2 // SLIDELIMIT_MODE_PEEK
)

// metricID is a slidelimit_metric value.
type metricID = uint32

const (
	metricAllowedTotal metricID = 1
	metricDeniedTotal  metricID = 2
	metricWaitSeconds  metricID = 3

	metricLocalDeniedTotal metricID = 4
)

// The exports the package calls, by index into instance.fns.
const (
	fnAlloc = iota
	fnFree
	fnVersion
	fnResultName
	fnAlgorithmParse
	fnPolicyNewLimits
	fnPolicyLimit
	fnPolicyFree
	fnPolicyLimitKey
	fnKeySlot
	fnCheckTimeoutMs
	fnPolicyScript
	fnBuildCallInto
	fnDecisionFromReply
	fnServerErrorMap
	fnServerErrorMapCommand
	fnServerErrorResendPause
	fnMemoryNew
	fnMemoryFree
	fnMemoryAcquire
	fnMemoryPeek
	fnMemoryReset
	fnMetricName
	fnMetricHelp
	fnMetricLabelCount
	fnMetricLabel
	fnMetricBuckets
	fnMetricWaitSeconds
	fnDefaultNamespace
	fnDefaultAlgorithm
	fnDefaultTimeoutMs
	fnDenyCacheNew
	fnDenyCacheFree
	fnDenyCacheCheck
	fnDenyCacheRecord
	fnDenyCacheForget
	fnDenyCachesForgetTenant
	fnCount
)

var fnNames = [fnCount]string{
	"slidelimit_wasm_alloc", "slidelimit_wasm_free", "slidelimit_version", "slidelimit_result_name",
	"slidelimit_algorithm_parse", "slidelimit_policy_new_limits", "slidelimit_policy_limit",
	"slidelimit_policy_free", "slidelimit_policy_limit_key", "slidelimit_key_slot",
	"slidelimit_check_timeout_ms", "slidelimit_policy_script",
	"slidelimit_policy_build_call_into", "slidelimit_decision_from_reply",
	"slidelimit_server_error_map", "slidelimit_server_error_map_command",
	"slidelimit_server_error_resend_pause_ms", "slidelimit_memory_new",
	"slidelimit_memory_free", "slidelimit_memory_acquire", "slidelimit_memory_peek",
	"slidelimit_memory_reset", "slidelimit_metric_name", "slidelimit_metric_help",
	"slidelimit_metric_label_count", "slidelimit_metric_label", "slidelimit_metric_buckets",
	"slidelimit_metric_wait_seconds", "slidelimit_default_namespace", "slidelimit_default_algorithm",
	"slidelimit_default_timeout_ms", "slidelimit_deny_cache_new", "slidelimit_deny_cache_free",
	"slidelimit_deny_cache_check", "slidelimit_deny_cache_record", "slidelimit_deny_cache_forget",
	"slidelimit_deny_caches_forget_tenant",
}

// maxInstances caps the pool: each instance holds 1.1 MiB of wasm memory
// (mostly Rust's stack), and a check keeps one busy for a couple of
// microseconds, far less than its Redis round trip.
const maxInstances = 8

// scratchSize is each instance's block for the inputs and outputs of one
// call; larger ones (a huge invalid tenant, a long reply) get a block of
// their own for the call.
const scratchSize = 16 << 10

// instance is one wasm instance: its memory, exports and scratch block.
// Everything in it is used under mu.
type instance struct {
	mu      sync.Mutex
	id      int
	mod     api.Module
	mem     api.Memory
	fns     [fnCount]api.Function
	stack   [17]uint64 // parameters in, results out (CallWithStack)
	scratch uint32
	top     uint32      // bytes of scratch in use by the current call
	extra   [][2]uint32 // blocks of the current call beyond scratch
}

type instancePool struct {
	once     sync.Once
	err      error
	runtime  wazero.Runtime
	compiled wazero.CompiledModule
	max      int
	grow     sync.Mutex                  // held while an instance is added
	all      atomic.Pointer[[]*instance] // grows, never shrinks
	next     atomic.Uint32               // where a call waits when all are busy
}

var pool instancePool

// start compiles the module once, on first use: in practice when the
// package initialises (DefaultNamespace is core's).
func (p *instancePool) start() error {
	p.once.Do(func() {
		ctx := context.Background()
		p.runtime = wazero.NewRuntime(ctx)
		p.compiled, p.err = p.runtime.CompileModule(ctx, wasm.Module)
		if p.err != nil {
			p.err = &Error{Code: ErrInternal, Message: "internal: compiling the wasm module: " + p.err.Error()}
			return
		}
		p.max = min(max(runtime.GOMAXPROCS(0), 1), maxInstances)
		var none []*instance
		p.all.Store(&none)
	})
	return p.err
}

// acquire returns an instance, locked: the first free one, a new one when
// all are busy and the pool may grow, else it waits for one.
func (p *instancePool) acquire() (*instance, error) {
	if err := p.start(); err != nil {
		return nil, err
	}
	for _, in := range *p.all.Load() {
		if in.mu.TryLock() {
			return in, nil
		}
	}
	p.grow.Lock()
	all := *p.all.Load()
	if len(all) < p.max {
		in, err := p.instantiate(len(all))
		if err != nil {
			p.grow.Unlock()
			return nil, err
		}
		in.mu.Lock()
		grown := append(all[:len(all):len(all)], in)
		p.all.Store(&grown)
		p.grow.Unlock()
		return in, nil
	}
	p.grow.Unlock()
	// In uint32: int(...) of a count past 2^31 is negative where int has 32 bits.
	in := all[p.next.Add(1)%uint32(len(all))]
	in.mu.Lock()
	return in, nil
}

func (p *instancePool) instantiate(id int) (*instance, error) {
	ctx := context.Background()
	// Anonymous: a runtime holds any number of them.
	mod, err := p.runtime.InstantiateModule(ctx, p.compiled, wazero.NewModuleConfig().WithName(""))
	if err != nil {
		return nil, &Error{Code: ErrInternal, Message: "internal: instantiating the wasm module: " + err.Error()}
	}
	in := &instance{id: id, mod: mod, mem: mod.Memory()}
	for i, name := range fnNames {
		if in.fns[i] = mod.ExportedFunction(name); in.fns[i] == nil {
			return nil, &Error{Code: ErrInternal, Message: "internal: the wasm module does not export " + name}
		}
	}
	r, err := in.call(fnAlloc, scratchSize)
	if err != nil || r == 0 {
		return nil, &Error{Code: ErrInternal, Message: "internal: the wasm module has no memory for its scratch block"}
	}
	in.scratch = uint32(r)
	return in, nil
}

// with runs f on an instance of the pool; the instance's blocks for the
// call are released afterwards.
func with[T any](f func(in *instance) (T, error)) (T, error) {
	in, err := pool.acquire()
	if err != nil {
		var zero T
		return zero, err
	}
	defer in.release()
	return f(in)
}

// release frees the call's blocks and unlocks the instance.
func (in *instance) release() {
	in.reset()
	in.mu.Unlock()
}

func (in *instance) reset() {
	in.top = 0
	for _, b := range in.extra {
		_, _ = in.call(fnFree, uint64(b[0]), uint64(b[1]))
	}
	in.extra = in.extra[:0]
}

// trapped is the error of a call that trapped: a panic in the wasm build
// aborts instead of unwinding to the C boundary, so it reports what the
// boundary would have reported.
func trapped(err error) error {
	return &Error{Code: ErrInternal, Message: "internal: the wasm module trapped (a bug in slidelimit): " + err.Error()}
}

// call runs export f with args (wasm i32 and i64 values) and returns its
// first result.
func (in *instance) call(f int, args ...uint64) (uint64, error) {
	n := copy(in.stack[:], args)
	if err := in.fns[f].CallWithStack(context.Background(), in.stack[:max(n, 1)]); err != nil {
		return 0, trapped(err)
	}
	return in.stack[0], nil
}

// result is call for the functions that return a slidelimit_result.
func (in *instance) result(f int, args ...uint64) (uint32, error) {
	r, err := in.call(f, args...)
	return uint32(r), err
}

// reserve returns n bytes (8-aligned) for the current call. Wasm memory
// only grows: a huge input grows the instance for good.
func (in *instance) reserve(n int) (uint64, error) {
	if n > math.MaxUint32-7 {
		return 0, &Error{Code: ErrInternal, Message: "internal: the wasm module is out of memory"}
	}
	size := (uint32(n) + 7) &^ 7
	if n <= scratchSize && in.top+size <= scratchSize {
		p := in.scratch + in.top
		in.top += size
		return uint64(p), nil
	}
	r, err := in.call(fnAlloc, uint64(size))
	if err != nil {
		return 0, err
	}
	if r == 0 {
		return 0, &Error{Code: ErrInternal, Message: "internal: the wasm module is out of memory"}
	}
	in.extra = append(in.extra, [2]uint32{uint32(r), size})
	return r, nil
}

// bytes copies s into the call's blocks: its pointer and length as wasm
// arguments (0 for an empty s, as a NULL with length 0).
func (in *instance) bytes(s string) (ptr, n uint64, err error) {
	if len(s) == 0 {
		return 0, 0, nil
	}
	if ptr, err = in.reserve(len(s)); err != nil {
		return 0, 0, err
	}
	in.mem.WriteString(uint32(ptr), s)
	return ptr, uint64(len(s)), nil
}

// out reserves n zeroed bytes for out-params.
// tenantAndNow copies a check's tenant and, when given, its caller time
// into the instance: the tenant's (pointer, length) and a pointer to the
// time (0 for none, as C's NULL).
func (in *instance) tenantAndNow(tenant string, now *uint64) (t, tLen, nowPtr uint64, err error) {
	if t, tLen, err = in.bytes(tenant); err != nil {
		return 0, 0, 0, err
	}
	if now != nil {
		if nowPtr, err = in.out(8); err != nil {
			return 0, 0, 0, err
		}
		in.mem.WriteUint64Le(uint32(nowPtr), *now)
	}
	return t, tLen, nowPtr, nil
}

func (in *instance) out(n int) (uint64, error) {
	p, err := in.reserve(n)
	if err == nil {
		b, _ := in.mem.Read(uint32(p), uint32(n))
		clear(b)
	}
	return p, err
}

func (in *instance) u32(p uint64) uint32 {
	v, _ := in.mem.ReadUint32Le(uint32(p))
	return v
}

func (in *instance) u64(p uint64) uint64 {
	v, _ := in.mem.ReadUint64Le(uint32(p))
	return v
}

// string copies n bytes at p out of the instance.
func (in *instance) string(p, n uint32) string {
	b, ok := in.mem.Read(p, n)
	if !ok {
		return ""
	}
	return string(b)
}

// cString copies a NUL-terminated string out of the instance.
func (in *instance) cString(p uint32) string {
	size := in.mem.Size()
	if p >= size {
		return ""
	}
	b, _ := in.mem.Read(p, size-p)
	for i, c := range b {
		if c == 0 {
			return string(b[:i])
		}
	}
	return ""
}

// staticOut is a (pointer, length) out-pair that the function points at
// static memory of the instance.
func (in *instance) staticOut() (pp, pn uint64, err error) {
	if pp, err = in.out(8); err != nil {
		return 0, 0, err
	}
	return pp, pp + 4, nil
}

func (in *instance) staticString(pp, pn uint64) string {
	return in.string(in.u32(pp), in.u32(pn))
}

// msgOut is a failure's message buffer, its length and the field (wasm32:
// slidelimit_field is a 4-byte pointer and a 4-byte length).
type msgOut struct{ buf, len, field uint64 }

func (in *instance) msgOut() (msgOut, error) {
	buf, err := in.reserve(msgCap)
	if err != nil {
		return msgOut{}, err
	}
	p, err := in.out(16)
	return msgOut{buf: buf, len: p, field: p + 8}, err
}

// args are the four trailing arguments of a function with a message buffer.
func (m msgOut) args() (buf, bufCap, bufLen, field uint64) { return m.buf, msgCap, m.len, m.field }

// failure turns a result code and the message written with it into an
// *Error, as ffi.go's failure does.
func (in *instance) failure(code uint32, m *msgOut) error {
	e := &Error{Code: Code(code)}
	if m != nil {
		e.Message = in.string(uint32(m.buf), in.u32(m.len))
		e.field = in.fieldName(m.field)
	}
	return e
}

// fieldName copies the field core named (static memory), "" for none.
func (in *instance) fieldName(p uint64) string {
	name, n := in.u32(p), in.u32(p+4)
	if name == 0 {
		return ""
	}
	return in.string(name, n)
}

// policyHandle owns one slidelimit_policy per instance that used it. Calls
// hold the read lock, so Close cannot free the policy under a running call.
type policyHandle struct {
	mu     sync.RWMutex
	closed bool
	alg    uint32 // the first limit's slidelimit_algorithm value
	// What slidelimit_policy_new_limits got, to make the policy in another
	// instance.
	ns, resource string
	algs         []uint32
	specs        []limitSpec
	// The policy in each instance, by instance id (0 where not made yet);
	// slot i is used under instance i's lock.
	ptrs   [maxInstances]uint32
	madeIn atomic.Uint32 // a bit per instance that holds one
}

func newPolicyHandle(namespace, resource string, specs []limitSpec) (*policyHandle, error) {
	h := &policyHandle{ns: namespace, resource: resource, specs: specs, algs: make([]uint32, len(specs))}
	for i, s := range specs {
		alg, err := parseAlgorithm(string(s.algorithm))
		if err != nil {
			return nil, forLimit(err, i, len(specs))
		}
		h.algs[i] = alg
	}
	if len(h.algs) > 0 {
		h.alg = h.algs[0]
	}
	if _, err := with(h.in); err != nil {
		return nil, err
	}
	liveHandles.Add(1)
	runtime.SetFinalizer(h, (*policyHandle).free)
	return h, nil
}

// policyArraysSize is the bytes policyArrays lays out for n limits: up to
// the end of its last array, the given flags (1 byte each).
func policyArraysSize(n int) int {
	_, _, _, _, given := policyArrays(0, n)
	return int(given) + max(n, 1)
}

// policyArrays lays out, from base (8-aligned), the arrays of
// slidelimit_policy_new_limits for n limits, at least one entry each so
// that no pointer is NULL: limits, windows and bucket counts first (8 bytes
// each: Rust reads a *const u64 at 8-byte alignment, on wasm32 too), then
// algorithms (4 each) and given flags (1 each).
func policyArrays(base uint64, n int) (limits, windows, buckets, algs, given uint64) {
	m := uint64(max(n, 1))
	limits, windows, buckets = base, base+8*m, base+16*m
	algs = base + 24*m
	return limits, windows, buckets, algs, algs + 4*m
}

// in is the policy in instance in (locked by the caller), made there on its
// first use.
// limitCount is how many limits the policy holds (the length of its reply).
func (h *policyHandle) limitCount() int { return len(h.specs) }

func (h *policyHandle) in(in *instance) (uint64, error) {
	if ptr := h.ptrs[in.id]; ptr != 0 {
		return uint64(ptr), nil
	}
	ns, nsLen, err := in.bytes(h.ns)
	if err != nil {
		return 0, err
	}
	res, resLen, err := in.bytes(h.resource)
	if err != nil {
		return 0, err
	}
	n := len(h.specs)
	arrays, err := in.out(policyArraysSize(n))
	if err != nil {
		return 0, err
	}
	limits, windows, buckets, algs, given := policyArrays(arrays, n)
	for i, s := range h.specs {
		in.mem.WriteUint32Le(uint32(algs)+uint32(4*i), h.algs[i])
		in.mem.WriteUint64Le(uint32(limits)+uint32(8*i), s.limit)
		in.mem.WriteUint64Le(uint32(windows)+uint32(8*i), s.windowMs)
		in.mem.WriteUint64Le(uint32(buckets)+uint32(8*i), s.buckets)
		if s.bucketsGiven {
			in.mem.WriteByte(uint32(given)+uint32(i), 1)
		}
	}
	out, err := in.out(4)
	if err != nil {
		return 0, err
	}
	msg, err := in.msgOut()
	if err != nil {
		return 0, err
	}
	mb, mc, ml, mf := msg.args()
	r, err := in.result(fnPolicyNewLimits, ns, nsLen, res, resLen, algs, limits, windows, buckets, given,
		uint64(n), out, mb, mc, ml, mf)
	if err != nil {
		return 0, err
	}
	if r != resultOK {
		return 0, in.failure(r, &msg)
	}
	h.ptrs[in.id] = in.u32(out)
	h.madeIn.Or(1 << in.id)
	return uint64(h.ptrs[in.id]), nil
}

// buckets are the effective bucket counts of the policy's limits, by core:
// the count given or core's default for a bucketed window, 0 for the other
// algorithms.
func (h *policyHandle) buckets() ([]uint64, error) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.closed {
		return nil, errClosed()
	}
	return with(func(in *instance) ([]uint64, error) {
		ptr, err := h.in(in)
		if err != nil {
			return nil, err
		}
		// algorithm (4 bytes, padded), limit, window, buckets.
		outs, err := in.out(32)
		if err != nil {
			return nil, err
		}
		counts := make([]uint64, len(h.specs))
		for i := range counts {
			if r, err := in.result(fnPolicyLimit, ptr, uint64(i), outs, outs+8, outs+16, outs+24); err != nil || r != resultOK {
				return nil, firstErr(err, in.failure(r, nil))
			}
			counts[i] = in.u64(outs + 24)
		}
		return counts, nil
	})
}

// script is the Lua script the policy's calls run in mode, by core.
func (h *policyHandle) script(mode callMode) (script, error) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.closed {
		return script{}, errClosed()
	}
	return with(func(in *instance) (script, error) {
		ptr, err := h.in(in)
		if err != nil {
			return script{}, err
		}
		tp, tn, err := in.staticOut()
		if err != nil {
			return script{}, err
		}
		sp, sn, err := in.staticOut()
		if err != nil {
			return script{}, err
		}
		if r, err := in.result(fnPolicyScript, ptr, uint64(mode), tp, tn, sp, sn); err != nil || r != resultOK {
			return script{}, firstErr(err, in.failure(r, nil))
		}
		return script{text: in.staticString(tp, tn), sha1: in.staticString(sp, sn)}, nil
	})
}

// firstErr is err when a call trapped, else the failure.
func firstErr(err, failure error) error {
	if err != nil {
		return err
	}
	return failure
}

// free releases the policy in every instance; safe to call more than once.
func (h *policyHandle) free() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.closed {
		h.closed = true
		if made := h.madeIn.Load(); made != 0 {
			for _, in := range *pool.all.Load() {
				if made&(1<<in.id) == 0 {
					continue
				}
				in.mu.Lock()
				_, _ = in.call(fnPolicyFree, uint64(h.ptrs[in.id]))
				h.ptrs[in.id] = 0
				in.mu.Unlock()
			}
		}
		liveHandles.Add(-1)
	}
	runtime.SetFinalizer(h, nil)
}

func parseAlgorithm(name string) (uint32, error) {
	return with(func(in *instance) (uint32, error) {
		p, n, err := in.bytes(name)
		if err != nil {
			return 0, err
		}
		out, err := in.out(4)
		if err != nil {
			return 0, err
		}
		m, err := in.msgOut()
		if err != nil {
			return 0, err
		}
		mb, mc, ml, mf := m.args()
		if r, err := in.result(fnAlgorithmParse, p, n, out, mb, mc, ml, mf); err != nil || r != resultOK {
			return 0, firstErr(err, in.failure(r, &m))
		}
		return in.u32(out), nil
	})
}

// scriptCall is one check's KEYS and ARGV, as core built them.
type scriptCall struct {
	keys []string
	args []any
}

// buildCall asks core for the call's KEYS and ARGV. now == nil lets the
// script read Redis TIME.
func (h *policyHandle) buildCall(tenant string, cost uint64, now *uint64, mode callMode) (scriptCall, error) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.closed {
		return scriptCall{}, errClosed()
	}
	// The first guess of ffi.go: every ordinary call fits.
	return h.buildCallSized(tenant, cost, now, mode, min(len(h.specs)*(3*len(tenant)+256), callBufMax))
}

// buildCallSized is buildCall with the first buffer of size bytes (the
// caller holds the read lock); core answers BUFFER_TOO_SMALL with the size
// it needs, and the second try has it.
func (h *policyHandle) buildCallSized(tenant string, cost uint64, now *uint64, mode callMode, size int) (scriptCall, error) {
	return with(func(in *instance) (scriptCall, error) {
		ptr, err := h.in(in)
		if err != nil {
			return scriptCall{}, err
		}
		t, tLen, nowPtr, err := in.tenantAndNow(tenant, now)
		if err != nil {
			return scriptCall{}, err
		}
		// lens (callPartsMax x 4 bytes), then key count, part count and bytes used.
		outs, err := in.out(4*callPartsMax + 12)
		if err != nil {
			return scriptCall{}, err
		}
		lens, nKeys, nParts, used := outs, outs+4*callPartsMax, outs+4*callPartsMax+4, outs+4*callPartsMax+8
		m, err := in.msgOut()
		if err != nil {
			return scriptCall{}, err
		}
		mb, mc, ml, mf := m.args()
		size = max(size, 1)
		for attempt := 0; ; attempt++ {
			buf, err := in.reserve(size)
			if err != nil {
				return scriptCall{}, err
			}
			r, err := in.result(fnBuildCallInto, ptr, t, tLen, cost, nowPtr, uint64(mode), buf, uint64(size),
				lens, callPartsMax, nKeys, nParts, used, mb, mc, ml, mf)
			runtime.KeepAlive(h) // The finalizer must not free the policy during the call.
			if err != nil {
				return scriptCall{}, err
			}
			if r == resultBufferTooSmall && attempt == 0 && int(in.u32(used)) > size {
				size = int(in.u32(used))
				continue
			}
			if r != resultOK {
				return scriptCall{}, in.failure(r, &m)
			}
			// One Go copy of the buffer; the strings share it, as in ffi.go.
			view, _ := in.mem.Read(uint32(buf), in.u32(used))
			data := append([]byte(nil), view...)
			var partLens [callPartsMax]uint32
			raw, _ := in.mem.Read(uint32(lens), 4*callPartsMax)
			for i := range partLens {
				partLens[i] = binary.LittleEndian.Uint32(raw[4*i:])
			}
			return splitCall(data, int(in.u32(nKeys)), int(in.u32(nParts)), func(i int) int { return int(partLens[i]) }), nil
		}
	})
}

// key is the Redis key of tenant under the policy (its first limit's).
func (h *policyHandle) key(tenant string) (string, error) {
	keys, err := h.someKeys(tenant, 1)
	if err != nil {
		return "", err
	}
	return keys[0], nil
}

// keys are the Redis keys of tenant, one per limit.
func (h *policyHandle) keys(tenant string) ([]string, error) { return h.someKeys(tenant, len(h.specs)) }

// someKeys are the keys of the first n limits.
func (h *policyHandle) someKeys(tenant string, n int) ([]string, error) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.closed {
		return nil, errClosed()
	}
	return with(func(in *instance) ([]string, error) {
		ptr, err := h.in(in)
		if err != nil {
			return nil, err
		}
		t, tLen, err := in.bytes(tenant)
		if err != nil {
			return nil, err
		}
		buf, err := in.reserve(keyMax)
		if err != nil {
			return nil, err
		}
		outs, err := in.out(8)
		if err != nil {
			return nil, err
		}
		m, err := in.msgOut()
		if err != nil {
			return nil, err
		}
		mb, mc, ml, mf := m.args()
		keys := make([]string, n)
		for i := range keys {
			r, err := in.result(fnPolicyLimitKey, ptr, uint64(i), t, tLen, buf, keyMax, outs, outs+4, mb, mc, ml, mf)
			runtime.KeepAlive(h)
			if err != nil || r != resultOK {
				return nil, firstErr(err, in.failure(r, &m))
			}
			keys[i] = in.string(uint32(buf), in.u32(outs))
		}
		return keys, nil
	})
}

// KeySlot is the Redis Cluster slot of any key (CRC16 of its hash tag).
func KeySlot(key string) (uint16, error) {
	return with(func(in *instance) (uint16, error) {
		p, n, err := in.bytes(key)
		if err != nil {
			return 0, err
		}
		out, err := in.out(4)
		if err != nil {
			return 0, err
		}
		if r, err := in.result(fnKeySlot, p, n, out); err != nil || r != resultOK {
			return 0, firstErr(err, in.failure(r, nil))
		}
		return uint16(in.u32(out)), nil
	})
}

// script is one Lua script and its SHA1, copied once from core's static memory.
type script struct {
	text, sha1 string
}

// parseReply hands the integers of a script for a policy of limits limits to core.
func parseReply(reply []int64, limits int) (Decision, error) {
	return with(func(in *instance) (Decision, error) {
		var ptr uint64
		if len(reply) > 0 {
			var err error
			if ptr, err = in.reserve(8 * len(reply)); err != nil {
				return Decision{}, err
			}
			b, _ := in.mem.Read(uint32(ptr), uint32(8*len(reply)))
			for i, v := range reply {
				binary.LittleEndian.PutUint64(b[8*i:], uint64(v))
			}
		}
		d, err := in.out(decisionSize)
		if err != nil {
			return Decision{}, err
		}
		m, err := in.msgOut()
		if err != nil {
			return Decision{}, err
		}
		mb, mc, ml, mf := m.args()
		r, err := in.result(fnDecisionFromReply, ptr, uint64(len(reply)), uint64(limits), d, mb, mc, ml, mf)
		if err != nil || r != resultOK {
			return Decision{}, firstErr(err, in.failure(r, &m))
		}
		return in.decision(d), nil
	})
}

// decisionSize is sizeof(slidelimit_decision) on wasm32: a bool, then four
// 8-aligned uint64_t, then the int32_t denied_by (padded to 8).
const decisionSize = 48

func (in *instance) decision(p uint64) Decision {
	b, _ := in.mem.Read(uint32(p), decisionSize)
	return Decision{
		Allowed:      b[0] != 0,
		Remaining:    binary.LittleEndian.Uint64(b[8:]),
		RetryAfterMs: binary.LittleEndian.Uint64(b[16:]),
		ResetAfterMs: binary.LittleEndian.Uint64(b[24:]),
		NowMs:        binary.LittleEndian.Uint64(b[32:]),
		deniedBy:     int(max(int32(binary.LittleEndian.Uint32(b[40:])), -1)) + 1,
	}
}

// mapServerError applies core's table to an error reply from Redis to a
// script call on key under the policy, as in ffi.go. It reads no policy
// object, so it needs no lock.
func (h *policyHandle) mapServerError(reply, key string, afterRetry bool, cause error) (retry bool, e *Error) {
	var r uint32
	e, err := with(func(in *instance) (*Error, error) {
		rp, rn, err := in.bytes(reply)
		if err != nil {
			return nil, err
		}
		kp, kn, err := in.bytes(key)
		if err != nil {
			return nil, err
		}
		size := len(reply) + len(key) + serverErrorMsgExtra
		buf, err := in.reserve(size)
		if err != nil {
			return nil, err
		}
		// action, code, message length, field (8 bytes).
		outs, err := in.out(20)
		if err != nil {
			return nil, err
		}
		var after uint64
		if afterRetry {
			after = 1
		}
		if r, err = in.result(fnServerErrorMap, rp, rn, kp, kn, uint64(h.alg), after, outs, outs+4, buf, uint64(size),
			outs+8, outs+12, 0, 0, 0, 0); err != nil || r != resultOK {
			return nil, err
		}
		if in.u32(outs) == serverErrorRetry {
			retry = true
			return nil, nil
		}
		return &Error{Code: Code(in.u32(outs + 4)), Message: in.string(uint32(buf), in.u32(outs+8)), Err: cause,
			field: in.fieldName(outs + 12)}, nil
	})
	return retry, mappingFailed(e, err, r, cause)
}

// mappingFailed is e, or the ErrInternal of a mapping that failed (after the
// instance is released: resultName takes one itself).
func mappingFailed(e *Error, err error, r uint32, cause error) *Error {
	if err != nil {
		var trap *Error
		errors.As(err, &trap)
		return &Error{Code: ErrInternal, Message: trap.Message, Err: cause}
	}
	if r != resultOK {
		return &Error{Code: ErrInternal, Message: "mapping the server error failed: " + resultName(Code(r)), Err: cause}
	}
	return e
}

// resendPause is core's wait before sending again a script call that Redis
// answered with reply without running it (TRYAGAIN while a slot migrates),
// at the attempt-th resend; false for any other reply.
func resendPause(reply string, attempt int) (time.Duration, bool) {
	ms, err := with(func(in *instance) (uint64, error) {
		rp, rn, err := in.bytes(reply)
		if err != nil {
			return 0, err
		}
		out, err := in.out(8)
		if err != nil {
			return 0, err
		}
		r, err := in.result(fnServerErrorResendPause, rp, rn, uint64(min(attempt, math.MaxUint32)), out)
		if err != nil || r != resultOK {
			return 0, err
		}
		return in.u64(out), nil
	})
	return time.Duration(ms) * time.Millisecond, err == nil && ms > 0
}

// mapCommandError applies core's table to an error reply from Redis to a
// command that is no script call (a reset's DEL): never a retry.
func mapCommandError(reply string, cause error) *Error {
	var r uint32
	e, err := with(func(in *instance) (*Error, error) {
		rp, rn, err := in.bytes(reply)
		if err != nil {
			return nil, err
		}
		size := len(reply) + serverErrorMsgExtra
		buf, err := in.reserve(size)
		if err != nil {
			return nil, err
		}
		// code, message length, field (8 bytes).
		outs, err := in.out(16)
		if err != nil {
			return nil, err
		}
		if r, err = in.result(fnServerErrorMapCommand, rp, rn, outs, buf, uint64(size), outs+4, outs+8); err != nil || r != resultOK {
			return nil, err
		}
		return &Error{Code: Code(in.u32(outs)), Message: in.string(uint32(buf), in.u32(outs+4)), Err: cause,
			field: in.fieldName(outs + 8)}, nil
	})
	return mappingFailed(e, err, r, cause)
}

// memoryHandle owns one slidelimit_memory engine, which lives in one
// instance: its checks wait for that instance.
type memoryHandle struct {
	mu  sync.RWMutex
	in  *instance
	ptr uint32
}

func newMemoryHandle() (*memoryHandle, error) {
	in, err := pool.acquire()
	if err != nil {
		return nil, err
	}
	defer in.release()
	out, err := in.out(4)
	if err != nil {
		return nil, err
	}
	if r, err := in.result(fnMemoryNew, out); err != nil || r != resultOK {
		return nil, firstErr(err, in.failure(r, nil))
	}
	liveHandles.Add(1)
	h := &memoryHandle{in: in, ptr: in.u32(out)}
	runtime.SetFinalizer(h, (*memoryHandle).free)
	return h, nil
}

// free releases the engine; safe to call more than once.
func (h *memoryHandle) free() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ptr != 0 {
		h.in.mu.Lock()
		_, _ = h.in.call(fnMemoryFree, uint64(h.ptr))
		h.in.mu.Unlock()
		h.ptr = 0
		liveHandles.Add(-1)
	}
	runtime.SetFinalizer(h, nil)
}

// lock takes the engine's instance for one call.
func (h *memoryHandle) lock() *instance {
	h.in.mu.Lock()
	return h.in
}

// check runs one acquire or peek in the engine. now == nil decides at clock;
// otherwise *now is the caller's time. clock is the real clock, which alone
// expires keys (as Redis expires them on its own clock), so pass it always.
func (h *memoryHandle) check(p *policyHandle, tenant string, cost uint64, now *uint64, clock uint64, mode callMode) (Decision, error) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	p.mu.RLock()
	defer p.mu.RUnlock()
	if h.ptr == 0 || p.closed {
		return Decision{}, errClosed()
	}
	in := h.lock()
	defer in.release()
	pol, err := p.in(in)
	if err != nil {
		return Decision{}, err
	}
	t, tLen, nowPtr, err := in.tenantAndNow(tenant, now)
	if err != nil {
		return Decision{}, err
	}
	d, err := in.out(decisionSize)
	if err != nil {
		return Decision{}, err
	}
	m, err := in.msgOut()
	if err != nil {
		return Decision{}, err
	}
	mb, mc, ml, mf := m.args()
	fn := fnMemoryAcquire
	if mode == modePeek {
		fn = fnMemoryPeek
	}
	r, err := in.result(fn, uint64(h.ptr), pol, t, tLen, cost, nowPtr, clock, d, mb, mc, ml, mf)
	runtime.KeepAlive(h)
	runtime.KeepAlive(p)
	if err != nil || r != resultOK {
		return Decision{}, firstErr(err, in.failure(r, &m))
	}
	return in.decision(d), nil
}

func (h *memoryHandle) reset(p *policyHandle, tenant string) (bool, error) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	p.mu.RLock()
	defer p.mu.RUnlock()
	if h.ptr == 0 || p.closed {
		return false, errClosed()
	}
	in := h.lock()
	defer in.release()
	pol, err := p.in(in)
	if err != nil {
		return false, err
	}
	t, tLen, err := in.bytes(tenant)
	if err != nil {
		return false, err
	}
	out, err := in.out(4)
	if err != nil {
		return false, err
	}
	m, err := in.msgOut()
	if err != nil {
		return false, err
	}
	mb, mc, ml, mf := m.args()
	r, err := in.result(fnMemoryReset, uint64(h.ptr), pol, t, tLen, out, mb, mc, ml, mf)
	runtime.KeepAlive(h)
	runtime.KeepAlive(p)
	if err != nil || r != resultOK {
		return false, firstErr(err, in.failure(r, &m))
	}
	b, _ := in.mem.ReadByte(uint32(out))
	return b != 0, nil
}

// denyCacheHandle owns one slidelimit_deny_cache, which lives in one
// instance: its calls wait for that instance.
type denyCacheHandle struct {
	mu  sync.RWMutex
	in  *instance
	ptr uint32
}

// newDenyCacheHandle makes a cache of capacity tenants (0: core's default).
func newDenyCacheHandle(capacity uint64) (*denyCacheHandle, error) {
	in, err := pool.acquire()
	if err != nil {
		return nil, err
	}
	defer in.release()
	// size_t is 32 bits in the module: a larger count is above core's
	// maximum either way.
	capacity = min(capacity, math.MaxUint32)
	out, err := in.out(4)
	if err != nil {
		return nil, err
	}
	m, err := in.msgOut()
	if err != nil {
		return nil, err
	}
	mb, mc, ml, mf := m.args()
	if r, err := in.result(fnDenyCacheNew, capacity, out, mb, mc, ml, mf); err != nil || r != resultOK {
		return nil, firstErr(err, in.failure(r, &m))
	}
	liveHandles.Add(1)
	h := &denyCacheHandle{in: in, ptr: in.u32(out)}
	runtime.SetFinalizer(h, (*denyCacheHandle).free)
	return h, nil
}

// free releases the cache; safe to call more than once.
func (h *denyCacheHandle) free() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ptr != 0 {
		h.in.mu.Lock()
		_, _ = h.in.call(fnDenyCacheFree, uint64(h.ptr))
		h.in.mu.Unlock()
		h.ptr = 0
		liveHandles.Add(-1)
	}
	runtime.SetFinalizer(h, nil)
}

// check is the cache's local denial of an acquire, if it has one. Any
// failure (a closed Limiter, a tenant core refuses) is a miss: the Redis
// path reports it.
func (h *denyCacheHandle) check(tenant string, cost, monoMs uint64) (Decision, bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.ptr == 0 {
		return Decision{}, false
	}
	in := h.in
	in.mu.Lock()
	defer in.release()
	t, tLen, err := in.bytes(tenant)
	if err != nil {
		return Decision{}, false
	}
	// The hit flag (padded to 8), then the decision.
	outs, err := in.out(8 + decisionSize)
	if err != nil {
		return Decision{}, false
	}
	r, err := in.result(fnDenyCacheCheck, uint64(h.ptr), t, tLen, cost, monoMs, outs, outs+8)
	runtime.KeepAlive(h)
	if err != nil || r != resultOK {
		return Decision{}, false
	}
	if hit, _ := in.mem.ReadByte(uint32(outs)); hit == 0 {
		return Decision{}, false
	}
	return in.decision(outs + 8), true
}

// record tells the cache what Redis answered.
func (h *denyCacheHandle) record(tenant string, cost uint64, d Decision, monoMs uint64) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.ptr == 0 {
		return
	}
	in := h.in
	in.mu.Lock()
	defer in.release()
	t, tLen, err := in.bytes(tenant)
	if err != nil {
		return
	}
	var allowed uint64
	if d.Allowed {
		allowed = 1
	}
	_, _ = in.call(fnDenyCacheRecord, uint64(h.ptr), t, tLen, cost, allowed, d.Remaining, d.RetryAfterMs,
		d.ResetAfterMs, d.NowMs, uint64(uint32(int32(d.deniedBy-1))), monoMs)
	runtime.KeepAlive(h)
}

// forget drops tenant's entry: a reset through this Limiter. As a reset in
// this process it reaches every cache, and each instance is a copy of core
// with a memory of its own, so the others are told one at a time (never two
// instances locked at once).
func (h *denyCacheHandle) forget(tenant string) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.ptr == 0 { // closed meanwhile: the other caches are still told
		forgetTenant(tenant)
		return
	}
	own := h.in
	own.mu.Lock()
	if t, tLen, err := own.bytes(tenant); err == nil {
		_, _ = own.call(fnDenyCacheForget, uint64(h.ptr), t, tLen)
	}
	own.release()
	forgetTenantInEach(tenant, own)
	runtime.KeepAlive(h)
}

// forgetTenant drops tenant's entry in every deny cache of the process: a
// reset through a Limiter whose own cache is off. Each instance is told.
func forgetTenant(tenant string) {
	forgetTenantInEach(tenant, nil)
}

// forgetTenantInEach tells every instance but skip (one at a time, never two
// locked at once) to drop tenant's entries.
func forgetTenantInEach(tenant string, skip *instance) {
	for _, in := range *pool.all.Load() {
		if in == skip {
			continue
		}
		in.mu.Lock()
		if t, tLen, err := in.bytes(tenant); err == nil {
			_, _ = in.call(fnDenyCachesForgetTenant, t, tLen)
		}
		in.release()
	}
}

// cString runs a function that returns a static NUL-terminated string ("" if
// the module cannot run).
func cString(fn int, args ...uint64) string {
	s, _ := with(func(in *instance) (string, error) {
		p, err := in.call(fn, args...)
		if err != nil {
			return "", err
		}
		return in.cString(uint32(p)), nil
	})
	return s
}

// resultName is the stable tag of a code, from core.
func resultName(code Code) string { return cString(fnResultName, uint64(code)) }

// defaultNamespace and defaultAlgorithm are core's policy defaults.
func defaultNamespace() string    { return cString(fnDefaultNamespace) }
func defaultAlgorithm() Algorithm { return Algorithm(cString(fnDefaultAlgorithm)) }

// defaultTimeoutMs is core's per-call timeout default (0 if the module
// cannot run at all, when nothing else can either).
func defaultTimeoutMs() uint64 {
	ms, _ := with(func(in *instance) (uint64, error) { return in.call(fnDefaultTimeoutMs) })
	return ms
}

// coreVersion is the version of slidelimit-core this package runs.
func coreVersion() string { return cString(fnVersion) }

// checkTimeoutMs applies core's rule for a per-call timeout in milliseconds
// (1 ..= 2^31 - 1), shared by every binding.
func checkTimeoutMs(ms uint64) error {
	_, err := with(func(in *instance) (struct{}, error) {
		m, err := in.msgOut()
		if err != nil {
			return struct{}{}, err
		}
		mb, mc, ml, mf := m.args()
		if r, err := in.result(fnCheckTimeoutMs, ms, mb, mc, ml, mf); err != nil || r != resultOK {
			return struct{}{}, firstErr(err, in.failure(r, &m))
		}
		return struct{}{}, nil
	})
	return err
}

func metricWaitSecondsOf(retryAfterMs uint64) float64 {
	v, err := with(func(in *instance) (uint64, error) { return in.call(fnMetricWaitSeconds, retryAfterMs) })
	if err != nil {
		return math.NaN()
	}
	return api.DecodeF64(v)
}
