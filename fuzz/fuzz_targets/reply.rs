//! `Decision::from_reply` on any list of integers: never panics; whatever it
//! accepts is a consistent decision (five integers, or six from a policy of
//! several limits naming the denying limit exactly when it denies) that
//! round-trips through `to_reply`; and the doubles' parser
//! (`from_f64_reply`, for JavaScript numbers) decides every list of
//! integers it can carry exactly as the integers' parser does.
#![no_main]

use libfuzzer_sys::fuzz_target;
use slidelimit_core::{Decision, MAX_LIMITS, MULTI_REPLY_LEN, REPLY_LEN};

/// 2^53: every integer up to it is exact in a double.
const MAX_EXACT: u64 = 1 << 53;

fuzz_target!(|reply: Vec<i64>| {
    let parsed = Decision::from_reply(&reply);
    if reply.iter().all(|v| v.unsigned_abs() <= MAX_EXACT) {
        let doubles: Vec<f64> = reply.iter().map(|&v| v as f64).collect();
        let from_doubles = Decision::from_f64_reply(&doubles);
        match (&parsed, &from_doubles) {
            (Ok(a), Ok(b)) => assert_eq!(a, b),
            (Err(a), Err(b)) => assert_eq!(a.code(), b.code(), "{a} / {b}"),
            _ => panic!("{reply:?}: integers {parsed:?}, doubles {from_doubles:?}"),
        }
    }
    let Ok(d) = parsed else {
        return;
    };
    assert!(reply.len() == REPLY_LEN || reply.len() == MULTI_REPLY_LEN);
    assert!(reply.iter().all(|&v| v >= 0));
    assert!(reply[0] == 0 || reply[0] == 1);
    assert_eq!(d.allowed, d.retry_after_ms == 0, "{d:?}");
    if reply.len() == MULTI_REPLY_LEN {
        assert_eq!(d.denied_by.is_some(), !d.allowed, "{d:?}");
    } else {
        assert_eq!(d.denied_by, None, "{d:?}");
    }
    let limits = if reply.len() == REPLY_LEN {
        1
    } else {
        MAX_LIMITS
    };
    assert_eq!(d.to_reply(limits).as_slice(), reply.as_slice());
});
