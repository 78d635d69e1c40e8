//! The preheat gate: write an activity's keys from database truth, verify them, decide go or
//! no-go. Keys that already hold something else are a no-go unless forced; keys that already
//! hold what would be written are left alone, so preheating twice is safe.

use super::progress::Progress;
use super::snapshot::{self, ProductView};
use crate::db::Db;
use crate::db::audit::{self, AuditEntry};
use crate::domain::ActivityId;
use crate::domain::preheat::{Action, TokenBucket, plan, prechecks};
use crate::domain::stock::{StockValue, shown};
use crate::error::{Error, ErrorKind, Result};
use crate::ops::{health, rewrite};
use crate::redis::product_state;
use crate::redis::stock::{SetStock, set_stock_many};
use crate::redis::{KeySpace, RedisStore};
use chrono::Utc;
use serde::Serialize;
use std::time::{Duration, Instant};

/// Products per write or verify batch: progress is reported after each.
const BATCH: usize = 5000;

/// Options of one preheat.
pub struct PreheatOptions {
    pub force: bool,
    pub actor: String,
    pub grace: Duration,
}

/// One product in the report.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct PreheatProduct {
    pub product: String,
    pub action: Action,
    /// The stock the gate writes (or found already written): database truth.
    pub stock: i64,
    pub per_user_limit: i64,
    /// What Redis held before, when it held something.
    pub previous: Option<String>,
    pub written: bool,
    pub verified: bool,
    pub token_bucket: TokenBucket,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A product whose keys hold something else than the gate would write.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Conflict {
    pub product: String,
    pub redis_stock: Option<String>,
    pub wanted_stock: i64,
    pub redis_limit: Option<i64>,
    pub wanted_limit: i64,
}

/// The go / no-go report.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct PreheatReport {
    pub activity: String,
    pub decision: &'static str,
    pub products: Vec<PreheatProduct>,
    pub total_stock: i64,
    pub reasons: Vec<String>,
    pub conflicts: Vec<Conflict>,
    pub written: usize,
    pub unchanged: usize,
    pub elapsed_ms: u64,
    /// The exit code of the decision: 0 go, 4 a check failed, 5 refused (conflicts).
    #[serde(skip)]
    pub exit_code: i32,
}

impl PreheatReport {
    fn no_go(mut self, code: i32, started: Instant) -> Self {
        self.decision = "no-go";
        self.exit_code = code;
        self.elapsed_ms = elapsed_ms(started);
        self
    }
}

