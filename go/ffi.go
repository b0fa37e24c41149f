//go:build cgo

package slidelimit

// cgo links the static library `make` builds from ffi-c/ (cargo build
// --release -p slidelimit-ffi) and the header checked in beside it. Every
// contract decision (keys, validation, scripts, reply parsing, the
// server-error table, the memory engine) happens on the other side. A check
// crosses into C twice: once to build its call into a Go buffer, once to
// parse the reply.

/*
#cgo CFLAGS: -I${SRCDIR}/include
#cgo linux,amd64,!slidelimit_source LDFLAGS: ${SRCDIR}/lib/linux_amd64/libslidelimit_ffi.a
#cgo linux,arm64,!slidelimit_source LDFLAGS: ${SRCDIR}/lib/linux_arm64/libslidelimit_ffi.a
#cgo LDFLAGS: -ldl -lpthread -lm
// The functions of every check keep no pointer past their return and never
// call Go: so cgo may leave what Go passes them on the stack, and skip the
// callback bookkeeping.
#cgo noescape slidelimit_policy_build_call_into
#cgo nocallback slidelimit_policy_build_call_into
#cgo noescape slidelimit_decision_from_reply
#cgo nocallback slidelimit_decision_from_reply
#cgo noescape slidelimit_memory_acquire
#cgo nocallback slidelimit_memory_acquire
#cgo noescape slidelimit_memory_peek
#cgo nocallback slidelimit_memory_peek
#cgo noescape slidelimit_deny_cache_check
#cgo nocallback slidelimit_deny_cache_check
#cgo noescape slidelimit_deny_cache_record
#cgo nocallback slidelimit_deny_cache_record
#include "slidelimit.h"
*/
import "C"

