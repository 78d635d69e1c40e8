//! A live top-up: `initial_stock` in the database and the stock in Redis move by the same
//! change while buyers deduct. Two stores cannot change in one step, so the side that lowers
//! what can be sold goes first — the database for a raise, Redis for a cut — and a failure
//! between the two leaves Redis at or below the truth: lost sales that `fix` gives back (a
//! drift the status names), never an oversell. The Redis step is `topup.lua`, atomic and
//! applied once per top-up id.

use super::snapshot::{self, Scope};
use crate::db::Db;
use crate::db::audit::{self, AuditEntry};
use crate::domain::import::MAX_STOCK;
use crate::domain::stock::StockValue;
use crate::domain::{ActivityId, ProductId};
use crate::error::{Error, ErrorKind, Result};
use crate::redis::control::{TopupReply, topup as topup_script};
use crate::redis::{KeySpace, RedisStore};
use serde::Serialize;
use std::time::Duration;

/// What a top-up did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TopupReport {
    pub activity: String,
    pub product: String,
    pub change: i64,
    pub initial_before: i64,
    pub initial_after: i64,
    /// The Redis stock before and after (None: the product has no stock key yet).
    pub redis_before: Option<i64>,
    pub redis_after: Option<i64>,
    /// The units no longer for sale (sold, in flight and orphaned) when it was read: a cut
    /// never goes below them.
    pub sold_and_in_flight: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// Checks a change against the initial stock; the error names the value.
pub fn check_change(product: &str, initial: i64, change: i64) -> Result<i64> {
    if change == 0 {
        return Err(Error::bad_input(
            "--add 0 changes nothing: give a positive or negative number of units",
        ));
    }
    match initial.checked_add(change) {
        Some(after) if (0..=MAX_STOCK).contains(&after) => Ok(after),
        _ => Err(Error::bad_input(format!(
            "--add {change}: the initial stock of {product} would be {} (it must stay between 0 and {MAX_STOCK})",
            i128::from(initial) + i128::from(change)
        ))),
    }
}

