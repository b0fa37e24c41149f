//! The Rust binding against a real redis-server.

mod common;

use common::{raw_connection, redis_url, unique_namespace, OwnRedis};
use slidelimit::{blocking, Algorithm, ErrorCode, Limiter, Metrics, Options, Policy};
use std::time::{Duration, Instant};

fn policy(algorithm: Algorithm, limit: u64, window_ms: u64) -> Policy {
    Policy::new(
        &unique_namespace("rl"),
        "geocode",
        algorithm,
        limit,
        window_ms,
    )
    .unwrap()
}

fn connect(policy: Policy) -> blocking::Limiter {
    blocking::Limiter::connect(&redis_url(), policy, Options::default()).unwrap()
}

#[test]
fn log_fills_to_the_limit_then_denies_with_the_oldest_entry() {
    let limiter = connect(policy(Algorithm::SlidingLog, 3, 1000));
    let t = 1_800_000_000_000;
    for (i, now) in [t, t + 100, t + 200].into_iter().enumerate() {
        let d = limiter.acquire_at("tenant-1", 1, now).unwrap();
        assert!(d.allowed);
        assert_eq!(d.remaining, 2 - i as u64);
        assert_eq!(d.reset_after_ms, 1000);
    }
    let denied = limiter.acquire_at("tenant-1", 1, t + 300).unwrap();
    assert!(!denied.allowed);
    assert_eq!(
        denied.retry_after_ms, 700,
        "the oldest entry (t) frees room at t + 1000"
    );
    assert_eq!(
        denied.reset_after_ms, 900,
        "the newest entry (t + 200) counts until t + 1200"
    );
    // Another tenant has its own budget.
    assert!(limiter.acquire_at("tenant-2", 3, t + 300).unwrap().allowed);
    // At exactly s + W the oldest entry stops counting.
    assert!(limiter.acquire_at("tenant-1", 1, t + 1000).unwrap().allowed);
}

#[test]
fn server_time_is_the_default() {
    for algorithm in [Algorithm::SlidingLog, Algorithm::SlidingCounter] {
        let limiter = connect(policy(algorithm, 2, 60_000));
        let mut con = raw_connection();
        let (secs, micros): (u64, u64) = redis::cmd("TIME").query(&mut con).unwrap();
        let server_ms = secs * 1000 + micros / 1000;
        let d = limiter.acquire("t").unwrap();
        assert!(d.allowed);
        assert!(
            d.now_ms >= server_ms && d.now_ms < server_ms + 60_000,
            "now_ms {} should come from Redis TIME ({server_ms})",
            d.now_ms
        );
        assert!(limiter.acquire_n("t", 1).unwrap().allowed);
        assert!(!limiter.acquire("t").unwrap().allowed);
    }
}

#[test]
fn peek_records_nothing_and_reset_forgets() {
    for algorithm in [Algorithm::SlidingLog, Algorithm::SlidingCounter] {
        let p = policy(algorithm, 2, 10_000);
        let key = p.key("t").unwrap();
        let limiter = connect(p);
        let t = 1_800_000_000_000;
        let peeked = limiter.peek_at("t", 1, t).unwrap();
        let mut con = raw_connection();
        let exists: bool = redis::cmd("EXISTS").arg(&key).query(&mut con).unwrap();
        assert!(!exists, "peek must not create {key}");
        let acquired = limiter.acquire_at("t", 1, t).unwrap();
        assert_eq!(peeked, acquired, "peek answers what acquire would");
        assert_eq!(limiter.peek_at("t", 1, t).unwrap().remaining, 0);
        assert_eq!(
            limiter.peek_at("t", 1, t).unwrap(),
            limiter.acquire_at("t", 1, t).unwrap()
        );
        assert!(!limiter.acquire_at("t", 1, t).unwrap().allowed);
        limiter.reset("t").unwrap();
        let exists: bool = redis::cmd("EXISTS").arg(&key).query(&mut con).unwrap();
        assert!(!exists);
        assert!(limiter.acquire_at("t", 2, t).unwrap().allowed);
    }
}

#[test]
fn every_key_gets_a_ttl() {
    for algorithm in [Algorithm::SlidingLog, Algorithm::SlidingCounter] {
        let p = policy(algorithm, 5, 30_000);
        let key = p.key("t").unwrap();
        let limiter = connect(p);
        limiter.acquire("t").unwrap();
        let ttl: i64 = redis::cmd("PTTL")
            .arg(&key)
            .query(&mut raw_connection())
            .unwrap();
        let most = if algorithm == Algorithm::SlidingLog {
            30_000
        } else {
            60_000
        };
        assert!(ttl > 0 && ttl <= most, "{algorithm:?} ttl {ttl}");
    }
}

