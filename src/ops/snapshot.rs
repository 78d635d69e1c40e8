//! The state of one activity at one cut: each product's Redis state as of one instant (its
//! stock, counters and position in its event stream), and the database truth reconciled
//! against that instant per request id. Preheat, status, reconcile and fix all start here.
//!
//! The order of the reads is what makes the figures exact while buyers deduct:
//! 1. the Redis cut ([`crate::redis::cut`]);
//! 2. one database read snapshot, taken after the cut, for every query below;
//! 3. the events after the cut, read after the snapshot was taken: every order the snapshot
//!    holds whose deduction came after the cut is among them, and is left out;
//! 4. the differences between the two sides, looked for only where they can be
//!    ([`crate::domain::books::Settle`]).

use super::progress::SettleGauge;
use super::tracker::{Tracker, TrackerOptions};
use crate::db::cut::{self as db_cut, Mark};
use crate::db::{Db, Tx, activity as activities};
use crate::domain::books::{Books, Candidate, HashOf, Next, OrderState, Settle, Split};
use crate::domain::events::EventId;
use crate::domain::faults::Faults;
use crate::domain::meta::Piece;
use crate::domain::rid_hash::RidSet;
use crate::domain::stock::{LedgerEntry, ProductStatus, RedisWindow, State, StockValue, Truth};
use crate::domain::{Activity, ActivityId, Product};
use crate::error::{Error, Result};
use crate::redis::cut::{self, ProductCut};
use crate::redis::events::{self, PAGE, Page};
use crate::redis::ledger::{self, Lookup};
use crate::redis::{KeySpace, ProductKeys, RedisStore};
use chrono::{DateTime, Utc};
use redis::RedisResult;
use std::collections::{HashMap, HashSet};
use std::time::Duration;

/// One product: its database row, its keys, its cut, its books, the truth and the verdict.
#[derive(Clone, Debug)]
pub struct ProductView {
    pub product: Product,
    pub keys: ProductKeys,
    pub cut: ProductCut,
    pub books: Books,
    /// The unbacked deductions split by the grace window.
    pub split: Split,
    pub truth: Truth,
    pub status: ProductStatus,
    /// False when the differences found do not account for the counters (`A - L`): the
    /// counters or the stream disagree with the ledger, or they could not be read.
    pub explained: bool,
}

impl ProductView {
    /// `X`: the stock's offset from the scripts' own counters, when both are readable.
    pub fn offset(&self) -> Option<i64> {
        self.cut.offset(self.product.initial_stock)
    }
}

/// One product as a refresh reads it: its database row, its keys and its cut.
#[derive(Clone, Debug)]
pub struct ProductAtCut {
    pub product: Product,
    pub keys: ProductKeys,
    pub cut: ProductCut,
}

impl ProductAtCut {
    pub fn id(&self) -> &str {
        self.product.product_id.as_str()
    }
}

/// What reading the activity cost (for the footprint benchmark and the debug log).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cost {
    /// Events, ledger entries and orders read by the searches for differences.
    pub scanned: u64,
    /// Request ids looked up in the database.
    pub looked_up: u64,
    /// The smallest lead of an order's stamp over its deduction the settles saw (ms): the
    /// orders' clock against Redis's.
    pub lead: Option<i64>,
}

/// An activity's state at one cut.
#[derive(Clone, Debug)]
pub struct Snapshot {
    pub activity: Activity,
    pub products: Vec<ProductView>,
    /// Redis time of the cut.
    pub taken_at: DateTime<Utc>,
    pub cost: Cost,
    /// How far the orders' clock (their `updated_at` stamps) runs ahead of Redis's (negative:
    /// behind), as the orders that landed show it; None before any landed in view.
    pub skew_ms: Option<i64>,
    /// How long ago the least recently read product's keys were read whole (the live view
    /// reads a quiet product's keys in turns: see [`super::quiet`]); None: all just now.
    pub keys_age: Option<std::time::Duration>,
}

