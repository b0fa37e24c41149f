//! Faults only the Rust binding's API can show, each against a real
//! redis-server: TLS configuration mistakes (a CA for a plain-text URL, text
//! that holds no certificate, the Cluster API on a standalone server), and
//! the TTL check that `make test` runs after every suite. What every binding
//! meets (SCRIPT FLUSH, restarts, an unreachable, hanging or slow Redis, a
//! key of the wrong type, ACL, TLS verification, bad input) runs against
//! every binding through its driver: faults/run (make faults). The CLI's
//! side of TLS and bad input is in cli/tests/faults.rs.

mod common;

use common::tls::Certificates;
use common::{unique_namespace, OwnRedis};
use slidelimit::{blocking, Algorithm, ErrorCode, Options, Policy};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// Far from the real clock, so caller-time keys never collide with server-time ones.
const T: u64 = 1_800_000_000_000;

fn policy(ns: &str, algorithm: Algorithm, limit: u64, window_ms: u64) -> Policy {
    Policy::new(ns, "geocode", algorithm, limit, window_ms).unwrap()
}

fn dbsize(con: &mut redis::Connection) -> u64 {
    redis::cmd("DBSIZE").query(con).unwrap()
}

// -------------------------------------------------------------------- TLS

fn tls_options(ca: Option<Vec<u8>>) -> Options {
    Options {
        timeout: Duration::from_secs(2),
        tls_ca_pem: ca,
        ..Options::default()
    }
}

#[test]
fn tls_configuration_mistakes_are_errors_not_panics() {
    let certs = Certificates::generate("server");
    let port = common::free_port();
    let _own = OwnRedis::start_args(port, certs.server_args(port));
    let url = format!("rediss://localhost:{port}/");
    let plain = format!("redis://localhost:{port}/");
    let p = policy(&unique_namespace("tls"), Algorithm::SlidingLog, 2, 60_000);

    let trusted =
        blocking::Limiter::connect(&url, p.clone(), tls_options(Some(certs.ca_pem()))).unwrap();
    assert!(trusted.acquire_at("t", 1, T).unwrap().allowed);
    // A standalone server is no Cluster: refused, but as an error, not a panic.
    let cluster_api =
        blocking::Limiter::connect_cluster(&[&url], p.clone(), tls_options(Some(certs.ca_pem())));
    assert!(cluster_api.is_err());

    // A CA for a plain-text URL is a mistake in the caller's configuration.
    let e = blocking::Limiter::connect(&plain, p.clone(), tls_options(Some(certs.ca_pem())))
        .err()
        .unwrap();
    assert_eq!(
        (e.code(), e.field()),
        (ErrorCode::InvalidArgument, Some("tls_ca_pem")),
        "{e}"
    );
    // The same for a Cluster's seeds, lazy or not (redis-rs would dial them
    // with TLS, and every call would be unavailable).
    for lazy in [false, true] {
        let seeds = [url.as_str(), plain.as_str()];
        let options = tls_options(Some(certs.ca_pem()));
        let made = match lazy {
            false => blocking::Limiter::connect_cluster(&seeds, p.clone(), options),
            true => blocking::Limiter::connect_cluster_lazy(&seeds, p.clone(), options),
        };
        let e = made.err().unwrap();
        assert_eq!(
            (e.code(), e.field()),
            (ErrorCode::InvalidArgument, Some("tls_ca_pem")),
            "lazy {lazy}: {e}"
        );
        assert!(e.to_string().contains("seed 1"), "{e}");
    }
    // Text that holds no certificate would trust nothing: a configuration error.
    for garbage in [
        &b"no PEM"[..],
        b"-----BEGIN CERTIFICATE-----\n!!\n-----END CERTIFICATE-----\n",
    ] {
        let e = blocking::Limiter::connect(&url, p.clone(), tls_options(Some(garbage.to_vec())))
            .err()
            .unwrap();
        assert_eq!(
            (e.code(), e.field()),
            (ErrorCode::InvalidArgument, Some("tls_ca_pem")),
            "{e}"
        );
    }
    trusted.reset("t").unwrap();
    // The CLI's share (a private CA through SSL_CERT_FILE): cli/tests/faults.rs.
}

