//! The operator's controls: `pause`, `resume` and the audit trail (`audit`).

use super::{Ctx, Outcome, table};
use crate::cli::{AuditArgs, PauseArgs, TopupArgs};
use chrono::{DateTime, Duration, Utc};
use seckill_console::db::audit::{AuditEntry, AuditQuery};
use seckill_console::domain::{ActivityId, ProductId};
use seckill_console::error::{Error, ErrorKind, Result};
use seckill_console::ops::pause::{PauseReport, set_paused};
use seckill_console::ops::topup::{TopupReport, topup};
use serde::Serialize;
use std::io::{BufRead, IsTerminal, Write};

/// Asks on the terminal: the activity id for a whole activity, `y` for named products.
fn confirm(action: &str, activity: &ActivityId, products: &[String]) -> Result<bool> {
    let mut err = std::io::stderr();
    let whole = products.is_empty();
    let _ = if whole {
        write!(
            err,
            "{action} every product of '{activity}'? Type the activity id to confirm: "
        )
    } else {
        write!(
            err,
            "{action} {} of '{activity}'? [y/N] ",
            products.join(", ")
        )
    };
    let _ = err.flush();
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .map_err(|e| Error::bad_input(format!("cannot read the confirmation: {e}")))?;
    let line = line.trim();
    Ok(if whole {
        line == activity.as_str()
    } else {
        line.eq_ignore_ascii_case("y") || line.eq_ignore_ascii_case("yes")
    })
}

pub async fn run_pause(ctx: &Ctx, args: PauseArgs, pause: bool) -> Result<Outcome> {
    let verb = if pause { "pause" } else { "resume" };
    let activity = ActivityId::parse(&args.activity)?;
    for p in &args.products {
        ProductId::parse(p)?;
    }
    if ctx.config.read_only {
        return Err(Error::refused(format!(
            "read-only mode: refused to {verb}; run without --read-only"
        )));
    }
    let interactive = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    if !args.yes {
        if !interactive {
            return Err(Error::refused(format!(
                "{verb} writes Redis and there is no terminal to confirm on: pass --yes"
            )));
        }
        let title = if pause { "Pause" } else { "Resume" };
        if !confirm(title, &activity, &args.products)? {
            return Err(Error::refused("not confirmed: nothing was written"));
        }
    }
    let db = ctx.db().await?;
    let redis = ctx.redis().await?;
    let only = (!args.products.is_empty()).then_some(args.products.as_slice());
    let r = set_paused(
        &redis,
        &db,
        &ctx.config.keys,
        &activity,
        only,
        pause,
        (&ctx.config.actor, &args.reason),
    )
    .await;
    db.close().await;
    let r = r?;
    let text = render_pause(&r);
    let failure = if r.unreachable {
        ErrorKind::Unavailable
    } else {
        ErrorKind::CheckFailed
    };
    let failure = r.failed().then_some(failure);
    Outcome::finished(r, text, failure)
}

fn render_pause(r: &PauseReport) -> String {
    let shown = |p: Option<bool>| match p {
        Some(true) => "paused",
        Some(false) => "selling",
        None => "-",
    };
    let rows: Vec<Vec<String>> = r
        .products
        .iter()
        .map(|p| {
            vec![
                p.product.clone(),
                shown(p.was_paused).into(),
                shown(p.paused).into(),
                p.result(r.action),
            ]
        })
        .collect();
    let mut out = table::render(&["product", "before", "after", "result"], &rows);
    out.push_str(&format!(
        "{}: {} of {} product(s) of {} {}\n",
        r.action,
        r.products.len() - r.errors,
        r.products.len(),
        r.activity,
        if r.errors > 0 {
            "done; the others could not be changed (see result)"
        } else {
            "done"
        }
    ));
    out
}

pub async fn run_topup(ctx: &Ctx, args: TopupArgs) -> Result<Outcome> {
    let activity = ActivityId::parse(&args.activity)?;
    let product = ProductId::parse(&args.product)?;
    if ctx.config.read_only {
        return Err(Error::refused(
            "read-only mode: refused to top up; run without --read-only",
        ));
    }
    let interactive = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    if !args.yes {
        if !interactive {
            return Err(Error::refused(
                "topup writes the database and Redis and there is no terminal to confirm on: pass --yes",
            ));
        }
        let mut err = std::io::stderr();
        let _ = write!(
            err,
            "Change the initial stock of {product} in '{activity}' by {:+}, in the database and in Redis? [y/N] ",
            args.add
        );
        let _ = err.flush();
        let mut line = String::new();
        let _ = std::io::stdin().lock().read_line(&mut line);
        if !matches!(line.trim(), "y" | "Y" | "yes") {
            return Err(Error::refused("not confirmed: nothing was written"));
        }
    }
    let db = ctx.db().await?;
    let redis = ctx.redis().await?;
    let req = seckill_console::ops::topup::TopupRequest {
        activity: &activity,
        product: &product,
        change: args.add,
        actor: &ctx.config.actor,
        reason: &args.reason,
        grace: ctx.config.grace,
        interleave: Default::default(),
    };
    let r = topup(&redis, &db, &ctx.config.keys, &req).await;
    db.close().await;
    let r = r?;
    let text = render_topup(&r);
    Outcome::ok(r, text)
}