/// What a report needs of a refresh: each product's status, in the products' order, and the
/// instant they stand at. A live view's refresh hands this, not the [`ProductView`]s: a
/// product that did not move keeps its status from an earlier refresh, and a view of every
/// product made at every refresh was most of the console's CPU at 100,000 products.
#[derive(Clone, Debug)]
pub struct Reading {
    pub activity: Activity,
    pub statuses: Vec<ProductStatus>,
    /// Each product's Redis time of its cut (a product that did not move: this refresh's).
    pub cut_ms: Vec<i64>,
    /// The hash slot of each product's keys (the migrating slots' alerts name the products
    /// inside).
    pub slots: std::sync::Arc<[u16]>,
    /// Redis time of the cut.
    pub taken_at: DateTime<Utc>,
    /// See [`Snapshot::skew_ms`].
    pub skew_ms: Option<i64>,
    /// See [`Snapshot::keys_age`].
    pub keys_age: Option<std::time::Duration>,
}

impl Reading {
    /// The statuses of a snapshot's views.
    pub fn of(snap: Snapshot) -> Self {
        let slots: Vec<u16> = snap
            .products
            .iter()
            .map(|v| crate::redis::slots::key_slot(v.keys.stock.as_bytes()))
            .collect();
        let cut_ms = snap.products.iter().map(|v| v.cut.now_ms).collect();
        Reading {
            activity: snap.activity,
            statuses: snap.products.into_iter().map(|v| v.status).collect(),
            cut_ms,
            slots: slots.into(),
            taken_at: snap.taken_at,
            skew_ms: snap.skew_ms,
            keys_age: snap.keys_age,
        }
    }

    /// The status of product `id`, if the activity has it.
    pub fn status(&self, id: &str) -> Option<&ProductStatus> {
        self.statuses.iter().find(|s| s.product == id)
    }
}

/// Which products to read, and how.
#[derive(Clone, Debug, Default)]
pub struct Scope {
    /// Only these product ids (an unknown id is an error naming it).
    pub only: Option<Vec<String>>,
    /// Settle from scratch (every event and every live order read, in pages) instead of
    /// starting from the checkpoints.
    pub full: bool,
    /// Save the books as the products' checkpoints (status and reconcile; never preheat or
    /// fix, whose reads must leave Redis as they found it when they decide to write nothing).
    pub save: bool,
    /// Called between the reads (the model test changes the world there); none in the console.
    pub interleave: Interleave,
    /// Counts a settle from scratch as it reads; none by default.
    pub gauge: SettleGauge,
}

/// A point between the reads of a snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// The cut was read; nothing of the database yet.
    Cut,
    /// The database snapshot was taken (its first statement ran).
    Snapshot,
    /// The events after the cut were read.
    AfterCut,
    /// One round of the search for differences was read.
    Round,
    /// A write's reads are done; its first write is next (fix, preheat, top-up).
    BeforeWrite,
    /// A top-up's first step is written; its database write is next.
    TopupBegun,
    /// A top-up's database write is done; its second step in Redis is next.
    TopupWritten,
}

type HookFn = dyn Fn(Stage) -> futures::future::BoxFuture<'static, ()> + Send + Sync;

/// An optional hook between the reads of a snapshot, for tests that make buyers deduct, orders
/// land and expire exactly there. The console never sets one.
#[derive(Clone, Default)]
pub struct Interleave(Option<std::sync::Arc<HookFn>>);

impl Interleave {
    pub fn new(
        f: impl Fn(Stage) -> futures::future::BoxFuture<'static, ()> + Send + Sync + 'static,
    ) -> Self {
        Interleave(Some(std::sync::Arc::new(f)))
    }

    /// Runs the hook, if any, at `stage`.
    pub async fn at(&self, stage: Stage) {
        if let Some(f) = &self.0 {
            f(stage).await;
        }
    }
}

impl std::fmt::Debug for Interleave {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Interleave(hook)"
        } else {
            "Interleave(none)"
        })
    }
}

