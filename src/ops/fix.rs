//! One-key fix: rewrite Redis from database truth. Orphaned deductions go back through the
//! restore script (idempotent); every other product that is not ok gets its stock rewritten
//! with the compare-and-set script, only if the key still holds what was read. A conflict is
//! re-read and retried a bounded number of times, then reported. Never a blind SET.

use super::rewrite;
use super::snapshot::{self, ProductView, Scope};
use crate::db::Db;
use crate::db::audit::{self, AuditEntry};
use crate::domain::ActivityId;
use crate::domain::stock::State;
use crate::error::{Error, ErrorKind, Result};
use crate::redis::stock::{Restored, SetStock, restore_many, set_stock_many};
use crate::redis::{KeySpace, RedisStore};
use chrono::Utc;
use redis::RedisError;
use serde::Serialize;
use std::collections::HashMap;
use std::time::Duration;

/// Compare-and-set attempts per product before a conflict is reported.
pub const MAX_ATTEMPTS: u32 = 5;

/// Options of one fix.
#[derive(Clone, Debug)]
pub struct FixOptions {
    /// Only this product (else every product of the activity).
    pub product: Option<String>,
    /// Show before and after, write nothing.
    pub preview: bool,
    pub actor: String,
    pub grace: Duration,
    /// The plan the operator confirmed ([`FixReport::confirmation`]): only these products are
    /// fixed, and only while each still shows what the preview showed. None (`--yes`): every
    /// product the fresh read finds.
    pub confirmed: Option<Confirmation>,
}

/// What the operator saw of each product in a preview.
pub type Confirmation = HashMap<String, Seen>;

/// What a preview showed of one product. The drift is what a fix corrects, and it stays put
/// while buyers deduct (each deduction moves Redis and the in-flight count alike), so a live
/// sale does not invalidate a confirmation; a drift that changed means the situation did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seen {
    pub state: State,
    pub drift: Option<i64>,
    /// The stock key's value, compared only when there is no drift figure (missing, corrupt).
    pub before: Option<String>,
}

/// One product in the report.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct FixProduct {
    pub product: String,
    /// The state that made it a candidate.
    pub state: State,
    /// Redis minus the truth, when the stock is an integer.
    pub drift: Option<i64>,
    /// What the stock key held (None: missing).
    pub before: Option<String>,
    /// The stock it holds after the fix (or would, for a preview).
    pub after: i64,
    /// True when this run changed the product (a rewrite or returned orphans).
    pub applied: bool,
    /// Units of orphaned deductions returned through the restore script.
    pub orphans_returned: i64,
    /// Request ids of the orphaned deductions found.
    pub orphans: Vec<String>,
    pub attempts: u32,
    pub conflict: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl FixProduct {
    fn seen(&self) -> Seen {
        Seen {
            state: self.state,
            drift: self.drift,
            before: self.before.clone(),
        }
    }
}

/// The fix report.
#[derive(Clone, Debug, Serialize)]
pub struct FixReport {
    pub activity: String,
    pub preview: bool,
    pub products: Vec<FixProduct>,
    pub conflicts: usize,
    pub errors: usize,
    /// 0; 5 when a product changed since the confirmed preview or a compare-and-set conflict
    /// outlived the retries; 4 when Redis refused a product's write (it is still not fixed).
    #[serde(skip)]
    pub exit_code: i32,
}

impl FixReport {
    /// The plan of a preview, to apply with [`FixOptions::confirmed`].
    pub fn confirmation(&self) -> Confirmation {
        self.products
            .iter()
            .map(|p| (p.product.clone(), p.seen()))
            .collect()
    }
}

/// True when the product still shows what the operator confirmed.
fn unchanged(seen: &Seen, now: &Seen) -> bool {
    seen.state == now.state
        && seen.drift == now.drift
        && (now.drift.is_some() || seen.before == now.before)
}

