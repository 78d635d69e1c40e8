//! The preheat gate: write an activity's keys from database truth, verify them, decide go or
//! no-go. Keys that already hold something else are a no-go unless forced; keys that already
//! hold what would be written are left alone, so preheating twice is safe.

use super::progress::Progress;
use super::repair::{self, Settings, Target};
use super::snapshot::{self, ProductView, Snapshot};
use crate::db::Db;
use crate::db::audit::{self, AuditEntry};
use crate::domain::ActivityId;
use crate::domain::preheat::{Action, Found, TokenBucket, plan, prechecks};
use crate::domain::stock::StockValue;
use crate::error::{ErrorKind, Result};
use crate::ops::{health, memory_gate};
use crate::redis::cut;
use crate::redis::{KeySpace, RedisStore};
use chrono::Utc;
use serde::Serialize;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Products per write or verify batch: progress is reported after each.
const BATCH: usize = 5000;

/// Options of one preheat.
pub struct PreheatOptions {
    pub force: bool,
    /// Go on a server whose eviction policy may take the activity's keys (named in the report).
    pub accept_eviction: bool,
    pub actor: String,
    pub grace: Duration,
    /// Days after the activity's end that its keys expire (0: never).
    pub key_ttl_days: u32,
    /// Called between the reads and before the first write (tests only).
    pub interleave: snapshot::Interleave,
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
    /// Why the product was rebuilt from the database (a piece of it was lost), when it was.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rebuilt: Option<String>,
    /// A top-up left between its two writes that the preheat finished or undid, and how.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topup: Option<String>,
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
    /// Risks the gate found and the operator accepted (`--accept-eviction`), or could not check.
    pub accepted: Vec<String>,
    pub conflicts: Vec<Conflict>,
    /// What the operator must know that does not stop the gate: products the database says
    /// are oversold (their stock belongs below zero, so nothing more sells).
    pub warnings: Vec<String>,
    pub written: usize,
    pub unchanged: usize,
    pub elapsed_ms: u64,
    /// Why the decision is no-go: `CheckFailed` (exit 4) when a check failed, `Refused`
    /// (exit 5) on conflicts; `None` for go.
    #[serde(skip)]
    pub failure: Option<ErrorKind>,
}

impl PreheatReport {
    /// For a no-go before any write, what the gate had planned (`1 conflict, 1 unchanged`):
    /// over a table of "unchanged" rows, "0 written, 0 unchanged" read as a contradiction.
    /// None once anything was written or verified, or for a go.
    pub fn planned(&self) -> Option<String> {
        use std::collections::BTreeMap;
        if self.written + self.unchanged > 0 || self.decision == "go" {
            return None;
        }
        let mut plan: BTreeMap<&str, usize> = BTreeMap::new();
        for p in &self.products {
            *plan.entry(p.action.as_str()).or_default() += 1;
        }
        let plan: Vec<String> = plan.iter().map(|(a, n)| format!("{n} {a}")).collect();
        Some(format!(
            "nothing was written; the plan was: {}",
            plan.join(", ")
        ))
    }

    fn no_go(mut self, why: ErrorKind, started: Instant) -> Self {
        self.decision = "no-go";
        self.failure = Some(why);
        self.elapsed_ms = elapsed_ms(started);
        self
    }
}

