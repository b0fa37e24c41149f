//! The memory engine is the oracle: on random sequences it and a real Redis
//! must make the same decision, step by step, for both algorithms.

mod common;

use common::{redis_url, unique_namespace};
use proptest::prelude::*;
use slidelimit::{blocking, Algorithm, MemoryEngine, Options, Policy};

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

fn scenario() -> impl Strategy<Value = (Algorithm, u64, u64, u64, Vec<Step>)> {
    let algorithm = prop_oneof![Just(Algorithm::SlidingLog), Just(Algorithm::SlidingCounter)];
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

fn redis_limiter(policy: &Policy) -> blocking::Limiter {
    blocking::Limiter::connect(&redis_url(), policy.clone(), Options::default()).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, max_shrink_iters: 200, ..ProptestConfig::default() })]

    #[test]
    fn memory_engine_and_redis_agree((algorithm, limit, window_ms, start, steps) in scenario()) {
        let policy = Policy::new(&unique_namespace("diff"), "api", algorithm, limit, window_ms).unwrap();
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
