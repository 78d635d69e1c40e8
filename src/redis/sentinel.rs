//! Redis behind Sentinel: the primary is whichever node the Sentinels name for the master, asked
//! at connect, again after READONLY or a refused or broken connection, and at once when a
//! Sentinel publishes `+switch-master`. The console keeps using the one-primary topology of a
//! single server; only its address moves.
//!
//! The Sentinels are asked with the console's own node connections (`SENTINEL
//! GET-MASTER-ADDR-BY-NAME`), not the `redis` crate's Sentinel client: those carry the
//! console's connect and response timeouts, its fast failure on a hung server, its TLS CA and
//! its redaction, which the crate's client would open connections around.

use super::node::Node;
use super::target::{SentinelTarget, url_host_port};
use super::{RedisStore, RedisTarget, describe};
use crate::error::{Error, Result, Service};
use chrono::{DateTime, Utc};
use futures::StreamExt;
use redis::Value;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

/// The master as the console follows it.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct MasterInfo {
    /// The master's name in Sentinel.
    pub name: String,
    /// `host:port` of the primary the console uses now.
    pub addr: String,
    /// When the console last saw the master change (None: not since it started).
    pub changed_at: Option<DateTime<Utc>>,
    /// The primary before that change.
    pub previous: Option<String>,
}

/// What the console knows of the master (None before the first answer).
#[derive(Default)]
pub(super) struct Followed {
    pub(super) master: Option<MasterInfo>,
}

impl RedisStore {
    fn sentinel_target(&self) -> Option<&SentinelTarget> {
        match &self.inner.settings.target {
            RedisTarget::Sentinel(t) => Some(t),
            _ => None,
        }
    }

    /// True when the primary is found through Sentinel.
    pub fn is_sentinel(&self) -> bool {
        self.sentinel_target().is_some()
    }

    /// The master the console follows now (Sentinel only).
    pub fn master(&self) -> Option<MasterInfo> {
        self.inner.followed.read().ok()?.master.clone()
    }

    /// Asks the Sentinels, in the order given, for the master's address: the first that
    /// answers decides. An unknown master name is bad input (exit 2).
    async fn ask_sentinels(&self, t: &SentinelTarget) -> Result<String> {
        let mut last: Option<Error> = None;
        for url in &t.sentinels {
            let addr = url_host_port(url)?;
            let node: Arc<Node> = self.make_node(&addr, url)?;
            let cmd = redis::cmd("SENTINEL")
                .arg("GET-MASTER-ADDR-BY-NAME")
                .arg(&t.master)
                .clone();
            match node.query(&cmd).await {
                Ok(Value::Array(parts)) if parts.len() == 2 => {
                    let host = redis::from_redis_value::<String>(parts[0].clone());
                    let port = redis::from_redis_value::<i64>(parts[1].clone());
                    if let (Ok(host), Ok(port)) = (host, port) {
                        return Ok(super::slots::join_host_port(&host, port));
                    }
                    last = Some(Error::internal(format!(
                        "Sentinel {} answered an unreadable address for '{}'",
                        url.redacted(),
                        t.master
                    )));
                }
                Ok(Value::Nil) => {
                    last = Some(Error::bad_input(format!(
                        "Sentinel {} knows no master named '{}': check --sentinel-master (SENTINEL MASTERS lists them)",
                        url.redacted(),
                        t.master
                    )));
                }
                Ok(other) => {
                    last = Some(Error::internal(format!(
                        "Sentinel {} answered {other:?} for the master's address",
                        url.redacted()
                    )));
                }
                Err(e) => {
                    last = Some(Error::unreachable(
                        Service::Redis,
                        format!(
                            "Sentinel {} did not answer: {}",
                            url.redacted(),
                            describe(&e)
                        ),
                    ));
                }
            }
        }
        Err(last.unwrap_or_else(|| Error::bad_input("--redis-sentinel names no Sentinel")))
    }

    /// Asks the Sentinels again and, when they name another primary, moves to it. Rate-limited
    /// like a cluster's refresh: callers during or just after a lookup reuse its answer.
    pub(super) async fn follow_master(&self, force: bool) -> Result<()> {
        let Some(t) = self.sentinel_target() else {
            return Ok(());
        };
        let mut last = self.inner.last_refresh.lock().await;
        if !force && last.is_some_and(|at| at.elapsed() < Duration::from_millis(200)) {
            return Ok(());
        }
        let addr = self.ask_sentinels(t).await?;
        *last = Some(Instant::now());
        let current = self.master().map(|m| m.addr);
        if current.as_deref() == Some(addr.as_str()) {
            return Ok(());
        }
        let node = self.make_node(&addr, &t.data)?;
        if let Ok(mut topo) = self.inner.topology.write() {
            topo.primaries = vec![addr.clone()];
            topo.primary_nodes = vec![node];
        }
        if let Ok(mut f) = self.inner.followed.write() {
            let changed = current.is_some();
            f.master = Some(MasterInfo {
                name: t.master.clone(),
                addr: addr.clone(),
                changed_at: if changed { Some(Utc::now()) } else { None },
                previous: current.clone(),
            });
        }
        if let Some(old) = current {
            tracing::warn!(master = %t.master, from = %old, to = %addr, "Sentinel names a new primary");
        }
        Ok(())
    }

    /// Listens on every Sentinel for `+switch-master` of our master and follows it at once
    /// (between two calls, not only after a failing one). Stops with the store.
    pub(super) fn listen_for_switches(&self) {
        let Some(t) = self.sentinel_target().cloned() else {
            return;
        };
        for url in t.sentinels.clone() {
            let weak: Weak<super::Inner> = Arc::downgrade(&self.inner);
            let tls = self.inner.settings.tls_ca.clone();
            let master = t.master.clone();
            tokio::spawn(async move {
                loop {
                    let Ok(client) = super::target::open_client(&url, tls.as_deref()) else {
                        return;
                    };
                    if let Ok(mut pubsub) = client.get_async_pubsub().await
                        && pubsub.subscribe("+switch-master").await.is_ok()
                    {
                        let mut messages = pubsub.on_message();
                        loop {
                            let msg = tokio::select! {
                                m = messages.next() => m,
                                // A store dropped (a watch that reconnected) stops listening.
                                _ = tokio::time::sleep(Duration::from_secs(1)) => {
                                    if weak.strong_count() == 0 {
                                        return;
                                    }
                                    continue;
                                }
                            };
                            let Some(msg) = msg else { break };
                            let text: String = msg.get_payload().unwrap_or_default();
                            // `<name> <old ip> <old port> <new ip> <new port>`
                            if text.split_whitespace().next() != Some(master.as_str()) {
                                continue;
                            }
                            let Some(inner) = weak.upgrade() else { return };
                            let store = RedisStore { inner };
                            let _ = store.follow_master(true).await;
                        }
                    }
                    if weak.strong_count() == 0 {
                        return;
                    }
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            });
        }
    }
}
