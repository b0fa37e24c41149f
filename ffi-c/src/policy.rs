//! Policies: algorithm names, validation, keys and slots, and the per-call
//! timeout rule every binding shares.

use crate::boundary::{
    boundary, input, input_str, invalid, out, reference, tenant_input, too_small, MessageOut,
};
use crate::result::{slidelimit_field, slidelimit_result};
use slidelimit_core::{slot, Algorithm, Limit, Policy};

/// Values of the `algorithm` parameters (passed as `uint32_t`, so that an
/// out-of-range value from C is an error instead of undefined behaviour).
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum slidelimit_algorithm {
    /// Exact: one entry per admitted permit (key tag `log`).
    SlidingLog = 1,
    /// Approximate, O(1) memory (key tag `counter`).
    SlidingCounter = 2,
    /// Exact, O(buckets) memory (key tag `bucketed`).
    BucketedWindow = 3,
}

/// A validated policy. Made by `slidelimit_policy_new`, released by
/// `slidelimit_policy_free`. Immutable: safe to share between threads.
pub struct slidelimit_policy {
    pub(crate) inner: Policy,
}

/// A buffer of this many bytes always holds any key `slidelimit_policy_key`
/// can produce (64-byte names, a 512-byte tenant escaped to at most 1536).
pub const SLIDELIMIT_KEY_MAX: usize = 2048;

pub(crate) fn parse_algorithm(value: u32) -> Result<Algorithm, slidelimit_core::Error> {
    match value {
        v if v == slidelimit_algorithm::SlidingLog as u32 => Ok(Algorithm::SlidingLog),
        v if v == slidelimit_algorithm::SlidingCounter as u32 => Ok(Algorithm::SlidingCounter),
        v if v == slidelimit_algorithm::BucketedWindow as u32 => Ok(Algorithm::BucketedWindow),
        other => Err(slidelimit_core::Error::invalid(
            "algorithm",
            format!(
                "unknown value {other} (1 = sliding_log, 2 = sliding_counter, 3 = bucketed_window)"
            ),
        )),
    }
}

/// Parses an algorithm name (`"sliding_log"`, `"sliding_counter"`,
/// `"bucketed_window"`) into its `slidelimit_algorithm` value.
#[no_mangle]
pub unsafe extern "C" fn slidelimit_algorithm_parse(
    name: *const u8,
    name_len: usize,
    out_algorithm: *mut u32,
    msg: *mut u8,
    msg_cap: usize,
    msg_len: *mut usize,
    field: *mut slidelimit_field,
) -> slidelimit_result {
    boundary(MessageOut::new(msg, msg_cap, msg_len, field), || {
        let out_algorithm = out("out_algorithm", out_algorithm)?;
        let name = input_str("algorithm", name, name_len)?;
        *out_algorithm = algorithm_value(Algorithm::parse(name)?) as u32;
        Ok(())
    })
}

/// Validates a policy and returns it in `*out_policy` (release it with
/// `slidelimit_policy_free`). `ns` (the namespace) and `resource` are UTF-8 bytes;
/// `algorithm` is a `slidelimit_algorithm` value. `buckets` points to the
/// bucket count of a bucketed window, or is NULL for none given: core's
/// default (60) for the bucketed window, nothing for the other algorithms.
/// Any count given goes to core as it is, so `&0` is `invalid_argument` on
/// `buckets`, and so is a count for another algorithm. On failure the message
/// names the field at fault.
#[no_mangle]
pub unsafe extern "C" fn slidelimit_policy_new(
    ns: *const u8,
    ns_len: usize,
    resource: *const u8,
    resource_len: usize,
    algorithm: u32,
    limit: u64,
    window_ms: u64,
    buckets: *const u64,
    out_policy: *mut *mut slidelimit_policy,
    msg: *mut u8,
    msg_cap: usize,
    msg_len: *mut usize,
    field: *mut slidelimit_field,
) -> slidelimit_result {
    boundary(MessageOut::new(msg, msg_cap, msg_len, field), || {
        let out_policy = out("out_policy", out_policy)?;
        let namespace = input_str("namespace", ns, ns_len)?;
        let resource = input_str("resource", resource, resource_len)?;
        let algorithm = parse_algorithm(algorithm)?;
        // NULL is "not given"; a pointer always carries a count, even 0, so
        // that core (not this layer) decides what 0 means.
        let buckets = buckets.as_ref().copied();
        let inner =
            Policy::with_buckets(namespace, resource, algorithm, limit, window_ms, buckets)?;
        *out_policy = Box::into_raw(Box::new(slidelimit_policy { inner }));
        Ok(())
    })
}

