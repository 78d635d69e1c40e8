//! A live top-up: `initial_stock` in the database and the stock in Redis move by the same
//! change while buyers deduct. Two stores cannot change in one step, so the side that lowers
//! what can be sold goes first — the database for a raise, Redis for a cut — and a failure
//! between the two leaves Redis at or below the truth: lost sales that `fix` gives back (a
//! drift the status names), never an oversell. The Redis step is `topup.lua`, atomic and
//! applied once per top-up id.

use super::guard::{self, Write, phase_allows};
use super::snapshot::{self, Interleave, Scope, Stage};
use crate::db::Db;
use crate::db::audit::{self, AuditEntry};
use crate::domain::import::MAX_STOCK;
use crate::domain::stock::StockValue;
use crate::domain::{ActivityId, ProductId};
use crate::error::{Error, ErrorKind, Result};
use crate::redis::control::{TopupReply, TopupStep, topup as topup_script};
use crate::redis::{KeySpace, ProductKeys, RedisStore};
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

/// One top-up as asked.
#[derive(Clone, Debug)]
pub struct TopupRequest<'a> {
    pub activity: &'a ActivityId,
    pub product: &'a ProductId,
    /// Units added (negative: taken away).
    pub change: i64,
    pub actor: &'a str,
    pub reason: &'a str,
    pub grace: Duration,
    /// Called between the writes (tests only).
    pub interleave: Interleave,
}

