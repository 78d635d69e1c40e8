//! The feed of changed orders as a tracker reads it.
//!
//! Every read starts a margin before the latest change, since a commit can land after a later
//! one (see [`crate::redis::checkpoint::Feed`]). Read whole each second, the margin is most of
//! the read: at 40,000 orders a second the live view read three seconds of orders a refresh
//! to find one second of new ones, and that was most of its CPU. So a feed that stays open
//! (the live view) keeps the stamp of every change it read inside the margin, by request id,
//! and checks the part it would read again by counting it: the database counts along its index
//! on `updated_at` alone, no row is read. Only a part whose count differs (an order that
//! landed late, one deleted) is read again, narrowed down in eighths. What is new is read as
//! before.
//!
//! The database counts the orders of a part and, of them, those that ended: an order that
//! died inside the margin (an expiry or a cancellation committed late, stamped within seconds
//! of a change the feed already read) moves its stamp without changing how many orders the
//! part holds, and was kept as sold for up to a minute before the dead were counted too
//! (chaos test, invariant 7). The counts still miss a payment committed late that way, which
//! moves nothing in the books, and a deletion and a late order in the same part: the lookup
//! of unbacked deductions by request id and the check against the sum of live orders find it.
//!
//! A feed that reads once (a command) reads the margin whole, and leaves out the payments of
//! orders created before it; a feed that stays open reads them too, once each, so that its
//! counts can be compared with the database's.

use crate::db::Tx;
use crate::db::cut::{self as db_cut, Change, ChangeCount, Mark, Span};
use crate::domain::ActivityId;
use crate::domain::rid_hash::RidState;
use crate::error::Result;
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::ops::Bound::{Excluded, Included, Unbounded};

/// A part of the margin whose count differs is read whole once it holds this many orders;
/// larger, it is cut in [`PARTS`] and each counted.
const READ_WHOLE: i64 = 2_000;

/// How many parts a differing part is cut into.
const PARTS: i32 = 8;

/// Cuts of one differing part at most (a burst of orders stamped alike cannot be cut).
const MAX_CUTS: u32 = 6;

/// What one read cost.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FeedCost {
    /// Rows read.
    pub rows: u64,
    /// Counts asked of the database.
    pub counts: u64,
}

/// What the feed read of one order inside the margin.
#[derive(Clone, Copy, Debug)]
struct Seen {
    at: DateTime<Utc>,
    /// Cancelled or expired.
    dead: bool,
}

/// The feed of one activity's changed orders.
#[derive(Debug, Default)]
pub struct OrderFeed {
    /// Counts the margin instead of reading it again (a feed that stays open).
    stays_open: bool,
    /// The stamp of every change read inside the margin, and whether the order had ended, by
    /// its request id's hash (no copy of the id per row; two ids that share a hash read as one
    /// order, so their part of the margin counts short and is read again: slower, never wrong).
    seen: HashMap<u64, Seen, RidState>,
    ids: RidState,
    /// The latest stamp read; None: nothing yet, the next read is whole.
    read_to: Option<DateTime<Utc>>,
    /// `seen` holds every change read since this stamp (what is older was forgotten).
    covers_from: Option<DateTime<Utc>>,
    pub cost: FeedCost,
}

impl OrderFeed {
    /// A feed that counts the margin it read before (`stays_open`), or reads it whole.
    pub fn new(stays_open: bool) -> Self {
        OrderFeed {
            stays_open,
            ..OrderFeed::default()
        }
    }

    /// Every change from `from` on that this feed has not shown since it changed, plus every
    /// change from `redo` on (what a refresh could not apply yet).
    pub async fn read(
        &mut self,
        tx: &mut Tx,
        activity: &ActivityId,
        from: DateTime<Utc>,
        redo: Option<DateTime<Utc>>,
    ) -> Result<Vec<Change>> {
        self.cost = FeedCost::default();
        if !self.stays_open {
            let span = Span {
                created_since: Some(from),
                ..Span::between(Included(from), Unbounded)
            };
            return self.walk(tx, activity, span).await;
        }
        // What was read before: up to the latest stamp read, included (an order stamped alike
        // that lands late changes its count), or up to a change left for later, excluded.
        let counted = match (self.read_to, self.covers_from) {
            // A change left at the latest stamp itself is read again too: the count of the
            // stamps before it stands, the walk starts at it.
            (Some(to), Some(covers)) if covers <= from && from < to => match redo {
                Some(r) if r <= from => None,
                Some(r) if r <= to => Some(Excluded(r)),
                _ => Some(Included(to)),
            },
            _ => None,
        };
        let mut out = Vec::new();
        let rest = match counted {
            Some(hi) => {
                self.recount(tx, activity, Span::between(Included(from), hi), &mut out)
                    .await?;
                match hi {
                    Included(t) => Excluded(t),
                    Excluded(t) => Included(t),
                    Unbounded => Included(from),
                }
            }
            None => {
                self.seen.clear();
                self.covers_from = Some(from);
                Included(from)
            }
        };
        let new = self
            .walk(tx, activity, Span::between(rest, Unbounded))
            .await?;
        self.remember(&new);
        out.extend(new);
        if let Some(latest) = out.iter().map(|c| c.at).max() {
            self.read_to = Some(self.read_to.map_or(latest, |t| t.max(latest)));
        }
        tracing::debug!(
            rows = self.cost.rows,
            counts = self.cost.counts,
            counted = counted.is_some(),
            "changed orders read"
        );
        Ok(out)
    }

