//! The metric table of core (`slidelimit_core::METRIC_*`, `LABEL_*`,
//! `WAIT_BUCKETS`): names, help texts, label names and buckets, so that a
//! binding over the C ABI registers exactly what every other binding does in
//! its own metrics library. Everything handed out is static memory.

use crate::boundary::{boundary, bytes_out, invalid, out, Failure, MessageOut, Outcome};
use crate::result::{slidelimit_field, slidelimit_result};
use slidelimit_core as core;
use std::panic::catch_unwind;

/// Values of the `metric` parameters (passed as `uint32_t`, so that an
/// out-of-range value from C is an error instead of undefined behaviour).
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum slidelimit_metric {
    /// Counter of acquires that were allowed (`ratelimit_allowed_total`).
    AllowedTotal = 1,
    /// Counter of acquires that were denied (`ratelimit_denied_total`).
    DeniedTotal = 2,
    /// Histogram of the retry-after handed to denied callers, in seconds
    /// (`ratelimit_wait_seconds`).
    WaitSeconds = 3,
    /// Counter of denials the local deny cache answered without a Redis call
    /// (`ratelimit_local_denied_total`).
    LocalDeniedTotal = 4,
}

/// One row of core's table.
struct Metric {
    name: &'static str,
    help: &'static str,
    labels: &'static [&'static str],
    labels_with_tenant: &'static [&'static str],
    buckets: &'static [f64],
}

fn metric(value: u32) -> Result<Metric, Failure> {
    let row = match value {
        v if v == slidelimit_metric::AllowedTotal as u32 => Metric {
            name: core::METRIC_ALLOWED_TOTAL,
            help: core::METRIC_ALLOWED_TOTAL_HELP,
            labels: &core::COUNTER_LABELS,
            labels_with_tenant: &core::COUNTER_LABELS_WITH_TENANT,
            buckets: &[],
        },
        v if v == slidelimit_metric::DeniedTotal as u32 => Metric {
            name: core::METRIC_DENIED_TOTAL,
            help: core::METRIC_DENIED_TOTAL_HELP,
            labels: &core::COUNTER_LABELS,
            labels_with_tenant: &core::COUNTER_LABELS_WITH_TENANT,
            buckets: &[],
        },
        v if v == slidelimit_metric::LocalDeniedTotal as u32 => Metric {
            name: core::METRIC_LOCAL_DENIED_TOTAL,
            help: core::METRIC_LOCAL_DENIED_TOTAL_HELP,
            labels: &core::COUNTER_LABELS,
            labels_with_tenant: &core::COUNTER_LABELS_WITH_TENANT,
            buckets: &[],
        },
        // The histogram never carries the tenant label.
        v if v == slidelimit_metric::WaitSeconds as u32 => Metric {
            name: core::METRIC_WAIT_SECONDS,
            help: core::METRIC_WAIT_SECONDS_HELP,
            labels: &core::WAIT_LABELS,
            labels_with_tenant: &core::WAIT_LABELS,
            buckets: &core::WAIT_BUCKETS,
        },
        other => {
            return Err(invalid(
                "metric",
                format!(
                    "unknown value {other} (1 = allowed_total, 2 = denied_total, 3 = wait_seconds, 4 = local_denied_total)"
                ),
            ))
        }
    };
    Ok(row)
}

impl Metric {
    fn labels(&self, with_tenant: bool) -> &'static [&'static str] {
        if with_tenant {
            self.labels_with_tenant
        } else {
            self.labels
        }
    }
}

/// The metric's name (`ratelimit_allowed_total`, ...). Static memory, not
/// NUL-terminated: never free it.
#[no_mangle]
pub unsafe extern "C" fn slidelimit_metric_name(
    metric_id: u32,
    out_ptr: *mut *const u8,
    out_len: *mut usize,
) -> slidelimit_result {
    boundary(MessageOut::NONE, || {
        bytes_out(metric(metric_id)?.name.as_bytes(), out_ptr, out_len)
    })
}

/// The metric's help text, the same in every binding. Static memory, not
/// NUL-terminated: never free it.
#[no_mangle]
pub unsafe extern "C" fn slidelimit_metric_help(
    metric_id: u32,
    out_ptr: *mut *const u8,
    out_len: *mut usize,
) -> slidelimit_result {
    boundary(MessageOut::NONE, || {
        bytes_out(metric(metric_id)?.help.as_bytes(), out_ptr, out_len)
    })
}

/// How many label names the metric has: `with_tenant` asks for the labels
/// when the caller switched the tenant label on (only the counters take it).
#[no_mangle]
pub unsafe extern "C" fn slidelimit_metric_label_count(
    metric_id: u32,
    with_tenant: bool,
    out_count: *mut usize,
) -> slidelimit_result {
    boundary(MessageOut::NONE, || {
        let out_count = out("out_count", out_count)?;
        *out_count = metric(metric_id)?.labels(with_tenant).len();
        Ok(())
    })
}

