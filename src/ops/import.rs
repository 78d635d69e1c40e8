//! `activity import`: an activity and its products from a file into the database. A re-import
//! may raise a product's stock (Redis then holds fewer units than the truth until a fix or a
//! preheat writes them), but never cut the stock of a product whose keys are in Redis: Redis
//! would go on selling the units the database took away. `topup --add -N` moves both sides in
//! the order that never oversells.

use crate::db::Db;
use crate::db::activity::{self as store, ImportReport};
use crate::domain::ActivityDef;
use crate::error::Result;
use crate::redis::{KeySpace, Keyed, RedisStore};
use redis::Value;
use std::collections::{HashMap, HashSet};

/// What the import needs of Redis: only when it cuts a product's stock, to know whether the
/// product's keys are there.
pub trait RedisForCuts {
    /// Opens (or hands out) the Redis handle.
    fn redis(&self) -> impl std::future::Future<Output = Result<RedisStore>> + Send;
}

/// Imports `def`, checking any stock cut against Redis first.
pub async fn import(
    db: &Db,
    redis: &impl RedisForCuts,
    keys: &KeySpace,
    def: &ActivityDef,
    (actor, source): (&str, &str),
) -> Result<ImportReport> {
    let id = &def.activity.activity_id;
    let before: HashMap<String, i64> = match store::get(db, id).await? {
        Some(_) => store::products(db, id)
            .await?
            .into_iter()
            .map(|p| (p.product_id.to_string(), p.initial_stock))
            .collect(),
        None => HashMap::new(),
    };
    let cut: Vec<&crate::domain::Product> = def
        .products
        .iter()
        .filter(|p| {
            before
                .get(p.product_id.as_str())
                .is_some_and(|s| p.initial_stock < *s)
        })
        .collect();
    let mut in_redis = HashSet::new();
    if !cut.is_empty() {
        let redis = redis.redis().await?;
        let items: Vec<Keyed> = cut
            .iter()
            .map(|p| {
                let k = keys.product(id, &p.product_id);
                Keyed::new(
                    &k.stock,
                    redis::cmd("EXISTS").arg(&k.stock).arg(&k.meta).clone(),
                )
            })
            .collect();
        for (p, r) in cut.iter().zip(redis.pipeline(items).await) {
            match r {
                Ok(Value::Int(0)) => {}
                Ok(_) => {
                    in_redis.insert(p.product_id.to_string());
                }
                Err(e) => return Err(redis.error(&e)),
            }
        }
    }
    store::import(db, def, (actor, source), &in_redis).await
}