    /// Forgets the changes stamped before `keep`: no later read starts before it.
    pub fn forget_before(&mut self, keep: DateTime<Utc>) {
        self.seen.retain(|_, s| s.at >= keep);
        self.covers_from = self.covers_from.map(|c| c.max(keep));
    }

    /// Counts `span` against what was read there, and reads again each part whose count
    /// differs, narrowed down in eighths.
    async fn recount(
        &mut self,
        tx: &mut Tx,
        activity: &ActivityId,
        span: Span,
        out: &mut Vec<Change>,
    ) -> Result<()> {
        // The stamps read, in order, and those of the orders that had ended: each part's
        // expected counts are binary searches.
        let mut stamps: Vec<DateTime<Utc>> = Vec::new();
        let mut dead: Vec<DateTime<Utc>> = Vec::new();
        for s in self.seen.values().filter(|s| span.holds(&s.at)) {
            stamps.push(s.at);
            if s.dead {
                dead.push(s.at);
            }
        }
        stamps.sort_unstable();
        dead.sort_unstable();
        let mut todo = vec![(span, 0u32)];
        let mut reread: Vec<Span> = Vec::new();
        let first = out.len();
        while let Some((part, cuts)) = todo.pop() {
            self.cost.counts += 1;
            let found = db_cut::count_changes(tx, activity, &part).await?;
            let expected = ChangeCount {
                orders: within(&stamps, &part),
                dead: within(&dead, &part),
            };
            // An order that died inside the part moved there without changing how many
            // orders it holds: the count of the dead tells (an expiry committed late).
            if found == expected {
                continue;
            }
            let found = found.orders;
            let parts = match (part.lo, part.hi) {
                (Included(a) | Excluded(a), Included(b) | Excluded(b))
                    if found > READ_WHOLE && cuts < MAX_CUTS =>
                {
                    cut(part, a, b)
                }
                _ => Vec::new(),
            };
            if parts.is_empty() {
                out.extend(self.walk(tx, activity, part).await?);
                reread.push(part);
            } else {
                todo.extend(parts.into_iter().rev().map(|p| (p, cuts + 1)));
            }
        }
        if !reread.is_empty() {
            // What was read again replaces what was seen there, in one pass over the map.
            self.seen
                .retain(|_, s| !reread.iter().any(|p| p.holds(&s.at)));
            self.remember(&out[first..]);
        }
        Ok(())
    }

    /// Notes the stamp of every change read (a feed that stays open).
    fn remember(&mut self, changes: &[Change]) {
        for c in changes {
            let seen = Seen {
                at: c.at,
                dead: !c.live,
            };
            self.seen
                .insert(self.ids.hash_one(c.request_id.as_str()), seen);
        }
    }

    /// Every change in `span`, in index pages.
    async fn walk(
        &mut self,
        tx: &mut Tx,
        activity: &ActivityId,
        span: Span,
    ) -> Result<Vec<Change>> {
        let mut mark: Option<Mark> = None;
        let mut all: Vec<Change> = Vec::new();
        loop {
            let page = db_cut::changes_page(tx, activity, &span, mark.as_ref()).await?;
            let full = page.len() >= usize::try_from(db_cut::PAGE).unwrap_or(usize::MAX);
            mark = page.last().map(|d| (d.at, d.request_id.clone()));
            all.extend(page);
            if !full {
                break;
            }
        }
        self.cost.rows += all.len() as u64;
        Ok(all)
    }
}

/// How many of `sorted` stamps `part` holds (two binary searches).
fn within(sorted: &[DateTime<Utc>], part: &Span) -> i64 {
    let below = match part.lo {
        Included(t) => sorted.partition_point(|at| *at < t),
        Excluded(t) => sorted.partition_point(|at| *at <= t),
        Unbounded => 0,
    };
    let above = match part.hi {
        Included(t) => sorted.partition_point(|at| *at <= t),
        Excluded(t) => sorted.partition_point(|at| *at < t),
        Unbounded => sorted.len(),
    };
    i64::try_from(above.saturating_sub(below)).unwrap_or(i64::MAX)
}

