//! Shared by the integration tests: the Redis that `make test` started.
#![allow(dead_code)]

use std::sync::atomic::{AtomicU64, Ordering};

pub mod tls;

/// The server under test; `make test` (scripts/with-redis.sh) provides it.
pub fn redis_url() -> String {
    std::env::var("SLIDELIMIT_TEST_REDIS_URL").expect(
        "SLIDELIMIT_TEST_REDIS_URL is not set: run the tests through `make test` \
         or scripts/with-redis.sh, which start a redis-server of their own",
    )
}

/// Every node of the Cluster that `make test` (scripts/with-cluster.sh) started.
pub fn cluster_urls() -> Vec<String> {
    std::env::var("SLIDELIMIT_TEST_CLUSTER_URLS")
        .expect(
            "SLIDELIMIT_TEST_CLUSTER_URLS is not set: run the tests through `make test` \
             or scripts/with-cluster.sh, which start a local Redis Cluster of their own",
        )
        .split(',')
        .map(str::to_owned)
        .collect()
}

pub fn raw_connection() -> redis::Connection {
    redis::Client::open(redis_url())
        .and_then(|c| c.get_connection())
        .expect("connect to the test redis-server")
}

/// A namespace no other test uses, so tests never share keys.
pub fn unique_namespace(prefix: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "{prefix}{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// A free loopback port, chosen by the kernel.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind an ephemeral port")
}

/// A redis-server this test starts and stops itself (by its own child handle).
pub struct OwnRedis {
    pub port: u16,
    args: Vec<String>,
    child: Option<std::process::Child>,
    dir: std::path::PathBuf,
}

impl OwnRedis {
    pub fn start() -> OwnRedis {
        Self::start_with(&[])
    }

    /// Listens on a free loopback port with `--port`; `extra` options follow.
    pub fn start_with(extra: &[&str]) -> OwnRedis {
        let port = free_port();
        let mut args = vec!["--port".to_owned(), port.to_string()];
        args.extend(extra.iter().map(|a| a.to_string()));
        Self::start_args(port, args)
    }

    /// `args` must make the server listen on `port` (plain or TLS).
    pub fn start_args(port: u16, args: Vec<String>) -> OwnRedis {
        let dir = std::env::temp_dir().join(format!("slidelimit-own-redis-{port}"));
        std::fs::create_dir_all(&dir).unwrap();
        let mut own = OwnRedis {
            port,
            args,
            child: None,
            dir,
        };
        own.restart();
        own
    }

    /// Starts the server again, same port and options, empty (nothing is saved).
    /// Returns once the server's own log says it listens: a connection alone
    /// could reach another process that took the port meanwhile.
    pub fn restart(&mut self) {
        self.stop();
        let log = self.dir.join("redis.log");
        let _ = std::fs::remove_file(&log);
        let mut child = std::process::Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(&self.args)
            .arg("--dir")
            .arg(&self.dir)
            .arg("--logfile")
            .arg(&log)
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("start redis-server (scripts/deps.sh installs it)");
        let read_log = || std::fs::read_to_string(&log).unwrap_or_default();
        for _ in 0..400 {
            if let Ok(Some(status)) = child.try_wait() {
                panic!(
                    "redis-server on port {} exited ({status}); its log:\n{}",
                    self.port,
                    read_log()
                );
            }
            if read_log().contains("Ready to accept connections") {
                self.child = Some(child);
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(25));
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!(
            "redis-server on port {} did not come up in 10 s; its log:\n{}",
            self.port,
            read_log()
        );
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn connection(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .and_then(|c| c.get_connection())
            .expect("connect to the test's own redis-server")
    }

    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for OwnRedis {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