/// Validates a policy of `count` limits (1 ..= `SLIDELIMIT_MAX_LIMITS`; a
/// check passes only if every limit allows it, and records in all or none)
/// and returns it in `*out_policy` (release it with `slidelimit_policy_free`).
/// Limit `i` is `algorithms[i]` (a `slidelimit_algorithm` value),
/// `limits[i]` permits per `windows_ms[i]`; its bucket count is `buckets[i]`
/// when `buckets_given` is not NULL and `buckets_given[i]` is true, else
/// none given (core's default for a bucketed window). `buckets` and
/// `buckets_given` are both NULL or both not. With one limit this is
/// `slidelimit_policy_new`; with several, the message names the limit at
/// fault (`limits[1].window_ms`).
#[no_mangle]
#[allow(clippy::too_many_arguments)] // The C signature.
pub unsafe extern "C" fn slidelimit_policy_new_limits(
    ns: *const u8,
    ns_len: usize,
    resource: *const u8,
    resource_len: usize,
    algorithms: *const u32,
    limits: *const u64,
    windows_ms: *const u64,
    buckets: *const u64,
    buckets_given: *const bool,
    count: usize,
    out_policy: *mut *mut slidelimit_policy,
    msg: *mut u8,
    msg_cap: usize,
    msg_len: *mut usize,
    field: *mut slidelimit_field,
) -> slidelimit_result {
    boundary(MessageOut::new(msg, msg_cap, msg_len, field), || {
        let out_policy = out("out_policy", out_policy)?;
        let namespace = input_str("namespace", ns, ns_len)?;
        let resource = input_str("resource", resource, resource_len)?;
        if count > slidelimit_core::MAX_LIMITS {
            // Core's error, without reading past what the caller may hold.
            let too_many = vec![Limit::new(Algorithm::SlidingLog, 1, 1); count.min(64)];
            Policy::with_limits(namespace, resource, &too_many)?;
        }
        let algorithms = input("algorithms", algorithms, count)?;
        let limit_values = input("limits", limits, count)?;
        let windows = input("windows_ms", windows_ms, count)?;
        let (buckets, given) = match (buckets.is_null(), buckets_given.is_null()) {
            (true, true) => (None, None),
            (false, false) => (
                Some(input("buckets", buckets, count)?),
                Some(input("buckets_given", buckets_given, count)?),
            ),
            _ => {
                return Err(invalid(
                    "buckets_given",
                    "buckets and buckets_given must both be NULL or both be given",
                ))
            }
        };
        let mut specs = Vec::with_capacity(count);
        for i in 0..count {
            let algorithm = parse_algorithm(algorithms[i]).map_err(|e| e.for_limit(i, count))?;
            let bucket_count = match (buckets, given) {
                (Some(b), Some(g)) if g[i] => Some(b[i]),
                _ => None,
            };
            specs.push(Limit {
                algorithm,
                limit: limit_values[i],
                window_ms: windows[i],
                buckets: bucket_count,
            });
        }
        let inner = Policy::with_limits(namespace, resource, &specs)?;
        *out_policy = Box::into_raw(Box::new(slidelimit_policy { inner }));
        Ok(())
    })
}

/// Writes how many limits the policy holds into `*out_count` (1 for a
/// policy from `slidelimit_policy_new`).
#[no_mangle]
pub unsafe extern "C" fn slidelimit_policy_limit_count(
    policy: *const slidelimit_policy,
    out_count: *mut usize,
) -> slidelimit_result {
    boundary(MessageOut::NONE, || {
        let policy = reference("policy", policy)?;
        *out("out_count", out_count)? = policy.inner.limits().len();
        Ok(())
    })
}

