//! The audit table: one row for every write the console makes (who, when, what, before, after,
//! why).

use super::stamp::DbTime;
use super::{Arg, Db, Tx};
use crate::domain::ActivityId;
use chrono::{DateTime, Utc};
use serde::Serialize;

/// One audited write. Its JSON (`audit --json`, the report's `writes` and `fixes`) uses the
/// README's names: `activity`, `product`, `before`, `after`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AuditEntry {
    pub at: DateTime<Utc>,
    pub actor: String,
    pub action: String,
    #[serde(rename = "activity")]
    pub activity_id: String,
    #[serde(rename = "product")]
    pub product_id: Option<String>,
    #[serde(rename = "before")]
    pub before_value: Option<String>,
    #[serde(rename = "after")]
    pub after_value: Option<String>,
    pub reason: String,
    pub detail: String,
}

/// Which entries to list; every filter left out matches all.
#[derive(Clone, Copy, Debug, Default)]
pub struct AuditQuery<'a> {
    pub activity: Option<&'a ActivityId>,
    pub since: Option<DateTime<Utc>>,
    pub action: Option<&'a str>,
    pub actor: Option<&'a str>,
    pub product: Option<&'a str>,
}

impl AuditEntry {
    /// An entry for `action` on `activity`, stamped now.
    pub fn new(actor: &str, action: &str, activity: &ActivityId) -> Self {
        AuditEntry {
            at: Utc::now(),
            actor: actor.to_string(),
            action: action.to_string(),
            activity_id: activity.to_string(),
            product_id: None,
            before_value: None,
            after_value: None,
            reason: String::new(),
            detail: String::new(),
        }
    }
}

const INSERT: &str = "INSERT INTO seckill_audit \
    (at, actor, action, activity_id, product_id, before_value, after_value, reason, detail) \
    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)";

fn args(e: &AuditEntry) -> Vec<Arg> {
    vec![
        Arg::Time(e.at),
        e.actor.clone().into(),
        e.action.clone().into(),
        e.activity_id.clone().into(),
        e.product_id.clone().into(),
        e.before_value.clone().into(),
        e.after_value.clone().into(),
        e.reason.clone().into(),
        e.detail.clone().into(),
    ]
}

/// Records an entry inside the transaction of the write it describes.
pub async fn record_in(tx: &mut Tx, e: &AuditEntry) -> Result<(), sqlx::Error> {
    tx.execute(INSERT, &args(e)).await.map(|_| ())
}

/// Records an entry on its own (for a Redis write, right after it).
pub async fn record(db: &Db, e: &AuditEntry) -> Result<(), sqlx::Error> {
    db.execute(INSERT, &args(e)).await.map(|_| ())
}

/// Records many entries in one transaction (multi-row inserts).
pub async fn record_many(db: &Db, entries: &[AuditEntry]) -> Result<(), sqlx::Error> {
    if entries.is_empty() {
        return Ok(());
    }
    let mut tx = db.begin().await?;
    for batch in entries.chunks(500) {
        let values = vec!["(?, ?, ?, ?, ?, ?, ?, ?, ?)"; batch.len()].join(", ");
        let sql = format!(
            "INSERT INTO seckill_audit \
             (at, actor, action, activity_id, product_id, before_value, after_value, reason, detail) \
             VALUES {values}"
        );
        let all: Vec<Arg> = batch.iter().flat_map(args).collect();
        tx.execute(&sql, &all).await?;
    }
    tx.commit().await
}

type Row = (
    DbTime,
    String,
    String,
    String,
    Option<String>,
    Option<String>,
    Option<String>,
    String,
    String,
);

/// The newest `limit` entries, of one activity or of all.
pub async fn recent(
    db: &Db,
    activity: Option<&ActivityId>,
    limit: i64,
) -> Result<Vec<AuditEntry>, sqlx::Error> {
    recent_since(db, activity, None, limit).await
}

/// The newest `limit` entries on one product of an activity, newest first (the detail view).
pub async fn recent_of_product(
    db: &Db,
    activity: &ActivityId,
    product: &str,
    limit: i64,
) -> Result<Vec<AuditEntry>, sqlx::Error> {
    let sql =
        format!("{SELECT_ROW} WHERE activity_id = ? AND product_id = ? ORDER BY id DESC LIMIT ?");
    let args = [activity.as_str().into(), product.into(), Arg::Int(limit)];
    let rows: Vec<Row> = db.fetch_all_as(&sql, &args).await?;
    Ok(rows.into_iter().map(from_row).collect())
}

/// The newest `limit` entries (of one activity, and at or after `since`, when given), newest
/// first: a walk back along the primary key that stops after `limit` rows.
pub async fn recent_since(
    db: &Db,
    activity: Option<&ActivityId>,
    since: Option<DateTime<Utc>>,
    limit: i64,
) -> Result<Vec<AuditEntry>, sqlx::Error> {
    let q = AuditQuery {
        activity,
        since,
        ..AuditQuery::default()
    };
    matching(db, &q, limit).await
}

/// The newest `limit` entries that match `q`, newest first.
pub async fn matching(
    db: &Db,
    q: &AuditQuery<'_>,
    limit: i64,
) -> Result<Vec<AuditEntry>, sqlx::Error> {
    let mut sql = format!("{SELECT_ROW} WHERE 1 = 1");
    let mut args: Vec<Arg> = Vec::new();
    if let Some(a) = q.activity {
        sql.push_str(" AND activity_id = ?");
        args.push(a.as_str().into());
    }
    if let Some(t) = q.since {
        sql.push_str(" AND at >= ?");
        args.push(Arg::Time(t));
    }
    for (column, value) in [
        ("action", q.action),
        ("actor", q.actor),
        ("product_id", q.product),
    ] {
        if let Some(v) = value {
            sql.push_str(&format!(" AND {column} = ?"));
            args.push(v.into());
        }
    }
    sql.push_str(" ORDER BY id DESC LIMIT ?");
    args.push(Arg::Int(limit));
    let rows: Vec<Row> = db.fetch_all_as(&sql, &args).await?;
    Ok(rows.into_iter().map(from_row).collect())
}

/// The columns of an entry, in [`Row`]'s order.
const SELECT_ROW: &str = "SELECT at, actor, action, activity_id, product_id, before_value, \
     after_value, reason, detail FROM seckill_audit";

fn from_row(r: Row) -> AuditEntry {
    AuditEntry {
        at: r.0.0,
        actor: r.1,
        action: r.2,
        activity_id: r.3,
        product_id: r.4,
        before_value: r.5,
        after_value: r.6,
        reason: r.7,
        detail: r.8,
    }
}
