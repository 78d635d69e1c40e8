//! The state of one activity, read once: Redis (one pipeline per node) and the database truth
//! (grouped queries), joined per product. Preheat, status, reconcile and fix all start here.
//!
//! Redis is read before the database, and a product's stock before anything else of it: every
//! later deduction or restore then changes the stock that was read, so a compare-and-set built
//! on this snapshot fails instead of overwriting it.

use crate::db::orders::LiveOrders;
use crate::db::{Db, activity as activities, orders};
use crate::domain::stock::{LedgerEntry, ProductStatus, Truth, unbacked};
use crate::domain::{Activity, ActivityId, Product};
use crate::error::{Error, Result};
use crate::redis::product_state::{ProductState, read_ledgers, read_states};
use crate::redis::{KeySpace, ProductKeys, RedisStore};
use chrono::{DateTime, Utc};
use std::collections::{HashMap, HashSet};
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
    /// Units of active ledger entries, when the ledger was read (exact path).
    pub ledger_active_units: Option<i64>,
}

/// An activity's state at one moment.
#[derive(Clone, Debug)]
pub struct Snapshot {
    pub activity: Activity,
    pub products: Vec<ProductView>,
    pub taken_at: DateTime<Utc>,
}

/// Which products to read, and how.
#[derive(Clone, Debug, Default)]
pub struct Scope {
    /// Only these product ids (an unknown id is an error naming it).
    pub only: Option<Vec<String>>,
    /// Read every ledger and the live orders of every product, instead of trusting the scripts'
    /// counters where they agree with the database (fix does this before it writes).
    pub exact: bool,
}

/// Reads the activity's Redis state and database truth.
pub async fn take(
    redis: &RedisStore,
    db: &Db,
    keys: &KeySpace,
    activity_id: &ActivityId,
    grace: Duration,
    scope: &Scope,
) -> Result<Snapshot> {
    let t0 = std::time::Instant::now();
    let activity = activities::require(db, activity_id).await?;
    let products = match &scope.only {
        None => activities::products(db, activity_id).await?,
        Some(only) => {
            let mut ids: Vec<String> = only.clone();
            ids.sort();
            ids.dedup();
            let found = activities::products_by_ids(db, activity_id, &ids).await?;
            let known: HashSet<&str> = found.iter().map(|p| p.product_id.as_str()).collect();
            if let Some(unknown) = ids.iter().find(|p| !known.contains(p.as_str())) {
                return Err(Error::bad_input(format!(
                    "product '{unknown}' is not in activity '{activity_id}': see `seckill-console activity show {activity_id}`"
                )));
            }
            found
        }
    };
    let product_keys: Vec<ProductKeys> = products
        .iter()
        .map(|p| keys.product(activity_id, &p.product_id))
        .collect();
    let states = read_states(redis, &product_keys, true)
        .await
        .map_err(|e| redis.error(&e))?;
    let taken_at = Utc::now();
    let only: Option<Vec<&str>> = scope
        .only
        .as_ref()
        .map(|_| products.iter().map(|p| p.product_id.as_str()).collect());
    let mut sold = orders::sold(db, activity_id, only.as_deref()).await?;
    tracing::debug!(
        ms = t0.elapsed().as_millis() as u64,
        n = products.len(),
        "snapshot: redis and database read"
    );

    // Fast path: where the scripts' counters say exactly the live orders' units are deducted,
    // every ledger entry is backed by an order and the ledger need not be read.
    let slow: Vec<usize> = products
        .iter()
        .zip(&states)
        .enumerate()
        .filter(|(_, (p, s))| {
            let db_sold = sold.get(p.product_id.as_str()).copied().unwrap_or(0);
            let agrees = s.meta.present
                && s.meta.corrupt.is_none()
                && s.meta.active_units() == Some(db_sold);
            s.ledger_len.unwrap_or(0) > 0 && (scope.exact || !agrees)
        })
        .map(|(i, _)| i)
        .collect();

    let mut ledgers: Vec<Option<Vec<LedgerEntry>>> = vec![None; products.len()];
    let mut live: HashMap<String, LiveOrders> = HashMap::new();
    if !slow.is_empty() {
        let slow_keys: Vec<&ProductKeys> = slow.iter().map(|&i| &product_keys[i]).collect();
        let read = read_ledgers(redis, &slow_keys)
            .await
            .map_err(|e| redis.error(&e))?;
        let ids: Vec<&str> = slow
            .iter()
            .map(|&i| products[i].product_id.as_str())
            .collect();
        live = orders::live_orders(db, activity_id, Some(&ids)).await?;
        for (&i, (entries, _bad)) in slow.iter().zip(read) {
            // The sold units of a slow product come from the same statement as its request
            // ids, so an order committed between two queries cannot count twice or not at all.
            let units = live
                .get(products[i].product_id.as_str())
                .map_or(0, |l| l.units);
            sold.insert(products[i].product_id.to_string(), units);
            ledgers[i] = Some(entries);
        }
    }

    let now_ms = taken_at.timestamp_millis();
    let grace_ms = i64::try_from(grace.as_millis()).unwrap_or(i64::MAX);
    let views = products
        .into_iter()
        .zip(product_keys)
        .zip(states)
        .zip(ledgers)
        .map(|(((product, keys), state), ledger)| {
            let db_sold = sold.get(product.product_id.as_str()).copied().unwrap_or(0);
            let (in_flight, orphaned, orphans, active) = match ledger {
                Some(entries) => {
                    let backed = live.get(product.product_id.as_str());
                    let u = unbacked(
                        &entries,
                        |rid| backed.is_some_and(|b| b.request_ids.contains(rid)),
                        now_ms,
                        grace_ms,
                    );
                    let active: i64 = entries
                        .iter()
                        .filter(|e| !e.returned)
                        .map(|e| e.quantity)
                        .sum();
                    (u.in_flight, u.orphaned, u.orphans, Some(active))
                }
                None => (0, 0, Vec::new(), None),
            };
            let truth = Truth::new(product.initial_stock, db_sold, in_flight, orphaned);
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
