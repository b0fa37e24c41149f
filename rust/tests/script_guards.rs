//! The scripts guard themselves against a real redis-server: arguments a
//! binding should never send are rejected as core rejects them (same code,
//! same field, nothing written), and a key of the right type holding data
//! slidelimit did not write is an error before any write, never an admission.

mod common;

use common::{raw_connection, redis_url, unique_namespace};
use slidelimit::{blocking, Algorithm, ErrorCode, MemoryEngine, Mode, Options, Policy, Script};
use slidelimit_core::{
    map_server_error, ScriptCall, ServerErrorAction, MAX_BUCKETS, MAX_LOG_LIMIT,
};

/// Sends the script's text with EVAL (no SHA, no binding in between).
fn eval_raw(
    con: &mut redis::Connection,
    script: Script,
    key: &str,
    args: &[&str],
) -> Result<Vec<i64>, redis::RedisError> {
    redis::cmd("EVAL")
        .arg(script.text())
        .arg(1)
        .arg(key)
        .arg(args)
        .query(con)
}

/// The code core gives the error reply, and the field it names, if any.
fn classify(e: &redis::RedisError) -> (ErrorCode, Option<String>) {
    let text = match (e.code(), e.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        (Some(code), None) => code.to_owned(),
        _ => panic!("not a server error reply: {e:?}"),
    };
    // Core's table, as a binding maps the reply (the field is core's name for it).
    let ServerErrorAction::Fail(error) = map_server_error(&text, "k", Algorithm::SlidingLog) else {
        panic!("not a final error: {text}")
    };
    (error.code(), error.field().map(str::to_owned))
}

fn exists(con: &mut redis::Connection, key: &str) -> bool {
    redis::cmd("EXISTS").arg(key).query::<i64>(con).unwrap() == 1
}

/// Every bad argument of the issue and more: (limit, window_ms, cost, now_ms)
/// and the field at fault. Both the scripts and the in-memory engine must
/// answer invalid_argument naming it.
const BAD: &[([&str; 4], &str)] = &[
    (["10", "60000", "-1", "1000000"], "cost"),
    (["10", "60000", "0", "1000000"], "cost"),
    (["10", "60000", "1.5", "1000000"], "cost"),
    (["10", "60000", "0x2", "1000000"], "cost"),
    (["10", "60000", "1e0", "1000000"], "cost"),
    (["10", "60000", " 5", "1000000"], "cost"),
    (["10", "60000", "5 ", "1000000"], "cost"),
    (["10", "60000", "+5", "1000000"], "cost"),
    (["10", "60000", "", "1000000"], "cost"),
    (["10", "60000", "11", "1000000"], "cost"),
    (["10", "60000", "inf", "1000000"], "cost"),
    (
        ["10", "60000", "99999999999999999999999", "1000000"],
        "cost",
    ),
    (["0", "60000", "1", "1000000"], "limit"),
    (["-10", "60000", "1", "1000000"], "limit"),
    (["10.0", "60000", "1", "1000000"], "limit"),
    (["1e1", "60000", "1", "1000000"], "limit"),
    (["nan", "60000", "1", "1000000"], "limit"),
    (["10", "0", "1", "1000000"], "window_ms"),
    (["10", "6e4", "1", "1000000"], "window_ms"),
    (["10", "0x10", "1", "1000000"], "window_ms"),
    (["67108865", "67108864", "1", "1000000"], "limit"),
    (["10", "99999999999999999999999", "1", "1000000"], "limit"),
    (["10", "60000", "1", "-1"], "now_ms"),
    (["10", "60000", "1", "1.5"], "now_ms"),
    (["10", "60000", "1", " 1"], "now_ms"),
    (["10", "60000", "1", "1e6"], "now_ms"),
    (["10", "60000", "1", "4503599627370497"], "now_ms"),
    (["10", "60000", "1", "99999999999999999999999"], "now_ms"),
    // The first field at fault, in the order core checks them.
    (["x", "0", "-1", "y"], "limit"),
    (["0", "0", "0", "y"], "now_ms"),
    (["0", "0", "0", "1"], "limit"),
    (["10", "0", "11", "1"], "window_ms"),
    (["10", "60000", "11", "4503599627370497"], "cost"),
];

