//! The rebuild of products that lost a piece of their evidence. Under a hold (`freeze.lua`:
//! the stock key goes, so nothing sells and nothing returns while the pieces are incomplete):
//! 1. every live order the ledger lacks gets its entry (`record.lua` rebuild mode);
//! 2. the whole ledger is read: the active units, per user;
//! 3. a lost buyers hash is written back from those sums (`holdings.lua`);
//! 4. the counters become what the ledger names, or, where they hold more (entries of
//!    deductions whose orders have not landed, lost with the ledger), they keep it and the
//!    difference is declared `unexplained`: out of the stock until those orders had the grace
//!    window to land;
//! 5. `set_stock.lua` writes the meta hash, the witnesses and, last, the stock, ending the
//!    hold. A console that dies half way leaves the stock missing: nothing can sell twice, and
//!    the next fix or preheat takes the hold over.
//!
//! A product with nothing at all in Redis and no orders (a first preheat) is written in one
//! call: there is nothing to rebuild.

use super::{Outcome, Rebuilt, Settings, Target, fatal, pause_fields};
use crate::db::cut::{self as db_cut, Mark};
use crate::domain::events::EventId;
use crate::domain::meta::Piece;
use crate::domain::stock::StockValue;
use crate::error::Result;
use crate::redis::ProductKeys;
use crate::redis::ledger;
use crate::redis::rewrite::{
    FirstWrite, Frozen, NewStock, RecordMode, Recorded, Rewrite, SetStock, StockWrite,
    first_write_many, freeze_many, record, set_stock_many, write_holdings,
};

/// Rebuilds the products `which` (index into `outcomes`, and why), all under `token`.
pub async fn run(
    t: &Target<'_>,
    outcomes: &mut [Outcome],
    which: &[(usize, String)],
    token: &str,
    settings: &(dyn Fn(&crate::ops::snapshot::ProductView) -> Settings + Sync),
) -> Result<()> {
    if which.is_empty() {
        return Ok(());
    }
    let fresh: Vec<&(usize, String)> = which
        .iter()
        .filter(|(i, _)| is_fresh(&outcomes[*i].last))
        .collect();
    let held: Vec<&(usize, String)> = which
        .iter()
        .filter(|(i, _)| !is_fresh(&outcomes[*i].last))
        .collect();
    write_fresh(t, outcomes, &fresh, settings).await?;
    let asks: Vec<(&ProductKeys, Vec<u8>, Vec<u8>)> = held
        .iter()
        .map(|(i, _)| {
            let c = &outcomes[*i].last.cut;
            (
                &outcomes[*i].last.keys,
                c.stock.guard(),
                c.meta.rev_raw.clone(),
            )
        })
        .collect();
    let replies = freeze_many(t.redis, token, &asks).await;
    drop(asks);
    let mut stop = None;
    let mut frozen: Vec<(usize, String, i64)> = Vec::new();
    for ((i, why), reply) in held.iter().zip(replies) {
        let d = &mut outcomes[*i].done;
        d.attempts += 1;
        match reply {
            Ok(Frozen::Held { rev }) => frozen.push((*i, why.clone(), rev)),
            Ok(Frozen::Conflict(now)) => {
                d.conflict = Some(format!(
                    "the stock key changed since it was read (now {}): nothing written",
                    now.as_deref()
                        .map_or_else(|| "absent".into(), crate::domain::stock::shown)
                ));
            }
            Ok(Frozen::Busy(h)) => d.conflict = Some(h.shown()),
            Err(e) => match fatal(t.redis, &e) {
                Some(err) => stop = stop.or(Some(err)),
                None => d.error = Some(crate::redis::describe(&e)),
            },
        }
    }
    for (i, why, rev) in frozen {
        // Once held, a product is rebuilt to its end or left held (stock missing): never
        // reopened half rebuilt.
        if stop.is_some() {
            break;
        }
        let o = &mut outcomes[i];
        let s = settings(&o.last);
        if let Err(e) = rebuild_one(t, o, (&why, rev, token), &s).await {
            stop = Some(e);
        }
    }
    stop.map_or(Ok(()), Err)
}

