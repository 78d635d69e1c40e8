//! The detail behind a row (Enter or → on it): a product's keys, counters, events, orders,
//! alerts and the console's writes on it (read once, in the background); the whole text of an
//! alert, a compensation entry or an audit row; the whole error of a view whose poll failed.
//! Shown in a message that wraps and scrolls, so nothing is cut.

use super::action::Command;
use super::app::{App, Dialog};
use super::view::View;
use super::views::alerts::AlertLine;
use super::views::{age, drift};
use super::widgets::columns::grouped;
use crate::domain::alerts::Alert;
use crate::domain::stock::ProductStatus;
use crate::domain::zone::Zone;
use crate::error::Error;
use crate::ops::detail::{EVENTS_SHOWN, ProductDetail};

impl App {
    /// Enter (or →) on a table row: the product's detail on Stock, Reconcile and Alerts, the
    /// row's whole text on Compensation and Audit (and on an alert of no product).
    pub(super) fn open_detail(&mut self) -> Vec<Command> {
        let view = self.view;
        let product = match view {
            View::Stock | View::Reconcile => self.selected_product().map(|p| p.product.clone()),
            View::Alerts => {
                let lines = self.views.alerts.lines(&self.stock);
                let row = match self.cursor(view).row().and_then(|i| lines.get(i)) {
                    None => return self.no_detail(view, "alert"),
                    Some(AlertLine::Group { kind, .. }) => {
                        let kind = *kind;
                        self.views.alerts.toggle(kind);
                        return Vec::new();
                    }
                    Some(AlertLine::One { row, .. }) => row.clone(),
                };
                match &row.alert.product {
                    Some(p) => Some(p.clone()),
                    None => {
                        let (title, lines) = alert_text(row.alert, row.age_secs);
                        self.show_text(title, lines);
                        return Vec::new();
                    }
                }
            }
            View::Compensation => {
                let Some(c) = self.views.compensation.selected() else {
                    return self.no_detail(view, "entry");
                };
                let tz = self.config.tz;
                let lines = vec![
                    format!("request   {}", c.request_id),
                    format!("product   {}", c.product_id),
                    format!("user      {}", c.user_id),
                    format!("units     {}", grouped(c.quantity)),
                    format!("status    {}", c.status),
                    format!("created   {}", tz.show(c.created_at)),
                    format!(
                        "resolved  {}",
                        c.resolved_at.map_or_else(|| "-".into(), |t| tz.show(t))
                    ),
                    String::new(),
                    format!("reason: {}", c.reason),
                    format!("resolution: {}", c.resolution.as_deref().unwrap_or("-")),
                ];
                let title = format!("Compensation entry #{} of {}", c.id, c.activity_id);
                self.show_text(title, lines);
                return Vec::new();
            }
            View::Audit => {
                let rows = self.views.audit.rows();
                let Some(e) = self.cursor(view).row().and_then(|i| rows.get(i)) else {
                    return self.no_detail(view, "row");
                };
                let lines = audit_text(e, self.config.tz);
                let title = format!("Audit: {} on {}", e.action, e.activity_id);
                self.show_text(title, lines);
                return Vec::new();
            }
            View::Events => {
                let rows = self.views.events.rows();
                let Some(l) = self.cursor(view).row().and_then(|i| rows.get(i)) else {
                    return self.no_detail(view, "event");
                };
                let lines = vec![l.event.text(self.config.tz)];
                let title = format!("Event on {}", l.activity);
                self.show_text(title, lines);
                return Vec::new();
            }
            _ => return Vec::new(),
        };
        let Some(product) = product else {
            return self.no_detail(view, "product");
        };
        let Some(activity) = self.need_activity() else {
            return Vec::new();
        };
        let seq = self.seq();
        self.dialog = Some(Dialog::Working {
            title: format!("{product} of {activity}"),
            detail: "reading its keys, events, orders and writes; nothing is written".into(),
            seq,
            since: self.now,
            then: None,
        });
        vec![Command::ReadDetail {
            seq,
            activity,
            product,
        }]
    }