/// Moves the initial stock of `product` by `change` in the database and in Redis.
pub async fn topup(
    redis: &RedisStore,
    db: &Db,
    keys: &KeySpace,
    req: &TopupRequest<'_>,
) -> Result<TopupReport> {
    let (activity, product, change) = (req.activity, req.product, req.change);
    let (actor, reason, grace) = (req.actor, req.reason, req.grace);
    guard::writable(redis, db, "top up")?;
    super::pause::check_reason(reason)?;
    let a = crate::db::activity::require(db, activity).await?;
    phase_allows(&a, Write::Topup)?;
    guard::redis_ready(redis, keys, activity, Write::Topup).await?;
    // Read from scratch: a cut never goes below what is sold, in flight or orphaned, and that
    // figure must not rest on books a feed carried.
    let scope = Scope {
        only: Some(vec![product.to_string()]),
        full: true,
        ..Scope::default()
    };
    let snap = snapshot::take(redis, db, keys, activity, grace, &scope).await?;
    let Some(v) = snap.products.first() else {
        return Err(Error::bad_input(format!(
            "product '{product}' is not in activity '{activity}'"
        )));
    };
    let initial = v.product.initial_stock;
    let held = (v.truth.db_sold + v.truth.in_flight + v.truth.orphaned).max(0);
    // A cut below what is held is refused the same way however deep it goes (below 0 too):
    // one exit code (5) and the figure that is allowed.
    if change < 0 && initial.saturating_add(change) < held {
        return Err(Error::refused(format!(
            "--add {change}: {product} has {held} unit(s) sold, in flight or orphaned of {initial}; the initial stock cannot go below that ({})",
            if held < initial {
                format!("at most --add {}", held - initial)
            } else {
                "no unit is unsold: nothing can be taken away".to_string()
            }
        )));
    }
    let initial_after = check_change(product.as_str(), initial, change)?;
    let redis_before = match &v.cut.stock {
        StockValue::Value(s) if v.status.lost.iter().all(|p| !p.needs_rebuild()) => Some(*s),
        // Without a stock key the database alone moves (bracketed by the marker). A cut must
        // know what is in flight: only a product with nothing at all in Redis (not preheated,
        // or lost whole) has nothing in flight Redis could still sell against; one that kept
        // its ledger or stream is fixed first.
        StockValue::Missing if change > 0 || nothing_in_redis(&v.cut) => None,
        _ => {
            return Err(Error::refused(format!(
                "{product} is {}{}: run `seckill-console fix {activity} --product {product}` first, then top up",
                v.status.state.as_str(),
                if v.status.lost.is_empty() {
                    String::new()
                } else {
                    format!(
                        " ({} lost)",
                        crate::domain::stock::lost_shown(&v.status.lost)
                    )
                }
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
    let id = crate::domain::token::unique();
    let k = keys.product(activity, product);
    let mut entry = AuditEntry::new(actor, "topup", activity);
    entry.product_id = Some(product.to_string());
    entry.before_value = Some(initial.to_string());
    entry.after_value = Some(initial_after.to_string());
    entry.reason = reason.to_string();
    req.interleave.at(Stage::BeforeWrite).await;
    let step = Step {
        redis,
        db,
        keys: &k,
        at: (activity, product),
        id: &id,
        initial,
        change,
        entry: &entry,
        interleave: &req.interleave,
    };
    report.redis_after = step.run().await?;
    if report.redis_after.is_none() {
        report.note = Some(format!(
            "{product} has no stock key in Redis: the database holds the new initial stock; `seckill-console preheat {activity}` writes it"
        ));
    }
    Ok(report)
}

/// True when none of the product's keys is in Redis: no deduction there to account for.
fn nothing_in_redis(c: &crate::redis::cut::ProductCut) -> bool {
    use crate::domain::meta::Piece;
    let lost = c.lost();
    [
        Piece::Stock,
        Piece::Meta,
        Piece::Buyers,
        Piece::Ledger,
        Piece::Events,
    ]
    .iter()
    .all(|p| lost.contains(p))
}

/// One top-up's writes: the marker in Redis, the database, the second step in Redis.
struct Step<'a> {
    redis: &'a RedisStore,
    db: &'a Db,
    keys: &'a ProductKeys,
    at: (&'a ActivityId, &'a ProductId),
    id: &'a str,
    initial: i64,
    change: i64,
    entry: &'a AuditEntry,
    interleave: &'a Interleave,
}

impl Step<'_> {
    /// The three writes in order; the stock afterwards (None: the product has no stock key,
    /// and the marker alone bracketed the database's write).
    async fn run(&self) -> Result<Option<i64>> {
        let (activity, product) = self.at;
        let change = self.change;
        let fail = |e: redis::RedisError| {
            let err = self.redis.error(&e);
            (err.kind, crate::redis::describe(&e))
        };
        // 1. The marker (and, for a cut, the units taken away): every other console now sees
        // the top-up between its writes and does not correct across it.
        let stockless = match topup_script(self.redis, self.keys, TopupStep::Begin(change), self.id)
            .await
        {
            Ok(TopupReply::Done(_) | TopupReply::AlreadyBegun(_)) => false,
            Ok(TopupReply::BegunWithoutStock) => true,
            Ok(TopupReply::TooFew(s)) => {
                return Err(Error::refused(format!(
                    "--add {change}: the Redis stock of {product} is {s} now (buyers took the rest): nothing was written"
                )));
            }
            Ok(TopupReply::Missing) => {
                return Err(Error::refused(format!(
                    "the stock key of {product} vanished meanwhile: nothing was written; fix or preheat, then top up again"
                )));
            }
            Ok(TopupReply::NotPending(m)) => {
                return Err(Error::refused(format!(
                    "another top-up of {product} is between its writes ('{m}'): nothing was written; top up again in a moment"
                )));
            }
            Ok(TopupReply::Held(why)) => {
                return Err(Error::refused(format!(
                    "{product} is not the console's to top up now ({why}): nothing was written; fix it first"
                )));
            }
            Ok(other) => {
                return Err(Error::check_failed(format!(
                    "topup.lua answered {other:?} to the top-up's first step: nothing was written"
                )));
            }
            Err(e) => {
                let (kind, why) = fail(e);
                return Err(Error::new(
                    kind,
                    format!(
                        "Redis did not take the top-up's first step: {why}; nothing was written to the database (if only the reply was lost, the next `seckill-console fix {activity} --product {product}` resolves it)"
                    ),
                ));
            }
        };
        self.interleave.at(Stage::TopupBegun).await;
        // 2. The database.
        if let Err(e) = self.write_db().await {
            let back = if change > 0 {
                TopupStep::Abort
            } else {
                TopupStep::Undo
            };
            let undone = topup_script(self.redis, self.keys, back, self.id).await;
            let redis_side = match undone {
                Ok(_) => "Redis is as before".to_string(),
                Err(u) => format!(
                    "Redis could not be put back ({}): the next `seckill-console fix {activity} --product {product}` does it",
                    crate::redis::describe(&u)
                ),
            };
            return Err(Error::new(e.kind, format!("{}; {redis_side}", e.message)));
        }
        self.interleave.at(Stage::TopupWritten).await;
        // 3. The second step in Redis.
        let second = if change > 0 {
            TopupStep::Apply
        } else {
            TopupStep::Finish
        };
        match topup_script(self.redis, self.keys, second, self.id).await {
            Ok(TopupReply::Done(s) | TopupReply::AlreadyApplied(s)) => Ok(Some(s)),
            Ok(TopupReply::Missing) if stockless => Ok(None),
            Ok(TopupReply::Missing) => Err(Error::check_failed(format!(
                "the database holds initial_stock {} for {product}, but its stock key vanished meanwhile: `seckill-console preheat {activity}` writes it from the database",
                self.initial + change
            ))),
            Ok(other) => Err(Error::check_failed(format!(
                "the database holds initial_stock {} for {product}, but the top-up's second step in Redis answered {other:?} (another console resolved it): `seckill-console status {activity}` shows where the stock stands; `fix` corrects it from the database",
                self.initial + change
            ))),
            Err(e) => {
                let (kind, why) = fail(e);
                let kind = if kind == ErrorKind::Unavailable {
                    kind
                } else {
                    ErrorKind::CheckFailed
                };
                Err(Error::new(
                    kind,
                    format!(
                        "the database now holds initial_stock {} for {product} ({change:+}, audited), but Redis did not take the second step: {why}. Do not run topup again: once Redis answers (and {} s have passed), `seckill-console fix {activity} --product {product}` finishes it from the database",
                        self.initial + change,
                        super::repair::TOPUP_LEASE_MS / 1000
                    ),
                ))
            }
        }
    }

    /// `initial_stock += change`, only while it still holds what was read and no fix fenced
    /// this top-up off (its console was presumed dead), with its audit row in the same
    /// transaction.
    async fn write_db(&self) -> Result<()> {
        let (activity, product) = self.at;
        let db = self.db;
        let mut tx = db.begin().await.map_err(|e| db.error(&e))?;
        let n = tx
            .execute(
                "UPDATE seckill_product SET initial_stock = initial_stock + ? \
                 WHERE activity_id = ? AND product_id = ? AND initial_stock = ? \
                 AND (topup_fence IS NULL OR topup_fence <> ?)",
                &[
                    crate::db::Arg::Int(self.change),
                    activity.as_str().into(),
                    product.as_str().into(),
                    crate::db::Arg::Int(self.initial),
                    self.id.into(),
                ],
            )
            .await
            .map_err(|e| db.error(&e))?;
        if n != 1 {
            return Err(Error::refused(format!(
                "the initial stock of {product} changed since it was read (a re-import, another top-up, or a fix that took this one for dead): the database was not written; top up again"
            )));
        }
        audit::record_in(&mut tx, self.entry)
            .await
            .map_err(|e| db.error(&e))?;
        tx.commit().await.map_err(|e| db.error(&e))
    }
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
