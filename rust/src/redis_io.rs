//! The only I/O in the binding: EVALSHA (with the NOSCRIPT fallback) and DEL
//! on a standalone or Cluster connection. What an error reply means (retry
//! with EVAL, resend after a pause, or which error) is core's table
//! (`map_server_error`, `resend_pause_ms`).

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::SingleNodeRoutingInfo;
use redis::{IntoConnectionInfo, RedisError, RedisResult, ServerErrorKind, TlsCertificates, Value};
use rustls::pki_types::{pem::PemObject, CertificateDer};
use slidelimit_core::{
    map_command_error, map_server_error, map_server_error_after_retry, resend_pause_ms, Error,
    ErrorCode, Result, ScriptCall, ServerErrorAction,
};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

#[derive(Clone)]
pub(crate) enum Connection {
    Standalone(Arc<Connector<ConnectionManager>>),
    Cluster(Arc<Cluster>),
}

type Connecting<C> = std::pin::Pin<Box<dyn std::future::Future<Output = RedisResult<C>> + Send>>;
type Connect<C> = Box<dyn Fn() -> Connecting<C> + Send + Sync>;

/// A client connection made by one connect at a time, in the background:
/// at once for an eager limiter, on the first call for a lazy one (and on a
/// later call again after a failed connect), and again to replace a Cluster
/// connection that stopped. Calls wait for the connect under way; the
/// caller's timeout bounds the wait.
pub(crate) struct Connector<C> {
    connect: Connect<C>,
    timeout: Duration,
    current: RwLock<Option<C>>,
    connecting: AtomicBool,
    connected: Notify,
    /// When the last failed connect began, and how it failed (a refusal
    /// such as a wrong password is core's to map, as any reply).
    failure: Mutex<Option<(Instant, RedisError)>>,
    /// When the last connect succeeded.
    connected_at: Mutex<Option<Instant>>,
    // Counted for the tests.
    replacements: AtomicU64,
}

impl<C: Clone + Send + Sync + 'static> Connector<C> {
    fn new(connect: Connect<C>, timeout: Duration, current: Option<C>) -> Self {
        Connector {
            connect,
            timeout,
            connected_at: Mutex::new(current.as_ref().map(|_| Instant::now())),
            current: RwLock::new(current),
            connecting: AtomicBool::new(false),
            connected: Notify::new(),
            failure: Mutex::new(None),
            replacements: AtomicU64::new(0),
        }
    }

    /// The connection to use: the current one (the new one while one is
    /// being replaced), or, with none, a connect's. A failed connect that
    /// began before this call (an earlier caller's, whose timeout may have
    /// cut it short) is no answer to it: the call waits for one of its own,
    /// so a hanging server costs each call its whole timeout.
    async fn connection(self: &Arc<Self>) -> RedisResult<C> {
        let asked = Instant::now();
        loop {
            // The common path is one load and one read.
            if self.connecting.load(Ordering::Acquire) {
                self.wait(false).await;
            }
            if let Some(connection) = self.current() {
                return Ok(connection);
            }
            self.wait(true).await;
            if let Some(connection) = self.current() {
                return Ok(connection);
            }
            let failure = self
                .failure
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            if let Some((began, e)) = failure {
                if began >= asked {
                    return Err(e);
                }
            }
        }
    }

    fn current(&self) -> Option<C> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Waits for the connect under way; with `start`, starts one first when
    /// none is and there is still no connection. The waiter is registered
    /// before the look, so a connect ending in between is not missed.
    async fn wait(self: &Arc<Self>, start: bool) {
        let connected = self.connected.notified();
        tokio::pin!(connected);
        connected.as_mut().enable();
        if start && self.current().is_none() {
            self.connect_in_background();
        }
        if self.connecting.load(Ordering::Acquire) {
            connected.await;
        }
    }

    /// Starts one connect, unless one is under way. A new connection
    /// replaces the current one; a failed connect leaves it.
    fn connect_in_background(self: &Arc<Self>) {
        if self.connecting.swap(true, Ordering::AcqRel) {
            return;
        }
        let this = Arc::clone(self);
        tokio::spawn(async move {
            let began = Instant::now();
            match tokio::time::timeout(this.timeout, (this.connect)()).await {
                Ok(Ok(connection)) => {
                    let replaced = this
                        .current
                        .write()
                        .unwrap_or_else(PoisonError::into_inner)
                        .replace(connection);
                    *this
                        .connected_at
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner) = Some(Instant::now());
                    if replaced.is_some() {
                        this.replacements.fetch_add(1, Ordering::Relaxed);
                    }
                }
                failed => {
                    let e = match failed {
                        Ok(Err(e)) => e,
                        _ => RedisError::from((
                            redis::ErrorKind::Io,
                            "no connection to Redis",
                            format!("the connect took over {:?}", this.timeout),
                        )),
                    };
                    *this.failure.lock().unwrap_or_else(PoisonError::into_inner) = Some((began, e));
                }
            }
            this.connecting.store(false, Ordering::Release);
            this.connected.notify_waiters();
        });
    }
}

