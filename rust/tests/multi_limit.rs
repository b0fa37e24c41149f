//! Policies of several limits on a real Redis: the multi-limit script, the
//! engine and the sum of the limits' own decisions must agree; and the local
//! deny cache, counted in the server's own statistics.

mod common;

use common::{command_calls, redis_url, unique_namespace, OwnRedis};
use proptest::prelude::*;
use slidelimit::{
    blocking, Algorithm, ErrorCode, Limit, MemoryEngine, Mode, Options, Policy, DEFAULT_BUCKETS,
};
use std::future::Future;

fn limit_strategy() -> impl Strategy<Value = Limit> {
    (
        prop_oneof![
            Just(Algorithm::SlidingLog),
            Just(Algorithm::SlidingCounter),
            Just(Algorithm::BucketedWindow)
        ],
        1..=8u64,
        prop_oneof![Just(1000u64), Just(2000), Just(5000), Just(10_000)],
        prop_oneof![Just(1u64), Just(10), Just(100), Just(1000)],
    )
        .prop_map(|(algorithm, limit, window_ms, buckets)| Limit {
            algorithm,
            limit,
            window_ms,
            buckets: (algorithm == Algorithm::BucketedWindow).then_some(buckets),
        })
}

/// 2 to 4 limits on distinct keys (a duplicate is an error, tested below).
fn limits_strategy() -> impl Strategy<Value = Vec<Limit>> {
    proptest::collection::vec(limit_strategy(), 2..=4).prop_map(|mut limits| {
        let mut seen = Vec::new();
        limits.retain(|l| {
            let at = (l.algorithm, l.window_ms, l.buckets);
            let fresh = !seen.contains(&at);
            seen.push(at);
            fresh
        });
        limits
    })
}

fn steps_strategy() -> impl Strategy<Value = Vec<(u64, u64, bool)>> {
    // (advance ms, cost pick, peek)
    proptest::collection::vec(
        (
            prop_oneof![3 => Just(0u64), 4 => 1..400u64, 1 => 900..3000u64, 1 => 9000..12_000u64],
            1..=8u64,
            proptest::bool::weighted(0.15),
        ),
        1..40,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, max_shrink_iters: 100, ..ProptestConfig::default() })]

    /// Redis (lua/multi_limit.lua) = the engine, step by step; and each
    /// decision is the composition of the limits' own peeks: allowed iff all
    /// allow, remaining the smallest, reset the largest, retry the largest
    /// denying one, denied_by its first position; recorded in all or none.
    #[test]
    fn several_limits_agree_with_redis_and_compose(limits in limits_strategy(), steps in steps_strategy()) {
        let namespace = unique_namespace("multi");
        let policy = Policy::with_limits(&namespace, "api", &limits).unwrap();
        let singles: Vec<Policy> = limits
            .iter()
            .map(|l| Policy::with_limits(&namespace, "api", &[*l]).unwrap())
            .collect();
        let redis = blocking::Limiter::connect(&redis_url(), policy.clone(), Options::default()).unwrap();
        let memory = MemoryEngine::new();
        let lowest = limits.iter().map(|l| l.limit).min().unwrap();
        let mut now = 1_700_000_000_000u64;
        for (i, &(advance, pick, peek)) in steps.iter().enumerate() {
            now += advance;
            let cost = 1 + (pick - 1) % lowest;
            let alone: Vec<_> = singles
                .iter()
                .map(|p| memory.check(p, "t", cost, Some(now), now, Mode::Peek).unwrap())
                .collect();
            let mode = if peek { Mode::Peek } else { Mode::Acquire };
            let expected = memory.check(&policy, "t", cost, Some(now), now, mode).unwrap();
            let got = if peek { redis.peek_at("t", cost, now) } else { redis.acquire_at("t", cost, now) }.unwrap();
            prop_assert_eq!(&expected, &got, "step {} at {} cost {}", i, now, cost);

            let allowed = alone.iter().all(|d| d.allowed);
            prop_assert_eq!(got.allowed, allowed);
            prop_assert_eq!(got.remaining, alone.iter().map(|d| d.remaining).min().unwrap());
            prop_assert_eq!(got.reset_after_ms, alone.iter().map(|d| d.reset_after_ms).max().unwrap());
            let retry = alone.iter().filter(|d| !d.allowed).map(|d| d.retry_after_ms).max().unwrap_or(0);
            prop_assert_eq!(got.retry_after_ms, retry);
            let by = alone.iter().position(|d| !d.allowed && d.retry_after_ms == retry);
            // One limit left after dropping duplicates is a plain policy: no denied_by.
            let several = limits.len() > 1;
            prop_assert_eq!(got.denied_by, by.filter(|_| !allowed && several).map(|p| p as u32));
            // The engine's single-limit keys are the multi policy's keys, so a
            // later peek of each limit alone sees what was recorded in it.
        }
        redis.reset("t").unwrap();
    }
}

