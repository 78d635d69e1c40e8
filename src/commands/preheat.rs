//! `preheat A [--force]` and `cleanup A [--force]`.

use super::progress::TerminalProgress;
use super::{Ctx, Outcome, table};
use seckill_console::domain::ActivityId;
use seckill_console::error::Result;
use seckill_console::ops::cleanup::{CleanupOptions, cleanup};
use seckill_console::ops::preheat::{PreheatOptions, preheat};

pub async fn run_preheat(
    ctx: &Ctx,
    activity: &str,
    (force, accept_eviction): (bool, bool),
) -> Result<Outcome> {
    let activity = ActivityId::parse(activity)?;
    let c = &ctx.config;
    if c.read_only {
        return Err(seckill_console::Error::refused(
            "read-only mode: refused to preheat; run without --read-only",
        ));
    }
    let db = ctx.db().await?;
    let redis = ctx.redis().await?;
    let progress = TerminalProgress::new("preheat");
    let report = preheat(
        &redis,
        &db,
        &c.keys,
        &activity,
        &PreheatOptions {
            force,
            accept_eviction,
            actor: c.actor.clone(),
            grace: c.grace,
            key_ttl_days: c.key_ttl_days,
            interleave: Default::default(),
        },
        &progress,
    )
    .await?;
    drop(progress);
    db.close().await;
    let done = report
        .planned()
        .unwrap_or_else(|| format!("{} written, {} unchanged", report.written, report.unchanged));
    let mut text = format!(
        "preheat {}: {} ({} products, total stock {}, {done}, {} ms)\n",
        report.activity,
        report.decision.to_uppercase(),
        report.products.len(),
        report.total_stock,
        report.elapsed_ms
    );
    for r in &report.reasons {
        text.push_str(&format!("  - {r}\n"));
    }
    for r in report.accepted.iter().chain(&report.warnings) {
        text.push_str(&format!("  ! {r}\n"));
    }
    if !report.conflicts.is_empty() {
        text.push('\n');
        text.push_str(&table::render(
            &[
                "product",
                "redis stock",
                "wanted stock",
                "redis limit",
                "wanted limit",
            ],
            &report
                .conflicts
                .iter()
                .map(|c| {
                    vec![
                        c.product.clone(),
                        c.redis_stock.clone().unwrap_or_else(|| "(missing)".into()),
                        c.wanted_stock.to_string(),
                        c.redis_limit
                            .map(|l| l.to_string())
                            .unwrap_or_else(|| "-".into()),
                        c.wanted_limit.to_string(),
                    ]
                })
                .collect::<Vec<_>>(),
        ));
    }
    let failed: Vec<Vec<String>> = report
        .products
        .iter()
        .filter(|p| p.error.is_some())
        .take(50)
        .map(|p| vec![p.product.clone(), p.error.clone().unwrap_or_default()])
        .collect();
    if !failed.is_empty() {
        text.push('\n');
        text.push_str(&table::render(&["product", "problem"], &failed));
    }
    if report.products.len() <= 50 {
        text.push('\n');
        text.push_str(&table::render(
            &[
                "product", "action", "stock", "limit", "written", "verified", "bucket", "rate/s",
            ],
            &report
                .products
                .iter()
                .map(|p| {
                    vec![
                        p.product.clone(),
                        p.action.as_str().to_string(),
                        p.stock.to_string(),
                        p.per_user_limit.to_string(),
                        yes(p.written),
                        yes(p.verified),
                        p.token_bucket.capacity.to_string(),
                        p.token_bucket.shown_rate(),
                    ]
                })
                .collect::<Vec<_>>(),
        ));
    }
    let failure = report.failure;
    Outcome::finished(report, text, failure)
}

fn yes(b: bool) -> String {
    if b { "yes".into() } else { "no".into() }
}

pub async fn run_cleanup(ctx: &Ctx, activity: &str, force: bool) -> Result<Outcome> {
    let activity = ActivityId::parse(activity)?;
    let c = &ctx.config;
    if c.read_only {
        return Err(seckill_console::Error::refused(
            "read-only mode: refused to delete keys; run without --read-only",
        ));
    }
    let db = ctx.db().await?;
    let redis = ctx.redis().await?;
    let progress = TerminalProgress::new("cleanup");
    let opts = CleanupOptions {
        force,
        actor: &c.actor,
        zone: c.tz,
    };
    let report = cleanup(&redis, &db, &c.keys, &activity, &opts, &progress).await?;
    drop(progress);
    db.close().await;
    let mut text = format!(
        "cleanup {}: deleted {} of the activity's {} keys ({})\n",
        report.activity, report.keys_deleted, report.keys_found, report.pattern
    );
    if report.keys_left > 0 {
        use std::fmt::Write as _;
        let more = report.keys_left - report.keys_left_shown.len();
        let _ = writeln!(
            text,
            "left {} key(s) that match but are not the console's (a product id or a key name it never makes): {}{}",
            report.keys_left,
            report
                .keys_left_shown
                .iter()
                .map(|k| k.escape_debug().to_string())
                .collect::<Vec<_>>()
                .join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        );
    }
    Outcome::ok(report, text)
}
