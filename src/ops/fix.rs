//! One-key fix: rewrite Redis from database truth. Orphaned deductions go back through the
//! restore script (idempotent); every other product that is not ok gets its stock rewritten
//! with the compare-and-set script, only if the key still holds what was read. A conflict is
//! re-read and retried a bounded number of times, then reported. Never a blind SET.

use super::snapshot::{self, ProductView, Scope};
use crate::db::Db;
use crate::db::audit::{self, AuditEntry};
use crate::domain::ActivityId;
use crate::domain::stock::State;
use crate::error::{Error, Result};
use crate::redis::scripts::{RESTORE, SET_STOCK};
use crate::redis::{KeySpace, RedisStore};
use chrono::Utc;
use redis::Value;
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
}

/// One product in the report.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct FixProduct {
    pub product: String,
    /// The state that made it a candidate.
    pub state: State,
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

/// The fix report.
#[derive(Clone, Debug, Serialize)]
pub struct FixReport {
    pub activity: String,
    pub preview: bool,
    pub products: Vec<FixProduct>,
    pub conflicts: usize,
    pub errors: usize,
    /// 0, or 5 when a compare-and-set conflict outlived the retries, or 1 on other failures.
    #[serde(skip)]
    pub exit_code: i32,
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
    let candidates: Vec<String> = first
        .products
        .iter()
        .filter(|v| v.status.needs_fix())
        .map(|v| v.product.product_id.to_string())
        .collect();
    let mut report = FixReport {
        activity: activity.to_string(),
        preview: opts.preview,
        products: Vec::new(),
        conflicts: 0,
        errors: 0,
        exit_code: 0,
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
        order.push(id.clone());
        rows.insert(
            id.clone(),
            FixProduct {
                product: id,
                state: v.status.state,
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
            },
        );
    }
    if opts.preview {
        report.products = order.iter().filter_map(|id| rows.remove(id)).collect();
        return Ok(report);
    }

    // The database must answer before Redis is written: the audit rows go there.
    db.check().await?;
    let returned = return_orphans(redis, &snap.products, &mut rows, &opts.actor, activity).await?;
    audit::record_many(db, &returned)
        .await
        .map_err(|e| db.error(&e))?;

    // Rewrite what is still wrong, re-reading and retrying on a conflict.
    let mut todo: Vec<String> = order.clone();
    let epoch = Utc::now().timestamp_millis().to_string();
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
        let calls: Vec<(Vec<String>, Vec<Vec<u8>>)> = writes
            .iter()
            .map(|v| {
                (
                    vec![v.keys.stock.clone(), v.keys.meta.clone()],
                    cas_args(v, target(v), &epoch),
                )
            })
            .collect();
        let results = if calls.is_empty() {
            Vec::new()
        } else {
            redis.eval_many(&SET_STOCK, &calls).await
        };
        let mut retry = Vec::new();
        let mut audits = Vec::new();
        for (v, r) in writes.iter().zip(results) {
            let id = v.product.product_id.to_string();
            let Some(row) = rows.get_mut(&id) else {
                continue;
            };
            row.attempts = attempt;
            match r {
                Ok(Value::Array(items)) if items.first() == Some(&Value::Int(1)) => {
                    row.applied = true;
                    row.after = target(v);
                    row.conflict = false;
                    audits.push(fix_audit(&opts.actor, activity, v, target(v)));
                }
                Ok(Value::Array(_)) => {
                    // A deduction (or anyone) changed the key since it was read: read again.
                    row.conflict = true;
                    retry.push(id);
                }
                Ok(other) => row.error = Some(format!("unexpected reply {other:?}")),
                Err(e) if is_no_permission(&e) => {
                    audit::record_many(db, &audits)
                        .await
                        .map_err(|e| db.error(&e))?;
                    return Err(redis.error(&e));
                }
                Err(e) => row.error = Some(crate::redis::describe(&e)),
            }
        }
        audit::record_many(db, &audits)
            .await
            .map_err(|e| db.error(&e))?;
        todo = retry;
    }
    report.products = order.iter().filter_map(|id| rows.remove(id)).collect();
    report.conflicts = report.products.iter().filter(|p| p.conflict).count();
    report.errors = report.products.iter().filter(|p| p.error.is_some()).count();
    report.exit_code = if report.conflicts > 0 {
        5
    } else if report.errors > 0 {
        1
    } else {
        0
    };
    Ok(report)
}

