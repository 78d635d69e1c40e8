//! Orders: the sold truth per product, grouped in one query per activity.

use super::{Arg, Db};
use crate::domain::ActivityId;
use crate::error::Result;
use std::collections::{HashMap, HashSet};

/// Order statuses that hold stock: the order counts as sold.
pub const LIVE_STATUSES: [&str; 2] = ["pending_payment", "paid"];
/// Every status an order may have.
pub const ORDER_STATUSES: [&str; 4] = ["pending_payment", "paid", "cancelled", "expired"];

const LIVE_SQL: &str = "status IN ('pending_payment', 'paid')";

/// `db_sold` per product: the units of live orders. Products without orders are absent.
pub async fn sold_by_product(db: &Db, activity: &ActivityId) -> Result<HashMap<String, i64>> {
    let sql = format!(
        "SELECT product_id, {} FROM seckill_order WHERE activity_id = ? AND {LIVE_SQL} GROUP BY product_id",
        db.sum_i64("quantity")
    );
    let rows: Vec<(String, i64)> = db
        .fetch_all_as(&sql, &[activity.as_str().into()])
        .await
        .map_err(|e| db.error(&e))?;
    Ok(rows.into_iter().collect())
}

/// The live orders of one product: their units and request ids, read in one statement so the
/// two agree.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LiveOrders {
    pub units: i64,
    pub request_ids: HashSet<String>,
}

/// Live orders per product; limited to `products` when given (small sets use an IN list,
/// larger ones read the whole activity once).
pub async fn live_orders(
    db: &Db,
    activity: &ActivityId,
    products: Option<&[&str]>,
) -> Result<HashMap<String, LiveOrders>> {
    let mut args: Vec<Arg> = vec![activity.as_str().into()];
    let mut sql = format!(
        "SELECT product_id, request_id, quantity FROM seckill_order WHERE activity_id = ? AND {LIVE_SQL}"
    );
    let filter: Option<HashSet<&str>> = products.map(|p| p.iter().copied().collect());
    if let Some(p) = products
        && !p.is_empty()
        && p.len() <= 500
    {
        sql.push_str(&format!(
            " AND product_id IN ({})",
            vec!["?"; p.len()].join(", ")
        ));
        args.extend(p.iter().map(|id| Arg::from(*id)));
    }
    let rows: Vec<(String, String, i64)> = db
        .fetch_all_as(&sql, &args)
        .await
        .map_err(|e| db.error(&e))?;
    let mut out: HashMap<String, LiveOrders> = HashMap::new();
    for (product, rid, quantity) in rows {
        if filter
            .as_ref()
            .is_some_and(|f| !f.contains(product.as_str()))
        {
            continue;
        }
        let entry = out.entry(product).or_default();
        entry.units += quantity;
        entry.request_ids.insert(rid);
    }
    Ok(out)
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
    pub status: String,
}

/// The outbox topic of order events.
pub const ORDER_TOPIC: &str = "seckill.order.created";

fn order_args(o: &NewOrder, now: chrono::DateTime<chrono::Utc>) -> Vec<Arg> {
    vec![
        o.order_id.clone().into(),
        o.request_id.clone().into(),
        o.activity_id.clone().into(),
        o.product_id.clone().into(),
        o.user_id.clone().into(),
        Arg::Int(o.quantity),
        o.status.clone().into(),
        Arg::Time(now),
        Arg::Time(now),
    ]
}

const INSERT_ORDER: &str = "INSERT INTO seckill_order \
    (order_id, request_id, activity_id, product_id, user_id, quantity, status, created_at, updated_at) \
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)";
const INSERT_OUTBOX: &str = "INSERT INTO seckill_outbox \
    (order_id, activity_id, topic, payload, status, attempts, created_at) VALUES (?, ?, ?, ?, 'pending', 0, ?)";

fn outbox_payload(o: &NewOrder) -> String {
    serde_json::json!({
        "order_id": o.order_id,
        "request_id": o.request_id,
        "activity_id": o.activity_id,
        "product_id": o.product_id,
        "user_id": o.user_id,
        "quantity": o.quantity,
    })
    .to_string()
}

/// Writes orders and their outbox messages in one transaction (the local message table: an
/// order never exists without its message, nor a message without its order).
pub async fn insert_with_outbox(
    db: &Db,
    batch: &[NewOrder],
) -> std::result::Result<(), sqlx::Error> {
    let mut tx = db.begin().await?;
    for o in batch {
        insert_in(&mut tx, o).await?;
    }
    tx.commit().await
}

/// Writes one order and its outbox message inside the caller's transaction.
pub async fn insert_in(tx: &mut super::Tx, o: &NewOrder) -> std::result::Result<(), sqlx::Error> {
    let now = chrono::Utc::now();
    tx.execute(INSERT_ORDER, &order_args(o, now)).await?;
    tx.execute(
        INSERT_OUTBOX,
        &[
            o.order_id.clone().into(),
            o.activity_id.clone().into(),
            ORDER_TOPIC.into(),
            outbox_payload(o).into(),
            Arg::Time(now),
        ],
    )
    .await?;
    Ok(())
}

/// Marks orders still in `pending_payment` as `paid`; returns how many changed.
pub async fn pay(db: &Db, request_ids: &[String]) -> Result<u64> {
    let mut changed = 0;
    for chunk in request_ids.chunks(500) {
        let marks = vec!["?"; chunk.len()].join(", ");
        let mut args: Vec<Arg> = vec![Arg::Time(chrono::Utc::now())];
        args.extend(chunk.iter().map(|r| Arg::from(r.as_str())));
        changed += db
            .execute(
                &format!(
                    "UPDATE seckill_order SET status = 'paid', updated_at = ? \
                     WHERE status = 'pending_payment' AND request_id IN ({marks})"
                ),
                &args,
            )
            .await
            .map_err(|e| db.error(&e))?;
    }
    Ok(changed)
}

/// Marks one order `expired` if it is still unpaid; true when it changed (then, and only
/// then, its stock goes back through the restore script).
pub async fn expire(db: &Db, request_id: &str) -> Result<bool> {
    let n = db
        .execute(
            "UPDATE seckill_order SET status = 'expired', updated_at = ? \
             WHERE status = 'pending_payment' AND request_id = ?",
            &[Arg::Time(chrono::Utc::now()), request_id.into()],
        )
        .await
        .map_err(|e| db.error(&e))?;
    Ok(n > 0)
}
