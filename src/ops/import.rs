//! `activity import`: an activity and its products from a file into the database. A re-import
//! may raise a product's stock (Redis then holds fewer units than the truth until a fix or a
//! preheat writes them), but never cut the stock of a product whose keys are in Redis: Redis
//! would go on selling the units the database took away. `topup --add -N` moves both sides in
//! the order that never oversells. A re-import that moves the sale window writes the new one
//! into every preheated product's meta hash, after the database: `deduct.lua` enforces it.

use crate::db::Db;
use crate::db::activity::{self as store, ImportReport};
use crate::domain::{ActivityDef, SaleWindow};
use crate::error::{Error, Result};
use crate::redis::control::{WindowReply, set_window_many};
use crate::redis::{KeySpace, Keyed, RedisStore};
use redis::Value;
use serde::Serialize;
use std::collections::{HashMap, HashSet};

/// An import, with what it wrote into Redis.
#[derive(Clone, Debug, Serialize)]
pub struct Imported {
    #[serde(flatten)]
    pub report: ImportReport,
    /// The sale window moved by this import, and the products whose meta hash took it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<WindowMoved>,
}

/// A sale window a re-import moved.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct WindowMoved {
    pub before: SaleWindow,
    pub after: SaleWindow,
    /// Preheated products whose meta hash now carries the new window.
    pub written: usize,
    /// Products with no meta hash in Redis (not preheated): their preheat writes it.
    pub not_preheated: usize,
    /// Products whose meta hash held this window already.
    pub unchanged: usize,
    /// Products whose write failed or was refused, with why (a corrupt key, a rebuild holding
    /// it): `fix` writes the window.
    pub failed: Vec<(String, String)>,
    /// Why no product could be written (Redis unreachable, or refused): the database holds the
    /// new window, Redis the old one, until `fix` writes it. The command exits 3 (or 5).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unpushed: Option<String>,
    /// The kind of that failure, for the exit code.
    #[serde(skip)]
    pub failure: Option<crate::error::ErrorKind>,
}

/// What the import needs of Redis: only when it cuts a product's stock, to know whether the
/// product's keys are there, or moves the window of an activity, to write it there.
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
) -> Result<Imported> {
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
    let window_before = store::get(db, id).await?.map(|a| a.sale_window());
    let report = store::import(db, def, (actor, source), &in_redis).await?;
    let after = def.activity.sale_window();
    let window = match window_before {
        Some(before) if before != after => {
            let mut moved = WindowMoved {
                before,
                after,
                written: 0,
                not_preheated: 0,
                unchanged: 0,
                failed: Vec::new(),
                unpushed: None,
                failure: None,
            };
            // The database holds the import now, whatever Redis answers: a failure is said in
            // the report (and the exit code), never as an error that hides what was written.
            if let Err(e) = push_window(db, redis, keys, def, &mut moved).await {
                moved.unpushed = Some(format!(
                    "the import is written to the database, but the new sale window could not be written to Redis ({}): every product preheated already sells in the old window until `seckill-console fix {}` writes it (nothing to do for an activity never preheated)",
                    e.message, def.activity.activity_id
                ));
                moved.failure = Some(e.kind);
            }
            Some(moved)
        }
        _ => None,
    };
    Ok(Imported { report, window })
}

/// Writes a moved window into the meta hash of every product of the activity, after the
/// database took it. A product it cannot write (held by a rebuild, a corrupt key) is named in
/// `failed`; `status` names what Redis still enforces (`window_mismatch`) and `fix` writes it.
async fn push_window(
    db: &Db,
    redis: &impl RedisForCuts,
    keys: &KeySpace,
    def: &ActivityDef,
    moved: &mut WindowMoved,
) -> Result<()> {
    let id = &def.activity.activity_id;
    let products = store::products(db, id).await?;
    let redis = redis.redis().await?;
    let pkeys: Vec<_> = products
        .iter()
        .map(|p| keys.product(id, &p.product_id))
        .collect();
    let refs: Vec<_> = pkeys.iter().collect();
    let w = moved.after;
    let replies = set_window_many(&redis, &refs, (w.opens_ms, w.closes_ms)).await;
    let mut stop: Option<Error> = None;
    for (p, r) in products.iter().zip(replies) {
        match r {
            Ok(WindowReply::Written(_)) => moved.written += 1,
            Ok(WindowReply::NotThere) => moved.not_preheated += 1,
            Ok(WindowReply::Same) => moved.unchanged += 1,
            Ok(WindowReply::Held(_)) => moved.failed.push((
                p.product_id.to_string(),
                "a rebuild holds it (fix writes the window when it is done)".into(),
            )),
            Err(e) => {
                let err = redis.error(&e);
                moved
                    .failed
                    .push((p.product_id.to_string(), crate::redis::describe(&e)));
                if matches!(
                    err.kind,
                    crate::error::ErrorKind::Unavailable | crate::error::ErrorKind::Refused
                ) {
                    stop.get_or_insert(err);
                }
            }
        }
    }
    // A node that did not answer (or refused) leaves the rest written: the products named
    // above, and the exit code, say which.
    if let Some(e) = stop {
        moved.failure = Some(e.kind);
    } else if !moved.failed.is_empty() {
        // Written in the database, not on these products: a check that failed (exit 4).
        moved.failure = Some(crate::error::ErrorKind::CheckFailed);
    }
    Ok(())
}
