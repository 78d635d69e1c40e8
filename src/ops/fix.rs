//! One-key fix: rewrite Redis from database truth. The snapshot finds what each product's drift
//! is made of; [`super::repair`] returns orphaned deductions, records the sales Redis lost and
//! takes away the stock's offset from its counters, each in a way a concurrent deduction cannot
//! spoil. Never a blind SET.

use super::repair::{self, Repair, Repaired};
use super::snapshot::{self, ProductView, Scope, Snapshot};
use crate::db::Db;
use crate::db::audit::{self, AuditEntry};
use crate::domain::ActivityId;
use crate::domain::stock::State;
use crate::error::{Error, ErrorKind, Result};
use crate::redis::{KeySpace, RedisStore};
use chrono::Utc;
use serde::Serialize;
use std::collections::HashMap;
use std::time::Duration;

pub use super::repair::MAX_ATTEMPTS;

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
    /// Days after the activity's end that rewritten keys expire (0: never).
    pub key_ttl_days: u32,
}

/// What the operator saw of each product in a preview.
pub type Confirmation = HashMap<String, Seen>;

/// What a preview showed of one product. The drift is what a fix corrects, and it stays put
/// while buyers deduct (each deduction moves Redis and the truth alike), so a live sale does
/// not invalidate a confirmation; a drift that changed means the situation did.
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
    /// The stock right after the fix (or, for a preview, the truth it is fixed to).
    pub after: i64,
    /// True when this run changed the product.
    pub applied: bool,
    /// The stock's offset from the scripts' counters that the fix takes away.
    pub offset: Option<i64>,
    /// Units of orphaned deductions returned through the restore script.
    pub orphans_returned: i64,
    /// Request ids of the orphaned deductions found.
    pub orphans: Vec<String>,
    /// Units of live orders recorded as deductions (sales Redis had lost).
    pub sales_recorded: i64,
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
    /// Why the fix did not finish, if it did not: `Refused` (exit 5) when a product changed
    /// since the confirmed preview or its rewrite met a moving offset on every attempt;
    /// `CheckFailed` (exit 4) when Redis refused a product's write (it is still not fixed).
    #[serde(skip)]
    pub failure: Option<ErrorKind>,
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

