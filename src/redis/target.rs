//! Where Redis is and how to reach it: the target (one server or cluster seeds), the connection
//! settings, URL checks and the client for one node address. Every URL shown is redacted.

use super::errors::describe;
use super::slots;
use crate::error::{Error, Result};
use crate::redact::SecretUrl;
use redis::Client;
use std::time::Duration;

/// Where Redis is.
#[derive(Clone, Debug)]
pub enum RedisTarget {
    /// One server.
    Standalone(SecretUrl),
    /// Seed nodes of a Redis Cluster; the rest is discovered with CLUSTER SLOTS.
    Cluster(Vec<SecretUrl>),
    /// A primary that Sentinel names, followed through failovers.
    Sentinel(SentinelTarget),
}

/// The Sentinels, the master's name, and how to reach the data nodes they name.
#[derive(Clone, Debug)]
pub struct SentinelTarget {
    /// Each Sentinel with its own credentials and scheme (`rediss://` for TLS).
    pub sentinels: Vec<SecretUrl>,
    pub master: String,
    /// The data nodes' URL template: its scheme, user, password and database apply; its host
    /// and port are replaced by the address Sentinel names (`--redis`, else `redis://`).
    pub data: SecretUrl,
}

/// How to reach Redis.
#[derive(Clone, Debug)]
pub struct RedisSettings {
    pub target: RedisTarget,
    pub connect_timeout: Duration,
    pub response_timeout: Duration,
    /// PEM of a CA that signs the servers' certificates (`rediss://` with a private CA).
    pub tls_ca: Option<Vec<u8>>,
    /// When set, every write command is refused before it is sent.
    pub read_only: bool,
}

impl RedisTarget {
    /// The target as it may be shown: redacted URLs.
    pub fn label(&self) -> String {
        match self {
            RedisTarget::Standalone(u) => u.redacted().to_string(),
            RedisTarget::Cluster(seeds) => {
                let list: Vec<&str> = seeds.iter().map(SecretUrl::redacted).collect();
                format!("cluster {}", list.join(","))
            }
            RedisTarget::Sentinel(t) => {
                let list: Vec<&str> = t.sentinels.iter().map(SecretUrl::redacted).collect();
                format!("sentinel {} via {}", t.master, list.join(","))
            }
        }
    }

    pub(super) fn seeds(&self) -> &[SecretUrl] {
        match self {
            RedisTarget::Standalone(u) => std::slice::from_ref(u),
            RedisTarget::Cluster(seeds) => seeds,
            RedisTarget::Sentinel(t) => std::slice::from_ref(&t.data),
        }
    }
}

pub(super) fn validate_url(url: &SecretUrl) -> Result<()> {
    let parsed = url::Url::parse(url.expose()).map_err(|e| {
        Error::bad_input(format!(
            "Redis URL '{}' is not a URL ({e}): use redis://[user:password@]host:port or rediss://...",
            url.redacted()
        ))
    })?;
    if !matches!(parsed.scheme(), "redis" | "rediss") {
        return Err(Error::bad_input(format!(
            "Redis URL '{}' has scheme '{}': use redis:// or rediss://",
            url.redacted(),
            parsed.scheme()
        )));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(Error::bad_input(format!(
            "Redis URL '{}' has no host: use redis://host:port",
            url.redacted()
        )));
    }
    Ok(())
}

pub(super) fn url_host_port(url: &SecretUrl) -> Result<String> {
    let parsed = url::Url::parse(url.expose())
        .map_err(|e| Error::bad_input(format!("Redis URL '{}': {e}", url.redacted())))?;
    let host = parsed.host_str().unwrap_or("127.0.0.1");
    let port = parsed.port().unwrap_or(6379);
    Ok(slots::join_host_port(
        host.trim_matches(['[', ']']),
        i64::from(port),
    ))
}

pub(super) fn with_host_port(template: &SecretUrl, addr: &str) -> Result<SecretUrl> {
    let mut parsed = url::Url::parse(template.expose())
        .map_err(|e| Error::bad_input(format!("Redis URL '{}': {e}", template.redacted())))?;
    let (host, port) = addr
        .rsplit_once(':')
        .ok_or_else(|| Error::internal(format!("node address '{addr}' has no port")))?;
    let port: u16 = port
        .parse()
        .map_err(|_| Error::internal(format!("node address '{addr}' has a bad port")))?;
    parsed
        .set_host(Some(host))
        .map_err(|e| Error::internal(format!("node address '{addr}': {e}")))?;
    parsed
        .set_port(Some(port))
        .map_err(|_| Error::internal(format!("node address '{addr}': bad port")))?;
    Ok(SecretUrl::new(parsed.to_string()))
}

pub(super) fn open_client(url: &SecretUrl, tls_ca: Option<&[u8]>) -> Result<Client> {
    use redis::IntoConnectionInfo;
    let result = url.expose().into_connection_info().and_then(|info| {
        // No `CLIENT SETINFO` on each new connection: what the console sends is what it
        // decides to send, reads only in read-only mode.
        let settings = info.redis_settings().clone().set_skip_set_lib_name();
        let info = info.set_redis_settings(settings);
        match tls_ca {
            Some(pem) if url.expose().starts_with("rediss://") => Client::build_with_tls(
                info,
                redis::TlsCertificates {
                    client_tls: None,
                    root_cert: Some(pem.to_vec()),
                },
            ),
            _ => Client::open(info),
        }
    });
    result.map_err(|e| {
        Error::bad_input(format!(
            "Redis URL '{}' is not usable: {}",
            url.redacted(),
            describe(&e)
        ))
    })
}
