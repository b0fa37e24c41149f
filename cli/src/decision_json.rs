//! A decision as one JSON line, the form of docs/driver.md (snake_case keys,
//! `denied_by` only when the decision names a limit): what `slidelimit
//! acquire --json` prints and what the driver answers. Shared by both
//! binaries through `#[path]` (the package has no library target).

use slidelimit::Decision;

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
