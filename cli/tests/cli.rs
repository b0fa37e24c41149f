//! The `slidelimit` binary as a user runs it: the demo's audited numbers and
//! acquire/peek/reset against the test redis-server.

// The helpers the library's integration tests use (the test Redis, unique
// namespaces, free ports): one copy, in rust/tests/common.
#[path = "../../rust/tests/common/mod.rs"]
mod common;

use std::process::{Command, Output};

fn slidelimit(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_slidelimit"))
        .args(args)
        .output()
        .expect("run the slidelimit binary")
}

/// `slidelimit CMD` on the test Redis, in namespace `ns`, resource
/// geocode, for `tenant`, with `extra` after.
fn on_test_redis(cmd: &str, ns: &str, tenant: &str, extra: &[&str]) -> Output {
    let url = common::redis_url();
    let target = ["--redis", &url, "--namespace", ns, "--tenant", tenant];
    slidelimit(&[&[cmd, "--resource", "geocode"][..], &target, extra].concat())
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).expect("UTF-8 output")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The summary row of one limiter: (allowed, denied, most in any rolling window, rest).
fn summary_row(report: &str, limiter: &str) -> (u64, u64, u64, String) {
    let line = report
        .lines()
        .find(|l| l.starts_with(limiter))
        .unwrap_or_else(|| panic!("no summary row for {limiter} in:\n{report}"));
    let rest = line[limiter.len()..].trim_start();
    let mut fields = rest.split_whitespace();
    let mut number = || -> u64 { fields.next().unwrap().replace(',', "").parse().unwrap() };
    let (allowed, denied, peak) = (number(), number(), number());
    (allowed, denied, peak, rest.to_owned())
}