/// A Cluster connection, replaced when it stops answering. redis-rs 1.8's
/// `cluster_async` can stop for good while a slot moves: every `MOVED`
/// starts a slot refresh, which waits for the lock on its connection map
/// while calls that were granted that lock are not polled until the
/// refresh is done. Seen in `make audit-reshard` (the last refresh wanted
/// the lock and never got it; no reconnect was under way), in three of four
/// runs of the Rust driver alone. A timed-out call with no answer from this
/// connection for half a timeout starts one replacement in the background,
/// and calls wait for it. A call already sent on the old connection is not
/// sent again: Redis may have run it.
pub(crate) struct Cluster {
    connector: Arc<Connector<ClusterConnection>>,
    // Milliseconds since `started` of the last answer from the connection.
    started: Instant,
    answered_ms: AtomicU64,
}

impl Cluster {
    fn answered(&self) {
        let ms = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.answered_ms.store(ms, Ordering::Relaxed);
    }

    fn ran_out_of_time(&self) {
        let since_answer = self.started.elapsed().saturating_sub(Duration::from_millis(
            self.answered_ms.load(Ordering::Relaxed),
        ));
        // A connection made since then has not had its chance yet.
        let since_connect = self
            .connector
            .connected_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .map_or(Duration::MAX, |at| at.elapsed());
        let silent_for = since_answer.min(since_connect);
        // Half a timeout: the first calls to time out started just before
        // the connection stopped, and a later answer means it did not.
        if silent_for >= self.connector.timeout / 2 {
            self.connector.connect_in_background();
        }
    }
}

