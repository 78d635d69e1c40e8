//! The books of every product of one activity, carried from one cut to the next so that each
//! read costs what changed since the last, not what was sold. The live view (the TUI's
//! pollers, `watch`) keeps a tracker between refreshes; `status`, `reconcile` and `fix` start
//! one from the checkpoint the last console left in Redis ([`crate::redis::checkpoint`]).
//!
//! One refresh:
//! 1. the cut of every product (a few reads each);
//! 2. for a product without books in memory, its checkpoint, if it is still valid;
//! 3. the events since the books' position, up to the cut, applied ([`Books::apply`]);
//! 4. in one read snapshot of the database: the orders of the deductions still unbacked and of
//!    the returns just seen (IN lists), and the orders created, paid or ended since the last
//!    refresh (a page walk along the index on `updated_at`);
//! 5. when due (every read of a command; every `verify_every` in the live view), the sum of
//!    live orders at the cut is compared with the books, which catches what no feed shows (an
//!    order deleted, a change committed with an old timestamp);
//! 6. a product without books, or whose books disagree with its counters or the sum, is
//!    settled from scratch: both sides read to the end, in bounded pages;
//! 7. the books are saved as the product's checkpoint (not in read-only mode).

use super::integrity;
use super::snapshot::{self, Cost, Interleave, ProductView, Snapshot, Stage};
use crate::db::cut::{self as db_cut, Change, Mark};
use crate::db::{Db, Tx, activity as activities};
use crate::domain::books::{Books, HashOf, MAX_BAD_ENTRIES, OrderState};
use crate::domain::events::{Event, EventId};
use crate::domain::rid_hash::{RidMap, RidState};
use crate::domain::{ActivityId, Product};
use crate::error::Result;
use crate::redis::checkpoint::{self, Checkpoint, Feed};
use crate::redis::cut::{self, ProductCut};
use crate::redis::events::{self, PAGE};
use crate::redis::ledger;
use crate::redis::{KeySpace, ProductKeys, RedisStore};
use chrono::{TimeZone, Utc};
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

/// Differences (unbacked deductions and unledgered orders) a checkpoint holds at most.
const MAX_SAVED: usize = 10_000;

/// How a tracker reads and keeps its books.
#[derive(Clone, Debug)]
pub struct TrackerOptions {
    pub grace: Duration,
    /// How far back the feed of changed orders re-reads (a commit that lands after a later
    /// one, the clocks of different app servers).
    pub margin: Duration,
    /// How often the sum of live orders is compared with the books; zero: every refresh.
    pub verify_every: Duration,
    /// Start from the checkpoints in Redis (ignored with `fresh`).
    pub load_checkpoints: bool,
    /// Save the books as checkpoints at most this often; None: never (read-only).
    pub save_every: Option<Duration>,
    /// Settle every product from scratch on the first refresh, whatever is saved.
    pub fresh: bool,
    /// Hand out every unbacked deduction and unledgered order with the snapshot (a fix needs
    /// them); else only the figures (the live view, which would copy them every second).
    pub details: bool,
    /// Products whose ledger and buyers hash one refresh sweeps a page of each.
    pub sweep_products: usize,
    /// Called between the reads (tests only).
    pub interleave: Interleave,
}

impl TrackerOptions {
    /// The live view: a refresh reads what changed; the sums are compared every minute; the
    /// books are saved every ten seconds unless `read_only`.
    pub fn live(grace: Duration, read_only: bool) -> Self {
        TrackerOptions {
            grace,
            margin: Duration::from_secs(1),
            verify_every: Duration::from_secs(60),
            load_checkpoints: true,
            save_every: (!read_only).then_some(Duration::from_secs(10)),
            fresh: false,
            details: false,
            sweep_products: 2,
            interleave: Interleave::default(),
        }
    }

    /// One read of a command: from the checkpoint, checked against the sums, saved.
    pub fn once(grace: Duration, read_only: bool) -> Self {
        TrackerOptions {
            verify_every: Duration::ZERO,
            details: true,
            sweep_products: 16,
            save_every: (!read_only).then_some(Duration::ZERO),
            ..Self::live(grace, read_only)
        }
    }
}