#[test]
fn bad_arguments_are_invalid_argument_and_write_nothing() {
    let mut con = raw_connection();
    let ns = unique_namespace("args");
    let engine = MemoryEngine::new();
    let over_cap = (MAX_LOG_LIMIT + 1).to_string();
    let log_only: [([&str; 4], &str); 2] = [
        ([over_cap.as_str(), "60000", "1", "1000000"], "limit"),
        ([over_cap.as_str(), "60000", "1", ""], "limit"),
    ];
    // The bucketed window's fifth argument, checked after limit and
    // window_ms and before cost and now_ms (as core checks them).
    let over_buckets = (MAX_BUCKETS + 1).to_string();
    let bucketed_only: Vec<(Vec<&str>, &str)> = vec![
        (vec!["10", "60000", "1", "1000000", "0"], "buckets"),
        (
            vec!["10", "60000", "1", "1000000", &over_buckets],
            "buckets",
        ),
        (vec!["10", "60000", "1", "1000000", "7"], "buckets"),
        (vec!["10", "60000", "1", "1000000", "x"], "buckets"),
        (vec!["10", "60000", "1", "1000000", ""], "buckets"),
        (vec!["10", "60000", "1", "1000000", "1.5"], "buckets"),
        (vec!["10", "60000", "1", "1000000", "-60"], "buckets"),
        (vec!["0", "60000", "1", "1000000", "7"], "limit"),
        (vec!["10", "0", "1", "1000000", "7"], "window_ms"),
        (vec!["10", "60000", "0", "1000000", "7"], "buckets"),
        (vec!["10", "60000", "1", "4503599627370497", "0"], "buckets"),
    ];
    let mut checked = 0;
    for script in Script::ALL {
        // The multi-limit script has its own layout (multi_limit_arguments_are_checked).
        let Some(algorithm) = script.algorithm() else {
            continue;
        };
        let bucketed = algorithm == Algorithm::BucketedWindow;
        let key = match bucketed {
            true => format!("{ns}:{{geocode:t}}:bucketed:60000:60"),
            false => format!("{ns}:{{geocode:t}}:{}:60000", algorithm.key_tag()),
        };
        // Every shared case, with a valid bucket count for the bucketed window.
        let mut cases: Vec<(Vec<&str>, &str)> = BAD
            .iter()
            .chain(
                log_only
                    .iter()
                    .filter(|_| algorithm == Algorithm::SlidingLog),
            )
            .map(|(args, field)| {
                let mut args = args.to_vec();
                if bucketed {
                    args.push("60");
                }
                (args, *field)
            })
            .collect();
        if bucketed {
            cases.extend(bucketed_only.iter().cloned());
        }
        for (args, field) in &cases {
            let e = eval_raw(&mut con, script, &key, args)
                .expect_err(&format!("{script:?} {args:?} must fail"));
            let (code, named) = classify(&e);
            assert_eq!(code, ErrorCode::InvalidArgument, "{script:?} {args:?}: {e}");
            assert_eq!(named.as_deref(), Some(*field), "{script:?} {args:?}: {e}");
            assert!(!exists(&mut con, &key), "{script:?} {args:?} wrote the key");
            // The in-memory engine answers the same.
            let call = ScriptCall {
                script,
                keys: vec![key.clone()],
                args: args.iter().map(|a| a.to_string()).collect(),
            };
            let mem = engine.eval(&call, 1_000_000).unwrap_err();
            assert_eq!(mem.code(), code, "{script:?} {args:?}: {mem}");
            assert_eq!(mem.field(), Some(*field), "{script:?} {args:?}: {mem}");
            checked += 1;
        }
        // Wrong shapes are script errors, for the scripts and the engine alike.
        let shapes: [&[&str]; 3] = [
            &["10", "60000", "1"],
            &["10", "60000", "1", "", ""][..if bucketed { 4 } else { 5 }],
            &["10", "60000", "1", "", "60", "60"],
        ];
        for args in shapes {
            let e = eval_raw(&mut con, script, &key, args).unwrap_err();
            assert_eq!(
                classify(&e).0,
                ErrorCode::ScriptError,
                "{script:?} {args:?}: {e}"
            );
            let call = ScriptCall {
                script,
                keys: vec![key.clone()],
                args: args.iter().map(|a| a.to_string()).collect(),
            };
            let mem = engine.eval(&call, 1_000_000).unwrap_err();
            assert_eq!(
                mem.code(),
                ErrorCode::ScriptError,
                "{script:?} {args:?}: {mem}"
            );
        }
        // The bounds themselves pass (and write, for acquire): delete after.
        let cap = MAX_LOG_LIMIT.to_string();
        let max_buckets = MAX_BUCKETS.to_string();
        for args in [
            ["10", "60000", "10", "", "60"],
            ["10", "60000", "1", "4503599627370496", "60"],
            ["010", "060000", "01", "0", "060"],
            [cap.as_str(), "60000", "1", "1000000", "1"],
            ["1", "4503599627370496", "1", "1000000", "1"],
            ["10", "3600000", "1", "1000000", max_buckets.as_str()],
        ] {
            let args = &args[..if bucketed { 5 } else { 4 }];
            let reply = eval_raw(&mut con, script, &key, args)
                .unwrap_or_else(|e| panic!("{script:?} {args:?}: {e}"));
            assert_eq!(reply.len(), 5);
            let _: i64 = redis::cmd("DEL").arg(&key).query(&mut con).unwrap();
        }
    }
    assert_eq!(engine.key_count(), 0);
    eprintln!("script guards: {checked} bad argument lists, all invalid_argument, nothing written");
}

