//! The incident report as Markdown: what `report --format markdown` prints and what the TUI's
//! `w` writes to a file, so the two never differ.

use crate::domain::zone::Zone;
use crate::ops::report::{AuditEntry, Report};

/// Free text (a name, a reason, an alert) made inert in a Markdown table: a `|` would split the
/// cell, a line break end the row, a `<` open an HTML tag that a renderer hides with what
/// follows (`<sku-1>` showed nothing), an `&` begin an entity, a backtick a code span (where
/// the other escapes would show). Backslash escapes keep the raw
/// text readable on a terminal, where the report is printed too.
fn cell(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' | '|' | '<' | '&' | '`' => {
                out.push('\\');
                out.push(c);
            }
            '\n' | '\r' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

fn opt(v: Option<i64>) -> String {
    v.map_or_else(|| "-".into(), |n| n.to_string())
}

/// A part of audit rows (fixes, console writes): who did what to which product, from what to
/// what, and why (`why` heads the last column).
fn audit_table(out: &mut String, title: &str, why: &str, rows: &[AuditEntry], tz: Zone) {
    out.push_str(&format!("\n## {title}\n\n"));
    if rows.is_empty() {
        out.push_str("None.\n");
        return;
    }
    out.push_str(&format!(
        "| at | actor | action | product | before | after | {why} |\n| --- | --- | --- | --- | --- | --- | --- |\n"
    ));
    for e in rows {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} |\n",
            tz.show(e.at),
            cell(&e.actor),
            e.action,
            e.product_id.as_deref().unwrap_or("-"),
            cell(e.before_value.as_deref().unwrap_or("-")),
            cell(e.after_value.as_deref().unwrap_or("-")),
            cell(&e.reason)
        ));
    }
}

/// The report as Markdown: a heading per part, a table per list.
pub fn markdown(r: &Report, tz: Zone) -> String {
    let mut out = format!("# Incident report: {} ({})\n\n", r.activity, cell(&r.name));
    out.push_str(&format!(
        "- window: {} .. {} (status {}, phase {})\n- generated: {}\n- period: {}\n- books now: {}\n\n",
        tz.show(r.starts_at),
        tz.show(r.ends_at),
        r.status,
        r.phase,
        tz.show(r.generated_at),
        r.since.map_or_else(|| "the whole activity".to_string(), |t| format!("since {}", tz.show(t))),
        match r.balanced {
            Some(true) => "balanced (every product ok)".to_string(),
            Some(false) => "NOT balanced (see the verdict)".to_string(),
            None => format!(
                "unknown: Redis unavailable ({})",
                cell(r.redis_unavailable.as_deref().unwrap_or("no answer"))
            ),
        }
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
    out.push_str("\n## Verdict now\n\n");
    let Some(verdict) = &r.verdict else {
        out.push_str(&format!(
            "Unavailable: Redis could not be read ({}). Sales above are the database's; `remaining` is unknown.\n",
            cell(r.redis_unavailable.as_deref().unwrap_or("no answer"))
        ));
        return rest(out, r, tz);
    };
    out.push_str("| product | state | drift | redis | expected | in flight | orphaned |\n| --- | --- | ---: | ---: | ---: | ---: | ---: |\n");
    for p in &verdict.products {
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
    if !verdict.alerts.is_empty() {
        out.push_str("\nAlerts:\n\n");
        for a in &verdict.alerts {
            out.push_str(&format!(
                "- [{}] {}: {}\n",
                a.severity.as_str(),
                a.kind.as_str(),
                cell(&a.message)
            ));
        }
    }
    rest(out, r, tz)
}

/// The database's parts, after the verdict: the compensation queue, the fixes, the writes.
fn rest(mut out: String, r: &Report, tz: Zone) -> String {
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
    audit_table(&mut out, "Fixes", "what", &r.fixes, tz);
    audit_table(&mut out, "Console writes", "reason", &r.writes, tz);
    out
}

#[cfg(test)]
mod tests {
    use super::cell;

    #[test]
    fn free_text_cannot_open_a_tag_split_a_cell_or_end_a_row() {
        assert_eq!(
            cell("price <sku-1> & <b>x</b> | C:\\tmp\nnext `<y>`"),
            "price \\<sku-1> \\& \\<b>x\\</b> \\| C:\\\\tmp next \\`\\<y>\\`"
        );
        assert_eq!(cell("plain text, 3 > 2"), "plain text, 3 > 2");
    }
}
