//! `activity import | list | show`.

use super::{Ctx, Outcome, table};
use crate::cli::ActivityCommand;
use seckill_console::db::activity as store;
use seckill_console::domain::ActivityId;
use seckill_console::domain::import::parse_activity_file;
use seckill_console::error::{Error, Result};
use serde_json::json;

/// The largest import file accepted (a million products is about 80 MB of TOML).
const MAX_IMPORT_BYTES: u64 = 256 * 1024 * 1024;

pub async fn run(ctx: &Ctx, cmd: ActivityCommand) -> Result<Outcome> {
    match cmd {
        ActivityCommand::Import { file } => import(ctx, &file).await,
        ActivityCommand::List => list(ctx).await,
        ActivityCommand::Show { activity } => show(ctx, &activity).await,
    }
}

async fn import(ctx: &Ctx, file: &std::path::Path) -> Result<Outcome> {
    let shown = file.display().to_string();
    // The file is read and validated in full before the database is opened: a bad file writes
    // nothing and needs no database.
    let meta = std::fs::metadata(file)
        .map_err(|e| Error::bad_input(format!("file '{shown}' cannot be read: {e}")))?;
    if meta.len() > MAX_IMPORT_BYTES {
        return Err(Error::bad_input(format!(
            "file '{shown}' is {} bytes; the limit is {MAX_IMPORT_BYTES}",
            meta.len()
        )));
    }
    let bytes = std::fs::read(file)
        .map_err(|e| Error::bad_input(format!("file '{shown}' cannot be read: {e}")))?;
    let text = String::from_utf8(bytes).map_err(|e| {
        Error::bad_input(format!(
            "file '{shown}' is not UTF-8 text (byte {})",
            e.utf8_error().valid_up_to()
        ))
    })?;
    let def = parse_activity_file(&shown, &text)?;
    if ctx.config.read_only {
        return Err(Error::refused(
            "read-only mode: refused to import an activity; run without --read-only",
        ));
    }
    let db = ctx.db().await?;
    let report = seckill_console::ops::import::import(
        &db,
        &CutsNeedRedis(ctx),
        &ctx.config.keys,
        &def,
        (&ctx.config.actor, &shown),
    )
    .await?;
    db.close().await;
    let window = report.window.as_ref().map(|w| window_text(ctx, w));
    let report_all = report;
    let report = &report_all.report;
    let mut text = format!(
        "activity {} {}: {} products created, {} updated, {} unchanged{}\n",
        report.activity,
        if report.activity_created {
            "created"
        } else {
            "updated"
        },
        report.products_created,
        report.products_updated,
        report.products_unchanged,
        if report.products_not_in_file.is_empty() {
            String::new()
        } else {
            format!(
                "; {} products in the database are not in the file and were kept",
                report.products_not_in_file.len()
            )
        }
    );
    if let Some(w) = window {
        text.push_str(&w);
    }
    let failure = report_all.window.as_ref().and_then(|w| w.failure);
    Outcome::finished(report_all, text, failure)
}

/// What a moved window did in Redis, in the operator's zone.
fn window_text(ctx: &Ctx, w: &seckill_console::ops::import::WindowMoved) -> String {
    let at = |ms: i64| {
        chrono::DateTime::from_timestamp_millis(ms)
            .map(|t| ctx.config.tz.show(t))
            .unwrap_or_else(|| ms.to_string())
    };
    let mut out = format!(
        "sale window moved from {} - {} to {} - {}: ",
        at(w.before.opens_ms),
        at(w.before.closes_ms),
        at(w.after.opens_ms),
        at(w.after.closes_ms),
    );
    match &w.unpushed {
        Some(why) => out.push_str(&format!("{why}\n")),
        None => out.push_str(&format!(
            "written to {} preheated product(s) in Redis ({} held it already, {} not preheated)\n",
            w.written, w.unchanged, w.not_preheated
        )),
    }
    for (p, why) in w.failed.iter().take(20) {
        out.push_str(&format!(
            "  not written to {p}: {why}; `seckill-console fix` writes it\n"
        ));
    }
    if w.failed.len() > 20 {
        out.push_str(&format!("  and {} more\n", w.failed.len() - 20));
    }
    out
}

/// Redis, opened only when an import cuts a stock (to know whether the product's keys exist).
struct CutsNeedRedis<'a>(&'a Ctx);

impl seckill_console::ops::import::RedisForCuts for CutsNeedRedis<'_> {
    async fn redis(&self) -> Result<seckill_console::redis::RedisStore> {
        self.0.redis().await
    }
}

async fn list(ctx: &Ctx) -> Result<Outcome> {
    let db = ctx.db().await?;
    let rows = store::list(&db).await?;
    db.close().await;
    let now = chrono::Utc::now();
    let text = if rows.is_empty() {
        "no activities: import one with `seckill-console activity import FILE`\n".to_string()
    } else {
        table::render(
            &[
                "activity",
                "name",
                "starts_at",
                "ends_at",
                "status",
                "phase",
                "products",
                "stock",
            ],
            &rows
                .iter()
                .map(|r| {
                    vec![
                        r.activity.activity_id.to_string(),
                        r.activity.name.clone(),
                        ctx.config.tz.show(r.activity.starts_at),
                        ctx.config.tz.show(r.activity.ends_at),
                        r.activity.status.to_string(),
                        r.activity.phase(now).as_str().to_string(),
                        r.products.to_string(),
                        r.total_stock.to_string(),
                    ]
                })
                .collect::<Vec<_>>(),
        )
    };
    let doc = json!({
        "activities": rows.iter().map(|r| {
            let mut v = serde_json::to_value(r).unwrap_or_default();
            if let Some(o) = v.as_object_mut() {
                o.insert("phase".into(), serde_json::to_value(r.activity.phase(now)).unwrap_or_default());
            }
            v
        }).collect::<Vec<_>>()
    });
    Outcome::ok(doc, text)
}

async fn show(ctx: &Ctx, id: &str) -> Result<Outcome> {
    let id = ActivityId::parse(id)?;
    let db = ctx.db().await?;
    let activity = store::require(&db, &id).await?;
    let products = store::products(&db, &id).await?;
    db.close().await;
    let total: i64 = products.iter().map(|p| p.initial_stock).sum();
    let now = chrono::Utc::now();
    let mut text = format!(
        "activity {} ({})\nwindow   {} .. {} ({})\nstatus   {}\nproducts {}, total stock {}\n\n",
        activity.activity_id,
        activity.name,
        ctx.config.tz.show(activity.starts_at),
        ctx.config.tz.show(activity.ends_at),
        activity.phase(now).as_str(),
        activity.status,
        products.len(),
        total
    );
    text.push_str(&table::render(
        &["product", "name", "stock", "per_user_limit"],
        &products
            .iter()
            .map(|p| {
                vec![
                    p.product_id.to_string(),
                    p.name.clone(),
                    p.initial_stock.to_string(),
                    p.per_user_limit.to_string(),
                ]
            })
            .collect::<Vec<_>>(),
    ));
    let doc = json!({
        "activity": activity.activity_id,
        "name": activity.name,
        "starts_at": activity.starts_at,
        "ends_at": activity.ends_at,
        "status": activity.status,
        "phase": activity.phase(now),
        "total_stock": total,
        "products": products,
    });
    Outcome::ok(doc, text)
}