/// A product with nothing in Redis at all, no orders and no history: written in one call.
fn is_fresh(v: &crate::ops::snapshot::ProductView) -> bool {
    let c = &v.cut;
    let lost = c.lost();
    c.stock == StockValue::Missing
        && [Piece::Meta, Piece::Buyers, Piece::Ledger, Piece::Events]
            .iter()
            .all(|p| lost.contains(p))
        && c.position.unwrap_or(EventId::ZERO) == EventId::ZERO
        && v.books.live_units == 0
        && v.books.unledgered.is_empty()
}

async fn write_fresh(
    t: &Target<'_>,
    outcomes: &mut [Outcome],
    which: &[&(usize, String)],
    settings: &(dyn Fn(&crate::ops::snapshot::ProductView) -> Settings + Sync),
) -> Result<()> {
    if which.is_empty() {
        return Ok(());
    }
    let plans: Vec<(usize, Settings)> = which
        .iter()
        .map(|(i, _)| (*i, settings(&outcomes[*i].last)))
        .collect();
    // One light call each (`first.lua`): it writes only while none of the product's keys
    // exists. A product whose cut reads as empty but holds a key all the same (a meta hash of
    // fields the cut does not read, left by a top-up of a flushed product) takes the general
    // write of the same values, `set_stock.lua`, whose guards are what the cut read.
    let writes: Vec<FirstWrite<'_>> = plans
        .iter()
        .map(|(i, s)| {
            let v = &outcomes[*i].last;
            FirstWrite {
                keys: &v.keys,
                stock: v.product.initial_stock,
                expire_at: s.expire_at,
                meta: first_fields(v, s),
            }
        })
        .collect();
    let results = first_write_many(t.redis, &writes).await;
    drop(writes);
    let mut stop = None;
    let mut general: Vec<&(usize, Settings)> = Vec::new();
    for (plan, r) in plans.iter().zip(results) {
        if matches!(r, Ok(SetStock::Conflict(_))) {
            general.push(plan);
            continue;
        }
        fresh_outcome(t, &mut outcomes[plan.0].done, r, &mut stop);
    }
    let writes: Vec<StockWrite<'_>> = general
        .iter()
        .map(|(i, s)| {
            let v = &outcomes[*i].last;
            let mut meta = database_fields(&v.product, &v.cut.meta);
            meta.extend([
                ("deducted", "0".to_string()),
                ("returned", "0".to_string()),
                ("unexplained", "0".to_string()),
            ]);
            meta.extend(s.meta.iter().cloned());
            StockWrite {
                keys: &v.keys,
                rewrite: Rewrite::Set {
                    guard: b"!".to_vec(),
                    stock: NewStock::FromCounters {
                        initial: v.product.initial_stock,
                    },
                },
                reset_meta: false,
                expire_at: s.expire_at,
                // What was read (empty, or the trace a top-up left): a top-up or another
                // preheat since then makes this write a conflict, read again.
                rev: v.cut.meta.rev_raw.clone(),
                token: None,
                meta,
            }
        })
        .collect();
    let results = set_stock_many(t.redis, &writes).await;
    drop(writes);
    for ((i, _), r) in general.iter().zip(results) {
        fresh_outcome(t, &mut outcomes[*i].done, r, &mut stop);
    }
    stop.map_or(Ok(()), Err)
}

/// The meta fields of a first write: the database's, `deducted` 0 and the caller's. A field
/// that reads as 0 when absent is left out: every product carries each one it holds until the
/// sale's keys expire.
fn first_fields(
    v: &crate::ops::snapshot::ProductView,
    s: &Settings,
) -> Vec<(&'static str, String)> {
    let mut meta = database_fields(&v.product, &v.cut.meta);
    meta.push(("deducted", "0".to_string()));
    meta.extend(s.meta.iter().cloned());
    let set = |name: &str| meta.iter().any(|(f, v)| *f == name && v != "0");
    if !set("paused") && !set("pause_gen") {
        meta.retain(|(f, _)| *f != "paused" && *f != "pause_gen");
    }
    meta
}

