package slidelimit

// cgo links the static library `make` builds from ffi-c/ (cargo build
// --release -p slidelimit-ffi) and the header checked in beside it. Every
// contract decision (keys, validation, scripts, reply parsing, error
// classification, the memory engine) happens on the other side.

/*
#cgo CFLAGS: -I${SRCDIR}/../ffi-c/include
#cgo LDFLAGS: ${SRCDIR}/../target/release/libslidelimit_ffi.a -ldl -lpthread -lm
#include <stdlib.h>
#include <string.h>
#include "slidelimit.h"

// The most strings one call hands back (KEYS then ARGV); the contract uses 5.
#define SL_MAX_PARTS 8

typedef struct {
	size_t n_keys;
	size_t n_args;
	size_t lens[SL_MAX_PARTS];
} sl_layout;

// Builds one call and copies its KEYS and ARGV back to back into buf, so that
// Go crosses into C once per check instead of once per accessor.
static slidelimit_result sl_build_into(const slidelimit_policy *policy,
		const uint8_t *tenant, size_t tenant_len, uint64_t cost,
		const uint64_t *now_ms, uint32_t mode,
		uint8_t *buf, size_t cap, sl_layout *layout,
		uint8_t *msg, size_t msg_cap, size_t *msg_len) {
	slidelimit_call *call = NULL;
	slidelimit_result r = slidelimit_policy_build_call(policy, tenant, tenant_len, cost,
		now_ms, mode, &call, msg, msg_cap, msg_len);
	if (r != SLIDELIMIT_RESULT_OK) {
		return r;
	}
	size_t n_keys = 0, n_args = 0, used = 0;
	slidelimit_call_key_count(call, &n_keys);
	slidelimit_call_arg_count(call, &n_args);
	if (n_keys + n_args > SL_MAX_PARTS) {
		slidelimit_call_free(call);
		return SLIDELIMIT_RESULT_INTERNAL;
	}
	for (size_t i = 0; i < n_keys + n_args; i++) {
		const uint8_t *p = NULL;
		size_t n = 0;
		r = i < n_keys ? slidelimit_call_key(call, i, &p, &n)
		               : slidelimit_call_arg(call, i - n_keys, &p, &n);
		if (r != SLIDELIMIT_RESULT_OK) {
			slidelimit_call_free(call);
			return r;
		}
		if (n > cap - used) {
			slidelimit_call_free(call);
			return SLIDELIMIT_RESULT_BUFFER_TOO_SMALL;
		}
		if (n > 0) {
			memcpy(buf + used, p, n);
		}
		used += n;
		layout->lens[i] = n;
	}
	layout->n_keys = n_keys;
	layout->n_args = n_args;
	slidelimit_call_free(call);
	return SLIDELIMIT_RESULT_OK;
}
*/
import "C"

import (
	"runtime"
	"sync"
	"unsafe"
)

// ffiLibHash is set by `make` (-ldflags -X) to a hash of the static library:
// go's build cache does not notice a changed C library, a changed flag it does.
var ffiLibHash string

var _ = ffiLibHash

// msgCap is the size of the buffer that receives a failure's message.
const msgCap = 512

// bytesPtr is the data pointer of s for C (nil for ""), never written through.
func bytesPtr(s string) *C.uint8_t {
	return (*C.uint8_t)(unsafe.Pointer(unsafe.StringData(s)))
}

// staticString copies a (pointer, length) pair that C owns forever.
func staticString(p *C.uint8_t, n C.size_t) string {
	return C.GoStringN((*C.char)(unsafe.Pointer(p)), C.int(n))
}

// failure turns a result code into an *Error. The fast paths pass no message
// buffer; when a call fails, `retry` runs it again with one (the functions are
// deterministic for the inputs that fail), so success costs nothing extra.
func failure(code C.slidelimit_result, retry func(msg *C.uint8_t, msgLen *C.size_t) C.slidelimit_result) error {
	buf := make([]byte, msgCap)
	var n C.size_t
	message := ""
	if retry != nil && retry((*C.uint8_t)(unsafe.Pointer(&buf[0])), &n) == code {
		message = string(buf[:n])
	}
	return &Error{Code: Code(code), Message: message}
}