#[test]
fn invalid_input_names_the_field() {
    let limiter = connect(policy(Algorithm::SlidingLog, 3, 1000));
    let cases = [
        (limiter.acquire(""), "tenant"),
        (limiter.acquire(&"x".repeat(513)), "tenant"),
        (limiter.acquire_n("t", 0), "cost"),
        (limiter.acquire_n("t", 4), "cost"),
        (limiter.acquire_at("t", 1, (1 << 52) + 1), "now_ms"),
        (limiter.peek("", 1), "tenant"),
    ];
    for (result, field) in cases {
        let e = result.unwrap_err();
        assert_eq!(e.code(), ErrorCode::InvalidArgument);
        assert_eq!(e.field(), Some(field));
        assert!(e.to_string().contains(field), "{e}");
    }
    assert_eq!(limiter.reset("").unwrap_err().field(), Some("tenant"));
    let bad_url = blocking::Limiter::connect(
        "notaurl://x",
        policy(Algorithm::SlidingLog, 1, 1),
        Options::default(),
    );
    assert_eq!(bad_url.err().unwrap().field(), Some("url"));
}

/// A caller so far behind the newest admission that a hint would pass 2^53
/// (docs/protocol.md, "Bucketed window", rule 4): the script refuses it with
/// the memory engine's error, field and text alike, and records nothing.
#[test]
fn a_bucketed_hint_past_2p53_is_the_engines_invalid_argument() {
    let top = 1u64 << 52;
    let p = Policy::with_buckets(
        &unique_namespace("rl"),
        "geocode",
        Algorithm::BucketedWindow,
        1,
        top,
        Some(1),
    )
    .unwrap();
    let redis = connect(p.clone());
    let memory = blocking::Limiter::memory(p, Options::default()).unwrap();
    for limiter in [&redis, &memory] {
        assert!(limiter.acquire_at("t", 1, top).unwrap().allowed);
    }
    let refused = |limiter: &blocking::Limiter| limiter.acquire_at("t", 1, top - 2).unwrap_err();
    let (on_redis, in_memory) = (refused(&redis), refused(&memory));
    assert_eq!(on_redis.code(), ErrorCode::InvalidArgument, "{on_redis}");
    assert_eq!(on_redis.field(), Some("now_ms"));
    assert_eq!(on_redis.to_string(), in_memory.to_string());
    // At 2^52 - 1 the hint is exactly 2^53: an answer, the same on both.
    let redis_d = redis.acquire_at("t", 1, top - 1).unwrap();
    assert_eq!(redis_d, memory.acquire_at("t", 1, top - 1).unwrap());
    assert_eq!((redis_d.allowed, redis_d.retry_after_ms), (false, 1 << 53));
}

#[test]
fn a_flushed_script_cache_is_invisible() {
    let limiter = connect(policy(Algorithm::SlidingCounter, 10, 60_000));
    let t = 1_800_000_000_000;
    assert_eq!(limiter.acquire_at("t", 1, t).unwrap().remaining, 9);
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query(&mut raw_connection())
        .unwrap();
    let d = limiter.acquire_at("t", 1, t).unwrap();
    assert!(d.allowed);
    assert_eq!(
        d.remaining, 8,
        "the retry after NOSCRIPT counted exactly once"
    );
}

#[test]
fn a_key_of_the_wrong_type_is_wrong_type() {
    let p = policy(Algorithm::SlidingLog, 3, 1000);
    let key = p.key("t").unwrap();
    // With a TTL like every key a test leaves (make test checks it afterwards).
    let _: () = redis::cmd("SET")
        .arg(&key)
        .arg("x")
        .arg("PX")
        .arg(60_000)
        .query(&mut raw_connection())
        .unwrap();
    let e = connect(p).acquire("t").unwrap_err();
    assert_eq!(e.code(), ErrorCode::WrongType, "{e}");
    // Core's message names the key and the algorithm, then the server's text.
    let named = format!("key {key} holds a value the sliding_log algorithm does not use");
    assert!(e.message().starts_with(&named), "{e}");
    assert!(e.message().contains("WRONGTYPE"), "{e}");
}

