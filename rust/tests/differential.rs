//! The memory engine is the oracle: on random sequences it and a real Redis
//! must make the same decision, step by step, for every algorithm.

mod common;

use common::{redis_url, unique_namespace};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use slidelimit::{blocking, Algorithm, Decision, MemoryEngine, Mode, Options, Policy, Result};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

#[derive(Debug, Clone)]
struct Step {
    tenant: usize,
    /// Scaled onto 1..=limit; above it (1 in 10) it exercises the cost check.
    cost: u64,
    advance_ms: u64,
    peek: bool,
}

fn window() -> impl Strategy<Value = u64> {
    prop_oneof![Just(1000u64), Just(1700), Just(5000), Just(60_000)]
}

fn step(window_ms: u64) -> impl Strategy<Value = Step> {
    // Same millisecond, small steps, the window's edges and long gaps.
    let advance = prop_oneof![
        3 => Just(0u64),
        4 => 1..window_ms / 3,
        1 => Just(window_ms - 1),
        1 => Just(window_ms),
        1 => Just(window_ms + 1),
        1 => window_ms..window_ms * 4,
    ];
    (
        0..2usize,
        1..=11u64,
        advance,
        proptest::bool::weighted(0.15),
    )
        .prop_map(|(tenant, cost, advance_ms, peek)| Step {
            tenant,
            cost,
            advance_ms,
            peek,
        })
}

fn scenario() -> impl Strategy<Value = ((Algorithm, u8), u64, u64, u64, Vec<Step>)> {
    let algorithm = algorithm();
    let start = prop_oneof![0..3000u64, 1_700_000_000_000..1_900_000_000_000u64];
    (algorithm, 1..=10u64, window(), start).prop_flat_map(|(algorithm, limit, window_ms, start)| {
        (
            Just(algorithm),
            Just(limit),
            Just(window_ms),
            Just(start),
            proptest::collection::vec(step(window_ms), 1..40),
        )
    })
}

/// Every algorithm; a bucketed window gets one of the bucket counts that
/// divide its window (`pick` chooses), from one bucket to millisecond buckets.
fn algorithm() -> impl Strategy<Value = (Algorithm, u8)> {
    (
        prop_oneof![
            Just(Algorithm::SlidingLog),
            Just(Algorithm::SlidingCounter),
            Just(Algorithm::BucketedWindow)
        ],
        any::<u8>(),
    )
}

fn policy(
    namespace: &str,
    (algorithm, pick): (Algorithm, u8),
    limit: u64,
    window_ms: u64,
) -> Policy {
    let buckets = (algorithm == Algorithm::BucketedWindow).then(|| {
        let fits: Vec<u64> = [1, 4, 10, 17, 50, 60, 100, 1000, 1700, 3000]
            .into_iter()
            .filter(|n| window_ms.is_multiple_of(*n))
            .collect();
        fits[pick as usize % fits.len()]
    });
    Policy::with_buckets(namespace, "api", algorithm, limit, window_ms, buckets).unwrap()
}

fn redis_limiter(policy: &Policy) -> blocking::Limiter {
    blocking::Limiter::connect(&redis_url(), policy.clone(), Options::default()).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, max_shrink_iters: 200, ..ProptestConfig::default() })]

    #[test]
    fn memory_engine_and_redis_agree((algorithm, limit, window_ms, start, steps) in scenario()) {
        let policy = policy(&unique_namespace("diff"), algorithm, limit, window_ms);
        let redis = redis_limiter(&policy);
        let memory = MemoryEngine::new();
        let tenants = ["tenant-a", "tenant b{x}"];
        let mut now = start;
        for (i, s) in steps.iter().enumerate() {
            now += s.advance_ms;
            let cost = if s.cost == 11 { limit + 1 } else { 1 + (s.cost - 1) % limit };
            let tenant = tenants[s.tenant];
            let (expected, got) = if s.peek {
                (memory.peek(&policy, tenant, cost, now), redis.peek_at(tenant, cost, now))
            } else {
                (memory.acquire(&policy, tenant, cost, now), redis.acquire_at(tenant, cost, now))
            };
            prop_assert_eq!(&expected, &got, "step {} ({:?}) at now {} cost {}", i, s, now, cost);
        }
        for tenant in tenants {
            redis.reset(tenant).unwrap();
        }
    }
}

// ---------------------------------------------------------------------------
// Caller time is only the script's notion of now; Redis expires keys on its
// own clock. Sequences below interleave tenants, peeks and acquires from
// callers that lag and lead by up to 1e9 ms, with jumps of 1e6..1e9 ms both
// ways, and compare Redis, the engine with a fixed real clock (Redis's clock
// barely moves during a sequence, and no key lives less than W >= 1 s) and
// the Rust binding's memory store (the system clock) at every step.

