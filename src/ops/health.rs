//! `ping`: is Redis reachable on every node, are the scripts loaded, is the database reachable
//! and migrated. The check cron runs before anything else.

use crate::db::{Db, migrate};
use crate::redis::info::{self, Memory, NodeStats, ServerRole, SlowEntry};
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

/// Every node: health (PING, INFO, SCRIPT EXISTS), then, for the nodes that answered, the
/// slowlog, all nodes at once.
pub async fn redis_info(redis: &RedisStore) -> RedisInfo {
    let healths = redis_nodes(redis).await;
    let nodes = redis.nodes();
    let jobs = healths.into_iter().map(|health| {
        let node = nodes
            .iter()
            .find(|(n, _)| n.addr == health.addr)
            .map(|(n, _)| n.clone())
            .filter(|_| health.answered);
        async move {
            let slowlog = match node {
                Some(n) => info::slowlog(&n).await,
                None => Vec::new(),
            };
            NodeInfo {
                stats: health.stats.clone(),
                health,
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
    /// What the node says it is (INFO), else what the slot map says.
    pub role: Role,
    /// The primary a replica follows, as it names it.
    pub replica_of: Option<String>,
    /// Answered and is what the console needs there (a primary where it writes).
    pub ok: bool,
    pub latency_ms: Option<f64>,
    /// Script name -> loaded on this node.
    pub scripts: Vec<(String, bool)>,
    pub error: Option<String>,
    /// Used and maximum memory, the eviction policy and the keys evicted so far.
    pub memory: Memory,
    /// What the console could not use on this node (a command renamed or refused by the
    /// server's ACL), so what it could not check: e.g. `INFO (memory and role unchecked)`.
    pub unchecked: Vec<String>,
    /// A primary's replication: its replicas and lags, and whether a write must reach one
    /// before Redis answers it (what a failover can lose).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub replication: Option<Replication>,
    /// A cluster primary's slots it says it is migrating (CLUSTER NODES, its own line).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub migrating: Vec<crate::domain::migration::Migration>,
    /// The node answered PING.
    #[serde(skip)]
    pub answered: bool,
    /// The INFO figures of the Redis view.
    #[serde(skip)]
    pub stats: NodeStats,
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

/// What a failover of a primary can lose, as its INFO and configuration say.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Replication {
    pub replicas: Vec<crate::redis::info::Replica>,
    /// `min-replicas-to-write` (None: CONFIG GET refused, and INFO says only whether it is on).
    pub min_replicas_to_write: Option<i64>,
    pub min_replicas_max_lag: Option<i64>,
    /// Replicas that count for it now (INFO `min_slaves_good_slaves`, shown when it is on).
    pub good_replicas: Option<u32>,
    /// What an operator should know, when anything (None: writes wait for a fresh replica).
    pub warning: Option<String>,
}

/// A lag past this many seconds is a replica a failover would lose writes to.
pub const LAG_WARN_SECS: i64 = 10;

impl Replication {
    /// The verdict on a primary's replication, from its replicas and settings.
    pub fn judge(
        replicas: Vec<crate::redis::info::Replica>,
        (to_write, max_lag): (Option<i64>, Option<i64>),
        good_replicas: Option<u32>,
    ) -> Self {
        let lagging: Vec<String> = replicas
            .iter()
            .filter(|r| r.state != "online" || r.lag_secs.is_none_or(|l| l > LAG_WARN_SECS))
            .map(|r| {
                format!(
                    "{} ({}{})",
                    r.addr,
                    r.state,
                    r.lag_secs
                        .map(|l| format!(", lag {l} s"))
                        .unwrap_or_default()
                )
            })
            .collect();
        let on = to_write.map_or(good_replicas.is_some(), |n| n > 0);
        let warning = if replicas.is_empty() {
            Some(
                "no replica: a restart loses what persistence had not written, and no failover can take over"
                    .to_string(),
            )
        } else if !on {
            Some(format!(
                "min-replicas-to-write is {}: Redis answers a sale before any replica has it, so a failover to a lagging replica loses sales the buyers were told they made (set min-replicas-to-write 1 and min-replicas-max-lag {LAG_WARN_SECS})",
                to_write.map_or_else(|| "off".to_string(), |n| n.to_string())
            ))
        } else if !lagging.is_empty() {
            Some(format!("replicas behind: {}", lagging.join(", ")))
        } else {
            None
        };
        Replication {
            replicas,
            min_replicas_to_write: to_write,
            min_replicas_max_lag: max_lag,
            good_replicas,
            warning,
        }
    }
}

/// One setting by CONFIG GET, None when refused or absent.
async fn config_int(node: &crate::redis::node::Node, name: &str) -> Option<i64> {
    let mut cmd = redis::cmd("CONFIG");
    cmd.arg("GET").arg(name);
    let v = node.query(&cmd).await.ok()?;
    let pairs: Vec<String> = redis::from_redis_value(v).ok()?;
    pairs.get(1)?.parse().ok()
}

/// Pings every node, reads its INFO (role, memory, eviction) and asks SCRIPT EXISTS for every
/// script. A command the server refuses (renamed, or denied by its ACL) is listed in
/// `unchecked`; it never fails the node.
pub async fn redis_nodes(redis: &RedisStore) -> Vec<NodeHealth> {
    let mut out = Vec::new();
    for (node, role) in redis.nodes() {
        let mut health = node_health(&node, role).await;
        if redis.is_cluster() && health.ok && health.role == Role::Primary {
            health.migrating = migrating(&node).await;
        }
        out.push(health);
    }
    out
}

/// The slots a cluster primary says it is migrating (none when it refuses CLUSTER NODES).
async fn migrating(node: &crate::redis::node::Node) -> Vec<crate::domain::migration::Migration> {
    let cmd = redis::cmd("CLUSTER").arg("NODES").clone();
    match node
        .query(&cmd)
        .await
        .map(redis::from_redis_value::<String>)
    {
        Ok(Ok(text)) => crate::domain::migration::migrating_from_nodes(&text),
        _ => Vec::new(),
    }
}

async fn node_health(node: &crate::redis::node::Node, expected: Role) -> NodeHealth {
    let all = scripts::all();
    let started = Instant::now();
    let ping = node.query(&redis::cmd("PING")).await;
    let latency = started.elapsed().as_secs_f64() * 1000.0;
    let mut health = NodeHealth {
        addr: node.addr.clone(),
        role: expected,
        replica_of: None,
        ok: ping.is_ok(),
        latency_ms: ping.is_ok().then_some((latency * 1000.0).round() / 1000.0),
        scripts: Vec::new(),
        error: ping.err().map(|e| crate::redis::describe(&e)),
        memory: Memory::default(),
        unchecked: Vec::new(),
        replication: None,
        migrating: Vec::new(),
        answered: false,
        stats: NodeStats::default(),
    };
    health.answered = health.ok;
    if !health.ok {
        return health;
    }
    match node.query(&redis::cmd("INFO")).await {
        Ok(v) => match redis::from_redis_value::<String>(v) {
            Ok(text) => health.stats = info::stats_from_info(&text),
            Err(_) => health.unchecked.push("INFO (unreadable reply)".into()),
        },
        Err(e) => health.unchecked.push(format!(
            "INFO ({}): role and memory unchecked",
            crate::redis::describe(&e)
        )),
    }
    health.memory = health.stats.memory.clone();
    match &health.stats.server {
        Some(ServerRole::Sentinel) => {
            health.role = Role::Sentinel;
            health.ok = false;
            health.error = Some(
                "this is a Sentinel, not a data node: use --redis-sentinel with --sentinel-master"
                    .into(),
            );
            return health;
        }
        Some(ServerRole::Replica(of)) => {
            health.role = Role::Replica;
            health.replica_of = of.clone();
            if expected == Role::Primary {
                health.ok = false;
                health.error = Some(format!(
                    "a replica (of {}), where the console reads truth and writes: point it at the primary, or at Sentinel",
                    of.as_deref().unwrap_or("an unnamed primary")
                ));
            }
        }
        Some(ServerRole::Primary) => {
            health.role = Role::Primary;
            let to_write = config_int(node, "min-replicas-to-write").await;
            let max_lag = config_int(node, "min-replicas-max-lag").await;
            if to_write.is_none() {
                health.unchecked.push(
                    "CONFIG GET (min-replicas-to-write unread; INFO says only whether it is on)"
                        .into(),
                );
            }
            health.replication = Some(Replication::judge(
                health.stats.replicas.clone(),
                (to_write, max_lag),
                health.stats.good_replicas,
            ));
        }
        None => {}
    }
    let mut cmd = redis::cmd("SCRIPT");
    cmd.arg("EXISTS");
    for s in all {
        cmd.arg(s.sha());
    }
    let reply = node.query(&cmd).await;
    match reply.map(redis::from_redis_value::<Vec<i64>>) {
        Ok(Ok(flags)) => {
            health.scripts = all
                .iter()
                .zip(flags)
                .map(|(s, f)| (s.name.to_string(), f == 1))
                .collect();
        }
        Ok(Err(_)) => health
            .unchecked
            .push("SCRIPT EXISTS (unreadable reply)".into()),
        Err(e) => health.unchecked.push(format!(
            "SCRIPT EXISTS ({}): scripts unchecked",
            crate::redis::describe(&e)
        )),
    }
    health
}

/// Each primary's `evicted_keys` (INFO stats), for those that answer it.
pub async fn evicted_keys(redis: &RedisStore) -> std::collections::HashMap<String, u64> {
    let mut out = std::collections::HashMap::new();
    let cmd = redis::cmd("INFO").arg("stats").clone();
    for node in redis.primaries() {
        if let Ok(v) = node.query(&cmd).await
            && let Ok(text) = redis::from_redis_value::<String>(v)
            && let Some(n) = info::stats_from_info(&text).memory.evicted_keys
        {
            out.insert(node.addr.clone(), n);
        }
    }
    out
}

/// True when a node evicted keys since `before` (each node's `evicted_keys`; a node not in
/// `before` has nothing to weigh against). Evicted keys leave no event: a live view that asks
/// quiet products whether they moved must read them whole again.
pub fn evicted_since(
    before: &std::collections::HashMap<String, u64>,
    now: &std::collections::HashMap<String, u64>,
) -> bool {
    now.iter()
        .any(|(addr, &e)| before.get(addr).is_some_and(|&b| e > b))
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

#[cfg(test)]
mod tests {
    use super::evicted_since;
    use std::collections::HashMap;

    #[test]
    fn eviction_is_a_count_that_grew_on_a_node_seen_before() {
        let m = |pairs: &[(&str, u64)]| -> HashMap<String, u64> {
            pairs.iter().map(|(a, n)| (a.to_string(), *n)).collect()
        };
        let before = m(&[("a:1", 5), ("b:2", 0)]);
        assert!(!evicted_since(&before, &m(&[("a:1", 5), ("b:2", 0)])));
        assert!(evicted_since(&before, &m(&[("a:1", 5), ("b:2", 1)])));
        // A node first seen now (a failover, a new primary) has nothing to weigh against.
        assert!(!evicted_since(&before, &m(&[("c:3", 9)])));
        assert!(!evicted_since(&HashMap::new(), &before));
        // A restart resets the count: lower is not eviction (the restart recuts on its own).
        assert!(!evicted_since(&before, &m(&[("a:1", 0)])));
    }
}
