//! The one rule for a binding's per-call timeout, so that every binding
//! accepts and refuses the same values.
//!
//! A check always has a deadline: an unreachable or slow Redis must become
//! `unavailable` in bounded time, never a call that hangs. So 0 is refused
//! everywhere (it used to mean "fail at once" in one binding, "no timeout" in
//! another and "invalid" in a third). The upper bound is the largest delay a
//! JavaScript timer holds, 2^31 - 1 ms (24.8 days): above it Node fires the
//! timer after 1 ms instead, so every call would time out. No rate-limit check
//! needs a longer deadline, and one bound for all bindings keeps a setting
//! portable.

use crate::error::{Error, Result};

/// The smallest timeout in milliseconds.
pub const MIN_TIMEOUT_MS: u64 = 1;
/// The largest timeout in milliseconds: 2^31 - 1 (about 24.8 days).
pub const MAX_TIMEOUT_MS: u64 = (1 << 31) - 1;
/// The timeout a binding uses when the caller sets none: 1 s, far above a
/// check's loopback or LAN round trip, short enough to fail fast.
pub const DEFAULT_TIMEOUT_MS: u64 = 1000;

/// Checks a per-call timeout in milliseconds: `MIN_TIMEOUT_MS..=MAX_TIMEOUT_MS`,
/// else `invalid_argument` naming `timeout_ms`. Returns the value unchanged.
pub fn check_timeout_ms(ms: u64) -> Result<u64> {
    if ms < MIN_TIMEOUT_MS {
        return Err(Error::invalid(
            "timeout_ms",
            "must be at least 1 ms; a check without a deadline is not supported",
        ));
    }
    if ms > MAX_TIMEOUT_MS {
        return Err(Error::invalid(
            "timeout_ms",
            format!("must be at most {MAX_TIMEOUT_MS} ms (2^31 - 1, about 24.8 days), got {ms}"),
        ));
    }
    Ok(ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorCode;

    #[test]
    fn zero_and_too_large_are_invalid_naming_the_field() {
        for bad in [0, MAX_TIMEOUT_MS + 1, u64::MAX] {
            let e = check_timeout_ms(bad).unwrap_err();
            assert_eq!(e.code(), ErrorCode::InvalidArgument, "{bad}");
            assert_eq!(e.field(), Some("timeout_ms"), "{bad}");
            assert!(e.message().starts_with("timeout_ms: "), "{}", e.message());
        }
        assert!(check_timeout_ms(0)
            .unwrap_err()
            .message()
            .contains("at least 1 ms"));
    }

    #[test]
    fn the_range_passes_unchanged() {
        for ok in [1, 1000, MAX_TIMEOUT_MS] {
            assert_eq!(check_timeout_ms(ok).unwrap(), ok);
        }
    }
}