/// Reads the products to fix at one cut.
async fn read(
    redis: &RedisStore,
    db: &Db,
    keys: &KeySpace,
    activity: &ActivityId,
    grace: Duration,
    only: Vec<String>,
) -> Result<Snapshot> {
    let scope = Scope {
        only: Some(only),
        ..Scope::default()
    };
    snapshot::take(redis, db, keys, activity, grace, &scope).await
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
    if let Some(a) = crate::db::activity::get(db, activity).await?
        && a.phase(chrono::Utc::now()) == crate::domain::Phase::Cancelled
    {
        // A fix writes stock from the truth: on a cancelled activity that would put units
        // back where the deduction script sells them.
        return Err(Error::refused(format!(
            "activity '{activity}' is cancelled: a fix would put its stock back on sale; run `seckill-console cleanup {activity}` to delete its keys"
        )));
    }
    let mut report = FixReport {
        activity: activity.to_string(),
        preview: opts.preview,
        products: Vec::new(),
        conflicts: 0,
        errors: 0,
        failure: None,
    };
    let candidates: Vec<String> = match &opts.confirmed {
        Some(plan) => plan.keys().cloned().collect(),
        None => {
            let scope = Scope {
                only: opts.product.clone().map(|p| vec![p]),
                ..Scope::default()
            };
            snapshot::take(redis, db, keys, activity, opts.grace, &scope)
                .await?
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
    let snap = read(redis, db, keys, activity, opts.grace, candidates).await?;
    let work: Vec<&ProductView> = snap
        .products
        .iter()
        .filter(|v| v.status.needs_fix())
        .collect();
    let mut rows: Vec<FixProduct> = work.iter().map(|v| row(v)).collect();
    if let Some(plan) = &opts.confirmed {
        for r in &mut rows {
            if let Some(seen) = plan.get(&r.product)
                && !unchanged(seen, &r.seen())
            {
                r.conflict = true;
                r.error = Some(format!(
                    "changed since the preview ({} drift {} -> {} drift {}): nothing written; preview again",
                    seen.state.as_str(),
                    shown_drift(seen.drift),
                    r.state.as_str(),
                    shown_drift(r.drift)
                ));
            }
        }
    }
    if opts.preview {
        report.products = rows;
        return Ok(report);
    }

    // The database must answer before Redis is written: the audit rows go there.
    db.check().await?;
    let expire_at = snap.activity.keys_expire_at(opts.key_ttl_days);
    let fixed_at = Utc::now().timestamp_millis().to_string();
    let todo: Vec<usize> = (0..rows.len()).filter(|&i| !rows[i].conflict).collect();
    let repairs: Vec<Repair<'_>> = todo
        .iter()
        .map(|&i| Repair {
            view: work[i],
            meta: vec![("fixed_at", fixed_at.clone())],
            expire_at,
            books: true,
        })
        .collect();
    let retry = opts.confirmed.is_none();
    let (done, stop) = match repair::repair(redis, db, activity, &repairs, retry).await {
        Ok(done) => (done, None),
        Err(p) => (p.done, Some(p.error)),
    };
    let mut audits = Vec::new();
    for (&i, (r, d)) in todo.iter().zip(repairs.iter().zip(&done)) {
        settle_row(&mut rows[i], d);
        if rows[i].error.is_none() {
            rows[i].error = unrepairable(r.view);
        }
        audits.extend(fix_audits(&opts.actor, activity, r.view, d));
    }
    // Audited before any error returns: what was written is on record.
    audit::record_many(db, &audits)
        .await
        .map_err(|e| db.error(&e))?;
    if let Some(err) = stop {
        return Err(err);
    }
    report.products = rows;
    report.conflicts = report.products.iter().filter(|p| p.conflict).count();
    report.errors = report
        .products
        .iter()
        .filter(|p| p.error.is_some() && !p.conflict)
        .count();
    report.failure = if report.conflicts > 0 {
        Some(ErrorKind::Refused)
    } else if report.errors > 0 {
        Some(ErrorKind::CheckFailed)
    } else {
        None
    };
    Ok(report)
}

fn row(v: &ProductView) -> FixProduct {
    FixProduct {
        product: v.product.product_id.to_string(),
        state: v.status.state,
        drift: v.status.drift,
        before: v.cut.stock.shown(),
        after: v.truth.expected_remaining,
        applied: false,
        offset: v.status.offset,
        orphans_returned: 0,
        orphans: v.split.orphans.clone(),
        sales_recorded: v.books.unledgered_units(),
        attempts: 0,
        conflict: false,
        error: unrepairable(v),
    }
}

/// What a fix cannot rebuild from the database: an entry of the ledger or the buyers hash
/// that is unreadable (a deduction's event id and first reply, a buyer's in-flight units, are
/// Redis's alone). Said, never guessed at.
fn unrepairable(v: &ProductView) -> Option<String> {
    let shown = v.books.bad_entry_shown(&v.keys.ledger, &v.keys.buyers)?;
    Some(format!(
        "{shown}: fix cannot rebuild such an entry from the database, and every script refuses that request or buyer until it is set right by hand (see the README, \"Unreadable entries\")"
    ))
}

/// Puts what the repair did on the product's row.
fn settle_row(row: &mut FixProduct, d: &Repaired) {
    row.applied = d.applied();
    row.orphans_returned = d.returned_units;
    row.sales_recorded = d.recorded_units;
    row.attempts = d.attempts;
    if let Some(after) = d.stock_after {
        row.after = after;
    }
    row.conflict = d.conflict.is_some();
    row.error = d.conflict.clone().or_else(|| d.error.clone());
}

fn shown_drift(d: Option<i64>) -> String {
    d.map_or_else(|| "-".into(), |d| format!("{d:+}"))
}

/// One audit row per kind of write the repair made on a product.
fn fix_audits(
    actor: &str,
    activity: &ActivityId,
    v: &ProductView,
    d: &Repaired,
) -> Vec<AuditEntry> {
    let mut out = Vec::new();
    let product = Some(v.product.product_id.to_string());
    if d.returned_units > 0 {
        let mut e = AuditEntry::new(actor, "fix.return_orphans", activity);
        e.product_id = product.clone();
        e.before_value = v.cut.stock.shown();
        e.after_value = v
            .cut
            .stock
            .value()
            .map(|s| (s + d.returned_units).to_string());
        e.reason = format!(
            "{} orphaned unit(s) returned through the restore script",
            d.returned_units
        );
        e.detail = serde_json::json!({ "request_ids": d.returned }).to_string();
        out.push(e);
    }
    if d.recorded_units > 0 {
        let mut e = AuditEntry::new(actor, "fix.record_sales", activity);
        e.product_id = product.clone();
        e.reason = format!(
            "{} unit(s) of live orders recorded as deductions (Redis had lost them)",
            d.recorded_units
        );
        e.detail = serde_json::json!({ "request_ids": d.recorded }).to_string();
        out.push(e);
    }
    if d.rewritten {
        let mut e = AuditEntry::new(actor, "fix", activity);
        e.product_id = product;
        e.before_value = v.cut.stock.shown();
        e.after_value = d.stock_after.map(|s| s.to_string());
        e.reason = match v.status.state {
            State::Drift | State::Negative => format!(
                "drift {}: the stock was {} off its own counters; changed by {:+}",
                shown_drift(v.status.drift),
                shown_drift(v.status.offset),
                d.change
            ),
            State::Missing => {
                "missing stock key written from the counters and database truth".into()
            }
            State::Corrupt => format!(
                "rewritten from the counters and database truth: {}",
                v.status.corrupt_value.as_deref().unwrap_or("corrupt")
            ),
            State::Ok | State::Paused => "meta hash rewritten from database truth".into(),
        };
        e.detail = serde_json::json!({
            "initial": v.truth.initial,
            "db_sold": v.truth.db_sold,
            "in_flight": v.truth.in_flight,
            "orphaned": v.truth.orphaned,
            "offset": v.status.offset,
            "unledgered": v.status.unledgered,
            "change": d.change,
        })
        .to_string();
        out.push(e);
    }
    out
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