import (
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// ffiLibHash is set by `make` (-ldflags -X) to a hash of the static library:
// go's build cache does not notice a changed C library, a changed flag it does.
var ffiLibHash string

var _ = ffiLibHash

// errors.go spells the codes as numbers so that it builds without cgo too;
// each index below is 0 only when the number equals the header's (any other
// fails to compile: out of range, or a negative Code).
var _ = [1]struct{}{}[ErrInvalidArgument-Code(C.SLIDELIMIT_RESULT_INVALID_ARGUMENT)+
	ErrUnavailable-Code(C.SLIDELIMIT_RESULT_UNAVAILABLE)+
	ErrScriptError-Code(C.SLIDELIMIT_RESULT_SCRIPT_ERROR)+
	ErrWrongType-Code(C.SLIDELIMIT_RESULT_WRONG_TYPE)+
	ErrMalformedReply-Code(C.SLIDELIMIT_RESULT_MALFORMED_REPLY)+
	ErrPermissionDenied-Code(C.SLIDELIMIT_RESULT_PERMISSION_DENIED)+
	ErrInternal-Code(C.SLIDELIMIT_RESULT_INTERNAL)]

// msgCap is the size of the buffer that receives a failure's message.
const msgCap = 512

// maxLimits is the header's SLIDELIMIT_MAX_LIMITS (ffi_nocgo.go's value on
// the wasm path).
const maxLimits = C.SLIDELIMIT_MAX_LIMITS

// liveHandles counts the C objects (policies and memory engines) this
// process holds: +1 when one is made, -1 when Close or a finalizer frees it.
// Tests read it (export_test.go) to prove that finalizers free dropped
// Limiters.
var liveHandles atomic.Int64

// bytesPtr is the data pointer of s for C (nil for ""), never written through.
func bytesPtr(s string) *C.uint8_t {
	return (*C.uint8_t)(unsafe.Pointer(unsafe.StringData(s)))
}

// staticString copies a (pointer, length) pair that C owns forever.
func staticString(p *C.uint8_t, n C.size_t) string {
	return C.GoStringN((*C.char)(unsafe.Pointer(p)), C.int(n))
}

// errorOut is what a failing C call reports besides its code: the message
// buffer and the field core blames.
type errorOut func(msg *C.uint8_t, msgLen *C.size_t, field *C.slidelimit_field) C.slidelimit_result

// failure turns a result code into an *Error. The fast paths pass no message
// buffer; when a call fails, `retry` runs it again with one and with the
// field out-param (the functions are deterministic for the inputs that
// fail), so success costs nothing extra.
func failure(code C.slidelimit_result, retry errorOut) error {
	buf := make([]byte, msgCap)
	var n C.size_t
	var field C.slidelimit_field
	e := &Error{Code: Code(code)}
	if retry != nil && retry((*C.uint8_t)(unsafe.Pointer(&buf[0])), &n, &field) == code {
		e.Message = string(buf[:n])
		e.field = fieldName(field)
	}
	return e
}

// fieldName copies the field core named (static memory), "" for none.
func fieldName(f C.slidelimit_field) string {
	if f.name == nil {
		return ""
	}
	return staticString(f.name, f.len)
}

// policyHandle owns one slidelimit_policy. Calls hold the read lock, so Close
// cannot free the policy under a running call.
type policyHandle struct {
	mu    sync.RWMutex
	ptr   *C.slidelimit_policy
	alg   C.uint32_t // the first limit's slidelimit_algorithm value
	count int        // how many limits
}

func newPolicyHandle(namespace, resource string, specs []limitSpec) (*policyHandle, error) {
	n := len(specs)
	algs := make([]C.uint32_t, max(n, 1))
	limits := make([]C.uint64_t, max(n, 1))
	windows := make([]C.uint64_t, max(n, 1))
	buckets := make([]C.uint64_t, max(n, 1))
	given := make([]C.bool, max(n, 1))
	for i, s := range specs {
		alg, err := parseAlgorithm(string(s.algorithm))
		if err != nil {
			return nil, forLimit(err, i, len(specs))
		}
		algs[i], limits[i], windows[i] = alg, C.uint64_t(s.limit), C.uint64_t(s.windowMs)
		buckets[i], given[i] = C.uint64_t(s.buckets), C.bool(s.bucketsGiven)
	}
	var ptr *C.slidelimit_policy
	run := func(msg *C.uint8_t, msgLen *C.size_t, field *C.slidelimit_field) C.slidelimit_result {
		return C.slidelimit_policy_new_limits(bytesPtr(namespace), C.size_t(len(namespace)),
			bytesPtr(resource), C.size_t(len(resource)), &algs[0], &limits[0], &windows[0], &buckets[0],
			&given[0], C.size_t(n), &ptr, msg, msgCap, msgLen, field)
	}
	if r := run(nil, nil, nil); r != C.SLIDELIMIT_RESULT_OK {
		return nil, failure(r, run)
	}
	liveHandles.Add(1)
	h := &policyHandle{ptr: ptr, alg: algs[0], count: n}
	runtime.SetFinalizer(h, (*policyHandle).free)
	return h, nil
}

// buckets are the effective bucket counts of the policy's limits, by core:
// the count given or core's default for a bucketed window, 0 for the other
// algorithms.
// limitCount is how many limits the policy holds (the length of its reply).
func (h *policyHandle) limitCount() int { return h.count }

func (h *policyHandle) buckets() ([]uint64, error) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.ptr == nil {
		return nil, errClosed()
	}
	out := make([]uint64, h.count)
	for i := range out {
		var alg C.uint32_t
		var limit, window, n C.uint64_t
		if r := C.slidelimit_policy_limit(h.ptr, C.size_t(i), &alg, &limit, &window, &n); r != C.SLIDELIMIT_RESULT_OK {
			return nil, failure(r, nil)
		}
		out[i] = uint64(n)
	}
	runtime.KeepAlive(h)
	return out, nil
}

// script is the Lua script the policy's calls run in mode, by core.
func (h *policyHandle) script(mode callMode) (script, error) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.ptr == nil {
		return script{}, errClosed()
	}
	var text, sha1 *C.uint8_t
	var textLen, sha1Len C.size_t
	r := C.slidelimit_policy_script(h.ptr, mode, &text, &textLen, &sha1, &sha1Len)
	runtime.KeepAlive(h)
	if r != C.SLIDELIMIT_RESULT_OK {
		return script{}, failure(r, nil)
	}
	return script{text: staticString(text, textLen), sha1: staticString(sha1, sha1Len)}, nil
}

// free releases the policy; safe to call more than once.
func (h *policyHandle) free() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ptr != nil {
		C.slidelimit_policy_free(h.ptr)
		h.ptr = nil
		liveHandles.Add(-1)
	}
	runtime.SetFinalizer(h, nil)
}

