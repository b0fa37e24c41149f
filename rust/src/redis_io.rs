//! The only I/O in the binding: EVALSHA (with the NOSCRIPT fallback) and DEL
//! on a standalone or Cluster connection. What an error reply means (retry
//! with EVAL, resend after a pause, or which error) is core's table
//! (`map_server_error`, `resend_pause_ms`).

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{IntoConnectionInfo, RedisError, TlsCertificates, Value};
use rustls::pki_types::{pem::PemObject, CertificateDer};
use slidelimit_core::{
    map_command_error, map_server_error, map_server_error_after_retry, resend_pause_ms, Error,
    ErrorCode, Result, ScriptCall, ServerErrorAction,
};
use std::time::Duration;
use tokio::time::Instant;

#[derive(Clone)]
pub(crate) enum Connection {
    Standalone(ConnectionManager),
    Cluster(ClusterConnection),
}

impl Connection {
    pub(crate) async fn standalone(
        url: &str,
        timeout: Duration,
        tls_ca: Option<&[u8]>,
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
        let manager = ConnectionManager::new_with_config(client, config)
            .await
            .map_err(from_redis)?;
        Ok(Connection::Standalone(manager))
    }

    pub(crate) async fn cluster(
        urls: &[&str],
        timeout: Duration,
        tls_ca: Option<&[u8]>,
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
            builder = builder.certs(trusting(pem)?);
        }
        let client = builder.build().map_err(|e| Error::invalid("urls", e))?;
        let connection = client.get_async_connection().await.map_err(from_redis)?;
        Ok(Connection::Cluster(connection))
    }

    async fn query(&self, cmd: &redis::Cmd) -> std::result::Result<Value, RedisError> {
        match self {
            Connection::Standalone(c) => cmd.query_async(&mut c.clone()).await,
            Connection::Cluster(c) => cmd.query_async(&mut c.clone()).await,
        }
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
    pub(crate) async fn delete(&self, keys: &[String]) -> Result<()> {
        self.query(redis::cmd("DEL").arg(keys))
            .await
            .map(drop)
            .map_err(from_redis)
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