    /// Nothing under the cursor: the last poll's error in full when that is why, else why not.
    fn no_detail(&mut self, view: View, what: &str) -> Vec<Command> {
        if let Some(e) = self.view_error(view) {
            self.show_text("Last poll failed".into(), vec![e]);
        } else {
            let why = self.no_row(view, what);
            self.flash(why, false);
        }
        Vec::new()
    }

    /// The error of the poll behind a view, whole.
    fn view_error(&self, view: View) -> Option<String> {
        match view {
            View::Compensation => self.views.compensation.feed.error_text(),
            View::Audit => self.views.audit.feed.error_text(),
            _ => self.stock.feed.error_text(),
        }
        .map(str::to_string)
    }

    /// Opens a message that shows `lines` whole.
    fn show_text(&mut self, title: String, lines: Vec<String>) {
        self.dialog = Some(Dialog::Message {
            title,
            lines,
            error: false,
            scroll: 0,
        });
    }

    /// A product's detail has been read.
    pub(super) fn detail_read(&mut self, seq: u64, result: Result<Box<ProductDetail>, Error>) {
        let open = matches!(&self.dialog, Some(Dialog::Working { seq: s, .. }) if *s == seq);
        if !open {
            return; // closed meanwhile
        }
        let activity = self
            .activity
            .as_ref()
            .map_or_else(String::new, ToString::to_string);
        match result {
            Err(e) => {
                self.dialog = Some(Dialog::Message {
                    title: "Detail failed".into(),
                    lines: vec![e.message],
                    error: true,
                    scroll: 0,
                });
            }
            Ok(d) => {
                let status = self
                    .stock
                    .report()
                    .and_then(|r| r.products.iter().find(|p| p.product == d.product));
                let alerts: Vec<&Alert> = self
                    .stock
                    .report()
                    .map(|r| {
                        r.alerts
                            .iter()
                            .filter(|a| a.product.as_deref() == Some(d.product.as_str()))
                            .collect()
                    })
                    .unwrap_or_default();
                let lines = product_lines(&d, status, &alerts, self.config.tz);
                let title = format!("{} of {activity}", d.product);
                self.show_text(title, lines);
            }
        }
    }
}

/// The whole text of an alert.
fn alert_text(a: &Alert, age_secs: i64) -> (String, Vec<String>) {
    let mut lines = vec![
        format!("severity  {}", a.severity.as_str()),
        format!("kind      {}", a.kind.as_str()),
        format!("product   {}", a.product.as_deref().unwrap_or("-")),
        format!("node      {}", a.node.as_deref().unwrap_or("-")),
        format!("seen for  {}", age(age_secs)),
    ];
    if let Some(s) = a.age_secs {
        lines.push(format!("oldest    {}", age(s)));
    }
    lines.push(String::new());
    lines.push(a.message.clone());
    (format!("Alert {}", a.kind.as_str()), lines)
}

/// The whole text of an audit row.
fn audit_text(e: &crate::db::audit::AuditEntry, tz: Zone) -> Vec<String> {
    vec![
        format!("at        {}", tz.show(e.at)),
        format!("actor     {}", e.actor),
        format!("action    {}", e.action),
        format!("activity  {}", e.activity_id),
        format!("product   {}", e.product_id.as_deref().unwrap_or("-")),
        format!("before    {}", e.before_value.as_deref().unwrap_or("-")),
        format!("after     {}", e.after_value.as_deref().unwrap_or("-")),
        format!(
            "reason    {}",
            if e.reason.is_empty() { "-" } else { &e.reason }
        ),
        format!(
            "detail    {}",
            if e.detail.is_empty() { "-" } else { &e.detail }
        ),
    ]
}

/// A TTL as an age ("6d23h"), "no expiry" without one.
fn ttl(ms: Option<i64>) -> String {
    ms.map_or_else(|| "no expiry".into(), |ms| age(ms / 1000))
}