/// What one refresh read (the live view's footprint, for the benchmark and the debug log).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RefreshCost {
    /// Events read from the products' streams.
    pub events: u64,
    /// Request ids looked up in the database.
    pub looked_up: u64,
    /// Rows of changed orders read from the feed.
    pub changes: u64,
    /// Products whose books came from a checkpoint.
    pub resumed: u64,
    /// Products settled from scratch (no books, or books that did not add up).
    pub settled: u64,
    /// True when this refresh compared the sums of live orders.
    pub verified: bool,
    /// What the settles read.
    pub settle: Cost,
}

/// One product's books and where the feed of changed orders continues for it.
#[derive(Clone, Debug)]
struct Kept {
    books: Books,
    feed: Option<Feed>,
}

/// The books of one activity between refreshes.
pub struct Tracker {
    activity: ActivityId,
    opts: TrackerOptions,
    kept: HashMap<String, Kept>,
    last_verify: Option<Instant>,
    last_save: Option<Instant>,
    /// Changes (request, updated_at in µs) applied while inside the feed's margin.
    processed: HashSet<(String, i64), RidState>,
    /// Requests whose order this tracker saw land, while inside the margin (their payment is
    /// the next change the feed shows, and moves nothing).
    backed_recently: RidMap<i64>,
    /// The product the next sweep page starts at.
    sweep_next: usize,
    /// What the last refresh read.
    pub cost: RefreshCost,
}

impl Tracker {
    pub fn new(activity: ActivityId, opts: TrackerOptions) -> Self {
        Tracker {
            activity,
            opts,
            kept: HashMap::new(),
            last_verify: None,
            last_save: None,
            processed: HashSet::default(),
            backed_recently: RidMap::default(),
            // Commands each read once: starting from the clock, their sweeps go round the
            // products of an activity with more products than one sweep takes.
            sweep_next: usize::try_from(Utc::now().timestamp()).unwrap_or(0),
            cost: RefreshCost::default(),
        }
    }

    pub fn activity(&self) -> &ActivityId {
        &self.activity
    }

    /// The same books, read with other options from now on.
    pub fn with_options(mut self, opts: TrackerOptions) -> Self {
        self.opts = opts;
        self
    }

    /// Reads what changed and returns the activity's state at a new cut. `only`: these
    /// products (checked to exist by the caller).
    pub async fn refresh(
        &mut self,
        redis: &RedisStore,
        db: &Db,
        keys: &KeySpace,
    ) -> Result<Snapshot> {
        let products = activities::products(db, &self.activity).await?;
        self.refresh_products(redis, db, keys, products).await
    }

    /// [`Tracker::refresh`] of the given products of the activity.
    pub async fn refresh_products(
        &mut self,
        redis: &RedisStore,
        db: &Db,
        keys: &KeySpace,
        products: Vec<Product>,
    ) -> Result<Snapshot> {
        self.cost = RefreshCost::default();
        let activity = activities::require(db, &self.activity).await?;
        let pkeys: Vec<ProductKeys> = products
            .iter()
            .map(|p| keys.product(&self.activity, &p.product_id))
            .collect();
        let cuts = cut::read(redis, &pkeys)
            .await
            .map_err(|e| redis.error(&e))?;
        self.opts.interleave.at(Stage::Cut).await;
        let result = self.advance(redis, db, (&products, &pkeys, &cuts)).await;
        let settled = match result {
            Ok(s) => s,
            Err(e) => {
                // A refresh that failed half way may have moved books half way: start over.
                self.kept.clear();
                return Err(e);
            }
        };
        let grace = self.opts.grace;
        let taken_ms = cuts.iter().map(|c| c.now_ms).max();
        let views: Vec<ProductView> = products
            .into_iter()
            .zip(pkeys)
            .zip(cuts)
            .map(|((product, k), c)| {
                let id = product.product_id.to_string();
                let none = Books::default();
                let books = self.kept.get(&id).map_or(&none, |k| &k.books);
                let explained = settled.get(&id).copied().unwrap_or(true);
                snapshot::view(product, k, c, (books, self.opts.details), explained, grace)
            })
            .collect();
        Ok(Snapshot {
            activity,
            products: views,
            taken_at: taken_ms
                .and_then(|ms| Utc.timestamp_millis_opt(ms).single())
                .unwrap_or_else(Utc::now),
            cost: self.cost.settle,
        })
    }