/// `span`, stamped from `a` to `b`, in [`PARTS`] parts (none when it cannot be cut: every
/// change stamped alike).
fn cut(span: Span, a: DateTime<Utc>, b: DateTime<Utc>) -> Vec<Span> {
    let step = (b - a) / PARTS;
    if step.is_zero() {
        return Vec::new();
    }
    (0..PARTS)
        .map(|k| {
            let lo = if k == 0 {
                span.lo
            } else {
                Included(a + step * k)
            };
            let hi = if k == PARTS - 1 {
                span.hi
            } else {
                Excluded(a + step * (k + 1))
            };
            Span::between(lo, hi)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::tx::Arg;
    use crate::db::{Db, DbOptions, migrate, orders};
    use crate::domain::order::OrderStatus;
    use crate::redact::SecretUrl;
    use chrono::Duration;

    async fn db() -> (tempfile::TempDir, Db) {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = SecretUrl::new(format!("sqlite:{}", dir.path().join("f.db").display()));
        let db = Db::connect(&url, &DbOptions::default())
            .await
            .expect("open");
        migrate::migrate(&db).await.expect("migrate");
        let t = Arg::Time(Utc::now());
        db.execute(
            "INSERT INTO seckill_activity (activity_id, name, starts_at, ends_at, created_at, updated_at) \
             VALUES ('a', 'a', ?, ?, ?, ?)",
            &[t.clone(), t.clone(), t.clone(), t],
        )
        .await
        .expect("activity");
        (dir, db)
    }

    fn new_order(rid: &str) -> orders::NewOrder {
        orders::NewOrder {
            order_id: format!("o-{rid}"),
            request_id: rid.into(),
            activity_id: "a".into(),
            product_id: "p".into(),
            user_id: "u".into(),
            quantity: 1,
            status: OrderStatus::PendingPayment,
        }
    }

    async fn order(db: &Db, rid: &str, at: DateTime<Utc>) {
        orders::insert_with_outbox_at(db, &[new_order(rid)], at)
            .await
            .expect("order");
    }

    async fn read(feed: &mut OrderFeed, db: &Db, from: DateTime<Utc>) -> Vec<String> {
        read_redo(feed, db, from, None).await
    }

    async fn read_redo(
        feed: &mut OrderFeed,
        db: &Db,
        from: DateTime<Utc>,
        redo: Option<DateTime<Utc>>,
    ) -> Vec<String> {
        let a = ActivityId::parse("a").expect("id");
        let mut tx = db_cut::begin(db, &a).await.expect("snapshot");
        let mut got: Vec<String> = feed
            .read(&mut tx, &a, from, redo)
            .await
            .expect("read")
            .into_iter()
            .map(|c| c.request_id)
            .collect();
        got.sort();
        got
    }

    #[tokio::test]
    async fn a_feed_that_stays_open_counts_its_margin_and_reads_again_only_where_orders_landed() {
        let (_dir, db) = db().await;
        let t0 = Utc::now() - Duration::seconds(60);
        let at = |ms: i64| t0 + Duration::milliseconds(ms);
        // 4,000 orders a millisecond apart: the margin of a busy sale.
        let mut tx = db.begin().await.expect("tx");
        for i in 0..4_000 {
            orders::insert_in_at(&mut tx, &new_order(&format!("r{i:04}")), at(i))
                .await
                .expect("order");
        }
        tx.commit().await.expect("commit");
        let mut feed = OrderFeed::new(true);
        assert_eq!(
            read(&mut feed, &db, at(0)).await.len(),
            4_000,
            "the first read is whole"
        );

        // Nothing new: the margin is counted, not read.
        assert!(read(&mut feed, &db, at(0)).await.is_empty());
        assert_eq!(feed.cost, FeedCost { rows: 0, counts: 1 });

        // An order that lands late, stamped inside the margin, and a new one: both are read,
        // and of the margin only the eighth the late one landed in.
        order(&db, "late", at(2_500)).await;
        order(&db, "new", at(5_000)).await;
        let got = read(&mut feed, &db, at(0)).await;
        assert!(got.contains(&"late".to_string()) && got.contains(&"new".to_string()));
        assert!(got.len() <= 4_000 / 8 + 2, "read {} rows", got.len());
        assert_eq!(feed.cost.counts, 1 + 8);
        assert!(read(&mut feed, &db, at(0)).await.is_empty(), "nothing more");

        // An order deleted inside the margin: its part is read again, and nothing is lost.
        db.execute("DELETE FROM seckill_order WHERE request_id = 'r0100'", &[])
            .await
            .expect("delete");
        let again = read(&mut feed, &db, at(0)).await;
        assert!(!again.is_empty() && !again.contains(&"r0100".to_string()));
        assert!(
            read(&mut feed, &db, at(0)).await.is_empty(),
            "settled again"
        );

        // Forgotten before the margin: a read from later on counts from there.
        feed.forget_before(at(3_000));
        order(&db, "late2", at(3_500)).await;
        let got = read(&mut feed, &db, at(3_000)).await;
        assert!(got.contains(&"late2".to_string()));
        assert!(read(&mut feed, &db, at(3_000)).await.is_empty());
    }

    /// An order that ends inside the counted margin, its expiry committed after a later change
    /// was read: the margin holds as many orders as before, but one more that ended, so the
    /// part it moved in is read again and the expiry is seen (the live view kept such an order
    /// as sold for up to a minute; chaos test, invariant 7).
    #[tokio::test]
    async fn an_expiry_committed_late_inside_the_counted_margin_is_read() {
        let (_dir, db) = db().await;
        let t0 = Utc::now() - Duration::seconds(60);
        let at = |ms: i64| t0 + Duration::milliseconds(ms);
        for (rid, ms) in [("a", 0), ("b", 100), ("c", 900)] {
            order(&db, rid, at(ms)).await;
        }
        let mut feed = OrderFeed::new(true);
        assert_eq!(read(&mut feed, &db, at(0)).await, vec!["a", "b", "c"]);
        // `b` expires, stamped before `c`: the count of orders in the margin is still 3.
        let expired = orders::expire_at(&db, &["b"], at(500))
            .await
            .expect("expire");
        assert_eq!(expired, [true]);
        let a = ActivityId::parse("a").expect("id");
        let mut tx = db_cut::begin(&db, &a).await.expect("snapshot");
        let got = feed.read(&mut tx, &a, at(0), None).await.expect("read");
        drop(tx);
        let b: Vec<(&str, bool)> = got
            .iter()
            .filter(|c| c.request_id == "b")
            .map(|c| (c.request_id.as_str(), c.live))
            .collect();
        assert_eq!(b, [("b", false)], "read: {got:?}");
        assert!(
            read(&mut feed, &db, at(0)).await.is_empty(),
            "settled again"
        );
    }

    /// An order read before its deduction's event (the cut older than the database's read)
    /// is left for the next refresh, which reads it again even when it is the latest change
    /// (a quiet product's first sale: the order was the one new row).
    #[tokio::test]
    async fn a_change_left_for_its_event_is_read_again_even_at_the_latest_stamp() {
        let (_dir, db) = db().await;
        let t0 = Utc::now() - Duration::seconds(60);
        let at = |ms: i64| t0 + Duration::milliseconds(ms);
        order(&db, "a", at(0)).await;
        order(&db, "b", at(500)).await;
        let mut feed = OrderFeed::new(true);
        assert_eq!(read(&mut feed, &db, at(0)).await, vec!["a", "b"]);
        order(&db, "first-sale", at(1_000)).await;
        assert_eq!(read(&mut feed, &db, at(0)).await, vec!["first-sale"]);
        // Left for its event: the next read, told so, gives it again, and only it.
        assert_eq!(
            read_redo(&mut feed, &db, at(0), Some(at(1_000))).await,
            vec!["first-sale"]
        );
        assert!(
            read(&mut feed, &db, at(0)).await.is_empty(),
            "placed: not again"
        );
    }

    #[tokio::test]
    async fn a_feed_read_once_reads_its_margin_whole_and_leaves_out_old_payments() {
        let (_dir, db) = db().await;
        let t0 = Utc::now() - Duration::seconds(60);
        let at = |ms: i64| t0 + Duration::milliseconds(ms);
        order(&db, "old", at(0)).await;
        order(&db, "recent", at(500)).await;
        orders::pay_at(&db, &["old".to_string()], at(600))
            .await
            .expect("pay");
        let mut feed = OrderFeed::new(false);
        assert_eq!(read(&mut feed, &db, at(400)).await, vec!["recent"]);
        assert_eq!(
            read(&mut feed, &db, at(400)).await,
            vec!["recent"],
            "read again"
        );
        assert_eq!(feed.cost.counts, 0);
        // Open, the payment is read too (once), so that the margin's counts agree.
        let mut open = OrderFeed::new(true);
        assert_eq!(read(&mut open, &db, at(400)).await, vec!["old", "recent"]);
        assert!(read(&mut open, &db, at(400)).await.is_empty());
    }
}
