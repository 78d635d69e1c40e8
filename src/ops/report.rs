//! The incident report: what a post-incident review needs in one document — the activity and
//! its window, sales per product, the reconcile verdict now, the compensation queue's history,
//! every console write in the period and what each fix changed.

use super::status::{StatusOptions, StatusReport, status};
use crate::db::Db;
/// The audit rows a report lists (its fixes and console writes).
pub use crate::db::audit::AuditEntry;
use crate::db::audit::recent_since;
use crate::domain::ActivityId;
use crate::error::Result;
use crate::redis::{KeySpace, RedisStore};
use chrono::{DateTime, Utc};
use serde::Serialize;
use std::collections::BTreeMap;

/// Console writes a report lists at most (newest kept).
pub const MAX_WRITES: i64 = 5_000;
/// Compensation entries a report lists at most.
pub const MAX_COMPENSATION: i64 = 5_000;

/// Sales of one product.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Sales {
    pub product: String,
    pub initial: i64,
    /// Units of live orders (pending payment or paid).
    pub sold: i64,
    pub paid: i64,
    pub expired: i64,
    pub cancelled: i64,
    /// What Redis holds now (None: missing or corrupt).
    pub remaining: Option<i64>,
    pub state: &'static str,
}

/// One compensation entry and how it ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Resolution {
    pub request_id: String,
    pub product: String,
    pub quantity: i64,
    pub status: String,
    pub resolution: Option<String>,
    pub created_at: DateTime<Utc>,
    pub resolved_at: Option<DateTime<Utc>>,
}

/// The report.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub activity: String,
    pub name: String,
    pub starts_at: DateTime<Utc>,
    pub ends_at: DateTime<Utc>,
    pub status: String,
    pub generated_at: DateTime<Utc>,
    pub since: Option<DateTime<Utc>>,
    pub sales: Vec<Sales>,
    /// True when every product is ok (or paused with the right numbers) now.
    pub balanced: bool,
    pub verdict: StatusReport,
    pub compensation: Vec<Resolution>,
    /// Every console write of the period, newest first.
    pub writes: Vec<AuditEntry>,
    /// The fixes among them, with what each changed.
    pub fixes: Vec<AuditEntry>,
}

/// Builds the report of `activity` (writes and compensation entries since `since`, if given).
pub async fn report(
    redis: &RedisStore,
    db: &Db,
    keys: &KeySpace,
    activity: &ActivityId,
    since: Option<DateTime<Utc>>,
    opts: &StatusOptions,
) -> Result<Report> {
    let a = crate::db::activity::require(db, activity).await?;
    let verdict = status(redis, db, keys, activity, opts).await?;
    // One grouped sum per product and status, along the index on (activity, product, status).
    let rows: Vec<(String, String, i64)> = db
        .fetch_all_as(
            &format!(
                "SELECT product_id, status, {} FROM seckill_order \
                 WHERE activity_id = ? GROUP BY product_id, status",
                db.sum_i64("quantity")
            ),
            &[activity.as_str().into()],
        )
        .await
        .map_err(|e| db.error(&e))?;
    let mut by: BTreeMap<String, Sales> = BTreeMap::new();
    for p in &verdict.products {
        by.insert(
            p.product.clone(),
            Sales {
                product: p.product.clone(),
                initial: p.initial,
                remaining: p.redis_remaining,
                state: p.state.as_str(),
                ..Sales::default()
            },
        );
    }
    for (product, st, units) in rows {
        let Some(s) = by.get_mut(&product) else {
            continue;
        };
        match st.as_str() {
            "pending_payment" => s.sold += units,
            "paid" => {
                s.sold += units;
                s.paid += units;
            }
            "expired" => s.expired += units,
            "cancelled" => s.cancelled += units,
            _ => {}
        }
    }
    let compensation = crate::db::compensation::list(db, activity, MAX_COMPENSATION)
        .await?
        .into_iter()
        .filter(|c| {
            since.is_none_or(|t| c.created_at >= t || c.resolved_at.is_some_and(|r| r >= t))
        })
        .map(|c| Resolution {
            request_id: c.request_id,
            product: c.product_id,
            quantity: c.quantity,
            status: c.status,
            resolution: c.resolution,
            created_at: c.created_at,
            resolved_at: c.resolved_at,
        })
        .collect();
    let writes = recent_since(db, Some(activity), since, MAX_WRITES)
        .await
        .map_err(|e| db.error(&e))?;
    let fixes = writes
        .iter()
        .filter(|w| w.action.starts_with("fix"))
        .cloned()
        .collect();
    Ok(Report {
        activity: a.activity_id.to_string(),
        name: a.name,
        starts_at: a.starts_at,
        ends_at: a.ends_at,
        status: a.status.to_string(),
        generated_at: Utc::now(),
        since,
        sales: by.into_values().collect(),
        balanced: verdict.all_ok(),
        verdict,
        compensation,
        writes,
        fixes,
    })
}
