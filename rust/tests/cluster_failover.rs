//! A `CLUSTER FAILOVER` in the middle of an audit run on the six-node Cluster
//! of scripts/with-cluster.sh: callers on one tenant with server time see no
//! error, and no rolling window admits more than the limit.

mod common;

use common::{cluster_nodes, cluster_urls, node, port_of, unique_namespace};
use slidelimit::{slot, Algorithm, Limiter, Options, Policy};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const CALLERS: usize = 6;
const LIMIT: u64 = 20;
const WINDOW_MS: u64 = 200;

/// (master port, replica port) of the shard that owns `slot`. Right after the
/// Cluster formed, a node may not list every replica yet: ask again.
fn shard_of(slot: u16, any_node: u16) -> (u16, u16) {
    for _ in 0..100 {
        if let Some(shard) = find_shard(slot, any_node) {
            return shard;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("no master with a replica owns slot {slot}");
}

/// From CLUSTER NODES, as node `any_node` sees the Cluster now.
fn find_shard(slot: u16, any_node: u16) -> Option<(u16, u16)> {
    let nodes = cluster_nodes(any_node);
    let master = nodes.iter().find(|n| n.is_master() && n.owns(slot))?;
    let replica = nodes
        .iter()
        .find(|n| n.is_replica() && n.master_id == master.id)?;
    Some((master.port, replica.port))
}

fn role(port: u16) -> String {
    let reply: Vec<redis::Value> = redis::cmd("ROLE").query(&mut node(port)).unwrap();
    match &reply[0] {
        redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        other => format!("{other:?}"),
    }
}

/// Waits until `replica` has finished its initial sync: a replica still
/// loading its master's data makes a manual failover wait for it.
fn wait_until_synced(replica: u16) {
    for _ in 0..200 {
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query(&mut node(replica))
            .unwrap();
        if info.contains("master_link_status:up") && info.contains("master_sync_in_progress:0") {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("replica {replica} never finished its sync");
}

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_mid_audit_surfaces_no_error_and_never_over_admits() {
    let urls = cluster_urls();
    let url_refs: Vec<&str> = urls.iter().map(String::as_str).collect();
    let policy = Policy::new(
        &unique_namespace("failover"),
        "geocode",
        Algorithm::SlidingLog,
        LIMIT,
        WINDOW_MS,
    )
    .unwrap();
    let key = policy.key("tenant-1").unwrap();
    let (master, replica) = shard_of(slot(&key), port_of(&urls[0]));
    wait_until_synced(replica);
    let limiter = Limiter::connect_cluster(
        &url_refs,
        policy,
        // A manual failover pauses the old master's clients until the
        // replica has caught up, for at most 5 s (Redis's CLUSTER_MF_TIMEOUT):
        // a caller whose timeout is shorter may get `unavailable` meanwhile.
        // Every attempt goes to Redis, through the failover (no deny cache).
        Options {
            timeout: Duration::from_secs(6),
            deny_cache: None,
            ..Options::default()
        },
    )
    .await
    .unwrap();

    let running = Arc::new(AtomicBool::new(true));
    let callers: Vec<_> = (0..CALLERS)
        .map(|_| {
            let (limiter, running) = (limiter.clone(), running.clone());
            tokio::spawn(async move {
                let (mut allowed, mut attempts, mut errors) = (Vec::new(), 0u64, Vec::new());
                let mut slowest = Duration::ZERO;
                while running.load(Ordering::Relaxed) && attempts < 200_000 {
                    attempts += 1;
                    let started = Instant::now();
                    match limiter.acquire("tenant-1").await {
                        Ok(d) if d.allowed => allowed.push(d.now_ms),
                        Ok(d) => assert!(d.retry_after_ms > 0 && d.retry_after_ms <= WINDOW_MS),
                        Err(e) => {
                            errors.push(e.to_string());
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                    }
                    slowest = slowest.max(started.elapsed());
                }
                (allowed, attempts, errors, slowest)
            })
        })
        .collect();

    tokio::time::sleep(Duration::from_millis(1000)).await;
    // Empty the replica's script cache: the promoted node must answer
    // NOSCRIPT first, and the binding's EVAL fallback must absorb it.
    let failover_started = Instant::now();
    let became_master = tokio::task::spawn_blocking(move || {
        let mut con = node(replica);
        let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut con).unwrap();
        let _: () = redis::cmd("CLUSTER")
            .arg("FAILOVER")
            .query(&mut con)
            .unwrap();
        for _ in 0..200 {
            if role(replica) == "master" && role(master) == "slave" {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    })
    .await
    .unwrap();
    let failover_took = failover_started.elapsed();
    assert!(
        became_master,
        "replica {replica} was not promoted within 10 s"
    );
    tokio::time::sleep(Duration::from_millis(1500)).await;
    running.store(false, Ordering::Relaxed);

    let (mut allowed_at, mut attempts, mut errors, mut slowest) =
        (Vec::new(), 0, Vec::new(), Duration::ZERO);
    for caller in callers {
        let (allowed, n, errs, slow) = caller.await.unwrap();
        allowed_at.extend(allowed);
        attempts += n;
        errors.extend(errs);
        slowest = slowest.max(slow);
    }
    allowed_at.sort_unstable();
    let largest = largest_rolling_count(&allowed_at, WINDOW_MS);
    eprintln!(
        "failover: master {master} -> replica {replica} in {failover_took:?}; {attempts} attempts, \
         {} allowed, {} errors, slowest call {slowest:?}, largest rolling count {largest} (limit {LIMIT})",
        allowed_at.len(),
        errors.len()
    );
    assert!(errors.is_empty(), "callers saw errors: {errors:?}");
    assert!(
        largest <= LIMIT as usize,
        "{largest} admitted in one window"
    );
    assert!(
        allowed_at.len() > 5 * LIMIT as usize,
        "the run spans several windows"
    );
    // The new master serves the tenant's slot now, and the key expires.
    let mut con = node(replica);
    let ttl: i64 = redis::cmd("PTTL").arg(&key).query(&mut con).unwrap();
    assert!(ttl > 0 && ttl <= WINDOW_MS as i64, "ttl {ttl}");
}
