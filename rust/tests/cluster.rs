//! The Rust binding against a real six-node Redis Cluster (three masters,
//! three replicas) that scripts/with-cluster.sh starts on loopback.

mod common;

use common::{cluster_urls, unique_namespace};
use slidelimit::{blocking, slot, Algorithm, Options, Policy};

fn connect(policy: Policy) -> blocking::Limiter {
    let urls = cluster_urls();
    let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
    blocking::Limiter::connect_cluster(&urls, policy, Options::default()).unwrap()
}

fn node(url: &str) -> redis::Connection {
    redis::Client::open(url).unwrap().get_connection().unwrap()
}

#[test]
fn every_key_of_a_tenant_lives_in_one_slot() {
    let mut con = node(&cluster_urls()[0]);
    for tenant in ["tenant-17", "a}b{c", "zoë 東京", "%7D"] {
        let mut slots = Vec::new();
        for algorithm in [Algorithm::SlidingLog, Algorithm::SlidingCounter] {
            for window_ms in [1000, 60_000, 86_400_000] {
                let p = Policy::new("rl", "geocode", algorithm, 10, window_ms).unwrap();
                let key = p.key(tenant).unwrap();
                let server: u16 = redis::cmd("CLUSTER")
                    .arg("KEYSLOT")
                    .arg(&key)
                    .query(&mut con)
                    .unwrap();
                assert_eq!(
                    slot(&key),
                    server,
                    "core's slot of {key} matches the server's"
                );
                slots.push(server);
            }
        }
        slots.dedup();
        assert_eq!(slots.len(), 1, "{tenant}: {slots:?}");
    }
}

#[test]
fn one_budget_per_tenant_across_the_cluster() {
    for algorithm in [Algorithm::SlidingLog, Algorithm::SlidingCounter] {
        let limiter =
            connect(Policy::new(&unique_namespace("cl"), "geocode", algorithm, 5, 60_000).unwrap());
        // Enough tenants to land on every master.
        for i in 0..12 {
            let tenant = format!("tenant-{i}");
            let allowed = (0..8)
                .filter(|_| limiter.acquire(&tenant).unwrap().allowed)
                .count();
            assert_eq!(allowed, 5, "{algorithm:?} {tenant}");
            let denied = limiter.acquire(&tenant).unwrap();
            assert!(!denied.allowed && denied.retry_after_ms > 0);
            limiter.reset(&tenant).unwrap();
            assert!(limiter.acquire(&tenant).unwrap().allowed);
        }
    }
}

#[test]
fn a_flushed_script_cache_on_every_node_is_invisible() {
    let limiter = connect(
        Policy::new(
            &unique_namespace("cl"),
            "geocode",
            Algorithm::SlidingLog,
            3,
            60_000,
        )
        .unwrap(),
    );
    let t = 1_800_000_000_000;
    for i in 0..6 {
        assert!(limiter.acquire_at(&format!("t{i}"), 1, t).unwrap().allowed);
    }
    for url in cluster_urls() {
        let _: () = redis::cmd("SCRIPT")
            .arg("FLUSH")
            .query(&mut node(&url))
            .unwrap();
    }
    for i in 0..6 {
        let d = limiter.acquire_at(&format!("t{i}"), 1, t).unwrap();
        assert_eq!(
            (d.allowed, d.remaining),
            (true, 1),
            "counted exactly once after NOSCRIPT"
        );
    }
}