func parseAlgorithm(name string) (C.uint32_t, error) {
	var alg C.uint32_t
	run := func(msg *C.uint8_t, msgLen *C.size_t, field *C.slidelimit_field) C.slidelimit_result {
		return C.slidelimit_algorithm_parse(bytesPtr(name), C.size_t(len(name)), &alg, msg, msgCap, msgLen, field)
	}
	if r := run(nil, nil, nil); r != C.SLIDELIMIT_RESULT_OK {
		return 0, failure(r, run)
	}
	return alg, nil
}

// scriptCall is one check's KEYS and ARGV, as core built them.
type scriptCall struct {
	keys []string
	args []any
}

// callMode is a slidelimit_mode value.
type callMode = C.uint32_t

const (
	modeAcquire = callMode(C.SLIDELIMIT_MODE_ACQUIRE)
	modePeek    = callMode(C.SLIDELIMIT_MODE_PEEK)
)

// buildCall asks core for the call's KEYS and ARGV, copied into one Go
// buffer by a single C call. now == nil lets the script read Redis TIME.
func (h *policyHandle) buildCall(tenant string, cost uint64, now *uint64, mode callMode) (scriptCall, error) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.ptr == nil {
		return scriptCall{}, errClosed()
	}
	var nowPtr *C.uint64_t
	if now != nil {
		v := C.uint64_t(*now)
		nowPtr = &v
	}
	// A first guess that fits every ordinary call; when it does not, core
	// answers BUFFER_TOO_SMALL with the size it needs, and the second try
	// has it.
	return h.buildCallSized(tenant, cost, nowPtr, mode, min(h.count*(3*len(tenant)+256), C.SLIDELIMIT_CALL_BUF_MAX))
}

// buildCallSized is buildCall with the first buffer of size bytes (the
// caller holds the read lock).
func (h *policyHandle) buildCallSized(tenant string, cost uint64, nowPtr *C.uint64_t, mode callMode, size int) (scriptCall, error) {
	size = max(size, 1)
	var lens [C.SLIDELIMIT_CALL_PARTS_MAX]C.size_t
	var nKeys, nParts, used C.size_t
	for attempt := 0; ; attempt++ {
		buf := make([]byte, size)
		run := func(msg *C.uint8_t, msgLen *C.size_t, field *C.slidelimit_field) C.slidelimit_result {
			return C.slidelimit_policy_build_call_into(h.ptr, bytesPtr(tenant), C.size_t(len(tenant)),
				C.uint64_t(cost), nowPtr, mode, (*C.uint8_t)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)),
				&lens[0], C.size_t(len(lens)), &nKeys, &nParts, &used, msg, msgCap, msgLen, field)
		}
		r := run(nil, nil, nil)
		runtime.KeepAlive(h) // The finalizer must not free the policy during the call.
		if r == C.SLIDELIMIT_RESULT_BUFFER_TOO_SMALL && attempt == 0 && int(used) > size {
			size = int(used)
			continue
		}
		if r != C.SLIDELIMIT_RESULT_OK {
			return scriptCall{}, failure(r, run)
		}
		// The buffer is never written again, so the strings can share it.
		return splitCall(buf, int(nKeys), int(nParts), func(i int) int { return int(lens[i]) }), nil
	}
}

// key is the Redis key of tenant under the policy (its first limit's).
func (h *policyHandle) key(tenant string) (string, error) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.ptr == nil {
		return "", errClosed()
	}
	return h.limitKey(0, tenant)
}

// keys are the Redis keys of tenant, one per limit.
func (h *policyHandle) keys(tenant string) ([]string, error) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.ptr == nil {
		return nil, errClosed()
	}
	keys := make([]string, h.count)
	for i := range keys {
		var err error
		if keys[i], err = h.limitKey(i, tenant); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// limitKey is limit i's key (the caller holds the read lock).
func (h *policyHandle) limitKey(i int, tenant string) (string, error) {
	buf := make([]byte, C.SLIDELIMIT_KEY_MAX)
	var n C.size_t
	var slot C.uint16_t
	run := func(msg *C.uint8_t, msgLen *C.size_t, field *C.slidelimit_field) C.slidelimit_result {
		return C.slidelimit_policy_limit_key(h.ptr, C.size_t(i), bytesPtr(tenant), C.size_t(len(tenant)),
			(*C.uint8_t)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)), &n, &slot, msg, msgCap, msgLen, field)
	}
	r := run(nil, nil, nil)
	runtime.KeepAlive(h)
	if r != C.SLIDELIMIT_RESULT_OK {
		return "", failure(r, run)
	}
	return string(buf[:n]), nil
}

