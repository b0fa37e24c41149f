//! The only I/O in the binding: EVALSHA (with the NOSCRIPT fallback) and DEL
//! on a standalone or Cluster connection. Error replies are classified by core.

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::{IntoConnectionInfo, RedisError, TlsCertificates, Value};
use rustls::pki_types::{pem::PemObject, CertificateDer};
use slidelimit_core::{
    classify_server_error, Error, ErrorCode, Result, ScriptCall, ServerErrorKind,
};
use std::time::Duration;

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
    pub(crate) async fn run_script(&self, call: &ScriptCall) -> Result<Vec<i64>> {
        let by_sha = script_command("EVALSHA", call.script.sha1(), call);
        match self.query(&by_sha).await {
            Ok(reply) => integers(reply),
            Err(e) if server_kind(&e) == Some(ServerErrorKind::NoScript) => {
                let by_text = script_command("EVAL", call.script.text(), call);
                integers(self.query(&by_text).await.map_err(from_redis)?)
            }
            Err(e) => Err(from_redis(e)),
        }
    }

    pub(crate) async fn delete(&self, key: &str) -> Result<()> {
        self.query(redis::cmd("DEL").arg(key))
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

fn server_text(e: &RedisError) -> Option<String> {
    let code = e.code()?;
    Some(match e.detail() {
        Some(detail) => format!("{code} {detail}"),
        None => code.to_owned(),
    })
}

fn server_kind(e: &RedisError) -> Option<ServerErrorKind> {
    server_text(e).map(|text| classify_server_error(&text))
}

/// Maps a redis-rs error onto the shared taxonomy: a server's error reply is
/// classified by core; everything else means the server could not be used.
pub(crate) fn from_redis(e: RedisError) -> Error {
    match server_kind(&e) {
        Some(ServerErrorKind::Final(code)) => Error::new(code, e.to_string()),
        Some(ServerErrorKind::NoScript) => Error::new(ErrorCode::ScriptError, e.to_string()),
        Some(ServerErrorKind::Redirect | ServerErrorKind::Transient) | None => {
            Error::new(ErrorCode::Unavailable, format!("redis unavailable: {e}"))
        }
    }
}
