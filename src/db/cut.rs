//! The database side of a cut: queries run inside one read snapshot ([`Db::begin_read`]), none
//! of which returns every order of a product: a sum per product, lookups of given request ids
//! (IN lists), and pages of a bounded size along an index.

use super::stamp::DbTime;
use super::{Arg, Db, Tx};
use crate::domain::ActivityId;
use crate::domain::books::OrderState;
use crate::domain::order::OrderStatus;
use crate::error::Result;
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use std::ops::{Bound, RangeBounds};

/// Rows per page of an index walk.
pub const PAGE: i64 = 1000;

use super::orders::{LIVE_SQL, live_sums_sql};

/// Opens the read snapshot and takes it at once (a first read pins it on every backend, so it
/// is taken after whatever the caller read before), mapping a failure to the console's error.
pub async fn begin(db: &Db, activity: &ActivityId) -> Result<Tx> {
    let mut tx = db.begin_read().await.map_err(|e| db.error(&e))?;
    let _: Vec<(i64,)> = tx
        .fetch_all_as(
            "SELECT COUNT(*) FROM seckill_activity WHERE activity_id = ?",
            &[activity.as_str().into()],
        )
        .await
        .map_err(|e| db.error(&e))?;
    Ok(tx)
}

/// Units of live orders per product (of `products` only, when given). One grouped sum: the
/// database reads the orders' index, the console gets a row per product.
pub async fn live_units(
    tx: &mut Tx,
    activity: &ActivityId,
    products: Option<&[&str]>,
) -> Result<HashMap<String, i64>> {
    let args = [Arg::from(activity.as_str())];
    let rows: Vec<(String, i64)> = match products {
        None => tx.fetch_all_as(&live_sums_sql(tx.db(), false), &args).await,
        Some(ids) => {
            tx.fetch_all_in(&live_sums_sql(tx.db(), true), &args, ids)
                .await
        }
    }
    .map_err(|e| tx.db().error(&e))?;
    Ok(rows.into_iter().collect())
}

/// What the orders of `rids` say (absent ids are [`OrderState::Missing`] and left out), with
/// each order's product.
pub async fn lookup(
    tx: &mut Tx,
    activity: &ActivityId,
    rids: &[&str],
) -> Result<HashMap<String, (String, OrderState)>> {
    if rids.is_empty() {
        return Ok(HashMap::new());
    }
    let rows: Vec<(String, String, i64, String, DbTime)> = tx
        .fetch_all_in(
            "SELECT request_id, product_id, quantity, status, updated_at FROM seckill_order \
             WHERE activity_id = ? AND request_id IN (...)",
            &[activity.as_str().into()],
            rids,
        )
        .await
        .map_err(|e| tx.db().error(&e))?;
    Ok(rows
        .into_iter()
        .map(|(rid, product, quantity, status, at)| {
            let state = if OrderStatus::spelled_live(&status) {
                OrderState::Live(quantity)
            } else {
                OrderState::Dead {
                    quantity,
                    at_ms: at.0.timestamp_millis(),
                }
            };
            (rid, (product, state))
        })
        .collect())
}

/// Where an index walk of orders stands: the last row's time and request id.
pub type Mark = (DateTime<Utc>, String);

/// A live order as a page of them shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiveOrder {
    pub request_id: String,
    pub user_id: String,
    pub quantity: i64,
    /// Where the next page starts.
    pub mark: Mark,
}

/// One page of a product's live orders, newest first (by creation), after `mark`.
pub async fn live_page(
    tx: &mut Tx,
    activity: &ActivityId,
    product: &str,
    mark: Option<&Mark>,
) -> Result<Vec<LiveOrder>> {
    let (sql, args) = live_page_sql(activity, product, mark);
    let rows: Vec<(String, String, i64, DbTime)> = tx
        .fetch_all_as(&sql, &args)
        .await
        .map_err(|e| tx.db().error(&e))?;
    Ok(live_orders(rows))
}