/// Binds `port` and never listens: connections to it are refused, and the
/// kernel hands the port to no other bind of port 0 (how every test picks its
/// server's port) while the socket is held. So a
/// client still pointed at a stopped server meets a refused connection, not
/// whichever server got the freed port next.
fn hold_closed(port: u16) -> socket2::Socket {
    let socket =
        socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("a socket");
    // The stopped server's connections may linger in TIME_WAIT on the port.
    socket.set_reuse_address(true).expect("SO_REUSEADDR");
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    socket
        .bind(&addr.into())
        .unwrap_or_else(|e| panic!("port {port} was taken as soon as its server stopped: {e}"));
    socket
}

#[test]
fn a_stopped_redis_is_unavailable_within_the_timeout() {
    let mut own = OwnRedis::start();
    let timeout = Duration::from_millis(300);
    let options = Options {
        timeout,
        ..Options::default()
    };
    let limiter = blocking::Limiter::connect(
        &own.url(),
        policy(Algorithm::SlidingLog, 3, 1000),
        options.clone(),
    )
    .unwrap();
    assert!(limiter.acquire("t").unwrap().allowed);
    own.stop();
    let _closed = hold_closed(own.port);
    for _ in 0..3 {
        let started = Instant::now();
        let e = limiter.acquire("t").unwrap_err();
        assert_eq!(e.code(), ErrorCode::Unavailable, "{e}");
        // Bounded by the timeout (plus scheduling slack), never a decision.
        assert!(
            started.elapsed() < timeout * 4,
            "took {:?}",
            started.elapsed()
        );
    }
    let refused =
        blocking::Limiter::connect(&own.url(), policy(Algorithm::SlidingLog, 3, 1000), options);
    assert_eq!(refused.err().unwrap().code(), ErrorCode::Unavailable);
}

/// The helper that starts and restarts the fault tests' servers: a port that
/// another process holds is a clear failure, never that process taken for ours.
#[test]
fn own_redis_fails_clearly_on_a_port_another_process_holds() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let started = std::panic::catch_unwind(|| {
        OwnRedis::start_args(port, vec!["--port".to_owned(), port.to_string()])
    });
    let message = match started {
        Ok(_) => panic!("a redis-server was taken as started on a port a listener holds"),
        Err(payload) => payload
            .downcast_ref::<String>()
            .cloned()
            .unwrap_or_default(),
    };
    assert!(
        message.contains(&format!("redis-server on port {port} exited")),
        "{message}"
    );
    drop(listener);
}

#[test]
fn a_server_that_never_answers_times_out_as_unavailable() {
    // Accepts connections and never replies: the per-call timeout must end the wait.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let holder = std::thread::spawn(move || {
        let mut held = Vec::new();
        for _ in 0..4 {
            match listener.accept() {
                Ok((stream, _)) => held.push(stream),
                Err(_) => break,
            }
        }
        std::thread::sleep(Duration::from_secs(3));
    });
    let timeout = Duration::from_millis(200);
    let started = Instant::now();
    let result = blocking::Limiter::connect(
        &format!("redis://127.0.0.1:{port}/"),
        policy(Algorithm::SlidingLog, 3, 1000),
        Options {
            timeout,
            ..Options::default()
        },
    );
    assert_eq!(result.err().unwrap().code(), ErrorCode::Unavailable);
    assert!(
        started.elapsed() < timeout * 5,
        "took {:?}",
        started.elapsed()
    );
    drop(holder);
}

#[test]
fn metrics_count_decisions() {
    let registry = prometheus::Registry::new();
    let metrics = Metrics::register(&registry, true).unwrap();
    let p = policy(Algorithm::SlidingLog, 2, 60_000);
    let limiter = blocking::Limiter::connect(
        &redis_url(),
        p,
        Options {
            timeout: Duration::from_secs(1),
            metrics: Some(metrics),
            ..Options::default()
        },
    )
    .unwrap();
    for _ in 0..5 {
        limiter.acquire("tenant-9").unwrap();
    }
    let families = registry.gather();
    let value = |name: &str| -> f64 {
        let family = families.iter().find(|f| f.name() == name).unwrap();
        let metric = &family.get_metric()[0];
        let labels: Vec<(&str, &str)> = metric
            .get_label()
            .iter()
            .map(|l| (l.name(), l.value()))
            .collect();
        if name != "ratelimit_wait_seconds" {
            assert_eq!(labels, [("resource", "geocode"), ("tenant", "tenant-9")]);
        }
        if family.name() == "ratelimit_wait_seconds" {
            metric.get_histogram().get_sample_count() as f64
        } else {
            metric.get_counter().get_value()
        }
    };
    assert_eq!(value("ratelimit_allowed_total"), 2.0);
    assert_eq!(value("ratelimit_denied_total"), 3.0);
    assert_eq!(value("ratelimit_wait_seconds"), 3.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_limiter_shares_one_budget_across_tasks() {
    let limiter = Limiter::connect(
        &redis_url(),
        policy(Algorithm::SlidingLog, 50, 60_000),
        Options::default(),
    )
    .await
    .unwrap();
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let limiter = limiter.clone();
            tokio::spawn(async move {
                let mut allowed = 0;
                for _ in 0..20 {
                    if limiter.acquire("shared").await.unwrap().allowed {
                        allowed += 1;
                    }
                }
                allowed
            })
        })
        .collect();
    let mut total = 0;
    for t in tasks {
        total += t.await.unwrap();
    }
    assert_eq!(
        total, 50,
        "160 attempts against a limit of 50 admit exactly 50"
    );
}