// KeySlot is the Redis Cluster slot of any key (CRC16 of its hash tag).
func KeySlot(key string) (uint16, error) {
	var slot C.uint16_t
	r := C.slidelimit_key_slot(bytesPtr(key), C.size_t(len(key)), &slot)
	if r != C.SLIDELIMIT_RESULT_OK {
		return 0, failure(r, nil)
	}
	return uint16(slot), nil
}

// script is one Lua script and its SHA1, copied once from core's static memory.
type script struct {
	text, sha1 string
}

// parseReply hands the integers of a script for a policy of limits limits to core.
func parseReply(reply []int64, limits int) (Decision, error) {
	var d C.slidelimit_decision
	var ptr *C.int64_t
	if len(reply) > 0 {
		ptr = (*C.int64_t)(unsafe.Pointer(&reply[0]))
	}
	run := func(msg *C.uint8_t, msgLen *C.size_t, field *C.slidelimit_field) C.slidelimit_result {
		return C.slidelimit_decision_from_reply(ptr, C.size_t(len(reply)), C.size_t(limits), &d, msg, msgCap, msgLen, field)
	}
	r := run(nil, nil, nil)
	if r != C.SLIDELIMIT_RESULT_OK {
		return Decision{}, failure(r, run)
	}
	return decisionFromC(&d), nil
}

func decisionFromC(d *C.slidelimit_decision) Decision {
	return Decision{
		Allowed:      bool(d.allowed),
		Remaining:    uint64(d.remaining),
		RetryAfterMs: uint64(d.retry_after_ms),
		ResetAfterMs: uint64(d.reset_after_ms),
		NowMs:        uint64(d.now_ms),
		deniedBy:     int(max(d.denied_by, -1)) + 1,
	}
}

// denyCacheHandle owns one slidelimit_deny_cache (internally locked by core's
// C ABI). Calls hold the read lock, so Close cannot free it under a call.
type denyCacheHandle struct {
	mu  sync.RWMutex
	ptr *C.slidelimit_deny_cache
}

// newDenyCacheHandle makes a cache of capacity tenants (0: core's default).
func newDenyCacheHandle(capacity uint64) (*denyCacheHandle, error) {
	if capacity > math.MaxUint {
		capacity = math.MaxUint // above core's maximum either way
	}
	var ptr *C.slidelimit_deny_cache
	run := func(msg *C.uint8_t, msgLen *C.size_t, field *C.slidelimit_field) C.slidelimit_result {
		return C.slidelimit_deny_cache_new(C.size_t(capacity), &ptr, msg, msgCap, msgLen, field)
	}
	if r := run(nil, nil, nil); r != C.SLIDELIMIT_RESULT_OK {
		return nil, failure(r, run)
	}
	liveHandles.Add(1)
	h := &denyCacheHandle{ptr: ptr}
	runtime.SetFinalizer(h, (*denyCacheHandle).free)
	return h, nil
}

// free releases the cache; safe to call more than once.
func (h *denyCacheHandle) free() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ptr != nil {
		C.slidelimit_deny_cache_free(h.ptr)
		h.ptr = nil
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
	if h.ptr == nil {
		return Decision{}, false
	}
	var hit C.bool
	var d C.slidelimit_decision
	r := C.slidelimit_deny_cache_check(h.ptr, bytesPtr(tenant), C.size_t(len(tenant)), C.uint64_t(cost),
		C.uint64_t(monoMs), &hit, &d)
	runtime.KeepAlive(h)
	if r != C.SLIDELIMIT_RESULT_OK || !bool(hit) {
		return Decision{}, false
	}
	return decisionFromC(&d), true
}

