//! The reply every script returns, and the decision parsed from it.

use crate::error::{Error, ErrorCode, Result};
use crate::number::MAX_EXACT;

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

fn malformed(why: impl std::fmt::Display) -> Error {
    Error::new(
        ErrorCode::MalformedReply,
        format!("script reply {why}; expected [allowed, remaining, retry_after_ms, reset_after_ms, now_ms] and, for several limits, denied_by"),
    )
}

/// How many integers the script of a policy of `limits` limits replies with.
fn reply_len(limits: usize) -> Result<usize> {
    match limits {
        1 => Ok(REPLY_LEN),
        2..=MAX_LIMITS => Ok(MULTI_REPLY_LEN),
        _ => Err(Error::invalid(
            "limits",
            format!("a policy holds 1 to {MAX_LIMITS} limits, not {limits}"),
        )),
    }
}

fn check_length(len: usize, limits: usize) -> Result<()> {
    let expected = reply_len(limits)?;
    if len != expected {
        let plural = if limits > 1 { "s" } else { "" };
        return Err(malformed(format!(
            "has {len} elements where a policy of {limits} limit{plural} replies with {expected}"
        )));
    }
    Ok(())
}

impl Decision {
    /// Parses the reply of a script for a policy of `limits` limits, given
    /// as plain integers: five for one limit, six for several, the sixth
    /// naming one of those `limits` (or 0 when allowed). Anything that is not
    /// such a reply is `malformed_reply`, never a panic: a reply that fits
    /// another policy (a sixth element for one limit, a position past the
    /// policy's last limit) included, so no caller ever reads a `denied_by`
    /// its policy does not have. `limits` outside 1..=[`MAX_LIMITS`] is
    /// `invalid_argument` naming `limits`.
    pub fn from_reply(reply: &[i64], limits: usize) -> Result<Decision> {
        check_length(reply.len(), limits)?;
        let [allowed, remaining, retry, reset, now] =
            [reply[0], reply[1], reply[2], reply[3], reply[4]];
        let allowed = match allowed {
            0 => false,
            1 => true,
            other => return Err(malformed(format!("has allowed = {other}"))),
        };
        // No script replies with a field above 2^53 (limit * window_ms and
        // now_ms are at most 2^52, and the bucketed window refuses a call
        // whose hints would pass 2^53), and JavaScript could not hold one
        // exactly: every binding refuses it alike.
        let non_negative = |name: &str, v: i64| -> Result<u64> {
            u64::try_from(v)
                .ok()
                .filter(|&n| n <= MAX_EXACT)
                .ok_or_else(|| malformed(format!("has {name} = {v}")))
        };
        let mut d = Decision {
            allowed,
            remaining: non_negative("remaining", remaining)?,
            retry_after_ms: non_negative("retry_after_ms", retry)?,
            reset_after_ms: non_negative("reset_after_ms", reset)?,
            now_ms: non_negative("now_ms", now)?,
            denied_by: None,
        };
        if let Some(&position) = reply.get(REPLY_LEN) {
            match (d.allowed, position) {
                (true, 0) => {}
                (false, p) if (1..=limits as i64).contains(&p) => {
                    d.denied_by = Some((p - 1) as u32);
                }
                (_, p) => {
                    return Err(malformed(format!(
                        "has denied_by = {p} from a policy of {limits} limits"
                    )))
                }
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

    /// A decision built by hand (the bindings' constructors, for tests and
    /// fakes), by the rules every reply obeys: each breach is
    /// `invalid_argument` naming its field, not a `malformed_reply` about a
    /// script that never ran. `denied_by` is the index of a limit (from 0).
    pub fn checked(
        allowed: bool,
        remaining: u64,
        retry_after_ms: u64,
        reset_after_ms: u64,
        now_ms: u64,
        denied_by: Option<u64>,
    ) -> Result<Decision> {
        for (field, value) in [
            ("remaining", remaining),
            ("retry_after_ms", retry_after_ms),
            ("reset_after_ms", reset_after_ms),
            ("now_ms", now_ms),
        ] {
            if value > MAX_EXACT {
                return Err(Error::invalid(
                    field,
                    format!("must be at most 2^53, got {value}"),
                ));
            }
        }
        if allowed && retry_after_ms != 0 {
            return Err(Error::invalid("retry_after_ms", "must be 0 when allowed"));
        }
        if !allowed && retry_after_ms == 0 {
            return Err(Error::invalid(
                "retry_after_ms",
                "must be above 0 when denied",
            ));
        }
        let denied_by = match denied_by {
            None => None,
            Some(_) if allowed => {
                return Err(Error::invalid("denied_by", "must be None when allowed"));
            }
            Some(i) if i < MAX_LIMITS as u64 => Some(i as u32),
            Some(i) => {
                return Err(Error::invalid(
                    "denied_by",
                    format!("must be below {MAX_LIMITS} (the most limits a policy holds), got {i}"),
                ))
            }
        };
        Ok(Decision {
            allowed,
            remaining,
            retry_after_ms,
            reset_after_ms,
            now_ms,
            denied_by,
        })
    }

    /// Parses a script reply whose integers arrive as doubles (JavaScript
    /// numbers, through the napi addon or the wasm build; an element that was
    /// no number at all arrives as NaN). An element that is not an exact
    /// integer of at most 2^53 is `malformed_reply`, as is anything
    /// [`Decision::from_reply`] refuses for a policy of `limits` limits.
    pub fn from_f64_reply(reply: &[f64], limits: usize) -> Result<Decision> {
        reply_len(limits)?;
        let mut ints = [0i64; MULTI_REPLY_LEN];
        for (i, &v) in reply.iter().enumerate() {
            if !(v.is_finite() && v.fract() == 0.0 && v.abs() <= MAX_EXACT as f64) {
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
        check_length(reply.len(), limits)?;
        Decision::from_reply(&ints[..reply.len()], limits)
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
        let d = Decision::from_reply(&[1, 2, 0, 1000, 5000], 1).unwrap();
        assert!(d.allowed);
        assert_eq!((d.remaining, d.reset_after_ms, d.now_ms), (2, 1000, 5000));
        assert_eq!(d.to_reply(1), [1, 2, 0, 1000, 5000]);
        assert_eq!(d.denied_by, None);
        let d = Decision::from_reply(&[0, 0, 250, 900, 5000], 1).unwrap();
        assert!(!d.allowed);
        assert_eq!(d.retry_after_ms, 250);
        // Several limits: the sixth is the denying limit's 1-based position.
        let d = Decision::from_reply(&[0, 0, 250, 900, 5000, 2], 2).unwrap();
        assert_eq!(d.denied_by, Some(1));
        assert_eq!(d.to_reply(2), [0, 0, 250, 900, 5000, 2]);
        let d = Decision::from_reply(&[0, 0, 250, 900, 5000, 8], MAX_LIMITS).unwrap();
        assert_eq!(d.denied_by, Some(7));
        let d = Decision::from_reply(&[1, 3, 0, 900, 5000, 0], 3).unwrap();
        assert_eq!((d.allowed, d.denied_by), (true, None));
        assert_eq!(d.to_reply(3), [1, 3, 0, 900, 5000, 0]);
    }

    #[test]
    fn rejects_malformed_replies() {
        for (bad, limits) in [
            (&[][..], 1),
            (&[1, 2, 0, 1000][..], 1),
            (&[1, 2, 0, 1000][..], 2),
            (&[1, 2, 0, 1000, 5, 6][..], 2),
            (&[1, 2, 0, 1000, 5, 0, 0][..], 2),
            (&[0, 2, 5, 1000, 5, 0][..], 2),
            (&[0, 2, 5, 1000, 5, 9][..], MAX_LIMITS),
            (&[0, 2, 5, 1000, 5, -1][..], 2),
            (&[2, 0, 0, 0, 0][..], 1),
            (&[1, -1, 0, 0, 0][..], 1),
            (&[1, 0, 5, 0, 0][..], 1),
            (&[0, 0, 0, 0, 0][..], 1),
            (&[0, 0, 1, i64::MIN, 0][..], 1),
            (&[1, 1 << 60, 0, 0, 0][..], 1),
            (&[0, 0, (1 << 53) + 2, 0, 0][..], 1),
            (&[1, 0, 0, 0, i64::MAX][..], 1),
            // A reply that fits another policy: a sixth element for one
            // limit, five for several, a position past the policy's last.
            (&[1, 2, 0, 1000, 5, 0][..], 1),
            (&[0, 2, 5, 1000, 5, 1][..], 1),
            (&[1, 2, 0, 1000, 5][..], 2),
            (&[0, 2, 5, 1000, 5][..], 3),
            (&[0, 2, 5, 1000, 5, 3][..], 2),
            (&[0, 2, 5, 1000, 5, 4][..], 3),
        ] {
            let e = Decision::from_reply(bad, limits).unwrap_err();
            assert_eq!(e.code(), ErrorCode::MalformedReply, "{bad:?} of {limits}");
            let doubles: Vec<f64> = bad.iter().map(|&n| n as f64).collect();
            let e = Decision::from_f64_reply(&doubles, limits).unwrap_err();
            assert_eq!(e.code(), ErrorCode::MalformedReply, "{bad:?} of {limits}");
        }
        let e = Decision::from_reply(&[1, 2, 0, 1000, 5, 0], 1).unwrap_err();
        assert!(
            e.message().starts_with(
                "script reply has 6 elements where a policy of 1 limit replies with 5"
            ),
            "{e}"
        );
        let e = Decision::from_reply(&[0, 2, 5, 1000, 5, 4], 3).unwrap_err();
        assert!(
            e.message()
                .starts_with("script reply has denied_by = 4 from a policy of 3 limits"),
            "{e}"
        );
    }

    #[test]
    fn limits_out_of_range_is_invalid_argument() {
        for limits in [0, MAX_LIMITS + 1, usize::MAX] {
            for e in [
                Decision::from_reply(&[1, 2, 0, 1000, 5000], limits).unwrap_err(),
                Decision::from_f64_reply(&[1.0, 2.0, 0.0, 1000.0, 5000.0], limits).unwrap_err(),
            ] {
                assert_eq!(e.code(), ErrorCode::InvalidArgument);
                assert_eq!(e.field(), Some("limits"));
                assert!(e.message().contains("1 to 8"), "{e}");
            }
        }
    }

    #[test]
    fn doubles_parse_like_integers() {
        let reply = [0.0, 3.0, 250.0, 900.0, 9_007_199_254_740_992.0];
        let d = Decision::from_f64_reply(&reply, 1).unwrap();
        assert_eq!(
            d,
            Decision::from_reply(&reply.map(|n| n as i64), 1).unwrap()
        );
        assert_eq!(d.to_f64_reply(1), reply);
        for (bad, element) in [
            ([1.0, 2.0, 0.0, f64::NAN, 5.0], 3),
            ([1.5, 2.0, 0.0, 1.0, 5.0], 0),
            ([1.0, f64::INFINITY, 0.0, 1.0, 5.0], 1),
            ([1.0, 2.0, 0.0, 1.0, 2.0 * 9_007_199_254_740_992.0], 4),
        ] {
            let e = Decision::from_f64_reply(&bad, 1).unwrap_err();
            assert_eq!(e.code(), ErrorCode::MalformedReply);
            assert_eq!(
                e.message(),
                format!("script reply element {element} is not an integer")
            );
        }
        // Elements are checked before the length, as a carrier hands them over.
        let e = Decision::from_f64_reply(&[f64::NAN], 1).unwrap_err();
        assert!(e.message().contains("element 0"), "{e}");
    }

    #[test]
    fn a_decision_built_by_hand_names_the_field_it_breaks() {
        let d = Decision::checked(false, 0, 500, 500, 1000, Some(1)).unwrap();
        assert_eq!((d.retry_after_ms, d.denied_by), (500, Some(1)));
        assert!(
            Decision::checked(true, 2, 0, 1000, 1000, None)
                .unwrap()
                .allowed
        );
        for (built, field) in [
            (
                Decision::checked(true, 1, 500, 0, 0, None),
                "retry_after_ms",
            ),
            (Decision::checked(false, 0, 0, 5, 0, None), "retry_after_ms"),
            (Decision::checked(true, 0, 0, 5, 0, Some(2)), "denied_by"),
            (Decision::checked(false, 0, 1, 5, 0, Some(8)), "denied_by"),
            (
                Decision::checked(false, MAX_EXACT + 1, 1, 5, 0, None),
                "remaining",
            ),
            (Decision::checked(false, 0, 1, 5, u64::MAX, None), "now_ms"),
        ] {
            let err = built.unwrap_err();
            assert_eq!(err.code(), ErrorCode::InvalidArgument);
            assert_eq!(err.field(), Some(field), "{err}");
        }
    }
}