/// [`live_page`] outside a snapshot (for a walk that writes as it goes).
pub async fn live_page_now(
    db: &Db,
    activity: &ActivityId,
    product: &str,
    mark: Option<&Mark>,
) -> Result<Vec<LiveOrder>> {
    let (sql, args) = live_page_sql(activity, product, mark);
    let rows: Vec<(String, String, i64, DbTime)> = db
        .fetch_all_as(&sql, &args)
        .await
        .map_err(|e| db.error(&e))?;
    Ok(live_orders(rows))
}

fn live_page_sql(activity: &ActivityId, product: &str, mark: Option<&Mark>) -> (String, Vec<Arg>) {
    let mut sql = format!(
        "SELECT request_id, user_id, quantity, created_at FROM seckill_order \
         WHERE activity_id = ? AND product_id = ? AND {LIVE_SQL}"
    );
    let mut args = vec![Arg::from(activity.as_str()), Arg::from(product)];
    // The first condition bounds the index range (an OR alone makes some planners scan from
    // the start for every page); the second skips the rows of the mark's own instant already
    // read.
    if let Some((at, rid)) = mark {
        sql.push_str(" AND created_at <= ? AND (created_at < ? OR request_id < ?)");
        args.extend([Arg::Time(*at), Arg::Time(*at), Arg::from(rid.as_str())]);
    }
    sql.push_str(&format!(
        " ORDER BY created_at DESC, request_id DESC LIMIT {PAGE}"
    ));
    (sql, args)
}

fn live_orders(rows: Vec<(String, String, i64, DbTime)>) -> Vec<LiveOrder> {
    rows.into_iter()
        .map(|(request_id, user_id, quantity, at)| LiveOrder {
            mark: (at.0, request_id.clone()),
            request_id,
            user_id,
            quantity,
        })
        .collect()
}

/// The user of each request's order.
pub async fn users(
    db: &Db,
    activity: &ActivityId,
    rids: &[&str],
) -> Result<HashMap<String, String>> {
    let rows: Vec<(String, String)> = db
        .fetch_all_in(
            "SELECT request_id, user_id FROM seckill_order WHERE activity_id = ? AND request_id IN (...)",
            &[activity.as_str().into()],
            rids,
        )
        .await
        .map_err(|e| db.error(&e))?;
    Ok(rows.into_iter().collect())
}

/// An order that changed (created, paid, cancelled or expired).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    pub product: String,
    pub request_id: String,
    pub quantity: i64,
    pub live: bool,
    /// When the order changed (`updated_at`).
    pub at: DateTime<Utc>,
    /// When the order was written (`created_at`).
    pub created: DateTime<Utc>,
}

/// Which changed orders a read of the feed takes: stamped within `lo` and `hi`, leaving out
/// live orders created before `created_since` (when given: their change is a payment, which
/// moves nothing in the books).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    pub lo: Bound<DateTime<Utc>>,
    pub hi: Bound<DateTime<Utc>>,
    pub created_since: Option<DateTime<Utc>>,
}

impl Span {
    /// Every change stamped within `lo` and `hi`.
    pub fn between(lo: Bound<DateTime<Utc>>, hi: Bound<DateTime<Utc>>) -> Self {
        Span {
            lo,
            hi,
            created_since: None,
        }
    }

    /// Whether a change stamped `at` is within the span's stamps.
    pub fn holds(&self, at: &DateTime<Utc>) -> bool {
        (self.lo, self.hi).contains(at)
    }

    /// The `WHERE` clause after `activity_id = ?`, and its arguments.
    fn clause(&self) -> (String, Vec<Arg>) {
        let mut sql = String::new();
        let mut args = Vec::new();
        for (bound, incl, excl) in [(self.lo, ">=", ">"), (self.hi, "<=", "<")] {
            match bound {
                Bound::Included(t) => {
                    sql.push_str(&format!(" AND updated_at {incl} ?"));
                    args.push(Arg::Time(t));
                }
                Bound::Excluded(t) => {
                    sql.push_str(&format!(" AND updated_at {excl} ?"));
                    args.push(Arg::Time(t));
                }
                Bound::Unbounded => {}
            }
        }
        if let Some(created) = self.created_since {
            sql.push_str(&format!(" AND (created_at >= ? OR NOT {LIVE_SQL})"));
            args.push(Arg::Time(created));
        }
        (sql, args)
    }
}