// record tells the cache what Redis answered.
func (h *denyCacheHandle) record(tenant string, cost uint64, d Decision, monoMs uint64) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.ptr == nil {
		return
	}
	C.slidelimit_deny_cache_record(h.ptr, bytesPtr(tenant), C.size_t(len(tenant)), C.uint64_t(cost),
		C.bool(d.Allowed), C.uint64_t(d.Remaining), C.uint64_t(d.RetryAfterMs), C.uint64_t(d.ResetAfterMs),
		C.uint64_t(d.NowMs), C.int32_t(d.deniedBy-1), C.uint64_t(monoMs))
	runtime.KeepAlive(h)
}

// forget drops tenant's entry.
func (h *denyCacheHandle) forget(tenant string) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.ptr == nil { // closed meanwhile: the other caches are still told
		forgetTenant(tenant)
		return
	}
	C.slidelimit_deny_cache_forget(h.ptr, bytesPtr(tenant), C.size_t(len(tenant)))
	runtime.KeepAlive(h)
}

// forgetTenant drops tenant's entry in every deny cache of the process: a
// reset through a Limiter whose own cache is off.
func forgetTenant(tenant string) {
	C.slidelimit_deny_caches_forget_tenant(bytesPtr(tenant), C.size_t(len(tenant)))
}

// mapServerError applies core's table to an error reply from Redis to a
// script call on key under the policy: retry is true for a NOSCRIPT to
// EVALSHA (send EVAL once); otherwise e is what every binding reports (code,
// field and message, all core's), with cause as its Err. afterRetry maps the
// reply to that EVAL. It reads no C object, so it needs no lock.
func (h *policyHandle) mapServerError(reply, key string, afterRetry bool, cause error) (retry bool, e *Error) {
	var action C.slidelimit_server_error_action
	var c C.slidelimit_result
	var field C.slidelimit_field
	buf := make([]byte, len(reply)+len(key)+C.SLIDELIMIT_SERVER_ERROR_MESSAGE_EXTRA)
	var n C.size_t
	r := C.slidelimit_server_error_map(bytesPtr(reply), C.size_t(len(reply)), bytesPtr(key), C.size_t(len(key)),
		h.alg, C.bool(afterRetry), &action, &c, (*C.uint8_t)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)), &n,
		&field, nil, 0, nil, nil)
	if r != C.SLIDELIMIT_RESULT_OK {
		return false, &Error{Code: ErrInternal, Message: "mapping the server error failed: " + resultName(Code(r)), Err: cause}
	}
	if action == C.SLIDELIMIT_SERVER_ERROR_ACTION_RETRY_WITH_EVAL {
		return true, nil
	}
	return false, &Error{Code: Code(c), Message: string(buf[:n]), Err: cause, field: fieldName(field)}
}

// resendPause is core's wait before sending again a script call that Redis
// answered with reply without running it (TRYAGAIN while a slot migrates),
// at the attempt-th resend; false for any other reply.
func resendPause(reply string, attempt int) (time.Duration, bool) {
	var ms C.uint64_t
	r := C.slidelimit_server_error_resend_pause_ms(bytesPtr(reply), C.size_t(len(reply)),
		C.uint32_t(min(attempt, math.MaxUint32)), &ms)
	return time.Duration(ms) * time.Millisecond, r == C.SLIDELIMIT_RESULT_OK && ms > 0
}

// mapCommandError applies core's table to an error reply from Redis to a
// command that is no script call (a reset's DEL): never a retry.
func mapCommandError(reply string, cause error) *Error {
	var c C.slidelimit_result
	var field C.slidelimit_field
	buf := make([]byte, len(reply)+C.SLIDELIMIT_SERVER_ERROR_MESSAGE_EXTRA)
	var n C.size_t
	r := C.slidelimit_server_error_map_command(bytesPtr(reply), C.size_t(len(reply)), &c,
		(*C.uint8_t)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)), &n, &field)
	if r != C.SLIDELIMIT_RESULT_OK {
		return &Error{Code: ErrInternal, Message: "mapping the server error failed: " + resultName(Code(r)), Err: cause}
	}
	return &Error{Code: Code(c), Message: string(buf[:n]), Err: cause, field: fieldName(field)}
}

// memoryHandle owns one slidelimit_memory engine.
type memoryHandle struct {
	mu  sync.RWMutex
	ptr *C.slidelimit_memory
}

