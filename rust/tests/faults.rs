//! Faults the binding meets in production, each against a real redis-server:
//! a restart mid-run, a slow link (a loopback proxy that adds latency), an ACL
//! user confined to its prefix, TLS with verification, bad input that must
//! write nothing, and the TTL check that `make test` runs after every suite.
//! The CLI's side of TLS and bad input is in cli/tests/faults.rs.

mod common;

use common::tls::Certificates;
use common::{raw_connection, redis_url, unique_namespace, OwnRedis};
use slidelimit::{blocking, Algorithm, ErrorCode, Limiter, Options, Policy};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Far from the real clock, so caller-time keys never collide with server-time ones.
const T: u64 = 1_800_000_000_000;

fn policy(ns: &str, algorithm: Algorithm, limit: u64, window_ms: u64) -> Policy {
    Policy::new(ns, "geocode", algorithm, limit, window_ms).unwrap()
}

fn with_timeout(timeout: Duration) -> Options {
    Options {
        timeout,
        ..Options::default()
    }
}

fn dbsize(con: &mut redis::Connection) -> u64 {
    redis::cmd("DBSIZE").query(con).unwrap()
}

// ---------------------------------------------------------------- restart

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_mid_run_costs_a_bounded_number_of_unavailable_errors() {
    let mut own = OwnRedis::start();
    let limiter = Limiter::connect(
        &own.url(),
        // The counter: a limit no run reaches (the log's is capped at 10,000,
        // which four fast callers could reach within the window).
        policy("restart", Algorithm::SlidingCounter, 1_000_000, 60_000),
        with_timeout(Duration::from_millis(300)),
    )
    .await
    .unwrap();
    let running = Arc::new(AtomicBool::new(true));
    // Each caller logs (when the attempt started, whether it succeeded).
    let callers: Vec<_> = (0..4)
        .map(|_| {
            let (limiter, running) = (limiter.clone(), running.clone());
            tokio::spawn(async move {
                let mut log = Vec::new();
                while running.load(Ordering::Relaxed) && log.len() < 5_000 {
                    let started = Instant::now();
                    match limiter.acquire("tenant-1").await {
                        Ok(d) => {
                            assert!(d.allowed, "far below the limit: {d:?}");
                            log.push((started, true));
                        }
                        Err(e) => {
                            assert_eq!(e.code(), ErrorCode::Unavailable, "{e}");
                            log.push((started, false));
                            // What a worker does: back off, then try again.
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                    }
                }
                log
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    own.stop();
    tokio::time::sleep(Duration::from_millis(400)).await;
    // The blocking start must not stall the runtime's workers.
    let own = tokio::task::spawn_blocking(move || {
        own.restart();
        own
    })
    .await
    .unwrap();
    let restarted = Instant::now();
    tokio::time::sleep(Duration::from_millis(700)).await;
    running.store(false, Ordering::Relaxed);
    let mut worst = 0;
    for caller in callers {
        let log = caller.await.unwrap();
        assert!(log.iter().any(|&(_, ok)| !ok), "the outage was seen");
        assert!(log.first().unwrap().1, "the run started healthy");
        let after: Vec<bool> = log
            .iter()
            .filter(|(at, _)| *at >= restarted)
            .map(|&(_, ok)| ok)
            .collect();
        let errors_after = after.iter().take_while(|ok| !**ok).count();
        assert!(errors_after < after.len(), "recovered after the restart");
        worst = worst.max(errors_after);
    }
    eprintln!("restart: at most {worst} unavailable error(s) per caller after the server was back");
    assert!(worst <= 3, "{worst} errors after the restart");
    // The restarted server is empty (nothing saved) and lost its script
    // cache: the NOSCRIPT fallback loaded the script again.
    let mut con = own.connection();
    let key = limiter.policy().key("tenant-1").unwrap();
    let recorded: u64 = redis::cmd("EXISTS").arg(&key).query(&mut con).unwrap();
    assert_eq!(recorded, 1);
    drop(own);
}

#[test]
fn a_restart_between_calls_keeps_decisions_exact() {
    let mut own = OwnRedis::start();
    let limiter = blocking::Limiter::connect(
        &own.url(),
        policy("restart", Algorithm::SlidingCounter, 3, 60_000),
        with_timeout(Duration::from_millis(300)),
    )
    .unwrap();
    assert_eq!(limiter.acquire_at("t", 1, T).unwrap().remaining, 2);
    own.restart();
    let mut errors = 0;
    let d = loop {
        match limiter.acquire_at("t", 1, T) {
            Ok(d) => break d,
            Err(e) => {
                assert_eq!(e.code(), ErrorCode::Unavailable, "{e}");
                errors += 1;
                assert!(errors <= 3, "still failing after {errors} attempts: {e}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    };
    // The restarted server kept nothing, so this is a first permit again.
    assert_eq!((d.allowed, d.remaining), (true, 2), "{errors} errors first");
}

// ------------------------------------------------------------- slow redis

/// A loopback TCP proxy that holds every chunk for `delay` before passing it
/// on, in both directions; the delay can change while connections are open.
struct SlowProxy {
    port: u16,
    delay_ms: Arc<AtomicU64>,
    running: Arc<AtomicBool>,
    streams: Arc<Mutex<Vec<TcpStream>>>,
    acceptor: Option<JoinHandle<()>>,
}

impl SlowProxy {
    fn start(upstream: u16) -> SlowProxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let delay_ms = Arc::new(AtomicU64::new(0));
        let running = Arc::new(AtomicBool::new(true));
        let streams = Arc::new(Mutex::new(Vec::new()));
        let acceptor = {
            let (delay_ms, running, streams) = (delay_ms.clone(), running.clone(), streams.clone());
            std::thread::spawn(move || {
                while running.load(Ordering::Relaxed) {
                    let client = match listener.accept() {
                        Ok((client, _)) => client,
                        Err(_) => {
                            std::thread::sleep(Duration::from_millis(5));
                            continue;
                        }
                    };
                    client.set_nonblocking(false).unwrap();
                    let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)) else {
                        continue;
                    };
                    let mut held = streams.lock().unwrap();
                    held.push(client.try_clone().unwrap());
                    held.push(server.try_clone().unwrap());
                    for (from, to) in [
                        (client.try_clone().unwrap(), server.try_clone().unwrap()),
                        (server, client),
                    ] {
                        let delay_ms = delay_ms.clone();
                        std::thread::spawn(move || pump(from, to, &delay_ms));
                    }
                }
            })
        };
        SlowProxy {
            port,
            delay_ms,
            running,
            streams,
            acceptor: Some(acceptor),
        }
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// One-way delay: a round trip takes twice as long.
    fn set_delay(&self, delay: Duration) {
        self.delay_ms
            .store(delay.as_millis() as u64, Ordering::Relaxed);
    }
}

fn pump(mut from: TcpStream, mut to: TcpStream, delay_ms: &AtomicU64) {
    let mut buf = [0u8; 16 * 1024];
    while let Ok(n @ 1..) = from.read(&mut buf) {
        std::thread::sleep(Duration::from_millis(delay_ms.load(Ordering::Relaxed)));
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}

impl Drop for SlowProxy {
    fn drop(&mut self) {
        self.running.store(false, Ordering::Relaxed);
        // Closing every socket ends the pumps.
        for stream in self.streams.lock().unwrap().drain(..) {
            let _ = stream.shutdown(Shutdown::Both);
        }
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
    }
}

#[test]
fn a_slow_redis_is_unavailable_within_the_timeout_and_served_above_it() {
    let own = OwnRedis::start();
    let proxy = SlowProxy::start(own.port);
    let p = policy("slow", Algorithm::SlidingLog, 10, 60_000);
    let short = Duration::from_millis(250);
    let fast = blocking::Limiter::connect(&proxy.url(), p.clone(), with_timeout(short)).unwrap();
    let patient = blocking::Limiter::connect(
        &proxy.url(),
        p.clone(),
        with_timeout(Duration::from_secs(3)),
    )
    .unwrap();
    assert_eq!(fast.acquire_at("t", 1, T).unwrap().remaining, 9);

    let one_way = Duration::from_millis(300);
    proxy.set_delay(one_way);
    for _ in 0..2 {
        let started = Instant::now();
        let e = fast.acquire_at("t", 1, T).unwrap_err();
        let took = started.elapsed();
        assert_eq!(e.code(), ErrorCode::Unavailable, "{e}");
        assert!(
            took >= short - Duration::from_millis(20),
            "gave up early: {took:?}"
        );
        assert!(took < short * 3, "the timeout was not honoured: {took:?}");
    }
    let started = Instant::now();
    let d = patient.acquire_at("t", 1, T).unwrap();
    let took = started.elapsed();
    assert!(took >= one_way * 2, "the proxy did delay: {took:?}");
    assert!(d.allowed);
    // Connecting through the slow link with the short timeout fails in time too.
    let started = Instant::now();
    let refused = blocking::Limiter::connect(&proxy.url(), p.clone(), with_timeout(short));
    assert_eq!(refused.err().unwrap().code(), ErrorCode::Unavailable);
    assert!(started.elapsed() < short * 3, "{:?}", started.elapsed());

    // Back to a fast link, the short-timeout limiter works again. A call
    // that timed out may still have reached Redis and been counted (7 if
    // neither did, 5 if both): a timeout can over-count, never under-count.
    proxy.set_delay(Duration::ZERO);
    std::thread::sleep(one_way * 2);
    let d = fast.acquire_at("t", 1, T).unwrap();
    assert!(d.allowed && (5..=7).contains(&d.remaining), "{d:?}");
}

// -------------------------------------------------------------------- ACL

/// Everything the scripts call, plus EVALSHA / EVAL (the NOSCRIPT fallback)
/// and DEL (reset). Nothing else is needed: this list is docs/compatibility.md's.
const ACL_COMMANDS: &[&str] = &[
    "evalsha", "eval", "del", "time", "lrange", "llen", "lindex", "lpop", "ltrim", "rpush",
    "pexpire", "hmget", "hincrby", "hkeys", "hdel",
];

#[test]
fn an_acl_user_confined_to_its_prefix_works_and_writes_nowhere_else() {
    let ns = unique_namespace("acl");
    let user = format!("slidelimit-{ns}");
    let mut admin = raw_connection();
    let mut setuser = redis::cmd("ACL");
    setuser
        .arg("SETUSER")
        .arg(&user)
        .arg("reset")
        .arg("on")
        .arg(">s3cret-pass")
        .arg(format!("~{ns}:*"))
        .arg("resetchannels")
        .arg("-@all");
    for command in ACL_COMMANDS {
        setuser.arg(format!("+{command}"));
    }
    let _: () = setuser.query(&mut admin).unwrap();
    let port = redis_url()
        .trim_end_matches('/')
        .rsplit(':')
        .next()
        .unwrap()
        .to_owned();
    let url = format!("redis://{user}:s3cret-pass@127.0.0.1:{port}/");

    for algorithm in [Algorithm::SlidingLog, Algorithm::SlidingCounter] {
        let p = policy(&ns, algorithm, 3, 60_000);
        let key = p.key("t").unwrap();
        let limiter = blocking::Limiter::connect(&url, p, Options::default()).unwrap();
        // Server time (TIME) and caller time, a peek, a denial, a reset.
        assert!(limiter.acquire("t").unwrap().allowed);
        assert!(limiter.acquire_n("t", 2).unwrap().allowed);
        assert!(!limiter.peek("t", 1).unwrap().allowed);
        assert!(!limiter.acquire("t").unwrap().allowed);
        limiter.reset("t").unwrap();
        for (i, now) in [T, T + 1, T + 2, T + 3].into_iter().enumerate() {
            assert_eq!(limiter.acquire_at("t", 1, now).unwrap().allowed, i < 3);
        }
        // After the window (the log trims; the counter drops old fields).
        assert!(limiter.acquire_at("t", 1, T + 200_000).unwrap().allowed);
        // NOSCRIPT on an empty cache falls back to EVAL, which the user may run.
        let _: () = redis::cmd("SCRIPT").arg("FLUSH").query(&mut admin).unwrap();
        assert!(limiter.acquire_at("t", 1, T + 200_001).unwrap().allowed);
        let ttl: i64 = redis::cmd("PTTL").arg(&key).query(&mut admin).unwrap();
        assert!(ttl > 0, "{key} has ttl {ttl}");
    }

    // The same user, another namespace: refused by the ACL, nothing written.
    let other_ns = format!("other-{ns}");
    for algorithm in [Algorithm::SlidingLog, Algorithm::SlidingCounter] {
        let p = policy(&other_ns, algorithm, 3, 60_000);
        let key = p.key("t").unwrap();
        let limiter = blocking::Limiter::connect(&url, p, Options::default()).unwrap();
        for result in [limiter.acquire("t"), limiter.acquire_at("t", 1, T)] {
            let e = result.unwrap_err();
            assert_eq!(e.code(), ErrorCode::PermissionDenied, "{e}");
        }
        let e = limiter.reset("t").unwrap_err();
        assert_eq!(e.code(), ErrorCode::PermissionDenied, "{e}");
        let exists: bool = redis::cmd("EXISTS").arg(&key).query(&mut admin).unwrap();
        assert!(!exists, "{key} was written");
    }
    // Nor can it use any other command inside its own prefix.
    let mut as_user = redis::Client::open(url.as_str())
        .unwrap()
        .get_connection()
        .unwrap();
    let e = redis::cmd("SET")
        .arg(format!("{ns}:x"))
        .arg(1)
        .query::<()>(&mut as_user)
        .unwrap_err();
    assert_eq!(e.code(), Some("NOPERM"), "{e}");
    let _: () = redis::cmd("ACL")
        .arg("DELUSER")
        .arg(&user)
        .query(&mut admin)
        .unwrap();
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
fn tls_with_verification_works_and_an_untrusted_server_is_unavailable() {
    let certs = Certificates::generate("server");
    let port = common::free_port();
    let _own = OwnRedis::start_args(port, certs.server_args(port));
    let url = format!("rediss://localhost:{port}/");
    let p = policy(&unique_namespace("tls"), Algorithm::SlidingLog, 2, 60_000);

    let trusted =
        blocking::Limiter::connect(&url, p.clone(), tls_options(Some(certs.ca_pem()))).unwrap();
    assert!(trusted.acquire("t").unwrap().allowed);
    assert_eq!(trusted.acquire_at("t", 1, T).unwrap().remaining, 1);
    let cluster_api =
        blocking::Limiter::connect_cluster(&[&url], p.clone(), tls_options(Some(certs.ca_pem())));
    // A standalone server is no Cluster: refused, but as an error, not a panic.
    assert!(cluster_api.is_err());

    // Verification is on: the system roots, another CA, a name the
    // certificate does not hold, plain text on the TLS port: never a decision.
    let stranger = Certificates::generate("stranger");
    let by_ip = format!("rediss://127.0.0.1:{port}/");
    let plain = format!("redis://localhost:{port}/");
    for (url, ca) in [
        (&url, None),
        (&url, Some(stranger.ca_pem())),
        (&by_ip, Some(certs.ca_pem())),
        (&plain, None),
    ] {
        let result = blocking::Limiter::connect(url, p.clone(), tls_options(ca.clone()));
        let e = result
            .err()
            .unwrap_or_else(|| panic!("{url} with {ca:?} connected"));
        assert_eq!(e.code(), ErrorCode::Unavailable, "{url}: {e}");
        eprintln!("tls: {url} refused: {e}");
    }
    // A CA for a plain-text URL is a mistake in the caller's configuration.
    let e = blocking::Limiter::connect(&plain, p.clone(), tls_options(Some(certs.ca_pem())))
        .err()
        .unwrap();
    assert_eq!(
        (e.code(), e.field()),
        (ErrorCode::InvalidArgument, Some("tls_ca_pem")),
        "{e}"
    );

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
    // The CLI's share (a private CA through SSL_CERT_FILE): cli/tests/faults.rs.
}

// -------------------------------------------------------------- bad input

#[test]
fn bad_input_is_invalid_argument_naming_the_field_and_writes_nothing() {
    let own = OwnRedis::start();
    let mut con = own.connection();
    let ns = "bad";
    for (result, field) in [
        (
            Policy::new(ns, "geocode", Algorithm::SlidingLog, 0, 1000),
            "limit",
        ),
        (
            Policy::new(ns, "geocode", Algorithm::SlidingLog, 1, 0),
            "window_ms",
        ),
        (
            Policy::new(ns, "geocode", Algorithm::SlidingLog, 1 << 40, 1 << 13),
            "limit",
        ),
        (
            Policy::new("", "geocode", Algorithm::SlidingLog, 1, 1),
            "namespace",
        ),
        (
            Policy::new("a{b", "geocode", Algorithm::SlidingLog, 1, 1),
            "namespace",
        ),
        (
            Policy::new(ns, "geo}code", Algorithm::SlidingLog, 1, 1),
            "resource",
        ),
        (
            Policy::new(ns, &"r".repeat(65), Algorithm::SlidingLog, 1, 1),
            "resource",
        ),
    ] {
        let e = result.unwrap_err();
        assert_eq!(
            (e.code(), e.field()),
            (ErrorCode::InvalidArgument, Some(field)),
            "{e}"
        );
    }
    for algorithm in [Algorithm::SlidingLog, Algorithm::SlidingCounter] {
        let limiter = blocking::Limiter::connect(
            &own.url(),
            policy(ns, algorithm, 3, 1000),
            Options::default(),
        )
        .unwrap();
        let oversized = "x".repeat(513);
        for (result, field) in [
            (limiter.acquire(""), "tenant"),
            (limiter.acquire(&oversized), "tenant"),
            (limiter.acquire_at("", 1, T), "tenant"),
            (limiter.peek(&oversized, 1), "tenant"),
            (limiter.acquire_n("t", 4), "cost"),
            (limiter.acquire_n("t", 0), "cost"),
            (limiter.acquire_at("t", 1, (1 << 52) + 1), "now_ms"),
        ] {
            let e = result.unwrap_err();
            assert_eq!(
                (e.code(), e.field()),
                (ErrorCode::InvalidArgument, Some(field)),
                "{e}"
            );
            assert!(e.to_string().contains(field), "{e}");
        }
        let e = limiter.reset(&oversized).unwrap_err();
        assert_eq!(e.field(), Some("tenant"));
        // 512 bytes is the most a tenant may hold: accepted, then reset.
        assert!(limiter.acquire_at(&"x".repeat(512), 1, T).unwrap().allowed);
        limiter.reset(&"x".repeat(512)).unwrap();
    }
    assert_eq!(dbsize(&mut con), 0, "bad input wrote a key");

    // Braces are no error: escaped, the hash tag still covers exactly
    // {resource:tenant}, and exactly one key is written.
    let limiter = blocking::Limiter::connect(
        &own.url(),
        policy(ns, Algorithm::SlidingLog, 3, 1000),
        Options::default(),
    )
    .unwrap();
    let tenant = "}{a}{{b}}";
    assert!(limiter.acquire_at(tenant, 1, T).unwrap().allowed);
    let keys: Vec<String> = redis::cmd("KEYS").arg("*").query(&mut con).unwrap();
    assert_eq!(keys, ["bad:{geocode:%7D%7Ba%7D%7B%7Bb%7D%7D}:log:1000"]);
    let _: () = redis::cmd("FLUSHALL").query(&mut con).unwrap();

    // The CLI's share (exit 11, the field on stderr, no key): cli/tests/faults.rs.
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
