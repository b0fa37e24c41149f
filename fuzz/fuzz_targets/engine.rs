//! The memory engine, core's stand-in for the scripts, on any policy of one
//! to four limits and any sequence of acquires, peeks and resets by two
//! tenants: it never panics and refuses only with `invalid_argument`. Then
//! the contract's promises, checked from outside the engine (a bucketed
//! window above 2^51 ms may also refuse a caller whose hints would pass
//! 2^53, naming now_ms):
//! - no exact limit (log, bucketed window) ever holds more than its limit in
//!   any rolling window of recorded times (the time rule: an admission is
//!   recorded at max(now, the newest recorded)), whatever the callers'
//!   clocks, while they stay within half the shortest window of the server's
//!   (docs/protocol.md, "Key expiry and caller clocks");
//! - every denial's retry is exact: with no other traffic, the same check
//!   from the same caller's clock is denied 1 ms before it and passes at it.
//!
//! Times are the server's clock (only forward) plus a skew per call for
//! policies whose every limit is exact; the counter's times only move
//! forward, as its contract asks.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use slidelimit_core::{
    Algorithm, ErrorCode, Limit, MemoryEngine, Mode, Policy, MAX_BUCKETS, MAX_LIMIT_TIMES_WINDOW,
    MAX_LOG_LIMIT, MAX_NOW_MS,
};

#[derive(Arbitrary, Debug)]
struct LimitInput {
    algorithm: u8,
    limit: u64,
    window_ms: u64,
    buckets: u64,
    /// Windows up to 2^52 (with the limits that fit), not only up to 2 min.
    wide: bool,
    /// The numbers as given, unbounded: validation's paths.
    raw: bool,
}

#[derive(Arbitrary, Debug)]
struct Step {
    /// 0 and 1 acquire, 2 peek, 3 reset.
    op: u8,
    second_tenant: bool,
    cost: u64,
    /// A cost as given, unbounded.
    raw_cost: bool,
    advance_ms: u64,
    skew_ms: u64,
}

#[derive(Arbitrary, Debug)]
struct Input {
    limits: Vec<LimitInput>,
    start_ms: u64,
    steps: Vec<Step>,
}

/// The largest divisor of `window` that is at most `wanted` (1 at least).
fn divisor_at_most(window: u64, wanted: u64) -> u64 {
    let wanted = wanted.clamp(1, window);
    (1..=wanted)
        .rev()
        .find(|&d| window.is_multiple_of(d))
        .unwrap_or(1)
}

fn limit_of(input: &LimitInput) -> Limit {
    let algorithm = Algorithm::ALL[usize::from(input.algorithm) % Algorithm::ALL.len()];
    if input.raw {
        return Limit {
            algorithm,
            limit: input.limit,
            window_ms: input.window_ms,
            buckets: Some(input.buckets).filter(|_| algorithm == Algorithm::BucketedWindow),
        };
    }
    let window_ms = if input.wide {
        1 + input.window_ms % MAX_LIMIT_TIMES_WINDOW
    } else {
        1 + input.window_ms % 120_000
    };
    let mut cap = MAX_LIMIT_TIMES_WINDOW / window_ms;
    if algorithm == Algorithm::SlidingLog {
        cap = cap.min(MAX_LOG_LIMIT);
    }
    let limit = 1 + input.limit % cap;
    let buckets = (algorithm == Algorithm::BucketedWindow)
        .then(|| divisor_at_most(window_ms, 1 + input.buckets % MAX_BUCKETS));
    Limit {
        algorithm,
        limit,
        window_ms,
        buckets,
    }
}

/// One exact limit's admissions for one tenant, as the time rule records them.
#[derive(Default, Clone)]
struct Recorded {
    newest: Option<u64>,
    /// (recorded time, cost), in recording order (times non-decreasing).
    admissions: Vec<(u64, u64)>,
}

impl Recorded {
    fn admit(&mut self, limit: &Limit, now: u64, cost: u64) {
        let at = self.newest.map_or(now, |newest| newest.max(now));
        self.newest = Some(at);
        self.admissions.push((at, cost));
        let held: u64 = self
            .admissions
            .iter()
            .filter(|&&(t, _)| t + limit.window_ms > at)
            .map(|&(_, c)| c)
            .sum();
        assert!(
            held <= limit.limit,
            "{held} permits recorded in the window ending at {at} of {limit:?}"
        );
    }
}

