//! The preheat gate: write an activity's keys from database truth, verify them, decide go or
//! no-go. Keys that already hold something else are a no-go unless forced; keys that already
//! hold what would be written are left alone, so preheating twice is safe.

use super::progress::Progress;
use super::snapshot::{self, ProductView};
use crate::db::Db;
use crate::db::audit::{self, AuditEntry};
use crate::domain::ActivityId;
use crate::domain::preheat::{Action, TokenBucket, plan, prechecks};
use crate::domain::stock::StockValue;
use crate::error::{Error, Result};
use crate::ops::health;
use crate::redis::product_state;
use crate::redis::scripts::SET_STOCK;
use crate::redis::{KeySpace, Keyed, RedisStore};
use chrono::Utc;
use redis::Value;
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
    write_and_verify(redis, &snap.products, &actions, &mut report, progress).await?;
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

/// Writes the products that need it and reads every product back, in batches. Absent keys
/// get plain pipelined commands — the meta hash first, then `SET NX` of the stock, so a buyer
/// never sees a stock without its limit and a key that appeared meanwhile is never overwritten
/// — followed in the same pipeline by the reads that verify them (Redis runs one connection's
/// commands in order, so the reads see the writes). Keys that `--force` overwrites go through
/// the compare-and-set script first.
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
        overwrite(redis, views, actions, report, batch.clone(), &epoch).await;

        let mut items = Vec::with_capacity(batch.len() * 4);
        let mut shape = Vec::with_capacity(batch.len());
        for i in batch.clone() {
            let v = &views[i];
            let p = &report.products[i];
            let writes = actions[i] == Action::Write;
            if writes {
                let fields = meta_fields(v, &p.token_bucket, &epoch);
                let mut hset = redis::cmd("HSET");
                hset.arg(&v.keys.meta);
                for (k, val) in &fields.set {
                    hset.arg(*k).arg(val);
                }
                if !v.redis.meta.present {
                    // Counters only for a meta hash that did not exist: one that survived
                    // keeps its history. Should another writer create it meanwhile,
                    // reconciliation sees the counters disagree and reads the ledger instead.
                    hset.arg("deducted")
                        .arg(fields.baseline)
                        .arg("returned")
                        .arg(0);
                }
                items.push(Keyed::new(v.keys.meta.clone(), hset));
                items.push(Keyed::new(
                    v.keys.stock.clone(),
                    redis::cmd("SET")
                        .arg(&v.keys.stock)
                        .arg(p.stock)
                        .arg("NX")
                        .clone(),
                ));
            }
            items.push(product_state::get_stock(&v.keys));
            items.push(product_state::get_meta(&v.keys));
            shape.push(writes);
        }
        let results = redis.pipeline(items).await;
        let mut at = 0;
        for (i, writes) in batch.clone().zip(shape) {
            let p = &mut report.products[i];
            if writes {
                match (&results[at], &results[at + 1]) {
                    (Err(e), _) | (_, Err(e)) => p.error = Some(crate::redis::describe(e)),
                    (_, Ok(Value::Nil)) => {
                        p.error = Some(
                            "the stock key appeared while preheating; nothing was overwritten"
                                .into(),
                        );
                    }
                    _ => {
                        p.written = true;
                        report.written += 1;
                    }
                }
                at += 2;
            }
            let stock = product_state::stock_from(&results[at]).map_err(|e| redis.error(&e))?;
            let meta = product_state::meta_from(&results[at + 1]).map_err(|e| redis.error(&e))?;
            at += 2;
            let v = &views[i];
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

/// The products of `batch` that `--force` overwrites, through the compare-and-set script.
async fn overwrite(
    redis: &RedisStore,
    views: &[ProductView],
    actions: &[Action],
    report: &mut PreheatReport,
    batch: std::ops::Range<usize>,
    epoch: &str,
) {
    let forced: Vec<usize> = batch.filter(|&i| actions[i] == Action::Overwrite).collect();
    if forced.is_empty() {
        return;
    }
    let calls: Vec<(Vec<String>, Vec<Vec<u8>>)> = forced
        .iter()
        .map(|&i| {
            let v = &views[i];
            let p = &report.products[i];
            (
                vec![v.keys.stock.clone(), v.keys.meta.clone()],
                set_stock_args(v, p.stock, &p.token_bucket, epoch),
            )
        })
        .collect();
    for (&i, r) in forced.iter().zip(redis.eval_many(&SET_STOCK, &calls).await) {
        let p = &mut report.products[i];
        match r {
            Ok(Value::Array(items)) if items.first() == Some(&Value::Int(1)) => {
                p.written = true;
                report.written += 1;
            }
            Ok(Value::Array(items)) => {
                p.error = Some(format!(
                    "the key changed while preheating (now {}); nothing was overwritten",
                    describe_value(items.get(1))
                ));
            }
            Ok(other) => p.error = Some(format!("unexpected reply {other:?}")),
            Err(e) => p.error = Some(crate::redis::describe(&e)),
        }
    }
}

/// The meta fields preheat writes, and the counter baseline for a fresh meta hash.
struct MetaFields {
    set: Vec<(&'static str, String)>,
    baseline: i64,
}

fn meta_fields(v: &ProductView, bucket: &TokenBucket, epoch: &str) -> MetaFields {
    MetaFields {
        set: vec![
            ("initial", v.product.initial_stock.to_string()),
            ("limit", v.product.per_user_limit.to_string()),
            ("epoch", epoch.to_string()),
            ("bucket_capacity", bucket.capacity.to_string()),
            ("bucket_rate", bucket.rate_per_sec.to_string()),
        ],
        baseline: counter_baseline(v),
    }
}

/// A fresh meta hash gets counters that match the ledger, so reconciliation keeps its fast
/// path: what the ledger holds, or (the ledger lost with the rest) the database's sold units.
fn counter_baseline(v: &ProductView) -> i64 {
    match v.ledger_active_units {
        Some(active) => active,
        None if v.redis.ledger_len.unwrap_or(0) == 0 => v.truth.db_sold,
        None => 0,
    }
}

/// The arguments of `set_stock.lua` for one product: guard, stock, meta mode, meta fields.
fn set_stock_args(v: &ProductView, stock: i64, bucket: &TokenBucket, epoch: &str) -> Vec<Vec<u8>> {
    let meta = &v.redis.meta;
    let reset = meta.corrupt.is_some();
    let mut args: Vec<Vec<u8>> = vec![
        v.redis.stock.guard(),
        stock.to_string().into_bytes(),
        if reset {
            b"reset".to_vec()
        } else {
            b"keep".to_vec()
        },
    ];
    let fields = meta_fields(v, bucket, epoch);
    for (k, val) in fields.set {
        args.push(k.as_bytes().to_vec());
        args.push(val.into_bytes());
    }
    if reset || !meta.present {
        args.push(b"deducted".to_vec());
        args.push(fields.baseline.to_string().into_bytes());
        args.push(b"returned".to_vec());
        args.push(b"0".to_vec());
    }
    args
}

/// The counters the meta hash holds right after the write, to subtract deductions that happened
/// between the write and the read-back.
fn active_after_write(v: &ProductView, action: Action) -> i64 {
    let meta = &v.redis.meta;
    let fresh_meta = !meta.present || (action == Action::Overwrite && meta.corrupt.is_some());
    if matches!(action, Action::Write | Action::Overwrite) && fresh_meta {
        counter_baseline(v)
    } else {
        meta.active_units().unwrap_or(0)
    }
}

fn describe_value(v: Option<&Value>) -> String {
    match v {
        Some(Value::BulkString(b)) => crate::domain::stock::shown(b),
        Some(Value::Int(i)) => i.to_string(),
        Some(Value::Nil) | None => "absent".into(),
        Some(other) => format!("{other:?}"),
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
