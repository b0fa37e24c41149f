//! The bucketed window on a real Redis: its decisions are the memory
//! engine's, step by step, across bucket boundaries and denials, over RESP2
//! and RESP3 alike (random sequences are in differential.rs).

mod common;

use common::{redis_url, unique_namespace};
use slidelimit::{blocking, Algorithm, Decision, MemoryEngine, Options, Policy, Result};

fn bucketed(limit: u64, window_ms: u64, buckets: Option<u64>) -> Policy {
    Policy::with_buckets(
        &unique_namespace("bkt"),
        "geocode",
        Algorithm::BucketedWindow,
        limit,
        window_ms,
        buckets,
    )
    .unwrap()
}

fn connect(url: &str, policy: &Policy) -> blocking::Limiter {
    blocking::Limiter::connect(url, policy.clone(), Options::default()).unwrap()
}

fn resp3_url() -> String {
    format!("{}?protocol=resp3", redis_url().trim_end_matches('/'))
}

/// (now_ms, cost, peek). Limit 3, window 1000 ms, 4 buckets of 250 ms.
const START: u64 = 1_800_000_000_000;
const STEPS: [(u64, u64, bool); 16] = [
    (0, 1, false),    // bucket 0
    (249, 1, false),  // its last millisecond
    (250, 1, false),  // bucket 1: the limit is reached
    (251, 1, true),   // peek: denied
    (260, 1, false),  // denied
    (1248, 1, false), // bucket 0 holds to 249 + 1000: still denied
    (1249, 2, true),  // bucket 0 just expired: 2 free, peek only
    (1249, 2, false), // admitted into bucket 4
    (1300, 1, false), // denied until bucket 1 expires at 1499
    (1499, 1, false), // bucket 1 expired: admitted into bucket 5
    (1499, 3, true),  // needs 3: denied until buckets 4 and 5 expire
    (1490, 1, false), // a lagging caller: decided at 1499, denied
    (2600, 3, false), // an idle gap past every bucket
    (2601, 1, false), // denied
    (5000, 4, false), // cost above the limit: invalid_argument
    (5000, 3, false), // everything expired again
];

/// Runs STEPS against `limiter`, asserting each decision equals the engine's.
fn replay(limiter: &blocking::Limiter, policy: &Policy) -> Vec<Result<Decision>> {
    let memory = MemoryEngine::new();
    let mut got = Vec::new();
    for (i, &(at, cost, peek)) in STEPS.iter().enumerate() {
        let now = START + at;
        let (expected, redis) = if peek {
            (
                memory.peek(policy, "t", cost, now),
                limiter.peek_at("t", cost, now),
            )
        } else {
            (
                memory.acquire(policy, "t", cost, now),
                limiter.acquire_at("t", cost, now),
            )
        };
        assert_eq!(redis, expected, "step {i} at {at} cost {cost} peek {peek}");
        got.push(redis);
    }
    limiter.reset("t").unwrap();
    got
}

#[test]
fn bucketed_window_decides_like_the_memory_engine_across_boundaries() {
    let policy = bucketed(3, 1000, Some(4));
    let decisions = replay(&connect(&redis_url(), &policy), &policy);
    let allowed: Vec<bool> = decisions
        .iter()
        .map(|d| d.as_ref().is_ok_and(|d| d.allowed))
        .collect();
    // Anchors from docs/protocol.md, independent of the engine.
    assert_eq!(
        allowed,
        [
            true, true, true, false, false, false, true, true, false, true, false, false, true,
            false, false, true
        ]
    );
    let d = decisions[4].as_ref().unwrap();
    // need 1: bucket 0 (2 permits) frees at 249 + 1000.
    assert_eq!((d.remaining, d.retry_after_ms), (0, 1249 - 260));
    let d = decisions[7].as_ref().unwrap();
    // Bucket 4 is held to 1249 + 1000.
    assert_eq!((d.remaining, d.reset_after_ms), (0, 2249 - 1249));
    let d = decisions[10].as_ref().unwrap();
    // need 3: bucket 4 (2) and bucket 5 (1, held to 2499).
    assert_eq!((d.remaining, d.retry_after_ms), (0, 2499 - 1499));
    let d = decisions[11].as_ref().unwrap();
    // Retry is counted from the caller's own now.
    assert_eq!((d.remaining, d.retry_after_ms), (0, 2249 - 1490));
    assert!(decisions[14].is_err(), "cost above the limit");
}