// ------------------------------------------------------------- TTL check

fn check_ttl(url: &str) -> std::process::Output {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/check-ttl.py");
    Command::new("python3")
        .arg(script)
        .env("SLIDELIMIT_TEST_REDIS_URL", url)
        .env_remove("SLIDELIMIT_TEST_CLUSTER_URLS")
        .output()
        .unwrap()
}

/// `make test` runs scripts/check-ttl.py on its servers after the suites;
/// this proves the check passes on keys the binding wrote and fails on a key
/// without a TTL.
#[test]
fn the_ttl_check_passes_on_binding_keys_and_fails_on_a_key_without_ttl() {
    let own = OwnRedis::start();
    let mut con = own.connection();
    for algorithm in [Algorithm::SlidingLog, Algorithm::SlidingCounter] {
        let limiter = blocking::Limiter::connect(
            &own.url(),
            policy("ttl", algorithm, 5, 2000),
            Options::default(),
        )
        .unwrap();
        for i in 0..20u64 {
            let tenant = format!("t{}", i % 4);
            limiter.acquire(&tenant).unwrap();
            limiter
                .acquire_at(&format!("c{}", i % 4), 1 + i % 3, T + i * 700)
                .unwrap();
            limiter.peek(&format!("peeked-{i}"), 1).unwrap();
        }
    }
    assert_eq!(
        dbsize(&mut con),
        16,
        "4 tenants x 2 algorithms x 2 clocks; peeks write nothing"
    );
    let out = check_ttl(&own.url());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _: () = redis::cmd("SET")
        .arg("rl:{x:y}:log:1")
        .arg(1)
        .query(&mut con)
        .unwrap();
    let out = check_ttl(&own.url());
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("rl:{x:y}:log:1"));
}

// ------------------------------------------------------- lazy connects

fn short_timeout() -> Options {
    Options {
        timeout: Duration::from_millis(300),
        ..Options::default()
    }
}

