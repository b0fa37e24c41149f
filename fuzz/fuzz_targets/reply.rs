//! `Decision::from_reply` on any list of integers: never panics; whatever it
//! accepts is a consistent decision that round-trips through `to_reply`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use slidelimit_core::Decision;

fuzz_target!(|reply: Vec<i64>| {
    let Ok(d) = Decision::from_reply(&reply) else {
        return;
    };
    assert_eq!(reply.len(), 5);
    assert!(reply.iter().all(|&v| v >= 0));
    assert!(reply[0] == 0 || reply[0] == 1);
    assert_eq!(d.allowed, d.retry_after_ms == 0, "{d:?}");
    assert_eq!(d.to_reply().as_slice(), reply.as_slice());
});