impl Connection {
    /// A connection to a standalone server, which reconnects by itself
    /// after a restart; `lazy`: made without I/O, it connects on the first
    /// call (and again on a later call after a failed connect).
    pub(crate) async fn standalone(
        url: &str,
        timeout: Duration,
        tls_ca: Option<&[u8]>,
        lazy: bool,
    ) -> Result<Connection> {
        let info = url
            .into_connection_info()
            .map_err(|e| Error::invalid("url", e))?;
        let client = match tls_ca {
            None => redis::Client::open(info).map_err(|e| Error::invalid("url", e))?,
            // Fails for a URL that is not rediss://.
            Some(pem) => redis::Client::build_with_tls(info, trusting(pem)?)
                .map_err(|e| Error::invalid("tls_ca_pem", e))?,
        };
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout))
            .set_number_of_retries(1);
        let connect: Connect<ConnectionManager> = Box::new(move || {
            Box::pin(ConnectionManager::new_with_config(
                client.clone(),
                config.clone(),
            ))
        });
        let current = match lazy {
            true => None,
            false => Some(connect().await.map_err(from_redis)?),
        };
        let connector = Connector::new(connect, timeout, current);
        Ok(Connection::Standalone(Arc::new(connector)))
    }

    /// A connection to a Cluster through any of `urls`; `lazy`: made
    /// without I/O, it connects on the first call (and again on a later
    /// call after a failed connect).
    pub(crate) async fn cluster(
        urls: &[&str],
        timeout: Duration,
        tls_ca: Option<&[u8]>,
        lazy: bool,
    ) -> Result<Connection> {
        if urls.is_empty() {
            return Err(Error::invalid(
                "urls",
                "at least one Cluster node is needed",
            ));
        }
        let mut builder = ClusterClient::builder(urls.iter().copied())
            .connection_timeout(timeout)
            .response_timeout(timeout);
        if let Some(pem) = tls_ca {
            // As for a standalone URL: a CA is for rediss:// seeds. redis-rs
            // would switch plain ones to TLS, and every call would then fail.
            if let Some(seed) = urls.iter().position(|url| !url.starts_with("rediss://")) {
                return Err(Error::invalid(
                    "tls_ca_pem",
                    format!("is for rediss:// seeds; seed {seed} is not one"),
                ));
            }
            builder = builder.certs(trusting(pem)?);
        }
        let client = builder.build().map_err(|e| Error::invalid("urls", e))?;
        let connect: Connect<ClusterConnection> = Box::new(move || {
            let client = client.clone();
            Box::pin(async move { client.get_async_connection().await })
        });
        let current = match lazy {
            true => None,
            false => Some(connect().await.map_err(from_redis)?),
        };
        Ok(Connection::Cluster(Arc::new(Cluster {
            connector: Arc::new(Connector::new(connect, timeout, current)),
            started: Instant::now(),
            answered_ms: AtomicU64::new(0),
        })))
    }

    /// A call on this connection did not finish within its timeout.
    pub(crate) fn ran_out_of_time(&self) {
        if let Connection::Cluster(cluster) = self {
            cluster.ran_out_of_time();
        }
    }

    async fn query(&self, cmd: &redis::Cmd) -> std::result::Result<Value, RedisError> {
        let cluster = match self {
            Connection::Standalone(c) => return cmd.query_async(&mut c.connection().await?).await,
            Connection::Cluster(cluster) => cluster,
        };
        let mut connection = cluster.connector.connection().await?;
        let reply = match cmd.query_async(&mut connection).await {
            Err(e) if e.kind() == redis::ErrorKind::Server(ServerErrorKind::Ask) => {
                asking_importing_node(&connection, cmd, e).await
            }
            reply => reply,
        };
        match &reply {
            Err(e) if e.is_timeout() => cluster.ran_out_of_time(),
            Err(e) if e.code().is_none() => {}
            // A value or an error reply: the connection answers.
            _ => cluster.answered(),
        }
        reply
    }

    /// Runs the call's script by SHA; a node that lost its script cache
    /// (restart, failover, SCRIPT FLUSH) gets the text once through EVAL. The
    /// script did not run on NOSCRIPT, so the retry cannot double-count.
    /// A call Redis refused without running it (TRYAGAIN while a slot
    /// migrates) is sent again after core's pause, while `deadline` leaves
    /// room for the wait.
    pub(crate) async fn run_script(
        &self,
        call: &ScriptCall,
        deadline: Instant,
    ) -> Result<Vec<i64>> {
        // WRONGTYPE names the (first) key and its algorithm.
        let (key, algorithm) = call.first_key();
        let by_sha = script_command("EVALSHA", call.script.sha1(), call);
        let mut attempt = 0;
        let text = loop {
            let e = match self.query(&by_sha).await {
                Ok(reply) => return integers(reply),
                Err(e) => e,
            };
            let Some(text) = server_text(&e) else {
                return Err(unavailable(e));
            };
            match resend_pause_ms(&text, attempt).map(Duration::from_millis) {
                Some(wait) if Instant::now() + wait < deadline => tokio::time::sleep(wait).await,
                _ => break text,
            }
            attempt += 1;
        };
        match map_server_error(&text, key, algorithm) {
            ServerErrorAction::Fail(error) => Err(error),
            ServerErrorAction::RetryWithEval => {
                let by_text = script_command("EVAL", call.script.text(), call);
                match self.query(&by_text).await {
                    Ok(reply) => integers(reply),
                    Err(e) => Err(match server_text(&e) {
                        Some(text) => map_server_error_after_retry(&text, key, algorithm),
                        None => unavailable(e),
                    }),
                }
            }
        }
    }

    /// Deletes `keys` in one DEL (a policy's keys share one slot).
    /// The text of `INFO` (its default sections) from this connection's
    /// server; on a Cluster, from whichever node the client picks.
    pub(crate) async fn info(&self) -> Result<String> {
        let reply = self.query(&redis::cmd("INFO")).await.map_err(from_redis)?;
        match reply {
            Value::BulkString(bytes) => Ok(String::from_utf8_lossy(&bytes).into_owned()),
            Value::VerbatimString { text, .. } | Value::SimpleString(text) => Ok(text),
            other => Err(Error::new(
                ErrorCode::MalformedReply,
                format!("INFO answered {other:?}, not a text"),
            )),
        }
    }

    pub(crate) async fn delete(&self, keys: &[String]) -> Result<()> {
        self.query(redis::cmd("DEL").arg(keys))
            .await
            .map(drop)
            .map_err(from_redis)
    }
}