/// The real clock, as Redis's TIME reads it.
fn real_now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// The largest caller time the contract accepts.
const MAX_NOW: u64 = 1 << 52;

#[derive(Debug, Clone)]
enum Move {
    Same,
    Forward(u64),
    Back(u64),
    /// 1e6..1e9 ms ahead.
    JumpAhead(u64),
    /// 1e6..1e9 ms back.
    JumpBack(u64),
}

#[derive(Debug, Clone)]
struct MixedStep {
    tenant: usize,
    /// 0: on time; 1: lagging; 2: leading (by the scenario's skews).
    caller: usize,
    /// Scaled onto 1..=limit; 11 asks for limit + 1 (an invalid cost).
    cost: u64,
    moves: Move,
    peek: bool,
}

#[derive(Debug, Clone)]
struct Mixed {
    algorithm: (Algorithm, u8),
    limit: u64,
    window_ms: u64,
    start: u64,
    lag: u64,
    lead: u64,
    steps: Vec<MixedStep>,
}

const TENANTS: [&str; 4] = ["tenant-a", "tenant b{x}", "c", "\u{fc}n\u{ef}"];

fn mixed_step(window_ms: u64) -> impl Strategy<Value = MixedStep> {
    let moves = prop_oneof![
        3 => Just(Move::Same),
        4 => (1..=window_ms / 3).prop_map(Move::Forward),
        1 => prop_oneof![Just(window_ms - 1), Just(window_ms), Just(window_ms + 1)].prop_map(Move::Forward),
        2 => (1..=window_ms * 2).prop_map(Move::Back),
        1 => (1_000_000..=1_000_000_000u64).prop_map(Move::JumpAhead),
        1 => (1_000_000..=1_000_000_000u64).prop_map(Move::JumpBack),
    ];
    (
        0..TENANTS.len(),
        prop_oneof![4 => Just(0usize), 1 => Just(1), 1 => Just(2)],
        1..=11u64,
        moves,
        proptest::bool::weighted(0.35),
    )
        .prop_map(|(tenant, caller, cost, moves, peek)| MixedStep {
            tenant,
            caller,
            cost,
            moves,
            peek,
        })
}

fn mixed() -> impl Strategy<Value = Mixed> {
    let algorithm = algorithm();
    let window = prop_oneof![Just(1000u64), Just(1700), Just(5000), Just(60_000)];
    let start = prop_oneof![
        0..3000u64,
        1_000_000..2_000_000u64,
        1_700_000_000_000..1_900_000_000_000u64,
    ];
    let skew = |w: u64| prop_oneof![Just(0u64), 1..w, Just(w), 1_000_000..=1_000_000_000u64,];
    (algorithm, 1..=10u64, window, start).prop_flat_map(
        move |(algorithm, limit, window_ms, start)| {
            (
                skew(window_ms),
                skew(window_ms),
                proptest::collection::vec(mixed_step(window_ms), 1..80),
            )
                .prop_map(move |(lag, lead, steps)| Mixed {
                    algorithm,
                    limit,
                    window_ms,
                    start,
                    lag,
                    lead,
                    steps,
                })
        },
    )
}

/// Runs one sequence through Redis, the engine on a fixed clock and the
/// binding's memory store; the number of steps compared.
fn run_mixed(m: &Mixed) -> std::result::Result<u64, TestCaseError> {
    let policy = policy(
        &unique_namespace("mixed"),
        m.algorithm,
        m.limit,
        m.window_ms,
    );
    let redis = redis_limiter(&policy);
    let binding = blocking::Limiter::memory(policy.clone(), Options::default()).unwrap();
    let engine = MemoryEngine::new();
    let clock = real_now_ms();
    let mut base = m.start;
    for (i, s) in m.steps.iter().enumerate() {
        base = match s.moves {
            Move::Same => base,
            Move::Forward(d) | Move::JumpAhead(d) => base.saturating_add(d).min(MAX_NOW),
            Move::Back(d) | Move::JumpBack(d) => base.saturating_sub(d),
        };
        let now = match s.caller {
            1 => base.saturating_sub(m.lag),
            2 => base.saturating_add(m.lead).min(MAX_NOW),
            _ => base,
        };
        let cost = if s.cost == 11 {
            m.limit + 1
        } else {
            1 + (s.cost - 1) % m.limit
        };
        let tenant = TENANTS[s.tenant];
        let mode = if s.peek { Mode::Peek } else { Mode::Acquire };
        let (want, in_binding) = if s.peek {
            (
                redis.peek_at(tenant, cost, now),
                binding.peek_at(tenant, cost, now),
            )
        } else {
            (
                redis.acquire_at(tenant, cost, now),
                binding.acquire_at(tenant, cost, now),
            )
        };
        let got = engine.check(&policy, tenant, cost, Some(now), clock, mode);
        prop_assert_eq!(
            &got,
            &want,
            "engine, step {} ({:?}) at now {} cost {}",
            i,
            s,
            now,
            cost
        );
        prop_assert_eq!(
            &in_binding,
            &want,
            "binding, step {} ({:?}) at now {} cost {}",
            i,
            s,
            now,
            cost
        );
    }
    for tenant in TENANTS {
        redis.reset(tenant).unwrap();
    }
    Ok(m.steps.len() as u64)
}

