//! The local deny cache of core (`slidelimit_core::DenyCache`) behind a
//! lock: a binding over the C ABI keeps one per limiter and asks it before
//! each server-time acquire (docs/protocol.md, "Local deny cache").

use crate::boundary::{boundary, free_box, out, reference, tenant_input, MessageOut};
use crate::call::slidelimit_decision;
use crate::result::{slidelimit_field, slidelimit_result};
use slidelimit_core::{Decision, DenyCache};
use std::sync::Mutex;

/// A bounded cache of the last Redis denial per tenant. Made by
/// `slidelimit_deny_cache_new`, released by `slidelimit_deny_cache_free`.
/// Internally locked: safe to share between threads.
pub struct slidelimit_deny_cache {
    inner: Mutex<DenyCache>,
}

impl slidelimit_deny_cache {
    fn lock(&self) -> std::sync::MutexGuard<'_, DenyCache> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Makes a cache of at most `capacity` tenants in `*out_cache` (0 means
/// core's default of 10,000 tenants; above the
/// maximum is `invalid_argument` on `deny_cache_capacity`).
#[no_mangle]
pub unsafe extern "C" fn slidelimit_deny_cache_new(
    capacity: usize,
    out_cache: *mut *mut slidelimit_deny_cache,
    msg: *mut u8,
    msg_cap: usize,
    msg_len: *mut usize,
    field: *mut slidelimit_field,
) -> slidelimit_result {
    let capacity = match capacity {
        0 => slidelimit_core::DEFAULT_DENY_CACHE_CAPACITY,
        n => n,
    };
    slidelimit_deny_cache_with_capacity(capacity, out_cache, msg, msg_cap, msg_len, field)
}

/// Makes a cache of at most `capacity` tenants in `*out_cache`, the
/// capacity exactly as a user gave it: 0 and above the maximum are core's
/// `invalid_argument` on `deny_cache_capacity` (for a binding whose users
/// name a capacity; `slidelimit_deny_cache_new` reads 0 as the default).
#[no_mangle]
pub unsafe extern "C" fn slidelimit_deny_cache_with_capacity(
    capacity: usize,
    out_cache: *mut *mut slidelimit_deny_cache,
    msg: *mut u8,
    msg_cap: usize,
    msg_len: *mut usize,
    field: *mut slidelimit_field,
) -> slidelimit_result {
    boundary(MessageOut::new(msg, msg_cap, msg_len, field), || {
        let out_cache = out("out_cache", out_cache)?;
        let cache = DenyCache::new(capacity)?;
        *out_cache = Box::into_raw(Box::new(slidelimit_deny_cache {
            inner: Mutex::new(cache),
        }));
        Ok(())
    })
}

/// Releases a cache from `slidelimit_deny_cache_new` or
/// `slidelimit_deny_cache_with_capacity`. NULL is ignored.
#[no_mangle]
pub unsafe extern "C" fn slidelimit_deny_cache_free(cache: *mut slidelimit_deny_cache) {
    free_box(cache);
}

/// Asks the cache about a server-time acquire of `cost` by `tenant` at
/// `mono_ms`, the caller's monotonic clock in ms. `*out_hit` is true when
/// the cache denies it, with the local denial in `*out_decision` (untouched
/// otherwise): then make no Redis call. Check every acquire whose answer
/// you will record, before it is sent: a denial in flight across a reset
/// is told apart by it.
#[no_mangle]
pub unsafe extern "C" fn slidelimit_deny_cache_check(
    cache: *const slidelimit_deny_cache,
    tenant: *const u8,
    tenant_len: usize,
    cost: u64,
    mono_ms: u64,
    out_hit: *mut bool,
    out_decision: *mut slidelimit_decision,
) -> slidelimit_result {
    boundary(MessageOut::NONE, || {
        let cache = reference("cache", cache)?;
        let out_hit = out("out_hit", out_hit)?;
        let out_decision = out("out_decision", out_decision)?;
        let tenant = tenant_input(tenant, tenant_len)?;
        let hit = cache.lock().check(tenant, cost, mono_ms);
        *out_hit = hit.is_some();
        if let Some(d) = hit {
            *out_decision = d.into();
        }
        Ok(())
    })
}

/// Tells the cache what Redis answered an acquire of `cost` by `tenant`
/// sent at `mono_ms`, the monotonic time taken before the call (the one
/// given to `slidelimit_deny_cache_check`), not when the reply came: Redis
/// decided in between, so the cached wait never outlasts Redis's (call it
/// after every server-time acquire that reached Redis):
/// a denial is cached (unless a reset of the tenant may have overtaken the
/// call), an admission of a lower cost than the cached
/// denial's drops the tenant's entry (one of the same or a higher cost
/// leaves it: docs/protocol.md, "Local deny cache"). The decision
/// comes as its fields; `denied_by` is -1 for none.
#[no_mangle]
#[allow(clippy::too_many_arguments)] // The C signature.
pub unsafe extern "C" fn slidelimit_deny_cache_record(
    cache: *const slidelimit_deny_cache,
    tenant: *const u8,
    tenant_len: usize,
    cost: u64,
    allowed: bool,
    remaining: u64,
    retry_after_ms: u64,
    reset_after_ms: u64,
    now_ms: u64,
    denied_by: i32,
    mono_ms: u64,
) -> slidelimit_result {
    boundary(MessageOut::NONE, || {
        let cache = reference("cache", cache)?;
        let tenant = tenant_input(tenant, tenant_len)?;
        let decision = Decision {
            allowed,
            remaining,
            retry_after_ms,
            reset_after_ms,
            now_ms,
            denied_by: u32::try_from(denied_by).ok(),
        };
        cache.lock().record(tenant, cost, &decision, mono_ms);
        Ok(())
    })
}

/// Drops `tenant`'s entry: call it on a reset of the tenant through this
/// limiter. Every other deny cache of the process drops it too (core's
/// `forget_tenant`), as far as this copy of the library reaches.
#[no_mangle]
pub unsafe extern "C" fn slidelimit_deny_cache_forget(
    cache: *const slidelimit_deny_cache,
    tenant: *const u8,
    tenant_len: usize,
) -> slidelimit_result {
    boundary(MessageOut::NONE, || {
        let cache = reference("cache", cache)?;
        let tenant = tenant_input(tenant, tenant_len)?;
        cache.lock().forget(tenant);
        Ok(())
    })
}

/// Every deny cache in this copy of the library drops `tenant`'s entry,
/// without a cache at hand: `slidelimit_deny_cache_forget` does it for the
/// caches beside its own. Only a binding that runs several copies (several
/// wasm instances, each with its own memory) calls it, in the others.
#[no_mangle]
pub unsafe extern "C" fn slidelimit_deny_caches_forget_tenant(
    tenant: *const u8,
    tenant_len: usize,
) -> slidelimit_result {
    boundary(MessageOut::NONE, || {
        slidelimit_core::forget_tenant(tenant_input(tenant, tenant_len)?);
        Ok(())
    })
}

/// Drops every entry.
#[no_mangle]
pub unsafe extern "C" fn slidelimit_deny_cache_clear(
    cache: *const slidelimit_deny_cache,
) -> slidelimit_result {
    boundary(MessageOut::NONE, || {
        reference("cache", cache)?.lock().clear();
        Ok(())
    })
}

/// Writes how many tenants the cache holds into `*out_len`.
#[no_mangle]
pub unsafe extern "C" fn slidelimit_deny_cache_len(
    cache: *const slidelimit_deny_cache,
    out_len: *mut usize,
) -> slidelimit_result {
    boundary(MessageOut::NONE, || {
        let cache = reference("cache", cache)?;
        *out("out_len", out_len)? = cache.lock().len();
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ptr::{null, null_mut};

    #[test]
    fn a_recorded_denial_answers_within_its_retry() {
        let mut cache: *mut slidelimit_deny_cache = null_mut();
        let mut d = slidelimit_decision {
            allowed: true,
            remaining: 0,
            retry_after_ms: 0,
            reset_after_ms: 0,
            now_ms: 0,
            denied_by: -1,
        };
        let mut hit = true;
        unsafe {
            let none = (null_mut(), 0, null_mut(), null_mut());
            assert_eq!(
                slidelimit_deny_cache_new(0, &mut cache, none.0, none.1, none.2, none.3),
                slidelimit_result::Ok
            );
            let t = b"t-1";
            assert_eq!(
                slidelimit_deny_cache_check(cache, t.as_ptr(), 3, 1, 0, &mut hit, &mut d),
                slidelimit_result::Ok
            );
            assert!(!hit);
            slidelimit_deny_cache_record(cache, t.as_ptr(), 3, 2, false, 0, 500, 900, 10, 1, 100);
            slidelimit_deny_cache_check(cache, t.as_ptr(), 3, 2, 300, &mut hit, &mut d);
            assert!(hit);
            assert_eq!(
                (d.allowed, d.retry_after_ms, d.reset_after_ms, d.denied_by),
                (false, 300, 700, 1)
            );
            slidelimit_deny_cache_check(cache, t.as_ptr(), 3, 1, 300, &mut hit, &mut d);
            assert!(!hit, "a lower cost asks Redis");
            let mut len = 0;
            slidelimit_deny_cache_len(cache, &mut len);
            assert_eq!(len, 1);
            slidelimit_deny_cache_forget(cache, t.as_ptr(), 3);
            slidelimit_deny_cache_len(cache, &mut len);
            assert_eq!(len, 0);
            assert_eq!(
                slidelimit_deny_cache_check(null(), t.as_ptr(), 3, 1, 0, &mut hit, &mut d),
                slidelimit_result::NullPointer
            );
            slidelimit_deny_cache_free(cache);
        }
    }
}