fn elapsed_ms(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// Runs the preheat gate on `activity`. Errors are for the unexpected (unreachable services, an
/// unknown activity); every decision, go or no-go, is a report.
pub async fn preheat(
    redis: &RedisStore,
    db: &Db,
    keys: &KeySpace,
    activity: &ActivityId,
    opts: &PreheatOptions,
    progress: &dyn Progress,
) -> Result<PreheatReport> {
    if redis.read_only() || db.read_only() {
        return Err(Error::refused(
            "read-only mode: refused to preheat; run without --read-only",
        ));
    }
    let started = Instant::now();
    progress.update("reading", 0, 1);
    let snap = snapshot::take(
        redis,
        db,
        keys,
        activity,
        opts.grace,
        &snapshot::Scope::default(),
    )
    .await?;
    progress.update("reading", 1, 1);
    tracing::debug!(
        ms = started.elapsed().as_millis() as u64,
        "preheat: snapshot read"
    );
    let window = snap.activity.window_secs();
    let mut report = PreheatReport {
        activity: activity.to_string(),
        decision: "go",
        products: Vec::with_capacity(snap.products.len()),
        total_stock: 0,
        reasons: Vec::new(),
        conflicts: Vec::new(),
        written: 0,
        unchanged: 0,
        elapsed_ms: 0,
        exit_code: 0,
    };

    let products: Vec<_> = snap.products.iter().map(|v| v.product.clone()).collect();
    report.reasons = prechecks(&snap.activity, &products, Utc::now());
    let actions: Vec<Action> = snap
        .products
        .iter()
        .map(|v| {
            plan(
                &v.redis.stock,
                &v.redis.meta,
                &v.product,
                v.truth.expected_remaining,
                opts.force,
            )
        })
        .collect();
    for (v, action) in snap.products.iter().zip(&actions) {
        let target = v.truth.expected_remaining;
        report.total_stock += target;
        report.products.push(PreheatProduct {
            product: v.product.product_id.to_string(),
            action: *action,
            stock: target,
            per_user_limit: v.product.per_user_limit,
            previous: v.redis.stock.shown(),
            written: false,
            verified: false,
            token_bucket: TokenBucket::new(target, window),
            error: None,
        });
        if *action == Action::Conflict {
            report.conflicts.push(Conflict {
                product: v.product.product_id.to_string(),
                redis_stock: v.redis.stock.shown(),
                wanted_stock: target,
                redis_limit: v.redis.meta.limit,
                wanted_limit: v.product.per_user_limit,
            });
        }
    }
    if !report.reasons.is_empty() {
        return Ok(report.no_go(4, started));
    }
    if !report.conflicts.is_empty() {
        let n = report.conflicts.len();
        report.reasons.push(format!(
            "{n} product(s) hold other values in Redis than the database truth; nothing was written \
             (rerun with --force to overwrite, or see `seckill-console reconcile {activity}`)"
        ));
        return Ok(report.no_go(5, started));
    }

    // Scripts on every node, before the keys: a node that cannot run the deduction is a no-go.
    progress.update("loading scripts", 0, 1);
    for (addr, r) in redis.load_scripts().await {
        if let Err(e) = r {
            report.reasons.push(format!(
                "node {addr}: SCRIPT LOAD failed: {}",
                crate::redis::describe(&e)
            ));
        }
    }
    for node in health::redis_nodes(redis).await {
        if !node.ok {
            report.reasons.push(format!(
                "node {} did not answer: {}",
                node.addr,
                node.error.unwrap_or_default()
            ));
        }
        for (script, loaded) in &node.scripts {
            if !loaded {
                report
                    .reasons
                    .push(format!("node {} lacks the {script} script", node.addr));
            }
        }
    }
    progress.update("loading scripts", 1, 1);

    tracing::debug!(
        ms = started.elapsed().as_millis() as u64,
        "preheat: scripts loaded"
    );
    // The database must answer before Redis is written: the audit rows go there.
    db.check().await?;
    let outcome = write_and_verify(redis, &snap.products, &actions, &mut report, progress).await;
    if let Err(e) = &outcome {
        // Stopped half way: what was written is still audited before the error is returned.
        report.reasons.push(e.message.clone());
        report.decision = "no-go";
        report.elapsed_ms = elapsed_ms(started);
        record_audit(db, &opts.actor, activity, &snap.products, &report).await?;
    }
    outcome?;
    tracing::debug!(
        ms = started.elapsed().as_millis() as u64,
        "preheat: written and verified"
    );

    let failed: Vec<&str> = report
        .products
        .iter()
        .filter(|p| !p.verified)
        .map(|p| p.product.as_str())
        .collect();
    if !failed.is_empty() {
        let shown: Vec<&str> = failed.iter().take(20).copied().collect();
        report.reasons.push(format!(
            "{} product(s) failed to write or verify: {}{}",
            failed.len(),
            shown.join(", "),
            if failed.len() > shown.len() {
                ", ..."
            } else {
                ""
            }
        ));
    }
    report.elapsed_ms = elapsed_ms(started);
    if !report.reasons.is_empty() {
        report.decision = "no-go";
        report.exit_code = 4;
    }
    record_audit(db, &opts.actor, activity, &snap.products, &report).await?;
    tracing::debug!(
        ms = started.elapsed().as_millis() as u64,
        "preheat: audited"
    );
    Ok(report)
}

/// Writes the products that need it and reads every product back, in batches. Every write is
/// the compare-and-set script: an absent key is written only while it is still absent (guard
/// `!`), a forced one only while it holds what was read, and stock and meta change together or
/// not at all, so a buyer never sees a stock without its limit and nothing that appeared
/// meanwhile is overwritten. The read-back follows each batch's writes on the same node
/// connections, so it sees them.
async fn write_and_verify(
    redis: &RedisStore,
    views: &[ProductView],
    actions: &[Action],
    report: &mut PreheatReport,
    progress: &dyn Progress,
) -> Result<()> {
    let epoch = Utc::now().timestamp_millis().to_string();
    let total = views.len();
    let mut present = 0usize;
    let mut sum = 0i64;
    progress.update("writing and verifying", 0, total);
    for start in (0..total).step_by(BATCH) {
        let batch = start..(start + BATCH).min(total);
        write(redis, views, actions, report, batch.clone(), &epoch).await?;

        let mut items = Vec::with_capacity(batch.len() * 2);
        for v in &views[batch.clone()] {
            items.push(product_state::get_stock(&v.keys));
            items.push(product_state::get_meta(&v.keys));
        }
        let results = redis.pipeline(items).await;
        for (i, read) in batch.clone().zip(results.chunks(2)) {
            let [stock, meta] = read else {
                return Err(Error::internal("preheat: read-back reply missing"));
            };
            let stock = product_state::stock_from(stock).map_err(|e| redis.error(&e))?;
            let meta = product_state::meta_from(meta).map_err(|e| redis.error(&e))?;
            let v = &views[i];
            let p = &mut report.products[i];
            // Deductions between the write and the read moved stock and counters alike.
            let moved = meta.active_units().unwrap_or(0) - active_after_write(v, actions[i]);
            if stock != StockValue::Missing {
                present += 1;
            }
            if let Some(s) = stock.value() {
                sum += s + moved;
            }
            if p.error.is_some() {
                continue;
            }
            p.verified = stock.value() == Some(p.stock - moved)
                && meta.limit == Some(v.product.per_user_limit)
                && meta.initial == Some(v.product.initial_stock);
            if p.verified && !p.written {
                report.unchanged += 1;
            }
            if !p.verified {
                p.error = Some(format!(
                    "read back stock {} limit {}, expected stock {} limit {}",
                    stock.shown().unwrap_or_else(|| "(missing)".into()),
                    meta.limit
                        .map_or_else(|| "(none)".to_string(), |l| l.to_string()),
                    p.stock,
                    v.product.per_user_limit
                ));
            }
        }
        progress.update("writing and verifying", batch.end, total);
    }
    if present != total {
        report.reasons.push(format!(
            "{present} of {total} stock keys exist after the write"
        ));
    }
    if sum != report.total_stock {
        report.reasons.push(format!(
            "Redis holds {sum} units in total, the database truth is {}",
            report.total_stock
        ));
    }
    Ok(())
}

/// Writes the products of `batch` that are absent or forced, through the compare-and-set
/// script. A write Redis refuses (out of memory, say) fails its product; Redis unreachable or
/// denying permission stops the preheat.
async fn write(
    redis: &RedisStore,
    views: &[ProductView],
    actions: &[Action],
    report: &mut PreheatReport,
    batch: std::ops::Range<usize>,
    epoch: &str,
) -> Result<()> {
    let todo: Vec<usize> = batch
        .filter(|&i| matches!(actions[i], Action::Write | Action::Overwrite))
        .collect();
    if todo.is_empty() {
        return Ok(());
    }
    let writes: Vec<_> = todo
        .iter()
        .map(|&i| {
            let p = &report.products[i];
            let extra = vec![
                ("epoch", epoch.to_string()),
                ("bucket_capacity", p.token_bucket.capacity.to_string()),
                ("bucket_rate", p.token_bucket.rate_per_sec.to_string()),
            ];
            rewrite::from_truth(&views[i], p.stock, extra)
        })
        .collect();
    let results = set_stock_many(redis, &writes).await;
    let mut stop = None;
    for (&i, r) in todo.iter().zip(results) {
        let p = &mut report.products[i];
        match r {
            Ok(SetStock::Applied(_)) => {
                p.written = true;
                report.written += 1;
            }
            Ok(SetStock::Conflict(now)) => {
                p.error = Some(format!(
                    "the key changed while preheating (now {}); nothing was overwritten",
                    now.as_deref().map_or_else(|| "absent".into(), shown)
                ));
            }
            Err(e) => {
                let err = redis.error(&e);
                if matches!(err.kind, ErrorKind::Unavailable | ErrorKind::Refused) {
                    stop = stop.or(Some(err));
                } else {
                    p.error = Some(crate::redis::describe(&e));
                }
            }
        }
    }
    stop.map_or(Ok(()), Err)
}

/// The counters the meta hash holds right after the write, to subtract deductions that happened
/// between the write and the read-back.
fn active_after_write(v: &ProductView, action: Action) -> i64 {
    let writes = matches!(action, Action::Write | Action::Overwrite);
    if writes && rewrite::rebuilds_counters(v) {
        rewrite::counter_baseline(v)
    } else {
        v.redis.meta.active_units().unwrap_or(0)
    }
}

/// One summary row, plus one row per product that `--force` overwrote (before and after).
async fn record_audit(
    db: &Db,
    actor: &str,
    activity: &ActivityId,
    views: &[ProductView],
    report: &PreheatReport,
) -> Result<()> {
    let mut rows = Vec::new();
    for (v, p) in views.iter().zip(&report.products) {
        if p.action == Action::Overwrite && p.written {
            let mut e = AuditEntry::new(actor, "preheat.overwrite", activity);
            e.product_id = Some(p.product.clone());
            e.before_value = v.redis.stock.shown();
            e.after_value = Some(p.stock.to_string());
            e.reason = "preheat --force: Redis held another value than the database truth".into();
            rows.push(e);
        }
    }
    let mut summary = AuditEntry::new(actor, "preheat", activity);
    summary.after_value = Some(report.total_stock.to_string());
    summary.reason = format!("preheat decision {}", report.decision);
    summary.detail = serde_json::json!({
        "written": report.written,
        "unchanged": report.unchanged,
        "products": report.products.len(),
        "reasons": report.reasons,
    })
    .to_string();
    rows.push(summary);
    audit::record_many(db, &rows)
        .await
        .map_err(|e| db.error(&e))
}