fn elapsed_ms(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// Runs the preheat gate on `activity`, in four steps: read every product and plan it (a
/// no-go before anything is written when a check or a conflict says so), load and check the
/// scripts on every node, write and verify, audit. Errors are for the unexpected
/// (unreachable services, an unknown activity); every decision, go or no-go, is a report.
pub async fn preheat(
    redis: &RedisStore,
    db: &Db,
    keys: &KeySpace,
    activity: &ActivityId,
    opts: &PreheatOptions,
    progress: &dyn Progress,
) -> Result<PreheatReport> {
    super::guard::writable(redis, db, "preheat")?;
    super::guard::redis_ready(redis, keys, activity, super::guard::Write::Preheat).await?;
    let started = Instant::now();
    progress.update("reading", 0, 1);
    let scope = snapshot::Scope {
        interleave: opts.interleave.clone(),
        ..snapshot::Scope::default()
    };
    let snap = snapshot::take(redis, db, keys, activity, opts.grace, &scope).await?;
    progress.update("reading", 1, 1);
    let (mut report, actions) = planned(&snap, opts.force);
    let nodes = health::redis_nodes(redis).await;
    // What a failover could lose is the shop's to decide: said, never a no-go (a primary
    // without replicas has no failover to lose sales to; `ping` says so).
    for n in &nodes {
        if let Some(r) = &n.replication
            && !r.replicas.is_empty()
            && let Some(w) = &r.warning
        {
            report.warnings.push(format!("primary {}: {w}", n.addr));
        }
    }
    let need = memory_gate::need_per_node(redis, &snap.products);
    let memory = memory_gate::verdict(&nodes, &need, opts.accept_eviction);
    report.reasons.extend(memory.reasons);
    report.accepted = memory.accepted;
    if !report.reasons.is_empty() {
        return Ok(report.no_go(ErrorKind::CheckFailed, started));
    }
    if !report.conflicts.is_empty() {
        let n = report.conflicts.len();
        report.reasons.push(format!(
            "{n} product(s) hold other values in Redis than the database truth; nothing was written \
             (rerun with --force to overwrite, or see `seckill-console reconcile {activity}`)"
        ));
        return Ok(report.no_go(ErrorKind::Refused, started));
    }
    progress.update("loading scripts", 0, 1);
    report.reasons.extend(scripts_ready(redis).await);
    progress.update("loading scripts", 1, 1);
    opts.interleave.at(snapshot::Stage::BeforeWrite).await;
    // The database must answer before Redis is written: the audit rows go there.
    db.check().await?;
    let expire_at = snap.activity.keys_expire_at(opts.key_ttl_days);
    let target = Target {
        redis,
        db,
        keys,
        activity,
        grace: opts.grace,
        retry: true,
    };
    // The audit needs of the products read only the stocks that `--force` may overwrite; the
    // views themselves go to the write (at 100,000 products a copy of them was 109 MB).
    let before = overwritten_stocks(&snap.products, &actions);
    let outcome = write_and_verify(
        &target,
        (snap.products, &actions, expire_at),
        &mut report,
        progress,
    )
    .await;
    if let Err(e) = &outcome {
        // Stopped half way: what was written is still audited before the error is returned.
        report.reasons.push(e.message.clone());
        report.decision = "no-go";
        report.elapsed_ms = elapsed_ms(started);
        record_audit(db, &opts.actor, activity, &before, &report).await?;
    }
    outcome?;
    decide(&mut report, started);
    record_audit(db, &opts.actor, activity, &before, &report).await?;
    tracing::debug!(
        ms = started.elapsed().as_millis() as u64,
        "preheat: written, verified and audited"
    );
    Ok(report)
}

/// The report before anything is written: each product's action from what Redis holds and
/// what the truth says, the checks of the activity, and the conflicts.
fn planned(snap: &Snapshot, force: bool) -> (PreheatReport, Vec<Action>) {
    let window = snap.activity.window_secs();
    let mut report = PreheatReport {
        activity: snap.activity.activity_id.to_string(),
        decision: "go",
        products: Vec::with_capacity(snap.products.len()),
        total_stock: 0,
        reasons: Vec::new(),
        accepted: Vec::new(),
        conflicts: Vec::new(),
        warnings: Vec::new(),
        written: 0,
        unchanged: 0,
        elapsed_ms: 0,
        failure: None,
    };
    let products: Vec<_> = snap.products.iter().map(|v| v.product.clone()).collect();
    report.reasons = prechecks(&snap.activity, &products, Utc::now());
    let actions: Vec<Action> = snap
        .products
        .iter()
        .map(|v| {
            let owed = repair::planned_after(v);
            let found = Found {
                stock: &v.cut.stock,
                meta: &v.cut.meta,
                lost: &v.status.lost,
                offset: v.offset(),
                // An oversold product's keys hold its stock below zero: that is the truth
                // the gate wrote, not a drift from it.
                drift: if owed < 0 {
                    v.cut.stock.value().map(|s| s.saturating_sub(owed))
                } else {
                    v.status.drift
                },
                agrees: v.books.discrepancy == 0,
                unledgered: v.status.unledgered,
                orphaned: v.status.orphaned,
            };
            plan(&found, &v.product, force)
        })
        .collect();
    let mut oversold = Vec::new();
    for (v, action) in snap.products.iter().zip(&actions) {
        // What the gate writes: below zero for an oversold product, as the rebuild writes it
        // (`expected_remaining` stops at zero: compared with it, the gate's own write of -20
        // was a conflict at every rerun).
        let target = repair::planned_after(v);
        if target < 0 {
            oversold.push(format!(
                "{} ({} held of {})",
                v.product.product_id,
                v.truth.db_sold.saturating_add(v.truth.in_flight),
                v.truth.initial
            ));
        }
        report.total_stock += target.max(0);
        report.products.push(PreheatProduct {
            product: v.product.product_id.to_string(),
            action: *action,
            stock: target,
            per_user_limit: v.product.per_user_limit,
            previous: v.cut.stock.shown(),
            written: false,
            verified: false,
            token_bucket: TokenBucket::new(target.max(0), window),
            rebuilt: None,
            topup: None,
            error: None,
        });
        if *action == Action::Conflict {
            if let (Some(t), Some(row)) = (&v.cut.meta.topup, report.products.last_mut()) {
                row.error = Some(format!(
                    "a top-up ({}, {:+}) is between its two writes: `fix` finishes or undoes it (once its console has had 10 s), or rerun preheat with --force",
                    t.id, t.change
                ));
            }
            report.conflicts.push(Conflict {
                product: v.product.product_id.to_string(),
                redis_stock: v.cut.stock.shown(),
                wanted_stock: target,
                redis_limit: v.cut.meta.limit,
                wanted_limit: v.product.per_user_limit,
            });
        }
    }
    if !oversold.is_empty() {
        let shown: Vec<&str> = oversold.iter().take(10).map(String::as_str).collect();
        report.warnings.push(format!(
            "{} product(s) oversold in the database: {}{}; their stock belongs below zero (the initial stock less what is held), so nothing more sells until returns pay it back (see `seckill-console reconcile {}`)",
            oversold.len(),
            shown.join(", "),
            if oversold.len() > shown.len() { ", ..." } else { "" },
            snap.activity.activity_id
        ));
    }
    (report, actions)
}

/// Loads the scripts on every node and checks them: a node that cannot run the deduction is
/// a no-go reason (one per problem).
async fn scripts_ready(redis: &RedisStore) -> Vec<String> {
    let mut reasons = Vec::new();
    for (addr, r) in redis.load_scripts().await {
        if let Err(e) = r {
            reasons.push(format!(
                "node {addr}: SCRIPT LOAD failed: {}",
                crate::redis::describe(&e)
            ));
        }
    }
    for node in health::redis_nodes(redis).await {
        if !node.ok {
            reasons.push(format!(
                "node {} did not answer: {}",
                node.addr,
                node.error.unwrap_or_default()
            ));
        }
        for (script, loaded) in &node.scripts {
            if !loaded {
                reasons.push(format!("node {} lacks the {script} script", node.addr));
            }
        }
    }
    reasons
}

/// Go or no-go, once written and verified: every product verified and no reason against.
fn decide(report: &mut PreheatReport, started: Instant) {
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
        report.failure = Some(ErrorKind::CheckFailed);
    }
}

