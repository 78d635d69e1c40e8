//! Orders: the sold truth per product, grouped in one query per activity.

use super::{Arg, Backend, Db};
use crate::domain::ActivityId;
use crate::error::Result;
use std::collections::HashMap;

use crate::domain::order::OrderStatus;

/// The SQL condition of the statuses that hold stock ([`OrderStatus::is_live`]).
pub(crate) const LIVE_SQL: &str = "status IN ('pending_payment', 'paid')";

/// Units of live orders per product of an activity (`?`), of an IN list of products (`(...)`)
/// when `some`. Every `status` and `reconcile` sends it, and the live view once a minute: the
/// index `seckill_order_sums` (activity, product, status, quantity; migration 0005) answers it
/// without reading an order's row. Before it, a million orders cost 13.4 s on MariaDB and
/// 1.02 s on SQLite, each row fetched by its key; 0.34 s and 0.11 s from the index alone
/// (`scripts/bench order_sums`, 2026-12-05).
pub fn live_sums_sql(db: &Db, some: bool) -> String {
    let only = if some { " AND product_id IN (...)" } else { "" };
    format!(
        "SELECT product_id, {} FROM seckill_order{} WHERE activity_id = ? AND {LIVE_SQL}{only} \
         GROUP BY product_id",
        db.sum_i64("quantity"),
        sums_index(db)
    )
}

/// Units of orders per product and status of an activity (`?`): the incident report's
/// figures, along the same index.
pub fn sums_by_status_sql(db: &Db) -> String {
    format!(
        "SELECT product_id, status, {} FROM seckill_order{} WHERE activity_id = ? \
         GROUP BY product_id, status",
        db.sum_i64("quantity"),
        sums_index(db)
    )
}

/// The index the sums name on MySQL/MariaDB, whose planner takes the (activity, product,
/// created_at) index for an IN list that holds a hot product and fetches each order's row:
/// 1.53 s against 0.19 s along `seckill_order_sums` for half a million orders (2026-12-05).
fn sums_index(db: &Db) -> &'static str {
    match db.backend() {
        Backend::MySql => " FORCE INDEX (seckill_order_sums)",
        _ => "",
    }
}

/// True for a status that holds stock.
pub fn is_live(status: &str) -> bool {
    OrderStatus::spelled_live(status)
}

/// `db_sold` per product: the units of live orders. Products without orders are absent.
pub async fn sold_by_product(db: &Db, activity: &ActivityId) -> Result<HashMap<String, i64>> {
    sold(db, activity, None).await
}

/// `db_sold` per product, of `products` only when given (so a fix of one product of a huge
/// activity does not add up every order).
pub async fn sold(
    db: &Db,
    activity: &ActivityId,
    products: Option<&[&str]>,
) -> Result<HashMap<String, i64>> {
    let args = [Arg::from(activity.as_str())];
    let rows: Vec<(String, i64)> = match products {
        None => db.fetch_all_as(&live_sums_sql(db, false), &args).await,
        Some(ids) => db.fetch_all_in(&live_sums_sql(db, true), &args, ids).await,
    }
    .map_err(|e| db.error(&e))?;
    Ok(rows.into_iter().collect())
}

/// Buyers (per product) whose live orders hold more than the product's per-user limit: a drill's
/// check after the run (`load`), which reads the activity's live orders grouped by buyer.
pub async fn buyers_over_limit(db: &Db, activity: &ActivityId) -> Result<i64> {
    let row: Option<(i64,)> = db
        .fetch_optional_as(
            &format!(
                "SELECT COUNT(*) FROM (SELECT o.product_id, o.user_id FROM seckill_order o \
                 JOIN seckill_product p ON p.activity_id = o.activity_id AND p.product_id = o.product_id \
                 WHERE o.activity_id = ? AND o.{LIVE_SQL} \
                 GROUP BY o.product_id, o.user_id, p.per_user_limit \
                 HAVING SUM(o.quantity) > p.per_user_limit) over_limit"
            ),
            &[activity.as_str().into()],
        )
        .await
        .map_err(|e| db.error(&e))?;
    Ok(row.map_or(0, |(n,)| n))
}

