//! The Redis layer: one handle that serves a single server (`--redis`) or a Redis Cluster
//! (`--redis-cluster`). This file holds the handle; each job has its own file:
//!
//! - `target`: URLs, settings, the client of one node;
//! - `guard`: the read-only gate every command passes;
//! - `topology`: the slot map, the nodes and their roles;
//! - `route`: one command, with MOVED / ASK redirects; commands on every node;
//! - `pipeline`: many commands, one pipeline per node;
//! - `eval`: the scripts, EVALSHA with the one EVAL fallback;
//! - `errors`: Redis errors as the console's kinds;
//! - `info`: INFO and SLOWLOG replies as typed figures;
//! - `changes`: which products changed, pushed by Redis (client tracking);
//! - the rest read and write the contract's keys: `stock` (the buyers' scripts), `rewrite`
//!   (preheat and fix), `control` (pause, top-up), `ledger`, `checkpoint`, `cut`, `events`.

pub mod changes;
pub mod checkpoint;
pub mod control;
pub mod cut;
mod errors;
mod eval;
pub mod events;
pub mod guard;
pub mod info;
pub mod keys;
pub mod ledger;
pub mod node;
pub mod peers;
mod pipeline;
pub mod preflight;
pub mod product_state;
pub mod reply;
pub mod rewrite;
mod route;
pub mod scripts;
pub mod sentinel;
pub mod slots;
pub mod stock;
mod target;
mod topology;

use crate::error::{Error, Result};
use node::Node;
use redis::{Cmd, RedisError};
use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};
use topology::Topology;

pub use errors::{describe, redis_error};
pub use eval::ScriptCall;
pub use guard::is_read_command;
pub use keys::{KeySpace, ProductKeys};
pub use target::{RedisSettings, RedisTarget, SentinelTarget};

/// A node's role, for the Redis view and SCRIPT EXISTS checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Primary,
    Replica,
    /// A Sentinel given where a data node was expected (`ping` names it).
    Sentinel,
}

impl Role {
    /// The name, as in the JSON documents.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Primary => "primary",
            Role::Replica => "replica",
            Role::Sentinel => "sentinel",
        }
    }
}

/// A command and the key that routes it.
pub struct Keyed {
    /// The cluster slot of the routing key (computed once; no key copy is kept).
    pub slot: u16,
    pub cmd: Cmd,
}

impl Keyed {
    pub fn new(key: impl AsRef<str>, cmd: Cmd) -> Self {
        Keyed {
            slot: slots::key_slot(key.as_ref().as_bytes()),
            cmd,
        }
    }
}

struct Inner {
    settings: RedisSettings,
    cluster: bool,
    nodes: RwLock<HashMap<String, Arc<Node>>>,
    topology: RwLock<Topology>,
    last_refresh: tokio::sync::Mutex<Option<Instant>>,
    /// The master a Sentinel target follows.
    followed: RwLock<sentinel::Followed>,
}

/// The Redis handle, cheap to clone and shared by every task.
#[derive(Clone)]
pub struct RedisStore {
    inner: Arc<Inner>,
}

impl RedisStore {
    /// Connects and, for a cluster, reads the slot map. Fails with `unavailable` naming the
    /// redacted URL when no server answers within the timeouts.
    pub async fn connect(settings: RedisSettings) -> Result<Self> {
        for seed in settings.target.seeds() {
            target::validate_url(seed)?;
        }
        if settings.target.seeds().is_empty() {
            return Err(Error::bad_input(
                "--redis-cluster needs at least one seed URL, e.g. redis://127.0.0.1:7000",
            ));
        }
        let cluster = matches!(settings.target, RedisTarget::Cluster(_));
        let store = RedisStore {
            inner: Arc::new(Inner {
                settings,
                cluster,
                nodes: RwLock::new(HashMap::new()),
                topology: RwLock::new(Topology::default()),
                last_refresh: tokio::sync::Mutex::new(None),
                followed: RwLock::new(sentinel::Followed::default()),
            }),
        };
        if cluster {
            store.refresh_topology(true).await?;
        } else if store.is_sentinel() {
            store.follow_master(true).await?;
            if let Some(node) = store.primaries().first()
                && let Err(e) = node.query(&redis::cmd("PING")).await
            {
                return Err(store.error(&e));
            }
            store.listen_for_switches();
        } else {
            let seed = store.inner.settings.target.seeds()[0].clone();
            let addr = target::url_host_port(&seed)?;
            let node = store.make_node(&addr, &seed)?;
            if let Err(e) = node.query(&redis::cmd("PING")).await {
                return Err(store.error(&e));
            }
            if let Ok(mut topo) = store.inner.topology.write() {
                topo.primaries = vec![addr];
                topo.primary_nodes = vec![node];
            }
        }
        Ok(store)
    }

    /// The redacted target, for headers and messages; behind Sentinel, with the primary used
    /// now and when it last changed.
    pub fn label(&self) -> String {
        let base = self.inner.settings.target.label();
        match self.master() {
            Some(m) => match m.changed_at {
                Some(at) => format!(
                    "{base} (master {}, since {} UTC)",
                    m.addr,
                    at.format("%H:%M:%S")
                ),
                None => format!("{base} (master {})", m.addr),
            },
            None => base,
        }
    }

    /// True when the console finds its primary again after a failure: a cluster (slot map) or
    /// Sentinel (the master's address).
    pub(crate) fn follows(&self) -> bool {
        self.inner.cluster || self.is_sentinel()
    }

    pub fn is_cluster(&self) -> bool {
        self.inner.cluster
    }

    pub fn read_only(&self) -> bool {
        self.inner.settings.read_only
    }

    pub fn response_timeout(&self) -> Duration {
        self.inner.settings.response_timeout
    }

    /// Maps a Redis error to the console's error, naming the redacted target.
    pub fn error(&self, err: &RedisError) -> Error {
        redis_error(&self.label(), err)
    }
}