/// What a fresh product's write did, on its outcome.
fn fresh_outcome(
    t: &Target<'_>,
    d: &mut super::Repaired,
    r: redis::RedisResult<SetStock>,
    stop: &mut Option<crate::error::Error>,
) {
    d.attempts += 1;
    match r {
        Ok(SetStock::Applied { stock, change, .. }) => {
            d.rewritten = true;
            d.change += change;
            d.stock_after = Some(stock);
        }
        Ok(SetStock::Conflict(_)) | Ok(SetStock::Held(_)) | Ok(SetStock::OffsetMoved(_)) => {
            // Someone wrote it meanwhile (another preheat): read it again.
            d.again = true;
        }
        Err(e) => match fatal(t.redis, &e) {
            Some(err) => {
                stop.get_or_insert(err);
            }
            None => d.error = Some(crate::redis::describe(&e)),
        },
    }
}

/// The meta fields every write of a product carries from the database: initial stock, limit,
/// the sale window and the operator's pause.
pub fn database_fields(
    p: &crate::domain::Product,
    m: &crate::domain::meta::Meta,
) -> Vec<(&'static str, String)> {
    let mut out = vec![
        ("initial", p.initial_stock.to_string()),
        ("limit", p.per_user_limit.to_string()),
    ];
    // The sale window `deduct.lua` enforces: kept by every repair, as the limit is.
    if let Some(w) = &p.window {
        out.push(("opens", w.opens_ms.to_string()));
        out.push(("closes", w.closes_ms.to_string()));
    }
    out.extend(pause_fields(p, m));
    out
}

