//! The in-memory engine: the scripts' exact semantics without Redis (tests,
//! one process).

use crate::boundary::{boundary, free_box, out, reference, tenant_input, MessageOut, Outcome};
use crate::call::slidelimit_decision;
use crate::policy::slidelimit_policy;
use crate::result::{slidelimit_field, slidelimit_result};
use slidelimit_core::{MemoryEngine, Mode};

/// An in-memory engine with the scripts' exact semantics (tests, single
/// process). Made by `slidelimit_memory_new`, released by
/// `slidelimit_memory_free`. Internally locked: safe to share between threads.
pub struct slidelimit_memory {
    inner: MemoryEngine,
}

/// Makes an empty in-memory engine in `*out_memory` (release it with
/// `slidelimit_memory_free`).
#[no_mangle]
pub unsafe extern "C" fn slidelimit_memory_new(
    out_memory: *mut *mut slidelimit_memory,
) -> slidelimit_result {
    boundary(MessageOut::NONE, || {
        let out_memory = out("out_memory", out_memory)?;
        *out_memory = Box::into_raw(Box::new(slidelimit_memory {
            inner: MemoryEngine::new(),
        }));
        Ok(())
    })
}

/// Releases an engine from `slidelimit_memory_new`. NULL is ignored.
#[no_mangle]
pub unsafe extern "C" fn slidelimit_memory_free(memory: *mut slidelimit_memory) {
    free_box(memory);
}

#[allow(clippy::too_many_arguments)] // Mirrors the C signatures it serves.
unsafe fn memory_check(
    memory: *const slidelimit_memory,
    policy: *const slidelimit_policy,
    tenant: *const u8,
    tenant_len: usize,
    cost: u64,
    now_ms: *const u64,
    clock_ms: u64,
    mode: Mode,
    out_decision: *mut slidelimit_decision,
) -> Outcome {
    let memory = reference("memory", memory)?;
    let policy = reference("policy", policy)?;
    let out_decision = out("out_decision", out_decision)?;
    let tenant = tenant_input(tenant, tenant_len)?;
    let now_ms = now_ms.as_ref().copied();
    let decision = memory
        .inner
        .check(&policy.inner, tenant, cost, now_ms, clock_ms, mode)?;
    *out_decision = decision.into();
    Ok(())
}

/// Acquires `cost` permits for `tenant` in the memory engine. `now_ms` NULL
/// decides at `clock_ms`; otherwise it points at the caller's time in ms.
/// `clock_ms` is the caller's real clock (ms since the epoch), the stand-in
/// for the Redis server's clock: pass it in every call, also with `now_ms`.
/// Keys expire on it alone, as Redis expires them on its own clock, never on
/// `now_ms`.
#[no_mangle]
pub unsafe extern "C" fn slidelimit_memory_acquire(
    memory: *const slidelimit_memory,
    policy: *const slidelimit_policy,
    tenant: *const u8,
    tenant_len: usize,
    cost: u64,
    now_ms: *const u64,
    clock_ms: u64,
    out_decision: *mut slidelimit_decision,
    msg: *mut u8,
    msg_cap: usize,
    msg_len: *mut usize,
    field: *mut slidelimit_field,
) -> slidelimit_result {
    boundary(MessageOut::new(msg, msg_cap, msg_len, field), || {
        memory_check(
            memory,
            policy,
            tenant,
            tenant_len,
            cost,
            now_ms,
            clock_ms,
            Mode::Acquire,
            out_decision,
        )
    })
}

/// What `slidelimit_memory_acquire` would answer, recording nothing (same
/// `now_ms` and `clock_ms`).
#[no_mangle]
pub unsafe extern "C" fn slidelimit_memory_peek(
    memory: *const slidelimit_memory,
    policy: *const slidelimit_policy,
    tenant: *const u8,
    tenant_len: usize,
    cost: u64,
    now_ms: *const u64,
    clock_ms: u64,
    out_decision: *mut slidelimit_decision,
    msg: *mut u8,
    msg_cap: usize,
    msg_len: *mut usize,
    field: *mut slidelimit_field,
) -> slidelimit_result {
    boundary(MessageOut::new(msg, msg_cap, msg_len, field), || {
        memory_check(
            memory,
            policy,
            tenant,
            tenant_len,
            cost,
            now_ms,
            clock_ms,
            Mode::Peek,
            out_decision,
        )
    })
}

/// Forgets everything recorded for `tenant` under `policy`;
/// `*out_removed` tells whether anything was.
#[no_mangle]
pub unsafe extern "C" fn slidelimit_memory_reset(
    memory: *const slidelimit_memory,
    policy: *const slidelimit_policy,
    tenant: *const u8,
    tenant_len: usize,
    out_removed: *mut bool,
    msg: *mut u8,
    msg_cap: usize,
    msg_len: *mut usize,
    field: *mut slidelimit_field,
) -> slidelimit_result {
    boundary(MessageOut::new(msg, msg_cap, msg_len, field), || {
        let memory = reference("memory", memory)?;
        let policy = reference("policy", policy)?;
        let out_removed = out("out_removed", out_removed)?;
        let tenant = tenant_input(tenant, tenant_len)?;
        *out_removed = memory.inner.reset(&policy.inner, tenant)?;
        Ok(())
    })
}

/// The number of keys the engine holds (expired ones until they are swept).
#[no_mangle]
pub unsafe extern "C" fn slidelimit_memory_key_count(
    memory: *const slidelimit_memory,
    out_count: *mut usize,
) -> slidelimit_result {
    boundary(MessageOut::NONE, || {
        let memory = reference("memory", memory)?;
        *out("out_count", out_count)? = memory.inner.key_count();
        Ok(())
    })
}
