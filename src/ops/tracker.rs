//! The live view's truth: the books of every product of one activity kept between refreshes,
//! so that each refresh reads only what changed since the last. Used by the TUI's pollers and
//! by `watch`; `status` builds the same figures from scratch ([`super::snapshot`]).
//!
//! One refresh:
//! 1. the cut of every product (a few reads each);
//! 2. the events since the product's last cut, up to this one, applied to its books
//!    ([`Books::apply`]);
//! 3. in one read snapshot of the database: the orders of the deductions still unbacked and of
//!    the returns just seen (IN lists), and the orders that died since the last refresh (a page
//!    walk along the index on `updated_at`);
//! 4. a product whose books disagree with its counters, or that is new, was rolled back or
//!    lost its keys, is settled from scratch; and every `verify_every` the sums of live orders
//!    are compared with the books, which catches what no feed shows (an order deleted, a change
//!    committed with an old timestamp).

use super::snapshot::{self, Cost, ProductView, Snapshot};
use crate::db::cut::{self as db_cut, Death, Mark};
use crate::db::{Db, Tx, activity as activities};
use crate::domain::books::{Books, OrderState};
use crate::domain::events::{Event, EventId};
use crate::domain::{ActivityId, Product};
use crate::error::Result;
use crate::redis::cut::{self, ProductCut};
use crate::redis::events::{self, PAGE};
use crate::redis::ledger;
use crate::redis::{KeySpace, ProductKeys, RedisStore};
use chrono::{DateTime, TimeZone, Utc};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Unbacked deductions older than the grace window looked up per refresh at most (an incident
/// with many orphans costs a bounded amount per refresh; each is looked up in turn).
const OLD_LOOKUPS: usize = 2000;

/// How the tracker reads.
#[derive(Clone, Copy, Debug)]
pub struct TrackerOptions {
    pub grace: Duration,
    /// How far back the feed of dead orders re-reads (commits that land after a later one,
    /// clocks of different app servers).
    pub margin: Duration,
    /// How often the sums of live orders are compared with the books.
    pub verify_every: Duration,
}

impl TrackerOptions {
    pub fn new(grace: Duration) -> Self {
        TrackerOptions {
            grace,
            margin: Duration::from_secs(5),
            verify_every: Duration::from_secs(60),
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
    /// Rows of dead orders read from the feed.
    pub deaths: u64,
    /// Products settled from scratch (first refresh, new products, disagreements).
    pub settled: u64,
    /// True when this refresh compared the sums of live orders.
    pub verified: bool,
    /// What the settles read.
    pub settle: Cost,
}

/// The books of one activity between refreshes.
pub struct Tracker {
    activity: ActivityId,
    opts: TrackerOptions,
    books: HashMap<String, Books>,
    /// The feed of dead orders starts here (the database's own clock).
    since: Option<DateTime<Utc>>,
    last_verify: Option<Instant>,
    /// Where the rotation of old unbacked lookups stands.
    rotation: usize,
    /// What the last refresh read.
    pub cost: RefreshCost,
}

impl Tracker {
    pub fn new(activity: ActivityId, opts: TrackerOptions) -> Self {
        Tracker {
            activity,
            opts,
            books: HashMap::new(),
            since: None,
            last_verify: None,
            rotation: 0,
            cost: RefreshCost::default(),
        }
    }

    pub fn activity(&self) -> &ActivityId {
        &self.activity
    }

    /// Reads what changed and returns the activity's state at a new cut.
    pub async fn refresh(
        &mut self,
        redis: &RedisStore,
        db: &Db,
        keys: &KeySpace,
    ) -> Result<Snapshot> {
        self.cost = RefreshCost::default();
        let activity = activities::require(db, &self.activity).await?;
        let products = activities::products(db, &self.activity).await?;
        let pkeys: Vec<ProductKeys> = products
            .iter()
            .map(|p| keys.product(&self.activity, &p.product_id))
            .collect();
        let cuts = cut::read(redis, &pkeys)
            .await
            .map_err(|e| redis.error(&e))?;
        let result = self.advance(redis, db, (&products, &pkeys, &cuts)).await;
        if result.is_err() {
            // A refresh that failed half way leaves books that may be half moved: start over.
            self.books.clear();
            self.since = None;
        }
        let settled = result?;
        let grace = self.opts.grace;
        let taken_ms = cuts.iter().map(|c| c.now_ms).max();
        let views: Vec<ProductView> = products
            .into_iter()
            .zip(pkeys)
            .zip(cuts)
            .map(|((product, k), c)| {
                let id = product.product_id.to_string();
                let books = self.books.get(&id).cloned().unwrap_or_default();
                let explained = settled.get(&id).copied().unwrap_or(true);
                snapshot::view(product, k, c, books, explained, grace)
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

    /// Moves every product's books to its new cut; returns, for products settled from scratch,
    /// whether every difference was accounted for.
    async fn advance(
        &mut self,
        redis: &RedisStore,
        db: &Db,
        (products, pkeys, cuts): (&[Product], &[ProductKeys], &[ProductCut]),
    ) -> Result<HashMap<String, bool>> {
        let ids: Vec<String> = products.iter().map(|p| p.product_id.to_string()).collect();
        self.books.retain(|id, _| ids.contains(id));

        // Which products continue from their books, and what happened to them since.
        let mut resettle: Vec<usize> = Vec::new();
        let mut moving: Vec<usize> = Vec::new();
        for (i, (id, c)) in ids.iter().zip(cuts).enumerate() {
            match (self.books.get(id), c.position, c.active()) {
                (Some(b), Some(at), Some(_)) if at >= b.position => moving.push(i),
                _ => resettle.push(i),
            }
        }
        let since = self.read_events(redis, pkeys, cuts, &moving).await?;
        let mut tx = db_cut::begin(db).await?;
        let mut returned: Vec<(usize, String, i64)> = Vec::new();
        for (&i, evs) in moving.iter().zip(&since) {
            let Some(b) = self.books.get_mut(&ids[i]) else {
                continue;
            };
            for e in evs {
                if let Some(rid) = b.apply(e) {
                    returned.push((i, rid, e.quantity));
                }
            }
            // The books now stand at this cut, events or not.
            b.position = cuts[i].position.unwrap_or(b.position);
        }
        self.look_up(&mut tx, &ids, &moving, &returned).await?;
        self.deaths(redis, &mut tx, &ids, pkeys, &moving).await?;
        let verify = self
            .last_verify
            .is_none_or(|t| t.elapsed() >= self.opts.verify_every);
        if verify && !moving.is_empty() {
            self.cost.verified = true;
            self.last_verify = Some(Instant::now());
            resettle.extend(
                self.verify(redis, &mut tx, products, pkeys, cuts, &moving)
                    .await?,
            );
        }
        // Books that no longer add up to the counters missed something: start them over.
        for &i in &moving {
            let balanced = match (self.books.get(&ids[i]), cuts[i].active()) {
                (Some(b), Some(a)) => b.balanced(a),
                _ => false,
            };
            if !balanced && !resettle.contains(&i) {
                tracing::debug!(product = %ids[i], "live view: books disagree with the counters; settling again");
                resettle.push(i);
            }
        }
        let mut settled = HashMap::new();
        if !resettle.is_empty() {
            resettle.sort_unstable();
            resettle.dedup();
            let sub_products: Vec<Product> =
                resettle.iter().map(|&i| products[i].clone()).collect();
            let sub_keys: Vec<ProductKeys> = resettle.iter().map(|&i| pkeys[i].clone()).collect();
            let sub_cuts: Vec<ProductCut> = resettle.iter().map(|&i| cuts[i].clone()).collect();
            let whole = resettle.len() == products.len();
            let mut cost = Cost::default();
            let fresh = snapshot::settle(
                redis,
                &mut tx,
                &self.activity,
                (&sub_products, &sub_keys, &sub_cuts),
                whole,
                false,
                &mut cost,
            )
            .await?;
            self.cost.settle = cost;
            self.cost.settled = resettle.len() as u64;
            for (&i, (mut books, explained)) in resettle.iter().zip(fresh) {
                books.position = cuts[i].position.unwrap_or(EventId::ZERO);
                settled.insert(ids[i].clone(), explained);
                self.books.insert(ids[i].clone(), books);
            }
        }
        if self.since.is_none() {
            self.since = db_cut::latest_change(&mut tx, &self.activity).await?;
        }
        Ok(settled)
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
            .filter_map(|&i| Some((&pkeys[i], self.books.get(&pkeys[i].product)?.position)))
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

    /// Looks up the orders of every unbacked deduction (young ones each refresh, old ones in
    /// turn) and of the backed deductions just returned.
    async fn look_up(
        &mut self,
        tx: &mut Tx,
        ids: &[String],
        moving: &[usize],
        returned: &[(usize, String, i64)],
    ) -> Result<()> {
        let mut young: Vec<String> = Vec::new();
        let mut old: Vec<String> = Vec::new();
        let now = Utc::now().timestamp_millis();
        let grace = i64::try_from(self.opts.grace.as_millis()).unwrap_or(i64::MAX);
        for &i in moving {
            if let Some(b) = self.books.get(&ids[i]) {
                for (rid, u) in &b.unbacked {
                    if now - u.since_ms() < grace {
                        young.push(rid.clone());
                    } else {
                        old.push(rid.clone());
                    }
                }
            }
        }
        if old.len() > OLD_LOOKUPS {
            old.sort_unstable();
            let start = self.rotation % old.len();
            old.rotate_left(start);
            old.truncate(OLD_LOOKUPS);
            self.rotation = self.rotation.wrapping_add(OLD_LOOKUPS);
        }
        let asked: std::collections::HashSet<&str> =
            young.iter().chain(&old).map(String::as_str).collect();
        let mut rids: Vec<&str> = asked.iter().copied().collect();
        rids.extend(returned.iter().map(|(_, r, _)| r.as_str()));
        self.cost.looked_up += rids.len() as u64;
        let found = db_cut::lookup(tx, &self.activity, &rids).await?;
        let state = |rid: &str, product: &str| match found.get(rid) {
            Some((p, s)) if p == product => *s,
            _ => OrderState::Missing,
        };
        for &i in moving {
            if let Some(b) = self.books.get_mut(&ids[i]) {
                let mine: Vec<String> = b
                    .unbacked
                    .keys()
                    .filter(|r| asked.contains(r.as_str()))
                    .cloned()
                    .collect();
                for rid in mine {
                    b.on_order(&rid, state(&rid, &ids[i]));
                }
            }
        }
        for (i, rid, q) in returned {
            if let Some(b) = self.books.get_mut(&ids[*i]) {
                b.on_returned(rid, *q, state(rid, &ids[*i]));
            }
        }
        Ok(())
    }

    /// Reads the orders that died since the last refresh and moves each backed deduction whose
    /// order died, and that was not yet returned at the cut, to the unbacked.
    async fn deaths(
        &mut self,
        redis: &RedisStore,
        tx: &mut Tx,
        ids: &[String],
        pkeys: &[ProductKeys],
        moving: &[usize],
    ) -> Result<()> {
        let Some(since) = self.since else {
            return Ok(());
        };
        let margin = chrono::Duration::from_std(self.opts.margin).unwrap_or_default();
        let from = since - margin;
        let mut mark: Option<Mark> = None;
        let mut all: Vec<Death> = Vec::new();
        loop {
            let page = db_cut::deaths_page(tx, &self.activity, from, mark.as_ref()).await?;
            let full = page.len() >= usize::try_from(db_cut::PAGE).unwrap_or(usize::MAX);
            mark = page.last().map(|d| (d.at, d.request_id.clone()));
            all.extend(page);
            if !full {
                break;
            }
        }
        self.cost.deaths += all.len() as u64;
        if let Some(latest) = all.iter().map(|d| d.at).max() {
            self.since = Some(since.max(latest));
        }
        let index: HashMap<&str, usize> = moving.iter().map(|&i| (ids[i].as_str(), i)).collect();
        // Deaths the books cannot place without the request's ledger entry.
        let mut ask: HashMap<usize, Vec<&Death>> = HashMap::new();
        for d in &all {
            let Some(&i) = index.get(d.product.as_str()) else {
                continue;
            };
            let Some(b) = self.books.get_mut(&ids[i]) else {
                continue;
            };
            let at_ms = d.at.timestamp_millis();
            if b.unbacked.contains_key(&d.request_id) || b.unledgered.contains_key(&d.request_id) {
                b.on_death(&d.request_id, d.quantity, at_ms, None);
            } else {
                ask.entry(i).or_default().push(d);
            }
        }
        if ask.is_empty() {
            return Ok(());
        }
        let order: Vec<(usize, Vec<&Death>)> = ask.into_iter().collect();
        let asks: Vec<(&ProductKeys, Vec<&str>)> = order
            .iter()
            .map(|(i, ds)| {
                (
                    &pkeys[*i],
                    ds.iter().map(|d| d.request_id.as_str()).collect(),
                )
            })
            .collect();
        let found = ledger::lookup_many(redis, &asks)
            .await
            .map_err(|e| redis.error(&e))?;
        for ((i, ds), entries) in order.iter().zip(found) {
            if let Some(b) = self.books.get_mut(&ids[*i]) {
                for (d, l) in ds.iter().zip(entries) {
                    b.on_death(
                        &d.request_id,
                        d.quantity,
                        d.at.timestamp_millis(),
                        l.entry(),
                    );
                }
            }
        }
        Ok(())
    }

    /// Compares each moving product's live units with the database's sum at the cut; returns
    /// the products whose books are off.
    async fn verify(
        &mut self,
        redis: &RedisStore,
        tx: &mut Tx,
        products: &[Product],
        pkeys: &[ProductKeys],
        cuts: &[ProductCut],
        moving: &[usize],
    ) -> Result<Vec<usize>> {
        let sub_products: Vec<Product> = moving.iter().map(|&i| products[i].clone()).collect();
        let sub_keys: Vec<ProductKeys> = moving.iter().map(|&i| pkeys[i].clone()).collect();
        let sub_cuts: Vec<ProductCut> = moving.iter().map(|&i| cuts[i].clone()).collect();
        let whole = moving.len() == products.len();
        let mut cost = Cost::default();
        let sums = snapshot::sold_at_cut(
            redis,
            tx,
            &self.activity,
            (&sub_products, &sub_keys, &sub_cuts),
            whole,
            &mut cost,
        )
        .await?;
        Ok(moving
            .iter()
            .zip(sums)
            .filter(|(i, sum)| {
                let id = products[**i].product_id.as_str();
                self.books.get(id).is_none_or(|b| b.live_units != *sum)
            })
            .map(|(i, _)| {
                tracing::debug!(product = %products[*i].product_id, "live view: live orders differ from the books; settling again");
                *i
            })
            .collect())
    }
}