/// The order of a request id: its product and status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrderOf {
    pub product: String,
    pub status: String,
}

impl OrderOf {
    /// True when it is an order of `product` that holds stock: only such an order backs a
    /// deduction of that product (a request id used on two products has one order, which backs
    /// the other product's deduction at most).
    pub fn live_in(&self, product: &str) -> bool {
        self.product == product && is_live(&self.status)
    }
}

/// The order of each request id that has one, with its product.
pub async fn statuses(
    db: &Db,
    activity: &ActivityId,
    request_ids: &[&str],
) -> Result<HashMap<String, OrderOf>> {
    let rows: Vec<(String, String, String)> = db
        .fetch_all_in(
            "SELECT request_id, product_id, status FROM seckill_order WHERE activity_id = ? AND request_id IN (...)",
            &[activity.as_str().into()],
            request_ids,
        )
        .await
        .map_err(|e| db.error(&e))?;
    Ok(rows
        .into_iter()
        .map(|(rid, product, status)| (rid, OrderOf { product, status }))
        .collect())
}

/// Orders written or changed since `since`, per activity of `activities`: how busy each is
/// now. A range of the `(activity_id, updated_at)` index per activity, so it reads the last
/// minute's orders, never the sale's.
pub async fn recent_by_activity(
    db: &Db,
    activities: &[&str],
    since: chrono::DateTime<chrono::Utc>,
) -> Result<HashMap<String, i64>> {
    let mut out = HashMap::new();
    for a in activities {
        let row: Option<(i64,)> = db
            .fetch_optional_as(
                "SELECT COUNT(*) FROM seckill_order WHERE activity_id = ? AND updated_at >= ?",
                &[(*a).into(), Arg::Time(since)],
            )
            .await
            .map_err(|e| db.error(&e))?;
        out.insert((*a).to_string(), row.map_or(0, |(n,)| n));
    }
    Ok(out)
}

/// Orders of one status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrderCount {
    pub status: String,
    pub orders: i64,
}

/// Orders a product's detail counts at most: a product of a million sales is looked at during
/// the sale, and its count must not walk a million rows.
pub const STATUS_COUNT_CAP: i64 = 100_000;

/// The orders of one product by status, counted up to [`STATUS_COUNT_CAP`] in all (then the
/// counts are "at least"; true in the second place), from the `(activity, product, status)`
/// index alone: an operator's one-off look (the detail), never a refresh's. Units sold are in
/// the product's counters.
pub async fn by_status(
    db: &Db,
    activity: &ActivityId,
    product: &str,
) -> Result<(Vec<OrderCount>, bool)> {
    let sql = format!(
        "SELECT status, COUNT(*) FROM (SELECT status FROM seckill_order \
         WHERE activity_id = ? AND product_id = ? LIMIT {}) capped \
         GROUP BY status ORDER BY status",
        STATUS_COUNT_CAP + 1
    );
    let rows: Vec<(String, i64)> = db
        .fetch_all_as(&sql, &[activity.as_str().into(), product.into()])
        .await
        .map_err(|e| db.error(&e))?;
    let counted: i64 = rows.iter().map(|(_, n)| n).sum();
    Ok((
        rows.into_iter()
            .map(|(status, orders)| OrderCount { status, orders })
            .collect(),
        counted > STATUS_COUNT_CAP,
    ))
}

/// An order to write after a successful deduction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewOrder {
    pub order_id: String,
    pub request_id: String,
    pub activity_id: String,
    pub product_id: String,
    pub user_id: String,
    pub quantity: i64,
    pub status: OrderStatus,
}

/// The outbox topic of order events.
pub const ORDER_TOPIC: &str = "seckill.order.created";

/// The values of one order's row and of its outbox message's.
const ORDER_COLUMNS: usize = 9;
const OUTBOX_VALUES: usize = 5;

fn order_args(o: &NewOrder, now: chrono::DateTime<chrono::Utc>) -> [Arg; ORDER_COLUMNS] {
    [
        o.order_id.clone().into(),
        o.request_id.clone().into(),
        o.activity_id.clone().into(),
        o.product_id.clone().into(),
        o.user_id.clone().into(),
        Arg::Int(o.quantity),
        o.status.as_str().into(),
        Arg::Time(now),
        Arg::Time(now),
    ]
}