#[test]
fn simulate_shows_the_fixed_window_burst_and_the_sliding_cap() {
    let out = slidelimit(&["simulate"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report = stdout(&out);

    let (allowed, denied, peak, rest) = summary_row(&report, "fixed window*");
    assert_eq!(allowed + denied, 3_600);
    assert_eq!(peak, 1_200, "{report}");
    // "over 600: 12:00:59.xxx-12:01:00.xxx (1.9 s)": the 1,200 came within two seconds.
    assert!(rest.contains("over 600: 12:00:59."), "{rest}");
    assert!(rest.contains("-12:01:00."), "{rest}");

    let (_, _, peak, rest) = summary_row(&report, "sliding log");
    assert_eq!(
        peak, 600,
        "the log admits a full window and never more: {rest}"
    );
    assert!(rest.contains("never over 600"));

    let (allowed, _, peak, _) = summary_row(&report, "sliding counter");
    assert!(allowed > 600 && peak >= 600, "{report}");

    // The bucketed window is exact too, with at most 60 + 1 bucket counts.
    let (_, _, peak, rest) = summary_row(&report, "bucketed window");
    assert_eq!(peak, 600, "{rest}");
    let state = report
        .split("State per tenant")
        .nth(1)
        .expect("a state paragraph");
    let buckets: u64 = state
        .split("bucketed window ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no bucket count in {state}"));
    assert!((1..=61).contains(&buckets), "{state}");
    assert!(state.contains("sliding log 600 entries"), "{state}");

    // The timeline has a row of its own for each burst second.
    assert!(report.lines().any(|l| l.starts_with("12:00:59 ")));
    let burst = report
        .lines()
        .find(|l| l.starts_with("12:01:00 "))
        .expect("a row for 12:01:00");
    assert!(burst.contains("1,200!"), "{burst}");
    assert!(report.lines().all(|l| l.chars().count() <= 100), "{report}");
}

#[test]
fn simulate_is_deterministic_and_seeded() {
    let args = ["simulate", "--pattern", "steady", "--duration-s", "30"];
    let a = slidelimit(&args);
    let b = slidelimit(&args);
    assert!(a.status.success());
    assert_eq!(a.stdout, b.stdout);
    let c = slidelimit(&[&args[..], &["--seed", "7"]].concat());
    assert!(c.status.success());
    assert_ne!(a.stdout, c.stdout, "the seed moves the request times");
}

#[test]
fn simulate_boundary_and_flags() {
    let out = slidelimit(&[
        "simulate",
        "--pattern",
        "boundary",
        "--limit",
        "50",
        "--window-ms",
        "10000",
        "--workers",
        "3",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report = stdout(&out);
    assert_eq!(summary_row(&report, "fixed window*").2, 100);
    assert_eq!(summary_row(&report, "sliding log").2, 50);
    assert!(report.contains("from 3 workers"));

    // 0, and one past the most the sliding log accepts (10,000).
    for limit in ["0", "10001"] {
        let bad = slidelimit(&["simulate", "--limit", limit]);
        assert_eq!(bad.status.code(), Some(11), "--limit {limit}");
        assert!(
            stderr(&bad).starts_with("error: invalid_argument: limit:"),
            "--limit {limit}: {}",
            stderr(&bad)
        );
    }
    let bad = slidelimit(&["simulate", "--start", "noon"]);
    assert_eq!(bad.status.code(), Some(11));
    assert!(stderr(&bad).contains("start:"));
    // Past u64 (clap would wrap nothing, but a sum could), at 2^52 + 1, and a
    // start whose run would end past 2^52: each names the start, none panics.
    for start in [
        "18446744073709551615",
        "4503599627370497",
        "4503599627370000",
    ] {
        let bad = slidelimit(&["simulate", "--start", start]);
        assert_eq!(
            bad.status.code(),
            Some(11),
            "--start {start}: {}",
            stderr(&bad)
        );
        assert!(
            stderr(&bad).starts_with("error: invalid_argument: start:"),
            "--start {start}: {}",
            stderr(&bad)
        );
    }
    // A run past 5,000,000 requests is refused before one is made (it held
    // them all: 8.5 GB at 100,000/s for a day); a timeout is checked without
    // --redis too, never ignored.
    for (args, field) in [
        (
            &["--rate", "100000", "--duration-s", "86400"][..],
            "duration_s",
        ),
        (
            &["--rate", "50001", "--duration-s", "100"][..],
            "duration_s",
        ),
        (&["--timeout-ms", "0"][..], "timeout_ms"),
        (&["--timeout-ms", "2147483648"][..], "timeout_ms"),
    ] {
        let bad = slidelimit(&[&["simulate", "--pattern", "steady"][..], args].concat());
        assert_eq!(bad.status.code(), Some(11), "{args:?}: {}", stderr(&bad));
        assert!(
            stderr(&bad).starts_with(&format!("error: invalid_argument: {field}:")),
            "{args:?}: {}",
            stderr(&bad)
        );
    }
    let most = slidelimit(&[
        "simulate",
        "--pattern",
        "steady",
        "--rate",
        "50000",
        "--duration-s",
        "100",
    ]);
    assert!(most.status.success(), "{}", stderr(&most));
}

#[test]
fn a_tenant_that_is_not_utf8_is_invalid_argument() {
    use std::os::unix::ffi::OsStrExt;
    let tenant = std::ffi::OsStr::from_bytes(b"a\xffb");
    // Checked before any connection: nothing listens on this port.
    let nobody = format!("redis://127.0.0.1:{}/", common::free_port());
    for command in ["acquire", "peek", "reset"] {
        let out = Command::new(env!("CARGO_BIN_EXE_slidelimit"))
            .args([command, "--resource", "geo", "--window-ms", "1000"])
            .args(["--limit", "5"].iter().filter(|_| command != "reset"))
            .arg("--tenant")
            .arg(tenant)
            .args(["--redis", &nobody])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(11), "{command}: {}", stderr(&out));
        assert!(
            stderr(&out).starts_with("error: invalid_argument: tenant:"),
            "{command}: {}",
            stderr(&out)
        );
    }
}

#[test]
fn simulate_on_redis_decides_like_the_embedded_engine() {
    let ns = common::unique_namespace("cli-sim");
    let url = common::redis_url();
    let memory = slidelimit(&["simulate", "--workers", "4"]);
    let redis = slidelimit(&[
        "simulate",
        "--workers",
        "4",
        "--redis",
        &url,
        "--namespace",
        &ns,
    ]);
    assert!(redis.status.success(), "{}", stderr(&redis));
    // Only the embedded engine reports the state it held (a paragraph).
    let without_engine = |o: &Output| -> Vec<String> {
        let mut in_state = false;
        stdout(o)
            .lines()
            .filter(|l| {
                in_state = l.starts_with("State per tenant") || (in_state && l.starts_with("  "));
                !in_state && !l.contains("engine:")
            })
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(without_engine(&memory), without_engine(&redis));
    // A second run starts from reset keys, so it decides the same again.
    let again = slidelimit(&[
        "simulate",
        "--workers",
        "4",
        "--redis",
        &url,
        "--namespace",
        &ns,
    ]);
    assert_eq!(redis.stdout, again.stdout);
}

#[test]
fn acquire_peek_reset_against_redis() {
    let ns = common::unique_namespace("cli-acq");
    let call = |cmd: &str, extra: &[&str]| {
        let mut args = vec!["--window-ms", "60000"];
        args.extend_from_slice(extra);
        on_test_redis(cmd, &ns, "t 1", &args)
    };
    let at = |now: &'static str| ["--limit", "2", "--now-ms", now, "--json"];

    let out = call("acquire", &at("1000"));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "{\"allowed\":true,\"remaining\":1,\"retry_after_ms\":0,\"reset_after_ms\":60000,\"now_ms\":1000}\n"
    );
    let out = call("peek", &[&at("2000")[..], &["--cost", "2"]].concat());
    assert_eq!(out.status.code(), Some(1), "denied exits 1");
    assert!(
        stdout(&out).starts_with("{\"allowed\":false,\"remaining\":1,\"retry_after_ms\":59000,")
    );
    let out = call("acquire", &at("2000"));
    assert_eq!(out.status.code(), Some(0));
    let out = call("acquire", &["--limit", "2", "--now-ms", "3000"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).starts_with("denied (cost 1): 0 remaining, retry after 58000 ms"));

    let out = call("reset", &["--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        format!("{{\"reset\":true,\"key\":\"{ns}:{{geocode:t%201}}:log:60000\"}}\n")
    );
    let out = call("acquire", &at("3000"));
    assert_eq!(out.status.code(), Some(0), "the reset emptied the log");

    // Server time when --now-ms is absent.
    let out = call("peek", &["--limit", "2", "--json"]);
    assert!(out.status.success());
    assert!(!stdout(&out).contains("\"now_ms\":3000}"));
}

#[test]
fn errors_have_a_code_and_an_exit_status() {
    let url = common::redis_url();
    let base = |resource: &'static str, redis: String, extra: &[&'static str]| {
        let mut args: Vec<String> = ["acquire", "--resource", resource, "--tenant", "t"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        args.extend(["--redis".to_owned(), redis]);
        args.extend(extra.iter().map(|s| s.to_string()));
        Command::new(env!("CARGO_BIN_EXE_slidelimit"))
            .args(&args)
            .output()
            .unwrap()
    };
    let limits = ["--limit", "5", "--window-ms", "1000"];
    let out = base("geo:code", url.clone(), &limits);
    assert_eq!(out.status.code(), Some(11));
    assert!(stderr(&out).starts_with("error: invalid_argument: resource:"));
    let out = base(
        "geo",
        url.clone(),
        &[&limits[..], &["--cost", "6"]].concat(),
    );
    assert_eq!(out.status.code(), Some(11));
    assert!(stderr(&out).starts_with("error: invalid_argument: cost:"));
    let out = base(
        "geo",
        url.clone(),
        &[&limits[..], &["--algorithm", "fixed"]].concat(),
    );
    assert!(stderr(&out).starts_with("error: invalid_argument: algorithm:"));

    let nobody = format!("redis://127.0.0.1:{}/", common::free_port());
    let out = base(
        "geo",
        nobody,
        &[&limits[..], &["--timeout-ms", "500"]].concat(),
    );
    assert_eq!(out.status.code(), Some(12), "{}", stderr(&out));
    assert!(stderr(&out).starts_with("error: unavailable:"));
    assert!(
        out.stdout.is_empty(),
        "an unreachable Redis is never a decision"
    );
}

#[test]
fn a_zero_timeout_is_invalid_argument_on_every_subcommand() {
    let url = common::redis_url();
    let target = [
        "--redis",
        url.as_str(),
        "--resource",
        "geo",
        "--tenant",
        "t",
        "--window-ms",
        "1000",
        "--timeout-ms",
        "0",
    ];
    for verb in ["acquire", "peek", "reset"] {
        let mut args = vec![verb];
        args.extend(target);
        if verb != "reset" {
            args.extend(["--limit", "1"]);
        }
        let out = slidelimit(&args);
        assert_eq!(out.status.code(), Some(11), "{verb}: {}", stderr(&out));
        assert!(
            stderr(&out).starts_with("error: invalid_argument: timeout_ms: must be at least 1 ms"),
            "{verb}: {}",
            stderr(&out)
        );
        assert!(out.stdout.is_empty(), "{verb}: no decision");
    }
}

#[test]
fn buckets_flag_selects_a_bucketed_window_and_core_checks_it() {
    let ns = common::unique_namespace("cli-bkt");
    let call = |cmd: &str, extra: &[&str]| {
        let mut args = vec!["--window-ms", "60000"];
        if cmd != "reset" {
            args.extend_from_slice(&["--limit", "2"]);
        }
        args.extend_from_slice(extra);
        on_test_redis(cmd, &ns, "t", &args)
    };
    let bucketed = |now: &'static str| {
        [
            "--algorithm",
            "bucketed_window",
            "--buckets",
            "6",
            "--now-ms",
            now,
            "--json",
        ]
    };
    // Buckets of 10 s: a permit at 1000 ms is held to 9999 + 60000 (protocol.md).
    let out = call("acquire", &bucketed("1000"));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "{\"allowed\":true,\"remaining\":1,\"retry_after_ms\":0,\"reset_after_ms\":68999,\"now_ms\":1000}\n"
    );
    assert_eq!(call("acquire", &bucketed("2000")).status.code(), Some(0));
    let out = call("acquire", &bucketed("3000"));
    assert_eq!(out.status.code(), Some(1), "denied exits 1");
    assert!(
        stdout(&out).starts_with("{\"allowed\":false,\"remaining\":0,\"retry_after_ms\":66999,"),
        "{}",
        stdout(&out)
    );
    let out = call(
        "reset",
        &["--algorithm", "bucketed_window", "--buckets", "6", "--json"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        format!("{{\"reset\":true,\"key\":\"{ns}:{{geocode:t}}:bucketed:60000:6\"}}\n")
    );
    // No --buckets: core's default (60).
    let out = call("reset", &["--algorithm", "bucketed_window", "--json"]);
    assert!(
        stdout(&out).ends_with(":bucketed:60000:60\"}\n"),
        "{}",
        stdout(&out)
    );

    // Core's errors, with exit status 11: buckets on another algorithm, a
    // count that does not divide the window, zero.
    for extra in [
        &["--buckets", "6"][..],
        &["--algorithm", "sliding_counter", "--buckets", "6"],
        &["--algorithm", "bucketed_window", "--buckets", "7"],
        &["--algorithm", "bucketed_window", "--buckets", "0"],
    ] {
        let out = call("acquire", extra);
        assert_eq!(out.status.code(), Some(11), "{extra:?}: {}", stderr(&out));
        assert!(
            stderr(&out).starts_with("error: invalid_argument: buckets:"),
            "{extra:?}: {}",
            stderr(&out)
        );
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn limits_flag_checks_several_limits_together() {
    let ns = common::unique_namespace("cli-multi");
    // 2 per second AND 3 per minute in buckets of 10 s (protocol.md, "Several limits").
    let specs = "sliding_log:2/1000,bucketed_window:3/60000/6";
    let call = |cmd: &str, extra: &[&str]| on_test_redis(cmd, &ns, "t", extra);
    let acquire = |now: &str| call("acquire", &["--limits", specs, "--now-ms", now, "--json"]);
    let decision = |now: &str, code: i32| {
        let out = acquire(now);
        assert_eq!(out.status.code(), Some(code), "at {now}: {}", stderr(&out));
        stdout(&out)
    };
    // remaining is the smallest over the limits, reset_after the largest: the
    // bucketed window holds a permit of bucket 0 until 9,999 + 60,000.
    assert_eq!(
        decision("1000", 0),
        "{\"allowed\":true,\"remaining\":1,\"retry_after_ms\":0,\"reset_after_ms\":68999,\"now_ms\":1000}\n"
    );
    assert_eq!(decision("1001", 0).matches("\"remaining\":0").count(), 1);
    // The log is full until its permit of 1,000 expires at 2,000.
    assert_eq!(
        decision("1002", 1),
        "{\"allowed\":false,\"remaining\":0,\"retry_after_ms\":998,\"reset_after_ms\":68997,\"now_ms\":1002,\"denied_by\":0}\n"
    );
    // That denial recorded nothing in the bucketed window: it admits a third.
    decision("2500", 0);
    // Now the bucketed window is full, until bucket 0 expires at 69,999.
    let out = decision("3000", 1);
    assert!(
        out.starts_with("{\"allowed\":false,\"remaining\":0,\"retry_after_ms\":66999,")
            && out.ends_with(",\"denied_by\":1}\n"),
        "{out}"
    );
    let text = call("peek", &["--limits", specs, "--now-ms", "3000"]);
    assert_eq!(text.status.code(), Some(1));
    assert!(
        stdout(&text)
            .starts_with("denied by limits[1] (cost 1): 0 remaining, retry after 66999 ms"),
        "{}",
        stdout(&text)
    );

    // reset forgets every limit's key.
    let out = call("reset", &["--limits", specs, "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        format!(
            "{{\"reset\":true,\"keys\":[\"{ns}:{{geocode:t}}:log:1000\",\"{ns}:{{geocode:t}}:bucketed:60000:6\"]}}\n"
        )
    );
    decision("3001", 0);

    // Core checks every value and names the limit; the syntax is the
    // command's own; --limits replaces the single-limit options.
    for (specs, expected) in [
        (
            "sliding_log:2/1000,sliding_log:0/10",
            "limits[1].limit: must be at least 1",
        ),
        (
            "sliding_log:2/1000,sliding_log:x/10",
            "limits[1].limit: must be a decimal integer",
        ),
        (
            "sliding_log:2/1000,fixed:2/10",
            "limits[1].algorithm: must be",
        ),
        (
            "sliding_log:2",
            "limits: expected ALGORITHM:LIMIT/WINDOW_MS[/BUCKETS], got \"sliding_log:2\"",
        ),
    ] {
        let out = call("acquire", &["--limits", specs]);
        assert_eq!(out.status.code(), Some(11), "{specs}: {}", stderr(&out));
        assert!(
            stderr(&out).starts_with(&format!("error: invalid_argument: {expected}")),
            "{specs}: {}",
            stderr(&out)
        );
        assert!(out.stdout.is_empty());
    }
    for extra in [
        ["--limit", "2"],
        ["--window-ms", "1000"],
        ["--buckets", "6"],
    ] {
        let mut args = vec!["--limits", specs];
        args.extend(extra);
        let out = call("acquire", &args);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: a usage error");
        assert!(
            stderr(&out).contains("cannot be used with"),
            "{}",
            stderr(&out)
        );
    }
}

/// Every argument is core's to check before the connect: with Redis out of
/// reach a bad tenant, cost or time is still
/// `invalid_argument` (11), not `unavailable` (12); `--json` writes the error
/// as one JSON line on stderr, the driver's form, and nothing on stdout.
#[test]
fn arguments_are_checked_before_redis_and_json_errors_are_json() {
    let nobody = format!("redis://127.0.0.1:{}/", common::free_port());
    let run = |verb: &str, tenant: &str, extra: &[&str]| {
        let mut args = vec![verb, "--redis", &nobody, "--resource", "geo"];
        args.extend([
            "--tenant",
            tenant,
            "--window-ms",
            "1000",
            "--timeout-ms",
            "300",
        ]);
        args.extend(extra);
        slidelimit(&args)
    };
    let cases: [(&str, &str, &[&str], &str); 6] = [
        ("acquire", "", &["--limit", "5"], "tenant"),
        ("peek", "", &["--limit", "5"], "tenant"),
        ("reset", "", &[], "tenant"),
        ("acquire", "t", &["--limit", "5", "--cost", "6"], "cost"),
        ("acquire", "t", &["--limit", "5", "--cost", "0"], "cost"),
        (
            "peek",
            "t",
            &["--limit", "5", "--now-ms", "9007199254740993"],
            "now_ms",
        ),
    ];
    for (verb, tenant, extra, field) in cases {
        let out = run(verb, tenant, extra);
        assert_eq!(
            out.status.code(),
            Some(11),
            "{verb} {extra:?}: {}",
            stderr(&out)
        );
        assert!(
            stderr(&out).starts_with(&format!("error: invalid_argument: {field}: ")),
            "{verb} {extra:?}: {}",
            stderr(&out)
        );

        let out = run(verb, tenant, &[extra, &["--json"][..]].concat());
        assert_eq!(out.status.code(), Some(11), "{verb} {extra:?} --json");
        assert!(out.stdout.is_empty(), "{verb} {extra:?}: no decision");
        let line = stderr(&out);
        let error: serde_json::Value = serde_json::from_str(line.trim_end())
            .unwrap_or_else(|e| panic!("{verb} {extra:?}: not one JSON line ({e}): {line}"));
        assert_eq!(error["error"], "invalid_argument", "{line}");
        assert_eq!(error["field"], field, "{line}");
        assert!(
            error["message"]
                .as_str()
                .unwrap()
                .starts_with(&format!("{field}: ")),
            "{line}"
        );
    }

    // Several URLs are seeds of a Cluster: without --cluster they are refused
    // by name, not read as one URL whose database number is the rest.
    let two = format!("{nobody},{nobody}");
    let out = slidelimit(&[
        "acquire",
        "--redis",
        &two,
        "--resource",
        "geo",
        "--tenant",
        "t",
        "--limit",
        "5",
        "--window-ms",
        "1000",
    ]);
    assert_eq!(out.status.code(), Some(11), "{}", stderr(&out));
    assert!(
        stderr(&out).starts_with("error: invalid_argument: redis: holds several URLs"),
        "{}",
        stderr(&out)
    );
    // simulate too (it used to say "Invalid database number").
    let out = slidelimit(&["simulate", "--redis", &two]);
    assert_eq!(out.status.code(), Some(11), "{}", stderr(&out));
    assert!(
        stderr(&out).starts_with("error: invalid_argument: redis: holds several URLs"),
        "{}",
        stderr(&out)
    );

    // Only a good call reaches for Redis, and is unavailable.
    let out = run("acquire", "t", &["--limit", "5", "--json"]);
    assert_eq!(out.status.code(), Some(12), "{}", stderr(&out));
    assert!(
        out.stdout.is_empty(),
        "an unreachable Redis is never a decision"
    );
    let error: serde_json::Value = serde_json::from_str(stderr(&out).trim_end()).unwrap();
    assert_eq!(error["error"], "unavailable");
    assert_eq!(error["field"], serde_json::Value::Null);
}

#[test]
fn usage_errors_name_the_flag_and_are_json_with_json() {
    let nobody = format!("redis://127.0.0.1:{}/", common::free_port());
    let target = ["--redis", &nobody, "--resource", "geo", "--tenant", "t"];
    // (arguments, the field named, a part of the message)
    let cases: [(&[&str], Option<&str>, &str); 5] = [
        (
            &["--limit", "-1", "--window-ms", "1000"],
            Some("limit"),
            "'-1'",
        ),
        (
            &["--limit", "5", "--window-ms", "1000", "--now-ms", "-3"],
            Some("now_ms"),
            "'-3'",
        ),
        (
            &["--limit", "x", "--window-ms", "1000"],
            Some("limit"),
            "'x'",
        ),
        (&["--window-ms", "1000"], Some("limit"), "--limit"),
        (
            &["--limit", "5", "--window-ms", "1000", "--bogus"],
            None,
            "--bogus",
        ),
    ];
    for (extra, field, part) in cases {
        let args = [&["acquire"][..], &target, extra].concat();
        let out = slidelimit(&args);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {}", stderr(&out));
        let text = stderr(&out);
        assert!(
            text.starts_with("error: ") && text.contains(part),
            "{extra:?}: {text}"
        );
        if let Some(flag) = field {
            let flag = format!("--{}", flag.replace('_', "-"));
            assert!(text.contains(&flag), "{extra:?} names {flag}: {text}");
        }

        let out = slidelimit(&[&args[..], &["--json"]].concat());
        assert_eq!(out.status.code(), Some(2), "{extra:?} --json");
        assert!(out.stdout.is_empty(), "{extra:?}: no decision");
        let line = stderr(&out);
        assert_eq!(line.lines().count(), 1, "{extra:?}: one line: {line}");
        let error: serde_json::Value = serde_json::from_str(line.trim_end())
            .unwrap_or_else(|e| panic!("{extra:?}: not JSON ({e}): {line}"));
        assert_eq!(error["error"], "invalid_argument", "{line}");
        let message = error["message"].as_str().unwrap();
        assert!(message.contains(part), "{line}");
        match field {
            Some(name) => {
                assert_eq!(error["field"], name, "{line}");
                assert!(message.starts_with(&format!("{name}: ")), "{line}");
            }
            None => assert!(error["field"].is_null(), "{line}"),
        }
    }

    // Help is still help, with or without --json.
    let out = slidelimit(&["acquire", "--help", "--json"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout(&out).contains("Usage: slidelimit acquire"));
    // The demo takes a negative number to its flag, and says what is wrong.
    let out = slidelimit(&["simulate", "--limit", "-5"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("'-5' for '--limit"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn check_server_names_what_breaks_the_limit() {
    use common::OwnRedis;
    // Eviction breaks the limit: a problem, exit 1.
    let evicting =
        OwnRedis::start_with(&["--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru"]);
    let out = slidelimit(&["check-server", "--redis", &evicting.url()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.starts_with(&format!(
            "{}:\n  problem evicts_keys: maxmemory-policy is allkeys-lru",
            evicting.url()
        )),
        "{text}"
    );
    assert!(text.contains("\n  note no_aof: "), "{text}");
    // A sound server (AOF on): nothing; the password in the URL is not shown.
    let sound = OwnRedis::start_with(&["--appendonly", "yes", "--requirepass", "s3cret"]);
    let with_password = format!("redis://:s3cret@127.0.0.1:{}/", sound.port);
    let out = slidelimit(&["check-server", "--redis", &with_password]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        format!("{}: nothing to report\n", sound.url())
    );
    // A replica: every acquire would be refused.
    let replica = OwnRedis::start_with(&["--replicaof", "127.0.0.1", &evicting.port.to_string()]);
    let out = slidelimit(&["check-server", "--redis", &replica.url()]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("  problem replica: "),
        "{}",
        stdout(&out)
    );
    // --json: one line per server, in the order given.
    let both = format!("{with_password},{}", evicting.url());
    let out = slidelimit(&["check-server", "--json", "--redis", &both]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let lines: Vec<serde_json::Value> = stdout(&out)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[0]["server"], sound.url().as_str());
    assert_eq!(lines[0]["findings"], serde_json::json!([]));
    assert_eq!(lines[1]["findings"][0]["severity"], "problem");
    assert_eq!(lines[1]["findings"][0]["code"], "evicts_keys");
    // Out of reach: unavailable (12), and the servers after it are still
    // checked; the error names its server, with no password, even one a
    // unix socket's URL carries in its query.
    let unreachable = "redis://:hidden@127.0.0.1:1/";
    let out = slidelimit(&[
        "check-server",
        "--timeout-ms",
        "500",
        "--redis",
        &format!("{unreachable},{with_password}"),
    ]);
    assert_eq!(out.status.code(), Some(12), "{}", stderr(&out));
    assert!(
        stderr(&out).starts_with("error: redis://127.0.0.1:1/: unavailable: "),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        stdout(&out),
        format!("{}: nothing to report\n", sound.url())
    );
    let socket = "redis+unix:///nonexistent/slidelimit.sock?db=0&user=u&pass=s3cret";
    let out = slidelimit(&["check-server", "--json", "--redis", socket]);
    assert_eq!(out.status.code(), Some(12), "{}", stderr(&out));
    let line: serde_json::Value = serde_json::from_str(stderr(&out).trim()).expect("one JSON line");
    assert_eq!(
        line["server"],
        "redis+unix:///nonexistent/slidelimit.sock?db=0"
    );
    assert_eq!(line["error"], "unavailable");
    assert!(!stderr(&out).contains("s3cret"), "{}", stderr(&out));
    // A user without INFO: permission_denied (16).
    let mut admin = evicting.connection();
    redis::cmd("ACL")
        .arg(&["SETUSER", "noinfo", "on", ">pw", "+ping"])
        .exec(&mut admin)
        .unwrap();
    let out = slidelimit(&[
        "check-server",
        "--json",
        "--redis",
        &format!("redis://noinfo:pw@127.0.0.1:{}/", evicting.port),
    ]);
    assert_eq!(out.status.code(), Some(16), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("\"permission_denied\""),
        "{}",
        stderr(&out)
    );
}

/// A window of a year leaves almost every second of the run quiet: each
/// quiet stretch is one row, and memory follows the requests, not the span
/// (one record per second of a boundary run took about 10 GB). Run under a
/// 1 GB address-space limit, so that holding the span fails the test.
#[test]
fn simulate_with_a_window_of_a_year_holds_the_requests_not_the_seconds() {
    let bin = env!("CARGO_BIN_EXE_slidelimit");
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -v 1048576 && exec '{bin}' simulate --window-ms 31536000000 --pattern boundary"
        ))
        .output()
        .expect("run the slidelimit binary under sh");
    assert!(out.status.success(), "{}", stderr(&out));
    let report = stdout(&out);
    // Three rounds two windows apart: each finds the window empty and takes
    // the whole limit, and no rolling window holds more than it.
    let (allowed, _, most, _) = summary_row(&report, "sliding log");
    assert_eq!((allowed, most), (3 * 600, 600), "{report}");
}

/// No password reaches the output: not in `--help` (which showed
/// SLIDELIMIT_REDIS_URL's value), not for a URL whose `//` is missing (the
/// URL type keeps its user and password), not in simulate's engine line.
#[test]
fn no_password_is_printed_by_help_a_hostless_url_or_simulate() {
    for cmd in ["acquire", "peek", "reset", "check-server"] {
        let out = Command::new(env!("CARGO_BIN_EXE_slidelimit"))
            .args([cmd, "--help"])
            .env("SLIDELIMIT_REDIS_URL", "redis://alice:s3cret@127.0.0.1:1/")
            .output()
            .expect("run the slidelimit binary");
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(
            stdout(&out).contains("SLIDELIMIT_REDIS_URL"),
            "{}",
            stdout(&out)
        );
        assert!(!stdout(&out).contains("s3cret"), "{cmd}: {}", stdout(&out));
    }
    for url in [
        "redis:alice:s3cret@127.0.0.1:1",
        "redis:/alice:s3cret@127.0.0.1:1",
        "redis:///alice:s3cret@127.0.0.1:1",
    ] {
        let out = slidelimit(&["check-server", "--timeout-ms", "500", "--redis", url]);
        assert_ne!(out.status.code(), Some(0), "{url}");
        let text = stdout(&out) + &stderr(&out);
        assert!(!text.contains("s3cret"), "{url}: {text}");
    }
    // The test Redis's default user has no password: any password works.
    let url = common::redis_url().replacen("redis://", "redis://default:s3cret@", 1);
    let ns = common::unique_namespace("cli-sim-url");
    let out = slidelimit(&[
        "simulate",
        "--workers",
        "1",
        "--redis",
        &url,
        "--namespace",
        &ns,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).contains("engine: Redis at redis://"),
        "{}",
        stdout(&out)
    );
    assert!(!stdout(&out).contains("s3cret"), "{}", stdout(&out));
}

/// A reader that goes before the decision is printed (`| head -0`): the
/// permit is taken either way, so the exit status still tells the decision,
/// and nothing panics (exit 101).
#[test]
fn a_reader_that_has_gone_leaves_the_exit_status_to_the_decision() {
    let ns = common::unique_namespace("cli-pipe");
    let url = common::redis_url();
    for cmd in ["acquire", "reset"] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_slidelimit"))
            .args([
                cmd,
                "--resource",
                "geocode",
                "--redis",
                &url,
                "--namespace",
                &ns,
            ])
            .args(["--tenant", "t", "--window-ms", "60000"])
            .args(if cmd == "acquire" {
                &["--limit", "5"][..]
            } else {
                &[][..]
            })
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("run the slidelimit binary");
        // Closed before the binary can have connected to Redis.
        drop(child.stdout.take());
        let out = child.wait_with_output().expect("wait for slidelimit");
        assert_eq!(out.status.code(), Some(0), "{cmd}: {}", stderr(&out));
        assert!(
            !stderr(&out).contains("panicked"),
            "{cmd}: {}",
            stderr(&out)
        );
    }
}
