//! `Decision::from_reply` on any list of integers and any count of limits:
//! never panics; whatever it accepts is a consistent decision (five integers
//! for one limit, six for several, naming one of the policy's limits exactly
//! when it denies) that round-trips through `to_reply`; and the doubles' parser
//! (`from_f64_reply`, for JavaScript numbers) decides every list of
//! integers it can carry exactly as the integers' parser does.
#![no_main]

use libfuzzer_sys::fuzz_target;
use slidelimit_core::{Decision, MAX_LIMITS, MULTI_REPLY_LEN, REPLY_LEN};

/// 2^53: every integer up to it is exact in a double.
const MAX_EXACT: u64 = 1 << 53;

fuzz_target!(|input: (u8, Vec<i64>)| {
    // 0 and 9 are outside 1..=MAX_LIMITS: refused as invalid_argument.
    let (limits, reply) = (usize::from(input.0 % 10), input.1);
    let parsed = Decision::from_reply(&reply, limits);
    if !(1..=MAX_LIMITS).contains(&limits) {
        assert_eq!(parsed.map_err(|e| e.field()), Err(Some("limits")));
        return;
    }
    if reply.iter().all(|v| v.unsigned_abs() <= MAX_EXACT) {
        let doubles: Vec<f64> = reply.iter().map(|&v| v as f64).collect();
        let from_doubles = Decision::from_f64_reply(&doubles, limits);
        match (&parsed, &from_doubles) {
            (Ok(a), Ok(b)) => assert_eq!(a, b),
            (Err(a), Err(b)) => assert_eq!(a.code(), b.code(), "{a} / {b}"),
            _ => panic!("{reply:?}: integers {parsed:?}, doubles {from_doubles:?}"),
        }
    }
    let Ok(d) = parsed else {
        return;
    };
    assert_eq!(
        reply.len(),
        if limits > 1 {
            MULTI_REPLY_LEN
        } else {
            REPLY_LEN
        }
    );
    assert!(reply
        .iter()
        .all(|&v| v >= 0 && v.unsigned_abs() <= MAX_EXACT));
    assert!(reply[0] == 0 || reply[0] == 1);
    assert_eq!(d.allowed, d.retry_after_ms == 0, "{d:?}");
    if limits > 1 {
        assert_eq!(d.denied_by.is_some(), !d.allowed, "{d:?}");
        assert!(d.denied_by.is_none_or(|p| (p as usize) < limits), "{d:?}");
    } else {
        assert_eq!(d.denied_by, None, "{d:?}");
    }
    assert_eq!(d.to_reply(limits).as_slice(), reply.as_slice());
});