/// Reads the activity at one cut: from the products' checkpoints when they are valid (what
/// happened since is read, and the result is checked against the sum of live orders), from
/// scratch otherwise or with `scope.full`. Saves the books as checkpoints unless read-only.
pub async fn take(
    redis: &RedisStore,
    db: &Db,
    keys: &KeySpace,
    activity_id: &ActivityId,
    grace: Duration,
    scope: &Scope,
) -> Result<Snapshot> {
    let t0 = std::time::Instant::now();
    let products = products_of(db, activity_id, scope.only.as_deref()).await?;
    let n = products.len();
    let read_only = redis.read_only() || db.read_only();
    let mut opts = TrackerOptions::once(grace, read_only || !scope.save);
    opts.fresh = scope.full;
    opts.interleave = scope.interleave.clone();
    opts.gauge = scope.gauge.clone();
    let mut tracker = Tracker::new(activity_id.clone(), opts);
    let snap = tracker.refresh_products(redis, db, keys, products).await?;
    let c = tracker.cost;
    tracing::debug!(
        ms = t0.elapsed().as_millis() as u64,
        products = n,
        resumed = c.resumed,
        settled = c.settled,
        events = c.events,
        changes = c.changes,
        looked_up = c.looked_up,
        "snapshot read"
    );
    Ok(snap)
}

/// Builds the books of `items` at their cuts from scratch, inside the read snapshot `tx`
/// (begun after the cuts were read): every event and every live order is read, in bounded
/// pages. Each product's books come with whether its differences account for its counters.
/// A product whose cut cannot carry books (stock, counters or stream unreadable) still gets
/// its units of live orders: the database's figures never depend on Redis.
pub(crate) async fn settle(
    redis: &RedisStore,
    tx: &mut Tx,
    activity: &ActivityId,
    items: &[&ProductAtCut],
    (hook, gauge): (&Interleave, &SettleGauge),
    prior_lead: Option<i64>,
    cost: &mut Cost,
) -> Result<Vec<(Books, bool)>> {
    let ids: Vec<&str> = items.iter().map(|i| i.id()).collect();
    let keys: Vec<ProductKeys> = items.iter().map(|i| i.keys.clone()).collect();
    gauge.start(0);
    let (sold, after) = sold_and_after(redis, tx, (activity, items), hook, cost, None).await?;
    let expected = items.iter().zip(&sold).fold(0u64, |sum, (i, &l)| {
        let active = i.cut.active().unwrap_or(0);
        sum.saturating_add(u64::try_from(l.max(0).saturating_add(active.max(0))).unwrap_or(0))
    });
    gauge.start(expected);
    let mut settles: Vec<Option<Settle>> = items
        .iter()
        .zip(after)
        .zip(&sold)
        .map(|((i, after), &l)| {
            let c = &i.cut;
            let declared = (c.active()?, c.meta.unexplained, c.meta.unexplained_since);
            let mut s = Settle::new(c.position?, l, declared, after);
            s.cut_ms = c.now_ms;
            s.prior_lead = prior_lead;
            s.books.window = i.product.window;
            Some(s)
        })
        .collect();
    let ran = run(
        redis,
        tx,
        activity,
        (&ids, &keys),
        &mut settles,
        (hook, gauge),
        cost,
    )
    .await;
    gauge.finish();
    ran?;
    cost.lead = settles.iter().flatten().filter_map(|s| s.lead).min();
    Ok(settles
        .into_iter()
        .zip(sold)
        .map(|(s, l)| match s {
            Some(s) => {
                let explained = s.explained();
                (s.books, explained)
            }
            // Counters or stream unreadable: the sold units are known, the differences not.
            None => (
                Books {
                    live_units: l,
                    ..Books::default()
                },
                false,
            ),
        })
        .collect())
}

/// `L` per product: units of live orders in the snapshot whose deduction came at or before
/// the product's cut (or that have none).
/// `pushed`: when Redis said which products it wrote since their cuts (the live view's
/// [`crate::redis::changes`]), those; the others' streams are not asked.
pub(crate) async fn sold_at_cut(
    redis: &RedisStore,
    tx: &mut Tx,
    (activity, items): (&ActivityId, &[&ProductAtCut]),
    hook: &Interleave,
    pushed: Option<&HashSet<String>>,
) -> Result<Vec<i64>> {
    let mut cost = Cost::default();
    let (sold, _) = sold_and_after(redis, tx, (activity, items), hook, &mut cost, pushed).await?;
    Ok(sold)
}