/// Writes the products that need it and reads every product back, in batches. Every write
/// goes through [`repair`], as `fix` does: lost pieces are rebuilt from the orders under a
/// hold and the stock is written last; a forced product is corrected by its offset from the
/// scripts' counters, so no sale in between is overwritten. The read-back is a fresh cut: it
/// checks that the stock agrees with its counters, every piece is there and the meta hash says
/// what the database says, which holds however many buyers deduct meanwhile.
async fn write_and_verify(
    t: &Target<'_>,
    (views, actions, expire_at): (Vec<ProductView>, &[Action], Option<i64>),
    report: &mut PreheatReport,
    progress: &dyn Progress,
) -> Result<()> {
    let epoch = Utc::now().timestamp_millis().to_string();
    let total = views.len();
    let mut present = 0usize;
    progress.update("writing and verifying", 0, total);
    let buckets: HashMap<String, (String, String)> = report
        .products
        .iter()
        .map(|p| {
            (
                p.product.clone(),
                (
                    p.token_bucket.capacity.to_string(),
                    p.token_bucket.rate_per_sec.to_string(),
                ),
            )
        })
        .collect();
    let writes_of: HashMap<String, bool> = report
        .products
        .iter()
        .zip(actions)
        .map(|(p, a)| {
            (
                p.product.clone(),
                matches!(a, Action::Write | Action::Overwrite),
            )
        })
        .collect();
    let settings = |v: &ProductView| {
        let id = v.product.product_id.as_str();
        let writes = writes_of.get(id).copied().unwrap_or(false);
        Settings {
            // An unchanged product only gets its expiry brought up to date.
            meta: match (writes, buckets.get(id)) {
                (true, Some((capacity, rate))) => vec![
                    ("epoch", epoch.clone()),
                    ("bucket_capacity", capacity.clone()),
                    ("bucket_rate", rate.clone()),
                ],
                _ => Vec::new(),
            },
            expire_at,
            books: writes,
        }
    };
    let rows: Vec<crate::domain::Product> = views.iter().map(|v| v.product.clone()).collect();
    // Taken a batch at a time from one iterator: splitting the rest off the vector at every
    // batch copied what was left each time (another 103 MB at 100,000 products).
    let mut views = views.into_iter();
    let mut start = 0;
    loop {
        let batch: Vec<ProductView> = views.by_ref().take(BATCH).collect();
        if batch.is_empty() {
            break;
        }
        let range = start..start + batch.len();
        start = range.end;
        let keys: Vec<_> = batch.iter().map(|v| v.keys.clone()).collect();
        let todo: Vec<ProductView> = batch
            .into_iter()
            .zip(&actions[range.clone()])
            .filter(|(_, a)| **a != Action::Conflict)
            .map(|(v, _)| v)
            .collect();
        let (outcomes, stop) = match repair::run(t, todo, &settings).await {
            Ok(o) => (o, None),
            Err(p) => (p.outcomes, Some(p.error)),
        };
        let at: HashMap<&str, usize> = range
            .clone()
            .map(|i| (rows[i].product_id.as_str(), i))
            .collect();
        for o in &outcomes {
            let Some(&i) = at.get(o.first.product.product_id.as_str()) else {
                continue;
            };
            let p = &mut report.products[i];
            p.written = matches!(actions[i], Action::Write | Action::Overwrite) && o.done.applied();
            if p.written {
                report.written += 1;
            }
            p.error = o.done.conflict.clone().or_else(|| o.done.error.clone());
            p.rebuilt = o.done.rebuilt.as_ref().map(|r| r.why.clone());
            p.topup = o.done.topup.clone();
        }
        if let Some(err) = stop {
            return Err(err);
        }
        let cuts = cut::read(t.redis, &keys)
            .await
            .map_err(|e| t.redis.error(&e))?;
        for (i, c) in range.clone().zip(cuts) {
            let p = &mut report.products[i];
            if c.stock != StockValue::Missing {
                present += 1;
            }
            if p.error.is_some() {
                continue;
            }
            verify(p, &c, &rows[i]);
            if p.verified && !p.written {
                report.unchanged += 1;
            }
        }
        progress.update("writing and verifying", range.end, total);
    }
    if present != total {
        report.reasons.push(format!(
            "{present} of {total} stock keys exist after the write"
        ));
    }
    Ok(())
}