/// Sends `cmd` once more to the node an `ASK` named, with `ASKING` in the
/// same write. redis-rs 1.8 follows an `ASK` itself, but sends `ASKING` and
/// the command as two requests on the node's shared connection: under
/// concurrency another caller's command can take the one-shot `ASKING` flag
/// in between, the node answers `MOVED` back, and the redirect loops until
/// the client's retries run out. Only then is this reached. The node did not
/// run the command when it answered `ASK`, so this cannot run it twice.
async fn asking_importing_node(
    connection: &ClusterConnection,
    cmd: &redis::Cmd,
    ask: RedisError,
) -> std::result::Result<Value, RedisError> {
    let node = ask.redirect_node().and_then(|(address, _slot)| {
        let (host, port) = address.rsplit_once(':')?;
        Some((host.to_owned(), port.parse::<u16>().ok()?))
    });
    let Some((host, port)) = node else {
        return Err(ask);
    };
    let mut pipeline = redis::pipe();
    pipeline.cmd("ASKING").add_command(cmd.clone());
    let route = SingleNodeRoutingInfo::ByAddress { host, port };
    let replies = connection
        .clone()
        .route_pipeline(pipeline, 0, 2, route)
        .await?;
    match <[Value; 2]>::try_from(replies) {
        Ok([asking, reply]) => {
            asking.extract_error()?;
            reply.extract_error()
        }
        Err(_) => Err(ask),
    }
}

/// Server verification against `pem` only; no client certificate. PEM that
/// holds no certificate would trust nothing: a configuration error, said so.
fn trusting(pem: &[u8]) -> Result<TlsCertificates> {
    let mut certificates = 0;
    for cert in CertificateDer::pem_slice_iter(pem) {
        cert.map_err(|e| Error::invalid("tls_ca_pem", format!("is not valid PEM: {e}")))?;
        certificates += 1;
    }
    if certificates == 0 {
        return Err(Error::invalid("tls_ca_pem", "holds no PEM certificate"));
    }
    Ok(TlsCertificates {
        client_tls: None,
        root_cert: Some(pem.to_vec()),
    })
}

fn script_command(verb: &str, script: &str, call: &ScriptCall) -> redis::Cmd {
    let mut cmd = redis::cmd(verb);
    cmd.arg(script)
        .arg(call.keys.len())
        .arg(&call.keys)
        .arg(&call.args);
    cmd
}

fn integers(reply: Value) -> Result<Vec<i64>> {
    let malformed = |what: &str| {
        Error::new(
            ErrorCode::MalformedReply,
            format!("script reply {what}; expected an array of five integers"),
        )
    };
    match reply {
        Value::Array(items) => items
            .into_iter()
            .map(|item| match item {
                Value::Int(n) => Ok(n),
                other => Err(malformed(&format!("holds {other:?}"))),
            })
            .collect(),
        other => Err(malformed(&format!("is {other:?}"))),
    }
}

/// The server's error reply as it sent it (`NOSCRIPT No matching script...`);
/// None when the command failed without one (connection, timeout, I/O).
fn server_text(e: &RedisError) -> Option<String> {
    // The client turns the server's refusal of AUTH (WRONGPASS) into a kind
    // of its own and drops the reply: hand core the reply it stands for.
    if e.kind() == redis::ErrorKind::AuthenticationFailed {
        return Some(format!("WRONGPASS {e}"));
    }
    let code = e.code()?;
    Some(match e.detail() {
        Some(detail) => format!("{code} {detail}"),
        None => code.to_owned(),
    })
}

/// The server could not be used: never a decision.
fn unavailable(e: RedisError) -> Error {
    Error::new(ErrorCode::Unavailable, format!("redis unavailable: {e}"))
}

/// Maps a failed command that is not a script call (connecting, DEL): an
/// error reply by core's table, anything else `unavailable`.
pub(crate) fn from_redis(e: RedisError) -> Error {
    match server_text(&e) {
        Some(text) => map_command_error(&text),
        None => unavailable(e),
    }
}

// The integration tests' helpers (`make test`'s servers).
#[cfg(test)]
#[path = "../tests/common/mod.rs"]
mod test_common;

#[cfg(test)]
mod tests {
    //! Against the Cluster that `make test` (scripts/with-cluster.sh) started.
    use super::*;

    use super::test_common::{cluster_nodes, cluster_urls, command_calls, node, port_of};

    async fn connect(timeout: Duration) -> Arc<Cluster> {
        let urls = cluster_urls();
        let urls: Vec<&str> = urls.iter().map(String::as_str).collect();
        match Connection::cluster(&urls, timeout, None, false)
            .await
            .unwrap()
        {
            Connection::Cluster(cluster) => cluster,
            Connection::Standalone(_) => unreachable!("a Cluster connection"),
        }
    }