/// Rebuilds one held product; product-level trouble goes on its row, a service failure stops
/// the repair.
async fn rebuild_one(
    t: &Target<'_>,
    o: &mut Outcome,
    (why, rev, token): (&str, i64, &str),
    s: &Settings,
) -> Result<()> {
    let v = &o.last;
    let d = &mut o.done;
    let mut rebuilt = Rebuilt {
        before: v
            .cut
            .meta
            .frozen
            .as_ref()
            .map(|f| f.value.clone())
            .filter(|b| !b.is_empty())
            .map(|b| crate::domain::stock::shown(&b))
            .or_else(|| v.cut.stock.shown()),
        why: why.to_string(),
        ..Rebuilt::default()
    };
    // 1. The ledger entries of live orders it lacks.
    let recorded = match record_live_orders(t, &v.keys, token, s.expire_at).await? {
        Ok(r) => r,
        Err(why) => {
            d.error = Some(why);
            return Ok(());
        }
    };
    rebuilt.entries = i64::try_from(recorded.orders.len()).unwrap_or(i64::MAX);
    d.recorded_units += recorded.units;
    d.recorded
        .extend(recorded.orders.iter().map(|(rid, _, _)| rid.clone()));
    // 2. The whole ledger.
    let totals = ledger::totals(t.redis, &v.keys)
        .await
        .map_err(|e| t.redis.error(&e))?;
    if let Some((rid, raw)) = totals.unreadable.first() {
        d.error = Some(format!(
            "the ledger entry of request {rid} is not a ledger record ('{}'): the rebuild cannot count it, so the product stays held (its stock missing) until it is set right by hand (see the README, \"Unreadable entries\"); then fix again",
            crate::domain::stock::shown(raw)
        ));
        return Ok(());
    }
    // 3. Which of the recorded deductions the counters never held (forgotten by a restart
    // from an older snapshot while their orders lived on), and so the units held in all: the
    // counters' units plus those, never fewer than the ledger names. Units the counters hold
    // beyond what the ledger names are declared `unexplained`: out of the stock until their
    // orders had the grace window to land.
    let holdings_now = if v.cut.keys.buyers {
        Some(
            ledger::holdings(t.redis, &v.keys)
                .await
                .map_err(|e| t.redis.error(&e))?,
        )
    } else {
        None
    };
    let unheld = unheld_by_counters(t, v, &recorded, &totals, holdings_now.as_ref()).await?;
    let unheld_units: i64 = unheld.values().sum();
    let active = counters_before(v, holdings_now.as_ref()).map_or(totals.active, |b| {
        b.saturating_add(unheld_units).max(totals.active)
    });
    let unexplained = active - totals.active;
    // With the buyers hash lost, the units nobody can name have buyers nobody can name: each
    // would be rebuilt holding nothing and could buy past the limit. Until those orders had
    // their window the whole stock is held back with them (a later fix puts back what no order
    // claimed), so no limit is passed; the fix says so.
    let limits_held = holdings_now.is_none() && unexplained > 0;
    let (active, unexplained) = if limits_held {
        let left = v.product.initial_stock.saturating_sub(active).max(0);
        (
            active.saturating_add(left),
            unexplained.saturating_add(left),
        )
    } else {
        (active, unexplained)
    };
    // 4. The holdings: a lost buyers hash from what the ledger holds per user; a surviving one
    // corrected to it when the ledger names every held unit; else (units nobody can name) the
    // surviving holdings are the only record of whose those are: they stay, raised by the
    // deductions they never counted and never below the ledger.
    let holdings = match &holdings_now {
        None => totals
            .per_user
            .iter()
            .map(|(u, n)| (u.clone(), *n))
            .collect(),
        Some(now) if unexplained == 0 => holdings_to_correct(&totals.per_user, now),
        Some(now) => holdings_to_raise(&totals.per_user, &unheld, now),
    };
    if !holdings.is_empty() {
        match write_holdings(t.redis, &v.keys, token, &holdings)
            .await
            .map_err(|e| t.redis.error(&e))?
        {
            Ok(n) => rebuilt.holdings = n,
            Err(h) => {
                d.conflict = Some(h.shown());
                return Ok(());
            }
        }
    }
    // 5. The counters: what the ledger names, plus what is held back.
    // The units held back count from now: whatever a rebuild declares unexplained may include
    // a deduction made a moment before the cut (its ledger entry lost with the ledger, its order
    // still on its way), and the held-back units go back on sale together. Keeping an earlier
    // rebuild's time would release that deduction's unit before its order had its window
    // (chaos seed 932768: an oversell); holding too long only delays a sale.
    let since = v.cut.now_ms;
    let mut meta = database_fields(&v.product, &v.cut.meta);
    meta.extend([
        ("deducted", active.to_string()),
        ("returned", "0".to_string()),
        ("unexplained", unexplained.to_string()),
        ("unexplained_since", since.to_string()),
        // A rebuild's hold is for deductions the counters hold, never for forgotten ones.
        ("unexplained_rollback", "0".to_string()),
        (
            "unexplained_held",
            if unexplained_in_holdings(v) { "1" } else { "0" }.to_string(),
        ),
    ]);
    meta.extend(s.meta.iter().cloned());
    // 6. The stock, last.
    let write = StockWrite {
        keys: &v.keys,
        rewrite: Rewrite::Set {
            guard: b"!".to_vec(),
            stock: NewStock::FromCounters {
                initial: v.product.initial_stock,
            },
        },
        reset_meta: v.cut.meta.corrupt.is_some(),
        expire_at: s.expire_at,
        rev: rev.to_string().into_bytes(),
        token: Some(token.to_string()),
        meta,
    };
    let reply = set_stock_many(t.redis, std::slice::from_ref(&write))
        .await
        .pop();
    match reply {
        Some(Ok(SetStock::Applied { stock, change, .. })) => {
            d.rewritten = true;
            d.change += change;
            d.stock_after = Some(stock);
            rebuilt.active = active;
            rebuilt.unexplained = unexplained;
            rebuilt.limits_held = limits_held;
            d.rebuilt = Some(rebuilt);
            // Read again and heal: orphans, lost sales, what the rebuild held back.
            d.again = true;
        }
        Some(Ok(SetStock::Held(h))) => d.conflict = Some(h.shown()),
        Some(Ok(other)) => {
            d.error = Some(format!(
                "set_stock.lua answered {other:?} at the end of a rebuild: the product stays held (its stock missing); fix again"
            ));
        }
        Some(Err(e)) => match fatal(t.redis, &e) {
            Some(err) => return Err(err),
            None => d.error = Some(crate::redis::describe(&e)),
        },
        None => d.error = Some("set_stock.lua was not sent".into()),
    }
    Ok(())
}