const INSERT_ORDER: &str = "INSERT INTO seckill_order \
    (order_id, request_id, activity_id, product_id, user_id, quantity, status, created_at, updated_at) \
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)";
const INSERT_OUTBOX: &str = "INSERT INTO seckill_outbox \
    (order_id, activity_id, topic, payload, status, attempts, created_at) VALUES (?, ?, ?, ?, 'pending', 0, ?)";

/// The outbox message's body. A struct of borrowed fields, not a `json!` map: the order
/// writer builds one per sale (the map cost a tree and a copy of every id). The fields are in
/// the map's (alphabetical) order, so the message reads as it always did.
#[derive(serde::Serialize)]
struct OutboxPayload<'a> {
    activity_id: &'a str,
    order_id: &'a str,
    product_id: &'a str,
    quantity: i64,
    request_id: &'a str,
    user_id: &'a str,
}

fn outbox_payload(o: &NewOrder) -> String {
    serde_json::to_string(&OutboxPayload {
        activity_id: &o.activity_id,
        order_id: &o.order_id,
        product_id: &o.product_id,
        quantity: o.quantity,
        request_id: &o.request_id,
        user_id: &o.user_id,
    })
    .unwrap_or_default()
}

/// Writes orders and their outbox messages in one transaction (the local message table: an
/// order never exists without its message, nor a message without its order).
pub async fn insert_with_outbox(
    db: &Db,
    batch: &[NewOrder],
) -> std::result::Result<(), sqlx::Error> {
    insert_with_outbox_at(db, batch, chrono::Utc::now()).await
}

/// [`insert_with_outbox`] with the orders stamped `now` (an app server whose clock is off).
pub async fn insert_with_outbox_at(
    db: &Db,
    batch: &[NewOrder],
    now: chrono::DateTime<chrono::Utc>,
) -> std::result::Result<(), sqlx::Error> {
    let mut tx = db.begin().await?;
    // Multi-row statements: each statement is a hand-over to SQLite's worker thread (a round
    // trip on the other backends), and two per order was what bounded `load`'s order writer.
    for chunk in batch.chunks(ROWS_PER_INSERT) {
        // Sized once: collected through `flat_map` these grew by reallocation, a tenth of the
        // order writer's time at 50,000 sales a second.
        let mut orders: Vec<Arg> = Vec::with_capacity(chunk.len() * ORDER_COLUMNS);
        let mut messages: Vec<Arg> = Vec::with_capacity(chunk.len() * OUTBOX_VALUES);
        for o in chunk {
            orders.extend(order_args(o, now));
            messages.extend(outbox_args(o, now));
        }
        tx.execute(&values_rows(INSERT_ORDER, chunk.len()), &orders)
            .await?;
        tx.execute(&values_rows(INSERT_OUTBOX, chunk.len()), &messages)
            .await?;
    }
    tx.commit().await
}

/// Orders per multi-row INSERT: 900 bound values, far below every backend's limit.
const ROWS_PER_INSERT: usize = 100;

/// `insert` (one `VALUES (...)` row) with its row repeated `rows` times.
fn values_rows(insert: &str, rows: usize) -> String {
    match insert.split_once("VALUES ") {
        Some((head, row)) => format!("{head}VALUES {}", vec![row; rows].join(", ")),
        None => insert.to_string(),
    }
}

/// Writes one order and its outbox message inside the caller's transaction.
pub async fn insert_in(tx: &mut super::Tx, o: &NewOrder) -> std::result::Result<(), sqlx::Error> {
    insert_in_at(tx, o, chrono::Utc::now()).await
}

/// [`insert_in`] with the order stamped `now`.
pub async fn insert_in_at(
    tx: &mut super::Tx,
    o: &NewOrder,
    now: chrono::DateTime<chrono::Utc>,
) -> std::result::Result<(), sqlx::Error> {
    tx.execute(INSERT_ORDER, &order_args(o, now)).await?;
    tx.execute(INSERT_OUTBOX, &outbox_args(o, now)).await?;
    Ok(())
}

