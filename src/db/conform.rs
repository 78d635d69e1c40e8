//! The rows `conform` checks: every order, outbox message and compensation entry of an
//! activity, in pages along their keys. A check after a staging sale, never a live view's read.
//! Times are read as text on every backend: on SQLite that is what the app servers wrote, and
//! its spelling is one of the rules (SQLite compares times as text); the typed columns of the
//! others are cast, and only their value counts.

use super::{Arg, Backend, Db};
use crate::domain::ActivityId;
use crate::error::Result;
use chrono::{DateTime, NaiveDateTime, Utc};

/// Rows per page.
pub const PAGE: i64 = 1000;

/// A time column as read: the time, and on SQLite the text it was written as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stamp {
    /// None when the text is no time at all.
    pub at: Option<DateTime<Utc>>,
    /// SQLite's text (None on the other backends, whose columns are typed).
    pub text: Option<String>,
}

impl Stamp {
    /// A time as read (see [`time_text`]); `spelled`: the text is what an app server wrote
    /// (SQLite), so its spelling is checked.
    fn read(s: String, spelled: bool) -> Self {
        Stamp {
            at: parse_lenient(&s),
            text: spelled.then_some(s),
        }
    }

    /// True when the text is the documented spelling: RFC 3339 in UTC, `T` between date and
    /// time, an optional fraction of 1 to 9 digits, and `+00:00` (never `Z`, a space or
    /// another offset: only this sorts like time, as text, beside the console's own rows).
    /// Typed columns always are.
    pub fn documented(&self) -> bool {
        self.text.as_deref().is_none_or(documented_spelling)
    }

    pub fn ms(&self) -> Option<i64> {
        self.at.map(|t| t.timestamp_millis())
    }

    /// True when the stamp holds a fraction of a second (a typed column always does: the
    /// database keeps microseconds; text written to the second does not).
    pub fn fractional(&self) -> bool {
        self.text.as_deref().is_none_or(|t| t.contains('.'))
    }
}

/// The documented spelling of a time in SQLite: `2026-12-06T20:05:13.893791+00:00`.
pub fn documented_spelling(s: &str) -> bool {
    let b = s.as_bytes();
    let digits =
        |r: std::ops::Range<usize>| b.get(r).is_some_and(|d| d.iter().all(u8::is_ascii_digit));
    let at = |i: usize, c: u8| b.get(i) == Some(&c);
    if !(digits(0..4)
        && at(4, b'-')
        && digits(5..7)
        && at(7, b'-')
        && digits(8..10)
        && at(10, b'T')
        && digits(11..13)
        && at(13, b':')
        && digits(14..16)
        && at(16, b':')
        && digits(17..19))
    {
        return false;
    }
    let mut rest = &s[19..];
    if let Some(frac) = rest.strip_prefix('.') {
        let n = frac.bytes().take_while(u8::is_ascii_digit).count();
        if !(1..=9).contains(&n) {
            return false;
        }
        rest = &frac[n..];
    }
    rest == "+00:00" && parse_lenient(s).is_some()
}

/// A time in any spelling sqlx itself reads from SQLite (RFC 3339, a space for the `T`, no
/// offset): the rules about when things happened hold whatever the spelling.
fn parse_lenient(s: &str) -> Option<DateTime<Utc>> {
    if let Ok(t) = DateTime::parse_from_rfc3339(s) {
        return Some(t.with_timezone(&Utc));
    }
    for f in ["%Y-%m-%d %H:%M:%S%.f%:z", "%Y-%m-%d %H:%M:%S%.f%#z"] {
        if let Ok(t) = DateTime::parse_from_str(s, f) {
            return Some(t.with_timezone(&Utc));
        }
    }
    for f in ["%Y-%m-%d %H:%M:%S%.f", "%Y-%m-%dT%H:%M:%S%.f"] {
        if let Ok(t) = NaiveDateTime::parse_from_str(s, f) {
            return Some(t.and_utc());
        }
    }
    None
}

/// One order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OrderRow {
    pub request_id: String,
    pub order_id: String,
    pub product_id: String,
    pub user_id: String,
    pub quantity: i64,
    pub status: String,
    pub created: Stamp,
    pub updated: Stamp,
}

/// The activity's orders after `after` (a request id), by request id.
pub async fn orders_page(
    db: &Db,
    activity: &ActivityId,
    after: Option<&str>,
) -> Result<Vec<OrderRow>> {
    let sql = format!(
        "SELECT request_id, order_id, product_id, user_id, quantity, status, {}, {} \
         FROM seckill_order WHERE activity_id = ? AND request_id > ? ORDER BY request_id LIMIT {PAGE}",
        time_text(db, "created_at"),
        time_text(db, "updated_at")
    );
    let args = [Arg::from(activity.as_str()), Arg::from(after.unwrap_or(""))];
    let spelled = db.backend() == Backend::Sqlite;
    type Row = (String, String, String, String, i64, String, String, String);
    let rows: Vec<Row> = db
        .fetch_all_as(&sql, &args)
        .await
        .map_err(|e| db.error(&e))?;
    Ok(rows
        .into_iter()
        .map(|r| OrderRow {
            request_id: r.0,
            order_id: r.1,
            product_id: r.2,
            user_id: r.3,
            quantity: r.4,
            status: r.5,
            created: Stamp::read(r.6, spelled),
            updated: Stamp::read(r.7, spelled),
        })
        .collect())
}

