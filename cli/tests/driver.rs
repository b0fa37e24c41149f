//! `slidelimit-driver` (docs/driver.md) as the harnesses run it: JSON lines
//! in, exactly one JSON line out per request, decisions in the one byte form.

#[path = "../../rust/tests/common/mod.rs"]
mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

struct Driver {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Driver {
    fn start() -> Driver {
        let mut child = Command::new(env!("CARGO_BIN_EXE_slidelimit-driver"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start slidelimit-driver");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Driver {
            child,
            stdin,
            stdout,
        }
    }

    /// Sends one line (any bytes) and returns the reply line.
    fn send(&mut self, line: &[u8]) -> String {
        self.stdin.write_all(line).unwrap();
        self.stdin.write_all(b"\n").unwrap();
        self.stdin.flush().unwrap();
        let mut reply = String::new();
        self.stdout.read_line(&mut reply).unwrap();
        assert!(reply.ends_with('\n'), "no reply line to {line:?}");
        reply.trim_end_matches('\n').to_owned()
    }

    fn ask(&mut self, request: &str) -> String {
        self.send(request.as_bytes())
    }

    /// Asks, and checks that the reply is `invalid_argument` on `field`
    /// with a message starting `<field>: <says>`; returns the reply.
    fn refused(&mut self, request: &str, field: &str, says: &str) -> String {
        let reply = self.ask(request);
        let head =
            format!(r#"{{"error":"invalid_argument","field":"{field}","message":"{field}: {says}"#);
        assert!(reply.starts_with(&head), "{request}: {reply}");
        reply
    }

    /// Ends the session with `exit`: answered, then exit status 0 and nothing more.
    fn exit(mut self) {
        assert_eq!(self.ask(r#"{"op":"exit"}"#), r#"{"ok":true}"#);
        let mut rest = String::new();
        self.stdout.read_line(&mut rest).unwrap();
        assert_eq!(rest, "", "nothing after exit's reply");
        assert!(self.child.wait().unwrap().success());
    }
}

const POLICY: &str = r#"{"op":"policy","namespace":"NS","resource":"geocode","algorithm":"sliding_log","limit":2,"window_ms":1000}"#;

#[test]
fn a_session_on_the_memory_engine() {
    let mut d = Driver::start();
    assert_eq!(
        d.ask(r#"{"op":"hello"}"#),
        format!(
            r#"{{"ok":true,"binding":"rust","version":"{}"}}"#,
            slidelimit_core::VERSION
        )
    );
    assert_eq!(d.ask(r#"{"op":"store","kind":"memory"}"#), r#"{"ok":true}"#);
    assert_eq!(d.ask(&POLICY.replace("NS", "rl")), r#"{"ok":true}"#);
    assert_eq!(
        d.ask(r#"{"op":"acquire_at","tenant":"t-1","now_ms":1000}"#),
        r#"{"allowed":true,"remaining":1,"retry_after_ms":0,"reset_after_ms":1000,"now_ms":1000}"#
    );
    assert_eq!(
        d.ask(r#"{"op":"peek","tenant":"t-1","now_ms":1200,"cost":2}"#),
        r#"{"allowed":false,"remaining":1,"retry_after_ms":800,"reset_after_ms":800,"now_ms":1200}"#
    );
    d.refused(
        r#"{"op":"acquire_at","tenant":"t-1","now_ms":1000,"cost":5}"#,
        "cost",
        "",
    );
    assert_eq!(d.ask(r#"{"op":"reset","tenant":"t-1"}"#), r#"{"ok":true}"#);
    assert!(d
        .ask(r#"{"op":"acquire_at","tenant":"t-1","now_ms":1000}"#)
        .contains(r#""remaining":1,"#));
    assert_eq!(
        d.ask(r#"{"op":"key","tenant":"a}b"}"#),
        r#"{"ok":true,"key":"rl:{geocode:a%7Db}:log:1000","slot":11133}"#
    );
    // Server time on memory is the clock: a decision, now_ms near now.
    let live = d.ask(r#"{"op":"acquire","tenant":"t-2"}"#);
    assert!(
        live.starts_with(r#"{"allowed":true,"remaining":1,"#),
        "{live}"
    );
    d.exit();
}

#[test]
fn a_refused_policy_answers_every_later_call() {
    let mut d = Driver::start();
    d.ask(r#"{"op":"store","kind":"memory"}"#);
    let refused = d.ask(&POLICY.replace(r#""limit":2"#, r#""limit":0"#));
    assert_eq!(
        refused,
        r#"{"error":"invalid_argument","field":"limit","message":"limit: must be at least 1"}"#
    );
    for op in [
        r#"{"op":"acquire_at","tenant":"t","now_ms":1}"#,
        r#"{"op":"reset","tenant":"t"}"#,
        r#"{"op":"key","tenant":"t"}"#,
    ] {
        assert_eq!(d.ask(op), refused, "{op}");
    }
    // An accepted policy ends it; a bad algorithm is the binding's error.
    assert_eq!(d.ask(POLICY), r#"{"ok":true}"#);
    let bad = d.ask(&POLICY.replace("sliding_log", "fixed"));
    assert!(
        bad.starts_with(r#"{"error":"invalid_argument","field":"algorithm","#),
        "{bad}"
    );
    // In a list of several limits it is named by its place, as core names
    // every field of a limit.
    let limits = r#"{"op":"policy","namespace":"NS","resource":"geocode","limits":[{"algorithm":"sliding_log","limit":2,"window_ms":1000},{"algorithm":"fixed","limit":3,"window_ms":2000}]}"#;
    d.refused(limits, "limits[1].algorithm", "");
    d.exit();
}

#[test]
fn unreadable_requests_get_protocol_errors_and_the_driver_carries_on() {
    let mut d = Driver::start();
    for (line, says) in [
        (&b"not json"[..], "bad JSON"),
        (b"[1,2]", "object"),
        (b"{\"op\":7}", "op must be a string"),
        (b"{\"op\":\"fly\"}", "unknown op"),
        (b"{\"op\":\"\xff\"}", "bad JSON"),
        (b"{\"op\":\"acquire\",\"tenant\":\"t\"}", "no policy yet"),
        (
            b"{\"op\":\"policy\",\"resource\":\"r\",\"limit\":1,\"window_ms\":1}",
            "no store yet",
        ),
        (b"{\"op\":\"store\",\"kind\":\"disk\"}", "kind must be"),
        (
            b"{\"op\":\"store\",\"kind\":\"cluster\",\"urls\":\"redis://x\"}",
            "urls must be",
        ),
        (
            b"{\"op\":\"store\",\"kind\":\"memory\",\"colour\":1}",
            "unknown field \\\"colour\\\"",
        ),
    ] {
        let reply = d.send(line);
        assert!(
            reply.starts_with(r#"{"error":"protocol","message":""#) && reply.contains(says),
            "{line:?}: {reply}"
        );
    }
    d.ask(r#"{"op":"store","kind":"memory"}"#);
    d.ask(POLICY);
    for (request, says) in [
        (
            r#"{"op":"acquire_at","tenant":5,"now_ms":1}"#,
            "tenant must be a string",
        ),
        (r#"{"op":"acquire_at","tenant":"t","now_ms":"1"}"#, "now_ms"),
        (r#"{"op":"acquire_at","tenant":"t"}"#, "now_ms is required"),
        (r#"{"op":"acquire","tenant":"t","cost":true}"#, "cost"),
    ] {
        let reply = d.ask(request);
        assert!(
            reply.starts_with(r#"{"error":"protocol""#) && reply.contains(says),
            "{request}: {reply}"
        );
    }
    // Bad values of the right type go to the binding.
    let zero = d.ask(r#"{"op":"acquire_at","tenant":"t","now_ms":1,"cost":0}"#);
    assert!(
        zero.starts_with(r#"{"error":"invalid_argument","field":"cost""#),
        "{zero}"
    );
    d.exit();
}

#[test]
fn a_number_no_u64_holds_is_invalid_argument_on_its_field() {
    let mut d = Driver::start();
    d.ask(r#"{"op":"store","kind":"memory"}"#);
    d.ask(POLICY);
    for (request, field, says) in [
        (
            r#"{"op":"acquire_at","tenant":"t","now_ms":-1}"#,
            "now_ms",
            "must not be negative, got -1",
        ),
        (
            r#"{"op":"acquire_at","tenant":"t","now_ms":1.5}"#,
            "now_ms",
            "must be an integer, got 1.5",
        ),
        (
            r#"{"op":"acquire_at","tenant":"t","now_ms":1,"cost":-2}"#,
            "cost",
            "must not be negative, got -2",
        ),
        (
            r#"{"op":"peek","tenant":"t","now_ms":18446744073709551616}"#,
            "now_ms",
            "must be at most 2^64 - 1",
        ),
        (
            r#"{"op":"store","kind":"memory","timeout_ms":-5}"#,
            "timeout_ms",
            "must not be negative, got -5",
        ),
    ] {
        d.refused(request, field, says);
    }
    // The refused store left the memory store in place; the limiter too.
    let allowed = d.ask(r#"{"op":"acquire_at","tenant":"t","now_ms":1}"#);
    assert!(allowed.starts_with(r#"{"allowed":true"#), "{allowed}");

    // In a policy the refusal is the policy's: every later call answers it.
    let refused = d.refused(
        &POLICY.replace(r#""limit":2"#, r#""limit":-2"#),
        "limit",
        "must not be negative, got -2",
    );
    assert_eq!(
        d.ask(r#"{"op":"acquire_at","tenant":"t","now_ms":1}"#),
        refused
    );
    assert_eq!(d.ask(r#"{"op":"key","tenant":"t"}"#), refused);
    let limits = r#"{"op":"policy","namespace":"NS","resource":"geocode","limits":[{"algorithm":"sliding_log","limit":2,"window_ms":1000},{"algorithm":"sliding_log","limit":3,"window_ms":2.5}]}"#;
    d.refused(limits, "limits[1].window_ms", "must be an integer, got 2.5");
    d.exit();
}

#[test]
fn null_is_absent_and_a_field_without_default_is_required() {
    let mut d = Driver::start();
    d.ask(r#"{"op":"store","kind":"memory"}"#);
    // null namespace, algorithm and buckets: the binding's defaults.
    let defaults = r#"{"op":"policy","namespace":null,"resource":"geocode","algorithm":null,"limit":2,"window_ms":1000,"buckets":null,"deny_cache":null}"#;
    assert_eq!(d.ask(defaults), r#"{"ok":true}"#);
    assert_eq!(
        d.ask(r#"{"op":"key","tenant":"t"}"#),
        format!(
            r#"{{"ok":true,"key":"rl:{{geocode:t}}:log:1000","slot":{}}}"#,
            slidelimit::slot("rl:{geocode:t}:log:1000")
        )
    );
    let decided = d.ask(r#"{"op":"acquire_at","tenant":"t","now_ms":1,"cost":null}"#);
    assert!(
        decided.starts_with(r#"{"allowed":true,"remaining":1,"#),
        "{decided}"
    );
    for (request, field) in [
        (
            r#"{"op":"policy","resource":"geocode","window_ms":1000}"#,
            "limit",
        ),
        (
            r#"{"op":"policy","resource":"geocode","limit":2,"window_ms":null}"#,
            "window_ms",
        ),
        (r#"{"op":"policy","limit":2,"window_ms":1000}"#, "resource"),
        (
            r#"{"op":"policy","resource":"geocode","limits":[{"limit":2,"window_ms":1000},{"limit":2}]}"#,
            "limits[1].window_ms",
        ),
    ] {
        let reply = d.refused(request, field, "is required");
        assert_eq!(
            d.ask(r#"{"op":"acquire_at","tenant":"t","now_ms":1}"#),
            reply
        );
    }
    d.exit();
}

/// A tenant left out, null or holding a lone surrogate (JSON's `\ud800`,
/// which no `&str` holds) is `invalid_argument` on `tenant`, as the other
/// bindings answer it; a lone surrogate in the resource is the policy's
/// refusal (docs/driver.md).
#[test]
fn a_tenant_left_out_or_not_utf8_is_invalid_argument() {
    let mut d = Driver::start();
    d.ask(r#"{"op":"store","kind":"memory"}"#);
    d.ask(POLICY);
    for request in [
        r#"{"op":"acquire_at","now_ms":1}"#,
        r#"{"op":"acquire","tenant":null}"#,
        r#"{"op":"peek"}"#,
        r#"{"op":"reset"}"#,
        r#"{"op":"key"}"#,
    ] {
        d.refused(request, "tenant", "is required");
    }
    for request in [
        r#"{"op":"acquire_at","tenant":"a\ud800b","now_ms":1}"#,
        r#"{"op":"peek","tenant":"\udc80","now_ms":1}"#,
        r#"{"op":"reset","tenant":"\ude80\ud83d"}"#,
        r#"{"op":"key","tenant":"t\uDBFF"}"#,
    ] {
        d.refused(
            request,
            "tenant",
            "is not valid UTF-8: it holds a lone surrogate",
        );
    }
    // A pair is one character, and an escaped backslash no escape.
    assert_eq!(
        d.ask(r#"{"op":"key","tenant":"\ud83d\ude80"}"#),
        format!(
            r#"{{"ok":true,"key":"NS:{{geocode:🚀}}:log:1000","slot":{}}}"#,
            slidelimit::slot("NS:{geocode:🚀}:log:1000")
        )
    );
    let decided = d.ask(r#"{"op":"acquire_at","tenant":"\\ud800","now_ms":1}"#);
    assert!(decided.starts_with(r#"{"allowed":true,"#), "{decided}");
    // A string elsewhere than a field is still unreadable.
    let unreadable = d.ask(r#"{"op":"key","tenant":["\ud800"]}"#);
    assert!(
        unreadable.starts_with(r#"{"error":"protocol","#),
        "{unreadable}"
    );

    let refused = d.refused(
        r#"{"op":"policy","resource":"geo\ud800","limit":2,"window_ms":1000}"#,
        "resource",
        "is not valid UTF-8",
    );
    assert_eq!(
        d.ask(r#"{"op":"acquire_at","tenant":"t","now_ms":1}"#),
        refused
    );
    d.exit();
}

/// JSON's grammar has numbers past the doubles' range, which serde_json
/// refuses with the whole line: the driver answers as the other drivers do,
/// for the field, wherever the number sits.
#[test]
fn a_number_past_the_doubles_range_is_invalid_argument_on_its_field() {
    let mut d = Driver::start();
    d.ask(r#"{"op":"store","kind":"memory"}"#);
    d.ask(POLICY);
    d.refused(
        r#"{"op":"acquire_at","tenant":"t","now_ms":1e400}"#,
        "now_ms",
        "must be at most 2^64 - 1, got 1e400",
    );
    d.refused(
        r#"{"op":"peek","tenant":"t","now_ms":1,"cost":-2E999}"#,
        "cost",
        "must not be negative, got -2E999",
    );
    // With a lone surrogate in the same line: each field as on its own.
    d.refused(
        r#"{"op":"acquire_at","tenant":"a\ud800","now_ms":1}"#,
        "tenant",
        "is not valid UTF-8",
    );
    d.refused(
        r#"{"op":"policy","namespace":"NS","resource":"r","limit":1e400,"window_ms":1000}"#,
        "limit",
        "must be at most 2^64 - 1",
    );
    d.refused(
        r#"{"op":"policy","namespace":"NS","resource":"r","limits":[{"limit":2,"window_ms":1000},{"limit":3,"window_ms":1e999}]}"#,
        "limits[1].window_ms",
        "must be at most 2^64 - 1, got 1e999",
    );
    // Only the field that holds it: limits[0].window_ms is fine.
    let second = d.refused(
        r#"{"op":"policy","namespace":"NS","resource":"r","limits":[{"limit":2,"window_ms":1000},{"limit":1e400,"window_ms":1000}]}"#,
        "limits[1].limit",
        "must be at most",
    );
    assert!(!second.contains("limits[0]"), "{second}");
    // Still bad JSON: a number past the range in a field the op does not
    // know, or a line that ends early.
    let unknown = d.ask(r#"{"op":"key","tenant":"t","x":[1e400]}"#);
    assert!(unknown.starts_with(r#"{"error":"protocol","#), "{unknown}");
    let cut = d.ask(r#"{"op":"acquire_at","tenant":"t","now_ms":1e400"#);
    assert!(cut.starts_with(r#"{"error":"protocol","#), "{cut}");
    d.exit();
}

/// A JSON number is a double: a whole one up to 2^53 in any form (`2.0`,
/// `1e3`, `-0`) is that integer, as in every other driver (docs/driver.md).
#[test]
fn a_whole_number_in_any_json_form_is_that_integer() {
    let mut d = Driver::start();
    d.ask(r#"{"op":"store","kind":"memory"}"#);
    assert_eq!(
        d.ask(r#"{"op":"policy","resource":"r","limit":2.0,"window_ms":1e3}"#),
        r#"{"ok":true}"#
    );
    assert_eq!(
        d.ask(r#"{"op":"acquire_at","tenant":"t","now_ms":-0,"cost":1.0}"#),
        r#"{"allowed":true,"remaining":1,"retry_after_ms":0,"reset_after_ms":1000,"now_ms":0}"#
    );
    assert_eq!(
        d.ask(r#"{"op":"peek","tenant":"t","now_ms":5e2,"cost":-0.0}"#),
        d.ask(r#"{"op":"peek","tenant":"t","now_ms":500,"cost":0}"#)
    );
    d.refused(
        r#"{"op":"acquire_at","tenant":"t","now_ms":1e16}"#,
        "now_ms",
        "must be written in digits above 2^53, got 1e+16",
    );
    d.refused(
        r#"{"op":"acquire_at","tenant":"t","now_ms":-1.0}"#,
        "now_ms",
        "must not be negative, got -1.0",
    );
    d.exit();
}

#[test]
fn end_of_input_exits_zero() {
    let mut d = Driver::start();
    d.ask(r#"{"op":"hello"}"#);
    drop(d.stdin);
    assert!(d.child.wait().unwrap().success());
}

#[test]
fn store_options_go_to_the_binding() {
    let mut d = Driver::start();
    let url = common::redis_url();
    d.ask(&format!(
        r#"{{"op":"store","kind":"redis","url":"{url}","timeout_ms":0}}"#
    ));
    let zero = d.ask(POLICY);
    assert!(
        zero.starts_with(r#"{"error":"invalid_argument","field":"timeout_ms""#),
        "{zero}"
    );
    let missing = d.ask(&format!(
        r#"{{"op":"store","kind":"redis","url":"{url}","tls_ca_file":"/nonexistent/ca.pem"}}"#
    ));
    assert!(
        missing.starts_with(r#"{"error":"invalid_argument","field":"tls_ca_file""#),
        "{missing}"
    );
    // Nothing listens on port 1: the limiter is made (it connects on its
    // first call, Limiter::connect_lazy), and each call is the binding's
    // unavailable.
    d.ask(r#"{"op":"store","kind":"redis","url":"redis://127.0.0.1:1/","timeout_ms":500}"#);
    assert_eq!(d.ask(POLICY), r#"{"ok":true}"#);
    for _ in 0..2 {
        let down = d.ask(r#"{"op":"acquire_at","tenant":"t","now_ms":1000}"#);
        assert!(
            down.starts_with(r#"{"error":"unavailable","field":null,"#),
            "{down}"
        );
    }
    d.exit();
}

#[test]
fn redis_decisions_and_reset() {
    let ns = common::unique_namespace("driver");
    let mut d = Driver::start();
    let url = common::redis_url();
    d.ask(&format!(r#"{{"op":"store","kind":"redis","url":"{url}"}}"#));
    assert_eq!(d.ask(&POLICY.replace("NS", &ns)), r#"{"ok":true}"#);
    for _ in 0..2 {
        assert_eq!(d.ask(r#"{"op":"reset","tenant":"t-1"}"#), r#"{"ok":true}"#);
        assert_eq!(
            d.ask(r#"{"op":"acquire_at","tenant":"t-1","now_ms":1000}"#),
            r#"{"allowed":true,"remaining":1,"retry_after_ms":0,"reset_after_ms":1000,"now_ms":1000}"#
        );
        assert_eq!(
            d.ask(r#"{"op":"acquire_at","tenant":"t-1","now_ms":1500,"cost":2}"#),
            r#"{"allowed":false,"remaining":1,"retry_after_ms":500,"reset_after_ms":500,"now_ms":1500}"#
        );
    }
    d.exit();
}

#[test]
fn load_runs_callers_on_the_active_intervals_only() {
    let ns = common::unique_namespace("driver-load");
    let out = std::env::temp_dir().join(format!("{ns}.jsonl"));
    let mut d = Driver::start();
    let url = common::redis_url();
    d.ask(&format!(r#"{{"op":"store","kind":"redis","url":"{url}"}}"#));
    d.ask(
        &POLICY
            .replace("NS", &ns)
            .replace(r#""limit":2"#, r#""limit":5"#),
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let (start, end) = (now + 200, now + 1000);
    // Calls only in [start + 300, start + 500).
    let reply = d.ask(&format!(
        r#"{{"op":"load","lang":"rust \"x\"","tenant":"t","cost":1,"concurrency":4,"start_at_ms":{start},"end_at_ms":{end},"active":[[{a},{b}]],"ramp_ms":0,"jitter_ms":2,"out":"{out}"}}"#,
        a = start + 300,
        b = start + 500,
        out = out.display()
    ));
    let text = std::fs::read_to_string(&out).unwrap();
    std::fs::remove_file(&out).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        reply,
        format!(r#"{{"ok":true,"calls":{},"errors":0}}"#, lines.len())
    );
    assert!(lines.len() > 5, "calls were made: {}", lines.len());
    let allowed: Vec<u64> = lines
        .iter()
        .filter(|l| l["allowed"] == true)
        .map(|l| l["now_ms"].as_u64().unwrap())
        .collect();
    assert_eq!(allowed.len(), 5, "the limit holds within one window");
    for l in &lines {
        assert_eq!(l["lang"], "rust \"x\"");
        let t = l["now_ms"].as_u64().unwrap();
        // Server time on the same host; a call may end a little after `to`.
        assert!(
            t >= start + 300 && t < start + 600,
            "{t} outside the interval"
        );
    }
    d.exit();
}

#[test]
fn load_with_skew_ms_calls_on_the_caller_clock() {
    let ns = common::unique_namespace("driver-load-skew");
    let out = std::env::temp_dir().join(format!("{ns}.jsonl"));
    let mut d = Driver::start();
    let url = common::redis_url();
    d.ask(&format!(r#"{{"op":"store","kind":"redis","url":"{url}"}}"#));
    d.ask(
        &POLICY
            .replace("NS", &ns)
            .replace(r#""limit":2"#, r#""limit":5"#),
    );
    let wall = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64
    };
    // An hour behind: far from Redis's clock, so server time cannot pass for it.
    let skew: u64 = 3_600_000;
    let before = wall();
    let (start, end) = (before + 100, before + 400);
    let reply = d.ask(&format!(
        r#"{{"op":"load","lang":"rust","tenant":"t","concurrency":4,"start_at_ms":{start},"end_at_ms":{end},"ramp_ms":0,"jitter_ms":2,"skew_ms":-{skew},"out":"{out}"}}"#,
        out = out.display()
    ));
    let after = wall();
    let text = std::fs::read_to_string(&out).unwrap();
    std::fs::remove_file(&out).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        reply,
        format!(r#"{{"ok":true,"calls":{},"errors":0}}"#, lines.len())
    );
    assert!(lines.len() > 5, "calls were made: {}", lines.len());
    let mut recorded = Vec::new();
    for l in &lines {
        let t = l["now_ms"].as_u64().unwrap();
        assert!(
            (start - skew..=after - skew).contains(&t),
            "now_ms {t} is not the caller clock {} .. {}",
            start - skew,
            after - skew
        );
        if l["allowed"] == true {
            // The log records at t = max(now, newest): now + reset - W.
            recorded.push(t + l["reset_after_ms"].as_u64().unwrap() - 1000);
        }
    }
    assert_eq!(recorded.len(), 5, "the limit holds within one window");
    assert!(recorded
        .iter()
        .all(|r| (start - skew..=after - skew).contains(r)));
    for bad in ["3600001", "-3600001", "1.5", "\"5\""] {
        let reply = d.ask(&format!(
            r#"{{"op":"load","lang":"rust","tenant":"t","concurrency":1,"start_at_ms":0,"end_at_ms":0,"skew_ms":{bad},"out":"{out}"}}"#,
            out = out.display()
        ));
        assert!(
            reply.starts_with(r#"{"error":"protocol","message":"load: skew_ms must be"#),
            "skew_ms {bad}: {reply}"
        );
    }
    d.exit();
}

#[test]
fn tls_ca_file_and_acl_in_the_url_reach_the_binding() {
    let certs = common::tls::Certificates::generate("driver-server");
    let stranger = common::tls::Certificates::generate("driver-stranger");
    let port = common::free_port();
    let mut args = certs.server_args(port);
    // A user of our own in the URL (ACL); the default user is off.
    args.extend(
        [
            "--user", "default", "off", "--user", "drv", "on", ">s3cret", "~*", "+@all",
        ]
        .map(String::from),
    );
    let _own = common::OwnRedis::start_args(port, args);
    let ns = common::unique_namespace("driver-tls");
    let mut d = Driver::start();
    // The reply to the first call on a new store and policy (the limiter
    // connects on it).
    let session = |d: &mut Driver, url: &str, ca: &str| -> String {
        d.ask(&format!(
            r#"{{"op":"store","kind":"redis","url":"{url}","tls_ca_file":"{ca}"}}"#
        ));
        assert_eq!(d.ask(&POLICY.replace("NS", &ns)), r#"{"ok":true}"#);
        d.ask(r#"{"op":"acquire_at","tenant":"t","now_ms":1000}"#)
    };
    let good = format!("rediss://drv:s3cret@localhost:{port}/");
    assert_eq!(
        session(&mut d, &good, &certs.path("ca.crt")),
        r#"{"allowed":true,"remaining":1,"retry_after_ms":0,"reset_after_ms":1000,"now_ms":1000}"#
    );
    // Another CA: the server is not trusted.
    let refused = session(&mut d, &good, &stranger.path("ca.crt"));
    assert!(
        refused.starts_with(r#"{"error":"unavailable","#),
        "{refused}"
    );
    // A wrong password: the binding's permission error.
    let wrong = format!("rediss://drv:nope@localhost:{port}/");
    let denied = session(&mut d, &wrong, &certs.path("ca.crt"));
    assert!(
        denied.starts_with(r#"{"error":"permission_denied","#),
        "{denied}"
    );
    d.exit();
}

#[test]
fn the_policy_op_takes_buckets() {
    let mut d = Driver::start();
    d.ask(r#"{"op":"store","kind":"memory"}"#);
    let bucketed = POLICY
        .replace("NS", "rl")
        .replace("sliding_log", "bucketed_window")
        .replace(r#""window_ms":1000"#, r#""window_ms":1000,"buckets":4"#);
    assert_eq!(d.ask(&bucketed), r#"{"ok":true}"#);
    let key = d.ask(r#"{"op":"key","tenant":"t"}"#);
    assert!(
        key.starts_with(r#"{"ok":true,"key":"rl:{geocode:t}:bucketed:1000:4","#),
        "{key}"
    );
    // Buckets of 250 ms: a permit at 1010 is held until 1249 + 1000.
    assert_eq!(
        d.ask(r#"{"op":"acquire_at","tenant":"t","now_ms":1010}"#),
        r#"{"allowed":true,"remaining":1,"retry_after_ms":0,"reset_after_ms":1239,"now_ms":1010}"#
    );
    // Absent buckets: core's default, which must divide the window.
    let defaulted = bucketed.replace(r#","buckets":4"#, "");
    let err = d.ask(&defaulted);
    assert!(
        err.starts_with(r#"{"error":"invalid_argument","field":"buckets","#),
        "{err}"
    );
    assert_eq!(
        d.ask(&defaulted.replace(r#""window_ms":1000"#, r#""window_ms":60000"#)),
        r#"{"ok":true}"#
    );
    assert!(d
        .ask(r#"{"op":"key","tenant":"t"}"#)
        .contains(":bucketed:60000:60\""));
    // Buckets on another algorithm is core's error, never ignored.
    let err = d.ask(&POLICY.replace(r#""window_ms":1000"#, r#""window_ms":1000,"buckets":4"#));
    assert!(
        err.starts_with(r#"{"error":"invalid_argument","field":"buckets","#),
        "{err}"
    );
    // A count no u64 holds is refused on the field (docs/driver.md).
    let err = d.ask(&bucketed.replace(r#""buckets":4"#, r#""buckets":-1"#));
    assert!(
        err.starts_with(r#"{"error":"invalid_argument","field":"buckets","message":"buckets: must not be negative, got -1"#),
        "{err}"
    );
    d.exit();
}