// ------------------------------------------------------------ foreign data

const T: u64 = 1_800_000_000_000;

fn policy(ns: &str, algorithm: Algorithm, limit: u64) -> Policy {
    Policy::new(ns, "geocode", algorithm, limit, 60_000).unwrap()
}

/// A list's entries and its TTL.
fn list_and_ttl(con: &mut redis::Connection, key: &str) -> (Vec<String>, i64) {
    let entries: Vec<String> = redis::cmd("LRANGE")
        .arg(key)
        .arg(0)
        .arg(-1)
        .query(con)
        .unwrap();
    let ttl: i64 = redis::cmd("PTTL").arg(key).query(con).unwrap();
    (entries, ttl)
}

/// A key's serialized value (`DUMP`, any type) and TTL.
fn dump_and_ttl(con: &mut redis::Connection, key: &str) -> (Vec<u8>, i64) {
    let dump: Vec<u8> = redis::cmd("DUMP").arg(key).query(con).unwrap();
    let ttl: i64 = redis::cmd("PTTL").arg(key).query(con).unwrap();
    (dump, ttl)
}

/// Has `store` write the policy's key without a TTL, then checks that
/// acquires and peeks (of cost 1 and of the limit) at each time are
/// wrong_type and leave the key exactly as it was (no admission, no write,
/// still no TTL).
fn assert_foreign_stored(
    algorithm: Algorithm,
    limit: u64,
    what: &str,
    times: &[u64],
    store: impl FnOnce(&mut redis::Connection, &str),
) {
    let mut con = raw_connection();
    let ns = unique_namespace("foreign");
    let p = policy(&ns, algorithm, limit);
    let key = p.key("t").unwrap();
    store(&mut con, &key);
    let before = dump_and_ttl(&mut con, &key);
    assert_eq!(before.1, -1, "stored without a TTL");
    let limiter = blocking::Limiter::connect(&redis_url(), p, Options::default()).unwrap();
    for &now in times {
        for cost in [1, limit] {
            for mode in [Mode::Acquire, Mode::Peek] {
                let result = match mode {
                    Mode::Acquire => limiter.acquire_at("t", cost, now),
                    Mode::Peek => limiter.peek_at("t", cost, now),
                };
                let e = result.expect_err(&format!(
                    "{algorithm:?} {what} at {now} cost {cost} {mode:?} must fail"
                ));
                assert_eq!(e.code(), ErrorCode::WrongType, "{e}");
                assert!(e.message().contains("data slidelimit did not write"), "{e}");
                assert_eq!(
                    dump_and_ttl(&mut con, &key),
                    before,
                    "{what} at {now} {mode:?} changed the key"
                );
            }
        }
    }
    let _: i64 = redis::cmd("DEL").arg(&key).query(&mut con).unwrap();
}

/// A list (the log) or hash field/value pairs (the counter) that
/// slidelimit did not write: see `assert_foreign_stored`.
fn assert_foreign_rejected(algorithm: Algorithm, limit: u64, items: &[&str], times: &[u64]) {
    let write = match algorithm {
        Algorithm::SlidingLog => "RPUSH",
        Algorithm::SlidingCounter => "HSET",
        Algorithm::BucketedWindow => unreachable!("a bucketed window is a string"),
    };
    assert_foreign_stored(
        algorithm,
        limit,
        &format!("{items:?}"),
        times,
        |con, key| {
            let _: i64 = redis::cmd(write).arg(key).arg(items).query(con).unwrap();
        },
    );
}

