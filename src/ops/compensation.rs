//! Resolving the compensation queue: for each pending entry, the ledger and the orders decide
//! whether the deduction was applied, must be returned, or never happened.

use crate::db::audit::AuditEntry;
use crate::db::compensation::{self, APPLIED, Compensation, NOT_APPLIED, RETURNED, Resolve};
use crate::db::{Db, orders};
use crate::domain::compensation::{OrderSeen, Verdict, decide};
use crate::domain::stock::LedgerEntry;
use crate::domain::{ActivityId, ProductId};
use crate::error::{Error, Result};
use crate::redis::stock::{Restored, restore_many};
use crate::redis::{KeySpace, Keyed, ProductKeys, RedisStore};
use chrono::Utc;
use redis::Value;
use serde::Serialize;
use std::collections::HashMap;
use std::time::Duration;

/// What happened to one entry.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Resolution {
    pub request_id: String,
    pub product: String,
    pub quantity: i64,
    pub verdict: Verdict,
    /// The status the entry has now (`pending` when it stays in the queue).
    pub status: String,
    pub detail: String,
}

/// The report of `compensation resolve`.
#[derive(Clone, Debug, Serialize)]
pub struct ResolveReport {
    pub activity: String,
    pub resolutions: Vec<Resolution>,
    pub resolved: usize,
    pub still_pending: usize,
}

/// Which entries to resolve.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Which {
    /// One request id.
    One(String),
    /// Every pending entry.
    All,
}