async fn sold_and_after(
    redis: &RedisStore,
    tx: &mut Tx,
    (activity, items): (&ActivityId, &[&ProductAtCut]),
    hook: &Interleave,
    cost: &mut Cost,
    pushed: Option<&HashSet<String>>,
) -> Result<(Vec<i64>, Vec<RidSet>)> {
    let ids: Vec<&str> = items.iter().map(|i| i.id()).collect();
    // A few products: an IN list; many: one grouped sum over the activity.
    let few = (ids.len() <= crate::db::IN_CHUNK).then_some(ids.as_slice());
    let live = db_cut::live_units(tx, activity, few).await?;
    let after = after_cut(redis, items, pushed).await?;
    hook.at(Stage::AfterCut).await;
    let late = late_units(tx, activity, items, &after, cost).await?;
    let sold = items
        .iter()
        .zip(&late)
        .map(|(i, late)| live.get(i.id()).copied().unwrap_or(0).saturating_sub(*late))
        .collect();
    Ok((sold, after))
}

/// The products of the activity, or of `only` (sorted, each checked to exist).
pub(crate) async fn products_of(
    db: &Db,
    activity_id: &ActivityId,
    only: Option<&[String]>,
) -> Result<Vec<Product>> {
    let Some(only) = only else {
        return activities::products(db, activity_id).await;
    };
    let mut ids: Vec<String> = only.to_vec();
    ids.sort();
    ids.dedup();
    let found = activities::products_by_ids(db, activity_id, &ids).await?;
    let known: HashSet<&str> = found.iter().map(|p| p.product_id.as_str()).collect();
    if let Some(unknown) = ids.iter().find(|p| !known.contains(p.as_str())) {
        return Err(Error::bad_input(format!(
            "product '{unknown}' is not in activity '{activity_id}': see `seckill-console activity show {activity_id}`"
        )));
    }
    Ok(found)
}

/// Builds one product's view from its books at the cut; `details`: the view keeps a copy of
/// the books (the requests behind the figures), else only their position and live units.
pub fn view(
    product: Product,
    keys: ProductKeys,
    cut: ProductCut,
    (books, details): (&Books, bool),
    explained: bool,
    grace: Duration,
    unledgered_in: &dyn Fn(&str, &str) -> Option<bool>,
) -> ProductView {
    let grace_ms = i64::try_from(grace.as_millis()).unwrap_or(i64::MAX);
    let split = books.split(cut.now_ms, grace_ms);
    let truth = Truth::new(
        product.initial_stock,
        books.live_units,
        split.in_flight,
        split.orphaned,
    );
    let lost = lost_pieces(&product, &cut);
    let mut status = ProductStatus::build(
        product.product_id.as_str(),
        product.per_user_limit,
        (&cut.stock, &cut.meta, &lost),
        truth,
    );
    status.name = product.name.clone();
    status.unledgered = books.unledgered_units();
    if matches!(status.state, State::Ok | State::Paused) && status.unledgered > 0 {
        // Live orders Redis holds no deduction for, hidden in the total by as many units
        // deducted for nobody: returning those would sell the orders' units twice.
        status.state = State::Drift;
    }
    status.db_paused = product.pause.paused;
    status.pause_reason = product.pause.reason.clone();
    status.stream_gap = books.stream_gap;
    status.held = held_shown(&cut);
    let faults = Faults::of(books, unledgered_in);
    status.faults = (!faults.is_empty()).then(|| Box::new(faults));
    if let Some(w) = &product.window
        && cut.meta.present
        && cut.meta.window_differs(w)
    {
        status.redis_window = Some(RedisWindow {
            opens: cut.meta.opens,
            closes: cut.meta.closes,
        });
    }
    if !matches!(
        status.state,
        State::Missing | State::Corrupt | State::Oversold
    ) {
        // The stock and counters read fine, but the books found what the scripts or the
        // console cannot vouch for.
        let why = books
            .bad_entry_shown(&keys.ledger, &keys.buyers)
            .or_else(|| discrepancy_shown(books));
        if let Some(why) = why {
            status.state = State::Corrupt;
            status.corrupt_value = Some(why);
        }
    }
    let books = if details {
        books.clone()
    } else {
        Books {
            position: books.position,
            live_units: books.live_units,
            bad_entries: books.bad_entries.clone(),
            sweep: books.sweep,
            unexplained: books.unexplained,
            unexplained_since: books.unexplained_since,
            discrepancy: books.discrepancy,
            stream_gap: books.stream_gap,
            // What a fix leaves of the stock depends on it (a few entries at most).
            breaches: books.breaches.mismatches_only(),
            ..Books::default()
        }
    };
    let mut v = ProductView {
        product,
        keys,
        cut,
        books,
        split,
        truth,
        status,
        explained,
    };
    v.status.offset = v.offset();
    v
}