/// The second limit of the policies below: 4 per 10 s in 10 buckets.
fn bucketed_4_per_10s() -> Limit {
    let mut bucketed = Limit::new(Algorithm::BucketedWindow, 4, 10_000);
    bucketed.buckets = Some(10);
    bucketed
}

/// `first` then that bucketed window in one policy: its keys for tenant "t"
/// and a limiter on the test Redis.
fn first_then_bucketed(namespace: &str, first: Limit) -> (Vec<String>, blocking::Limiter) {
    let policy = Policy::with_limits(namespace, "api", &[first, bucketed_4_per_10s()]).unwrap();
    let keys = policy.keys("t").unwrap();
    let limiter = blocking::Limiter::connect(&redis_url(), policy, Options::default()).unwrap();
    (keys, limiter)
}

#[test]
fn a_foreign_count_in_a_later_limit_fails_before_an_earlier_limit_records() {
    // A count Lua reads as 1 but HINCRBY refuses ("1.0"): found by the
    // check of every limit, so the log first in the policy records nothing.
    let namespace = unique_namespace("multi-foreign");
    let policy = Policy::with_limits(
        &namespace,
        "api",
        &[
            Limit::new(Algorithm::SlidingLog, 10, 1000),
            Limit::new(Algorithm::SlidingCounter, 10, 60_000),
        ],
    )
    .unwrap();
    let keys = policy.keys("t").unwrap();
    let limiter = blocking::Limiter::connect(&redis_url(), policy, Options::default()).unwrap();
    let mut raw = common::raw_connection();
    let now: u64 = 1_800_000_000_000; // a multiple of 60,000: a window's start
    let _: i64 = redis::cmd("HSET")
        .arg(&keys[1])
        .arg(now.to_string())
        .arg("1.0")
        .query(&mut raw)
        .unwrap();
    let e = limiter.acquire_at("t", 1, now).unwrap_err();
    assert_eq!(e.code(), ErrorCode::WrongType, "{e}");
    let log_exists: i64 = redis::cmd("EXISTS").arg(&keys[0]).query(&mut raw).unwrap();
    assert_eq!(log_exists, 0, "the log recorded a permit the call failed");
    let _: i64 = redis::cmd("DEL").arg(&keys).query(&mut raw).unwrap();
}

#[test]
fn a_denial_records_in_no_limit_and_reset_deletes_every_key() {
    let namespace = unique_namespace("multi-keys");
    let bucketed = bucketed_4_per_10s();
    let (keys, limiter) =
        first_then_bucketed(&namespace, Limit::new(Algorithm::SlidingLog, 2, 1000));
    let mut raw = common::raw_connection();
    let t0 = 1_700_000_000_000;
    assert!(limiter.acquire_at("t", 2, t0).unwrap().allowed);
    // The log allows 2 per second; the bucketed window has room for 1 more.
    let denied = limiter.acquire_at("t", 2, t0 + 1).unwrap();
    assert_eq!(
        (denied.allowed, denied.denied_by, denied.retry_after_ms),
        (false, Some(0), 999)
    );
    let log_len: u64 = redis::cmd("LLEN").arg(&keys[0]).query(&mut raw).unwrap();
    // The bucketed limit alone is a plain policy on the same key: 2 held of 4.
    let alone = Policy::with_limits(&namespace, "api", &[bucketed]).unwrap();
    assert_eq!(alone.key("t").unwrap(), keys[1]);
    let alone = blocking::Limiter::connect(&redis_url(), alone, Options::default()).unwrap();
    // A peek of cost 1 that allows leaves remaining = 4 - held - 1.
    let held = 4 - 1 - alone.peek_at("t", 1, t0 + 1).unwrap().remaining;
    assert_eq!((log_len, held), (2, 2), "the denial recorded nothing");
    limiter.reset("t").unwrap();
    let left: u64 = redis::cmd("EXISTS").arg(&keys).query(&mut raw).unwrap();
    assert_eq!(left, 0, "reset deletes every limit's key");
}