/// Writes limit `index` of the policy (from 0, in the order given): its
/// `slidelimit_algorithm` value, limit, window and effective bucket count
/// (0 for an algorithm without buckets). An index past the last limit is
/// `invalid_argument` on `index`.
#[no_mangle]
pub unsafe extern "C" fn slidelimit_policy_limit(
    policy: *const slidelimit_policy,
    index: usize,
    out_algorithm: *mut u32,
    out_limit: *mut u64,
    out_window_ms: *mut u64,
    out_buckets: *mut u64,
) -> slidelimit_result {
    boundary(MessageOut::NONE, || {
        let policy = reference("policy", policy)?;
        let out_algorithm = out("out_algorithm", out_algorithm)?;
        let out_limit = out("out_limit", out_limit)?;
        let out_window_ms = out("out_window_ms", out_window_ms)?;
        let out_buckets = out("out_buckets", out_buckets)?;
        let limits = policy.inner.limits();
        let Some(l) = limits.get(index) else {
            return Err(invalid(
                "index",
                format!("{index} is past the last of {} limits", limits.len()),
            ));
        };
        *out_algorithm = algorithm_value(l.algorithm) as u32;
        *out_limit = l.limit;
        *out_window_ms = l.window_ms;
        *out_buckets = l.buckets.unwrap_or(0);
        Ok(())
    })
}

/// The `slidelimit_algorithm` value of an algorithm.
pub(crate) fn algorithm_value(algorithm: Algorithm) -> slidelimit_algorithm {
    match algorithm {
        Algorithm::SlidingLog => slidelimit_algorithm::SlidingLog,
        Algorithm::SlidingCounter => slidelimit_algorithm::SlidingCounter,
        Algorithm::BucketedWindow => slidelimit_algorithm::BucketedWindow,
    }
}

/// Writes the Redis key of limit `index` of the policy for `tenant` into
/// `buf`, as `slidelimit_policy_key` writes the first limit's. `reset`
/// deletes every limit's key (they share one Cluster slot).
#[no_mangle]
#[allow(clippy::too_many_arguments)] // The C signature.
pub unsafe extern "C" fn slidelimit_policy_limit_key(
    policy: *const slidelimit_policy,
    index: usize,
    tenant: *const u8,
    tenant_len: usize,
    buf: *mut u8,
    buf_cap: usize,
    out_len: *mut usize,
    out_slot: *mut u16,
    msg: *mut u8,
    msg_cap: usize,
    msg_len: *mut usize,
    field: *mut slidelimit_field,
) -> slidelimit_result {
    boundary(MessageOut::new(msg, msg_cap, msg_len, field), || {
        let policy = reference("policy", policy)?;
        let out_len = out("out_len", out_len)?;
        let tenant = tenant_input(tenant, tenant_len)?;
        let count = policy.inner.limits().len();
        if index >= count {
            return Err(invalid(
                "index",
                format!("{index} is past the last of {count} limits"),
            ));
        }
        let key = policy.inner.keys(tenant)?.swap_remove(index);
        if key.len() > buf_cap {
            return Err(too_small("buf", "the key", key.len(), "bytes", buf_cap));
        }
        let buf = out("buf", buf)?;
        std::ptr::copy_nonoverlapping(key.as_ptr(), buf, key.len());
        *out_len = key.len();
        if !out_slot.is_null() {
            *out_slot = slot(&key);
        }
        Ok(())
    })
}

/// Writes the policy's effective bucket count into `*out_buckets`: the count
/// given, or core's default (60) when none was, for a bucketed window; 0 for
/// the other algorithms, which have no buckets (a bucketed window never has 0).
#[no_mangle]
pub unsafe extern "C" fn slidelimit_policy_buckets(
    policy: *const slidelimit_policy,
    out_buckets: *mut u64,
) -> slidelimit_result {
    boundary(MessageOut::NONE, || {
        let policy = reference("policy", policy)?;
        *out("out_buckets", out_buckets)? = policy.inner.buckets().unwrap_or(0);
        Ok(())
    })
}

/// Releases a policy from `slidelimit_policy_new`. NULL is ignored.
#[no_mangle]
pub unsafe extern "C" fn slidelimit_policy_free(policy: *mut slidelimit_policy) {
    crate::boundary::free_box(policy);
}

