//! The incident report as Markdown: what `report --format markdown` prints and what the TUI's
//! `w` writes to a file, so the two never differ.

use crate::domain::zone::Zone;
use crate::ops::report::Report;

fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

fn opt(v: Option<i64>) -> String {
    v.map_or_else(|| "-".into(), |n| n.to_string())
}

/// The report as Markdown: a heading per part, a table per list.
pub fn markdown(r: &Report, tz: Zone) -> String {
    let mut out = format!("# Incident report: {} ({})\n\n", r.activity, cell(&r.name));
    out.push_str(&format!(
        "- window: {} .. {} (status {}, phase {})\n- generated: {}\n- period: {}\n- books now: {}\n\n",
        tz.show(r.starts_at),
        tz.show(r.ends_at),
        r.status,
        r.verdict.phase.as_str(),
        tz.show(r.generated_at),
        r.since.map_or_else(|| "the whole activity".to_string(), |t| format!("since {}", tz.show(t))),
        if r.balanced { "balanced (every product ok)" } else { "NOT balanced (see the verdict)" }
    ));
    out.push_str("## Sales\n\n| product | initial | sold | paid | expired | cancelled | remaining | state |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n");
    for s in &r.sales {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
            s.product,
            s.initial,
            s.sold,
            s.paid,
            s.expired,
            s.cancelled,
            opt(s.remaining),
            s.state
        ));
    }
    out.push_str("\n## Verdict now\n\n| product | state | drift | redis | expected | in flight | orphaned |\n| --- | --- | ---: | ---: | ---: | ---: | ---: |\n");
    for p in &r.verdict.products {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} |\n",
            p.product,
            p.state.as_str(),
            opt(p.drift),
            opt(p.redis_remaining),
            p.expected_remaining,
            p.in_flight,
            p.orphaned
        ));
    }
    if !r.verdict.alerts.is_empty() {
        out.push_str("\nAlerts:\n\n");
        for a in &r.verdict.alerts {
            out.push_str(&format!(
                "- [{}] {}: {}\n",
                a.severity.as_str(),
                a.kind.as_str(),
                cell(&a.message)
            ));
        }
    }
    out.push_str("\n## Compensation queue\n\n");
    if r.compensation.is_empty() {
        out.push_str("No entries.\n");
    } else {
        out.push_str("| request | product | units | status | resolution | created | resolved |\n| --- | --- | ---: | --- | --- | --- | --- |\n");
        for c in &r.compensation {
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} |\n",
                cell(&c.request_id),
                c.product,
                c.quantity,
                c.status,
                cell(c.resolution.as_deref().unwrap_or("-")),
                tz.show(c.created_at),
                c.resolved_at
                    .map_or_else(|| "-".to_string(), |t| tz.show(t))
            ));
        }
    }
    out.push_str("\n## Fixes\n\n");
    if r.fixes.is_empty() {
        out.push_str("None.\n");
    } else {
        out.push_str("| at | actor | action | product | before | after | what |\n| --- | --- | --- | --- | ---: | ---: | --- |\n");
        for f in &r.fixes {
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} |\n",
                tz.show(f.at),
                cell(&f.actor),
                f.action,
                f.product_id.as_deref().unwrap_or("-"),
                cell(f.before_value.as_deref().unwrap_or("-")),
                cell(f.after_value.as_deref().unwrap_or("-")),
                cell(&f.reason)
            ));
        }
    }
    out.push_str("\n## Console writes\n\n");
    if r.writes.is_empty() {
        out.push_str("None.\n");
    } else {
        out.push_str("| at | actor | action | product | before | after | reason |\n| --- | --- | --- | --- | --- | --- | --- |\n");
        for w in &r.writes {
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} |\n",
                tz.show(w.at),
                cell(&w.actor),
                w.action,
                w.product_id.as_deref().unwrap_or("-"),
                cell(w.before_value.as_deref().unwrap_or("-")),
                cell(w.after_value.as_deref().unwrap_or("-")),
                cell(&w.reason)
            ));
        }
    }
    out
}
