//! The state of one activity, read once: the database truth (one grouped query) and Redis (one
//! pipeline per node), joined per product. Preheat, status, reconcile and fix all start here.

use crate::db::{Db, activity as activities, orders};
use crate::domain::stock::{ProductStatus, Truth, unbacked};
use crate::domain::{Activity, ActivityId, Product};
use crate::error::{Error, Result};
use crate::redis::product_state::{ProductState, read_ledgers, read_states};
use crate::redis::{KeySpace, ProductKeys, RedisStore};
use chrono::{DateTime, Utc};
use std::collections::HashSet;
use std::time::Duration;

/// One product: its database row, its keys, what Redis holds, the truth and the verdict.
#[derive(Clone, Debug)]
pub struct ProductView {
    pub product: Product,
    pub keys: ProductKeys,
    pub redis: ProductState,
    pub truth: Truth,
    pub status: ProductStatus,
    /// Request ids of orphaned deductions (no live order, older than the grace window).
    pub orphans: Vec<String>,
    /// Units of active ledger entries, when the ledger was read (slow path).
    pub ledger_active_units: Option<i64>,
}

/// An activity's state at one moment.
#[derive(Clone, Debug)]
pub struct Snapshot {
    pub activity: Activity,
    pub products: Vec<ProductView>,
    pub taken_at: DateTime<Utc>,
}

/// Reads the activity's truth and Redis state. `only` limits it to some products (bad ids in it
/// are an error naming them).
pub async fn take(
    redis: &RedisStore,
    db: &Db,
    keys: &KeySpace,
    activity_id: &ActivityId,
    grace: Duration,
    only: Option<&[String]>,
) -> Result<Snapshot> {
    let t0 = std::time::Instant::now();
    let activity = activities::require(db, activity_id).await?;
    let mut products = activities::products(db, activity_id).await?;
    if let Some(only) = only {
        let wanted: HashSet<&str> = only.iter().map(String::as_str).collect();
        let known: HashSet<&str> = products.iter().map(|p| p.product_id.as_str()).collect();
        let unknown: Vec<&&str> = wanted.iter().filter(|p| !known.contains(**p)).collect();
        if !unknown.is_empty() {
            return Err(Error::bad_input(format!(
                "product '{}' is not in activity '{activity_id}': see `seckill-console activity show {activity_id}`",
                unknown[0]
            )));
        }
        products.retain(|p| wanted.contains(p.product_id.as_str()));
    }
    tracing::debug!(
        ms = t0.elapsed().as_millis() as u64,
        n = products.len(),
        "snapshot: products read"
    );
    let sold = orders::sold_by_product(db, activity_id).await?;
    let product_keys: Vec<ProductKeys> = products
        .iter()
        .map(|p| keys.product(activity_id, &p.product_id))
        .collect();
    let states = read_states(redis, &product_keys, true)
        .await
        .map_err(|e| redis.error(&e))?;
    let taken_at = Utc::now();
    tracing::debug!(ms = t0.elapsed().as_millis() as u64, "snapshot: redis read");

    // Fast path: when the scripts' counters say that exactly the live orders' units are
    // deducted, every ledger entry is backed by an order and the ledger need not be read.
    let db_sold = |p: &Product| sold.get(p.product_id.as_str()).copied().unwrap_or(0);
    let slow: Vec<usize> = products
        .iter()
        .zip(&states)
        .enumerate()
        .filter(|(_, (p, s))| {
            let ledger_len = s.ledger_len.unwrap_or(0);
            ledger_len > 0
                && !(s.meta.present
                    && s.meta.corrupt.is_none()
                    && s.meta.active_units() == Some(db_sold(p)))
        })
        .map(|(i, _)| i)
        .collect();

    let mut ledgers = vec![None; products.len()];
    if !slow.is_empty() {
        let slow_keys: Vec<&ProductKeys> = slow.iter().map(|&i| &product_keys[i]).collect();
        let read = read_ledgers(redis, &slow_keys)
            .await
            .map_err(|e| redis.error(&e))?;
        let ids: Vec<&str> = slow
            .iter()
            .map(|&i| products[i].product_id.as_str())
            .collect();
        let live = orders::live_request_ids(db, activity_id, Some(&ids)).await?;
        let now_ms = taken_at.timestamp_millis();
        let grace_ms = i64::try_from(grace.as_millis()).unwrap_or(i64::MAX);
        for (&i, (entries, _bad)) in slow.iter().zip(read) {
            let backed = live.get(products[i].product_id.as_str());
            let u = unbacked(
                &entries,
                |rid| backed.is_some_and(|b| b.contains(rid)),
                now_ms,
                grace_ms,
            );
            let active: i64 = entries
                .iter()
                .filter(|e| !e.returned)
                .map(|e| e.quantity)
                .sum();
            ledgers[i] = Some((u, active));
        }
    }

    let views = products
        .into_iter()
        .zip(product_keys)
        .zip(states)
        .zip(ledgers)
        .map(|(((product, keys), state), ledger)| {
            let sold = db_sold(&product);
            let (in_flight, orphaned, orphans, active) = match ledger {
                Some((u, active)) => (u.in_flight, u.orphaned, u.orphans, Some(active)),
                None => (0, 0, Vec::new(), None),
            };
            let truth = Truth::new(product.initial_stock, sold, in_flight, orphaned);
            let status = ProductStatus::build(
                product.product_id.as_str(),
                product.per_user_limit,
                &state.stock,
                &state.meta,
                truth,
            );
            ProductView {
                product,
                keys,
                redis: state,
                truth,
                status,
                orphans,
                ledger_active_units: active,
            }
        })
        .collect();
    Ok(Snapshot {
        activity,
        products: views,
        taken_at,
    })
}
