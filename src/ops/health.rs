//! `ping`: is Redis reachable on every node, are the scripts loaded, is the database reachable
//! and migrated. The check cron runs before anything else.

use crate::db::{Db, migrate};
use crate::redis::info::{self, NodeStats, SlowEntry};
use crate::redis::{RedisStore, Role, scripts};
use futures::future::join_all;
use serde::Serialize;
use std::time::Instant;

/// One Redis node as the Redis view shows it: its health, INFO figures and slowlog.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeInfo {
    pub health: NodeHealth,
    pub stats: NodeStats,
    pub slowlog: Vec<SlowEntry>,
}

/// Every Redis node.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct RedisInfo {
    pub nodes: Vec<NodeInfo>,
}

/// Every node: health (PING, SCRIPT EXISTS), then, for the nodes that answered, INFO figures
/// and the slowlog, all nodes at once.
pub async fn redis_info(redis: &RedisStore) -> RedisInfo {
    let healths = redis_nodes(redis).await;
    let nodes = redis.nodes();
    let jobs = healths.into_iter().map(|health| {
        let node = nodes
            .iter()
            .find(|(n, _)| n.addr == health.addr)
            .map(|(n, _)| n.clone())
            .filter(|_| health.ok);
        async move {
            let (stats, slowlog) = match node {
                Some(n) => (
                    info::node_stats(&n).await.unwrap_or_default(),
                    info::slowlog(&n).await,
                ),
                None => (NodeStats::default(), Vec::new()),
            };
            NodeInfo {
                health,
                stats,
                slowlog,
            }
        }
    });
    RedisInfo {
        nodes: join_all(jobs).await,
    }
}

/// One Redis node as `ping` saw it.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct NodeHealth {
    pub addr: String,
    pub role: Role,
    pub ok: bool,
    pub latency_ms: Option<f64>,
    /// Script name -> loaded on this node.
    pub scripts: Vec<(String, bool)>,
    pub error: Option<String>,
}

impl NodeHealth {
    /// Whether the deduction script is cached on this node (None: not asked, e.g. unreachable).
    pub fn deduct_loaded(&self) -> Option<bool> {
        self.scripts
            .iter()
            .find(|(name, _)| name == scripts::DEDUCT.name)
            .map(|(_, loaded)| *loaded)
    }
}

/// Pings every node and asks SCRIPT EXISTS for every script.
pub async fn redis_nodes(redis: &RedisStore) -> Vec<NodeHealth> {
    let mut out = Vec::new();
    let all = scripts::all();
    for (node, role) in redis.nodes() {
        let started = Instant::now();
        let ping = node.query(&redis::cmd("PING")).await;
        let latency = started.elapsed().as_secs_f64() * 1000.0;
        let mut health = NodeHealth {
            addr: node.addr.clone(),
            role,
            ok: ping.is_ok(),
            latency_ms: ping.is_ok().then_some((latency * 1000.0).round() / 1000.0),
            scripts: Vec::new(),
            error: ping.err().map(|e| crate::redis::describe(&e)),
        };
        if health.ok {
            let mut cmd = redis::cmd("SCRIPT");
            cmd.arg("EXISTS");
            for s in all {
                cmd.arg(s.sha());
            }
            let reply = node.query(&cmd).await.ok();
            if let Some(flags) = reply.and_then(|v| redis::from_redis_value::<Vec<i64>>(v).ok()) {
                health.scripts = all
                    .iter()
                    .zip(flags)
                    .map(|(s, f)| (s.name.to_string(), f == 1))
                    .collect();
            }
        }
        out.push(health);
    }
    out
}

/// The database as `ping` saw it.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct DbHealth {
    pub database: String,
    pub backend: crate::db::Backend,
    pub schema_current: bool,
    pub error: Option<String>,
}

/// Checks the schema version of a connected database.
pub async fn database(db: &Db) -> DbHealth {
    let schema = migrate::ensure_schema(db).await;
    DbHealth {
        database: db.label().to_string(),
        backend: db.backend(),
        schema_current: schema.is_ok(),
        error: schema.err().map(|e| e.message),
    }
}