/// A time column as text on this backend: SQLite's as written; PostgreSQL's and MySQL's cast
/// (their sessions run in UTC).
fn time_text(db: &Db, column: &str) -> String {
    match db.backend() {
        Backend::Sqlite => column.to_string(),
        Backend::Postgres => format!("CAST({column} AS TEXT)"),
        Backend::MySql => format!("CAST({column} AS CHAR)"),
    }
}

/// One outbox message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutboxRow {
    pub id: i64,
    pub order_id: String,
    pub topic: String,
    pub payload: String,
    pub status: String,
    pub created: Stamp,
}

/// The activity's outbox messages after the id `after`, by id.
pub async fn outbox_page(db: &Db, activity: &ActivityId, after: i64) -> Result<Vec<OutboxRow>> {
    let sql = format!(
        "SELECT id, order_id, topic, payload, status, {} FROM seckill_outbox \
         WHERE activity_id = ? AND id > ? ORDER BY id LIMIT {PAGE}",
        time_text(db, "created_at")
    );
    let args = [Arg::from(activity.as_str()), Arg::Int(after)];
    let spelled = db.backend() == Backend::Sqlite;
    type Row = (i64, String, String, String, String, String);
    let rows: Vec<Row> = db
        .fetch_all_as(&sql, &args)
        .await
        .map_err(|e| db.error(&e))?;
    Ok(rows
        .into_iter()
        .map(|r| OutboxRow {
            id: r.0,
            order_id: r.1,
            topic: r.2,
            payload: r.3,
            status: r.4,
            created: Stamp::read(r.5, spelled),
        })
        .collect())
}

/// One compensation entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompensationRow {
    pub id: i64,
    pub request_id: String,
    pub product_id: String,
    pub user_id: String,
    pub quantity: i64,
    pub status: String,
    pub created: Stamp,
}

/// The activity's compensation entries after the id `after`, by id.
pub async fn compensation_page(
    db: &Db,
    activity: &ActivityId,
    after: i64,
) -> Result<Vec<CompensationRow>> {
    let sql = format!(
        "SELECT id, request_id, product_id, user_id, quantity, status, {} \
         FROM seckill_compensation WHERE activity_id = ? AND id > ? ORDER BY id LIMIT {PAGE}",
        time_text(db, "created_at")
    );
    let args = [Arg::from(activity.as_str()), Arg::Int(after)];
    let spelled = db.backend() == Backend::Sqlite;
    type Row = (i64, String, String, String, i64, String, String);
    let rows: Vec<Row> = db
        .fetch_all_as(&sql, &args)
        .await
        .map_err(|e| db.error(&e))?;
    Ok(rows
        .into_iter()
        .map(|r| CompensationRow {
            id: r.0,
            request_id: r.1,
            product_id: r.2,
            user_id: r.3,
            quantity: r.4,
            status: r.5,
            created: Stamp::read(r.6, spelled),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_documented_spelling_passes() {
        for good in [
            "2026-12-06T20:05:13+00:00",
            "2026-12-06T20:05:13.8+00:00",
            "2026-12-06T20:05:13.893791511+00:00",
        ] {
            assert!(documented_spelling(good), "{good}");
        }
        for bad in [
            "2026-12-06 20:05:13+00:00",
            "2026-12-06T20:05:13Z",
            "2026-12-06T20:05:13.123Z",
            "2026-12-06T20:05:13",
            "2026-12-06T22:05:13+02:00",
            "2026-12-06T20:05:13.+00:00",
            "2026-12-06T20:05:13.1234567890+00:00",
            "1733515513",
            "",
            "2026-13-06T20:05:13+00:00",
        ] {
            assert!(!documented_spelling(bad), "{bad}");
        }
    }

    #[test]
    fn other_spellings_still_tell_the_time() {
        let t = |s: &str| parse_lenient(s).map(|t| t.timestamp());
        assert_eq!(t("2026-12-06 20:05:13"), t("2026-12-06T20:05:13+00:00"));
        assert_eq!(t("2026-12-06T20:05:13Z"), t("2026-12-06T20:05:13+00:00"));
        assert!(t("2026-12-06T20:05:13").is_some());
        assert!(t("yesterday").is_none());
        // PostgreSQL's and MySQL's casts of their typed columns.
        assert_eq!(
            t("2026-12-06 20:05:13.893791+00"),
            t("2026-12-06T20:05:13+00:00")
        );
        assert_eq!(
            t("2026-12-06 20:05:13.893791"),
            t("2026-12-06T20:05:13+00:00")
        );
        assert_eq!(t("2026-12-07 04:05:13+08"), t("2026-12-06T20:05:13+00:00"));
        assert!(t("infinity").is_none());
    }
}
