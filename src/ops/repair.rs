//! Rewriting products' Redis books from database truth, in steps that can never move a sale;
//! shared by `fix` and `preheat` (absent keys, and `--force`).
//!
//! A product's drift has three parts, and each has a repair that is right whatever buyers do
//! meanwhile:
//! - orphaned deductions go back through `restore.lua`, idempotent per request id;
//! - live orders whose deduction Redis lost are recorded with `record.lua`, idempotent per
//!   request id, taking their units from the stock;
//! - the stock's offset from the scripts' own counters is taken away by `set_stock.lua`, which
//!   computes the offset in the same atomic step as the write: a deduction before or after it
//!   moves stock and counters alike. If the offset is not the one the console saw (a write
//!   outside the scripts meanwhile, or another console's repair), nothing is written.
//!
//! An absent stock key is written after the holdings and the ledger are rebuilt from the live
//! orders (no buyer can slip past a per-user limit in between: without the key every deduction
//! answers -1); a corrupt one is replaced by the stock the counters imply.

use super::snapshot::ProductView;
use crate::db::Db;
use crate::db::cut::{self as db_cut, Mark};
use crate::domain::ActivityId;
use crate::domain::stock::StockValue;
use crate::error::{Error, ErrorKind, Result};
use crate::redis::cut;
use crate::redis::ledger;
use crate::redis::rewrite::{
    NewStock, RecordMode, Recorded, Rewrite, SetStock, StockWrite, record, set_stock_many,
};
use crate::redis::stock::{Restored, restore_many};
use crate::redis::{ProductKeys, RedisStore};
use redis::RedisError;

/// Rewrite attempts per product when the offset moved (a `--yes` fix re-reads and retries).
pub const MAX_ATTEMPTS: u32 = 5;

/// One product to repair.
#[derive(Clone, Debug)]
pub struct Repair<'a> {
    pub view: &'a ProductView,
    /// Meta fields written with the stock (initial and limit come first, from the database).
    pub meta: Vec<(&'static str, String)>,
    pub expire_at: Option<i64>,
    /// Return the orphaned deductions and record the unledgered orders too (else only the
    /// stock and meta hash are rewritten).
    pub books: bool,
}

/// What the repair of one product did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Repaired {
    /// Units returned through the restore script, and their requests.
    pub returned_units: i64,
    pub returned: Vec<String>,
    /// Units of live orders recorded as deductions, and their requests.
    pub recorded_units: i64,
    pub recorded: Vec<String>,
    /// How the stock's rewrite changed it (0: no rewrite needed or made).
    pub change: i64,
    /// The stock right after this repair's last write; None when nothing was written.
    pub stock_after: Option<i64>,
    /// True when the stock key or meta hash was written.
    pub rewritten: bool,
    pub attempts: u32,
    /// Why the rewrite did not happen (the key moved under every attempt).
    pub conflict: Option<String>,
    /// What Redis refused for this product (it stays unrepaired).
    pub error: Option<String>,
}

impl Repaired {
    /// True when anything was written.
    pub fn applied(&self) -> bool {
        self.rewritten || self.returned_units > 0 || self.recorded_units > 0
    }
}

/// A Redis error that stops the whole repair (unreachable, timed out, no permission); other
/// errors belong to one product and are reported on it.
pub fn fatal(redis: &RedisStore, e: &RedisError) -> Option<Error> {
    let err = redis.error(e);
    matches!(err.kind, ErrorKind::Unavailable | ErrorKind::Refused).then_some(err)
}

