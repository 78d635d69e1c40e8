//! `status`, `reconcile`, `fix` and `compensation list | resolve`.

use super::progress::SettleLine;
use super::{Ctx, Outcome, table};
use crate::cli::CompensationCommand;
use chrono::Utc;
use seckill_console::db::compensation;
use seckill_console::domain::ActivityId;
use seckill_console::domain::stock::{ProductStatus, State};
use seckill_console::domain::zone::Zone;
use seckill_console::error::{Error, ErrorKind, Result};
use seckill_console::ops::compensation::{Which, resolve};
use seckill_console::ops::fix::{FixOptions, FixReport, LeftAsIs, fix};
use seckill_console::ops::progress::SettleGauge;
use seckill_console::ops::status::{StatusOptions, StatusReport, status};
use seckill_console::render::queue_count;
use std::io::{BufRead, IsTerminal, Write};

/// Products listed in text output before it only lists the ones that are not ok.
const TEXT_ALL_LIMIT: usize = 100;

pub(crate) fn options(ctx: &Ctx) -> StatusOptions {
    StatusOptions {
        grace: ctx.config.grace,
        compensation_alert: ctx.config.compensation_alert,
        outbox_alert: ctx.config.outbox_alert,
        gauge: Default::default(),
    }
}

async fn report(ctx: &Ctx, activity: &str, label: &str) -> Result<StatusReport> {
    let activity = ActivityId::parse(activity)?;
    let db = ctx.db().await?;
    let redis = ctx.redis().await?;
    let mut opts = options(ctx);
    opts.gauge = SettleGauge::new();
    let line = SettleLine::start(label, &opts.gauge);
    let report = status(&redis, &db, &ctx.config.keys, &activity, &opts).await;
    drop(line);
    let report = report?;
    db.close().await;
    Ok(report)
}

fn opt(v: Option<i64>) -> String {
    v.map_or_else(|| "-".into(), |n| n.to_string())
}

fn drift(v: Option<i64>) -> String {
    v.map_or_else(
        || "-".into(),
        |n| if n == 0 { "0".into() } else { format!("{n:+}") },
    )
}

fn product_rows(products: &[&ProductStatus]) -> Vec<Vec<String>> {
    products
        .iter()
        .map(|p| {
            vec![
                p.product.clone(),
                p.initial.to_string(),
                opt(p.redis_remaining),
                p.db_sold.to_string(),
                p.in_flight.to_string(),
                p.orphaned.to_string(),
                p.expected_remaining.to_string(),
                drift(p.drift),
                p.state.as_str().to_string(),
            ]
        })
        .collect()
}

fn render(r: &StatusReport, title: &str, ctx_tz: Zone) -> String {
    let t = &r.totals;
    let mut text = format!(
        "{title} {} ({}) at {}: {} products, {} not ok\n",
        r.activity,
        r.phase.as_str(),
        ctx_tz.show(r.taken_at),
        r.products.len(),
        t.not_ok
    );
    // A total that leaves products out says so: "redis -3" over a missing product and a
    // corrupt one read as the activity's stock.
    let unread = if t.redis_unreadable > 0 {
        format!(" (without {} unreadable)", t.redis_unreadable)
    } else {
        String::new()
    };
    text.push_str(&format!(
        "totals   initial {}  redis {}{unread}  sold {}  in-flight {}  orphaned {}  expected {}\n",
        t.initial, t.redis_remaining, t.db_sold, t.in_flight, t.orphaned, t.expected_remaining
    ));
    text.push_str(&format!(
        "queues   compensation {} pending  outbox {} unsent\n",
        queue_count(r.compensation.pending, r.compensation.more),
        queue_count(r.outbox.pending, r.outbox.more)
    ));
    for n in &r.redis_nodes {
        text.push_str(&format!(
            "redis    {} {}{}: memory {}\n",
            n.addr,
            n.role.as_str(),
            if n.ok { "" } else { " (not ok)" },
            n.memory.summary()
        ));
    }
    text.push('\n');
    let shown: Vec<&ProductStatus> = if r.products.len() <= TEXT_ALL_LIMIT {
        r.products.iter().collect()
    } else {
        r.products
            .iter()
            .filter(|p| p.state != State::Ok)
            .take(500)
            .collect()
    };
    text.push_str(&table::render(
        &[
            "product",
            "initial",
            "redis",
            "db_sold",
            "in_flight",
            "orphaned",
            "expected",
            "drift",
            "state",
        ],
        &product_rows(&shown),
    ));
    if shown.len() < r.products.len() {
        text.push_str(&format!(
            "({} more products not listed; --json lists all)\n",
            r.products.len() - shown.len()
        ));
    }
    if !r.alerts.is_empty() {
        text.push_str("\nalerts\n");
        for a in &r.alerts {
            let severity = a.severity.as_str();
            text.push_str(&format!("  [{severity}] {}\n", a.message));
        }
    }
    text
}