/// A foreign value on the second limit's key: the error names that limit and
/// key (not the first, sound one), whether the script refused the data or
/// Redis refused the type, and the first limit's count is left as it was.
#[test]
fn a_foreign_key_is_named_with_its_limit() {
    let (keys, limiter) = first_then_bucketed(
        &unique_namespace("multi-foreign"),
        Limit::new(Algorithm::SlidingLog, 3, 10_000),
    );
    let mut raw = common::raw_connection();
    let t0 = 1_700_000_000_000;
    assert!(limiter.acquire_at("t", 1, t0).unwrap().allowed);
    let foreign: [(&str, &[&str]); 2] = [
        // Refused by the script: a string that is no bucketed header.
        ("SET", &["not slidelimit's", "PX", "60000"]),
        // Refused by Redis: GETRANGE on a hash.
        ("HSET", &["field", "value"]),
    ];
    for (command, args) in foreign {
        let _: () = redis::cmd("DEL").arg(&keys[1]).query(&mut raw).unwrap();
        let _: () = redis::cmd(command)
            .arg(&keys[1])
            .arg(args)
            .query(&mut raw)
            .unwrap();
        let _: () = redis::cmd("PEXPIRE")
            .arg(&keys[1])
            .arg(60_000)
            .query(&mut raw)
            .unwrap();
        let e = limiter.acquire_at("t", 1, t0 + 1).unwrap_err();
        assert_eq!(e.code(), ErrorCode::WrongType, "{command}: {e}");
        let named = format!(
            "limits[1]: key {} holds a value the bucketed_window algorithm does not use",
            keys[1]
        );
        assert!(e.message().starts_with(&named), "{command}: {e}");
        let log_len: u64 = redis::cmd("LLEN").arg(&keys[0]).query(&mut raw).unwrap();
        assert_eq!(
            log_len, 1,
            "{command}: the sound limit recorded nothing more"
        );
    }
    let _: () = redis::cmd("DEL").arg(&keys).query(&mut raw).unwrap();
}

/// The multi-limit script catches a limit's error to name a WRONGTYPE; any
/// other error must reach the caller as it would uncaught. A read-only
/// replica refuses the first write: the call fails with the code the same
/// limit alone gets (`unavailable` from Redis 7's `READONLY`).
#[test]
fn a_refused_write_fails_as_for_one_limit() {
    let nobody = common::free_port().to_string();
    let own = OwnRedis::start_with(&["--replicaof", "127.0.0.1", &nobody]);
    let log = Limit::new(Algorithm::SlidingLog, 3, 10_000);
    let bucketed = bucketed_4_per_10s();
    let namespace = unique_namespace("multi-readonly");
    let fail = |limits: &[Limit]| {
        let policy = Policy::with_limits(&namespace, "api", limits).unwrap();
        blocking::Limiter::connect(&own.url(), policy, Options::default())
            .unwrap()
            .acquire_at("t", 1, 1_700_000_000_000)
            .unwrap_err()
    };
    let alone = fail(&[log]);
    let both = fail(&[log, bucketed]);
    assert!(alone.message().contains("READONLY"), "{alone}");
    assert!(both.message().contains("READONLY"), "{both}");
    assert_eq!(both.code(), alone.code(), "{both} / {alone}");
}

#[test]
fn validation_names_the_limit() {
    let log = |limit, window| Limit::new(Algorithm::SlidingLog, limit, window);
    let field = |limits: &[Limit]| {
        Policy::with_limits("rl", "api", limits)
            .unwrap_err()
            .field()
            .unwrap()
    };
    assert_eq!(field(&[]), "limits");
    assert_eq!(field(&[log(1, 1000); 9]), "limits");
    assert_eq!(field(&[log(2, 1000), log(3, 0)]), "limits[1].window_ms");
    assert_eq!(field(&[log(0, 1000), log(3, 10)]), "limits[0].limit");
    assert_eq!(field(&[log(2, 1000), log(5, 1000)]), "limits");
    let mut on_log = log(2, 1000);
    on_log.buckets = Some(10);
    assert_eq!(field(&[log(2, 10), on_log]), "limits[1].buckets");
    assert_eq!(
        field(&[log(2, 0)]),
        "window_ms",
        "one limit keeps plain names"
    );
    let p = Policy::with_limits("rl", "api", &[log(2, 1000), log(5, 10_000)]).unwrap();
    let e = p.build_call("t", 3, None, Mode::Acquire).unwrap_err();
    assert_eq!(
        (e.code(), e.field()),
        (ErrorCode::InvalidArgument, Some("cost"))
    );
    assert!(e.message().contains("limits[0]"), "{e}");
    let bucketed = Limit::new(Algorithm::BucketedWindow, 2, 60_000);
    let p = Policy::with_limits("rl", "api", &[log(2, 1000), bucketed]).unwrap();
    assert_eq!(p.limits()[1].buckets, Some(DEFAULT_BUCKETS));
}

