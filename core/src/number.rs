//! Numbers from runtimes whose only number is a double (JavaScript, wasm).

use crate::error::{Error, Result};

/// 2^53: above it a double no longer holds every integer. The bound of every
/// number a binding takes from a double and of every script reply field
/// (`Decision::from_reply`, the memory engine's hints).
pub(crate) const MAX_EXACT: u64 = 1 << 53;
const MAX_SAFE: f64 = MAX_EXACT as f64;

/// Converts a double to an integer field, rejecting NaN, infinities,
/// negatives, fractions and values above 2^53 with `invalid_argument` naming
/// the field: a silent cast would wrap, truncate or saturate instead.
pub fn u64_from_f64(field: &'static str, v: f64) -> Result<u64> {
    if !v.is_finite() {
        return Err(Error::invalid(
            field,
            format!("must be a finite integer, got {v}"),
        ));
    }
    if v < 0.0 {
        return Err(Error::invalid(
            field,
            format!("must not be negative, got {v}"),
        ));
    }
    if v.fract() != 0.0 {
        return Err(Error::invalid(
            field,
            format!("must be an integer, got {v}"),
        ));
    }
    if v > MAX_SAFE {
        return Err(Error::invalid(field, "must be at most 2^53"));
    }
    // Exact: a non-negative integer no larger than 2^53.
    Ok(v as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_exact_non_negative_integers_pass() {
        assert_eq!(u64_from_f64("cost", 0.0).unwrap(), 0);
        assert_eq!(u64_from_f64("cost", 3.0).unwrap(), 3);
        assert_eq!(u64_from_f64("cost", MAX_SAFE).unwrap(), 1 << 53);
        for bad in [
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            -1.0,
            -0.5,
            1.5,
            MAX_SAFE * 2.0,
        ] {
            let e = u64_from_f64("cost", bad).unwrap_err();
            assert_eq!(e.field(), Some("cost"), "{bad}");
        }
    }
}