pub async fn run_status(ctx: &Ctx, activity: &str) -> Result<Outcome> {
    let r = report(ctx, activity, "status").await?;
    let text = render(&r, "status", ctx.config.tz);
    Outcome::ok(r, text)
}

pub async fn run_reconcile(ctx: &Ctx, activity: &str, fail_on_drift: bool) -> Result<Outcome> {
    let r = report(ctx, activity, "reconcile").await?;
    let text = render(&r, "reconcile", ctx.config.tz);
    let drifted = fail_on_drift && !r.all_ok();
    Outcome::finished(r, text, drifted.then_some(ErrorKind::CheckFailed))
}

fn render_fix(r: &FixReport) -> String {
    if r.products.is_empty() && r.left.is_empty() {
        return format!("fix {}: every product is ok; nothing to do\n", r.activity);
    }
    if r.products.is_empty() {
        return format!(
            "fix {}: nothing to write\n{}",
            r.activity,
            render_left(&r.left)
        );
    }
    let mut text = format!(
        "fix {}{}: {} product(s)\n",
        r.activity,
        if r.preview {
            " (preview, nothing written)"
        } else {
            ""
        },
        r.products.len()
    );
    let signed = |v: Option<i64>| v.map_or_else(|| "-".to_string(), |v| format!("{v:+}"));
    text.push_str(&table::render(
        &[
            "product",
            "state",
            "drift",
            "before",
            "after",
            "offset",
            "orphans",
            "lost sales",
            "applied",
            "writes",
            "problem",
        ],
        &r.products
            .iter()
            .map(|p| {
                vec![
                    p.product.clone(),
                    p.state.as_str().into(),
                    signed(p.drift),
                    p.before.clone().unwrap_or_else(|| "(missing)".into()),
                    p.after.to_string(),
                    signed(p.offset),
                    p.orphans.len().to_string(),
                    p.sales_recorded.to_string(),
                    if p.applied { "yes".into() } else { "no".into() },
                    p.writes(),
                    p.error.clone().unwrap_or_default(),
                ]
            })
            .collect::<Vec<_>>(),
    ));
    text.push_str(
        "(offset: units the stock is off its own counters; orphans: deductions without an order \
         past the grace window, returned; lost sales: orders Redis held no deduction for, recorded)\n",
    );
    for p in r.products.iter().filter(|p| p.held_back > 0) {
        text.push_str(&format!(
            "{}: {} unit(s) held back off sale until their orders had the grace window to land{}; fix again after it puts back what no order claimed\n",
            p.product,
            p.held_back,
            if p.limits_held {
                " (the whole stock: the buyers' holdings were lost with units whose buyers nobody can name, so no buyer passes the limit)"
            } else {
                ""
            }
        ));
    }
    text.push_str(&render_left(&r.left));
    text
}

/// The products a fix leaves as they are, not ok, each with why.
fn render_left(left: &[LeftAsIs]) -> String {
    if left.is_empty() {
        return String::new();
    }
    let mut text = format!(
        "{} product(s) not ok that no write of Redis can make so:\n",
        left.len()
    );
    for l in left {
        text.push_str(&format!("  {}\n", l.shown()));
    }
    text
}

/// Asks on the terminal; the operator types the activity id to confirm.
fn confirm(activity: &ActivityId, preview: &FixReport) -> Result<bool> {
    let mut err = std::io::stderr();
    let _ = write!(
        err,
        "{}\nRewrite these products of '{activity}' from database truth? Type the activity id to confirm: ",
        render_fix(preview)
    );
    let _ = err.flush();
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|e| Error::bad_input(format!("cannot read the confirmation: {e}")))?;
    Ok(line.trim() == activity.as_str())
}

