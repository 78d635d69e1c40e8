//! One command to the node that serves its key, following MOVED and ASK redirects; and the
//! commands that go to every node (SCAN, INFO, SCRIPT LOAD).

use super::RedisStore;
use super::errors::server_error_kind;
use super::guard::{is_read_command, refusal};
use super::node::{self, Node};
use futures::future::join_all;
use redis::{Cmd, ErrorKind, RedisError, RedisResult, ServerErrorKind, Value};
use std::sync::Arc;
use std::time::Duration;

/// Redirects followed for one command before giving up.
const MAX_REDIRECTS: usize = 5;

impl RedisStore {
    /// Sends one command to the node that serves `key`, following MOVED and ASK redirects and
    /// retrying a command that was refused before it reached any server.
    pub async fn query(&self, key: &str, cmd: &Cmd) -> RedisResult<Value> {
        if self.read_only() && !is_read_command(cmd) {
            return Err(refusal(cmd));
        }
        let mut ask: Option<Arc<Node>> = None;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let result = match ask.take() {
                Some(node) => {
                    let mut pipe = redis::pipe();
                    pipe.cmd("ASKING").ignore().add_command(cmd.clone());
                    node.pipeline(&pipe).await.and_then(|mut v| {
                        v.pop()
                            .ok_or_else(|| RedisError::from((ErrorKind::Parse, "empty reply")))
                    })
                }
                None => self.node_for_key(key)?.query(cmd).await,
            };
            let err = match result {
                Ok(Value::ServerError(se)) => RedisError::from(se),
                Ok(v) => return Ok(v),
                Err(e) => e,
            };
            if attempt > MAX_REDIRECTS || !self.follows() {
                return Err(super::errors::naming_the_slot(
                    err,
                    super::slots::key_slot(key.as_bytes()),
                ));
            }
            match server_error_kind(&err) {
                // Behind Sentinel, the node was demoted: nothing was written (a replica
                // refuses the first write); the command goes to the primary Sentinel names.
                Some(ServerErrorKind::ReadOnly) if self.is_sentinel() => {
                    tokio::time::sleep(Duration::from_millis(100 * attempt as u64)).await;
                    let _ = self.refresh_topology(false).await;
                }
                Some(ServerErrorKind::Moved) => match err.redirect_node() {
                    // The redirect is the freshest word on that slot: a refresh now could read
                    // a node that has not heard of the move yet and undo it.
                    Some((addr, slot)) => self.apply_moved(slot, addr),
                    None => {
                        let _ = self.refresh_topology(false).await;
                    }
                },
                Some(ServerErrorKind::Ask) => match err.redirect_node() {
                    Some((addr, _)) => ask = Some(self.node(addr)?),
                    None => return Err(err),
                },
                Some(ServerErrorKind::TryAgain) => {
                    tokio::time::sleep(Duration::from_millis(20 * attempt as u64)).await;
                }
                _ if err.is_connection_refusal() => {
                    // Nothing was sent: after a failover the slot has a new owner.
                    tokio::time::sleep(Duration::from_millis(50 * attempt as u64)).await;
                    let _ = self.refresh_topology(false).await;
                }
                _ => {
                    if node::is_connection_error(&err) {
                        let _ = self.refresh_topology(false).await;
                    }
                    return Err(err);
                }
            }
        }
    }

    /// Every key matching `pattern` on every primary, with SCAN (never KEYS), each once. On a
    /// cluster with a slot in migration (or a slot map that changed meanwhile) a key may move
    /// from a node not scanned yet to one already scanned: the scan goes round again once the
    /// map is refreshed, and the rounds' keys are merged, until a round saw no migration.
    pub async fn scan(&self, pattern: &str) -> RedisResult<Vec<String>> {
        let mut keys = Vec::new();
        for round in 0..5 {
            let moving_before = self.slots_migrating().await;
            let before = self.primary_addrs();
            self.scan_round(pattern, &mut keys).await?;
            let moving = moving_before || self.slots_migrating().await;
            if !moving && before == self.primary_addrs() {
                break;
            }
            tracing::debug!(round, "scan: slots moved during the scan; once more");
            let _ = self.refresh_topology(true).await;
        }
        keys.sort();
        keys.dedup();
        Ok(keys)
    }

    /// True when a primary has a slot migrating or importing (its own line of CLUSTER NODES
    /// carries `[slot->-node]` or `[slot-<-node]`). A single server never has.
    pub async fn slots_migrating(&self) -> bool {
        if !self.inner.cluster {
            return false;
        }
        let cmd = redis::cmd("CLUSTER").arg("NODES").clone();
        for node in self.primaries() {
            if let Ok(v) = node.query(&cmd).await
                && let Ok(text) = redis::from_redis_value::<String>(v)
                && text
                    .lines()
                    .any(|l| l.contains("myself") && (l.contains("->-") || l.contains("-<-")))
            {
                return true;
            }
        }
        false
    }

    async fn scan_round(&self, pattern: &str, keys: &mut Vec<String>) -> RedisResult<()> {
        for node in self.primaries() {
            let mut cursor: u64 = 0;
            loop {
                let cmd = redis::cmd("SCAN")
                    .arg(cursor)
                    .arg("MATCH")
                    .arg(pattern)
                    .arg("COUNT")
                    .arg(1000)
                    .clone();
                let reply = node.query(&cmd).await?;
                let (next, batch): (u64, Vec<String>) = redis::from_redis_value(reply)?;
                keys.extend(batch);
                cursor = next;
                if cursor == 0 {
                    break;
                }
            }
        }
        Ok(())
    }

    /// Runs `cmd` on each node given, concurrently; results keep the nodes' order.
    pub async fn on_nodes(
        &self,
        nodes: &[Arc<Node>],
        cmd: &Cmd,
    ) -> Vec<(String, RedisResult<Value>)> {
        if self.read_only() && !is_read_command(cmd) {
            let err = refusal(cmd);
            return nodes
                .iter()
                .map(|n| (n.addr.clone(), Err(err.clone())))
                .collect();
        }
        let jobs = nodes
            .iter()
            .map(|n| async move { (n.addr.clone(), n.query(cmd).await) });
        join_all(jobs).await
    }
}
