//! The reply every script returns, and the decision parsed from it.

use crate::error::{Error, ErrorCode, Result};

/// What a check answered. Times are milliseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub struct Decision {
    pub allowed: bool,
    /// Permits of cost 1 that would still pass at `now_ms`.
    pub remaining: u64,
    /// 0 when allowed; otherwise how long until a retry of the same cost passes
    /// (assuming no other traffic).
    pub retry_after_ms: u64,
    /// How long until the key holds nothing that still counts.
    pub reset_after_ms: u64,
    /// The time the decision was made at (Redis `TIME` or the caller's).
    pub now_ms: u64,
}

/// Length of every script reply: allowed, remaining, retry_after_ms, reset_after_ms, now_ms.
pub const REPLY_LEN: usize = 5;

/// 2^53: the largest magnitude up to which a double holds every integer.
const MAX_SAFE: f64 = 9_007_199_254_740_992.0;

fn malformed(why: impl std::fmt::Display) -> Error {
    Error::new(
        ErrorCode::MalformedReply,
        format!("script reply {why}; expected [allowed, remaining, retry_after_ms, reset_after_ms, now_ms]"),
    )
}

impl Decision {
    /// Parses a script reply given as plain integers. Anything that is not a
    /// consistent five-integer reply is `malformed_reply`, never a panic.
    pub fn from_reply(reply: &[i64]) -> Result<Decision> {
        let [allowed, remaining, retry, reset, now] = match reply {
            [a, b, c, d, e] => [*a, *b, *c, *d, *e],
            _ => return Err(malformed(format!("has {} elements", reply.len()))),
        };
        let allowed = match allowed {
            0 => false,
            1 => true,
            other => return Err(malformed(format!("has allowed = {other}"))),
        };
        let non_negative = |name: &str, v: i64| -> Result<u64> {
            u64::try_from(v).map_err(|_| malformed(format!("has {name} = {v}")))
        };
        let d = Decision {
            allowed,
            remaining: non_negative("remaining", remaining)?,
            retry_after_ms: non_negative("retry_after_ms", retry)?,
            reset_after_ms: non_negative("reset_after_ms", reset)?,
            now_ms: non_negative("now_ms", now)?,
        };
        if d.allowed && d.retry_after_ms != 0 {
            return Err(malformed("allows with a retry_after_ms above 0"));
        }
        if !d.allowed && d.retry_after_ms == 0 {
            return Err(malformed("denies with retry_after_ms = 0"));
        }
        Ok(d)
    }

    /// Parses a script reply whose integers arrive as doubles (JavaScript
    /// numbers, through the napi addon or the wasm build; an element that was
    /// no number at all arrives as NaN). An element that is not an exact
    /// integer of at most 2^53 is `malformed_reply`, as is anything
    /// [`Decision::from_reply`] refuses.
    pub fn from_f64_reply(reply: &[f64]) -> Result<Decision> {
        let mut ints = [0i64; REPLY_LEN];
        for (i, &v) in reply.iter().enumerate() {
            if !(v.is_finite() && v.fract() == 0.0 && v.abs() <= MAX_SAFE) {
                return Err(Error::new(
                    ErrorCode::MalformedReply,
                    format!("script reply element {i} is not an integer"),
                ));
            }
            if let Some(slot) = ints.get_mut(i) {
                // Exact: an integer no larger than 2^53 in magnitude.
                *slot = v as i64;
            }
        }
        if reply.len() != REPLY_LEN {
            return Err(malformed(format!("has {} elements", reply.len())));
        }
        Decision::from_reply(&ints)
    }

    /// [`Decision::to_reply`] as doubles (allowed as 0 or 1), for carriers
    /// whose only number is a double: exact, every field is below 2^53.
    pub fn to_f64_reply(&self) -> [f64; REPLY_LEN] {
        self.to_reply().map(|n| n as f64)
    }

    /// The reply a script would send for this decision (the memory engine's
    /// output, and the inverse of [`Decision::from_reply`]).
    pub fn to_reply(&self) -> [i64; REPLY_LEN] {
        // Every field is bounded by 2^53 by construction, so the casts are exact.
        [
            i64::from(self.allowed),
            self.remaining as i64,
            self.retry_after_ms as i64,
            self.reset_after_ms as i64,
            self.now_ms as i64,
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_allowed_and_denied() {
        let d = Decision::from_reply(&[1, 2, 0, 1000, 5000]).unwrap();
        assert!(d.allowed);
        assert_eq!((d.remaining, d.reset_after_ms, d.now_ms), (2, 1000, 5000));
        assert_eq!(d.to_reply(), [1, 2, 0, 1000, 5000]);
        let d = Decision::from_reply(&[0, 0, 250, 900, 5000]).unwrap();
        assert!(!d.allowed);
        assert_eq!(d.retry_after_ms, 250);
    }

    #[test]
    fn rejects_malformed_replies() {
        for bad in [
            &[][..],
            &[1, 2, 0, 1000][..],
            &[1, 2, 0, 1000, 5, 6][..],
            &[2, 0, 0, 0, 0][..],
            &[1, -1, 0, 0, 0][..],
            &[1, 0, 5, 0, 0][..],
            &[0, 0, 0, 0, 0][..],
            &[0, 0, 1, i64::MIN, 0][..],
        ] {
            let e = Decision::from_reply(bad).unwrap_err();
            assert_eq!(e.code(), ErrorCode::MalformedReply, "{bad:?}");
            let doubles: Vec<f64> = bad.iter().map(|&n| n as f64).collect();
            let e = Decision::from_f64_reply(&doubles).unwrap_err();
            assert_eq!(e.code(), ErrorCode::MalformedReply, "{bad:?}");
        }
    }

    #[test]
    fn doubles_parse_like_integers() {
        let reply = [0.0, 3.0, 250.0, 900.0, 9_007_199_254_740_992.0];
        let d = Decision::from_f64_reply(&reply).unwrap();
        assert_eq!(d, Decision::from_reply(&reply.map(|n| n as i64)).unwrap());
        assert_eq!(d.to_f64_reply(), reply);
        for (bad, element) in [
            ([1.0, 2.0, 0.0, f64::NAN, 5.0], 3),
            ([1.5, 2.0, 0.0, 1.0, 5.0], 0),
            ([1.0, f64::INFINITY, 0.0, 1.0, 5.0], 1),
            ([1.0, 2.0, 0.0, 1.0, 2.0 * 9_007_199_254_740_992.0], 4),
        ] {
            let e = Decision::from_f64_reply(&bad).unwrap_err();
            assert_eq!(e.code(), ErrorCode::MalformedReply);
            assert_eq!(
                e.message(),
                format!("script reply element {element} is not an integer")
            );
        }
        // Elements are checked before the length, as a carrier hands them over.
        let e = Decision::from_f64_reply(&[f64::NAN]).unwrap_err();
        assert!(e.message().contains("element 0"), "{e}");
    }
}
