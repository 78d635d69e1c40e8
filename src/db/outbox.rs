//! The outbox (local message table): written with each order in one transaction, sent later.

use super::Db;
use crate::domain::ActivityId;
use crate::domain::alerts::QueueSummary;
use crate::error::Result;

/// Count and age of the unsent messages of an activity.
pub async fn summary(db: &Db, activity: &ActivityId) -> Result<QueueSummary> {
    super::pending_summary(db, "seckill_outbox", activity).await
}

/// Marks up to `limit` of the activity's oldest pending messages as sent, as the shop's relay
/// does once it has published them; how many it marked. (The demo runs it; a shop runs its own.)
pub async fn relay_batch(db: &Db, activity: &ActivityId, limit: i64) -> Result<u64> {
    let rows: Vec<(String,)> = db
        .fetch_all_as(
            "SELECT order_id FROM seckill_outbox WHERE activity_id = ? AND status = 'pending' \
             ORDER BY created_at LIMIT ?",
            &[activity.as_str().into(), super::Arg::Int(limit)],
        )
        .await
        .map_err(|e| db.error(&e))?;
    if rows.is_empty() {
        return Ok(0);
    }
    let ids: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
    db.execute_in(
        &format!(
            "UPDATE seckill_outbox SET status = 'sent', sent_at = ?, attempts = attempts + 1 \
             WHERE activity_id = ? AND status = 'pending' AND order_id IN {}",
            super::IN_LIST
        ),
        &[
            super::Arg::Time(chrono::Utc::now()),
            activity.as_str().into(),
        ],
        &ids,
    )
    .await
    .map_err(|e| db.error(&e))
}