/// Every piece of the product's evidence Redis lost: what the cut shows, and the operator's
/// pause when the database holds one Redis does not.
pub fn lost_pieces(product: &Product, cut: &ProductCut) -> Vec<Piece> {
    let mut lost = cut.lost();
    if product.pause.paused && !cut.meta.paused && cut.stock != StockValue::Missing {
        lost.push(Piece::Pause);
    }
    lost
}

/// A step another console left half done on the product, when it is older than such a step
/// takes: its console died, and the next fix finishes it.
fn held_shown(cut: &ProductCut) -> Option<String> {
    let age = |at: i64| cut.now_ms.saturating_sub(at);
    if let Some(t) = &cut.meta.topup
        && age(t.at_ms) >= super::repair::TOPUP_LEASE_MS
    {
        return Some(format!(
            "a top-up ({}, {:+}) has been between its two writes for {} s (its console stopped): fix finishes it from the database",
            t.id,
            t.change,
            age(t.at_ms) / 1000
        ));
    }
    if let Some(f) = &cut.meta.frozen
        && age(f.at_ms) >= crate::redis::rewrite::REBUILD_LEASE_MS
    {
        return Some(format!(
            "a rebuild has held it for {} s (its console stopped; nothing sells): fix takes it over",
            age(f.at_ms) / 1000
        ));
    }
    None
}

/// What counters that disagree with the ledger mean, for the operator.
fn discrepancy_shown(books: &Books) -> Option<String> {
    match books.discrepancy {
        0 => None,
        d if d > 0 => Some(format!(
            "the counters hold {d} unit(s) that no ledger entry names (ledger entries lost, or counters written by hand): fix holds them back until their orders had the grace window to land"
        )),
        d => Some(format!(
            "the ledger names {} unit(s) more than the counters hold (the counters lost or written by hand): fix rebuilds them from the ledger",
            -d
        )),
    }
}

/// Per product, the requests whose first event after the cut activates them: their orders,
/// if the snapshot already holds them, belong to after the cut. Read after the database
/// snapshot was taken, so none is missed. With `pushed` (the products Redis said it wrote
/// since the cuts, by a sync after the snapshot began), only their streams are asked.
async fn after_cut(
    redis: &RedisStore,
    items: &[&ProductAtCut],
    pushed: Option<&HashSet<String>>,
) -> Result<Vec<RidSet>> {
    // Which streams moved since their cut (a hundred to an XREAD on a single server); only
    // those are read. A product Redis did not name has not moved: it is not asked (at 100,000
    // products the asks were 4% of a whole read, every minute).
    let asked: Vec<&ProductAtCut> = match pushed {
        Some(moved) => items
            .iter()
            .copied()
            .filter(|i| moved.contains(i.id()))
            .collect(),
        None => items.to_vec(),
    };
    let cuts: Vec<(&ProductKeys, EventId)> = asked
        .iter()
        .filter_map(|i| Some((&i.keys, i.cut.position?)))
        .collect();
    let moved = cut::moved_after(redis, &cuts)
        .await
        .map_err(|e| redis.error(&e))?;
    let mut moved = moved.into_iter();
    let ahead: Vec<&ProductAtCut> = asked
        .iter()
        .copied()
        .filter(|i| i.cut.position.is_some() && moved.next().unwrap_or(true))
        .collect();
    let asks: Vec<(&ProductKeys, EventId)> = ahead
        .iter()
        .map(|i| (&i.keys, i.cut.position.unwrap_or(EventId::ZERO)))
        .collect();
    let mut pages: HashMap<&str, RedisResult<Page>> = ahead
        .iter()
        .map(|i| i.id())
        .zip(events::after_many(redis, &asks, PAGE).await)
        .collect();
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let Some(page) = pages.remove(item.id()) else {
            out.push(RidSet::default());
            continue;
        };
        let page = page.map_err(|e| redis.error(&e))?;
        let mut evs = page.events;
        if page.more
            && let Some(last) = page.last
        {
            evs.extend(
                events::all_after(redis, &item.keys, last)
                    .await
                    .map_err(|e| redis.error(&e))?,
            );
        }
        let mut first: HashMap<String, bool> = HashMap::new();
        for e in evs.iter().filter(|e| !e.request_id.is_empty()) {
            first
                .entry(e.request_id.clone())
                .or_insert_with(|| e.activates());
        }
        out.push(
            first
                .into_iter()
                .filter(|(_, activates)| *activates)
                .map(|(rid, _)| rid)
                .collect(),
        );
    }
    Ok(out)
}