    /// (id, port) of the master that owns `slot`, and of another master.
    fn owner_and_other(slot: u16) -> ((String, u16), (String, u16)) {
        let masters: Vec<_> = cluster_nodes(port_of(&cluster_urls()[0]))
            .into_iter()
            .filter(|n| n.is_master())
            .collect();
        let owner = masters.iter().find(|n| n.owns(slot)).unwrap();
        let other = masters.iter().find(|n| !n.owns(slot)).unwrap();
        (
            (owner.id.clone(), owner.port),
            (other.id.clone(), other.port),
        )
    }

    fn calls(port: u16, command: &str) -> u64 {
        command_calls(&mut node(port), command)
    }

    /// Puts a slot back to stable on both nodes even when the test fails.
    struct Migrating {
        slot: u16,
        ports: [u16; 2],
    }

    impl Drop for Migrating {
        fn drop(&mut self) {
            for port in self.ports {
                let _: redis::RedisResult<()> = redis::cmd("CLUSTER")
                    .arg("SETSLOT")
                    .arg(self.slot)
                    .arg("STABLE")
                    .query(&mut node(port));
            }
        }
    }

    #[tokio::test]
    async fn an_ask_is_sent_again_with_asking_in_the_same_write() {
        let cluster = connect(Duration::from_secs(2)).await;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let key = format!("ask-test-{}-{nanos}", std::process::id());
        let slot = slidelimit_core::slot(&key);
        let ((source_id, source), (target_id, target)) = owner_and_other(slot);
        let _stable = Migrating {
            slot,
            ports: [source, target],
        };
        let mut importing = node(target);
        let mut migrating = node(source);
        let setslot = |state: &str, id: &str| {
            let mut cmd = redis::cmd("CLUSTER");
            cmd.arg("SETSLOT").arg(slot).arg(state).arg(id);
            cmd
        };
        let _: () = setslot("IMPORTING", &source_id)
            .query(&mut importing)
            .unwrap();
        let _: () = setslot("MIGRATING", &target_id)
            .query(&mut migrating)
            .unwrap();
        // The key lives on the importing node only, as after a MIGRATE.
        let _: () = redis::cmd("ASKING").query(&mut importing).unwrap();
        let _: () = redis::cmd("SET")
            .arg(&key)
            .arg("moved")
            .query(&mut importing)
            .unwrap();

        let mut get = redis::cmd("GET");
        get.arg(&key);
        let ask = get.query::<Value>(&mut migrating).unwrap_err();
        assert_eq!(
            ask.kind(),
            redis::ErrorKind::Server(ServerErrorKind::Ask),
            "{ask}"
        );
        let connection = cluster.connector.connection().await.unwrap();
        let (gets_before, asked_before) = (calls(source, "get"), calls(target, "asking"));
        let target_gets_before = calls(target, "get");
        let reply = asking_importing_node(&connection, &get, ask).await.unwrap();
        assert_eq!(reply, Value::BulkString(b"moved".to_vec()));
        // One write to the importing node, nothing back to the old owner.
        assert_eq!(calls(source, "get"), gets_before);
        assert_eq!(calls(target, "get"), target_gets_before + 1);
        assert_eq!(calls(target, "asking"), asked_before + 1);
        // Without ASKING the importing node sends the call back.
        let alone = get.query::<Value>(&mut node(target)).unwrap_err();
        assert_eq!(
            alone.kind(),
            redis::ErrorKind::Server(ServerErrorKind::Moved),
            "{alone}"
        );

        let _: () = redis::cmd("ASKING").query(&mut importing).unwrap();
        let _: () = redis::cmd("DEL").arg(&key).query(&mut importing).unwrap();
    }

    #[tokio::test]
    async fn a_connection_silent_for_half_a_timeout_is_replaced() {
        let timeout = Duration::from_millis(400);
        let cluster = connect(timeout).await;
        let connection = Connection::Cluster(Arc::clone(&cluster));
        let key = ["replace-test{replace}".to_owned()];
        connection.delete(&key).await.unwrap();
        // It answered just now: a timeout elsewhere is not its silence.
        connection.ran_out_of_time();
        tokio::time::sleep(timeout).await;
        assert_eq!(cluster.connector.replacements.load(Ordering::Relaxed), 0);

        // Silent for a whole timeout now (no calls): replaced once, and
        // the next call waits for the new connection and is answered.
        connection.ran_out_of_time();
        connection.ran_out_of_time();
        connection.delete(&key).await.unwrap();
        assert_eq!(cluster.connector.replacements.load(Ordering::Relaxed), 1);
        assert!(!cluster.connector.connecting.load(Ordering::Acquire));
    }
}