#[test]
fn bucketed_window_resp3_decides_like_resp2() {
    let policy = bucketed(3, 1000, Some(4));
    let resp2 = replay(&connect(&redis_url(), &policy), &policy);
    let resp3 = replay(&connect(&resp3_url(), &policy), &policy);
    assert_eq!(resp2, resp3);
    // One budget whichever protocol the caller speaks.
    let (two, three) = (
        connect(&redis_url(), &policy),
        connect(&resp3_url(), &policy),
    );
    assert!(three.acquire_at("u", 2, START).unwrap().allowed);
    let d = two.acquire_at("u", 2, START + 1).unwrap();
    assert_eq!((d.allowed, d.remaining), (false, 1));
    assert!(
        three.acquire("v").unwrap().allowed,
        "server time under RESP3"
    );
    two.reset("u").unwrap();
    three.reset("v").unwrap();
}

#[test]
fn the_default_bucket_count_is_in_the_key_and_on_redis() {
    let policy = bucketed(2, 60_000, None);
    assert_eq!(policy.buckets(), Some(slidelimit::DEFAULT_BUCKETS));
    assert!(policy.key("t").unwrap().ends_with(":bucketed:60000:60"));
    let limiter = connect(&redis_url(), &policy);
    let d = limiter.acquire_at("t", 1, 1_500).unwrap();
    // One-second buckets: held to 1999 + 60000.
    assert_eq!(d.reset_after_ms, 61_999 - 1_500);
    limiter.reset("t").unwrap();
}

/// The script sets its key's expiry when an admission opens a bucket, and
/// leaves it alone for later admissions into the same bucket (the memory
/// engine does the same: core's
/// `a_bucketed_key_keeps_the_expiry_its_bucket_opened_with`).
#[test]
fn the_key_expiry_is_set_by_a_buckets_first_admission() {
    let policy = bucketed(3, 1000, Some(10));
    let key = policy.key("t").unwrap();
    let limiter = connect(&redis_url(), &policy);
    let mut raw = common::raw_connection();
    let mut pttl = || -> i64 { redis::cmd("PTTL").arg(&key).query(&mut raw).unwrap() };
    // Caller time 1,000,000 opens bucket 10,000, held until 1,001,099: PX
    // 1,099 plus the caller-time margin (a minute, more than the window),
    // 61,099.
    assert!(limiter.acquire_at("t", 1, 1_000_000).unwrap().allowed);
    std::thread::sleep(std::time::Duration::from_millis(300));
    // Same bucket: the expiry set 300 ms ago stands (re-set, it would be
    // 1,089 + 60,000 = 61,089).
    assert!(limiter.acquire_at("t", 1, 1_000_010).unwrap().allowed);
    let same_bucket = pttl();
    assert!(
        (60_000..=60_799).contains(&same_bucket),
        "PTTL {same_bucket}"
    );
    // A later bucket sets it again: 1,049 + 60,000.
    assert!(limiter.acquire_at("t", 1, 1_000_150).unwrap().allowed);
    let next_bucket = pttl();
    assert!(
        (60_800..=61_049).contains(&next_bucket),
        "PTTL {next_bucket}"
    );
    limiter.reset("t").unwrap();
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: 150, max_shrink_iters: 100, ..Default::default() })]

    /// Long sequences on few buckets: the ring of N + 1 slots wraps many
    /// times, buckets are skipped, the oldest held one expires mid-walk and
    /// denials of large costs walk the slots; every decision is the engine's.
    /// Buckets are at least a second wide: Redis expires keys on its own
    /// clock, and no key may expire during a sequence (milliseconds of real
    /// time) while the engine, on caller time, still counts it.
    #[test]
    fn long_runs_on_a_small_ring_decide_like_the_memory_engine(
        buckets in 1u64..=6,
        width in 1_000u64..=5_000,
        limit in 1u64..=25,
        steps in proptest::collection::vec((0u64..=3, 0u64..=100, 1u64..=25, proptest::bool::weighted(0.2)), 50..300),
    ) {
        let window = buckets * width;
        let policy = bucketed(limit, window, Some(buckets));
        let limiter = connect(&redis_url(), &policy);
        let memory = MemoryEngine::new();
        let mut now = 1_000_000;
        for (i, &(kind, step, cost, peek)) in steps.iter().enumerate() {
            // Mostly within a window; now and then an idle gap of windows.
            now += match kind {
                0 => 0,
                1 | 2 => step * window / 100,
                _ => step * window / 20,
            };
            let cost = 1 + (cost - 1) % limit;
            let (expected, got) = if peek {
                (memory.peek(&policy, "t", cost, now), limiter.peek_at("t", cost, now))
            } else {
                (memory.acquire(&policy, "t", cost, now), limiter.acquire_at("t", cost, now))
            };
            proptest::prop_assert_eq!(&expected, &got, "step {} at {} cost {}", i, now, cost);
        }
        limiter.reset("t").unwrap();
    }
}
