//! A decision, or an error, as one JSON line, the forms of docs/driver.md
//! (snake_case keys, `denied_by` only when the decision names a limit): what
//! `slidelimit acquire --json` prints and what the driver answers. Shared by
//! both binaries through `#[path]` (the package has no library target).

use slidelimit::{Decision, Error, ErrorCode};

/// A JSON string literal.
pub fn json_str(s: &str) -> String {
    serde_json::to_string(s).expect("a string always serializes")
}

/// `{"error":"<code>","field":<name or null>,"message":...}`.
pub fn error_json(e: &Error) -> String {
    error_parts_json(e.code(), e.field(), e.message())
}

/// The same line from its parts, for an error that is no core `Error` (a
/// usage error, whose field is the flag clap names).
pub fn error_parts_json(code: ErrorCode, field: Option<&str>, message: &str) -> String {
    let field = field.map_or_else(|| "null".to_owned(), json_str);
    format!(
        "{{\"error\":\"{code}\",\"field\":{field},\"message\":{}}}",
        json_str(message)
    )
}

pub fn decision_json(d: &Decision) -> String {
    let denied_by = d
        .denied_by
        .map(|p| format!(",\"denied_by\":{p}"))
        .unwrap_or_default();
    format!(
        "{{\"allowed\":{},\"remaining\":{},\"retry_after_ms\":{},\"reset_after_ms\":{},\"now_ms\":{}{denied_by}}}",
        d.allowed, d.remaining, d.retry_after_ms, d.reset_after_ms, d.now_ms
    )
}
