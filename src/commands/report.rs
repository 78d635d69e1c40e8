//! `report`: the incident report as Markdown tables a person pastes into a ticket, or JSON with
//! the same content.

use super::control::since_arg;
use super::status::options;
use super::{Ctx, Outcome};
use crate::cli::{ReportArgs, ReportFormat};
use seckill_console::domain::ActivityId;
use seckill_console::error::{ErrorKind, Result};
use seckill_console::ops::report::report;
use seckill_console::render::report::markdown;

pub async fn run_report(ctx: &Ctx, args: ReportArgs) -> Result<Outcome> {
    let activity = ActivityId::parse(&args.activity)?;
    let since = since_arg(args.since.as_deref())?;
    let db = ctx.db().await?;
    // Without Redis the report still gives the database's side in full (sales, the queue,
    // every console write): during an outage that is what the review needs.
    let redis = match ctx.redis().await {
        Ok(r) => Ok(r),
        Err(e) if e.kind == ErrorKind::Unavailable => Err(e.message),
        Err(e) => {
            db.close().await;
            return Err(e);
        }
    };
    let r = report(
        redis.as_ref().map_err(Clone::clone),
        &db,
        &ctx.config.keys,
        &activity,
        since,
        &options(ctx),
    )
    .await;
    db.close().await;
    let r = r?;
    // Redacted where the report took it down.
    if let Some(why) = &r.redis_unavailable {
        eprintln!(
            "note: Redis unavailable ({why}): the report's Redis sections are marked unavailable"
        );
    }
    match args.format {
        ReportFormat::Json => {
            let text = serde_json::to_string_pretty(&r).unwrap_or_default() + "\n";
            Outcome::ok(r, text)
        }
        ReportFormat::Markdown => {
            let text = markdown(&r, ctx.config.tz);
            Outcome::ok(r, text)
        }
    }
}
