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
use crate::domain::meta::Piece;
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
    /// Redis time of the read, taken just before the product's keys were read (the node's
    /// TIME; the local clock where TIME is not allowed).
    pub now_ms: i64,
    /// Which of the keys the deductions need exist (of any type: a wrong type is in
    /// `meta.corrupt` or `position`).
    pub keys: KeysPresent,
}

/// Which keys of a product exist besides the stock and the meta hash.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KeysPresent {
    pub buyers: bool,
    pub ledger: bool,
    pub events: bool,
    /// A buyers or ledger key of another type (what it is): every deduction fails, and what
    /// it holds is not the console's to throw away.
    pub foreign: Option<String>,
}

impl ProductCut {
    /// The pieces Redis lost that the cut alone shows (the pause and the counters' agreement
    /// with the ledger need the database and a settle). A product never preheated has lost
    /// them all.
    pub fn lost(&self) -> Vec<Piece> {
        let mut out = Vec::new();
        if self.stock == StockValue::Missing {
            out.push(Piece::Stock);
        }
        if !self.meta.present {
            out.push(Piece::Meta);
        } else if self.meta.limit.is_none() && self.meta.corrupt.is_none() {
            out.push(Piece::Limit);
        }
        if self.counters_lost() {
            out.push(Piece::Counters);
        }
        if !self.keys.buyers {
            out.push(Piece::Buyers);
        }
        if !self.keys.ledger {
            out.push(Piece::Ledger);
        }
        if !self.keys.events {
            out.push(Piece::Events);
        }
        out
    }

    /// `A`: units held by active deductions, per the scripts' counters; None when they are not
    /// readable.
    pub fn active(&self) -> Option<i64> {
        // A meta hash that vanished after the product had events took its counters with it.
        let lost = !self.meta.present && self.position != Some(EventId::ZERO);
        if self.meta.corrupt.is_some() || lost || self.counters_lost() {
            return None;
        }
        self.meta.active_units()
    }

    /// A meta hash without `deducted` after the product had events: recreated by a write that
    /// is not a deduction (a pause), its counters are gone, not zero.
    fn counters_lost(&self) -> bool {
        self.meta.present
            && self.meta.corrupt.is_none()
            && self.meta.deducted.is_none()
            && self.position != Some(EventId::ZERO)
    }
}

fn items(k: &ProductKeys) -> [Keyed; 7] {
    [
        newest(k),
        get_stock(k),
        get_meta(k),
        type_of(&k.buyers),
        type_of(&k.ledger),
        type_of(&k.events),
        newest(k),
    ]
}

/// True when a TYPE reply names an existing key.
fn exists(reply: &RedisResult<Value>) -> RedisResult<bool> {
    match reply {
        Ok(v) => Ok(text(v).is_some_and(|t| t != "none")),
        Err(e) => Err(e.clone()),
    }
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
    let local = chrono::Utc::now().timestamp_millis();
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
        for (&i, r) in todo.iter().zip(results.chunks(7)) {
            let [first, stock, meta, buyers, ledger, events, last] = r else {
                return Err(RedisError::from((ErrorKind::Parse, "short pipeline reply")));
            };
            let (before, after) = (position(first)?, position(last)?);
            if before != after {
                again.push(i);
                continue;
            }
            let mut meta = meta_from(meta)?;
            let foreign = match wrong_hash("buyers", &keys[i].buyers, buyers)? {
                Some(w) => Some(w),
                None => wrong_hash("ledger", &keys[i].ledger, ledger)?,
            };
            if meta.corrupt.is_none() {
                meta.corrupt = foreign.clone();
            }
            out[i] = Some(ProductCut {
                stock: stock_from(stock)?,
                meta,
                position: after,
                now_ms: clock_for(redis, &clocks, &keys[i]).unwrap_or(local),
                keys: KeysPresent {
                    buyers: exists(buyers)?,
                    ledger: exists(ledger)?,
                    events: exists(events)?,
                    foreign,
                },
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

/// Redis's clock on the node of `k`'s product, ms since the epoch (the local clock when TIME
/// is not allowed or the node does not answer it).
pub async fn clock_of(redis: &RedisStore, k: &ProductKeys) -> i64 {
    let local = chrono::Utc::now().timestamp_millis();
    let clocks = node_clocks(redis).await;
    clock_for(redis, &clocks, k).unwrap_or(local)
}

fn clock_for(redis: &RedisStore, clocks: &HashMap<String, i64>, k: &ProductKeys) -> Option<i64> {
    redis
        .node_for_key(&k.stock)
        .ok()
        .and_then(|n| clocks.get(&n.addr).copied())
}