/// After orphans went back: the stock differs from its target, or the meta hash is corrupt or
/// gone (then deductions would not see the per-user limit).
fn needs_write(v: &ProductView) -> bool {
    v.redis.stock.value() != Some(target(v))
        || v.redis.meta.corrupt.is_some()
        || !v.redis.meta.present
}

/// What the stock should be now: the truth, minus orphans not yet returned (a later restore
/// returns them, so counting them now would add them twice).
fn target(v: &ProductView) -> i64 {
    (v.truth.expected_remaining - v.truth.orphaned).max(0)
}

/// A Redis error that stops the whole fix (unreachable, timed out, no permission); other
/// errors belong to one product and are reported on its row.
fn fatal(redis: &RedisStore, e: &RedisError) -> Option<Error> {
    let err = redis.error(e);
    matches!(err.kind, ErrorKind::Unavailable | ErrorKind::Refused).then_some(err)
}

/// Plans (and unless `preview`, applies) the fix of an activity.
pub async fn fix(
    redis: &RedisStore,
    db: &Db,
    keys: &KeySpace,
    activity: &ActivityId,
    opts: &FixOptions,
) -> Result<FixReport> {
    if !opts.preview && (redis.read_only() || db.read_only()) {
        return Err(Error::refused(
            "read-only mode: refused to fix; run without --read-only (or use --preview)",
        ));
    }
    let mut report = FixReport {
        activity: activity.to_string(),
        preview: opts.preview,
        products: Vec::new(),
        conflicts: 0,
        errors: 0,
        exit_code: 0,
    };
    let candidates: Vec<String> = match &opts.confirmed {
        Some(plan) => plan.keys().cloned().collect(),
        None => {
            let only = opts.product.clone().map(|p| vec![p]);
            let first = snapshot::take(
                redis,
                db,
                keys,
                activity,
                opts.grace,
                &Scope { only, exact: false },
            )
            .await?;
            first
                .products
                .iter()
                .filter(|v| v.status.needs_fix())
                .map(|v| v.product.product_id.to_string())
                .collect()
        }
    };
    if candidates.is_empty() {
        return Ok(report);
    }
    // The fast snapshot found the candidates; the exact one (every ledger read) decides.
    let exact = Scope {
        only: Some(candidates),
        exact: true,
    };
    let snap = snapshot::take(redis, db, keys, activity, opts.grace, &exact).await?;
    let mut rows: HashMap<String, FixProduct> = HashMap::new();
    let mut order = Vec::new();
    for v in snap.products.iter().filter(|v| v.status.needs_fix()) {
        let id = v.product.product_id.to_string();
        let mut row = FixProduct {
            product: id.clone(),
            state: v.status.state,
            drift: v.status.drift,
            before: v.redis.stock.shown(),
            after: if opts.preview {
                v.truth.expected_remaining
            } else {
                target(v)
            },
            applied: false,
            orphans_returned: 0,
            orphans: v.orphans.clone(),
            attempts: 0,
            conflict: false,
            error: None,
        };
        if let Some(seen) = opts.confirmed.as_ref().and_then(|plan| plan.get(&id))
            && !unchanged(seen, &row.seen())
        {
            row.conflict = true;
            row.error = Some(format!(
                "changed since the preview ({} drift {} -> {} drift {}): nothing written; preview again",
                seen.state.as_str(),
                shown_drift(seen.drift),
                row.state.as_str(),
                shown_drift(row.drift)
            ));
        }
        order.push(id.clone());
        rows.insert(id, row);
    }
    if opts.preview {
        report.products = order.iter().filter_map(|id| rows.remove(id)).collect();
        return Ok(report);
    }
    let work: Vec<&ProductView> = snap
        .products
        .iter()
        .filter(|v| {
            rows.get(v.product.product_id.as_str())
                .is_some_and(|r| !r.conflict)
        })
        .collect();

    // The database must answer before Redis is written: the audit rows go there.
    db.check().await?;
    return_orphans(redis, db, &work, &mut rows, &opts.actor, activity).await?;

    // Rewrite what is still wrong, re-reading and retrying on a conflict.
    let mut todo: Vec<String> = work
        .iter()
        .map(|v| v.product.product_id.to_string())
        .collect();
    let fixed_at = Utc::now().timestamp_millis().to_string();
    for attempt in 1..=MAX_ATTEMPTS {
        if todo.is_empty() {
            break;
        }
        let scope = Scope {
            only: Some(todo.clone()),
            exact: true,
        };
        let snap = snapshot::take(redis, db, keys, activity, opts.grace, &scope).await?;
        let writes: Vec<&ProductView> = snap.products.iter().filter(|v| needs_write(v)).collect();
        let calls: Vec<_> = writes
            .iter()
            .map(|v| rewrite::from_truth(v, target(v), vec![("fixed_at", fixed_at.clone())]))
            .collect();
        let results = if calls.is_empty() {
            Vec::new()
        } else {
            set_stock_many(redis, &calls).await
        };
        let mut retry = Vec::new();
        let mut audits = Vec::new();
        let mut stop = None;
        for (v, r) in writes.iter().zip(results) {
            let id = v.product.product_id.to_string();
            let Some(row) = rows.get_mut(&id) else {
                continue;
            };
            row.attempts = attempt;
            match r {
                Ok(SetStock::Applied(after)) => {
                    row.applied = true;
                    row.after = after;
                    row.conflict = false;
                    audits.push(fix_audit(&opts.actor, activity, v, after));
                }
                Ok(SetStock::Conflict(_)) => {
                    // A deduction (or anyone) changed the key since it was read: read again.
                    row.conflict = true;
                    retry.push(id);
                }
                Err(e) => match fatal(redis, &e) {
                    Some(err) => stop = stop.or(Some(err)),
                    None => row.error = Some(crate::redis::describe(&e)),
                },
            }
        }
        // Audited before any error returns: what was written is on record.
        audit::record_many(db, &audits)
            .await
            .map_err(|e| db.error(&e))?;
        if let Some(err) = stop {
            return Err(err);
        }
        todo = retry;
    }
    report.products = order.iter().filter_map(|id| rows.remove(id)).collect();
    report.conflicts = report.products.iter().filter(|p| p.conflict).count();
    report.errors = report
        .products
        .iter()
        .filter(|p| p.error.is_some() && !p.conflict)
        .count();
    report.exit_code = if report.conflicts > 0 {
        5
    } else if report.errors > 0 {
        4
    } else {
        0
    };
    Ok(report)
}

