//! The compensation queue: deductions whose outcome the caller does not know (a timeout, a
//! dropped connection). `pending` until resolved to `applied`, `returned` or `not_applied`.

use super::audit::{self, AuditEntry};
use super::stamp::LooseTime;
use super::{Arg, Db};
use crate::domain::ActivityId;
use crate::domain::alerts::QueueSummary;
use crate::error::Result;
use chrono::{DateTime, Utc};
use serde::Serialize;

/// Statuses of a compensation entry.
pub const PENDING: &str = "pending";
pub const APPLIED: &str = "applied";
pub const RETURNED: &str = "returned";
pub const NOT_APPLIED: &str = "not_applied";

/// A deduction with an unknown outcome, as the caller records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewCompensation {
    pub request_id: String,
    pub activity_id: String,
    pub product_id: String,
    pub user_id: String,
    pub quantity: i64,
    pub reason: String,
}

/// One entry of the queue.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Compensation {
    pub id: i64,
    pub request_id: String,
    pub activity_id: String,
    pub product_id: String,
    pub user_id: String,
    pub quantity: i64,
    pub status: String,
    pub reason: String,
    pub resolution: Option<String>,
    pub created_at: DateTime<Utc>,
    pub resolved_at: Option<DateTime<Utc>>,
}

impl Compensation {
    /// Seconds since the entry was made, as of `now`; None when its time is the first instant
    /// there is (PostgreSQL's `-infinity`, or a time no decoder read).
    pub fn age_secs(&self, now: DateTime<Utc>) -> Option<i64> {
        (self.created_at != DateTime::<Utc>::MIN_UTC)
            .then(|| (now - self.created_at).num_seconds().max(0))
    }

    /// Still waiting for a decision.
    pub fn is_pending(&self) -> bool {
        self.status == PENDING
    }
}

/// Records an entry; a second record of the same request id is ignored (returns false).
pub async fn insert(db: &Db, c: &NewCompensation) -> Result<bool> {
    let sql = db.insert_ignore(
        "seckill_compensation (request_id, activity_id, product_id, user_id, quantity, status, reason, created_at) \
         VALUES (?, ?, ?, ?, ?, 'pending', ?, ?)",
    );
    let n = db
        .execute(
            &sql,
            &[
                c.request_id.clone().into(),
                c.activity_id.clone().into(),
                c.product_id.clone().into(),
                c.user_id.clone().into(),
                Arg::Int(c.quantity),
                c.reason.clone().into(),
                Arg::Time(Utc::now()),
            ],
        )
        .await
        .map_err(|e| db.error(&e))?;
    Ok(n > 0)
}

type Row = (
    i64,
    String,
    String,
    String,
    String,
    i64,
    String,
    String,
    Option<String>,
    LooseTime,
    Option<LooseTime>,
);

const SELECT: &str = "SELECT id, request_id, activity_id, product_id, user_id, quantity, status, reason, \
                      resolution, created_at, resolved_at FROM seckill_compensation";

fn from_row(r: Row) -> Compensation {
    Compensation {
        id: r.0,
        request_id: r.1,
        activity_id: r.2,
        product_id: r.3,
        user_id: r.4,
        quantity: r.5,
        status: r.6,
        reason: r.7,
        resolution: r.8,
        // Unreadable (written by hand, in another form): the oldest in the queue, as
        // PostgreSQL's `-infinity` reads, so it is seen first rather than failing the list.
        created_at: r.9.0.unwrap_or(DateTime::<Utc>::MIN_UTC),
        resolved_at: r.10.and_then(|t| t.0),
    }
}

/// The pending entries of an activity, oldest first: a walk along the `(activity_id, status)`
/// index (its entries end with the id), stopped after `LIMIT`.
pub const LIST_PENDING: &str = "WHERE activity_id = ? AND status = 'pending' ORDER BY id LIMIT ?";
/// The other entries, newest first: a walk back along `(activity_id, id)` (migration 0004).
pub const LIST_RESOLVED: &str =
    "WHERE activity_id = ? AND status <> 'pending' ORDER BY id DESC LIMIT ?";

