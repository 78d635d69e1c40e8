//! The repair of products whose every piece is there. Each part of the drift has its own
//! write, each right whatever buyers do meanwhile:
//! 1. orphaned deductions go back through `restore.lua` (idempotent per request id), each
//!    checked in the database at that moment: one whose order turned out live is left alone
//!    and the product read again;
//! 2. live orders whose deduction Redis lost are recorded with `record.lua` (their units leave
//!    the stock, or come from units a rebuild held back for them);
//! 3. the stock's offset from the scripts' own counters is taken away by `set_stock.lua`,
//!    which computes it in the same atomic step as the write, with the units held back past
//!    their window put back on sale and the meta fields the database says.
//!
//! The record and the rewrite carry the meta `rev` the console read: another console's write
//! in between makes them a conflict.

use super::rebuild::database_fields;
use super::{MAX_ATTEMPTS, Outcome, Settings, Target, fatal};
use crate::db::{cut as db_cut, orders};
use crate::error::Result;
use crate::ops::snapshot::ProductView;
use crate::redis::cut;
use crate::redis::rewrite::{
    Held, RecordMode, Recorded, Rewrite, SetStock, StockWrite, record, set_stock_many,
};
use crate::redis::stock::{Restored, restore_many};

/// Heals the products `which` (indexes into `outcomes`).
pub async fn run(
    t: &Target<'_>,
    outcomes: &mut [Outcome],
    which: &[usize],
    settings: &(dyn Fn(&ProductView) -> Settings + Sync),
) -> Result<()> {
    if which.is_empty() {
        return Ok(());
    }
    let plans: Vec<(usize, Settings)> = which
        .iter()
        .map(|&i| (i, settings(&outcomes[i].last)))
        .collect();
    return_orphans(t, outcomes, &plans).await?;
    let mut revs: Vec<Option<Vec<u8>>> = Vec::with_capacity(plans.len());
    for (i, s) in &plans {
        revs.push(record_lost_sales(t, &mut outcomes[*i], s).await?);
    }
    rebase(t, outcomes, &plans, revs).await
}

/// Returns the orphaned deductions of the products given, pipelined per node, each only once
/// the database says its order is absent or dead now.
async fn return_orphans(
    t: &Target<'_>,
    outcomes: &mut [Outcome],
    plans: &[(usize, Settings)],
) -> Result<()> {
    let mut calls: Vec<(usize, String)> = Vec::new();
    for (i, s) in plans {
        if s.books {
            calls.extend(
                outcomes[*i]
                    .last
                    .split
                    .orphans
                    .iter()
                    .map(|rid| (*i, rid.clone())),
            );
        }
    }
    if calls.is_empty() {
        return Ok(());
    }
    // The orders as they are now, not as the snapshot saw them: two changes the books missed
    // can cancel out in a sum, never in a lookup of the request itself.
    let rids: Vec<&str> = calls.iter().map(|(_, r)| r.as_str()).collect();
    let now = orders::statuses(t.db, t.activity, &rids).await?;
    // Only an order of the same product backs its deduction: a request id used on two
    // products has one order, and the other product's deduction is an orphan to return.
    calls.retain(|(i, rid)| {
        let product = outcomes[*i].last.product.product_id.as_str();
        match now.get(rid) {
            Some(order) if order.live_in(product) => {
                outcomes[*i].done.again = true;
                false
            }
            _ => true,
        }
    });
    let keyed: Vec<(&crate::redis::ProductKeys, &str)> = calls
        .iter()
        .map(|(i, rid)| (&outcomes[*i].last.keys, rid.as_str()))
        .collect();
    let replies = restore_many(t.redis, &keyed).await;
    drop(keyed);
    let mut stop = None;
    for ((i, rid), r) in calls.iter().zip(replies) {
        let d = &mut outcomes[*i].done;
        match r {
            Ok(Restored::Returned(n)) => {
                d.returned_units += n;
                d.returned.push(rid.clone());
            }
            // Returned meanwhile (the order's own cancel path).
            Ok(Restored::AlreadyReturned) => {}
            Ok(Restored::Missing) => d.again = true,
            // The counters hold units whose ledger entry is gone: a rebuild holds them back
            // until their window has passed, then puts them back on sale.
            Ok(Restored::Unknown) => {
                d.again = true;
                d.rebuild_next = true;
            }
            Ok(Restored::BadArgs) => {
                d.error.get_or_insert_with(|| {
                    format!("restore.lua refused the request id '{rid}' as a bad argument")
                });
            }
            Err(e) => match fatal(t.redis, &e) {
                Some(err) => stop = stop.or(Some(err)),
                None => {
                    d.error.get_or_insert_with(|| crate::redis::describe(&e));
                }
            },
        }
    }
    stop.map_or(Ok(()), Err)
}