func newMemoryHandle() (*memoryHandle, error) {
	var ptr *C.slidelimit_memory
	if r := C.slidelimit_memory_new(&ptr); r != C.SLIDELIMIT_RESULT_OK {
		return nil, failure(r, nil)
	}
	liveHandles.Add(1)
	h := &memoryHandle{ptr: ptr}
	runtime.SetFinalizer(h, (*memoryHandle).free)
	return h, nil
}

// free releases the engine; safe to call more than once.
func (h *memoryHandle) free() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ptr != nil {
		C.slidelimit_memory_free(h.ptr)
		h.ptr = nil
		liveHandles.Add(-1)
	}
	runtime.SetFinalizer(h, nil)
}

// check runs one acquire or peek in the engine. now == nil decides at clock;
// otherwise *now is the caller's time. clock is the real clock, which alone
// expires keys (as Redis expires them on its own clock), so pass it always.
func (h *memoryHandle) check(p *policyHandle, tenant string, cost uint64, now *uint64, clock uint64, mode callMode) (Decision, error) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	p.mu.RLock()
	defer p.mu.RUnlock()
	if h.ptr == nil || p.ptr == nil {
		return Decision{}, errClosed()
	}
	var nowPtr *C.uint64_t
	if now != nil {
		v := C.uint64_t(*now)
		nowPtr = &v
	}
	var d C.slidelimit_decision
	run := func(msg *C.uint8_t, msgLen *C.size_t, field *C.slidelimit_field) C.slidelimit_result {
		if mode == modePeek {
			return C.slidelimit_memory_peek(h.ptr, p.ptr, bytesPtr(tenant), C.size_t(len(tenant)),
				C.uint64_t(cost), nowPtr, C.uint64_t(clock), &d, msg, msgCap, msgLen, field)
		}
		return C.slidelimit_memory_acquire(h.ptr, p.ptr, bytesPtr(tenant), C.size_t(len(tenant)),
			C.uint64_t(cost), nowPtr, C.uint64_t(clock), &d, msg, msgCap, msgLen, field)
	}
	r := run(nil, nil, nil)
	runtime.KeepAlive(h)
	runtime.KeepAlive(p)
	if r != C.SLIDELIMIT_RESULT_OK {
		return Decision{}, failure(r, run)
	}
	return decisionFromC(&d), nil
}

func (h *memoryHandle) reset(p *policyHandle, tenant string) (bool, error) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	p.mu.RLock()
	defer p.mu.RUnlock()
	if h.ptr == nil || p.ptr == nil {
		return false, errClosed()
	}
	var removed C.bool
	run := func(msg *C.uint8_t, msgLen *C.size_t, field *C.slidelimit_field) C.slidelimit_result {
		return C.slidelimit_memory_reset(h.ptr, p.ptr, bytesPtr(tenant), C.size_t(len(tenant)),
			&removed, msg, msgCap, msgLen, field)
	}
	r := run(nil, nil, nil)
	runtime.KeepAlive(h)
	runtime.KeepAlive(p)
	if r != C.SLIDELIMIT_RESULT_OK {
		return false, failure(r, run)
	}
	return bool(removed), nil
}

// resultName is the stable tag of a code, from core.
func resultName(code Code) string {
	return C.GoString(C.slidelimit_result_name(C.uint32_t(code)))
}

// defaultNamespace and defaultAlgorithm are core's policy defaults (static
// C strings).
func defaultNamespace() string    { return C.GoString(C.slidelimit_default_namespace()) }
func defaultAlgorithm() Algorithm { return Algorithm(C.GoString(C.slidelimit_default_algorithm())) }
func defaultTimeoutMs() uint64    { return uint64(C.slidelimit_default_timeout_ms()) }

// coreVersion is the version of slidelimit-core this package is linked with
// (the Version constant is the module's; the tests hold them equal).
func coreVersion() string {
	return C.GoString(C.slidelimit_version())
}

// checkTimeoutMs applies core's rule for a per-call timeout in milliseconds
// (1 ..= 2^31 - 1), shared by every binding.
func checkTimeoutMs(ms uint64) error {
	run := func(msg *C.uint8_t, msgLen *C.size_t, field *C.slidelimit_field) C.slidelimit_result {
		return C.slidelimit_check_timeout_ms(C.uint64_t(ms), msg, msgCap, msgLen, field)
	}
	if r := run(nil, nil, nil); r != C.SLIDELIMIT_RESULT_OK {
		return failure(r, run)
	}
	return nil
}