/// Writes the Redis key of `tenant` (UTF-8 bytes, 1..=512) under `policy`
/// into `buf` (not NUL-terminated) and its length into `*out_len`, and the
/// key's Cluster slot into `*out_slot` when that is not NULL. A buffer of
/// `SLIDELIMIT_KEY_MAX` bytes always suffices; a smaller one that cannot hold
/// the key gives `SLIDELIMIT_RESULT_BUFFER_TOO_SMALL` and writes nothing.
#[no_mangle]
pub unsafe extern "C" fn slidelimit_policy_key(
    policy: *const slidelimit_policy,
    tenant: *const u8,
    tenant_len: usize,
    buf: *mut u8,
    buf_cap: usize,
    out_len: *mut usize,
    out_slot: *mut u16,
    msg: *mut u8,
    msg_cap: usize,
    msg_len: *mut usize,
    field: *mut slidelimit_field,
) -> slidelimit_result {
    // The first limit's key (a one-limit policy's only one).
    slidelimit_policy_limit_key(
        policy, 0, tenant, tenant_len, buf, buf_cap, out_len, out_slot, msg, msg_cap, msg_len,
        field,
    )
}

/// The Redis Cluster slot of any key (UTF-8 bytes), by Redis's hash-tag rule.
#[no_mangle]
pub unsafe extern "C" fn slidelimit_key_slot(
    key: *const u8,
    key_len: usize,
    out_slot: *mut u16,
) -> slidelimit_result {
    boundary(MessageOut::NONE, || {
        let out_slot = out("out_slot", out_slot)?;
        let key = input_str("key", key, key_len)?;
        *out_slot = slot(key);
        Ok(())
    })
}

/// Checks a per-call timeout in milliseconds by the rule every binding shares
/// (core's `check_timeout_ms`): 1 ..= 2^31 - 1. 0 is `invalid_argument`: a
/// check always has a deadline. On failure the message names `timeout_ms`.
#[no_mangle]
pub unsafe extern "C" fn slidelimit_check_timeout_ms(
    timeout_ms: u64,
    msg: *mut u8,
    msg_cap: usize,
    msg_len: *mut usize,
    field: *mut slidelimit_field,
) -> slidelimit_result {
    boundary(MessageOut::new(msg, msg_cap, msg_len, field), || {
        slidelimit_core::check_timeout_ms(timeout_ms)?;
        Ok(())
    })
}