fn shown_drift(d: Option<i64>) -> String {
    d.map_or_else(|| "-".into(), |d| format!("{d:+}"))
}

/// Returns every orphaned deduction through the restore script; the script is idempotent, so
/// a concurrent return (the order's own cancel path) never doubles it. What went back is
/// audited before an error that stops the fix is returned.
async fn return_orphans(
    redis: &RedisStore,
    db: &Db,
    views: &[&ProductView],
    rows: &mut HashMap<String, FixProduct>,
    actor: &str,
    activity: &ActivityId,
) -> Result<()> {
    let calls: Vec<(usize, &str)> = views
        .iter()
        .enumerate()
        .flat_map(|(i, v)| v.orphans.iter().map(move |rid| (i, rid.as_str())))
        .collect();
    if calls.is_empty() {
        return Ok(());
    }
    let keyed: Vec<_> = calls
        .iter()
        .map(|&(i, rid)| (&views[i].keys, rid))
        .collect();
    let results = restore_many(redis, &keyed).await;
    let mut returned: HashMap<usize, (i64, Vec<&str>)> = HashMap::new();
    let mut stop = None;
    for (&(i, rid), r) in calls.iter().zip(results) {
        let Some(row) = rows.get_mut(views[i].product.product_id.as_str()) else {
            continue;
        };
        match r {
            Ok(Restored::Returned(n)) => {
                row.orphans_returned += n;
                row.applied = true;
                let e = returned.entry(i).or_default();
                e.0 += n;
                e.1.push(rid);
            }
            Ok(Restored::Missing) => {
                row.error.get_or_insert_with(|| {
                    "an orphan could not be returned while the stock key is missing; run fix again".into()
                });
            }
            // Returned meanwhile, or no longer in the ledger: nothing to give back.
            Ok(Restored::AlreadyReturned | Restored::Unknown | Restored::BadArgs) => {}
            Err(e) => match fatal(redis, &e) {
                Some(err) => stop = stop.or(Some(err)),
                None => {
                    row.error.get_or_insert_with(|| crate::redis::describe(&e));
                }
            },
        }
    }
    let audits: Vec<AuditEntry> = returned
        .into_iter()
        .map(|(i, (units, rids))| {
            let v = views[i];
            let mut e = AuditEntry::new(actor, "fix.return_orphans", activity);
            e.product_id = Some(v.product.product_id.to_string());
            e.before_value = v.redis.stock.shown();
            e.after_value = v.redis.stock.value().map(|s| (s + units).to_string());
            e.reason = format!("{units} orphaned unit(s) returned through the restore script");
            e.detail = serde_json::json!({ "request_ids": rids }).to_string();
            e
        })
        .collect();
    audit::record_many(db, &audits)
        .await
        .map_err(|e| db.error(&e))?;
    stop.map_or(Ok(()), Err)
}

