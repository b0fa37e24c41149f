//! Key naming: `<namespace>:{<resource>:<tenant>}:<tag>:<window_ms>`, and
//! `:<buckets>` after it for the bucketed window.
//!
//! The tenant is percent-encoded so that the hash tag is always exactly
//! `{resource:tenant}` (every rule of one tenant lives in one Cluster slot) and
//! no two (resource, tenant) pairs share a key.

use crate::error::{Error, Result};
use crate::policy::Algorithm;
use std::fmt::Write;

pub const MAX_NAME_LEN: usize = 64;
pub const MAX_TENANT_BYTES: usize = 512;
pub const CLUSTER_SLOTS: u16 = 16384;

/// namespace and resource: 1..=64 characters of `[A-Za-z0-9_.-]`.
pub(crate) fn check_name(field: &'static str, value: &str) -> Result<()> {
    if value.is_empty() {
        return Err(Error::invalid(field, "must not be empty"));
    }
    if value.len() > MAX_NAME_LEN {
        return Err(Error::invalid(
            field,
            format!("is {} bytes, at most {MAX_NAME_LEN} allowed", value.len()),
        ));
    }
    if let Some(bad) = value
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')))
    {
        return Err(Error::invalid(
            field,
            format!("may only hold A-Z a-z 0-9 _ . -, found {bad:?}"),
        ));
    }
    Ok(())
}

/// A tenant as raw bytes (C and Go hand bytes over): must be UTF-8.
pub fn tenant_from_bytes(bytes: &[u8]) -> Result<&str> {
    std::str::from_utf8(bytes).map_err(|e| {
        Error::invalid(
            "tenant",
            format!("is not valid UTF-8 (at byte {})", e.valid_up_to()),
        )
    })
}

pub(crate) fn check_tenant(tenant: &str) -> Result<()> {
    if tenant.is_empty() {
        return Err(Error::invalid("tenant", "must not be empty"));
    }
    if tenant.len() > MAX_TENANT_BYTES {
        return Err(Error::invalid(
            "tenant",
            format!(
                "is {} bytes, at most {MAX_TENANT_BYTES} allowed",
                tenant.len()
            ),
        ));
    }
    Ok(())
}

fn needs_escape(b: u8) -> bool {
    b < 0x21 || b == 0x7F || b == b'%' || b == b'{' || b == b'}'
}

/// Percent-encodes `%`, `{`, `}`, bytes below 0x21 and 0x7F (upper-case hex);
/// every other byte, UTF-8 included, is kept.
pub fn escape_tenant(tenant: &str) -> String {
    let mut out = String::with_capacity(tenant.len());
    for ch in tenant.chars() {
        let mut buf = [0u8; 4];
        let encoded = ch.encode_utf8(&mut buf);
        if encoded.len() == 1 && needs_escape(encoded.as_bytes()[0]) {
            let _ = write!(out, "%{:02X}", encoded.as_bytes()[0]);
        } else {
            out.push(ch);
        }
    }
    out
}

pub(crate) fn build(
    namespace: &str,
    resource: &str,
    tenant: &str,
    algorithm: Algorithm,
    window_ms: u64,
    buckets: Option<u64>,
) -> Result<String> {
    check_tenant(tenant)?;
    let mut key = format!(
        "{namespace}:{{{resource}:{}}}:{}:{window_ms}",
        escape_tenant(tenant),
        algorithm.key_tag()
    );
    // The bucket count is part of the key: two policies bucketing one window
    // differently must not read each other's state.
    if let Some(n) = buckets {
        let _ = write!(key, ":{n}");
    }
    Ok(key)
}

/// CRC16/XMODEM (poly 0x1021, init 0), the checksum Redis Cluster uses.
fn crc16_xmodem(data: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &byte in data {
        crc ^= (byte as u16) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

/// The Cluster slot of any key, by Redis's rule: hash the text between the
/// first `{` and the next `}` when that is non-empty, else the whole key.
pub fn slot(key: &str) -> u16 {
    let bytes = key.as_bytes();
    let hashed = match bytes.iter().position(|&b| b == b'{') {
        Some(open) => match bytes[open + 1..].iter().position(|&b| b == b'}') {
            Some(len) if len > 0 => &bytes[open + 1..open + 1 + len],
            _ => bytes,
        },
        None => bytes,
    };
    crc16_xmodem(hashed) % CLUSTER_SLOTS
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc16_matches_the_cluster_spec_example() {
        // The Redis Cluster specification gives 0x31C3 for "123456789".
        assert_eq!(crc16_xmodem(b"123456789"), 0x31C3);
        assert_eq!(slot("foo"), 12182);
        assert_eq!(slot("{user1000}.following"), slot("{user1000}.followers"));
        // The tag is the text between the first `{` and the next `}`; an empty
        // one means the whole key is hashed.
        assert_eq!(slot("foo{bar}{zap}"), slot("bar"));
        assert_eq!(slot("foo{{bar}}zap"), slot("{bar"));
        assert_eq!(slot("foo{}{bar}"), crc16_xmodem(b"foo{}{bar}") % 16384);
        assert_ne!(slot("foo{}{bar}"), slot("bar"));
        assert_eq!(slot("{}"), crc16_xmodem(b"{}") % 16384);
        assert_eq!(slot("no-brace}{"), crc16_xmodem(b"no-brace}{") % 16384);
    }

    #[test]
    fn escaping_covers_every_class() {
        assert_eq!(escape_tenant("a}b"), "a%7Db");
        assert_eq!(escape_tenant("{x}"), "%7Bx%7D");
        assert_eq!(escape_tenant("50%"), "50%25");
        assert_eq!(escape_tenant("a b\tc\u{0}"), "a%20b%09c%00");
        assert_eq!(escape_tenant("del\u{7f}"), "del%7F");
        assert_eq!(escape_tenant("zoë-東京"), "zoë-東京");
        assert_eq!(escape_tenant("!~:"), "!~:");
    }

    #[test]
    fn tenant_bounds() {
        let at_limit = "x".repeat(512);
        assert!(check_tenant(&at_limit).is_ok());
        assert_eq!(
            check_tenant(&"x".repeat(513)).unwrap_err().field(),
            Some("tenant")
        );
        assert!(check_tenant("").is_err());
        assert!(tenant_from_bytes(&[0x66, 0xff]).is_err());
    }
}