/// Checks `cost` against `policy` by core's rule: at least 1, and at most the
/// lowest limit (a larger cost could never pass). For a cost a job
/// integration is configured with, so that it is refused when set rather than
/// at every check. On failure the message names `cost`.
#[no_mangle]
pub unsafe extern "C" fn slidelimit_policy_check_cost(
    policy: *const slidelimit_policy,
    cost: u64,
    msg: *mut u8,
    msg_cap: usize,
    msg_len: *mut usize,
    field: *mut slidelimit_field,
) -> slidelimit_result {
    boundary(MessageOut::new(msg, msg_cap, msg_len, field), || {
        let policy = reference("policy", policy)?;
        policy.inner.check_cost(cost)?;
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ptr::null_mut;

    #[test]
    fn key_max_holds_the_largest_key() {
        let name = "n".repeat(64);
        // The bucketed window's key is the longest: a longer tag and the count.
        let policy = Policy::with_buckets(
            &name,
            &name,
            Algorithm::BucketedWindow,
            1,
            1 << 52,
            Some(2048),
        )
        .unwrap();
        let worst = policy.key(&"%".repeat(512)).unwrap();
        assert!(
            worst.ends_with(":bucketed:4503599627370496:2048"),
            "{worst}"
        );
        assert!(worst.len() <= SLIDELIMIT_KEY_MAX, "{}", worst.len());
    }

    #[test]
    fn every_core_algorithm_has_a_value_that_round_trips() {
        for algorithm in Algorithm::ALL {
            let mut value = 0u32;
            let name = algorithm.as_str();
            let r = unsafe {
                slidelimit_algorithm_parse(
                    name.as_ptr(),
                    name.len(),
                    &mut value,
                    null_mut(),
                    0,
                    null_mut(),
                    null_mut(),
                )
            };
            assert_eq!(r, slidelimit_result::Ok, "{name}");
            assert!(
                matches!(parse_algorithm(value), Ok(a) if a == algorithm),
                "{name}"
            );
        }
        assert_eq!(slidelimit_algorithm::BucketedWindow as u32, 3);
        assert!(parse_algorithm(4).is_err());
    }

    /// `slidelimit_policy_new` with `buckets` (None: NULL): the policy's
    /// effective count by `slidelimit_policy_buckets`, or the field blamed.
    fn new_policy(
        algorithm: slidelimit_algorithm,
        window_ms: u64,
        buckets: Option<u64>,
    ) -> Result<u64, String> {
        let mut policy: *mut slidelimit_policy = null_mut();
        let mut field = slidelimit_field::NONE;
        let r = unsafe {
            slidelimit_policy_new(
                b"rl".as_ptr(),
                2,
                b"geo".as_ptr(),
                3,
                algorithm as u32,
                5,
                window_ms,
                buckets.as_ref().map_or(std::ptr::null(), |n| n),
                &mut policy,
                null_mut(),
                0,
                null_mut(),
                &mut field,
            )
        };
        if r != slidelimit_result::Ok {
            assert!(policy.is_null());
            return Err(field.name().unwrap_or("").to_owned());
        }
        let mut count = u64::MAX;
        let r = unsafe { slidelimit_policy_buckets(policy, &mut count) };
        assert_eq!(r, slidelimit_result::Ok);
        let boxed = unsafe { Box::from_raw(policy) };
        assert_eq!(boxed.inner.buckets().unwrap_or(0), count);
        Ok(count)
    }

    #[test]
    fn buckets_null_is_cores_default_and_a_pointer_is_passed_through() {
        use slidelimit_algorithm::{BucketedWindow, SlidingCounter, SlidingLog};
        let default = slidelimit_core::DEFAULT_BUCKETS;
        assert_eq!(new_policy(BucketedWindow, 60_000, None), Ok(default));
        assert_eq!(
            new_policy(BucketedWindow, 60_000, Some(default)),
            Ok(default)
        );
        assert_eq!(new_policy(BucketedWindow, 1000, Some(10)), Ok(10));
        // The other algorithms have no buckets: the getter says 0.
        assert_eq!(new_policy(SlidingLog, 1000, None), Ok(0));
        assert_eq!(new_policy(SlidingCounter, 1000, None), Ok(0));
        // &0 is a count of 0, which core refuses, never "not given".
        assert_eq!(
            new_policy(BucketedWindow, 60_000, Some(0)).unwrap_err(),
            "buckets"
        );
        // A count for another algorithm reaches core, which refuses it, 0 too.
        for alg in [SlidingLog, SlidingCounter] {
            for n in [0, 10] {
                assert_eq!(new_policy(alg, 1000, Some(n)).unwrap_err(), "buckets");
            }
        }
        // Core's bounds: the count must divide the window, up to MAX_BUCKETS;
        // the default must divide it too.
        let max = slidelimit_core::MAX_BUCKETS;
        for (window_ms, buckets) in [(1000, Some(3)), (7200, Some(max + 1)), (1000, None)] {
            assert_eq!(
                new_policy(BucketedWindow, window_ms, buckets).unwrap_err(),
                "buckets",
                "{window_ms} {buckets:?}"
            );
        }
        assert_eq!(new_policy(BucketedWindow, 7200, Some(max)), Ok(max));
    }

    #[test]
    fn the_buckets_getter_reports_null_pointers() {
        let p = slidelimit_policy {
            inner: Policy::new("rl", "geo", Algorithm::BucketedWindow, 3, 60_000).unwrap(),
        };
        let mut count = 7u64;
        let r = unsafe { slidelimit_policy_buckets(std::ptr::null(), &mut count) };
        assert_eq!((r, count), (slidelimit_result::NullPointer, 7));
        let r = unsafe { slidelimit_policy_buckets(&p, null_mut()) };
        assert_eq!(r, slidelimit_result::NullPointer);
    }

    #[test]
    fn out_params_are_untouched_on_failure() {
        let mut policy: *mut slidelimit_policy = null_mut();
        let mut buf = [0u8; 64];
        let mut len = 0usize;
        let mut field = slidelimit_field::NONE;
        let r = unsafe {
            slidelimit_policy_new(
                b"rl".as_ptr(),
                2,
                b"geo".as_ptr(),
                3,
                1,
                0,
                1000,
                std::ptr::null(),
                &mut policy,
                buf.as_mut_ptr(),
                buf.len(),
                &mut len,
                &mut field,
            )
        };
        assert_eq!(r, slidelimit_result::InvalidArgument);
        assert!(policy.is_null());
        assert!(std::str::from_utf8(&buf[..len])
            .unwrap()
            .starts_with("limit:"));
        assert_eq!(field.name(), Some("limit"));
    }

    #[test]
    fn a_key_buffer_too_small_says_what_it_needs() {
        let p = slidelimit_policy {
            inner: Policy::new("rl", "geocode", Algorithm::SlidingLog, 3, 1000).unwrap(),
        };
        let mut key = [b'x'; 8];
        let mut len = 77usize;
        let mut msg = [0u8; 128];
        let mut msg_len = 0usize;
        let r = unsafe {
            slidelimit_policy_key(
                &p,
                b"t".as_ptr(),
                1,
                key.as_mut_ptr(),
                key.len(),
                &mut len,
                null_mut(),
                msg.as_mut_ptr(),
                msg.len(),
                &mut msg_len,
                null_mut(),
            )
        };
        assert_eq!(r, slidelimit_result::BufferTooSmall);
        assert_eq!((len, key), (77, [b'x'; 8]));
        assert_eq!(
            std::str::from_utf8(&msg[..msg_len]).unwrap(),
            "buf: the key needs 23 bytes, buf_cap is 8"
        );
    }

    #[test]
    fn timeout_zero_is_invalid_naming_the_field() {
        let mut buf = [0u8; 128];
        let mut len = 0usize;
        let mut field = slidelimit_field::NONE;
        let r = unsafe {
            slidelimit_check_timeout_ms(0, buf.as_mut_ptr(), buf.len(), &mut len, &mut field)
        };
        assert_eq!(r, slidelimit_result::InvalidArgument);
        assert_eq!(field.name(), Some("timeout_ms"));
        assert!(std::str::from_utf8(&buf[..len])
            .unwrap()
            .starts_with("timeout_ms:"));
        let r = unsafe { slidelimit_check_timeout_ms(1000, null_mut(), 0, null_mut(), null_mut()) };
        assert_eq!(r, slidelimit_result::Ok);
        let r =
            unsafe { slidelimit_check_timeout_ms(1 << 31, null_mut(), 0, null_mut(), null_mut()) };
        assert_eq!(r, slidelimit_result::InvalidArgument);
    }

    #[test]
    fn cost_is_checked_against_the_policy() {
        let p = Policy::new("rl", "geo", Algorithm::SlidingLog, 3, 1000).unwrap();
        let policy = slidelimit_policy { inner: p };
        let mut buf = [0u8; 128];
        let mut len = 0usize;
        for (cost, says) in [
            (0, "cost: must be at least 1"),
            (4, "cost: 4 exceeds the limit 3"),
        ] {
            let mut field = slidelimit_field::NONE;
            let r = unsafe {
                slidelimit_policy_check_cost(
                    &policy,
                    cost,
                    buf.as_mut_ptr(),
                    buf.len(),
                    &mut len,
                    &mut field,
                )
            };
            assert_eq!(r, slidelimit_result::InvalidArgument);
            assert_eq!(field.name(), Some("cost"));
            assert!(std::str::from_utf8(&buf[..len]).unwrap().starts_with(says));
        }
        for cost in [1, 3] {
            let r = unsafe {
                slidelimit_policy_check_cost(&policy, cost, null_mut(), 0, null_mut(), null_mut())
            };
            assert_eq!(r, slidelimit_result::Ok);
        }
        let r = unsafe {
            slidelimit_policy_check_cost(std::ptr::null(), 1, null_mut(), 0, null_mut(), null_mut())
        };
        assert_eq!(r, slidelimit_result::NullPointer);
    }
}

#[cfg(test)]
mod limits_tests {
    use super::*;
    use crate::call::slidelimit_policy_script;
    use std::ptr::{null, null_mut};

    fn new_limits(
        algorithms: &[u32],
        limits: &[u64],
        windows: &[u64],
        buckets: Option<(&[u64], &[bool])>,
    ) -> (slidelimit_result, *mut slidelimit_policy, String, String) {
        let mut policy = null_mut();
        let mut msg = [0u8; 256];
        let mut len = 0;
        let mut field = slidelimit_field::NONE;
        let (b, g) = buckets.map_or((null(), null()), |(b, g)| (b.as_ptr(), g.as_ptr()));
        let r = unsafe {
            slidelimit_policy_new_limits(
                b"rl".as_ptr(),
                2,
                b"geo".as_ptr(),
                3,
                algorithms.as_ptr(),
                limits.as_ptr(),
                windows.as_ptr(),
                b,
                g,
                algorithms.len(),
                &mut policy,
                msg.as_mut_ptr(),
                msg.len(),
                &mut len,
                &mut field,
            )
        };
        let field = match field.name.is_null() {
            true => String::new(),
            false => unsafe {
                String::from_utf8_lossy(std::slice::from_raw_parts(field.name, field.len))
                    .into_owned()
            },
        };
        let msg = String::from_utf8_lossy(&msg[..len]).into_owned();
        (r, policy, field, msg)
    }

    #[test]
    fn several_limits_round_trip_and_name_their_fields() {
        let (r, p, _, _) = new_limits(
            &[1, 3],
            &[20, 600],
            &[1000, 60_000],
            Some((&[0, 30], &[false, true])),
        );
        assert_eq!(r, slidelimit_result::Ok);
        let mut count = 0;
        unsafe { slidelimit_policy_limit_count(p, &mut count) };
        assert_eq!(count, 2);
        let (mut a, mut l, mut w, mut b) = (0u32, 0u64, 0u64, 0u64);
        let r = unsafe { slidelimit_policy_limit(p, 1, &mut a, &mut l, &mut w, &mut b) };
        assert_eq!(r, slidelimit_result::Ok);
        assert_eq!((a, l, w, b), (3, 600, 60_000, 30));
        let r = unsafe { slidelimit_policy_limit(p, 2, &mut a, &mut l, &mut w, &mut b) };
        assert_eq!(r, slidelimit_result::InvalidArgument);
        let mut buf = [0u8; SLIDELIMIT_KEY_MAX];
        let (mut n, mut slot_out) = (0usize, 0u16);
        let r = unsafe {
            slidelimit_policy_limit_key(
                p,
                1,
                b"t".as_ptr(),
                1,
                buf.as_mut_ptr(),
                buf.len(),
                &mut n,
                &mut slot_out,
                null_mut(),
                0,
                null_mut(),
                null_mut(),
            )
        };
        assert_eq!(r, slidelimit_result::Ok);
        assert_eq!(&buf[..n], b"rl:{geo:t}:bucketed:60000:30");
        let (mut text, mut text_len, mut sha, mut sha_len) = (null(), 0, null(), 0);
        let r = unsafe {
            slidelimit_policy_script(p, 1, &mut text, &mut text_len, &mut sha, &mut sha_len)
        };
        assert_eq!(r, slidelimit_result::Ok);
        let sha = unsafe { std::slice::from_raw_parts(sha, sha_len) };
        assert_eq!(
            sha,
            slidelimit_core::Script::multi_limit(slidelimit_core::Mode::Acquire)
                .sha1()
                .as_bytes()
        );
        unsafe { slidelimit_policy_free(p) };

        let (r, _, field, msg) = new_limits(&[1, 1], &[20, 600], &[1000, 0], None);
        assert_eq!(r, slidelimit_result::InvalidArgument);
        assert_eq!(
            (field.as_str(), msg.as_str()),
            (
                "limits[1].window_ms",
                "limits[1].window_ms: must be at least 1"
            )
        );
        let (r, _, field, _) = new_limits(&[1, 9], &[20, 600], &[1000, 60_000], None);
        assert_eq!(
            (r, field.as_str()),
            (slidelimit_result::InvalidArgument, "limits[1].algorithm")
        );
        let (r, _, field, _) = new_limits(&[1; 9], &[1; 9], &[1; 9], None);
        assert_eq!(
            (r, field.as_str()),
            (slidelimit_result::InvalidArgument, "limits")
        );
        let (r, _, field, _) = new_limits(&[], &[], &[], None);
        assert_eq!(
            (r, field.as_str()),
            (slidelimit_result::InvalidArgument, "limits")
        );
    }
}