// policyHandle owns one slidelimit_policy. Calls hold the read lock, so Close
// cannot free the policy under a running call.
type policyHandle struct {
	mu  sync.RWMutex
	ptr *C.slidelimit_policy
}

func newPolicyHandle(p Policy) (*policyHandle, error) {
	alg, err := parseAlgorithm(string(p.Algorithm))
	if err != nil {
		return nil, err
	}
	var ptr *C.slidelimit_policy
	run := func(msg *C.uint8_t, msgLen *C.size_t) C.slidelimit_result {
		return C.slidelimit_policy_new(bytesPtr(p.Namespace), C.size_t(len(p.Namespace)),
			bytesPtr(p.Resource), C.size_t(len(p.Resource)), alg,
			C.uint64_t(p.Limit), C.uint64_t(p.WindowMs), &ptr, msg, msgCap, msgLen)
	}
	if r := run(nil, nil); r != C.SLIDELIMIT_RESULT_OK {
		return nil, failure(r, run)
	}
	h := &policyHandle{ptr: ptr}
	runtime.SetFinalizer(h, (*policyHandle).free)
	return h, nil
}

// free releases the policy; safe to call more than once.
func (h *policyHandle) free() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ptr != nil {
		C.slidelimit_policy_free(h.ptr)
		h.ptr = nil
	}
	runtime.SetFinalizer(h, nil)
}

func parseAlgorithm(name string) (C.uint32_t, error) {
	var alg C.uint32_t
	run := func(msg *C.uint8_t, msgLen *C.size_t) C.slidelimit_result {
		return C.slidelimit_algorithm_parse(bytesPtr(name), C.size_t(len(name)), &alg, msg, msgCap, msgLen)
	}
	if r := run(nil, nil); r != C.SLIDELIMIT_RESULT_OK {
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

// buildCall asks core for the call's KEYS and ARGV. now == nil lets the
// script read Redis TIME.
func (h *policyHandle) buildCall(tenant string, cost uint64, now *uint64, mode callMode) (scriptCall, error) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.ptr == nil {
		return scriptCall{}, ErrClosed
	}
	var nowPtr *C.uint64_t
	if now != nil {
		v := C.uint64_t(*now)
		nowPtr = &v
	}
	// A first guess that fits every ordinary key; core answers
	// BUFFER_TOO_SMALL if not, and the second try uses the documented maximum.
	size := 3*len(tenant) + 256
	for attempt := 0; ; attempt++ {
		buf := make([]byte, size)
		var layout C.sl_layout
		run := func(msg *C.uint8_t, msgLen *C.size_t) C.slidelimit_result {
			return C.sl_build_into(h.ptr, bytesPtr(tenant), C.size_t(len(tenant)), C.uint64_t(cost),
				nowPtr, mode, (*C.uint8_t)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)), &layout,
				msg, msgCap, msgLen)
		}
		r := run(nil, nil)
		runtime.KeepAlive(h) // The finalizer must not free the policy during the call.
		if r == C.SLIDELIMIT_RESULT_BUFFER_TOO_SMALL && attempt == 0 {
			size = C.SLIDELIMIT_KEY_MAX + 256
			continue
		}
		if r != C.SLIDELIMIT_RESULT_OK {
			return scriptCall{}, failure(r, run)
		}
		// The buffer is never written again, so the strings can share it.
		call := scriptCall{
			keys: make([]string, int(layout.n_keys)),
			args: make([]any, int(layout.n_args)),
		}
		offset := 0
		part := func(i int) string {
			n := int(layout.lens[i])
			if n == 0 {
				return ""
			}
			s := unsafe.String(&buf[offset], n)
			offset += n
			return s
		}
		for i := range call.keys {
			call.keys[i] = part(i)
		}
		for i := range call.args {
			call.args[i] = part(len(call.keys) + i)
		}
		return call, nil
	}
}

// key is the Redis key of tenant under the policy.
func (h *policyHandle) key(tenant string) (string, error) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.ptr == nil {
		return "", ErrClosed
	}
	buf := make([]byte, C.SLIDELIMIT_KEY_MAX)
	var n C.size_t
	var slot C.uint16_t
	run := func(msg *C.uint8_t, msgLen *C.size_t) C.slidelimit_result {
		return C.slidelimit_policy_key(h.ptr, bytesPtr(tenant), C.size_t(len(tenant)),
			(*C.uint8_t)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)), &n, &slot, msg, msgCap, msgLen)
	}
	r := run(nil, nil)
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