/// The entries of an activity: pending first (oldest first), then resolved (newest first), at
/// most `limit`. Two walks along indexes that each stop at `limit` rows: the one query it was
/// (`ORDER BY CASE ...`) sorted the activity's whole queue on every refresh, a million entries
/// after an incident. An entry resolved between the two reads shows once, as pending.
pub async fn list(db: &Db, activity: &ActivityId, limit: i64) -> Result<Vec<Compensation>> {
    let page = |sql: &'static str, limit: i64| async move {
        db.fetch_all_as::<Row>(
            &format!("{SELECT} {sql}"),
            &[activity.as_str().into(), Arg::Int(limit)],
        )
        .await
        .map_err(|e| db.error(&e))
    };
    let mut rows = page(LIST_PENDING, limit).await?;
    let rest = limit.saturating_sub(rows.len() as i64);
    if rest > 0 {
        let pending: std::collections::HashSet<i64> = rows.iter().map(|r| r.0).collect();
        let resolved = page(LIST_RESOLVED, rest).await?;
        rows.extend(resolved.into_iter().filter(|r| !pending.contains(&r.0)));
    }
    Ok(rows.into_iter().map(from_row).collect())
}

/// The entry of one request id in an activity, whatever its status.
pub async fn of_request(
    db: &Db,
    activity: &ActivityId,
    request: &str,
) -> Result<Vec<Compensation>> {
    let rows: Vec<Row> = db
        .fetch_all_as(
            &format!("{SELECT} WHERE activity_id = ? AND request_id = ?"),
            &[activity.as_str().into(), request.into()],
        )
        .await
        .map_err(|e| db.error(&e))?;
    Ok(rows.into_iter().map(from_row).collect())
}

/// Entries resolved per page: the queue of an incident can hold a million.
pub const PAGE: i64 = 1000;

/// One page of an activity's pending entries, oldest first, after the entry `after` and up to
/// the entry `upto` (by id): a walk along the index that never reads the whole queue at once.
pub async fn pending_page(
    db: &Db,
    activity: &ActivityId,
    after: i64,
    upto: i64,
) -> Result<Vec<Compensation>> {
    let rows: Vec<Row> = db
        .fetch_all_as(
            &format!(
                "{SELECT} WHERE activity_id = ? AND status = 'pending' AND id > ? AND id <= ? \
                 ORDER BY id LIMIT {PAGE}"
            ),
            &[activity.as_str().into(), Arg::Int(after), Arg::Int(upto)],
        )
        .await
        .map_err(|e| db.error(&e))?;
    Ok(rows.into_iter().map(from_row).collect())
}

/// The pending entries of an activity, counted whole (not capped as the status summary is),
/// and the id of the newest: what "resolve every pending entry" asks the operator to confirm,
/// and the bound that keeps it to exactly those. An operator's one-off read along the
/// `(activity_id, status)` index, never a refresh's.
pub async fn pending_extent(db: &Db, activity: &ActivityId) -> Result<(i64, Option<i64>)> {
    let row: Option<(i64, Option<i64>)> = db
        .fetch_optional_as(
            "SELECT COUNT(*), MAX(id) FROM seckill_compensation \
             WHERE activity_id = ? AND status = 'pending'",
            &[activity.as_str().into()],
        )
        .await
        .map_err(|e| db.error(&e))?;
    Ok(row.unwrap_or((0, None)))
}

/// Count and age of the pending entries.
pub async fn summary(db: &Db, activity: &ActivityId) -> Result<QueueSummary> {
    super::pending_summary(db, "seckill_compensation", activity).await
}

/// One entry's resolution, with the audit row written in the same transaction.
pub struct Resolve<'a> {
    pub id: i64,
    pub status: &'a str,
    pub resolution: &'a str,
    pub audit: AuditEntry,
}

/// Resolves entries still pending, each with its audit row, in one transaction per chunk of
/// [`super::IN_CHUNK`]. True per entry when this call changed it (false: resolved
/// concurrently, nothing written for it).
pub async fn resolve_many(db: &Db, items: &[Resolve<'_>]) -> Result<Vec<bool>> {
    let err = |e: sqlx::Error| db.error(&e);
    let mut changed = Vec::with_capacity(items.len());
    for chunk in items.chunks(super::IN_CHUNK) {
        let mut tx = db.begin().await.map_err(err)?;
        for r in chunk {
            let n = tx
                .execute(
                    "UPDATE seckill_compensation SET status = ?, resolution = ?, resolved_at = ? \
                     WHERE id = ? AND status = 'pending'",
                    &[
                        r.status.into(),
                        r.resolution.into(),
                        Arg::Time(Utc::now()),
                        Arg::Int(r.id),
                    ],
                )
                .await
                .map_err(err)?;
            if n > 0 {
                audit::record_in(&mut tx, &r.audit).await.map_err(err)?;
            }
            changed.push(n > 0);
        }
        tx.commit().await.map_err(err)?;
    }
    Ok(changed)
}