#[test]
fn a_counter_key_with_a_foreign_field_is_an_error_before_any_write() {
    // The case: the first acquire used to record a permit and then
    // fail, leaving the key without a TTL for good.
    assert_foreign_rejected(
        Algorithm::SlidingCounter,
        10,
        &["note", "hello"],
        &[T, T + 1],
    );
    // A foreign field next to a real-looking one.
    let old = (T - T % 60_000 - 120_000).to_string();
    assert_foreign_rejected(
        Algorithm::SlidingCounter,
        10,
        &[&old, "3", "note", "hello"],
        &[T],
    );
}

#[test]
fn a_counter_key_with_a_count_that_is_not_an_integer_is_an_error() {
    let cur = (T - T % 60_000).to_string();
    let prev = (T - T % 60_000 - 60_000).to_string();
    for bad in [
        "hello",
        "1.5",
        "-3",
        "",
        "inf",
        "nan",
        "1e300",
        "4503599627370497",
        // Whole numbers as Lua reads them, which HINCRBY refuses.
        "1.0",
        "01",
        "1e0",
        "0x1",
        " 1",
        "+1",
    ] {
        assert_foreign_rejected(Algorithm::SlidingCounter, 10, &[&cur, bad], &[T]);
        assert_foreign_rejected(Algorithm::SlidingCounter, 10, &[&prev, bad], &[T]);
    }
}

#[test]
fn a_log_key_with_entries_that_are_not_timestamps_is_an_error_before_any_write() {
    // The case, at times where the head is live, expired, or both.
    let items = ["1000", "x", "1000", "1000", "1000", "1000"];
    assert_foreign_rejected(Algorithm::SlidingLog, 10, &items, &[1500, 1_000_000, T]);
    for bad in [
        "x",
        "1.5",
        "-3",
        "",
        "inf",
        "nan",
        "1e300",
        "4503599627370497",
    ] {
        // The oldest entry, the second oldest, the newest.
        assert_foreign_rejected(Algorithm::SlidingLog, 10, &[bad, "1000"], &[1500, T]);
        assert_foreign_rejected(Algorithm::SlidingLog, 10, &["1000", bad], &[1500, T]);
        assert_foreign_rejected(
            Algorithm::SlidingLog,
            10,
            &["1000", "1000", "1000", bad],
            &[1500],
        );
    }
}

#[test]
fn foreign_entries_deep_in_a_log_are_found_where_the_script_reads() {
    // A binary-search probe after an idle gap: 101 expired entries and a live
    // newest one (were the newest expired too, all would be, with no search),
    // the first probe (index 51) is foreign.
    let newest = (T - 1).to_string();
    let mut items = vec!["1000"; 102];
    items[51] = "x";
    items[101] = &newest;
    assert_foreign_rejected(Algorithm::SlidingLog, 200, &items, &[T]);
    // The k-th oldest entry of a denial: limit 5, five live entries, cost 3
    // needs the third (index 2), which neither the head nor the newest is.
    let items = ["1000", "1000", "x", "1000", "1000"];
    let mut con = raw_connection();
    let ns = unique_namespace("foreign");
    let p = policy(&ns, Algorithm::SlidingLog, 5);
    let key = p.key("t").unwrap();
    let _: i64 = redis::cmd("RPUSH")
        .arg(&key)
        .arg(&items)
        .query(&mut con)
        .unwrap();
    let limiter = blocking::Limiter::connect(&redis_url(), p, Options::default()).unwrap();
    let e = limiter.acquire_at("t", 3, 1500).unwrap_err();
    assert_eq!(e.code(), ErrorCode::WrongType, "{e}");
    assert_eq!(
        list_and_ttl(&mut con, &key),
        (items.map(String::from).to_vec(), -1)
    );
    let _: i64 = redis::cmd("DEL").arg(&key).query(&mut con).unwrap();
}

/// A bucketed window's header (lua/bucketed_window.lua): the tag for
/// `buckets`, then T, S, C, F and CF, little-endian.
fn bucketed_header(buckets: u32, fields: [i64; 5]) -> Vec<u8> {
    let mut bytes = (0x5342_0000u32 + buckets).to_le_bytes().to_vec();
    for field in fields {
        bytes.extend_from_slice(&field.to_le_bytes());
    }
    bytes
}

