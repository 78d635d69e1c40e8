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
    /// The activity's phase now (from its window and status).
    pub phase: &'static str,
    pub sales: Vec<Sales>,
    /// True when every product is ok (or paused with the right numbers) now; null when Redis
    /// could not be read.
    pub balanced: Option<bool>,
    /// The books now; null when Redis could not be read (see `redis_unavailable`).
    pub verdict: Option<StatusReport>,
    /// Why the Redis sections (the verdict, what Redis holds) are missing: the database's
    /// sections are whole without it, and they are what a review during an outage needs.
    pub redis_unavailable: Option<String>,
    pub compensation: Vec<Resolution>,
    /// Every console write of the period, newest first.
    pub writes: Vec<AuditEntry>,
    /// The fixes among them, with what each changed.
    pub fixes: Vec<AuditEntry>,
}

/// Builds the report of `activity` (writes and compensation entries since `since`, if given).
/// `redis` is the connection or why there is none: without Redis (or when it stops answering)
/// the database's sections are whole and the Redis sections are marked unavailable; any other
/// failure, or the database's, is the report's.
pub async fn report(
    redis: std::result::Result<&RedisStore, String>,
    db: &Db,
    keys: &KeySpace,
    activity: &ActivityId,
    since: Option<DateTime<Utc>>,
    opts: &StatusOptions,
) -> Result<Report> {
    let a = crate::db::activity::require(db, activity).await?;
    let (verdict, redis_unavailable) = match redis {
        Ok(redis) => match status(redis, db, keys, activity, opts).await {
            Ok(v) => (Some(v), None),
            Err(e) if e.kind == crate::error::ErrorKind::Unavailable && !db_down(db).await => {
                (None, Some(crate::redact::redact_text(&e.message)))
            }
            Err(e) => return Err(e),
        },
        Err(why) => (None, Some(crate::redact::redact_text(&why))),
    };
    // One grouped sum per product and status, from the index that holds the quantity.
    let rows: Vec<(String, String, i64)> = db
        .fetch_all_as(
            &crate::db::orders::sums_by_status_sql(db),
            &[activity.as_str().into()],
        )
        .await
        .map_err(|e| db.error(&e))?;
    let mut by: BTreeMap<String, Sales> = BTreeMap::new();
    match &verdict {
        Some(v) => {
            for p in &v.products {
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
        }
        // The products as the database has them; what Redis holds is not known.
        None => {
            for p in crate::db::activity::products(db, activity).await? {
                by.insert(
                    p.product_id.to_string(),
                    Sales {
                        product: p.product_id.to_string(),
                        initial: p.initial_stock,
                        remaining: None,
                        state: "unknown",
                        ..Sales::default()
                    },
                );
            }
        }
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
    let phase = a.phase(Utc::now()).as_str();
    Ok(Report {
        activity: a.activity_id.to_string(),
        name: a.name,
        starts_at: a.starts_at,
        ends_at: a.ends_at,
        status: a.status.to_string(),
        generated_at: Utc::now(),
        since,
        phase,
        sales: by.into_values().collect(),
        balanced: verdict.as_ref().map(StatusReport::all_ok),
        verdict,
        redis_unavailable,
        compensation,
        writes,
        fixes,
    })
}

/// Whether the database stopped answering too (then the report is not the database's whole
/// story either, and it fails as unavailable).
async fn db_down(db: &Db) -> bool {
    db.fetch_all_as::<(i64,)>("SELECT 1", &[]).await.is_err()
}