fuzz_target!(|input: Input| {
    let limits: Vec<Limit> = input.limits.iter().take(4).map(limit_of).collect();
    let policy = match Policy::with_limits("fz", "engine", &limits) {
        Ok(policy) => policy,
        Err(e) => {
            assert_eq!(e.code(), ErrorCode::InvalidArgument, "{e}");
            return;
        }
    };
    let limits = policy.limits().to_vec();
    let smallest = limits.iter().map(|l| l.limit).min().unwrap();
    let shortest = limits.iter().map(|l| l.window_ms).min().unwrap();
    let longest = limits.iter().map(|l| l.window_ms).max().unwrap();
    let exact = limits
        .iter()
        .all(|l| l.algorithm != Algorithm::SlidingCounter);
    let engine = MemoryEngine::new();
    let tenants = ["a", "b"];
    let mut recorded = vec![vec![Recorded::default(); limits.len()]; tenants.len()];
    let mut clock = input.start_ms % (MAX_NOW_MS + 1);
    for step in input.steps.iter().take(64) {
        // Mostly within a few windows; now and then a jump of any size.
        let advance = match step.advance_ms % 8 {
            0 | 1 => 0,
            7 => step.advance_ms,
            _ => step.advance_ms % (3 * longest + 1),
        };
        clock = match clock.checked_add(advance) {
            Some(t) if t <= MAX_NOW_MS => t,
            _ => return,
        };
        let now = if exact {
            // A caller clock within [-W/2, +W/2] of the server's, W the shortest window.
            let spread = shortest / 2;
            (clock + step.skew_ms % (2 * spread + 1))
                .saturating_sub(spread)
                .min(MAX_NOW_MS)
        } else {
            clock
        };
        let who = usize::from(step.second_tenant);
        let tenant = tenants[who];
        if step.op % 4 == 3 {
            engine
                .reset(&policy, tenant)
                .expect("a reset of a valid policy");
            recorded[who] = vec![Recorded::default(); limits.len()];
            continue;
        }
        let mode = if step.op % 4 == 2 {
            Mode::Peek
        } else {
            Mode::Acquire
        };
        let cost = if step.raw_cost {
            step.cost
        } else {
            1 + step.cost % smallest
        };
        let decision = match engine.check(&policy, tenant, cost, Some(now), clock, mode) {
            Ok(d) => d,
            Err(e) => {
                assert_eq!(e.code(), ErrorCode::InvalidArgument, "{e}");
                if e.field() == Some("now_ms") {
                    // A caller lagging the newest admission so far that a
                    // hint would pass 2^53 (docs/protocol.md, "Bucketed
                    // window"): only with a bucketed window above 2^51 ms.
                    assert!(
                        limits
                            .iter()
                            .any(|l| l.algorithm == Algorithm::BucketedWindow
                                && l.window_ms > MAX_LIMIT_TIMES_WINDOW / 2),
                        "{e}"
                    );
                    continue;
                }
                assert!(
                    cost == 0 || cost > smallest,
                    "cost {cost} of limit {smallest} refused: {e}"
                );
                assert_eq!(e.field(), Some("cost"), "{e}");
                continue;
            }
        };
        assert!(
            cost >= 1 && cost <= smallest,
            "cost {cost} of limit {smallest} accepted"
        );
        assert!(decision.remaining <= smallest, "{decision:?}");
        assert_eq!(decision.now_ms, now, "{decision:?}");
        if decision.allowed {
            assert!(decision.remaining + cost <= smallest, "{decision:?}");
            if mode == Mode::Acquire {
                for (limit, log) in limits.iter().zip(recorded[who].iter_mut()) {
                    if limit.algorithm != Algorithm::SlidingCounter {
                        log.admit(limit, now, cost);
                    }
                }
            }
            continue;
        }
        assert_eq!(
            decision.denied_by.is_some(),
            limits.len() > 1,
            "{decision:?}"
        );
        // Exactness of the retry, asked at the same server clock: a peek
        // records nothing, so neither probe changes what follows.
        let retry = decision.retry_after_ms;
        if now + retry <= MAX_NOW_MS {
            let before = engine
                .check(
                    &policy,
                    tenant,
                    cost,
                    Some(now + retry - 1),
                    clock,
                    Mode::Peek,
                )
                .expect("the probe 1 ms before the retry");
            assert!(
                !before.allowed,
                "allowed 1 ms before retry_after_ms {retry} of {decision:?}"
            );
            let at = engine
                .check(&policy, tenant, cost, Some(now + retry), clock, Mode::Peek)
                .expect("the probe at the retry");
            assert!(
                at.allowed,
                "denied at retry_after_ms {retry} of {decision:?}: {at:?}"
            );
        }
    }
});