/// Returns every orphaned deduction through the restore script; the script is idempotent, so
/// a concurrent return (the order's own cancel path) never doubles it. Returns the audit rows
/// of the products whose stock went up.
async fn return_orphans(
    redis: &RedisStore,
    views: &[ProductView],
    rows: &mut HashMap<String, FixProduct>,
    actor: &str,
    activity: &ActivityId,
) -> Result<Vec<AuditEntry>> {
    let mut calls = Vec::new();
    let mut owners: Vec<usize> = Vec::new();
    for (i, v) in views.iter().enumerate() {
        for rid in &v.orphans {
            calls.push((
                v.keys
                    .script_keys()
                    .iter()
                    .map(|k| k.to_string())
                    .collect::<Vec<_>>(),
                vec![rid.as_bytes().to_vec()],
            ));
            owners.push(i);
        }
    }
    if calls.is_empty() {
        return Ok(Vec::new());
    }
    let results = redis.eval_many(&RESTORE, &calls).await;
    let mut returned: HashMap<usize, (i64, Vec<String>)> = HashMap::new();
    for ((&i, r), (_, args)) in owners.iter().zip(results).zip(&calls) {
        let v = &views[i];
        let Some(row) = rows.get_mut(v.product.product_id.as_str()) else {
            continue;
        };
        match r {
            Ok(Value::Int(n)) if n > 0 => {
                row.orphans_returned += n;
                row.applied = true;
                let e = returned.entry(i).or_default();
                e.0 += n;
                e.1.push(String::from_utf8_lossy(&args[0]).to_string());
            }
            Ok(Value::Int(-1)) => {
                row.error.get_or_insert_with(|| {
                    "an orphan could not be returned while the stock key is missing; run fix again".into()
                });
            }
            Ok(_) => {}
            Err(e) if is_no_permission(&e) => return Err(redis.error(&e)),
            Err(e) => {
                row.error.get_or_insert_with(|| crate::redis::describe(&e));
            }
        }
    }
    let mut audits = Vec::new();
    for (i, (units, rids)) in returned {
        let v = &views[i];
        let mut e = AuditEntry::new(actor, "fix.return_orphans", activity);
        e.product_id = Some(v.product.product_id.to_string());
        e.before_value = v.redis.stock.shown();
        e.after_value = v.redis.stock.value().map(|s| (s + units).to_string());
        e.reason = format!("{units} orphaned unit(s) returned through the restore script");
        e.detail = serde_json::json!({ "request_ids": rids }).to_string();
        audits.push(e);
    }
    Ok(audits)
}

fn is_no_permission(e: &redis::RedisError) -> bool {
    e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoPerm)
}

/// Arguments of `set_stock.lua`: the guard of what was read, the new stock, the meta fields
/// from the database (a corrupt meta hash is rebuilt, with counters that match the ledger).
fn cas_args(v: &ProductView, stock: i64, epoch: &str) -> Vec<Vec<u8>> {
    let meta = &v.redis.meta;
    let rebuild = meta.corrupt.is_some() || !meta.present;
    let mut args: Vec<Vec<u8>> = vec![
        v.redis.stock.guard(),
        stock.to_string().into_bytes(),
        if meta.corrupt.is_some() {
            b"reset".to_vec()
        } else {
            b"keep".to_vec()
        },
    ];
    let mut field = |k: &str, val: String| {
        args.push(k.as_bytes().to_vec());
        args.push(val.into_bytes());
    };
    field("initial", v.product.initial_stock.to_string());
    field("limit", v.product.per_user_limit.to_string());
    field("fixed_at", epoch.to_string());
    if rebuild {
        let baseline = match v.ledger_active_units {
            Some(active) => active,
            None => v.truth.db_sold,
        };
        field("deducted", baseline.to_string());
        field("returned", "0".to_string());
    }
    args
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
            "corrupt value ({}) rewritten from database truth",
            v.status.corrupt_value.clone().unwrap_or_default()
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
