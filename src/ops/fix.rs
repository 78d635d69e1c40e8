//! One-key fix: rewrite Redis from database truth. The products to fix are read from scratch
//! (complete evidence: every event, every live order, the ledger where the stream falls
//! short); [`super::repair`] plans each one and writes it, in steps a concurrent deduction or
//! another console cannot spoil. Never a blind SET.

use super::guard::{self, Write};
use super::repair::{self, Outcome, Plan, Repaired, Settings, Target};
use super::snapshot::{self, Interleave, ProductView, Scope, Stage};
use crate::db::Db;
use crate::db::audit::{self, AuditEntry};
use crate::domain::ActivityId;
use crate::domain::meta::Piece;
use crate::domain::stock::State;
use crate::error::{ErrorKind, Result};
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
    /// Called between the reads and before the first write (tests only).
    pub interleave: Interleave,
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
    /// The stock right after the fix (or, for a preview, the stock it is fixed to: the same
    /// computation).
    pub after: i64,
    /// True when this run changed the product.
    pub applied: bool,
    /// What the fix does: `heal` (orphans, lost sales, the offset, meta fields), `rebuild`
    /// (pieces lost or disagreeing, rebuilt from the database under a hold), `topup` (a top-up
    /// left half done), or `none`.
    pub plan: &'static str,
    /// Why a rebuild, when it is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rebuild: Option<String>,
    /// The pieces of evidence Redis lost.
    pub lost: Vec<Piece>,
    /// The stock's offset from the scripts' counters that the fix takes away.
    pub offset: Option<i64>,
    /// Units of orphaned deductions returned through the restore script.
    pub orphans_returned: i64,
    /// Request ids of the orphaned deductions found.
    pub orphans: Vec<String>,
    /// Units of live orders recorded as deductions (sales Redis had lost).
    pub sales_recorded: i64,
    /// Units a rebuild held back (their orders may still land), and units put back on sale
    /// once their window passed.
    pub held_back: i64,
    /// The whole stock is among `held_back`: the buyers hash was lost with deductions whose
    /// buyers nobody can name (see [`crate::ops::repair::Rebuilt::limits_held`]).
    pub limits_held: bool,
    pub released: i64,
    pub attempts: u32,
    pub conflict: bool,
    /// The Redis node of the product's keys.
    pub node: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl FixProduct {
    /// What the fix writes besides the figures of its row, in a few words: a rebuild and why,
    /// the operator's pause written back, a top-up finished. A rebuild showed `32 -> 32` and
    /// nothing else, though it rewrites the product's buyers and ledger.
    pub fn writes(&self) -> String {
        let mut parts = Vec::new();
        match self.plan {
            "rebuild" => parts.push(match &self.rebuild {
                Some(why) => format!("rebuild ({why})"),
                None => "rebuild".to_string(),
            }),
            "topup" => parts.push("the half-done top-up finished or undone".to_string()),
            _ => {}
        }
        if self.lost.contains(&Piece::Pause) {
            parts.push("the pause written back".to_string());
        }
        parts.join("; ")
    }

    /// A row of a `heal` plan with nothing else to it, for tests to shape.
    #[cfg(test)]
    pub(crate) fn example(product: &str, state: State, before: Option<&str>, after: i64) -> Self {
        FixProduct {
            product: product.into(),
            state,
            drift: None,
            before: before.map(Into::into),
            after,
            applied: false,
            plan: "heal",
            rebuild: None,
            lost: Vec::new(),
            offset: None,
            orphans_returned: 0,
            orphans: Vec::new(),
            sales_recorded: 0,
            held_back: 0,
            limits_held: false,
            released: 0,
            attempts: 0,
            conflict: false,
            node: None,
            error: None,
        }
    }

    fn seen(&self) -> Seen {
        Seen {
            state: self.state,
            drift: self.drift,
            before: self.before.clone(),
        }
    }
}

/// A product that is not ok and that no write of Redis can make so (an oversell: units sold
/// above the stock, which only the shop can undo): the fix leaves it and says why.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct LeftAsIs {
    pub product: String,
    pub state: State,
    pub why: String,
}

impl LeftAsIs {
    /// One line for an operator: `p1 (oversold): why`.
    pub fn shown(&self) -> String {
        format!("{} ({}): {}", self.product, self.state.as_str(), self.why)
    }
}

