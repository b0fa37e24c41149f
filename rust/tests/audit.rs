//! The rolling-window audit: concurrent callers on one tenant with server
//! time; no (t - W, t] of the returned now_ms may hold more than `limit`
//! admitted permits.

mod common;

use common::{redis_url, unique_namespace};
use slidelimit::{Algorithm, Limiter, Options, Policy};

const CALLERS: usize = 8;
const ATTEMPTS_PER_CALLER: usize = 2600;
const LIMIT: u64 = 25;
const WINDOW_MS: u64 = 100;

/// Largest number of timestamps in any half-open window (t - W, t].
fn largest_rolling_count(sorted: &[u64], window_ms: u64) -> usize {
    let mut oldest = 0;
    let mut largest = 0;
    for (newest, &t) in sorted.iter().enumerate() {
        while sorted[oldest] + window_ms <= t {
            oldest += 1;
        }
        largest = largest.max(newest + 1 - oldest);
    }
    largest
}

#[test]
fn the_checker_counts_half_open_windows() {
    assert_eq!(largest_rolling_count(&[0, 99, 100, 100, 199], 100), 3);
    assert_eq!(largest_rolling_count(&[5, 5, 5], 100), 3);
    assert_eq!(largest_rolling_count(&[0, 100, 200], 100), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_rolling_window_admits_more_than_the_limit() {
    let policy = Policy::new(
        &unique_namespace("audit"),
        "geocode",
        Algorithm::SlidingLog,
        LIMIT,
        WINDOW_MS,
    )
    .unwrap();
    // Every attempt goes to Redis: this is about the script's atomicity
    // under concurrency (the deny cache would answer most of them here).
    let options = Options {
        deny_cache: None,
        ..Options::default()
    };
    let limiter = Limiter::connect(&redis_url(), policy, options)
        .await
        .unwrap();
    let callers: Vec<_> = (0..CALLERS)
        .map(|_| {
            let limiter = limiter.clone();
            tokio::spawn(async move {
                let mut decisions = Vec::with_capacity(ATTEMPTS_PER_CALLER);
                for _ in 0..ATTEMPTS_PER_CALLER {
                    decisions.push(limiter.acquire("tenant-1").await.unwrap());
                }
                decisions
            })
        })
        .collect();
    let mut allowed_at = Vec::new();
    let mut attempts = 0;
    for caller in callers {
        for d in caller.await.unwrap() {
            attempts += 1;
            if d.allowed {
                allowed_at.push(d.now_ms);
            } else {
                assert!(d.retry_after_ms > 0 && d.retry_after_ms <= WINDOW_MS);
            }
        }
    }
    allowed_at.sort_unstable();
    let span = allowed_at.last().unwrap() - allowed_at.first().unwrap();
    let largest = largest_rolling_count(&allowed_at, WINDOW_MS);
    eprintln!(
        "audit: {attempts} attempts, {} allowed over {span} ms, largest rolling count {largest} (limit {LIMIT})",
        allowed_at.len()
    );
    assert!(attempts >= 20_000);
    assert!(
        allowed_at.len() > 2 * LIMIT as usize,
        "the run must span several windows"
    );
    assert!(
        largest <= LIMIT as usize,
        "{largest} admitted within one window of {WINDOW_MS} ms"
    );
    assert_eq!(
        largest, LIMIT as usize,
        "a saturated exact log fills some window completely"
    );
}
