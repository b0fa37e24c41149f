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

/// The port of a `redis://host:port/` URL.
pub fn port_of(url: &str) -> u16 {
    url.trim_end_matches('/')
        .rsplit(':')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// A connection to the loopback server at `port` (one Cluster node, say).
pub fn node(port: u16) -> redis::Connection {
    redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .and_then(|c| c.get_connection())
        .expect("connect to a loopback node")
}

/// How many `command` calls the server has run (INFO commandstats).
pub fn command_calls(con: &mut redis::Connection, command: &str) -> u64 {
    let info: String = redis::cmd("INFO").arg("commandstats").query(con).unwrap();
    let prefix = format!("cmdstat_{command}:calls=");
    info.lines()
        .find_map(|line| line.strip_prefix(&prefix))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |n| n.parse().unwrap())
}

/// One line of CLUSTER NODES:
/// `<id> <ip:port@bus> <flags> <master-id|-> <ping> <pong> <epoch> <link> <slots>...`
pub struct ClusterNode {
    pub id: String,
    pub port: u16,
    pub master_id: String,
    flags: String,
    slots: Vec<String>,
}

impl ClusterNode {
    pub fn is_master(&self) -> bool {
        self.flags.contains("master")
    }

    pub fn is_replica(&self) -> bool {
        self.flags.contains("slave")
    }

    /// Whether its slot ranges hold `slot` (`[slot->-id]` migration marks
    /// are not ownership).
    pub fn owns(&self, slot: u16) -> bool {
        self.slots.iter().any(|range| {
            let mut ends = range.split('-').map(|n| n.parse::<u16>());
            match (ends.next(), ends.next()) {
                (Some(Ok(a)), Some(Ok(b))) => (a..=b).contains(&slot),
                (Some(Ok(a)), None) => a == slot,
                _ => false,
            }
        })
    }
}

/// The Cluster as the node at `port` sees it now.
pub fn cluster_nodes(port: u16) -> Vec<ClusterNode> {
    let nodes: String = redis::cmd("CLUSTER")
        .arg("NODES")
        .query(&mut node(port))
        .unwrap();
    nodes
        .lines()
        .map(|line| {
            let f: Vec<&str> = line.split(' ').collect();
            let address = f[1].split('@').next().unwrap();
            ClusterNode {
                id: f[0].to_owned(),
                port: address.rsplit(':').next().unwrap().parse().unwrap(),
                master_id: f[3].to_owned(),
                flags: f[2].to_owned(),
                slots: f[8..].iter().map(|s| (*s).to_owned()).collect(),
            }
        })
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