    /// Moves every product's books to its new cut; returns, for products settled from
    /// scratch, whether both sides' differences account for the counters.
    async fn advance(
        &mut self,
        redis: &RedisStore,
        db: &Db,
        (products, pkeys, cuts): (&[Product], &[ProductKeys], &[ProductCut]),
    ) -> Result<HashMap<String, bool>> {
        let ids: Vec<String> = products.iter().map(|p| p.product_id.to_string()).collect();
        self.kept.retain(|id, _| ids.contains(id));
        if self.opts.fresh {
            self.kept.clear();
        }
        self.resume(redis, &ids, pkeys, cuts).await?;

        // Which products continue from their books: the stream still holds the event the
        // books stand at (else it was rolled back, or lost and written anew).
        let mut resettle: Vec<usize> = Vec::new();
        let mut moving: Vec<usize> = Vec::new();
        for (i, (id, c)) in ids.iter().zip(cuts).enumerate() {
            match (self.kept.get(id), c.position, c.active()) {
                (Some(k), Some(at), Some(_)) if at >= k.books.position && k.feed.is_some() => {
                    moving.push(i);
                }
                _ => resettle.push(i),
            }
        }
        let asks: Vec<(&ProductKeys, EventId)> = moving
            .iter()
            .filter_map(|&i| Some((&pkeys[i], self.kept.get(&ids[i])?.books.position)))
            .filter(|(_, at)| *at != EventId::ZERO)
            .collect();
        let gone: HashSet<&str> = asks
            .iter()
            .zip(events::exist_many(redis, &asks).await)
            .filter_map(|((k, _), found)| match found {
                Ok(true) => None,
                Ok(false) => Some(Ok(k.product.as_str())),
                Err(e) => Some(Err(e)),
            })
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| redis.error(&e))?;
        if !gone.is_empty() {
            moving.retain(|&i| {
                let keep = !gone.contains(ids[i].as_str());
                if !keep {
                    resettle.push(i);
                }
                keep
            });
        }
        let since = self.read_events(redis, pkeys, cuts, &moving).await?;
        let mut tx = db_cut::begin(db, &self.activity).await?;
        self.opts.interleave.at(Stage::Snapshot).await;
        for (&i, evs) in moving.iter().zip(&since) {
            let Some(k) = self.kept.get_mut(&ids[i]) else {
                continue;
            };
            for e in evs {
                k.books.apply(e);
            }
            // The books now stand at this cut, events or not.
            k.books.position = cuts[i].position.unwrap_or(k.books.position);
        }
        // The feed of changed orders places the new deductions (their orders landing) and the
        // returns (their orders ending); what it does not show is looked up.
        self.changes(redis, &mut tx, (&ids, pkeys), &moving).await?;
        self.returned(&mut tx, &ids, &moving).await?;
        let verify = self
            .last_verify
            .is_none_or(|t| t.elapsed() >= self.opts.verify_every);
        if verify && !moving.is_empty() {
            self.cost.verified = true;
            self.last_verify = Some(Instant::now());
            let off = self
                .verify(redis, &mut tx, (products, pkeys, cuts), &moving)
                .await?;
            resettle.extend(off);
        }
        // Books that no longer add up to the counters missed something: start them over.
        for &i in &moving {
            let balanced = match (self.kept.get(&ids[i]), cuts[i].active()) {
                (Some(k), Some(a)) => k.books.balanced(a),
                _ => false,
            };
            if !balanced && !resettle.contains(&i) {
                tracing::debug!(product = %ids[i], "books disagree with the counters; settling again");
                resettle.push(i);
            }
        }
        let settled = self
            .settle(redis, &mut tx, (products, pkeys, cuts), resettle)
            .await?;
        drop(tx);
        self.check_entries(redis, &ids, pkeys).await?;
        self.save(redis, &ids, pkeys, cuts).await?;
        Ok(settled)
    }

    /// Reads again the entries the books hold as unreadable, then the next sweep page of a
    /// few products (see [`integrity`]).
    async fn check_entries(
        &mut self,
        redis: &RedisStore,
        ids: &[String],
        pkeys: &[ProductKeys],
    ) -> Result<()> {
        let at: HashMap<&str, usize> = ids
            .iter()
            .enumerate()
            .map(|(i, id)| (id.as_str(), i))
            .collect();
        let mut items: Vec<(&ProductKeys, &mut Books)> = Vec::new();
        let mut kept: Vec<(&String, &mut Kept)> = self.kept.iter_mut().collect();
        // A fixed order, so that the sweep goes round the products.
        kept.sort_by(|a, b| a.0.cmp(b.0));
        for (id, k) in kept {
            if let Some(&i) = at.get(id.as_str()) {
                items.push((&pkeys[i], &mut k.books));
            }
        }
        let fail = |e: redis::RedisError| redis.error(&e);
        integrity::recheck(redis, &mut items).await.map_err(fail)?;
        self.sweep_next =
            integrity::sweep(redis, &mut items, self.sweep_next, self.opts.sweep_products)
                .await
                .map_err(fail)?;
        Ok(())
    }

    /// Gives products without books in memory the books of their checkpoint, if any is valid.
    async fn resume(
        &mut self,
        redis: &RedisStore,
        ids: &[String],
        pkeys: &[ProductKeys],
        cuts: &[ProductCut],
    ) -> Result<()> {
        if !self.opts.load_checkpoints || self.opts.fresh {
            return Ok(());
        }
        let missing: Vec<usize> = (0..ids.len())
            .filter(|&i| !self.kept.contains_key(&ids[i]))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        let asks: Vec<&ProductKeys> = missing.iter().map(|&i| &pkeys[i]).collect();
        let found = checkpoint::load_many(redis, &asks)
            .await
            .map_err(|e| redis.error(&e))?;
        for (&i, c) in missing.iter().zip(found) {
            let Some(c) = c else {
                continue;
            };
            // A checkpoint beyond the cut was written after a newer state than Redis holds.
            if cuts[i].position.is_some_and(|at| c.books.position <= at) {
                self.cost.resumed += 1;
                self.kept.insert(
                    ids[i].clone(),
                    Kept {
                        books: c.books,
                        feed: c.feed,
                    },
                );
            }
        }
        Ok(())
    }

    /// The events of each moving product after its books' position, up to its cut.
    async fn read_events(
        &mut self,
        redis: &RedisStore,
        pkeys: &[ProductKeys],
        cuts: &[ProductCut],
        moving: &[usize],
    ) -> Result<Vec<Vec<Event>>> {
        let asks: Vec<(&ProductKeys, EventId)> = moving
            .iter()
            .map(|&i| {
                let from = self
                    .kept
                    .get(&pkeys[i].product)
                    .map_or(EventId::ZERO, |k| k.books.position);
                (&pkeys[i], from)
            })
            .collect();
        let mut out = Vec::with_capacity(moving.len());
        for ((&i, (k, from)), page) in moving
            .iter()
            .zip(&asks)
            .zip(events::after_many(redis, &asks, PAGE).await)
        {
            let page = page.map_err(|e| redis.error(&e))?;
            let cut_at = cuts[i].position.unwrap_or(EventId::ZERO);
            let mut evs = page.events;
            if page.more
                && let Some(last) = page.last
                && last < cut_at
            {
                evs.extend(
                    events::all_after(redis, k, last)
                        .await
                        .map_err(|e| redis.error(&e))?,
                );
            }
            evs.retain(|e| e.id > *from && e.id <= cut_at);
            self.cost.events += evs.len() as u64;
            out.push(evs);
        }
        Ok(out)
    }

    /// Looks up the orders of backed deductions returned since the last refresh that the feed
    /// did not show (an order that did not change: one that lives on after its return).
    async fn returned(&mut self, tx: &mut Tx, ids: &[String], moving: &[usize]) -> Result<()> {
        let mut asks: Vec<(usize, String, i64)> = Vec::new();
        for &i in moving {
            if let Some(k) = self.kept.get(&ids[i]) {
                asks.extend(k.books.returned.iter().map(|(r, q)| (i, r.clone(), *q)));
            }
        }
        if asks.is_empty() {
            return Ok(());
        }
        let rids: Vec<&str> = asks.iter().map(|(_, r, _)| r.as_str()).collect();
        self.cost.looked_up += rids.len() as u64;
        let found = db_cut::lookup(tx, &self.activity, &rids).await?;
        for (i, rid, q) in &asks {
            let state = match found.get(rid) {
                Some((p, s)) if *p == ids[*i] => *s,
                _ => OrderState::Missing,
            };
            if let Some(k) = self.kept.get_mut(&ids[*i]) {
                k.books.on_returned(rid, *q, state);
            }
        }
        Ok(())
    }

    /// Reads the orders that changed since the books' watermark. A backed deduction whose
    /// order died, and that was not returned at the cut, moves to the unbacked (a return on
    /// its way); a new order of no deduction active at the cut is a sale Redis does not hold.
    /// Each change is applied idempotently, so the margin read again does no harm.
    async fn changes(
        &mut self,
        redis: &RedisStore,
        tx: &mut Tx,
        (ids, pkeys): (&[String], &[ProductKeys]),
        moving: &[usize],
    ) -> Result<()> {
        let now_ms = Utc::now().timestamp_millis();
        let margin = chrono::Duration::from_std(self.opts.margin).unwrap_or_default();
        let Some(from) = moving
            .iter()
            .filter_map(|&i| self.kept.get(&ids[i])?.feed.map(|f| f.from(now_ms, margin)))
            .min()
        else {
            return Ok(());
        };
        let mut mark: Option<Mark> = None;
        let mut all: Vec<Change> = Vec::new();
        loop {
            let page = db_cut::changes_page(tx, &self.activity, from, mark.as_ref()).await?;
            let full = page.len() >= usize::try_from(db_cut::PAGE).unwrap_or(usize::MAX);
            mark = page.last().map(|d| (d.at, d.request_id.clone()));
            all.extend(page);
            if !full {
                break;
            }
        }
        self.cost.changes += all.len() as u64;
        if let Some(latest) = all.iter().map(|d| d.at).max() {
            for &i in moving {
                if let Some(Kept { feed: Some(f), .. }) = self.kept.get_mut(&ids[i])
                    && latest > f.seen
                {
                    *f = Feed::seen(latest, now_ms);
                }
            }
        }
        // What an earlier refresh applied (the margin read again) is skipped; what this one
        // applies is remembered while it is inside the margin. A change that waits for an
        // event after the cut is not remembered: the next refresh applies it.
        let keep_from = moving
            .iter()
            .filter_map(|&i| self.kept.get(&ids[i])?.feed.map(|f| f.from(now_ms, margin)))
            .min()
            .unwrap_or(from);
        let index: HashMap<&str, usize> = moving.iter().map(|&i| (ids[i].as_str(), i)).collect();
        let mut applied: Vec<(String, i64)> = Vec::new();
        // Changes the books cannot place without the request's ledger entry.
        let mut ask: HashMap<usize, Vec<&Change>> = HashMap::new();
        for c in &all {
            let key = (c.request_id.clone(), c.at.timestamp_micros());
            if self.processed.contains(&key) {
                continue;
            }
            let Some(&i) = index.get(c.product.as_str()) else {
                continue;
            };
            let Some(k) = self.kept.get_mut(&ids[i]) else {
                continue;
            };
            let b = &mut k.books;
            let rid = c.request_id.as_str();
            let at = c.at.timestamp_millis();
            let placed = if b.unbacked.contains_key(rid) {
                // A new deduction's order landed (or ended before it was seen live).
                let state = if c.live {
                    self.backed_recently
                        .insert(rid.to_string(), c.at.timestamp_micros());
                    OrderState::Live(c.quantity)
                } else {
                    OrderState::Dead {
                        quantity: c.quantity,
                        at_ms: at,
                    }
                };
                b.on_order(rid, state);
                true
            } else if c.live && self.backed_recently.contains_key(rid) {
                // Paid right after it landed: nothing moves.
                true
            } else if let Some(&q) = b.returned.get(rid) {
                let state = if c.live {
                    OrderState::Live(c.quantity)
                } else {
                    OrderState::Dead {
                        quantity: c.quantity,
                        at_ms: at,
                    }
                };
                b.on_returned(rid, q, state);
                true
            } else if b.unledgered.contains_key(rid) {
                if !c.live {
                    b.on_death(rid, c.quantity, at, None);
                }
                true
            } else {
                ask.entry(i).or_default().push(c);
                false
            };
            if placed {
                applied.push(key);
            }
        }
        if !ask.is_empty() {
            let order: Vec<(usize, Vec<&Change>)> = ask.into_iter().collect();
            let asks: Vec<(&ProductKeys, Vec<&str>)> = order
                .iter()
                .map(|(i, cs)| {
                    (
                        &pkeys[*i],
                        cs.iter().map(|c| c.request_id.as_str()).collect(),
                    )
                })
                .collect();
            let found = ledger::lookup_many(redis, &asks)
                .await
                .map_err(|e| redis.error(&e))?;
            for ((i, cs), entries) in order.iter().zip(found) {
                let Some(k) = self.kept.get_mut(&ids[*i]) else {
                    continue;
                };
                for (c, l) in cs.iter().zip(entries) {
                    if let ledger::Lookup::Corrupt(raw) = &l {
                        k.books.note_bad_entry(HashOf::Ledger, &c.request_id, raw);
                    }
                    // A request deducted after the cut waits for its event.
                    if l.entry().is_some_and(|e| e.at > k.books.position) {
                        continue;
                    }
                    if c.live {
                        k.books.on_live_order(&c.request_id, c.quantity, l.entry());
                    } else {
                        let at = c.at.timestamp_millis();
                        k.books.on_death(&c.request_id, c.quantity, at, l.entry());
                    }
                    applied.push((c.request_id.clone(), c.at.timestamp_micros()));
                }
            }
        }
        // Remembered until the margin has moved past them.
        let keep = keep_from.timestamp_micros();
        self.processed.extend(applied);
        self.processed.retain(|(_, at)| *at >= keep);
        self.backed_recently.retain(|_, at| *at >= keep);
        Ok(())
    }

    /// Compares each moving product's live units with the database's sum at the cut; returns
    /// the products whose books are off.
    async fn verify(
        &mut self,
        redis: &RedisStore,
        tx: &mut Tx,
        (products, pkeys, cuts): (&[Product], &[ProductKeys], &[ProductCut]),
        moving: &[usize],
    ) -> Result<Vec<usize>> {
        let sub = subset(products, pkeys, cuts, moving);
        let sums = snapshot::sold_at_cut(
            redis,
            tx,
            &self.activity,
            (&sub.0, &sub.1, &sub.2),
            &self.opts.interleave,
        )
        .await?;
        Ok(moving
            .iter()
            .zip(sums)
            .filter(|(i, sum)| {
                let id = products[**i].product_id.as_str();
                self.kept.get(id).is_none_or(|k| k.books.live_units != *sum)
            })
            .map(|(i, _)| {
                tracing::debug!(product = %products[*i].product_id, "live orders differ from the books; settling again");
                *i
            })
            .collect())
    }

    /// Settles `which` from scratch in the refresh's snapshot; returns whether each
    /// product's differences account for its counters.
    async fn settle(
        &mut self,
        redis: &RedisStore,
        tx: &mut Tx,
        (products, pkeys, cuts): (&[Product], &[ProductKeys], &[ProductCut]),
        mut which: Vec<usize>,
    ) -> Result<HashMap<String, bool>> {
        let mut out = HashMap::new();
        if which.is_empty() {
            return Ok(out);
        }
        which.sort_unstable();
        which.dedup();
        let sub = subset(products, pkeys, cuts, &which);
        let mut cost = Cost::default();
        let fresh = snapshot::settle(
            redis,
            tx,
            &self.activity,
            (&sub.0, &sub.1, &sub.2),
            &self.opts.interleave,
            &mut cost,
        )
        .await?;
        let latest = db_cut::latest_change(tx, &self.activity).await?;
        let feed = Feed::seen(
            latest.unwrap_or_else(Utc::now),
            Utc::now().timestamp_millis(),
        );
        self.cost.settle = cost;
        self.cost.settled = which.len() as u64;
        for (&i, (mut books, explained)) in which.iter().zip(fresh) {
            let id = products[i].product_id.to_string();
            out.insert(id.clone(), explained);
            if let Some(old) = self.kept.get(&id) {
                // The sweep goes on where it was; what it found is checked again anyway.
                books.sweep = old.books.sweep;
                for (key, shown) in &old.books.bad_entries {
                    if books.bad_entries.len() < MAX_BAD_ENTRIES {
                        books
                            .bad_entries
                            .entry(key.clone())
                            .or_insert_with(|| shown.clone());
                    }
                }
            }
            // Without a readable cut there is nothing to carry: the next refresh settles again.
            if cuts[i].position.is_some() && cuts[i].active().is_some() {
                self.kept.insert(
                    id,
                    Kept {
                        books,
                        feed: Some(feed),
                    },
                );
            } else {
                self.kept.remove(&id);
            }
        }
        Ok(out)
    }

    /// Saves the books as the products' checkpoints, when due; each expires with its
    /// product's keys.
    async fn save(
        &mut self,
        redis: &RedisStore,
        ids: &[String],
        pkeys: &[ProductKeys],
        cuts: &[ProductCut],
    ) -> Result<()> {
        let Some(every) = self.opts.save_every else {
            return Ok(());
        };
        if redis.read_only() || self.last_save.is_some_and(|t| t.elapsed() < every) {
            return Ok(());
        }
        let saves: Vec<(&ProductKeys, Checkpoint, Option<i64>)> = ids
            .iter()
            .zip(pkeys)
            .zip(cuts)
            .filter_map(|((id, k), c)| {
                let kept = self.kept.get(id)?;
                // Books of an incident (a million orders after a key loss) are settled again
                // by the next reader rather than written to Redis in full.
                if kept.books.unbacked.len() + kept.books.unledgered.len() > MAX_SAVED {
                    return None;
                }
                let checkpoint = Checkpoint {
                    books: kept.books.clone(),
                    feed: kept.feed,
                };
                Some((k, checkpoint, c.meta.expire_at))
            })
            .collect();
        // A checkpoint only spares the next reader work: a user allowed only reads (or a
        // failing node) costs that, not this read.
        if let Err(e) = checkpoint::save_many(redis, &saves).await {
            tracing::warn!(error = %crate::redis::describe(&e), "the books were not saved as checkpoints");
        }
        self.last_save = Some(Instant::now());
        Ok(())
    }
}

type Subset = (Vec<Product>, Vec<ProductKeys>, Vec<ProductCut>);

fn subset(
    products: &[Product],
    pkeys: &[ProductKeys],
    cuts: &[ProductCut],
    which: &[usize],
) -> Subset {
    (
        which.iter().map(|&i| products[i].clone()).collect(),
        which.iter().map(|&i| pkeys[i].clone()).collect(),
        which.iter().map(|&i| cuts[i].clone()).collect(),
    )
}