/// Checks one product read back: its stock on its counters, every piece there, nothing
/// holding it, and the limit and initial stock the database says.
fn verify(
    p: &mut PreheatProduct,
    c: &crate::redis::cut::ProductCut,
    want: &crate::domain::Product,
) {
    let offset = c.offset(want.initial_stock);
    let lost = c.lost();
    p.verified = offset == Some(0)
        && lost.is_empty()
        && c.meta.frozen.is_none()
        && c.meta.limit == Some(want.per_user_limit)
        && c.meta.initial == Some(want.initial_stock);
    if !p.verified {
        p.error = Some(format!(
            "read back stock {} (offset from its counters {}) limit {}{}, expected limit {} and no offset",
            c.stock.shown().unwrap_or_else(|| "(missing)".into()),
            offset.map_or_else(|| "unknown".into(), |o| format!("{o:+}")),
            c.meta
                .limit
                .map_or_else(|| "(none)".to_string(), |l| l.to_string()),
            if lost.is_empty() {
                String::new()
            } else {
                format!(", missing {}", crate::domain::stock::lost_shown(&lost))
            },
            want.per_user_limit
        ));
    }
}

/// The stock Redis held before the write, as shown, of each product `--force` overwrites
/// (by its place in the plan): what its audit row says it was.
fn overwritten_stocks(views: &[ProductView], actions: &[Action]) -> HashMap<usize, Option<String>> {
    views
        .iter()
        .zip(actions)
        .enumerate()
        .filter(|(_, (_, a))| **a == Action::Overwrite)
        .map(|(i, (v, _))| (i, v.cut.stock.shown()))
        .collect()
}

/// One summary row, plus one row per product that `--force` overwrote (before and after).
async fn record_audit(
    db: &Db,
    actor: &str,
    activity: &ActivityId,
    before: &HashMap<usize, Option<String>>,
    report: &PreheatReport,
) -> Result<()> {
    let mut rows = Vec::new();
    for (i, p) in report.products.iter().enumerate() {
        if p.action == Action::Overwrite && p.written {
            let mut e = AuditEntry::new(actor, "preheat.overwrite", activity);
            e.product_id = Some(p.product.clone());
            e.before_value = before.get(&i).cloned().flatten();
            e.after_value = Some(p.stock.to_string());
            e.reason = "preheat --force: Redis held another value than the database truth".into();
            rows.push(e);
        }
    }
    for p in &report.products {
        if let Some(what) = &p.topup {
            let mut e = AuditEntry::new(actor, "preheat.topup", activity);
            e.product_id = Some(p.product.clone());
            e.reason = what.clone();
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
        "accepted": report.accepted,
    })
    .to_string();
    rows.push(summary);
    audit::record_many(db, &rows)
        .await
        .map_err(|e| db.error(&e))
}