#[test]
fn a_timeout_below_one_ms_is_invalid_argument_naming_the_field() {
    // Core's rule for every binding: a check always has a deadline.
    for timeout in [
        Duration::ZERO,
        Duration::from_micros(500),
        Duration::from_micros(1500),
        Duration::from_nanos(2_000_000_001),
    ] {
        let options = || Options {
            timeout,
            ..Options::default()
        };
        let p = policy(Algorithm::SlidingLog, 1, 1000);
        let url = redis_url();
        let errors = [
            blocking::Limiter::connect(&url, p.clone(), options()).err(),
            blocking::Limiter::connect_cluster(&[url.as_str()], p.clone(), options()).err(),
        ];
        for e in errors {
            let e = e.expect("a zero timeout must be refused");
            assert_eq!(e.code(), ErrorCode::InvalidArgument, "{e}");
            assert_eq!(e.field(), Some("timeout_ms"), "{e}");
        }
    }
    let too_long = Options {
        timeout: Duration::from_millis(1 << 31),
        ..Options::default()
    };
    let e = blocking::Limiter::connect(
        &redis_url(),
        policy(Algorithm::SlidingLog, 1, 1000),
        too_long,
    )
    .err()
    .unwrap();
    assert_eq!(e.field(), Some("timeout_ms"));
    let longest = Options {
        timeout: Duration::from_millis((1 << 31) - 1),
        ..Options::default()
    };
    let l = blocking::Limiter::connect(
        &redis_url(),
        policy(Algorithm::SlidingLog, 1, 1000),
        longest,
    )
    .unwrap();
    assert!(l.acquire("t").unwrap().allowed);
}

#[test]
fn limiters_on_one_memory_engine_share_its_keys_as_on_redis() {
    // A changed policy (limit 5, then 3) over the same keys sees what the
    // earlier limiter recorded, on a shared engine as on one Redis; a limiter
    // of its own engine sees nothing.
    let ns = unique_namespace("shared");
    let of = |limit| Policy::new(&ns, "geocode", Algorithm::SlidingLog, limit, 1000).unwrap();
    let redis = [connect(of(5)), connect(of(3))];
    let engine = std::sync::Arc::new(slidelimit::MemoryEngine::new());
    let shared = [
        blocking::Limiter::memory_on(engine.clone(), of(5), Options::default()).unwrap(),
        blocking::Limiter::memory_on(engine, of(3), Options::default()).unwrap(),
    ];
    for [first, second] in [&redis, &shared] {
        assert_eq!(first.acquire_at("t", 2, 1000).unwrap().remaining, 3);
        let d = second.acquire_at("t", 1, 1001).unwrap();
        assert!(d.allowed);
        assert_eq!(d.remaining, 0, "the second limiter counts the first's 2");
        assert!(!second.acquire_at("t", 1, 1002).unwrap().allowed);
    }
    let own = blocking::Limiter::memory(of(3), Options::default()).unwrap();
    assert_eq!(own.acquire_at("t", 1, 1003).unwrap().remaining, 2);
}

