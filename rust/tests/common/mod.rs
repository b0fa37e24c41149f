//! Shared by the integration tests: the Redis that `make test` started.
#![allow(dead_code)]

use std::sync::atomic::{AtomicU64, Ordering};

/// The server under test; `make test` (scripts/with-redis.sh) provides it.
pub fn redis_url() -> String {
    std::env::var("SLIDELIMIT_TEST_REDIS_URL").expect(
        "SLIDELIMIT_TEST_REDIS_URL is not set: run the tests through `make test` \
         or scripts/with-redis.sh, which start a redis-server of their own",
    )
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
    child: std::process::Child,
    dir: std::path::PathBuf,
}

impl OwnRedis {
    pub fn start() -> OwnRedis {
        let port = free_port();
        let dir = std::env::temp_dir().join(format!("slidelimit-own-redis-{port}"));
        std::fs::create_dir_all(&dir).unwrap();
        let mut child = std::process::Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
            ])
            .arg("--dir")
            .arg(&dir)
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("start redis-server (scripts/deps.sh installs it)");
        let url = format!("redis://127.0.0.1:{port}/");
        for _ in 0..200 {
            if redis::Client::open(url.as_str())
                .and_then(|c| c.get_connection())
                .is_ok()
            {
                return OwnRedis { port, child, dir };
            }
            std::thread::sleep(std::time::Duration::from_millis(25));
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("redis-server on port {port} did not come up");
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for OwnRedis {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