/// The holdings that differ from what the ledger holds per user (`want`), as writes: the
/// ledger's figure, or 0 (removed) for a buyer the ledger names nowhere.
fn holdings_to_correct(
    want: &std::collections::HashMap<Vec<u8>, i64>,
    now: &std::collections::HashMap<Vec<u8>, Option<i64>>,
) -> Vec<(Vec<u8>, i64)> {
    let mut out: Vec<(Vec<u8>, i64)> = want
        .iter()
        .filter(|(u, n)| now.get(*u) != Some(&Some(**n)))
        .map(|(u, n)| (u.clone(), *n))
        .collect();
    out.extend(
        now.keys()
            .filter(|u| !want.contains_key(*u))
            .map(|u| (u.clone(), 0)),
    );
    out
}

/// Whether the holdings include the units the rebuild declares unexplained: only when the
/// buyers hash survived and every unit held back before was in it too. Units held back by an
/// earlier rebuild that wrote the holdings from the ledger are in no holding; claiming them as
/// held would let their buyer past the limit, while counting them again only holds one back.
fn unexplained_in_holdings(v: &crate::ops::snapshot::ProductView) -> bool {
    let m = &v.cut.meta;
    v.cut.keys.buyers && (m.unexplained <= 0 || m.unexplained_held)
}

/// The holdings to write when units are held that nobody can name: each buyer's surviving
/// holding plus the recorded deductions it never counted (`unheld`), never below what the
/// ledger names for them; a holding only ever rises here (one too high refuses a buyer, one
/// too low lets them past the limit).
fn holdings_to_raise(
    ledger: &std::collections::HashMap<Vec<u8>, i64>,
    unheld: &std::collections::HashMap<Vec<u8>, i64>,
    now: &std::collections::HashMap<Vec<u8>, Option<i64>>,
) -> Vec<(Vec<u8>, i64)> {
    let users: std::collections::HashSet<&Vec<u8>> = ledger.keys().chain(unheld.keys()).collect();
    users
        .into_iter()
        .filter_map(|u| {
            let have = now.get(u).copied().flatten();
            let want = have
                .unwrap_or(0)
                .max(0)
                .saturating_add(unheld.get(u).copied().unwrap_or(0))
                .max(ledger.get(u).copied().unwrap_or(0));
            (have != Some(want)).then(|| (u.clone(), want))
        })
        .collect()
}