#[test]
fn kept_calls_decide_as_core_builds_and_refuse_what_core_refuses() {
    // acquire(tenant) keeps core's call by tenant (two generations of 2,048):
    // every decision stays the one core's fresh call gives, every bad input
    // is still refused, and a tenant that fell out is built again.
    let p = policy(Algorithm::SlidingLog, 2, 60_000);
    let tenants = 2 * 2048 + 2;
    let redis = connect(p.clone());
    let memory = blocking::Limiter::memory(p, Options::default()).unwrap();
    for limiter in [&redis, &memory] {
        assert_eq!(limiter.acquire("t-0").unwrap().remaining, 1);
        for (tenant, cost) in [("t-0", 0), ("t-0", 3), ("", 1)] {
            let e = limiter.acquire_n(tenant, cost).unwrap_err();
            assert_eq!(
                e.code(),
                ErrorCode::InvalidArgument,
                "{tenant:?} {cost}: {e}"
            );
        }
        assert_eq!(limiter.acquire("").unwrap_err().field(), Some("tenant"));
        for i in 1..tenants {
            assert_eq!(limiter.acquire(&format!("t-{i}")).unwrap().remaining, 1);
        }
        assert_eq!(limiter.acquire("t-0").unwrap().remaining, 0);
        assert!(!limiter.acquire("t-0").unwrap().allowed);
        assert_eq!(limiter.acquire_n("t-1", 1).unwrap().remaining, 0);
        assert!(!limiter.acquire_n("t-2", 2).unwrap().allowed);
        assert_eq!(limiter.peek("t-3", 1).unwrap().remaining, 0);
    }
}

#[test]
fn bad_options_are_invalid_argument_even_with_redis_out_of_reach() {
    // Options are checked before the connect: a bad one is the caller's
    // mistake, never `unavailable`, whatever the state of Redis.
    let nobody = format!("redis://127.0.0.1:{}/", common::free_port());
    let cases = [
        (
            Options {
                timeout: Duration::ZERO,
                ..Options::default()
            },
            "timeout_ms",
        ),
        (
            Options {
                deny_cache: Some(0),
                ..Options::default()
            },
            "deny_cache_capacity",
        ),
        (
            Options {
                deny_cache: Some(usize::MAX),
                ..Options::default()
            },
            "deny_cache_capacity",
        ),
    ];
    for (options, field) in cases {
        let p = policy(Algorithm::SlidingLog, 1, 1000);
        let errors = [
            blocking::Limiter::connect(&nobody, p.clone(), options.clone()).err(),
            blocking::Limiter::connect_cluster(&[nobody.as_str()], p, options).err(),
        ];
        for e in errors {
            let e = e.expect("a bad option must be refused");
            assert_eq!(e.code(), ErrorCode::InvalidArgument, "{field}: {e}");
            assert_eq!(e.field(), Some(field), "{e}");
        }
    }
}

#[test]
fn resp3_connections_decide_like_resp2() {
    // `?protocol=resp3` in the URL switches redis-rs to RESP3 (HELLO 3): the
    // script's reply is still an array of integers, the key the same.
    let p = policy(Algorithm::SlidingLog, 2, 60_000);
    let resp2 = connect(p.clone());
    let resp3 = blocking::Limiter::connect(
        &format!("{}?protocol=resp3", redis_url().trim_end_matches('/')),
        p,
        Options::default(),
    )
    .unwrap();
    let t = 1_800_000_000_000;
    assert_eq!(resp3.acquire_at("t", 1, t).unwrap().remaining, 1);
    assert_eq!(resp2.acquire_at("t", 1, t).unwrap().remaining, 0);
    let denied = resp3.acquire_at("t", 1, t + 10).unwrap();
    assert!(!denied.allowed);
    assert_eq!(denied.retry_after_ms, 59_990);
    assert!(
        resp3.acquire("u").unwrap().allowed,
        "server time under RESP3"
    );
    resp3.reset("t").unwrap();
    assert!(resp2.acquire_at("t", 2, t + 20).unwrap().allowed);
}

/// The server's clock, in ms (Redis `TIME`).
fn server_ms(con: &mut redis::Connection) -> u64 {
    let (secs, micros): (u64, u64) = redis::cmd("TIME").query(con).unwrap();
    secs * 1000 + micros / 1000
}