/// Records the unledgered live orders of one product; returns the meta `rev` the next write
/// must carry (None: the product stops here).
async fn record_lost_sales(
    t: &Target<'_>,
    o: &mut Outcome,
    s: &Settings,
) -> Result<Option<Vec<u8>>> {
    let v = &o.last;
    let rev = v.cut.meta.rev_raw.clone();
    if o.done.error.is_some() || o.done.again || !s.books || v.books.unledgered.is_empty() {
        return Ok(Some(rev));
    }
    let rids: Vec<&str> = v.books.unledgered.keys().map(String::as_str).collect();
    let users = db_cut::users(t.db, t.activity, &rids).await?;
    let todo: Vec<(String, String, i64)> = v
        .books
        .unledgered
        .iter()
        .filter_map(|(rid, q)| Some((rid.clone(), users.get(rid)?.clone(), *q)))
        .collect();
    let (claim, fresh) = split_claims(t, v, todo).await?;
    let mut rev = Some(rev);
    for (batch, claim) in [(fresh, false), (claim, true)] {
        let Some(r) = rev.take() else { break };
        if batch.is_empty() {
            rev = Some(r);
            continue;
        }
        let mode = RecordMode::Absorb { rev: r, claim };
        let before = o.done.recorded_units;
        rev = record_batch(t, o, mode, s.expire_at, batch).await?;
        if !claim {
            o.done.forgotten += o.done.recorded_units - before;
        }
    }
    Ok(rev)
}

/// Which recorded orders may claim the units a rebuild declared unexplained (deductions the
/// counters hold without a ledger entry) and which count afresh. Only a deduction the event
/// stream shows standing, up to the cut, was held by the counters; one the stream does not
/// show (forgotten by a restart from an older snapshot, its order alive) claims nothing, or it
/// would take the unit of another buyer's deduction still on its way. A deduction named
/// before the rebuild's marker claims too: every deduction a rebuild held back was made before
/// it (asking for each to be named after the marker left every one unclaimed, and each landed
/// order took a second unit and a second count of its buyer's limit). Without a readable
/// stream nothing claims: a unit counted twice is held back until its window has passed,
/// never sold twice.
async fn split_claims(
    t: &Target<'_>,
    v: &crate::ops::snapshot::ProductView,
    todo: Vec<(String, String, i64)>,
) -> Result<(Vec<(String, String, i64)>, Vec<(String, String, i64)>)> {
    // Nothing held back: none of them was held by the counters (each is a deduction Redis
    // forgot, or an order written without one).
    if v.cut.meta.unexplained <= 0 {
        return Ok((Vec::new(), todo));
    }
    let standing = match v.cut.position.filter(|_| v.cut.keys.events) {
        Some(until) => {
            let asks: std::collections::HashSet<&str> =
                todo.iter().map(|(r, _, _)| r.as_str()).collect();
            crate::redis::events::standing(t.redis, &v.keys, (&asks, false), until)
                .await
                .map_err(|e| t.redis.error(&e))?
        }
        None => None,
    };
    let held = standing.unwrap_or_default();
    Ok(todo.into_iter().partition(|(rid, _, _)| held.contains(rid)))
}

/// One `record.lua` run over `todo`; the `rev` after it (None: the product stops here).
async fn record_batch(
    t: &Target<'_>,
    o: &mut Outcome,
    mode: RecordMode,
    expire_at: Option<i64>,
    todo: Vec<(String, String, i64)>,
) -> Result<Option<Vec<u8>>> {
    let d = &mut o.done;
    match record(t.redis, &o.last.keys, mode, expire_at, &todo).await {
        Ok(Recorded::Written { units, rev, .. }) => {
            d.recorded_units += units;
            d.recorded.extend(todo.into_iter().map(|(rid, _, _)| rid));
            Ok(Some(rev.to_string().into_bytes()))
        }
        Ok(Recorded::StockMoved(_)) => {
            d.again = true;
            Ok(None)
        }
        Ok(Recorded::Held(h)) => {
            held(d, h);
            Ok(None)
        }
        Err(e) => match fatal(t.redis, &e) {
            Some(err) => Err(err),
            None => {
                d.error = Some(crate::redis::describe(&e));
                Ok(None)
            }
        },
    }
}

fn held(d: &mut super::Repaired, h: Held) {
    match h {
        // A piece vanished since the read: read again (the plan becomes a rebuild).
        Held::Lost(_) => d.again = true,
        other => d.conflict = Some(other.shown()),
    }
}

/// True when the heal recorded live orders whose deductions Redis forgot (the stream does not
/// show them: not a rebuild's held-back units being claimed).
fn rolled_back(o: &Outcome) -> bool {
    o.done.forgotten > 0
}