fn meta_fields(v: &ProductView, extra: &[(&'static str, String)]) -> Vec<(&'static str, String)> {
    let mut meta = vec![
        ("initial", v.product.initial_stock.to_string()),
        ("limit", v.product.per_user_limit.to_string()),
    ];
    meta.extend(extra.iter().cloned());
    meta
}

/// True when the scripts' counters cannot be trusted (or do not exist yet) and are rebuilt
/// from the ledger.
fn counters_lost(v: &ProductView) -> bool {
    !v.cut.meta.present || v.cut.active().is_none()
}

/// Repairs every product given; `retry` re-reads a product whose offset moved and corrects
/// the new one (else that is a conflict). Errors stop the repair only when a service is
/// unavailable or refuses; what was written by then comes back with the error, so callers
/// audit it first.
pub async fn repair(
    redis: &RedisStore,
    db: &Db,
    activity: &ActivityId,
    repairs: &[Repair<'_>],
    retry: bool,
) -> std::result::Result<Vec<Repaired>, Partial> {
    let mut out: Vec<Repaired> = vec![Repaired::default(); repairs.len()];
    match steps(redis, db, activity, repairs, retry, &mut out).await {
        Ok(()) => Ok(out),
        Err(error) => Err(Partial { done: out, error }),
    }
}

async fn steps(
    redis: &RedisStore,
    db: &Db,
    activity: &ActivityId,
    repairs: &[Repair<'_>],
    retry: bool,
    out: &mut [Repaired],
) -> Result<()> {
    // Keys that nothing can deduct first: absent (rebuilt, then written) or corrupt; and a
    // stock whose counters are lost, which is rewritten with counters rebuilt from the ledger.
    let replaced: Vec<usize> = (0..repairs.len())
        .filter(|&i| {
            let v = repairs[i].view;
            v.cut.stock.value().is_none() || v.cut.active().is_none()
        })
        .collect();
    replace(redis, db, activity, repairs, &replaced, out).await?;
    // Then the books of every product whose stock is an integer now.
    let live: Vec<usize> = (0..repairs.len())
        .filter(|&i| out[i].error.is_none() && out[i].conflict.is_none())
        .collect();
    return_orphans(redis, repairs, &live, out).await?;
    record_unledgered(redis, db, activity, repairs, &live, out).await?;
    rebase(redis, repairs, &live, retry, out).await
}

/// A repair stopped by an error, with what had been done by then.
#[derive(Debug)]
pub struct Partial {
    pub done: Vec<Repaired>,
    pub error: Error,
}

/// Writes absent or corrupt stocks: where the key is absent and orders exist, the holdings and
/// ledger are rebuilt from the live orders first; then (all products in one pipeline) the
/// stock the counters imply.
async fn replace(
    redis: &RedisStore,
    db: &Db,
    activity: &ActivityId,
    repairs: &[Repair<'_>],
    which: &[usize],
    out: &mut [Repaired],
) -> Result<()> {
    let mut writes: Vec<(usize, StockWrite<'_>)> = Vec::new();
    for &i in which {
        let (r, v) = (&repairs[i], repairs[i].view);
        let missing = v.cut.stock == StockValue::Missing;
        if missing && v.cut.meta.corrupt.is_some() {
            // No deduction or return runs without the stock key, so the corrupt hash can go
            // before the rebuild (which counts into a readable one).
            delete_meta(redis, &v.keys).await?;
        }
        if missing && (v.books.live_units > 0 || !v.books.unledgered.is_empty()) {
            match rebuild(redis, db, activity, &v.keys, r.expire_at).await {
                Ok((units, rids)) => {
                    out[i].recorded_units += units;
                    out[i].recorded.extend(rids);
                }
                Err(Stop::Fatal(e)) => return Err(e),
                Err(Stop::Product(msg)) => {
                    out[i].error = Some(msg);
                    continue;
                }
            }
        }
        let mut meta = meta_fields(v, &r.meta);
        if counters_lost(v) {
            // The counters are rebuilt from what the ledger holds as active now (nothing, for
            // a product whose stream never had an event and that had no orders to rebuild).
            let fresh = v.cut.position == Some(crate::domain::events::EventId::ZERO)
                && out[i].recorded_units == 0;
            let active = if fresh {
                0
            } else {
                ledger_active_units(redis, &v.keys).await?
            };
            meta.push(("deducted", active.to_string()));
            meta.push(("returned", "0".to_string()));
        }
        writes.push((
            i,
            StockWrite {
                keys: &v.keys,
                rewrite: Rewrite::Set {
                    guard: v.cut.stock.guard(),
                    stock: NewStock::FromCounters {
                        initial: v.product.initial_stock,
                    },
                },
                reset_meta: v.cut.meta.corrupt.is_some() && !missing,
                expire_at: r.expire_at,
                meta,
            },
        ));
    }
    let calls: Vec<StockWrite<'_>> = writes.iter().map(|(_, w)| w.clone()).collect();
    let mut stop = None;
    for ((i, _), result) in writes.iter().zip(set_stock_many(redis, &calls).await) {
        let o = &mut out[*i];
        o.attempts += 1;
        match result {
            Ok(SetStock::Applied { stock, change }) => {
                o.rewritten = true;
                o.change += change;
                o.stock_after = Some(stock);
            }
            Ok(SetStock::Conflict(now)) => {
                o.conflict = Some(format!(
                    "the stock key changed while it was repaired (now {}); nothing was overwritten",
                    now.as_deref()
                        .map_or_else(|| "absent".into(), crate::domain::stock::shown)
                ));
            }
            Ok(SetStock::OffsetMoved(_)) => {
                o.error = Some("set_stock.lua answered an unexpected reply".into());
            }
            Err(e) => match fatal(redis, &e) {
                Some(err) => stop = stop.or(Some(err)),
                None => o.error = Some(crate::redis::describe(&e)),
            },
        }
    }
    stop.map_or(Ok(()), Err)
}

async fn delete_meta(redis: &RedisStore, k: &ProductKeys) -> Result<()> {
    let cmd = redis::cmd("DEL").arg(&k.meta).clone();
    redis
        .query(&k.meta, &cmd)
        .await
        .map(|_| ())
        .map_err(|e| redis.error(&e))
}

/// Units the ledger holds as active (deducted, not returned), read in HSCAN pages.
async fn ledger_active_units(redis: &RedisStore, k: &ProductKeys) -> Result<i64> {
    ledger::active_units(redis, k)
        .await
        .map(|a| a.units)
        .map_err(|e| redis.error(&e))
}

enum Stop {
    Fatal(Error),
    Product(String),
}

/// Records every live order of the product that the ledger does not hold as active, in
/// rebuild mode (the stock key is absent), walking the orders in pages. Returns the units and
/// requests recorded.
async fn rebuild(
    redis: &RedisStore,
    db: &Db,
    activity: &ActivityId,
    k: &ProductKeys,
    expire_at: Option<i64>,
) -> std::result::Result<(i64, Vec<String>), Stop> {
    let mut mark: Option<Mark> = None;
    let (mut units, mut rids) = (0, Vec::new());
    loop {
        let page = db_cut::live_page_now(db, activity, &k.product, mark.as_ref())
            .await
            .map_err(Stop::Fatal)?;
        let exhausted = page.len() < usize::try_from(db_cut::PAGE).unwrap_or(usize::MAX);
        mark = page.last().map(|o| o.mark.clone());
        let asks: Vec<&str> = page.iter().map(|o| o.request_id.as_str()).collect();
        let found = ledger::lookup_many(redis, &[(k, asks)])
            .await
            .map_err(|e| Stop::Fatal(redis.error(&e)))?
            .pop()
            .unwrap_or_default();
        let missing: Vec<(String, String, i64)> = page
            .iter()
            .zip(
                found
                    .iter()
                    .chain(std::iter::repeat(&ledger::Lookup::Absent)),
            )
            .filter(|(_, l)| l.entry().is_none_or(|e| e.returned))
            .map(|(o, _)| (o.request_id.clone(), o.user_id.clone(), o.quantity))
            .collect();
        match record(redis, k, RecordMode::Rebuild, expire_at, &missing).await {
            Ok(Recorded::Written { units: u, .. }) => {
                units += u;
                rids.extend(missing.into_iter().map(|(r, _, _)| r));
            }
            Ok(Recorded::StockMoved(kind)) => {
                return Err(Stop::Product(format!(
                    "the stock key appeared while the holdings were rebuilt (a {kind}); run fix again"
                )));
            }
            Err(e) => {
                return Err(match fatal(redis, &e) {
                    Some(err) => Stop::Fatal(err),
                    None => Stop::Product(crate::redis::describe(&e)),
                });
            }
        }
        if exhausted {
            return Ok((units, rids));
        }
    }
}

/// Returns the orphaned deductions of the products given, pipelined per node.
async fn return_orphans(
    redis: &RedisStore,
    repairs: &[Repair<'_>],
    which: &[usize],
    out: &mut [Repaired],
) -> Result<()> {
    let calls: Vec<(usize, &str)> = which
        .iter()
        .filter(|&&i| repairs[i].books)
        .flat_map(|&i| {
            repairs[i]
                .view
                .split
                .orphans
                .iter()
                .map(move |rid| (i, rid.as_str()))
        })
        .collect();
    if calls.is_empty() {
        return Ok(());
    }
    let keyed: Vec<(&ProductKeys, &str)> = calls
        .iter()
        .map(|&(i, rid)| (&repairs[i].view.keys, rid))
        .collect();
    let mut stop = None;
    for (&(i, rid), r) in calls.iter().zip(restore_many(redis, &keyed).await) {
        match r {
            Ok(Restored::Returned(n)) => {
                out[i].returned_units += n;
                out[i].returned.push(rid.to_string());
            }
            Ok(Restored::Missing) => {
                out[i].error.get_or_insert_with(|| {
                    "an orphan could not be returned while the stock key is missing; run fix again"
                        .into()
                });
            }
            // Returned meanwhile (the order's own cancel path), or no longer in the ledger.
            Ok(Restored::AlreadyReturned | Restored::Unknown | Restored::BadArgs) => {}
            Err(e) => match fatal(redis, &e) {
                Some(err) => stop = stop.or(Some(err)),
                None => {
                    out[i]
                        .error
                        .get_or_insert_with(|| crate::redis::describe(&e));
                }
            },
        }
    }
    stop.map_or(Ok(()), Err)
}

/// Records the unledgered live orders of the products given (absorb mode: their units leave
/// the stock, as the lost deductions had taken them).
async fn record_unledgered(
    redis: &RedisStore,
    db: &Db,
    activity: &ActivityId,
    repairs: &[Repair<'_>],
    which: &[usize],
    out: &mut [Repaired],
) -> Result<()> {
    for &i in which {
        let r = &repairs[i];
        if !r.books || r.view.books.unledgered.is_empty() {
            continue;
        }
        let rids: Vec<&str> = r.view.books.unledgered.keys().map(String::as_str).collect();
        let users = db_cut::users(db, activity, &rids).await?;
        let todo: Vec<(String, String, i64)> = r
            .view
            .books
            .unledgered
            .iter()
            .filter_map(|(rid, q)| Some((rid.clone(), users.get(rid)?.clone(), *q)))
            .collect();
        match record(redis, &r.view.keys, RecordMode::Absorb, r.expire_at, &todo).await {
            Ok(Recorded::Written { units, .. }) => {
                out[i].recorded_units += units;
                out[i]
                    .recorded
                    .extend(todo.into_iter().map(|(rid, _, _)| rid));
            }
            Ok(Recorded::StockMoved(kind)) => {
                out[i].error = Some(format!(
                    "the stock key is a {kind} now; the lost sales were not recorded: run fix again"
                ));
            }
            Err(e) => match fatal(redis, &e) {
                Some(err) => return Err(err),
                None => out[i].error = Some(crate::redis::describe(&e)),
            },
        }
    }
    Ok(())
}

/// Takes each product's offset from its counters away (and writes its meta fields), retrying
/// with a fresh cut when the offset moved and `retry` is set.
async fn rebase(
    redis: &RedisStore,
    repairs: &[Repair<'_>],
    which: &[usize],
    retry: bool,
    out: &mut [Repaired],
) -> Result<()> {
    // The offset each product is corrected by; products without an integer stock and readable
    // counters were replaced (or could not be) above.
    let mut todo: Vec<(usize, i64)> = which
        .iter()
        .filter(|&&i| !out[i].rewritten && out[i].error.is_none())
        .filter_map(|&i| Some((i, repairs[i].view.offset()?)))
        .filter(|&(i, x)| x != 0 || needs_meta(&repairs[i]))
        .collect();
    for attempt in 1..=MAX_ATTEMPTS {
        if todo.is_empty() {
            break;
        }
        let writes: Vec<StockWrite<'_>> = todo
            .iter()
            .map(|&(i, offset)| {
                let r = &repairs[i];
                StockWrite {
                    keys: &r.view.keys,
                    rewrite: Rewrite::Rebase {
                        initial: r.view.product.initial_stock,
                        offset,
                    },
                    reset_meta: false,
                    expire_at: r.expire_at,
                    meta: meta_fields(r.view, &r.meta),
                }
            })
            .collect();
        let results = set_stock_many(redis, &writes).await;
        let mut moved: Vec<usize> = Vec::new();
        let mut stop = None;
        for (&(i, offset), result) in todo.iter().zip(results) {
            out[i].attempts = attempt;
            match result {
                Ok(SetStock::Applied { stock, change }) => {
                    out[i].rewritten = true;
                    out[i].change += change;
                    out[i].stock_after = Some(stock);
                    out[i].conflict = None;
                }
                Ok(SetStock::OffsetMoved(now)) => {
                    out[i].conflict = Some(format!(
                        "the stock's offset from its counters changed from {offset:+} to {now:+} since it was read (a write outside the scripts, or another repair): nothing written"
                    ));
                    moved.push(i);
                }
                Ok(SetStock::Conflict(_)) => {
                    out[i].error = Some("set_stock.lua answered an unexpected reply".into());
                }
                Err(e) => match fatal(redis, &e) {
                    Some(err) => stop = stop.or(Some(err)),
                    None => out[i].error = Some(crate::redis::describe(&e)),
                },
            }
        }
        if let Some(err) = stop {
            return Err(err);
        }
        if !retry || moved.is_empty() {
            break;
        }
        // A fresh cut of just those products: the offset needs nothing else.
        let keys: Vec<ProductKeys> = moved
            .iter()
            .map(|&i| repairs[i].view.keys.clone())
            .collect();
        let cuts = cut::read(redis, &keys).await.map_err(|e| redis.error(&e))?;
        todo = moved
            .iter()
            .zip(cuts)
            .filter_map(|(&i, c)| {
                let v = repairs[i].view;
                let offset = c.stock.value()? - v.product.initial_stock + c.active()?;
                Some((i, offset))
            })
            .collect();
    }
    Ok(())
}

/// True when the meta hash lacks what the repair writes (a changed limit or initial stock, an
/// expiry to set), so a zero offset still calls for a write.
fn needs_meta(r: &Repair<'_>) -> bool {
    let m = &r.view.cut.meta;
    m.limit != Some(r.view.product.per_user_limit)
        || m.initial != Some(r.view.product.initial_stock)
        || (r.expire_at.is_some() && m.expire_at != r.expire_at)
}