/// One page of the activity's orders in `span` (oldest change first), after `mark`: what
/// changed, along the index on `updated_at`.
pub async fn changes_page(
    tx: &mut Tx,
    activity: &ActivityId,
    span: &Span,
    mark: Option<&Mark>,
) -> Result<Vec<Change>> {
    let (clause, rest) = span.clause();
    let mut sql = format!(
        "SELECT product_id, request_id, quantity, status, updated_at, created_at \
         FROM seckill_order WHERE activity_id = ?{clause}"
    );
    let mut args = vec![Arg::from(activity.as_str())];
    args.extend(rest);
    if let Some((at, rid)) = mark {
        sql.push_str(" AND updated_at >= ? AND (updated_at > ? OR request_id > ?)");
        args.extend([Arg::Time(*at), Arg::Time(*at), Arg::from(rid.as_str())]);
    }
    sql.push_str(&format!(" ORDER BY updated_at, request_id LIMIT {PAGE}"));
    type Row = (String, String, i64, String, DbTime, DbTime);
    let rows: Vec<Row> = tx
        .fetch_all_as(&sql, &args)
        .await
        .map_err(|e| tx.db().error(&e))?;
    Ok(rows
        .into_iter()
        .map(
            |(product, request_id, quantity, status, at, created)| Change {
                product,
                request_id,
                quantity,
                live: OrderStatus::spelled_live(&status),
                at: at.0,
                created: created.0,
            },
        )
        .collect())
}

/// How many orders of the activity changed within `span` (its `created_since` ignored).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ChangeCount {
    pub orders: i64,
    /// Of them, the orders that ended (cancelled or expired): an order that died inside a
    /// span moves its stamp without changing how many orders the span holds.
    pub dead: i64,
}

/// The SQL of [`count_changes`] (one `?` for the activity, then the span's).
pub fn count_changes_sql(db: &crate::db::Db, clause: &str) -> String {
    let dead = db.sum_i64(&format!("CASE WHEN {LIVE_SQL} THEN 0 ELSE 1 END"));
    format!("SELECT COUNT(*), {dead} FROM seckill_order WHERE activity_id = ?{clause}")
}

/// How many orders of the activity changed within `span` (its `created_since` ignored), and
/// how many of them ended, counted by the database along its index on `updated_at` (which
/// holds the status, migration 0006) alone: no row is read.
pub async fn count_changes(tx: &mut Tx, activity: &ActivityId, span: &Span) -> Result<ChangeCount> {
    let span = Span {
        created_since: None,
        ..*span
    };
    let (clause, rest) = span.clause();
    let mut args = vec![Arg::from(activity.as_str())];
    args.extend(rest);
    let sql = count_changes_sql(tx.db(), &clause);
    let rows: Vec<(i64, i64)> = tx
        .fetch_all_as(&sql, &args)
        .await
        .map_err(|e| tx.db().error(&e))?;
    Ok(rows
        .into_iter()
        .next()
        .map_or(ChangeCount::default(), |(orders, dead)| ChangeCount {
            orders,
            dead,
        }))
}

/// The latest change of any order of the activity (an index seek): where a feed of changes
/// starts.
pub async fn latest_change(tx: &mut Tx, activity: &ActivityId) -> Result<Option<DateTime<Utc>>> {
    let rows: Vec<(Option<DbTime>,)> = tx
        .fetch_all_as(
            "SELECT MAX(updated_at) FROM seckill_order WHERE activity_id = ?",
            &[activity.as_str().into()],
        )
        .await
        .map_err(|e| tx.db().error(&e))?;
    Ok(rows.into_iter().next().and_then(|(t,)| t).map(|t| t.0))
}