fn fix_audit(actor: &str, activity: &ActivityId, v: &ProductView, after: i64) -> AuditEntry {
    let mut e = AuditEntry::new(actor, "fix", activity);
    e.product_id = Some(v.product.product_id.to_string());
    e.before_value = v.redis.stock.shown();
    e.after_value = Some(after.to_string());
    e.reason = match v.status.state {
        State::Drift => format!(
            "drift {:+}: Redis held {}, database truth {}",
            v.status.drift.unwrap_or_default(),
            v.redis.stock.shown().unwrap_or_default(),
            v.truth.expected_remaining
        ),
        State::Negative => "negative stock rewritten from database truth".into(),
        State::Missing => "missing stock key rewritten from database truth".into(),
        State::Corrupt => format!(
            "rewritten from database truth: {}",
            v.status.corrupt_value.as_deref().unwrap_or("corrupt")
        ),
        State::Ok | State::Paused => "rewritten from database truth".into(),
    };
    e.detail = serde_json::json!({
        "initial": v.truth.initial,
        "db_sold": v.truth.db_sold,
        "in_flight": v.truth.in_flight,
        "orphaned": v.truth.orphaned,
    })
    .to_string();
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(state: State, drift: Option<i64>, before: Option<&str>) -> Seen {
        Seen {
            state,
            drift,
            before: before.map(Into::into),
        }
    }

    #[test]
    fn a_confirmation_holds_while_buyers_deduct_and_breaks_when_the_drift_moves() {
        let confirmed = seen(State::Drift, Some(30), Some("130"));
        // Five sales since the preview: Redis and the truth both went down by five.
        assert!(unchanged(
            &confirmed,
            &seen(State::Drift, Some(30), Some("125"))
        ));
        // Someone else changed the stock: the correction the operator saw is not this one.
        assert!(!unchanged(
            &confirmed,
            &seen(State::Drift, Some(12), Some("112"))
        ));
        assert!(!unchanged(
            &confirmed,
            &seen(State::Negative, Some(-3), Some("-3"))
        ));
        // Without a drift figure the value itself must be the one shown.
        let corrupt = seen(State::Corrupt, None, Some("abc"));
        assert!(unchanged(
            &corrupt,
            &seen(State::Corrupt, None, Some("abc"))
        ));
        assert!(!unchanged(
            &corrupt,
            &seen(State::Corrupt, None, Some("xyz"))
        ));
        assert!(!unchanged(&corrupt, &seen(State::Missing, None, None)));
    }
}