/// Calls `acquire_at` until Redis answers (a reconnect runs in the
/// background), at most 2 s; every error meanwhile must be `unavailable`.
fn first_decision(limiter: &blocking::Limiter) -> slidelimit::Decision {
    for _ in 0..40 {
        match limiter.acquire_at("t", 1, T) {
            Ok(decision) => return decision,
            Err(e) => assert_eq!(e.code(), ErrorCode::Unavailable, "{e}"),
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("no decision within 2 s of the server's start");
}

#[test]
fn a_lazy_limiter_is_made_while_redis_is_down_and_decides_once_it_is_up() {
    let mut own = OwnRedis::start();
    own.stop();
    let ns = unique_namespace("lazy");
    let p = policy(&ns, Algorithm::SlidingLog, 3, 1000);
    // The eager connect refuses; the lazy one makes a limiter without I/O.
    let eager = blocking::Limiter::connect(&own.url(), p.clone(), short_timeout()).err();
    assert_eq!(eager.map(|e| e.code()), Some(ErrorCode::Unavailable));
    let limiter = blocking::Limiter::connect_lazy(&own.url(), p.clone(), short_timeout()).unwrap();
    for _ in 0..3 {
        let e = limiter.acquire_at("t", 1, T).unwrap_err();
        assert_eq!(e.code(), ErrorCode::Unavailable, "{e}");
    }
    assert_eq!(
        limiter.reset("t").unwrap_err().code(),
        ErrorCode::Unavailable
    );
    // What needs no Redis still works, and bad input is still refused first.
    assert_eq!(limiter.policy().key("t").unwrap(), p.key("t").unwrap());
    let bad = limiter.acquire_at("", 1, T).unwrap_err();
    assert_eq!(bad.code(), ErrorCode::InvalidArgument);

    own.restart();
    let decision = first_decision(&limiter);
    assert!(decision.allowed && decision.remaining == 2, "{decision:?}");
    assert_eq!(dbsize(&mut own.connection()), 1);
}

#[test]
fn a_lazy_limiter_refuses_a_bad_url_or_option_at_once() {
    let p = policy(&unique_namespace("lazy"), Algorithm::SlidingLog, 3, 1000);
    let bad_url = blocking::Limiter::connect_lazy("http://x", p.clone(), short_timeout());
    assert_eq!(bad_url.err().map(|e| e.field()), Some(Some("url")));
    let zero = Options {
        timeout: Duration::ZERO,
        ..Options::default()
    };
    let e = blocking::Limiter::connect_lazy("redis://127.0.0.1:1/", p.clone(), zero).err();
    assert_eq!(e.map(|e| e.field()), Some(Some("timeout_ms")));
    let none = blocking::Limiter::connect_cluster_lazy(&[], p.clone(), short_timeout()).err();
    assert_eq!(none.map(|e| e.field()), Some(Some("urls")));
    let garbage = Options {
        tls_ca_pem: Some(b"no certificate".to_vec()),
        ..short_timeout()
    };
    let e = blocking::Limiter::connect_cluster_lazy(&["rediss://127.0.0.1:1"], p, garbage).err();
    assert_eq!(e.map(|e| e.field()), Some(Some("tls_ca_pem")));
}

/// A one-node Cluster of its own (every slot on it), stopped and started
/// again with its nodes.conf.
#[test]
fn a_lazy_cluster_limiter_connects_once_its_seed_answers() {
    let mut own = OwnRedis::start_with(&["--cluster-enabled", "yes"]);
    let mut con = own.connection();
    let mut addslots = redis::cmd("CLUSTER");
    addslots
        .arg("ADDSLOTS")
        .arg((0..16384u16).collect::<Vec<_>>());
    let _: () = addslots.query(&mut con).unwrap();
    let cluster_ok = |con: &mut redis::Connection| {
        let info: String = redis::cmd("CLUSTER").arg("INFO").query(con).unwrap();
        info.contains("cluster_state:ok")
    };
    for _ in 0..200 {
        if cluster_ok(&mut con) {
            break;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    assert!(cluster_ok(&mut con), "the one-node Cluster did not come up");
    drop(con);
    own.stop();

    let p = policy(&unique_namespace("lazy"), Algorithm::SlidingLog, 3, 1000);
    let eager = blocking::Limiter::connect_cluster(&[&own.url()], p.clone(), short_timeout());
    assert_eq!(eager.err().map(|e| e.code()), Some(ErrorCode::Unavailable));
    let limiter =
        blocking::Limiter::connect_cluster_lazy(&[&own.url()], p, short_timeout()).unwrap();
    for _ in 0..3 {
        let e = limiter.acquire_at("t", 1, T).unwrap_err();
        assert_eq!(e.code(), ErrorCode::Unavailable, "{e}");
    }

    own.restart();
    let decision = first_decision(&limiter);
    assert!(decision.allowed && decision.remaining == 2, "{decision:?}");
    assert_eq!(dbsize(&mut own.connection()), 1);
}

fn connections_received(con: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("stats").query(con).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("total_connections_received:"))
        .and_then(|n| n.trim().parse().ok())
        .expect("INFO stats has total_connections_received")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lazy_limiters_first_callers_share_one_connect() {
    let own = OwnRedis::start();
    let mut admin = own.connection();
    let p = policy(&unique_namespace("lazy"), Algorithm::SlidingLog, 100, 1000);
    let limiter = slidelimit::Limiter::connect_lazy(&own.url(), p, short_timeout())
        .await
        .unwrap();
    let before = connections_received(&mut admin);
    let calls: Vec<_> = (0..32)
        .map(|i| {
            let limiter = limiter.clone();
            tokio::spawn(async move { limiter.acquire_at(&format!("t-{i}"), 1, T).await })
        })
        .collect();
    for call in calls {
        let decision = call.await.unwrap().unwrap();
        assert!(decision.allowed, "{decision:?}");
    }
    // One connection for the 32 first calls, made by one connect.
    assert_eq!(connections_received(&mut admin) - before, 1);
}