/// A denial Redis gave before a reset's `DEL`, whose reply is read only
/// after the reset has returned, must not be cached: the tenant starts
/// afresh in Redis, and the next acquire must ask it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denial_overtaken_by_a_reset_is_not_cached() {
    let own = OwnRedis::start();
    let mut raw = own.connection();
    let policy = Policy::new("rl", "race", Algorithm::SlidingLog, 2, 60_000).unwrap();
    let limiter = slidelimit::Limiter::connect(&own.url(), policy, Options::default())
        .await
        .unwrap();
    assert!(limiter.acquire_n("race-t", 2).await.unwrap().allowed);
    // Polled once: the cache is checked and the call is sent; its reply is
    // not read until after the reset.
    let mut late = Box::pin(limiter.acquire_n("race-t", 2));
    let waker = std::task::Waker::noop();
    let polled = late
        .as_mut()
        .poll(&mut std::task::Context::from_waker(waker));
    assert!(polled.is_pending(), "{polled:?}");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while command_calls(&mut raw, "evalsha") < 2 {
        assert!(std::time::Instant::now() < deadline, "the call never ran");
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    limiter.reset("race-t").await.unwrap();
    let denied = late.await.unwrap();
    assert!(!denied.allowed, "Redis ran it before the DEL");
    let after = limiter.acquire_n("race-t", 2).await.unwrap();
    assert!(after.allowed, "the stale denial was cached");
    assert_eq!(command_calls(&mut raw, "evalsha"), 3);
}

/// A reset dropped while its `DEL` waits still forgets the tenant again at
/// the end: a denial cached meanwhile (here by a limiter on another server,
/// checked after the reset began) may predate the `DEL`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_reset_still_forgets_at_its_end() {
    let (paused, other) = (OwnRedis::start(), OwnRedis::start());
    let mut paused_raw = paused.connection();
    let mut other_raw = other.connection();
    let policy = Policy::new("rl", "dropped", Algorithm::SlidingLog, 1, 60_000).unwrap();
    let connect = |url: String| {
        let policy = policy.clone();
        async move {
            slidelimit::Limiter::connect(&url, policy, Options::default())
                .await
                .unwrap()
        }
    };
    let resetter = connect(paused.url()).await;
    let cached = connect(other.url()).await;
    assert!(cached.acquire("dropped-t").await.unwrap().allowed);
    let _: () = redis::cmd("CLIENT")
        .arg(&["PAUSE", "10000", "WRITE"])
        .query(&mut paused_raw)
        .unwrap();
    let mut reset = Box::pin(resetter.reset("dropped-t"));
    let waker = std::task::Waker::noop();
    let polled = reset
        .as_mut()
        .poll(&mut std::task::Context::from_waker(waker));
    assert!(polled.is_pending(), "the DEL waits for the pause");
    // Sent a millisecond or more after the reset began: cacheable.
    tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    assert!(!cached.acquire("dropped-t").await.unwrap().allowed);
    let calls = command_calls(&mut other_raw, "evalsha");
    assert!(!cached.acquire("dropped-t").await.unwrap().allowed);
    assert_eq!(command_calls(&mut other_raw, "evalsha"), calls, "cached");
    drop(reset);
    assert!(!cached.acquire("dropped-t").await.unwrap().allowed);
    assert_eq!(
        command_calls(&mut other_raw, "evalsha"),
        calls + 1,
        "the dropped reset forgot the tenant at its end"
    );
    let _: () = redis::cmd("CLIENT")
        .arg("UNPAUSE")
        .query(&mut paused_raw)
        .unwrap();
}