/// A replay steps through synthetic caller times at its own pace: with a
/// window of 1 ms, the real time between two steps at the same caller time
/// is far longer than the window. The key must still be there for the
/// second step (docs/protocol.md, "Key expiry and caller clocks": with
/// caller time every TTL gets the window, at least a minute). With a margin
/// of one window, Redis dropped it after 2 ms of real time and the second
/// step was admitted over the limit.
#[test]
fn a_caller_time_key_outlives_the_real_time_between_two_steps() {
    let bucketed = Policy::with_buckets(
        &unique_namespace("rl"),
        "geocode",
        Algorithm::BucketedWindow,
        1,
        1,
        Some(1),
    )
    .unwrap();
    let mut raw = raw_connection();
    for p in [
        policy(Algorithm::SlidingLog, 1, 1),
        policy(Algorithm::SlidingCounter, 1, 1),
        bucketed,
    ] {
        let algorithm = p.algorithm();
        let key = p.key("t").unwrap();
        let limiter = connect(p);
        assert!(limiter.acquire_at("t", 1, 5_000).unwrap().allowed);
        std::thread::sleep(Duration::from_millis(50));
        let d = limiter.acquire_at("t", 1, 5_000).unwrap();
        assert!(!d.allowed, "{algorithm:?}: {d:?}");
        // The time to nothing counts (1 ms, 2 ms for the counter) plus a
        // minute, less the 50 ms slept.
        let ttl: i64 = redis::cmd("PTTL").arg(&key).query(&mut raw).unwrap();
        assert!(
            (59_000..=60_002).contains(&ttl),
            "{algorithm:?}: PTTL {ttl}"
        );
        limiter.reset("t").unwrap();
    }
}

/// Caller clocks that disagree (docs/protocol.md, "Key expiry and caller
/// clocks"): a writer whose clock leads the server's by 1,000 ms fills the
/// limit. Its key's time-to-nothing-counts is 1,500 ms on its own clock, but
/// for a caller on the server's clock the permits count 1,000 ms longer; the
/// key must still be there then, or that caller is admitted over the limit
/// (seen in a skewed-clock audit at limit 3). With the server's clock the
/// key's TTL stays the exact 1,500 ms.
#[test]
fn a_leading_writers_key_outlives_its_clock_for_the_others() {
    let bucketed = Policy::with_buckets(
        &unique_namespace("rl"),
        "geocode",
        Algorithm::BucketedWindow,
        3,
        1500,
        Some(15),
    )
    .unwrap();
    let limiters = [
        connect(policy(Algorithm::SlidingLog, 3, 1500)),
        connect(bucketed),
    ];
    let mut raw = raw_connection();
    let start = server_ms(&mut raw);
    for limiter in &limiters {
        assert!(limiter.acquire_at("t", 3, start + 1000).unwrap().allowed);
    }
    std::thread::sleep(Duration::from_millis(1700));
    let now = server_ms(&mut raw);
    // The writer's clock is past its permits' window (and past the key's TTL
    // without the margin); the server's is not.
    assert!(
        now < start + 2400,
        "the machine stalled for {} ms",
        now - start
    );
    for limiter in &limiters {
        let d = limiter.peek_at("t", 1, now).unwrap();
        assert!(!d.allowed, "{:?}: {d:?}", limiter.policy().algorithm());
    }
    let server_time = connect(policy(Algorithm::SlidingLog, 3, 1500));
    assert!(server_time.acquire("t").unwrap().allowed);
    let key = server_time.policy().key("t").unwrap();
    let ttl: i64 = redis::cmd("PTTL").arg(&key).query(&mut raw).unwrap();
    assert!((1..=1500).contains(&ttl), "server time: PTTL {ttl}");
    // Several limits: the script reads the server's clock once and hands it
    // to each limit as a time, which must not count as the caller's.
    let mut bucketed = slidelimit::Limit::new(Algorithm::BucketedWindow, 3, 1500);
    bucketed.buckets = Some(15);
    let limits = [
        slidelimit::Limit::new(Algorithm::SlidingLog, 3, 1500),
        bucketed,
    ];
    for caller_time in [false, true] {
        let multi = Policy::with_limits(&unique_namespace("rl"), "geocode", &limits).unwrap();
        let keys = multi.keys("t").unwrap();
        let multi = connect(multi);
        let d = if caller_time {
            multi.acquire_at("t", 1, server_ms(&mut raw)).unwrap()
        } else {
            multi.acquire("t").unwrap()
        };
        assert!(d.allowed);
        for key in &keys {
            let ttl: i64 = redis::cmd("PTTL").arg(key).query(&mut raw).unwrap();
            // Time to nothing counts: W for the log, up to W + 99 (one
            // bucket of 100 ms) for the bucketed window; with caller time the
            // margin more, a minute here (less the few ms the calls took).
            let expected = if caller_time {
                61_400..=61_599
            } else {
                1..=1599
            };
            assert!(
                expected.contains(&ttl),
                "caller time {caller_time}: {key} PTTL {ttl}"
            );
        }
    }
}
