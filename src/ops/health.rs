//! `ping`: is Redis reachable on every node, are the scripts loaded, is the database reachable
//! and migrated. The check cron runs before anything else.

use crate::db::{Db, migrate};
use crate::redis::{RedisStore, Role, scripts};
use serde::Serialize;
use std::time::Instant;

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
