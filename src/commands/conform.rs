//! `conform A`: the app servers' contract checked against a sale, rule by rule.

use super::{Ctx, Outcome};
use seckill_console::domain::ActivityId;
use seckill_console::domain::stock::printable;
use seckill_console::error::{ErrorKind, Result};
use seckill_console::ops::conform::{ConformOptions, ConformReport, conform};

pub async fn run_conform(ctx: &Ctx, activity: &str, clock_slack_ms: u32) -> Result<Outcome> {
    let activity = ActivityId::parse(activity)?;
    let db = ctx.db().await?;
    let redis = match ctx.redis().await {
        Ok(r) => r,
        Err(e) => {
            db.close().await;
            return Err(e);
        }
    };
    let opts = ConformOptions {
        grace: ctx.config.grace,
        clock_slack_ms: i64::from(clock_slack_ms),
    };
    let r = conform(&redis, &db, &ctx.config.keys, &activity, opts).await;
    db.close().await;
    let r = r?;
    let text = text(&r);
    let failure = (!r.ok).then_some(ErrorKind::CheckFailed);
    Outcome::finished(r, text, failure)
}

/// One line per rule, then each broken rule's examples.
fn text(r: &ConformReport) -> String {
    let mut out = format!(
        "activity {}: {} products, {} ledger entries, {} orders, {} outbox messages, {} compensation entries read\n",
        r.activity,
        r.read.products,
        r.read.ledger_entries,
        r.read.orders,
        r.read.outbox_messages,
        r.read.compensation_entries
    );
    let width = r.rules.iter().map(|x| x.rule.len()).max().unwrap_or(0);
    for rule in &r.rules {
        let verdict = if rule.ok { "ok" } else { "BROKEN" };
        out.push_str(&format!(
            "  {:<width$}  {verdict:<6}  {} of {} checked  {}\n",
            rule.rule, rule.broken, rule.checked, rule.title
        ));
    }
    for rule in r.rules.iter().filter(|x| !x.ok) {
        out.push_str(&format!("\n{} ({} broken):\n", rule.rule, rule.broken));
        for b in &rule.examples {
            let at = match (b.request_id.is_empty(), b.product.is_empty()) {
                (true, _) => String::new(),
                (false, true) => format!("{}: ", b.request_id),
                (false, false) => format!("{} ({}): ", b.request_id, b.product),
            };
            // Request and order ids are the app servers' data: printed with their control
            // characters escaped.
            out.push_str(&format!("  {}\n", printable(&format!("{at}{}", b.detail))));
        }
        let more = rule.broken.saturating_sub(rule.examples.len() as u64);
        if more > 0 {
            out.push_str(&format!("  and {more} more\n"));
        }
    }
    for note in &r.unchecked {
        out.push_str(&format!("not checked: {}\n", printable(note)));
    }
    out.push_str(&if r.ok {
        "every rule holds\n".to_string()
    } else {
        format!(
            "{} rule(s) broken: {} (see docs/app-servers.md)\n",
            r.broken.len(),
            r.broken.join(", ")
        )
    });
    out
}