/// A bucketed window's string that slidelimit did not write (limit 10, 60
/// buckets over 60 s): see `assert_foreign_stored`.
fn assert_foreign_bucketed(value: &[u8], times: &[u64]) {
    let what = format!("{value:?}");
    assert_foreign_stored(Algorithm::BucketedWindow, 10, &what, times, |con, key| {
        let _: () = redis::cmd("SET").arg(key).arg(value).query(con).unwrap();
    });
}

#[test]
fn a_bucketed_key_holding_what_it_never_writes_is_an_error_before_any_write() {
    // 60 buckets of 1,000 ms over 60 s; B is the bucket of T.
    let b = (T / 1000) as i64;
    let t = T as i64;
    let header = |fields| bucketed_header(60, fields);
    // One permit at T is a state the script could have written; each case
    // below breaks one thing it checks.
    assert_eq!(header([t, 1, 1, b, 1]).len(), 44);
    // The controls: what the script writes is accepted (one permit held at
    // T; two held, the oldest expiring at T + 56,000 with its slots there).
    let expiring = header([t, 2, 1, b - 5, 1]);
    for (value, now, remaining) in [
        (header([t, 1, 1, b, 1]), T, 8),
        ([expiring.clone(), vec![0; 8 * 61]].concat(), T + 56_000, 8),
    ] {
        let mut con = raw_connection();
        let p = policy(&unique_namespace("foreign"), Algorithm::BucketedWindow, 10);
        let key = p.key("t").unwrap();
        let _: () = redis::cmd("SET")
            .arg(&key)
            .arg(&value)
            .arg("PX")
            .arg(60_000)
            .query(&mut con)
            .unwrap();
        let limiter = blocking::Limiter::connect(&redis_url(), p, Options::default()).unwrap();
        let d = limiter.acquire_at("t", 1, now).unwrap();
        assert_eq!((d.allowed, d.remaining), (true, remaining), "{value:?}");
        let _: i64 = redis::cmd("DEL").arg(&key).query(&mut con).unwrap();
    }
    let mut cases: Vec<Vec<u8>> = vec![
        b"hello".to_vec(),
        vec![0; 44],
        bucketed_header(10, [t, 1, 1, b, 1]),
        header([-1, 1, 1, b, 1]),
        header([(1 << 52) + 1, 1, 1, b, 1]),
        header([t, 1, 0, b, 1]),
        header([t, (1 << 52) + 1, 1, b, 1]),
        header([t, 1, 1, b, 0]),
        header([t, 1, 1, b + 1, 1]),
        header([t, 2, 1, b - 61, 1]),
        // The oldest bucket and the newest together hold more than S says.
        header([t, 2, 1, b - 1, 2]),
        // All permits in the newest bucket, but S and C disagree.
        header([t, 2, 1, b, 1]),
    ];
    // A header one byte short.
    cases.push(header([t, 1, 1, b, 1])[..43].to_vec());
    for value in &cases {
        assert_foreign_bucketed(value, &[T]);
    }
    // The oldest bucket (B - 5) has expired at T + 56,000, so the check reads
    // the slots after it: here there are none.
    assert_foreign_bucketed(&expiring, &[T + 56_000]);
    // ... or one holds a negative count.
    let mut ring = [expiring.clone(), vec![0; 8 * 61]].concat();
    let slot = 44 + 8 * ((b - 4) % 61) as usize;
    ring[slot..slot + 8].copy_from_slice(&(-1i64).to_le_bytes());
    assert_foreign_bucketed(&ring, &[T + 56_000]);
    // S larger than the buckets hold: a denial's walk runs out of buckets.
    let short = [header([t, 20, 1, b - 1, 1]), vec![0; 8 * 61]].concat();
    assert_foreign_bucketed(&short, &[T]);
    // A key of another type is the server's own WRONGTYPE.
    let mut con = raw_connection();
    let p = policy(&unique_namespace("foreign"), Algorithm::BucketedWindow, 10);
    let key = p.key("t").unwrap();
    let _: () = redis::cmd("HSET")
        .arg(&key)
        .arg("t")
        .arg(T)
        .query(&mut con)
        .unwrap();
    let limiter = blocking::Limiter::connect(&redis_url(), p, Options::default()).unwrap();
    let e = limiter.acquire_at("t", 1, T).unwrap_err();
    assert_eq!(e.code(), ErrorCode::WrongType, "{e}");
    assert!(e.message().contains("WRONGTYPE"), "{e}");
    let _: i64 = redis::cmd("DEL").arg(&key).query(&mut con).unwrap();
}