fn render_topup(r: &TopupReport) -> String {
    let shown = |s: Option<i64>| s.map_or_else(|| "(no key)".to_string(), |s| s.to_string());
    let mut out = table::render(
        &["product", "change", "initial", "redis stock"],
        &[vec![
            r.product.clone(),
            format!("{:+}", r.change),
            format!("{} -> {}", r.initial_before, r.initial_after),
            format!("{} -> {}", shown(r.redis_before), shown(r.redis_after)),
        ]],
    );
    if let Some(n) = &r.note {
        out.push_str(n);
        out.push('\n');
    }
    out
}

/// The `--since` option of `audit` and `report`, read against now.
pub fn since_arg(text: Option<&str>) -> Result<Option<DateTime<Utc>>> {
    text.map(|s| parse_since(s, Utc::now())).transpose()
}

/// Reads `--since`: a duration back from now (`90s`, `30m`, `2h`, `7d`) or an RFC 3339 time.
pub fn parse_since(text: &str, now: DateTime<Utc>) -> Result<DateTime<Utc>> {
    let bad = || {
        Error::bad_input(format!(
            "--since '{text}' is neither a duration (90s, 30m, 2h, 7d) nor an RFC 3339 time (2026-11-30T12:00:00+08:00)"
        ))
    };
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Ok(t.with_timezone(&Utc));
    }
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .filter(|at| *at > 0)
        .ok_or_else(bad)?;
    let (n, unit) = text.split_at(split);
    let too_far = || {
        Error::bad_input(format!(
            "--since '{text}' reaches back more than 100 years: give a shorter duration (7d) or a time"
        ))
    };
    let per = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(bad()),
    };
    // All digits: a number too big for i64 is a duration all the same, only too long.
    let n: i64 = n.parse().map_err(|_| too_far())?;
    let secs = n
        .checked_mul(per)
        .filter(|s| *s <= 100 * 365 * 86_400)
        .ok_or_else(too_far)?;
    Ok(now - Duration::seconds(secs))
}

#[derive(Serialize)]
struct AuditDoc {
    entries: Vec<AuditEntry>,
}

pub async fn run_audit(ctx: &Ctx, args: AuditArgs) -> Result<Outcome> {
    let activity = args
        .activity
        .as_deref()
        .map(ActivityId::parse)
        .transpose()?;
    if !(1..=100_000).contains(&args.limit) {
        return Err(Error::bad_input(format!(
            "--limit {} is not between 1 and 100000",
            args.limit
        )));
    }
    let since = since_arg(args.since.as_deref())?;
    if let Some(p) = &args.product {
        ProductId::parse(p)?;
    }
    let db = ctx.db().await?;
    // An activity that does not exist is a mistyped id, as for every other command: an empty
    // trail would read as "nobody touched it".
    if let Some(id) = &activity
        && let Err(e) = seckill_console::db::activity::require(&db, id).await
    {
        db.close().await;
        return Err(e);
    }
    let query = AuditQuery {
        activity: activity.as_ref(),
        since,
        action: args.action.as_deref(),
        actor: args.by.as_deref(),
        product: args.product.as_deref(),
    };
    let entries = seckill_console::db::audit::matching(&db, &query, args.limit)
        .await
        .map_err(|e| db.error(&e));
    db.close().await;
    let doc = AuditDoc { entries: entries? };
    let rows: Vec<Vec<String>> = doc
        .entries
        .iter()
        .map(|e| {
            vec![
                ctx.config.tz.show(e.at),
                e.actor.clone(),
                e.action.clone(),
                e.activity_id.clone(),
                e.product_id.clone().unwrap_or_default(),
                e.before_value.clone().unwrap_or_default(),
                e.after_value.clone().unwrap_or_default(),
                e.reason.clone(),
            ]
        })
        .collect();
    let text = if rows.is_empty() {
        "no audit entries\n".to_string()
    } else {
        table::render(
            &[
                "at", "actor", "action", "activity", "product", "before", "after", "reason",
            ],
            &rows,
        )
    };
    Outcome::ok(doc, text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn since_takes_a_duration_or_a_time_and_names_a_bad_value() {
        let now = Utc
            .with_ymd_and_hms(2026, 11, 30, 12, 0, 0)
            .single()
            .expect("time");
        assert_eq!(
            parse_since("90s", now).ok(),
            Some(now - Duration::seconds(90))
        );
        assert_eq!(parse_since("2h", now).ok(), Some(now - Duration::hours(2)));
        assert_eq!(parse_since("7d", now).ok(), Some(now - Duration::days(7)));
        assert_eq!(
            parse_since("2026-11-30T18:00:00+08:00", now).ok(),
            Some(
                Utc.with_ymd_and_hms(2026, 11, 30, 10, 0, 0)
                    .single()
                    .expect("time")
            )
        );
        for bad in [
            "",
            "h",
            "5",
            "5w",
            "-5m",
            "99999999999999999999d",
            "1000000d",
        ] {
            let e = parse_since(bad, now).expect_err(bad);
            assert!(e.message.contains(&format!("'{bad}'")), "{}", e.message);
            // A duration too long is named as one, not as something else.
            let too_long = bad.ends_with('d') && bad.len() > 4;
            assert_eq!(
                e.message.contains("more than 100 years"),
                too_long,
                "{bad}: {}",
                e.message
            );
        }
    }
}