#[test]
fn interleaved_tenants_peeks_and_far_caller_times_agree_with_redis() {
    let config = Config {
        cases: 1500,
        max_shrink_iters: 200,
        source_file: Some(file!()),
        ..Config::default()
    };
    let (sequences, steps) = (AtomicU64::new(0), AtomicU64::new(0));
    let mut runner = TestRunner::new(config);
    let outcome = runner.run(&mixed(), |m| {
        let n = run_mixed(&m)?;
        sequences.fetch_add(1, Ordering::Relaxed);
        steps.fetch_add(n, Ordering::Relaxed);
        Ok(())
    });
    if let Err(e) = outcome {
        panic!("{e}");
    }
    println!(
        "mixed differential: {} sequences, {} steps, 0 differences",
        sequences.load(Ordering::Relaxed),
        steps.load(Ordering::Relaxed)
    );
}

/// The repro, limit 1 per 60 s: A's permit at 1000, then `between`
/// (calls at far caller times), then A at 1001. Redis, the engine on a fixed
/// real clock and the binding's memory store must agree on every step.
fn far_calls_between(algorithm: Algorithm, between: &[(&str, u64, Mode)]) -> Decision {
    let policy = Policy::new(&unique_namespace("far"), "api", algorithm, 1, 60_000).unwrap();
    let redis = redis_limiter(&policy);
    let binding = blocking::Limiter::memory(policy.clone(), Options::default()).unwrap();
    let engine = MemoryEngine::new();
    let clock = real_now_ms();
    let step = |tenant: &str, now: u64, mode: Mode| -> Decision {
        let (want, in_binding): (Result<Decision>, Result<Decision>) = match mode {
            Mode::Acquire => (
                redis.acquire_at(tenant, 1, now),
                binding.acquire_at(tenant, 1, now),
            ),
            Mode::Peek => (
                redis.peek_at(tenant, 1, now),
                binding.peek_at(tenant, 1, now),
            ),
        };
        let want = want.unwrap();
        let got = engine.check(&policy, tenant, 1, Some(now), clock, mode);
        assert_eq!(got.unwrap(), want, "engine: {tenant} at {now} ({mode:?})");
        assert_eq!(
            in_binding.unwrap(),
            want,
            "binding: {tenant} at {now} ({mode:?})"
        );
        want
    };
    assert!(step("A", 1000, Mode::Acquire).allowed);
    for &(tenant, now, mode) in between {
        step(tenant, now, mode);
    }
    let last = step("A", 1001, Mode::Acquire);
    for (tenant, _, _) in between {
        redis.reset(tenant).unwrap();
    }
    redis.reset("A").unwrap();
    last
}

#[test]
fn far_calls_between_two_acquires_change_nothing() {
    let others: Vec<String> = (0..5000).map(|i| format!("other-{i}")).collect();
    for algorithm in [Algorithm::SlidingLog, Algorithm::SlidingCounter] {
        // Without anything in between: the decision every case must keep.
        let alone = far_calls_between(algorithm, &[]);
        assert!(!alone.allowed, "{algorithm:?}: {alone:?}");
        if algorithm == Algorithm::SlidingLog {
            assert_eq!(alone.retry_after_ms, 59_999);
        }
        let peek_a = far_calls_between(algorithm, &[("A", 1_000_000, Mode::Peek)]);
        assert_eq!(peek_a, alone, "{algorithm:?}: a peek of A at a far time");
        // 5,000 peeks on other tenants at far times (more than a sweep interval).
        let peeks: Vec<(&str, u64, Mode)> = others
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let now = [5_000_000, 1_000_000_000, 1 << 52][i % 3];
                (t.as_str(), now, Mode::Peek)
            })
            .collect();
        let after_peeks = far_calls_between(algorithm, &peeks);
        assert_eq!(
            after_peeks, alone,
            "{algorithm:?}: 5,000 far peeks of others"
        );
        // Other tenants' acquires at far times do not touch A either.
        let acquires: Vec<(&str, u64, Mode)> = others[..200]
            .iter()
            .map(|t| (t.as_str(), 5_000_000, Mode::Acquire))
            .collect();
        let after_acquires = far_calls_between(algorithm, &acquires);
        assert_eq!(
            after_acquires, alone,
            "{algorithm:?}: far acquires of others"
        );
        println!("{algorithm:?}: A at 1001 after far calls: {alone:?}");
    }
}