/// The lines of a product's detail: counters (from the last refresh), keys, stock and meta,
/// orders, alerts, events and the console's writes.
pub fn product_lines(
    d: &ProductDetail,
    status: Option<&ProductStatus>,
    alerts: &[&Alert],
    tz: Zone,
) -> Vec<String> {
    let mut out = vec![
        format!(
            "read at {} (a snapshot: Enter on the row again re-reads it)",
            tz.show(d.read_at)
        ),
        String::new(),
        "Counters (the last refresh)".to_string(),
    ];
    match status {
        Some(p) => {
            out.push(format!(
                "  state {}   initial {}   Redis {}   sold {}   in flight {}",
                p.state.as_str(),
                grouped(p.initial),
                p.redis_remaining.map_or_else(|| "-".into(), grouped),
                grouped(p.db_sold),
                grouped(p.in_flight),
            ));
            out.push(format!(
                "  expected {}   drift {}   orphaned {}   unledgered {}   unexplained {}   paused {}",
                grouped(p.expected_remaining),
                drift(p.drift),
                grouped(p.orphaned),
                grouped(p.unledgered),
                grouped(p.unexplained),
                if p.paused { "yes" } else { "no" },
            ));
        }
        None => out.push("  not in the last refresh".into()),
    }
    out.push(String::new());
    out.push("Keys (type, size, expiry, memory)".into());
    for k in &d.keys {
        out.push(format!(
            "  {:<7} {:<7} {:>12} {:>10} {:>10}",
            k.suffix,
            k.kind,
            k.size.map_or_else(|| "-".into(), grouped),
            ttl(k.ttl_ms),
            k.bytes
                .map_or_else(|| "-".into(), |b| format!("{} B", grouped(b))),
        ));
        // The name on a line of its own: a long prefix or id wraps there, not the figures.
        out.push(format!("          {}", k.name));
    }
    out.push(String::new());
    out.push(format!(
        "Stock key: {}",
        d.stock
            .as_deref()
            .map_or_else(|| "absent".into(), |s| format!("{s:?}"))
    ));
    out.push("Meta hash:".into());
    if d.meta.is_empty() {
        out.push("  absent".into());
    }
    for (f, v) in &d.meta {
        out.push(format!("  {f} = {v}"));
    }
    out.push(String::new());
    out.push(if d.orders_capped {
        format!(
            "Orders by status (the database; counted up to {} in all: at least)",
            grouped(crate::db::orders::STATUS_COUNT_CAP)
        )
    } else {
        "Orders by status (the database)".to_string()
    });
    if d.orders.is_empty() {
        out.push("  none".into());
    }
    for o in &d.orders {
        out.push(format!(
            "  {:<16} {:>10} order(s)",
            o.status,
            grouped(o.orders)
        ));
    }
    out.push(String::new());
    out.push(format!("Alerts ({})", alerts.len()));
    if alerts.is_empty() {
        out.push("  none".into());
    }
    for a in alerts {
        out.push(format!(
            "  {} {}: {}",
            a.severity.as_str(),
            a.kind.as_str(),
            a.message
        ));
    }
    out.push(String::new());
    out.push(format!("Newest events (at most {EVENTS_SHOWN})"));
    if d.events.is_empty() {
        out.push("  none".into());
    }
    for e in &d.events {
        out.push(format!(
            "  {:<20} {:<9} {:>8}  {}",
            e.id.to_string(),
            format!("{:?}", e.kind).to_lowercase(),
            grouped(e.quantity),
            e.request_id
        ));
    }
    if d.events_bad > 0 {
        out.push(format!("  {} entr(ies) did not parse", d.events_bad));
    }
    out.push(String::new());
    out.push("The console's last writes on it".into());
    if d.writes.is_empty() {
        out.push("  none".into());
    }
    for w in &d.writes {
        out.push(format!(
            "  {}  {}  {}  {} -> {}  {}",
            tz.show(w.at),
            w.actor,
            w.action,
            w.before_value.as_deref().unwrap_or("-"),
            w.after_value.as_deref().unwrap_or("-"),
            w.reason
        ));
    }
    out
}