/// Takes each product's offset from its counters away, puts held-back units past their window
/// back on sale and writes the meta fields; a moved offset is read again and retried when the
/// target allows (same `rev`: a write outside the scripts, not another console).
async fn rebase(
    t: &Target<'_>,
    outcomes: &mut [Outcome],
    plans: &[(usize, Settings)],
    revs: Vec<Option<Vec<u8>>>,
) -> Result<()> {
    // (product, offset, units to release, rev guard, settings)
    let mut todo: Vec<(usize, i64, i64, Vec<u8>, &Settings)> = Vec::new();
    for ((i, s), rev) in plans.iter().zip(revs) {
        let o = &outcomes[*i];
        let (Some(rev), None, false) = (rev, &o.done.error, o.done.again) else {
            continue;
        };
        if o.done.conflict.is_some() {
            continue;
        }
        let v = &o.last;
        let Some(offset) = v.offset() else {
            continue;
        };
        let release = if !s.books {
            0
        } else if rolled_back(o) {
            // Live orders Redis held no deduction for are the mark of a rollback (a restart
            // from an older snapshot, a failover that lost writes): other deductions it forgot
            // may have orders still on their way. What the stock would gain (a top-up lost with
            // the snapshot) is held back until they had the grace window to land, and so is
            // what an earlier hold kept: given at once, it sold 16 units of a 15-unit product.
            offset.min(0)
        } else {
            v.split.release
        };
        let meta_needed = super::meta_differs(&v.product, &v.cut.meta)
            || (s.expire_at.is_some() && v.cut.meta.expire_at != s.expire_at)
            || !s.meta.is_empty();
        if offset != 0 || release != 0 || meta_needed {
            todo.push((*i, offset, release, rev, s));
        }
    }
    for attempt in 1..=MAX_ATTEMPTS {
        if todo.is_empty() {
            break;
        }
        let writes: Vec<StockWrite<'_>> = todo
            .iter()
            .map(|(i, offset, release, rev, s)| {
                let v = &outcomes[*i].last;
                let mut meta = database_fields(&v.product, &v.cut.meta);
                meta.extend(s.meta.iter().cloned());
                if *release < 0 {
                    // The hold counts from now, whatever an earlier one said (its units go
                    // back together, after the latest orders had their window).
                    meta.push(("unexplained_since", v.cut.now_ms.to_string()));
                }
                StockWrite {
                    keys: &v.keys,
                    rewrite: Rewrite::Rebase {
                        initial: v.product.initial_stock,
                        offset: *offset,
                        release: *release,
                    },
                    reset_meta: false,
                    expire_at: s.expire_at,
                    rev: rev.clone(),
                    token: None,
                    meta,
                }
            })
            .collect();
        let results = set_stock_many(t.redis, &writes).await;
        drop(writes);
        let mut moved: Vec<usize> = Vec::new();
        let mut stop = None;
        for (k, result) in results.into_iter().enumerate() {
            let (i, offset, release, _, _) = &todo[k];
            let d = &mut outcomes[*i].done;
            d.attempts = attempt;
            match result {
                Ok(SetStock::Applied { stock, change, .. }) => {
                    d.rewritten = true;
                    d.rebased = true;
                    d.change += change;
                    d.rebase_change += change;
                    d.released += release.max(&0);
                    d.held += (-release).max(0);
                    d.stock_after = Some(stock);
                    d.conflict = None;
                }
                Ok(SetStock::OffsetMoved(now)) => {
                    d.conflict = Some(format!(
                        "the stock's offset from its counters changed from {offset:+} to {now:+} since it was read (a write outside the scripts): nothing written"
                    ));
                    moved.push(k);
                }
                Ok(SetStock::Held(h)) => held(d, h),
                Ok(SetStock::Conflict(_)) => {
                    d.error = Some("set_stock.lua answered an unexpected reply".into());
                }
                Err(e) => match fatal(t.redis, &e) {
                    Some(err) => stop = stop.or(Some(err)),
                    None => d.error = Some(crate::redis::describe(&e)),
                },
            }
        }
        if let Some(err) = stop {
            return Err(err);
        }
        if !t.retry || moved.is_empty() {
            break;
        }
        // A fresh cut of just those products: the offset needs nothing else. Another
        // console's write since (a new rev) is a conflict, not something to correct again.
        let keys: Vec<crate::redis::ProductKeys> = moved
            .iter()
            .map(|&k| outcomes[todo[k].0].last.keys.clone())
            .collect();
        let cuts = cut::read(t.redis, &keys)
            .await
            .map_err(|e| t.redis.error(&e))?;
        let mut next = Vec::new();
        for (k, c) in moved.into_iter().zip(cuts) {
            let (i, _, release, rev, s) = todo[k].clone();
            if c.meta.rev_raw != rev {
                continue;
            }
            let v = &outcomes[i].last;
            if let Some(offset) = c.offset(v.product.initial_stock) {
                next.push((i, offset, release, rev, s));
            }
        }
        todo = next;
    }
    Ok(())
}