/// The label name at `index` (0 ..< `slidelimit_metric_label_count`), in the
/// order the label values are given. Static memory, not NUL-terminated: never
/// free it. An index past the end is `INVALID_ARGUMENT` naming `index`.
#[no_mangle]
pub unsafe extern "C" fn slidelimit_metric_label(
    metric_id: u32,
    with_tenant: bool,
    index: usize,
    out_ptr: *mut *const u8,
    out_len: *mut usize,
    msg: *mut u8,
    msg_cap: usize,
    msg_len: *mut usize,
    field: *mut slidelimit_field,
) -> slidelimit_result {
    boundary(
        MessageOut::new(msg, msg_cap, msg_len, field),
        || -> Outcome {
            let labels = metric(metric_id)?.labels(with_tenant);
            let label = labels.get(index).ok_or_else(|| {
                invalid(
                    "index",
                    format!("the metric has {} labels, got index {index}", labels.len()),
                )
            })?;
            bytes_out(label.as_bytes(), out_ptr, out_len)
        },
    )
}

/// The histogram's bucket upper bounds, ascending, in the metric's unit
/// (seconds); a counter has none (`*out_len` is 0). Static memory: never
/// free it.
#[no_mangle]
pub unsafe extern "C" fn slidelimit_metric_buckets(
    metric_id: u32,
    out_ptr: *mut *const f64,
    out_len: *mut usize,
) -> slidelimit_result {
    boundary(MessageOut::NONE, || {
        let out_ptr = out("out_ptr", out_ptr)?;
        let out_len = out("out_len", out_len)?;
        let buckets = metric(metric_id)?.buckets;
        *out_ptr = buckets.as_ptr();
        *out_len = buckets.len();
        Ok(())
    })
}

/// The value a denied decision with this `retry_after_ms` adds to
/// `ratelimit_wait_seconds` (core's `wait_seconds`).
#[no_mangle]
pub extern "C" fn slidelimit_metric_wait_seconds(retry_after_ms: u64) -> f64 {
    catch_unwind(|| core::wait_seconds(retry_after_ms)).unwrap_or(f64::NAN)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ptr::{null, null_mut};

    unsafe fn text(
        f: unsafe extern "C" fn(u32, *mut *const u8, *mut usize) -> slidelimit_result,
        id: u32,
    ) -> String {
        let (mut p, mut n) = (null(), 0usize);
        assert_eq!(f(id, &mut p, &mut n), slidelimit_result::Ok);
        String::from_utf8(std::slice::from_raw_parts(p, n).to_vec()).unwrap()
    }

    #[test]
    fn every_metric_is_cores_row() {
        unsafe {
            assert_eq!(text(slidelimit_metric_name, 1), core::METRIC_ALLOWED_TOTAL);
            assert_eq!(
                text(slidelimit_metric_help, 2),
                core::METRIC_DENIED_TOTAL_HELP
            );
            assert_eq!(
                text(slidelimit_metric_help, 3),
                core::METRIC_WAIT_SECONDS_HELP
            );
            assert_eq!(
                text(slidelimit_metric_name, 4),
                core::METRIC_LOCAL_DENIED_TOTAL
            );
            let (mut b, mut n) = (null(), 0usize);
            assert_eq!(
                slidelimit_metric_buckets(3, &mut b, &mut n),
                slidelimit_result::Ok
            );
            assert_eq!(std::slice::from_raw_parts(b, n), core::WAIT_BUCKETS);
            assert_eq!(
                slidelimit_metric_buckets(1, &mut b, &mut n),
                slidelimit_result::Ok
            );
            assert_eq!(n, 0);
        }
    }

    #[test]
    fn labels_follow_the_tenant_switch_on_counters_only() {
        let count = |id, t| {
            let mut n = 99usize;
            assert_eq!(
                unsafe { slidelimit_metric_label_count(id, t, &mut n) },
                slidelimit_result::Ok
            );
            n
        };
        assert_eq!((count(1, false), count(1, true), count(3, true)), (1, 2, 1));
        let (mut p, mut n) = (null(), 0usize);
        let r = unsafe {
            slidelimit_metric_label(
                2,
                true,
                1,
                &mut p,
                &mut n,
                null_mut(),
                0,
                null_mut(),
                null_mut(),
            )
        };
        assert_eq!(r, slidelimit_result::Ok);
        assert_eq!(
            unsafe { std::slice::from_raw_parts(p, n) },
            core::LABEL_TENANT.as_bytes()
        );
    }

    #[test]
    fn bad_ids_and_indexes_are_errors_that_name_them() {
        let (mut p, mut n) = (null(), 0usize);
        assert_eq!(
            unsafe { slidelimit_metric_name(0, &mut p, &mut n) },
            slidelimit_result::InvalidArgument
        );
        assert_eq!(
            unsafe { slidelimit_metric_help(5, &mut p, &mut n) },
            slidelimit_result::InvalidArgument
        );
        assert_eq!(
            unsafe { slidelimit_metric_name(1, null_mut(), &mut n) },
            slidelimit_result::NullPointer
        );
        let mut msg = [0u8; 128];
        let mut len = 0usize;
        let mut field = slidelimit_field::NONE;
        let r = unsafe {
            slidelimit_metric_label(
                3,
                true,
                1,
                &mut p,
                &mut n,
                msg.as_mut_ptr(),
                msg.len(),
                &mut len,
                &mut field,
            )
        };
        assert_eq!(r, slidelimit_result::InvalidArgument);
        assert_eq!(field.name(), Some("index"));
        assert!(
            msg[..len].starts_with(b"index:"),
            "{:?}",
            String::from_utf8_lossy(&msg[..len])
        );
        assert_eq!(slidelimit_metric_wait_seconds(1500), 1.5);
    }
}