func loadScript(alg C.uint32_t, mode callMode) (script, error) {
	var p *C.uint8_t
	var n C.size_t
	if r := C.slidelimit_script_text(alg, mode, &p, &n); r != C.SLIDELIMIT_RESULT_OK {
		return script{}, failure(r, nil)
	}
	text := staticString(p, n)
	if r := C.slidelimit_script_sha1(alg, mode, &p, &n); r != C.SLIDELIMIT_RESULT_OK {
		return script{}, failure(r, nil)
	}
	return script{text: text, sha1: staticString(p, n)}, nil
}

// parseReply hands the script's integers to core.
func parseReply(reply []int64) (Decision, error) {
	var d C.slidelimit_decision
	var ptr *C.int64_t
	if len(reply) > 0 {
		ptr = (*C.int64_t)(unsafe.Pointer(&reply[0]))
	}
	run := func(msg *C.uint8_t, msgLen *C.size_t) C.slidelimit_result {
		return C.slidelimit_decision_from_reply(ptr, C.size_t(len(reply)), &d, msg, msgCap, msgLen)
	}
	r := run(nil, nil)
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
	}
}

// serverErrorKind is core's verdict on a Redis error reply.
type serverErrorKind int

const (
	serverNoScript  serverErrorKind = C.SLIDELIMIT_SERVER_ERROR_NO_SCRIPT
	serverRedirect  serverErrorKind = C.SLIDELIMIT_SERVER_ERROR_REDIRECT
	serverTransient serverErrorKind = C.SLIDELIMIT_SERVER_ERROR_TRANSIENT
	serverFinal     serverErrorKind = C.SLIDELIMIT_SERVER_ERROR_FINAL
)

func classifyServerError(text string) (serverErrorKind, Code) {
	var kind C.slidelimit_server_error
	var code C.slidelimit_result
	r := C.slidelimit_server_error_classify(bytesPtr(text), C.size_t(len(text)), &kind, &code)
	if r != C.SLIDELIMIT_RESULT_OK {
		return serverFinal, ErrInternal
	}
	return serverErrorKind(kind), Code(code)
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
	h := &memoryHandle{ptr: ptr}
	runtime.SetFinalizer(h, (*memoryHandle).free)
	return h, nil
}

func (h *memoryHandle) free() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ptr != nil {
		C.slidelimit_memory_free(h.ptr)
		h.ptr = nil
	}
	runtime.SetFinalizer(h, nil)
}

func (h *memoryHandle) check(p *policyHandle, tenant string, cost, now uint64, mode callMode) (Decision, error) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	p.mu.RLock()
	defer p.mu.RUnlock()
	if h.ptr == nil || p.ptr == nil {
		return Decision{}, ErrClosed
	}
	var d C.slidelimit_decision
	run := func(msg *C.uint8_t, msgLen *C.size_t) C.slidelimit_result {
		if mode == modePeek {
			return C.slidelimit_memory_peek(h.ptr, p.ptr, bytesPtr(tenant), C.size_t(len(tenant)),
				C.uint64_t(cost), C.uint64_t(now), &d, msg, msgCap, msgLen)
		}
		return C.slidelimit_memory_acquire(h.ptr, p.ptr, bytesPtr(tenant), C.size_t(len(tenant)),
			C.uint64_t(cost), C.uint64_t(now), &d, msg, msgCap, msgLen)
	}
	r := run(nil, nil)
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
		return false, ErrClosed
	}
	var removed C.bool
	run := func(msg *C.uint8_t, msgLen *C.size_t) C.slidelimit_result {
		return C.slidelimit_memory_reset(h.ptr, p.ptr, bytesPtr(tenant), C.size_t(len(tenant)),
			&removed, msg, msgCap, msgLen)
	}
	r := run(nil, nil)
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

// Version is the version of slidelimit-core this package is linked with.
func Version() string {
	return C.GoString(C.slidelimit_version())
}
