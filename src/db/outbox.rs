//! The outbox (local message table): written with each order in one transaction, sent later.

use super::Db;
use crate::domain::ActivityId;
use crate::domain::alerts::QueueSummary;
use crate::error::Result;
use chrono::{DateTime, Utc};

/// Count and age of the unsent messages of an activity.
pub async fn summary(db: &Db, activity: &ActivityId) -> Result<QueueSummary> {
    let row: Option<(i64, Option<DateTime<Utc>>)> = db
        .fetch_optional_as(
            "SELECT COUNT(*), MIN(created_at) FROM seckill_outbox WHERE activity_id = ? AND status = 'pending'",
            &[activity.as_str().into()],
        )
        .await
        .map_err(|e| db.error(&e))?;
    let (pending, oldest) = row.unwrap_or((0, None));
    Ok(QueueSummary {
        pending,
        oldest_secs: oldest.map(|t| (Utc::now() - t).num_seconds().max(0)),
    })
}