fn outbox_args(o: &NewOrder, now: chrono::DateTime<chrono::Utc>) -> [Arg; OUTBOX_VALUES] {
    [
        o.order_id.clone().into(),
        o.activity_id.clone().into(),
        ORDER_TOPIC.into(),
        outbox_payload(o).into(),
        Arg::Time(now),
    ]
}

/// Marks orders still in `pending_payment` as `paid`; returns how many changed.
pub async fn pay(db: &Db, request_ids: &[String]) -> Result<u64> {
    pay_at(db, request_ids, chrono::Utc::now()).await
}

/// [`pay`], stamped `now`.
pub async fn pay_at(
    db: &Db,
    request_ids: &[String],
    now: chrono::DateTime<chrono::Utc>,
) -> Result<u64> {
    let ids: Vec<&str> = request_ids.iter().map(String::as_str).collect();
    db.execute_in(
        "UPDATE seckill_order SET status = 'paid', updated_at = ? \
         WHERE status = 'pending_payment' AND request_id IN (...)",
        &[Arg::Time(now)],
        &ids,
    )
    .await
    .map_err(|e| db.error(&e))
}

/// Marks one order `expired` if it is still unpaid; true when it changed (then, and only
/// then, its stock goes back through the restore script).
pub async fn expire(db: &Db, request_id: &str) -> Result<bool> {
    let changed = expire_at(db, &[request_id], chrono::Utc::now()).await?;
    Ok(changed.first().copied().unwrap_or(false))
}

/// Marks the orders still in `pending_payment` among `request_ids` as `expired`, in one
/// transaction; returns, per request id in order, whether it changed (then, and only then, its
/// stock goes back through the restore script). One commit for the batch: a commit per order
/// (an fsync each on SQLite) was what held `load` back once expiries came at buyers' pace.
pub async fn expire_at(
    db: &Db,
    request_ids: &[&str],
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Vec<bool>> {
    let err = |e: sqlx::Error| db.error(&e);
    let mut tx = db.begin().await.map_err(err)?;
    let mut changed = Vec::with_capacity(request_ids.len());
    for id in request_ids {
        let n = tx
            .execute(
                "UPDATE seckill_order SET status = 'expired', updated_at = ? \
                 WHERE status = 'pending_payment' AND request_id = ?",
                &[Arg::Time(now), (*id).into()],
            )
            .await
            .map_err(err)?;
        changed.push(n > 0);
    }
    tx.commit().await.map_err(err)?;
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_multi_row_insert_repeats_the_values_row() {
        assert_eq!(
            values_rows("INSERT INTO t (a, b) VALUES (?, ?)", 3),
            "INSERT INTO t (a, b) VALUES (?, ?), (?, ?), (?, ?)"
        );
        let sql = values_rows(INSERT_OUTBOX, 2);
        assert_eq!(sql.matches('?').count(), 10, "{sql}");
        assert!(sql.contains("'pending', 0, ?), ("), "{sql}");
    }

    #[test]
    fn the_outbox_message_names_the_order_in_its_fixed_field_order() {
        let o = NewOrder {
            order_id: "o-1".into(),
            request_id: "r\"1".into(),
            activity_id: "A".into(),
            product_id: "P".into(),
            user_id: "u\\9".into(),
            quantity: 2,
            status: OrderStatus::PendingPayment,
        };
        // The shop's consumers read this body: the fields and their order are as they were
        // when it was a `json!` map, and a quote in an id is escaped.
        assert_eq!(
            outbox_payload(&o),
            r#"{"activity_id":"A","order_id":"o-1","product_id":"P","quantity":2,"request_id":"r\"1","user_id":"u\\9"}"#
        );
        assert_eq!(order_args(&o, chrono::Utc::now()).len(), ORDER_COLUMNS);
        assert_eq!(
            values_rows(INSERT_ORDER, 1).matches('?').count(),
            ORDER_COLUMNS
        );
        assert_eq!(
            values_rows(INSERT_OUTBOX, 1).matches('?').count(),
            OUTBOX_VALUES
        );
    }
}