/// The active units the counters held before the rebuild, when anything readable says so: the
/// counters, the stock the hold kept against the initial stock and the surviving holdings'
/// sum, the largest of them (a stray write may have lowered either of the first two, a lost
/// meta hash takes the counters with it: the buyers hash still counts every unit deducted and
/// not returned; holding too much only delays a sale).
///
/// With another meta field unreadable (a `limit` of `1.5`), the counters still say exactly
/// what is held (`deducted - returned`): taking `deducted` alone held back every unit returned,
/// off sale until a second fix, and on a sold-out product drove the stock below zero (a false
/// oversell). With a counter itself unreadable (a corrupt `returned`, say), a readable
/// `deducted` still counts: the units deducted are at least the units held, so taking them
/// holds back a unit an in-flight deduction may own (whose ledger entry went with the ledger)
/// rather than selling it twice; what no order claims goes back on sale once the grace window
/// has passed.
fn counters_before(
    v: &crate::ops::snapshot::ProductView,
    holdings_now: Option<&std::collections::HashMap<Vec<u8>, Option<i64>>>,
) -> Option<i64> {
    let m = &v.cut.meta;
    let counters = v
        .cut
        .active()
        .or_else(|| {
            let readable = if m.counters_unreadable {
                m.deducted
            } else {
                m.deducted.and(m.active_units())
            };
            m.corrupt.as_ref().and(readable).map(|d| d.max(0))
        })
        .filter(|_| m.present);
    let from_stock = v
        .cut
        .meta
        .frozen
        .as_ref()
        .and_then(|f| f.stock())
        .or_else(|| v.cut.stock.value())
        .map(|stock| {
            let initial = v.cut.meta.initial.unwrap_or(v.product.initial_stock);
            initial.saturating_sub(stock).max(0)
        });
    // A holding that is not an integer counts nothing here: the others still bound it.
    let by_holdings = holdings_now.map(|h| {
        h.values()
            .flatten()
            .fold(0i64, |sum, n| sum.saturating_add((*n).max(0)))
    });
    [counters, from_stock, by_holdings]
        .into_iter()
        .flatten()
        .max()
}

/// The recorded deductions (live orders the ledger lacked) the counters never held, in units
/// per buyer. Taken from the best evidence left: the event stream, request by request, when it
/// names each of them after its last rebuild marker (a stream rolled back with the counters
/// forgot them too; a deleted event only makes a unit count twice, which holds it back, never
/// sells it twice; a stream rebuilt after a loss knows nothing before its marker); else the
/// buyers hash, per buyer (a holding short of a buyer's recorded orders never counted them: it
/// holds another lost deduction of theirs; one that covers them all may still, which nothing
/// left can tell apart);
/// else, with the ledger there, all of them (the ledger and the counters are written together:
/// an entry the ledger lacks is one the counters lack); else none (the counters are all that
/// is left).
async fn unheld_by_counters(
    t: &Target<'_>,
    v: &crate::ops::snapshot::ProductView,
    recorded: &RecordedOrders,
    totals: &ledger::LedgerTotals,
    holdings_now: Option<&std::collections::HashMap<Vec<u8>, Option<i64>>>,
) -> Result<std::collections::HashMap<Vec<u8>, i64>> {
    let mut out: std::collections::HashMap<Vec<u8>, i64> = std::collections::HashMap::new();
    if recorded.orders.is_empty() {
        return Ok(out);
    }
    let mut add = |u: &[u8], n: i64| {
        if n > 0 {
            let e = out.entry(u.to_vec()).or_insert(0);
            *e = e.saturating_add(n);
        }
    };
    // The stream as it stood at the cut: the rebuild's own bookings (step 1) come after.
    if let Some(until) = v.cut.position.filter(|_| v.cut.keys.events) {
        let asks: std::collections::HashSet<&str> =
            recorded.orders.iter().map(|(r, _, _)| r.as_str()).collect();
        let standing = crate::redis::events::standing(t.redis, &v.keys, (&asks, true), until)
            .await
            .map_err(|e| t.redis.error(&e))?;
        if let Some(held) = standing {
            for (rid, uid, q) in &recorded.orders {
                if !held.contains(rid) {
                    add(uid.as_bytes(), *q);
                }
            }
            return Ok(out);
        }
        // The stream is silent on some of them after its marker. The counters hold the
        // marker's units plus what the stream names since: when those account for every unit
        // the counters hold, none of them came from before the marker, so no recorded order's
        // can be among them, whatever a surviving holding says (a holding of a deduction made
        // since, its ledger entry lost, was taken for a forgotten order's: that unit sold
        // twice; chaos test, a failover that lost deductions whose orders then landed).
        let since = crate::redis::events::units_since_marker(t.redis, &v.keys, until)
            .await
            .map_err(|e| t.redis.error(&e))?;
        if let (Some(since), Some(counters)) = (since, counters_before(v, None))
            && counters <= since
        {
            for (_, uid, q) in &recorded.orders {
                add(uid.as_bytes(), *q);
            }
            return Ok(out);
        }
    }
    if let Some(now) = holdings_now {
        let mut per_user: std::collections::HashMap<&[u8], i64> = std::collections::HashMap::new();
        for (_, uid, q) in &recorded.orders {
            *per_user.entry(uid.as_bytes()).or_insert(0) += q;
        }
        for (u, rec) in per_user {
            let named_before = totals.per_user.get(u).copied().unwrap_or(0) - rec;
            let have = now.get(u).copied().flatten().unwrap_or(0).max(0);
            // All or nothing: a holding short of the buyer's recorded units holds another of
            // their deductions whose ledger entry was lost (its order still to land), not part
            // of these; taken as covering as much as it could, that unit sold twice (chaos
            // hunt, cluster seed 831663262: a holding of 1 taken for half an order of 2).
            let covered = if have - named_before >= rec { rec } else { 0 };
            add(u, rec - covered);
        }
        return Ok(out);
    }
    if v.cut.keys.ledger {
        for (_, uid, q) in &recorded.orders {
            add(uid.as_bytes(), *q);
        }
    }
    Ok(out)
}

