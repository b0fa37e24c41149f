//! The key builder on any namespace, resource and tenant bytes: never
//! panics; every key it builds has exactly one `{...}` hash tag holding
//! `resource:escaped-tenant`, the escaping is undone exactly, and `slot`
//! equals an independent CRC16/XMODEM of the tag.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use slidelimit_core::{escape_tenant, slot, tenant_from_bytes, Algorithm, Policy};

#[derive(Arbitrary, Debug)]
struct Input<'a> {
    namespace: &'a str,
    resource: &'a str,
    tenant: &'a [u8],
    counter: bool,
    limit: u64,
    window_ms: u64,
}

fn crc16(data: &[u8]) -> u16 {
    // Bit by bit, written apart from core's on purpose.
    data.iter().fold(0u16, |crc, &b| {
        (0..8).fold(crc ^ (u16::from(b) << 8), |c, _| {
            (c << 1) ^ if c & 0x8000 != 0 { 0x1021 } else { 0 }
        })
    })
}

fn unescape(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(&b[i + 1..i + 3]).unwrap();
            assert_eq!(hex, hex.to_uppercase(), "upper-case hex");
            out.push(u8::from_str_radix(hex, 16).unwrap());
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

fuzz_target!(|input: Input| {
    let algorithm = if input.counter {
        Algorithm::SlidingCounter
    } else {
        Algorithm::SlidingLog
    };
    let Ok(tenant) = tenant_from_bytes(input.tenant) else {
        assert!(std::str::from_utf8(input.tenant).is_err());
        return;
    };
    let escaped = escape_tenant(tenant);
    assert_eq!(
        unescape(&escaped),
        tenant.as_bytes(),
        "escaping is injective"
    );
    // The input's own policy when it is valid, and always a valid one, so
    // every tenant reaches the key builder.
    let fixed = Policy::new("rl", "geocode", algorithm, 10, 60_000).unwrap();
    let own = Policy::new(
        input.namespace,
        input.resource,
        algorithm,
        input.limit,
        input.window_ms,
    );
    for policy in [Some(fixed), own.ok()].into_iter().flatten() {
        check_key(&policy, tenant, &escaped);
    }
});

fn check_key(policy: &Policy, tenant: &str, escaped: &str) {
    let Ok(key) = policy.key(tenant) else {
        assert!(tenant.is_empty() || tenant.len() > 512);
        return;
    };
    assert!(!tenant.is_empty() && tenant.len() <= 512);
    assert_eq!(key.matches('{').count(), 1, "{key}");
    assert_eq!(key.matches('}').count(), 1, "{key}");
    let open = key.find('{').unwrap();
    let close = key.find('}').unwrap();
    assert!(open < close);
    let tag = &key[open + 1..close];
    assert_eq!(tag, format!("{}:{escaped}", policy.resource()));
    assert_eq!(slot(&key), crc16(tag.as_bytes()) % 16384, "{key}");
    assert_eq!(
        key,
        format!(
            "{}:{{{tag}}}:{}:{}",
            policy.namespace(),
            policy.algorithm().key_tag(),
            policy.window_ms()
        )
    );
}
