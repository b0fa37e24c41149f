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
    /// For a denial by a policy of several limits: the position (from 0, in
    /// the policy's order) of the limit that denied with the longest retry,
    /// so a caller can tell "20 per second" from "600 per minute". `None`
    /// when allowed, and for a policy of one limit.
    #[cfg_attr(
        feature = "serde",
        serde(default, skip_serializing_if = "Option::is_none")
    )]
    pub denied_by: Option<u32>,
}

/// Length of a one-limit script reply: allowed, remaining, retry_after_ms,
/// reset_after_ms, now_ms.
pub const REPLY_LEN: usize = 5;
/// Length of a multi-limit script reply: the five, then `denied_by` as the
/// 1-based position of the denying limit (0 when allowed).
pub const MULTI_REPLY_LEN: usize = 6;
/// The most limits a policy may hold (`lua/multi_limit.lua` has the same number).
pub const MAX_LIMITS: usize = 8;

/// 2^53: the largest magnitude up to which a double holds every integer.
const MAX_SAFE: f64 = 9_007_199_254_740_992.0;

fn malformed(why: impl std::fmt::Display) -> Error {
    Error::new(
        ErrorCode::MalformedReply,
        format!("script reply {why}; expected [allowed, remaining, retry_after_ms, reset_after_ms, now_ms] and, for several limits, denied_by"),
    )
}

impl Decision {
    /// Parses a script reply given as plain integers: five, or six from a
    /// policy of several limits. Anything that is not a consistent reply is
    /// `malformed_reply`, never a panic.
    pub fn from_reply(reply: &[i64]) -> Result<Decision> {
        let ([allowed, remaining, retry, reset, now], position) = match reply {
            [a, b, c, d, e] => ([*a, *b, *c, *d, *e], None),
            [a, b, c, d, e, f] => ([*a, *b, *c, *d, *e], Some(*f)),
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
            denied_by: None,
        };
        let mut d = d;
        if let Some(position) = position {
            match (d.allowed, position) {
                (true, 0) => {}
                (false, p) if (1..=MAX_LIMITS as i64).contains(&p) => {
                    d.denied_by = Some((p - 1) as u32);
                }
                (_, p) => return Err(malformed(format!("has denied_by = {p}"))),
            }
        }
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
        let mut ints = [0i64; MULTI_REPLY_LEN];
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
        if reply.len() != REPLY_LEN && reply.len() != MULTI_REPLY_LEN {
            return Err(malformed(format!("has {} elements", reply.len())));
        }
        Decision::from_reply(&ints[..reply.len()])
    }

    /// [`Decision::to_reply`] as doubles (allowed as 0 or 1), for carriers
    /// whose only number is a double: exact, every field is below 2^53.
    pub fn to_f64_reply(&self, limits: usize) -> Vec<f64> {
        self.to_reply(limits)
            .into_iter()
            .map(|n| n as f64)
            .collect()
    }

    /// The reply a script of a policy with `limits` limits would send for
    /// this decision (the memory engine's output, and the inverse of
    /// [`Decision::from_reply`]): five integers for one limit, six for more.
    pub fn to_reply(&self, limits: usize) -> Vec<i64> {
        // Every field is bounded by 2^53 by construction, so the casts are exact.
        let mut reply = vec![
            i64::from(self.allowed),
            self.remaining as i64,
            self.retry_after_ms as i64,
            self.reset_after_ms as i64,
            self.now_ms as i64,
        ];
        if limits > 1 {
            reply.push(self.denied_by.map_or(0, |p| i64::from(p) + 1));
        }
        reply
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
        assert_eq!(d.to_reply(1), [1, 2, 0, 1000, 5000]);
        assert_eq!(d.denied_by, None);
        let d = Decision::from_reply(&[0, 0, 250, 900, 5000]).unwrap();
        assert!(!d.allowed);
        assert_eq!(d.retry_after_ms, 250);
        // Several limits: the sixth is the denying limit's 1-based position.
        let d = Decision::from_reply(&[0, 0, 250, 900, 5000, 2]).unwrap();
        assert_eq!(d.denied_by, Some(1));
        assert_eq!(d.to_reply(2), [0, 0, 250, 900, 5000, 2]);
        let d = Decision::from_reply(&[1, 3, 0, 900, 5000, 0]).unwrap();
        assert_eq!((d.allowed, d.denied_by), (true, None));
        assert_eq!(d.to_reply(3), [1, 3, 0, 900, 5000, 0]);
    }

    #[test]
    fn rejects_malformed_replies() {
        for bad in [
            &[][..],
            &[1, 2, 0, 1000][..],
            &[1, 2, 0, 1000, 5, 6][..],
            &[1, 2, 0, 1000, 5, 0, 0][..],
            &[0, 2, 5, 1000, 5, 0][..],
            &[0, 2, 5, 1000, 5, 9][..],
            &[0, 2, 5, 1000, 5, -1][..],
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
        assert_eq!(d.to_f64_reply(1), reply);
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