/// What step 1 recorded: the units, and each order (request id, user id, units).
#[derive(Default)]
struct RecordedOrders {
    units: i64,
    orders: Vec<(String, String, i64)>,
}

/// Records every live order of the product that the ledger does not hold as active, walking
/// the orders in pages; the units and requests recorded, or why the product cannot go on.
async fn record_live_orders(
    t: &Target<'_>,
    k: &ProductKeys,
    token: &str,
    expire_at: Option<i64>,
) -> Result<std::result::Result<RecordedOrders, String>> {
    let mut mark: Option<Mark> = None;
    let mut out = RecordedOrders::default();
    loop {
        let page = db_cut::live_page_now(t.db, t.activity, &k.product, mark.as_ref()).await?;
        let exhausted = page.len() < usize::try_from(db_cut::PAGE).unwrap_or(usize::MAX);
        mark = page.last().map(|o| o.mark.clone());
        let asks: Vec<&str> = page.iter().map(|o| o.request_id.as_str()).collect();
        let found = ledger::lookup_many(t.redis, &[(k, asks)])
            .await
            .map_err(|e| t.redis.error(&e))?
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
        let mode = RecordMode::Rebuild {
            token: token.to_string(),
        };
        match record(t.redis, k, mode, expire_at, &missing).await {
            Ok(Recorded::Written { units: u, .. }) => {
                out.units += u;
                out.orders.extend(missing);
            }
            Ok(Recorded::StockMoved(kind)) => {
                return Ok(Err(format!(
                    "the stock key appeared while the ledger was rebuilt (a {kind}): run fix again"
                )));
            }
            Ok(Recorded::Held(h)) => return Ok(Err(h.shown())),
            Err(e) => {
                return match fatal(t.redis, &e) {
                    Some(err) => Err(err),
                    None => Ok(Err(crate::redis::describe(&e))),
                };
            }
        }
        if exhausted {
            return Ok(Ok(out));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn holdings_are_corrected_to_the_ledger() {
        let want: HashMap<Vec<u8>, i64> = [(b"a".to_vec(), 2), (b"b".to_vec(), 1)]
            .into_iter()
            .collect();
        let now: HashMap<Vec<u8>, Option<i64>> = [
            (b"a".to_vec(), Some(2)),
            (b"b".to_vec(), Some(5)),
            (b"c".to_vec(), Some(1)),
            (b"d".to_vec(), None),
        ]
        .into_iter()
        .collect();
        let mut fix = holdings_to_correct(&want, &now);
        fix.sort();
        assert_eq!(
            fix,
            vec![(b"b".to_vec(), 1), (b"c".to_vec(), 0), (b"d".to_vec(), 0)]
        );
    }
}
