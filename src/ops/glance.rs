//! What Redis alone tells of an activity at a glance: the TUI's overview of the activities not
//! selected. Per product its cut, so missing, corrupt and negative stocks and a stock off its
//! own counters, without reading the database's orders at all.
//!
//! A glance stays open between the overview's polls and reads as the live view does
//! ([`super::quiet`]): a product nothing happened to is not read (Redis pushes what moved;
//! where it will not, the product is asked whether its stream moved, or, with no key at all,
//! whether one appeared). Read whole at every poll, the overview's
//! 20 activities of up to 20,000 products were 400,000 products' cuts every 5 s, about 2.8 s
//! of Redis's one thread at 7 us a product.

use super::quiet::{QuietOptions, Watchlist};
use super::rows::KeptRows;
use crate::db::Db;
use crate::domain::ActivityId;
use crate::domain::stock::StockValue;
use crate::error::Result;
use crate::redis::{KeySpace, RedisStore};
use std::time::Duration;

/// The overview polls every 5 s or so: a product is asked from its second poll on (a product
/// that moves is read whole in the poll that asks it), every third poll once it has been quiet
/// for six, and read whole every five minutes in turns (what no stream shows: a key evicted or
/// set by hand); Redis's pushes asked for by prefix. Once selected, the activity is read at the live view's pace.
pub const OVERVIEW: QuietOptions = QuietOptions {
    hot: 0,
    slow_after: 6,
    slow_every: 3,
    full_every: Duration::from_secs(300),
    track: true,
    full_every_tracked: Duration::from_secs(600),
    share_pct: 15,
    // By prefix: twenty glances registering keys would fill Redis's tracking table (a million
    // keys by default, after which Redis forgets keys and pushes their names: reads for
    // nothing); an activity not selected is not the one selling hardest.
    track_keys_max: 0,
};

/// What a glance counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Products whose stock is missing, corrupt, negative or off its own counters, or that
    /// lost a piece.
    pub alerts: usize,
    /// Products whose stock key exists.
    pub present: usize,
    pub products: usize,
}

/// One activity's glance, kept between polls.
#[derive(Debug)]
pub struct Glance {
    activity: ActivityId,
    rows: KeptRows,
    watch: Watchlist,
}

impl Glance {
    pub fn new(activity: ActivityId, opts: QuietOptions) -> Self {
        Glance {
            activity,
            rows: KeptRows::default(),
            watch: Watchlist::new(opts),
        }
    }

    pub fn activity(&self) -> &ActivityId {
        &self.activity
    }

    /// Reads every product whole at the next read (a node evicted keys: no stream shows it).
    pub fn recut(&mut self) {
        self.watch.recut();
    }

    /// What the last read did, per kind of read.
    pub fn cost(&self) -> super::quiet::QuietCost {
        self.watch.cost
    }

    /// Counts the products' alerts at their cuts (quiet products at their last cut).
    pub async fn read(&mut self, redis: &RedisStore, db: &Db, keys: &KeySpace) -> Result<Counts> {
        self.rows.current(db, &self.activity, keys).await?;
        let ids: Vec<&str> = self
            .rows
            .products()
            .iter()
            .map(|p| p.product_id.as_str())
            .collect();
        // The glance holds nothing but the cuts themselves: every last cut carries on.
        let read = self
            .watch
            .read(
                redis,
                (&ids, self.rows.keys(), self.rows.generation()),
                (keys.prefix(), self.activity.as_str()),
                |_| true,
            )
            .await
            .map_err(|e| redis.error(&e))?;
        drop(read);
        let moved = self.watch.moved().to_vec();
        self.rows.moved(db, &self.activity, &moved).await?;
        let products = self.rows.products();
        let mut counts = Counts {
            products: products.len(),
            ..Counts::default()
        };
        for (i, p) in products.iter().enumerate() {
            // Every product has a cut now: read whole, or its last one standing.
            let Some(c) = self.watch.last_cut(i) else {
                continue;
            };
            let offset = c.offset(p.initial_stock);
            let bad = match c.stock.value() {
                None => true,
                Some(s) => {
                    s < 0 || c.meta.corrupt.is_some() || offset != Some(0) || !c.lost().is_empty()
                }
            };
            counts.alerts += usize::from(bad);
            counts.present += usize::from(c.stock != StockValue::Missing);
        }
        Ok(counts)
    }
}
