//! The cut: each product's stock, meta hash and position in its event stream as of one
//! instant of Redis. Every write to a product's books appends an event, so a read that finds
//! the same newest event before and after reading the stock and the meta hash read them at one
//! instant; a product whose stream moved in between is read again.
//!
//! This needs no MULTI and no script: only reads, which a read-only ACL user may send.

use super::events::{last_id, newest};
use super::product_state::{get_meta, get_stock, meta_from, stock_from};
use super::reply::text;
use super::{Keyed, ProductKeys, RedisStore};
use crate::domain::events::EventId;
use crate::domain::stock::{Meta, StockValue};
use redis::{ErrorKind, RedisError, RedisResult, Value};
use std::collections::HashMap;

/// Rounds of re-reading a product whose stream moved during the read. A round takes a few
/// microseconds of Redis; a product would have to change under every one of them.
const MAX_ROUNDS: usize = 50;

/// What Redis holds for one product at one instant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProductCut {
    pub stock: StockValue,
    pub meta: Meta,
    /// The newest event at the cut (ZERO: none); None when the events key has another type.
    pub position: Option<EventId>,
    /// Redis time of the read (the node's TIME; the local clock where TIME is not allowed).
    pub now_ms: i64,
}

impl ProductCut {
    /// `A`: units held by active deductions, per the scripts' counters; None when they are not
    /// readable.
    pub fn active(&self) -> Option<i64> {
        // A meta hash that vanished after the product had events took its counters with it.
        let lost = !self.meta.present && self.position != Some(EventId::ZERO);
        if self.meta.corrupt.is_some() || lost {
            return None;
        }
        self.meta.active_units()
    }
}

fn items(k: &ProductKeys) -> [Keyed; 6] {
    [
        newest(k),
        get_stock(k),
        get_meta(k),
        type_of(&k.buyers),
        type_of(&k.ledger),
        newest(k),
    ]
}

/// TYPE: O(1), so the hashes every deduction writes are checked on each read without reading
/// them (a buyers or ledger key of another type makes every deduction fail).
fn type_of(key: &str) -> Keyed {
    Keyed::new(key, redis::cmd("TYPE").arg(key).clone())
}

/// Names a buyers or ledger key that is not a hash (absent is fine: nothing sold yet).
fn wrong_hash(what: &str, key: &str, reply: &RedisResult<Value>) -> RedisResult<Option<String>> {
    let kind = match reply {
        Ok(v) => text(v).unwrap_or_default(),
        Err(e) => return Err(e.clone()),
    };
    Ok((kind != "hash" && kind != "none")
        .then(|| format!("the {what} key {key} is a {kind}, not a hash: every deduction fails")))
}

fn position(reply: &RedisResult<Value>) -> RedisResult<Option<EventId>> {
    match reply {
        Ok(v) => last_id(v).map(Some).ok_or_else(|| {
            RedisError::from((ErrorKind::Parse, "the events stream gave an unreadable id"))
        }),
        Err(e) if super::reply::is_wrong_type(e) => Ok(None),
        Err(e) => Err(e.clone()),
    }
}

/// Reads the cut of every product, pipelined per node. A wrong-type key is reported on its
/// product; any other error fails the read (the caller reports Redis unavailable).
pub async fn read(redis: &RedisStore, keys: &[ProductKeys]) -> RedisResult<Vec<ProductCut>> {
    let clocks = node_clocks(redis).await;
    let mut out: Vec<Option<ProductCut>> = vec![None; keys.len()];
    let mut todo: Vec<usize> = (0..keys.len()).collect();
    for _ in 0..MAX_ROUNDS {
        if todo.is_empty() {
            break;
        }
        let batch: Vec<Keyed> = todo.iter().flat_map(|&i| items(&keys[i])).collect();
        let results = redis.pipeline(batch).await;
        let mut again = Vec::new();
        for (&i, r) in todo.iter().zip(results.chunks(6)) {
            let [first, stock, meta, buyers, ledger, last] = r else {
                return Err(RedisError::from((ErrorKind::Parse, "short pipeline reply")));
            };
            let (before, after) = (position(first)?, position(last)?);
            if before != after {
                again.push(i);
                continue;
            }
            let mut meta = meta_from(meta)?;
            if meta.corrupt.is_none() {
                meta.corrupt = match wrong_hash("buyers", &keys[i].buyers, buyers)? {
                    Some(w) => Some(w),
                    None => wrong_hash("ledger", &keys[i].ledger, ledger)?,
                };
            }
            out[i] = Some(ProductCut {
                stock: stock_from(stock)?,
                meta,
                position: after,
                now_ms: clock_for(redis, &clocks, &keys[i]),
            });
        }
        todo = again;
    }
    if let Some(&i) = todo.first() {
        return Err(RedisError::from((
            ErrorKind::Client,
            "no consistent read: the product changed during every attempt",
            keys[i].stock.clone(),
        )));
    }
    let mut cuts: Vec<ProductCut> = out.into_iter().flatten().collect();
    super::product_state::name_wrong_types(redis, keys, &mut cuts).await?;
    Ok(cuts)
}

/// Each primary's clock, ms since the epoch (TIME). A node that refuses TIME (an ACL user
/// allowed only reads) is left out and its products use the local clock.
async fn node_clocks(redis: &RedisStore) -> HashMap<String, i64> {
    let primaries = redis.primaries();
    redis
        .on_nodes(&primaries, &redis::cmd("TIME"))
        .await
        .into_iter()
        .filter_map(|(addr, r)| match r.ok()? {
            Value::Array(parts) => {
                let secs: i64 = text(parts.first()?)?.parse().ok()?;
                let micros: i64 = text(parts.get(1)?)?.parse().ok()?;
                Some((addr, secs * 1000 + micros / 1000))
            }
            _ => None,
        })
        .collect()
}

fn clock_for(redis: &RedisStore, clocks: &HashMap<String, i64>, k: &ProductKeys) -> i64 {
    redis
        .node_for_key(&k.stock)
        .ok()
        .and_then(|n| clocks.get(&n.addr).copied())
        .unwrap_or_else(|| chrono::Utc::now().timestamp_millis())
}