/// Moves the initial stock of `product` by `change` in the database and in Redis.
pub async fn topup(
    redis: &RedisStore,
    db: &Db,
    keys: &KeySpace,
    (activity, product): (&ActivityId, &ProductId),
    change: i64,
    (actor, reason): (&str, &str),
    grace: Duration,
) -> Result<TopupReport> {
    if redis.read_only() || db.read_only() {
        return Err(Error::refused(
            "read-only mode: refused to top up; run without --read-only",
        ));
    }
    let a = crate::db::activity::require(db, activity).await?;
    if a.phase(chrono::Utc::now()) == crate::domain::Phase::Cancelled {
        return Err(Error::refused(format!(
            "activity '{activity}' is cancelled: nothing of it is for sale"
        )));
    }
    let scope = Scope {
        only: Some(vec![product.to_string()]),
        ..Scope::default()
    };
    let snap = snapshot::take(redis, db, keys, activity, grace, &scope).await?;
    let Some(v) = snap.products.first() else {
        return Err(Error::bad_input(format!(
            "product '{product}' is not in activity '{activity}'"
        )));
    };
    let initial = v.product.initial_stock;
    let initial_after = check_change(product.as_str(), initial, change)?;
    let held = v.truth.db_sold + v.truth.in_flight + v.truth.orphaned;
    if initial_after < held {
        return Err(Error::refused(format!(
            "--add {change}: {product} has {held} unit(s) sold, in flight or orphaned of {initial}; the initial stock cannot go below that (at most --add {})",
            held - initial
        )));
    }
    let redis_before = match &v.cut.stock {
        StockValue::Value(s) => Some(*s),
        StockValue::Missing => None,
        _ => {
            return Err(Error::refused(format!(
                "the stock of {product} is {}: run `seckill-console fix {activity} --product {product}` first",
                v.status.state.as_str()
            )));
        }
    };
    let mut report = TopupReport {
        activity: activity.to_string(),
        product: product.to_string(),
        change,
        initial_before: initial,
        initial_after,
        redis_before,
        redis_after: redis_before,
        sold_and_in_flight: held,
        note: None,
    };
    // The database must answer before Redis is written: the audit row goes there.
    db.check().await?;
    let id = format!(
        "{}-{:x}",
        chrono::Utc::now().timestamp_millis(),
        std::process::id()
    );
    let k = keys.product(activity, product);
    let mut entry = AuditEntry::new(actor, "topup", activity);
    entry.product_id = Some(product.to_string());
    entry.before_value = Some(initial.to_string());
    entry.after_value = Some(initial_after.to_string());
    entry.reason = reason.to_string();

    if redis_before.is_none() {
        write_db(db, (activity, product), initial, change, &entry).await?;
        report.note = Some(format!(
            "{product} has no keys in Redis: the database holds the new initial stock; `seckill-console preheat {activity}` writes it"
        ));
        return Ok(report);
    }
    let redis_step = |e: redis::RedisError| {
        let err = redis.error(&e);
        (err.kind, crate::redis::describe(&e))
    };
    if change > 0 {
        // A raise: the database first. If Redis then fails, it holds fewer than the truth.
        write_db(db, (activity, product), initial, change, &entry).await?;
        let taken = match topup_script(redis, &k, change, &id).await {
            Ok(TopupReply::Applied(s) | TopupReply::AlreadyApplied(s)) => Ok(Some(s)),
            Ok(TopupReply::Missing) => Ok(None),
            // Only a cut is ever refused for too few units; say so rather than guess.
            Ok(TopupReply::TooFew(s)) => Err((
                ErrorKind::CheckFailed,
                format!("topup.lua refused the raise (stock {s})"),
            )),
            Err(e) => Err(redis_step(e)),
        };
        match taken {
            Ok(Some(s)) => report.redis_after = Some(s),
            Ok(None) => {
                report.redis_after = None;
                report.note = Some(format!(
                    "the stock key of {product} vanished meanwhile: the database holds the new initial stock; `seckill-console preheat {activity}` writes it"
                ));
            }
            Err((kind, why)) => {
                let kind = if kind == ErrorKind::Unavailable {
                    kind
                } else {
                    ErrorKind::CheckFailed
                };
                return Err(Error::new(
                    kind,
                    format!(
                        "the database now holds initial_stock {initial_after} for {product} (+{change}, audited), but Redis did not take the {change} unit(s): {why}. Do not run topup again: when Redis answers, `seckill-console fix {activity} --product {product}` adds them (status shows them as a drift of -{change} until then)"
                    ),
                ));
            }
        }
    } else {
        // A cut: Redis first, never below what it holds now. If the database then fails,
        // Redis holds fewer than the truth.
        match topup_script(redis, &k, change, &id).await {
            Ok(TopupReply::Applied(s) | TopupReply::AlreadyApplied(s)) => {
                report.redis_after = Some(s)
            }
            Ok(TopupReply::TooFew(s)) => {
                return Err(Error::refused(format!(
                    "--add {change}: the Redis stock of {product} is {s} now (buyers took the rest): nothing was written"
                )));
            }
            Ok(TopupReply::Missing) => {
                return Err(Error::refused(format!(
                    "the stock key of {product} vanished meanwhile: nothing was written; preheat, then top up again"
                )));
            }
            Err(e) => {
                let (kind, why) = redis_step(e);
                return Err(Error::new(
                    kind,
                    format!(
                        "Redis did not take the {} unit(s) away: {why}; nothing was written to the database (if the reply was only lost, `seckill-console fix {activity} --product {product}` gives them back)",
                        -change
                    ),
                ));
            }
        }
        if let Err(e) = write_db(db, (activity, product), initial, change, &entry).await {
            return Err(Error::new(
                e.kind,
                format!(
                    "Redis took {} unit(s) of {product} away, but the database did not lower initial_stock: {}. Run `seckill-console fix {activity} --product {product}` to give them back, then top up again",
                    -change, e.message
                ),
            ));
        }
    }
    Ok(report)
}

/// `initial_stock += change`, only while it still holds what was read, with its audit row in
/// the same transaction.
async fn write_db(
    db: &Db,
    (activity, product): (&ActivityId, &ProductId),
    initial: i64,
    change: i64,
    entry: &AuditEntry,
) -> Result<()> {
    let mut tx = db.begin().await.map_err(|e| db.error(&e))?;
    let n = tx
        .execute(
            "UPDATE seckill_product SET initial_stock = initial_stock + ? \
             WHERE activity_id = ? AND product_id = ? AND initial_stock = ?",
            &[
                crate::db::Arg::Int(change),
                activity.as_str().into(),
                product.as_str().into(),
                crate::db::Arg::Int(initial),
            ],
        )
        .await
        .map_err(|e| db.error(&e))?;
    if n != 1 {
        return Err(Error::refused(format!(
            "the initial stock of {product} changed since it was read (a re-import?): nothing was written; top up again"
        )));
    }
    audit::record_in(&mut tx, entry)
        .await
        .map_err(|e| db.error(&e))?;
    tx.commit().await.map_err(|e| db.error(&e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_keeps_the_initial_stock_in_range_and_names_the_value() {
        assert_eq!(check_change("p1", 10, 5).ok(), Some(15));
        assert_eq!(check_change("p1", 10, -10).ok(), Some(0));
        for (initial, change) in [
            (10, 0),
            (10, -11),
            (MAX_STOCK, 1),
            (0, i64::MAX),
            (5, i64::MIN),
        ] {
            let e = check_change("p1", initial, change).expect_err("refused");
            assert_eq!(e.kind, ErrorKind::BadInput);
            assert!(e.message.contains(&change.to_string()), "{}", e.message);
        }
    }
}