/// The multi-limit script's own checks (its argument layout, no key twice,
/// algorithm names, buckets only for the bucketed window) and each limit's
/// by its algorithm's own rules: Redis and the engine give the same code and
/// field, and write nothing.
#[test]
fn multi_limit_arguments_are_checked() {
    let mut con = raw_connection();
    let engine = MemoryEngine::new();
    let ns = unique_namespace("multi-guards");
    let keys = [
        format!("{ns}:{{geocode:t}}:log:1000"),
        format!("{ns}:{{geocode:t}}:bucketed:60000:60"),
    ];
    let good = |cost: &'static str| {
        vec![
            cost,
            "",
            "sliding_log",
            "2",
            "1000",
            "",
            "bucketed_window",
            "10",
            "60000",
            "60",
        ]
    };
    let with = |i: usize, v: &'static str| {
        let mut a = good("1");
        a[i] = v;
        a
    };
    // (ARGV, KEYS, the code and field both must answer)
    type Case<'a> = (Vec<&'a str>, &'a [String], ErrorCode, Option<&'a str>);
    let cases: Vec<Case> = vec![
        (
            with(0, "x"),
            &keys,
            ErrorCode::InvalidArgument,
            Some("cost"),
        ),
        (
            with(1, "1.5"),
            &keys,
            ErrorCode::InvalidArgument,
            Some("now_ms"),
        ),
        (
            with(2, "fixed"),
            &keys,
            ErrorCode::InvalidArgument,
            Some("algorithm"),
        ),
        (
            with(5, "60"),
            &keys,
            ErrorCode::InvalidArgument,
            Some("buckets"),
        ),
        (
            with(3, "0"),
            &keys,
            ErrorCode::InvalidArgument,
            Some("limit"),
        ),
        (
            with(9, "7"),
            &keys,
            ErrorCode::InvalidArgument,
            Some("buckets"),
        ),
        (good("3"), &keys, ErrorCode::InvalidArgument, Some("cost")),
        (good("1")[..9].to_vec(), &keys, ErrorCode::ScriptError, None),
        (good("1"), &keys[..1], ErrorCode::ScriptError, None),
    ];
    let twice = [keys[0].clone(), keys[0].clone()];
    let mut cases = cases;
    cases.push((good("1"), &twice, ErrorCode::ScriptError, None));
    for (script, mode) in [
        (Script::multi_limit(Mode::Acquire), "acquire"),
        (Script::multi_limit(Mode::Peek), "peek"),
    ] {
        for (args, keys, code, field) in &cases {
            let e = redis::cmd("EVAL")
                .arg(script.text())
                .arg(keys.len())
                .arg(*keys)
                .arg(args)
                .query::<Vec<i64>>(&mut con)
                .expect_err(&format!("{mode} {args:?} must fail"));
            let (got, named) = classify(&e);
            assert_eq!(
                (got, named.as_deref()),
                (*code, *field),
                "{mode} {args:?}: {e}"
            );
            for key in keys.iter() {
                assert!(!exists(&mut con, key), "{mode} {args:?} wrote {key}");
            }
            let call = ScriptCall {
                script,
                keys: keys.to_vec(),
                args: args.iter().map(|a| a.to_string()).collect(),
            };
            let mem = engine.eval(&call, 1_000_000).unwrap_err();
            assert_eq!(
                (mem.code(), mem.field()),
                (*code, *field),
                "{mode} {args:?}: {mem}"
            );
        }
    }
    // And the good call passes on both, with six integers.
    let reply: Vec<i64> = redis::cmd("EVAL")
        .arg(Script::multi_limit(Mode::Acquire).text())
        .arg(2)
        .arg(&keys)
        .arg(good("1"))
        .query(&mut con)
        .unwrap();
    assert_eq!(reply.len(), 6);
    assert_eq!(&reply[..3], &[1, 1, 0]);
    redis::cmd("DEL").arg(&keys).query::<i64>(&mut con).unwrap();
}