/// Resolves pending entries. Resolving twice changes nothing: only pending entries are touched
/// and the restore script is idempotent per request id.
pub async fn resolve(
    redis: &RedisStore,
    db: &Db,
    keys: &KeySpace,
    activity: &ActivityId,
    which: &Which,
    actor: &str,
    grace: Duration,
) -> Result<ResolveReport> {
    if redis.read_only() || db.read_only() {
        return Err(Error::refused(
            "read-only mode: refused to resolve compensation entries; run without --read-only",
        ));
    }
    crate::db::activity::require(db, activity).await?;
    let entries = match which {
        Which::One(r) => {
            let found = compensation::pending(db, activity, Some(r)).await?;
            if found.is_empty() {
                return Err(Error::bad_input(format!(
                    "request '{r}' has no compensation entry in activity '{activity}': see `seckill-console compensation list {activity}`"
                )));
            }
            found
        }
        Which::All => compensation::pending(db, activity, None).await?,
    };
    let mut report = ResolveReport {
        activity: activity.to_string(),
        resolutions: Vec::new(),
        resolved: 0,
        still_pending: 0,
    };
    let open: Vec<&Compensation> = entries
        .iter()
        .filter(|e| e.status == compensation::PENDING)
        .collect();
    for e in entries.iter().filter(|e| e.status != compensation::PENDING) {
        report.resolutions.push(Resolution {
            request_id: e.request_id.clone(),
            product: e.product_id.clone(),
            quantity: e.quantity,
            verdict: match e.status.as_str() {
                APPLIED => Verdict::Applied,
                RETURNED => Verdict::AlreadyReturned,
                _ => Verdict::NotApplied,
            },
            status: e.status.clone(),
            detail: "already resolved; nothing changed".into(),
        });
    }
    if open.is_empty() {
        return Ok(report);
    }

    // The ledger records of every open entry, one pipeline; the orders, one query per chunk.
    let mut product_keys = Vec::with_capacity(open.len());
    for e in &open {
        let p = ProductId::parse(&e.product_id).map_err(|err| {
            Error::internal(format!("compensation entry {}: {}", e.id, err.message))
        })?;
        product_keys.push(keys.product(activity, &p));
    }
    let items: Vec<Keyed> = open
        .iter()
        .zip(&product_keys)
        .map(|(e, k)| {
            Keyed::new(
                &k.ledger,
                redis::cmd("HGET").arg(&k.ledger).arg(&e.request_id).clone(),
            )
        })
        .collect();
    let ledger = redis.pipeline(items).await;
    let rids: Vec<&str> = open.iter().map(|e| e.request_id.as_str()).collect();
    let orders = orders::statuses(db, activity, &rids).await?;
    let now_ms = Utc::now().timestamp_millis();
    let grace_ms = i64::try_from(grace.as_millis()).unwrap_or(i64::MAX);

    // Decide every entry; the ones to return go back in one pipelined restore below.
    let mut verdicts = Vec::with_capacity(open.len());
    for ((e, k), record) in open.iter().zip(&product_keys).zip(ledger) {
        let verdict = match record {
            Ok(Value::BulkString(b)) => match LedgerEntry::parse(&e.request_id, &b) {
                Some(entry) => decide(Some(&entry), seen(&orders, e), now_ms, grace_ms),
                None => {
                    report.still_pending += 1;
                    report.resolutions.push(pending(
                        e,
                        Verdict::InFlight,
                        "the ledger record is corrupt; left pending",
                    ));
                    continue;
                }
            },
            Ok(_) => decide(None, seen(&orders, e), now_ms, grace_ms),
            Err(err) => return Err(redis.error(&err)),
        };
        verdicts.push((*e, k, verdict));
    }
    let to_return: Vec<(&ProductKeys, &str)> = verdicts
        .iter()
        .filter(|(_, _, v)| *v == Verdict::Return)
        .map(|(e, k, _)| (*k, e.request_id.as_str()))
        .collect();
    let mut restored: HashMap<&str, Restored> = HashMap::new();
    for ((_, rid), r) in to_return.iter().zip(restore_many(redis, &to_return).await) {
        restored.insert(rid, r.map_err(|err| redis.error(&err))?);
    }

    let mut writes = Vec::new();
    let mut shown = Vec::new();
    for (e, _, verdict) in verdicts {
        let (status, detail) = match verdict {
            Verdict::Applied => (
                APPLIED,
                "the deduction happened and its order exists".to_string(),
            ),
            Verdict::AlreadyReturned => (
                RETURNED,
                "the ledger shows the stock was returned already".to_string(),
            ),
            Verdict::NotApplied => (
                NOT_APPLIED,
                "the ledger has no record of this request: nothing was deducted".to_string(),
            ),
            Verdict::InFlight => {
                report.still_pending += 1;
                report.resolutions.push(pending(
                    e,
                    verdict,
                    "deducted recently; its order may still land (inside the grace window)",
                ));
                continue;
            }
            Verdict::Return => match restored.get(e.request_id.as_str()) {
                Some(Restored::Returned(n)) => (
                    RETURNED,
                    format!("{n} unit(s) returned through the restore script"),
                ),
                Some(Restored::AlreadyReturned) => {
                    (RETURNED, "returned already (concurrently)".to_string())
                }
                Some(Restored::Missing) | None => {
                    report.still_pending += 1;
                    report.resolutions.push(pending(
                        e,
                        verdict,
                        "the stock key is missing: preheat or fix first, then resolve again",
                    ));
                    continue;
                }
                Some(Restored::Unknown | Restored::BadArgs) => (
                    NOT_APPLIED,
                    "the ledger lost the record while resolving".to_string(),
                ),
            },
        };
        let mut audit = AuditEntry::new(actor, "compensation.resolve", activity);
        audit.product_id = Some(e.product_id.clone());
        audit.before_value = Some(compensation::PENDING.into());
        audit.after_value = Some(status.into());
        audit.reason = detail.clone();
        audit.detail =
            serde_json::json!({ "request_id": e.request_id, "quantity": e.quantity }).to_string();
        shown.push((e, verdict, status, detail));
        writes.push(audit);
    }
    let resolves: Vec<Resolve<'_>> = shown
        .iter()
        .zip(writes)
        .map(|((e, _, status, detail), audit)| Resolve {
            id: e.id,
            status,
            resolution: detail,
            audit,
        })
        .collect();
    let changed = compensation::resolve_many(db, &resolves).await?;
    for ((e, verdict, status, detail), changed) in shown.into_iter().zip(changed) {
        report.resolutions.push(Resolution {
            request_id: e.request_id.clone(),
            product: e.product_id.clone(),
            quantity: e.quantity,
            verdict,
            status: status.into(),
            detail: if changed {
                detail
            } else {
                "resolved concurrently; nothing changed".into()
            },
        });
        if changed {
            report.resolved += 1;
        }
    }
    Ok(report)
}

/// Whether the entry's request has an order, and whether it still holds stock.
fn seen(orders: &HashMap<String, String>, e: &Compensation) -> OrderSeen {
    match orders.get(e.request_id.as_str()) {
        None => OrderSeen::None,
        Some(status) if orders::is_live(status) => OrderSeen::Live,
        Some(_) => OrderSeen::Dead,
    }
}

fn pending(e: &Compensation, verdict: Verdict, detail: &str) -> Resolution {
    Resolution {
        request_id: e.request_id.clone(),
        product: e.product_id.clone(),
        quantity: e.quantity,
        verdict,
        status: compensation::PENDING.into(),
        detail: detail.into(),
    }
}