pub async fn run_fix(
    ctx: &Ctx,
    activity: &str,
    product: Option<String>,
    yes: bool,
    preview: bool,
) -> Result<Outcome> {
    let activity = ActivityId::parse(activity)?;
    if let Some(p) = &product {
        seckill_console::domain::ProductId::parse(p)?;
    }
    if ctx.config.read_only && !preview {
        return Err(Error::refused(
            "read-only mode: refused to fix; run without --read-only (or use --preview)",
        ));
    }
    let interactive = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    if !preview && !yes && !interactive {
        return Err(Error::refused(
            "fix rewrites Redis and there is no terminal to confirm on: pass --yes (or --preview to see the plan)",
        ));
    }
    let db = ctx.db().await?;
    let redis = ctx.redis().await?;
    let mut opts = FixOptions {
        product,
        preview: true,
        actor: ctx.config.actor.clone(),
        grace: ctx.config.grace,
        confirmed: None,
        key_ttl_days: ctx.config.key_ttl_days,
        interleave: Default::default(),
    };
    let keys = &ctx.config.keys;
    if !preview && !yes {
        let plan = fix(&redis, &db, keys, &activity, &opts).await?;
        if plan.products.is_empty() {
            db.close().await;
            let text = render_fix(&plan);
            return Outcome::ok(plan, text);
        }
        if !confirm(&activity, &plan)? {
            db.close().await;
            return Err(Error::refused("not confirmed: nothing was written"));
        }
        // Exactly the plan that was confirmed, and only while it still holds.
        opts.confirmed = Some(plan.confirmation());
    }
    opts.preview = preview;
    let r = fix(&redis, &db, keys, &activity, &opts).await?;
    db.close().await;
    let text = render_fix(&r);
    let failure = r.failure;
    Outcome::finished(r, text, failure)
}

pub async fn run_compensation(ctx: &Ctx, cmd: CompensationCommand) -> Result<Outcome> {
    match cmd {
        CompensationCommand::List { activity, limit } => {
            let activity = ActivityId::parse(&activity)?;
            let db = ctx.db().await?;
            seckill_console::db::activity::require(&db, &activity).await?;
            let entries = compensation::list(&db, &activity, limit).await?;
            db.close().await;
            let now = Utc::now();
            let rows: Vec<Vec<String>> = entries
                .iter()
                .map(|e| {
                    vec![
                        e.request_id.clone(),
                        e.product_id.clone(),
                        e.user_id.clone(),
                        e.quantity.to_string(),
                        e.status.clone(),
                        e.age_secs(now)
                            .map_or_else(|| "unknown (oldest)".to_string(), |s| format!("{s}s")),
                        e.resolution.clone().unwrap_or_default(),
                    ]
                })
                .collect();
            let text = if rows.is_empty() {
                format!("compensation queue of {activity} is empty\n")
            } else {
                table::render(
                    &[
                        "request",
                        "product",
                        "user",
                        "qty",
                        "status",
                        "age",
                        "resolution",
                    ],
                    &rows,
                )
            };
            let doc = serde_json::json!({
                "activity": activity,
                "entries": entries.iter().map(|e| {
                    let mut v = serde_json::to_value(e).unwrap_or_default();
                    if let Some(o) = v.as_object_mut() {
                        o.insert("age_secs".into(), (now - e.created_at).num_seconds().max(0).into());
                    }
                    v
                }).collect::<Vec<_>>(),
            });
            Outcome::ok(doc, text)
        }
        CompensationCommand::Resolve {
            activity,
            request,
            all,
        } => {
            let activity = ActivityId::parse(&activity)?;
            let which = match (request, all) {
                (Some(r), false) => Which::One(r),
                (None, true) => Which::All,
                _ => {
                    return Err(Error::bad_input(
                        "say which entries to resolve: --request R or --all",
                    ));
                }
            };
            if ctx.config.read_only {
                return Err(Error::refused(
                    "read-only mode: refused to resolve compensation entries; run without --read-only",
                ));
            }
            let db = ctx.db().await?;
            let redis = ctx.redis().await?;
            let r = resolve(
                &redis,
                &db,
                &ctx.config.keys,
                &activity,
                &which,
                &ctx.config.actor,
                ctx.config.grace,
            )
            .await?;
            db.close().await;
            let mut text = format!(
                "compensation {}: {} resolved, {} still pending\n",
                r.activity, r.resolved, r.still_pending
            );
            if !r.resolutions.is_empty() {
                text.push_str(&table::render(
                    &["request", "product", "qty", "status", "detail"],
                    &r.resolutions
                        .iter()
                        .map(|x| {
                            vec![
                                x.request_id.clone(),
                                x.product.clone(),
                                x.quantity.to_string(),
                                x.status.clone(),
                                x.detail.clone(),
                            ]
                        })
                        .collect::<Vec<_>>(),
                ));
            }
            let failure = r
                .unreachable
                .then_some(seckill_console::error::ErrorKind::Unavailable);
            Outcome::finished(r, text, failure)
        }
    }
}
