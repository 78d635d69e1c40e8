//! The outbox (local message table): written with each order in one transaction, sent later.

use super::Db;
use crate::domain::ActivityId;
use crate::domain::alerts::QueueSummary;
use crate::error::Result;

/// Count and age of the unsent messages of an activity.
pub async fn summary(db: &Db, activity: &ActivityId) -> Result<QueueSummary> {
    super::pending_summary(db, "seckill_outbox", activity).await
}