/// Per product, the units of live orders in the snapshot whose deduction came after the cut.
async fn late_units(
    tx: &mut Tx,
    activity: &ActivityId,
    items: &[&ProductAtCut],
    after: &[RidSet],
    cost: &mut Cost,
) -> Result<Vec<i64>> {
    let rids: Vec<&str> = after.iter().flatten().map(String::as_str).collect();
    cost.looked_up += rids.len() as u64;
    let found = db_cut::lookup(tx, activity, &rids).await?;
    Ok(items
        .iter()
        .zip(after)
        .map(|(item, rids)| {
            rids.iter()
                .filter_map(|r| match found.get(r) {
                    Some((product, OrderState::Live(q))) if product == item.id() => Some(*q),
                    _ => None,
                })
                .fold(0i64, |sum, q| sum.saturating_add(q))
        })
        .collect())
}

/// Runs every product's settle, in lockstep rounds: one pipelined page of events for every
/// product that wants one and one lookup of all their candidates per round; pages of orders
/// and of the ledger, and the check of the unmatched orders, per product.
pub(crate) async fn run(
    redis: &RedisStore,
    tx: &mut Tx,
    activity: &ActivityId,
    (ids, keys): (&[&str], &[ProductKeys]),
    settles: &mut [Option<Settle>],
    (hook, gauge): (&Interleave, &SettleGauge),
    cost: &mut Cost,
) -> Result<()> {
    let mut hscan: Vec<u64> = vec![0; settles.len()];
    let mut marks: Vec<Option<Mark>> = vec![None; settles.len()];
    loop {
        hook.at(Stage::Round).await;
        gauge.read(settles.iter().flatten().map(|s| s.read).sum());
        let mut want: HashMap<Next, Vec<usize>> = HashMap::new();
        for (i, s) in settles.iter().enumerate() {
            if let Some(next) = s.as_ref().map(Settle::next)
                && next != Next::Done
            {
                want.entry(next).or_default().push(i);
            }
        }
        if want.is_empty() {
            cost.scanned = settles.iter().flatten().map(|s| s.read).sum();
            return Ok(());
        }
        for &i in want.get(&Next::Orders).into_iter().flatten() {
            let rows = db_cut::live_page(tx, activity, ids[i], marks[i].as_ref()).await?;
            let exhausted = rows.len() < usize::try_from(db_cut::PAGE).unwrap_or(usize::MAX);
            marks[i] = rows.last().map(|o| o.mark.clone());
            let page: Vec<(String, i64, i64)> = rows
                .into_iter()
                .map(|o| (o.request_id, o.quantity, o.mark.0.timestamp_millis()))
                .collect();
            if let Some(s) = settles[i].as_mut() {
                s.on_orders_stamped(&page, exhausted);
            }
        }

        let mut candidates: Vec<(usize, Candidate)> = Vec::new();
        let events_for: Vec<usize> = want.get(&Next::Events).cloned().unwrap_or_default();
        let asks: Vec<(&ProductKeys, Option<EventId>, EventId)> = events_for
            .iter()
            .filter_map(|&i| {
                let s = settles[i].as_ref()?;
                Some((&keys[i], s.cursor, s.books.position))
            })
            .collect();
        let pages = events::before_many(redis, &asks, PAGE).await;
        for (&i, page) in events_for.iter().zip(pages) {
            let page = page.map_err(|e| redis.error(&e))?;
            if let Some(s) = settles[i].as_mut() {
                let found = s.on_events(&page.events, page.last, !page.more);
                candidates.extend(found.into_iter().map(|c| (i, c)));
            }
        }
        for &i in want.get(&Next::Ledger).into_iter().flatten() {
            let page = ledger::scan_page(redis, &keys[i], hscan[i])
                .await
                .map_err(|e| redis.error(&e))?;
            hscan[i] = page.next;
            if let Some(s) = settles[i].as_mut() {
                for (rid, raw) in &page.corrupt {
                    s.books.note_bad_entry(HashOf::Ledger, rid, raw);
                }
                let done = page.next == 0 || page.wrong_type;
                let found = s.on_ledger(&page.entries, done);
                candidates.extend(found.into_iter().map(|c| (i, c)));
            }
        }
        if !candidates.is_empty() {
            share_lead(settles);
        }
        look_up(tx, activity, ids, &candidates, settles, cost).await?;

        let confirm: Vec<usize> = want.get(&Next::Confirm).cloned().unwrap_or_default();
        let lists: Vec<Vec<(String, i64)>> = confirm
            .iter()
            .map(|&i| {
                settles[i]
                    .as_ref()
                    .map(Settle::unmatched)
                    .unwrap_or_default()
            })
            .collect();
        let asks: Vec<(&ProductKeys, Vec<&str>)> = confirm
            .iter()
            .zip(&lists)
            .map(|(&i, l)| (&keys[i], l.iter().map(|(r, _)| r.as_str()).collect()))
            .collect();
        let found = ledger::lookup_many(redis, &asks)
            .await
            .map_err(|e| redis.error(&e))?;
        for ((&i, list), entries) in confirm.iter().zip(lists).zip(found) {
            let Some(s) = settles[i].as_mut() else {
                continue;
            };
            let page: Vec<(String, i64, Option<LedgerEntry>)> = list
                .into_iter()
                .zip(entries.into_iter().chain(std::iter::repeat(Lookup::Absent)))
                .map(|((r, q), l)| {
                    if let Lookup::Corrupt(raw) = &l {
                        s.books.note_bad_entry(HashOf::Ledger, &r, raw);
                    }
                    (r, q, l.into_entry())
                })
                .collect();
            s.on_confirm(&page);
        }
    }
}