/// The fix report.
#[derive(Clone, Debug, Serialize)]
pub struct FixReport {
    pub activity: String,
    pub preview: bool,
    pub products: Vec<FixProduct>,
    /// Products that are not ok with nothing for a fix to write (absent when none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub left: Vec<LeftAsIs>,
    pub conflicts: usize,
    pub errors: usize,
    /// Why the fix did not finish, if it did not: `Refused` (exit 5) when a product changed
    /// since the confirmed preview, another console held it or its write met a moving offset
    /// on every attempt; `CheckFailed` (exit 4) when a product cannot be repaired or Redis
    /// refused its write (it is still not fixed).
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

/// Plans (and unless `preview`, applies) the fix of an activity.
pub async fn fix(
    redis: &RedisStore,
    db: &Db,
    keys: &KeySpace,
    activity: &ActivityId,
    opts: &FixOptions,
) -> Result<FixReport> {
    if !opts.preview {
        guard::writable(redis, db, "fix (--preview writes nothing)")?;
    }
    let a = crate::db::activity::require(db, activity).await?;
    if !opts.preview {
        guard::phase_allows(&a, Write::Fix)?;
        guard::redis_ready(redis, keys, activity, Write::Fix).await?;
    }
    let mut report = FixReport {
        activity: activity.to_string(),
        preview: opts.preview,
        products: Vec::new(),
        left: Vec::new(),
        conflicts: 0,
        errors: 0,
        failure: None,
    };
    let (candidates, left) =
        candidates(redis, db, keys, activity, opts, a.phase(Utc::now())).await?;
    report.left = left;
    if candidates.is_empty() {
        return Ok(report);
    }
    // The products to fix, read from scratch: a unit goes back on sale only from complete
    // evidence, never from books a feed may have carried wrong.
    let scope = Scope {
        only: Some(candidates),
        full: true,
        interleave: opts.interleave.clone(),
        ..Scope::default()
    };
    let snap = snapshot::take(redis, db, keys, activity, opts.grace, &scope).await?;
    let (work, rest): (Vec<ProductView>, Vec<ProductView>) = snap
        .products
        .into_iter()
        .partition(|v| repair::plan(v) != Plan::Nothing);
    report.left.extend(
        rest.iter()
            .filter(|v| !matches!(v.status.state, State::Ok | State::Paused))
            .map(|v| left_as_is(&v.status)),
    );
    let mut rows: Vec<FixProduct> = work
        .iter()
        .map(|v| FixProduct {
            node: redis
                .node_for_key(&v.keys.stock)
                .ok()
                .map(|n| n.addr.clone()),
            ..row(v)
        })
        .collect();
    if let Some(plan) = &opts.confirmed {
        for r in &mut rows {
            if let Some(seen) = plan.get(&r.product)
                && !unchanged(seen, &r.seen())
            {
                r.conflict = true;
                r.error = Some(format!(
                    "changed since the preview ({} -> {}): nothing written; preview again",
                    state_and_drift(seen.state, seen.drift),
                    state_and_drift(r.state, r.drift)
                ));
            }
        }
    }
    if opts.preview {
        report.products = rows;
        return Ok(finished(report));
    }

    opts.interleave.at(Stage::BeforeWrite).await;
    // The database must answer before Redis is written: the audit rows go there.
    db.check().await?;
    let expire_at = a.keys_expire_at(opts.key_ttl_days);
    let fixed_at = Utc::now().timestamp_millis().to_string();
    let todo: Vec<ProductView> = work
        .into_iter()
        .zip(&rows)
        .filter(|(_, r)| !r.conflict)
        .map(|(v, _)| v)
        .collect();
    let settings = |_: &ProductView| Settings {
        meta: vec![("fixed_at", fixed_at.clone())],
        expire_at,
        books: true,
    };
    let target = Target {
        redis,
        db,
        keys,
        activity,
        grace: opts.grace,
        retry: opts.confirmed.is_none(),
    };
    let (outcomes, stop) = match repair::run(&target, todo, &settings).await {
        Ok(o) => (o, None),
        Err(p) => (p.outcomes, Some(p.error)),
    };
    let mut audits = Vec::new();
    let at: HashMap<String, usize> = rows
        .iter()
        .enumerate()
        .map(|(i, r)| (r.product.clone(), i))
        .collect();
    for o in &outcomes {
        if let Some(&i) = at.get(o.first.product.product_id.as_str()) {
            settle_row(&mut rows[i], &o.done);
        }
        audits.extend(fix_audits(&opts.actor, activity, o));
    }
    // Audited before any error returns: what was written is on record.
    audit::record_many(db, &audits)
        .await
        .map_err(|e| db.error(&e))?;
    let Some(err) = stop else {
        report.products = rows;
        return Ok(finished(report));
    };
    // Stopped part way (a node stopped answering, or refused): every product is reported, those
    // done as done and the others as not applied, with the reason; the exit is the error's.
    for r in rows
        .iter_mut()
        .filter(|r| !r.conflict && !r.applied && r.error.is_none())
    {
        r.applied = false;
        r.error = Some(format!(
            "not applied{}: {} (a hold it left is finished by the next fix)",
            super::repair::on_node(r.node.as_deref()),
            err.message
        ));
    }
    report.products = rows;
    let mut report = finished(report);
    report.failure = Some(err.kind);
    Ok(report)
}

/// The products a fix looks at: the confirmed ones, or those the activity's books say need
/// a write; and those its phase does not want as they are with nothing to write (a cancelled
/// activity's stock still on sale), with why.
async fn candidates(
    redis: &RedisStore,
    db: &Db,
    keys: &KeySpace,
    activity: &ActivityId,
    opts: &FixOptions,
    phase: crate::domain::Phase,
) -> Result<(Vec<String>, Vec<LeftAsIs>)> {
    if let Some(plan) = &opts.confirmed {
        return Ok((plan.keys().cloned().collect(), Vec::new()));
    }
    let scope = Scope {
        only: opts.product.clone().map(|p| vec![p]),
        ..Scope::default()
    };
    let snap = snapshot::take(redis, db, keys, activity, opts.grace, &scope).await?;
    let mut todo = Vec::new();
    let mut left = Vec::new();
    for v in &snap.products {
        // Every state but `ok` and `paused` needs a fix (`needs_fix`): what is left here that
        // the phase does not want is a cancelled activity on sale.
        if repair::plan(v) != Plan::Nothing || v.status.needs_fix() {
            todo.push(v.product.product_id.to_string());
        } else if !super::status::as_wanted(phase, &v.status) {
            left.push(LeftAsIs {
                product: v.product.product_id.to_string(),
                state: v.status.state,
                why: format!(
                    "activity {activity} is cancelled but its stock is still in Redis, where deductions take it: run `seckill-console cleanup {activity}`"
                ),
            });
        }
    }
    Ok((todo, left))
}

/// Why a product that is not ok has nothing for a fix to write.
fn left_as_is(p: &crate::domain::stock::ProductStatus) -> LeftAsIs {
    let why = if p.state == State::Oversold {
        format!(
            "{} unit(s) held above its initial stock of {} ({} sold, {} in flight): Redis cannot undo a sale, and nothing more sells while its stock is at or below 0; cancel orders in the shop (their returns pay the stock back), or top it up",
            p.db_sold
                .saturating_add(p.in_flight)
                .saturating_sub(p.initial),
            p.initial,
            p.db_sold,
            p.in_flight
        )
    } else if let Some(m) = p.faults.as_ref().and_then(|f| f.order_mismatch.as_ref()) {
        format!(
            "{} order(s) do not copy their deduction ({}): Redis took what the deductions say, the database counts what the orders say, and a fix cannot tell which is right; correct or cancel those orders in the shop (their app server must copy product, user and quantity from the deduction), then fix again",
            m.count,
            m.requests_shown()
        )
    } else {
        "its Redis books agree with their own counters and the orders: nothing for a fix to write (see `reconcile`)".to_string()
    };
    LeftAsIs {
        product: p.product.clone(),
        state: p.state,
        why,
    }
}

/// Counts conflicts and errors and says what the exit code is.
fn finished(mut report: FixReport) -> FixReport {
    report.conflicts = report.products.iter().filter(|p| p.conflict).count();
    report.errors = report
        .products
        .iter()
        .filter(|p| p.error.is_some() && !p.conflict)
        .count();
    report.failure = if report.preview {
        None
    } else if report.conflicts > 0 {
        Some(ErrorKind::Refused)
    } else if report.errors > 0 {
        Some(ErrorKind::CheckFailed)
    } else {
        None
    };
    report
}

fn row(v: &ProductView) -> FixProduct {
    let plan = repair::plan(v);
    let (name, rebuild, error) = match &plan {
        Plan::Nothing => ("none", None, None),
        Plan::Heal => ("heal", None, None),
        Plan::Rebuild(why) => ("rebuild", Some(why.clone()), None),
        Plan::Topup(_) => ("topup", None, None),
        Plan::Busy(why) => ("none", None, Some(why.clone())),
        Plan::Refuse(why) => ("none", None, Some(why.clone())),
    };
    FixProduct {
        product: v.product.product_id.to_string(),
        state: v.status.state,
        drift: v.status.drift,
        before: v.cut.stock.shown(),
        after: repair::planned_after(v),
        applied: false,
        plan: name,
        rebuild,
        lost: v.status.lost.clone(),
        offset: v.status.offset,
        orphans_returned: 0,
        orphans: v.split.orphans.clone(),
        sales_recorded: v.books.unledgered_units(),
        held_back: 0,
        limits_held: false,
        released: 0,
        attempts: 0,
        conflict: matches!(plan, Plan::Busy(_)),
        node: None,
        error,
    }
}

/// Puts what the repair did on the product's row.
fn settle_row(row: &mut FixProduct, d: &Repaired) {
    row.applied = d.applied();
    row.orphans_returned = d.returned_units;
    row.sales_recorded = d.recorded_units;
    row.released = d.released;
    row.held_back = d
        .rebuilt
        .as_ref()
        .map_or(0, |r| r.unexplained)
        .saturating_add(d.held);
    row.limits_held = d.rebuilt.as_ref().is_some_and(|r| r.limits_held);
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

/// A state with its drift when it has one: `drift -2`, `ok +0`, `missing`.
fn state_and_drift(state: State, drift: Option<i64>) -> String {
    match drift {
        Some(d) => format!("{} {d:+}", state.as_str()),
        None => state.as_str().to_string(),
    }
}

/// One audit row per kind of write the repair made on a product.
fn fix_audits(actor: &str, activity: &ActivityId, o: &Outcome) -> Vec<AuditEntry> {
    let (v, d) = (&o.first, &o.done);
    let mut out = Vec::new();
    let product = Some(v.product.product_id.to_string());
    let entry = |action: &str| {
        let mut e = AuditEntry::new(actor, action, activity);
        e.product_id = product.clone();
        e
    };
    if let Some(what) = &d.topup {
        let mut e = entry("fix.topup");
        e.reason = what.clone();
        out.push(e);
    }
    if let Some(r) = &d.rebuilt {
        let mut e = entry("fix.rebuild");
        e.before_value = r.before.clone();
        e.after_value = d.stock_after.map(|s| s.to_string());
        e.reason = format!(
            "rebuilt from the database ({}): {} ledger entr(ies) of live orders written, {} holding(s), the counters at {} active unit(s){}",
            r.why,
            r.entries,
            r.holdings,
            r.active,
            if r.limits_held {
                format!(
                    ", {} of them held back (the whole stock): the buyers' holdings were lost with units in flight whose buyers nobody can name, so nothing sells until their orders had the grace window to land and no buyer passes the limit; fix again then",
                    r.unexplained
                )
            } else if r.unexplained > 0 {
                format!(
                    ", {} of them held back until their orders had the grace window to land",
                    r.unexplained
                )
            } else {
                String::new()
            }
        );
        e.detail = serde_json::json!({
            "lost": v.status.lost,
            "entries": r.entries,
            "holdings": r.holdings,
            "active": r.active,
            "unexplained": r.unexplained,
        })
        .to_string();
        out.push(e);
    }
    if d.returned_units > 0 {
        let mut e = entry("fix.return_orphans");
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
    if d.recorded_units > 0 && d.rebuilt.is_none() {
        let mut e = entry("fix.record_sales");
        e.reason = format!(
            "{} unit(s) of live orders recorded as deductions (Redis had lost them)",
            d.recorded_units
        );
        e.detail = serde_json::json!({ "request_ids": d.recorded }).to_string();
        out.push(e);
    }
    if d.rebased {
        let mut e = entry("fix");
        e.before_value = v.cut.stock.shown();
        e.after_value = d.stock_after.map(|s| s.to_string());
        e.reason = match v.status.state {
            State::Drift | State::Negative | State::Oversold => format!(
                "drift {}: the stock was {} off its own counters; changed by {:+}{}{}",
                shown_drift(v.status.drift),
                shown_drift(v.status.offset),
                d.rebase_change,
                if d.released > 0 {
                    format!(
                        " ({} unit(s) held back since a rebuild put back on sale)",
                        d.released
                    )
                } else if d.held > 0 {
                    format!(
                        " ({} unit(s) held back instead: live orders Redis held no deduction for mark a rollback, and orders of other deductions it forgot may still land; fix again after the grace window)",
                        d.held
                    )
                } else {
                    String::new()
                },
                other_steps(v.cut.stock.value(), d)
            ),
            _ if d.released > 0 => format!(
                "{} unit(s) held back since a rebuild put back on sale: their orders had the grace window to land",
                d.released
            ),
            _ => "meta hash rewritten from database truth (limit, initial stock, pause)".into(),
        };
        e.detail = serde_json::json!({
            "initial": v.truth.initial,
            "db_sold": v.truth.db_sold,
            "in_flight": v.truth.in_flight,
            "orphaned": v.truth.orphaned,
            "offset": v.status.offset,
            "unledgered": v.status.unledgered,
            "change": d.rebase_change,
            "released": d.released,
            "held": d.held,
        })
        .to_string();
        out.push(e);
    }
    out
}

/// The part of a fix's stock change that its other steps made (orphans returned, sales
/// recorded), which the `fix` row's before and after include: without it a row read "13 -> -20,
/// changed by +0".
fn other_steps(before: Option<i64>, d: &Repaired) -> String {
    let Some(moved) = before
        .zip(d.stock_after)
        .map(|(b, a)| a.saturating_sub(b).saturating_sub(d.rebase_change))
        .filter(|m| *m != 0)
    else {
        return String::new();
    };
    let mut steps = Vec::new();
    if d.returned_units > 0 {
        steps.push(format!("{} orphaned unit(s) returned", d.returned_units));
    }
    if d.recorded_units > 0 {
        steps.push(format!("{} unit(s) of sales recorded", d.recorded_units));
    }
    // Buyers deduct while the fix runs: what moved is theirs too, whatever the steps did.
    steps.push("any sale or return meanwhile".into());
    format!("; {moved:+} more by {}", steps.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fix_row_names_a_rebuild_and_a_pause_written_back() {
        let row = |plan: &'static str, rebuild: Option<&str>, lost: Vec<Piece>| FixProduct {
            plan,
            rebuild: rebuild.map(Into::into),
            lost,
            offset: Some(0),
            ..FixProduct::example("p1", State::Missing, Some("32"), 32)
        };
        assert_eq!(
            row(
                "rebuild",
                Some("lost: the buyers hash"),
                vec![Piece::Buyers]
            )
            .writes(),
            "rebuild (lost: the buyers hash)"
        );
        assert_eq!(
            row("heal", None, vec![Piece::Pause]).writes(),
            "the pause written back"
        );
        assert_eq!(row("heal", None, Vec::new()).writes(), "");
    }

    #[test]
    fn a_fix_row_says_what_its_other_steps_moved() {
        let d = Repaired {
            stock_after: Some(-20),
            rebase_change: 0,
            recorded_units: 33,
            ..Repaired::default()
        };
        assert_eq!(
            other_steps(Some(13), &d),
            "; -33 more by 33 unit(s) of sales recorded, any sale or return meanwhile"
        );
        let both = Repaired {
            stock_after: Some(5),
            rebase_change: -2,
            returned_units: 4,
            recorded_units: 1,
            ..Repaired::default()
        };
        assert_eq!(
            other_steps(Some(4), &both),
            "; +3 more by 4 orphaned unit(s) returned, 1 unit(s) of sales recorded, any sale or return meanwhile"
        );
        // The rebase alone moved it, or nothing is known: nothing to add.
        let alone = Repaired {
            stock_after: Some(2),
            rebase_change: -2,
            ..Repaired::default()
        };
        assert_eq!(other_steps(Some(4), &alone), "");
        assert_eq!(other_steps(None, &d), "");
    }

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
