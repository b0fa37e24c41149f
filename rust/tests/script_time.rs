//! No check may hold Redis for long: Redis runs a script to its end, every
//! other client waits (BUSY) and SCRIPT KILL cannot stop a script that wrote.
//! The sliding log's work grows with the cost it pushes and the expired
//! entries it trims, so core caps its limit (`MAX_LOG_LIMIT`); this test
//! measures the worst cases at the cap with the server's own clock (SLOWLOG,
//! microseconds spent in the command) on a redis-server of its own, and
//! requires each under 5 ms.
//!
//! Other processes on the machine can only add time to a measurement, so
//! each case is repeated and its fastest run is held to the bound; the
//! slowest is printed too.

mod common;

use common::OwnRedis;
use slidelimit::{Algorithm, Mode, Policy, Script};
use slidelimit_core::MAX_LOG_LIMIT;

const BOUND_US: u64 = 5_000;
const REPEAT: usize = 5;
const WINDOW_MS: u64 = 60_000;
const T0: u64 = 1_800_000_000_000;

struct Case {
    what: &'static str,
    /// Entries stored before the check: (first timestamp, spacing, count).
    state: Option<(u64, u64, u64)>,
    cost: u64,
    now: u64,
    mode: Mode,
    allowed: bool,
}

fn slowlog_us(con: &mut redis::Connection, verb: &str) -> u64 {
    let entries: Vec<redis::Value> = redis::cmd("SLOWLOG").arg("GET").arg(16).query(con).unwrap();
    for entry in entries {
        let redis::Value::Array(fields) = entry else {
            continue;
        };
        let (Some(redis::Value::Int(us)), Some(redis::Value::Array(args))) =
            (fields.get(2), fields.get(3))
        else {
            continue;
        };
        let first = match args.first() {
            Some(redis::Value::BulkString(b)) => String::from_utf8_lossy(b).to_uppercase(),
            _ => continue,
        };
        if first == verb {
            return *us as u64;
        }
    }
    panic!("no {verb} in SLOWLOG");
}

#[test]
fn no_check_at_the_log_cap_holds_redis_for_long() {
    let own = OwnRedis::start();
    let mut con = own.connection();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("slowlog-log-slower-than")
        .arg(0)
        .query(&mut con)
        .unwrap();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("slowlog-max-len")
        .arg(128)
        .query(&mut con)
        .unwrap();
    for script in Script::ALL {
        let sha: String = redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(script.text())
            .query(&mut con)
            .unwrap();
        assert_eq!(sha, script.sha1());
    }
    let cap = MAX_LOG_LIMIT;
    let policy = Policy::new("rl", "geocode", Algorithm::SlidingLog, cap, WINDOW_MS).unwrap();
    let key = policy.key("t").unwrap();
    // Distinct timestamps one ms apart, all within one window: cap < WINDOW_MS.
    assert!(cap < WINDOW_MS);
    let cases = [
        Case {
            what: "acquire of cost = cap on an empty key (pushes cap entries)",
            state: None,
            cost: cap,
            now: T0,
            mode: Mode::Acquire,
            allowed: true,
        },
        Case {
            what: "acquire of cost = cap after all cap entries expired (trims cap, pushes cap)",
            state: Some((T0, 1, cap)),
            cost: cap,
            now: T0 + 2 * WINDOW_MS,
            mode: Mode::Acquire,
            allowed: true,
        },
        Case {
            what: "acquire of cost 1 after all cap entries expired (binary search, trims cap)",
            state: Some((T0, 1, cap)),
            cost: 1,
            now: T0 + 2 * WINDOW_MS,
            mode: Mode::Acquire,
            allowed: true,
        },
        Case {
            what: "acquire of cost = cap/2 after half the entries expired (search, trim, push)",
            state: Some((T0, 1, cap)),
            cost: cap / 2,
            now: T0 + WINDOW_MS + cap / 2,
            mode: Mode::Acquire,
            allowed: true,
        },
        Case {
            what: "denied, k = cap/2: the k-th oldest entry from the middle of the list",
            state: Some((T0, 1, cap)),
            cost: cap / 2,
            now: T0 + cap,
            mode: Mode::Acquire,
            allowed: false,
        },
        Case {
            what: "denied, k = cap: the k-th oldest is the newest",
            state: Some((T0, 1, cap)),
            cost: cap,
            now: T0 + cap,
            mode: Mode::Acquire,
            allowed: false,
        },
        Case {
            what: "denied after a quarter expired: binary search, then the k-th deep, trim",
            state: Some((T0, 1, cap)),
            cost: cap,
            now: T0 + WINDOW_MS + cap / 4,
            mode: Mode::Acquire,
            allowed: false,
        },
        Case {
            what: "peek of cost = cap after all cap entries expired",
            state: Some((T0, 1, cap)),
            cost: cap,
            now: T0 + 2 * WINDOW_MS,
            mode: Mode::Peek,
            allowed: true,
        },
    ];
    let mut worst = 0;
    println!("script time at the log's cap (limit {cap}, window {WINDOW_MS} ms), SLOWLOG us over {REPEAT} runs:");
    for case in &cases {
        let mut runs = Vec::new();
        for _ in 0..REPEAT {
            let _: i64 = redis::cmd("DEL").arg(&key).query(&mut con).unwrap();
            if let Some((first, step, count)) = case.state {
                let stamps: Vec<u64> = (0..count).map(|i| first + i * step).collect();
                for chunk in stamps.chunks(1000) {
                    let _: i64 = redis::cmd("RPUSH")
                        .arg(&key)
                        .arg(chunk)
                        .query(&mut con)
                        .unwrap();
                }
            }
            let call = policy
                .build_call("t", case.cost, Some(case.now), case.mode)
                .unwrap();
            let _: () = redis::cmd("SLOWLOG").arg("RESET").query(&mut con).unwrap();
            let reply: Vec<i64> = redis::cmd("EVALSHA")
                .arg(call.script.sha1())
                .arg(1)
                .arg(&call.keys)
                .arg(&call.args)
                .query(&mut con)
                .unwrap();
            assert_eq!(reply[0] == 1, case.allowed, "{}: {reply:?}", case.what);
            runs.push(slowlog_us(&mut con, "EVALSHA"));
        }
        runs.sort_unstable();
        let (fastest, median, slowest) = (runs[0], runs[REPEAT / 2], runs[REPEAT - 1]);
        println!(
            "  {fastest:>5} us fastest, {median:>5} median, {slowest:>5} slowest: {}",
            case.what
        );
        assert!(
            fastest < BOUND_US,
            "{}: {fastest} us, bound {BOUND_US} us",
            case.what
        );
        worst = worst.max(fastest);
    }
    println!("worst case at the cap: {worst} us (bound {BOUND_US} us)");
}