/// Gives every product's settle the smallest lead any of them learned so far: the orders'
/// clock is one for the activity, and a product whose own orders taught nothing (no live
/// order matched yet) must date its deaths as the others do, and as a live view does.
fn share_lead(settles: &mut [Option<Settle>]) {
    let least = settles
        .iter()
        .flatten()
        .flat_map(|s| [s.lead, s.prior_lead])
        .flatten()
        .min();
    if least.is_some() {
        for s in settles.iter_mut().flatten() {
            s.prior_lead = least;
        }
    }
}

/// Looks up every candidate of one round in the snapshot and hands each product its answers.
async fn look_up(
    tx: &mut Tx,
    activity: &ActivityId,
    ids: &[&str],
    candidates: &[(usize, Candidate)],
    settles: &mut [Option<Settle>],
    cost: &mut Cost,
) -> Result<()> {
    if candidates.is_empty() {
        return Ok(());
    }
    let rids: Vec<&str> = candidates
        .iter()
        .map(|(_, c)| c.request_id.as_str())
        .collect();
    cost.looked_up += rids.len() as u64;
    let found = db_cut::lookup(tx, activity, &rids).await?;
    let mut per: HashMap<usize, Vec<(Candidate, OrderState)>> = HashMap::new();
    let mut foreign: Vec<(usize, &str, &str)> = Vec::new();
    for (i, c) in candidates {
        // An order of the same request id in another product backs nothing here.
        let state = match found.get(&c.request_id) {
            Some((product, state)) if product == ids[*i] => *state,
            Some((product, _)) => {
                foreign.push((*i, c.request_id.as_str(), product.as_str()));
                OrderState::Missing
            }
            None => OrderState::Missing,
        };
        per.entry(*i).or_default().push((c.clone(), state));
    }
    for (i, answers) in per {
        if let Some(s) = settles[i].as_mut() {
            s.on_candidates(&answers);
        }
    }
    for (i, rid, product) in foreign {
        if let Some(s) = settles[i].as_mut() {
            s.books
                .breaches
                .maps()
                .elsewhere
                .insert(rid.to_string(), product.to_string());
        }
    }
    Ok(())
}
