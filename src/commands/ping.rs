//! `ping`: reachability of Redis (every node, scripts loaded) and of the database (schema).

use super::{Ctx, Outcome, table};
use seckill_console::error::{ErrorKind, Result};
use seckill_console::ops::health;
use serde_json::json;

pub async fn run(ctx: &Ctx) -> Result<Outcome> {
    let redis = ctx.redis().await?;
    let nodes = health::redis_nodes(&redis).await;
    let db = ctx.db_unchecked().await?;
    let database = health::database(&db).await;
    db.close().await;
    let all_ok = nodes.iter().all(|n| n.ok) && database.schema_current;
    let mut text = format!("redis    {}\n", redis.label());
    text.push_str(&table::render(
        &["node", "role", "ok", "latency_ms", "memory", "scripts"],
        &nodes
            .iter()
            .map(|n| {
                vec![
                    n.addr.clone(),
                    n.role.as_str().to_string(),
                    if n.ok {
                        "yes".into()
                    } else {
                        format!("no: {}", n.error.clone().unwrap_or_default())
                    },
                    n.latency_ms.map(|l| format!("{l:.2}")).unwrap_or_default(),
                    n.memory.summary(),
                    n.scripts
                        .iter()
                        .map(|(s, loaded)| {
                            format!("{s}:{}", if *loaded { "loaded" } else { "missing" })
                        })
                        .collect::<Vec<_>>()
                        .join(" "),
                ]
            })
            .collect::<Vec<_>>(),
    ));
    for n in &nodes {
        if let Some(r) = &n.replication {
            let lags: Vec<String> = r
                .replicas
                .iter()
                .map(|x| {
                    format!(
                        "{} {}{}",
                        x.addr,
                        x.state,
                        x.lag_secs
                            .map(|l| format!(" lag {l} s"))
                            .unwrap_or_default()
                    )
                })
                .collect();
            text.push_str(&format!(
                "replication of {}: {} replica(s){}; min-replicas-to-write {}, min-replicas-max-lag {}\n",
                n.addr,
                r.replicas.len(),
                if lags.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", lags.join(", "))
                },
                r.min_replicas_to_write
                    .map_or_else(|| "unknown".to_string(), |v| v.to_string()),
                r.min_replicas_max_lag
                    .map_or_else(|| "unknown".to_string(), |v| v.to_string()),
            ));
            if let Some(w) = &r.warning {
                text.push_str(&format!("  warning: {w}\n"));
            }
        }
        for what in &n.unchecked {
            text.push_str(&format!("could not use on {}: {what}\n", n.addr));
        }
    }
    text.push_str(&format!(
        "database {} ({:?}): schema {}\n",
        database.database,
        database.backend,
        if database.schema_current {
            "current".to_string()
        } else {
            database.error.clone().unwrap_or_default()
        }
    ));
    let doc = json!({
        "redis": {
            "target": redis.label(),
            "cluster": redis.is_cluster(),
            "master": redis.master(),
            "nodes": nodes,
        },
        "database": database,
        "ok": all_ok,
    });
    Outcome::finished(doc, text, (!all_ok).then_some(ErrorKind::CheckFailed))
}