#[test]
fn the_deny_cache_answers_without_redis_until_the_retry() {
    // A server of this test's own: nothing else runs scripts on it. A tenant
    // of its own too: a reset of a tenant through any limiter of the process
    // drops it from every cache, and the other tests run beside this one.
    let own = OwnRedis::start();
    let mut raw = own.connection();
    let registry = prometheus::Registry::new();
    let metrics = slidelimit::Metrics::register(&registry, false).unwrap();
    let options = Options {
        metrics: Some(metrics),
        ..Options::default()
    };
    // 2 per 60 s: a denial's retry is far longer than this test.
    let policy = Policy::new("rl", "cache", Algorithm::SlidingLog, 2, 60_000).unwrap();
    let limiter = blocking::Limiter::connect(&own.url(), policy.clone(), options).unwrap();
    assert!(limiter.acquire_n("cache-t", 2).unwrap().allowed);
    let denied = limiter.acquire_n("cache-t", 2).unwrap();
    assert!(!denied.allowed);
    let before = command_calls(&mut raw, "evalsha");
    assert_eq!(before, 2);
    for cost in [2, 2, 2] {
        let local = limiter.acquire_n("cache-t", cost).unwrap();
        assert!(!local.allowed);
        assert!(local.retry_after_ms <= denied.retry_after_ms && local.retry_after_ms >= 1);
    }
    assert_eq!(
        command_calls(&mut raw, "evalsha"),
        before,
        "costs >= 2 answered locally"
    );
    assert!(!limiter.acquire_n("cache-t", 1).unwrap().allowed);
    assert_eq!(
        command_calls(&mut raw, "evalsha"),
        before + 1,
        "a lower cost asks Redis"
    );
    // Caller time and peeks never use the cache.
    limiter.acquire_at("cache-t", 2, 1).unwrap();
    limiter.peek("cache-t", 2).unwrap();
    assert_eq!(command_calls(&mut raw, "evalsha"), before + 3);
    // This limiter's reset clears its entry: the next acquire asks Redis.
    limiter.reset("cache-t").unwrap();
    assert!(limiter.acquire_n("cache-t", 2).unwrap().allowed);
    assert_eq!(command_calls(&mut raw, "evalsha"), before + 4);
    // So does a reset through another limiter of the process, even one
    // whose own cache is off.
    assert!(!limiter.acquire_n("cache-t", 2).unwrap().allowed);
    assert!(!limiter.acquire_n("cache-t", 2).unwrap().allowed);
    assert_eq!(
        command_calls(&mut raw, "evalsha"),
        before + 5,
        "one denial cached"
    );
    let without_cache = Options {
        deny_cache: None,
        ..Options::default()
    };
    let other = blocking::Limiter::connect(&own.url(), policy.clone(), without_cache).unwrap();
    other.reset("cache-t").unwrap();
    assert!(limiter.acquire_n("cache-t", 2).unwrap().allowed);
    assert_eq!(command_calls(&mut raw, "evalsha"), before + 6);

    let text = prometheus::TextEncoder::new()
        .encode_to_string(&registry.gather())
        .unwrap();
    let value = |name: &str| -> u64 {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.rsplit(' ').next())
            .map_or(0, |n| n.parse().unwrap())
    };
    assert_eq!(value("ratelimit_local_denied_total"), 4);
    assert_eq!(
        value("ratelimit_denied_total"),
        8,
        "1 + 3 local + 1 at cost 1 + 1 at caller time, then 1 + 1 local"
    );

    // Switched off, every acquire asks Redis.
    let off = Options {
        deny_cache: None,
        ..Options::default()
    };
    let uncached = blocking::Limiter::connect(&own.url(), policy, off).unwrap();
    let calls = command_calls(&mut raw, "evalsha");
    for _ in 0..3 {
        assert!(!uncached.acquire_n("cache-t", 2).unwrap().allowed);
    }
    assert_eq!(command_calls(&mut raw, "evalsha"), calls + 3);
    let e = blocking::Limiter::connect(
        &own.url(),
        Policy::new("rl", "cache", Algorithm::SlidingLog, 2, 60_000).unwrap(),
        Options {
            deny_cache: Some(0),
            ..Options::default()
        },
    )
    .err()
    .unwrap();
    assert_eq!(e.field(), Some("deny_cache_capacity"));
}
