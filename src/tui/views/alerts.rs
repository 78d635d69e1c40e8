//! Alerts of the selected activity: newest first, with age, severity, kind and product. Alerts
//! of one kind on many products (Redis restarted empty: 2,000 `missing`) fold into one line
//! with their count; Enter lists them and folds them again.

use super::ViewKey;
use super::{age, empty_reason, error_line};
use crate::domain::alerts::Severity;
use crate::domain::alerts::{Alert, AlertKind};
use crate::tui::app::App;
use crate::tui::cursor::{TableCursor, matches};
use crate::tui::selected::StockData;
use crate::tui::view::View;
use crate::tui::widgets::columns::Column;
use crate::tui::widgets::table::{self, ColumnsSpec, Text};
use crate::tui::widgets::{bold, critical, dim, warning};
use chrono::{DateTime, Utc};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use std::collections::{BTreeSet, HashMap};

/// The Alerts view: the selected activity's alerts, newest first.
#[derive(Debug, Default)]
pub struct AlertsView {
    pub cursor: TableCursor,
    /// The kinds whose folded line the operator opened.
    pub open: BTreeSet<&'static str>,
}

/// Alerts of one kind on at least this many products fold into one line.
pub const FOLD_AT: usize = 3;

/// A line of the Alerts view.
#[derive(Clone, Debug)]
pub enum AlertLine<'a> {
    /// One alert; `member` when it is listed under its open group.
    One { row: AlertRow<'a>, member: bool },
    /// The alerts of one kind on many products, newest first.
    Group {
        kind: AlertKind,
        severity: Severity,
        rows: Vec<AlertRow<'a>>,
        open: bool,
    },
}

impl AlertLine<'_> {
    /// What the line shows, as a key the cursor can follow when alerts arrive above it or
    /// leave: the kind and its subject (product, or node), or the kind of a folded group.
    pub fn key(&self) -> String {
        match self {
            AlertLine::Group { kind, .. } => format!("the {} group", kind.as_str()),
            // A member keeps the key it had standing alone: the cursor goes with it into its
            // group when the kind folds and the group is open (closed, it stays where it was).
            AlertLine::One { row, .. } => {
                let a = row.alert;
                let subject = a.product.as_deref().or(a.node.as_deref());
                match subject {
                    Some(s) => format!("{} on {s}", a.kind.as_str()),
                    None => a.kind.as_str().to_string(),
                }
            }
        }
    }
}

/// One row of the Alerts view.
#[derive(Clone, Debug)]
pub struct AlertRow<'a> {
    pub alert: &'a Alert,
    pub first_seen: DateTime<Utc>,
    pub age_secs: i64,
}

impl AlertsView {
    /// This view's own keys for the footer: (key, what, writes).
    pub const KEYS: &'static [ViewKey] = &[];

    /// The rows: newest first, then the most severe.
    pub fn rows<'a>(&self, stock: &'a StockData) -> Vec<AlertRow<'a>> {
        let Some(report) = stock.report() else {
            return Vec::new();
        };
        let f = self.cursor.needle();
        let mut rows: Vec<AlertRow<'a>> = report
            .alerts
            .iter()
            .filter(|a| {
                matches(&a.message, &f)
                    || a.product.as_deref().is_some_and(|p| {
                        matches(p, &f) || stock.alert_names.get(p).is_some_and(|n| matches(n, &f))
                    })
                    || matches(a.kind.as_str(), &f)
            })
            .map(|a| {
                let key = (a.kind, a.product.clone(), a.node.clone());
                let first_seen = stock
                    .alert_seen
                    .get(&key)
                    .copied()
                    .unwrap_or(report.taken_at);
                AlertRow {
                    alert: a,
                    first_seen,
                    age_secs: (report.taken_at - first_seen).num_seconds().max(0),
                }
            })
            .collect();
        rows.sort_by(|a, b| {
            b.first_seen
                .cmp(&a.first_seen)
                .then(b.alert.severity.cmp(&a.alert.severity))
                .then(a.alert.product.cmp(&b.alert.product))
        });
        rows
    }

    /// The lines shown: the rows, those of a kind on [`FOLD_AT`] products or more folded into
    /// one line where the kind's newest alert stands (and listed under it when open).
    pub fn lines<'a>(&self, stock: &'a StockData) -> Vec<AlertLine<'a>> {
        let rows = self.rows(stock);
        let mut per_kind: HashMap<AlertKind, Vec<AlertRow<'a>>> = HashMap::new();
        for r in rows.iter().filter(|r| r.alert.product.is_some()) {
            per_kind.entry(r.alert.kind).or_default().push(r.clone());
        }
        per_kind.retain(|_, v| v.len() >= FOLD_AT);
        let folded: Vec<AlertKind> = per_kind.keys().copied().collect();
        let mut out = Vec::new();
        for r in rows {
            let kind = r.alert.kind;
            if r.alert.product.is_none() || !folded.contains(&kind) {
                out.push(AlertLine::One {
                    row: r,
                    member: false,
                });
                continue;
            }
            // The group stands where its kind's newest alert does; all of its kind are in it.
            let Some(mut members) = per_kind.remove(&kind) else {
                continue;
            };
            // Inside the group the most severe first, then the longest standing: a critical
            // one among five drifts is named on the folded line, never behind its "...".
            members.sort_by(|a, b| {
                b.alert
                    .severity
                    .cmp(&a.alert.severity)
                    .then(a.first_seen.cmp(&b.first_seen))
                    .then(a.alert.product.cmp(&b.alert.product))
            });
            let open = self.open.contains(kind.as_str());
            let severity = members
                .iter()
                .map(|m| m.alert.severity)
                .max()
                .unwrap_or(Severity::Info);
            out.push(AlertLine::Group {
                kind,
                severity,
                rows: members.clone(),
                open,
            });
            if open {
                out.extend(
                    members
                        .into_iter()
                        .map(|row| AlertLine::One { row, member: true }),
                );
            }
        }
        out
    }

    /// Opens or folds the group of `kind`.
    pub fn toggle(&mut self, kind: AlertKind) {
        if !self.open.remove(kind.as_str()) {
            self.open.insert(kind.as_str());
        }
    }
}

fn severity_text(s: Severity) -> (&'static str, ratatui::style::Style) {
    match s {
        Severity::Critical => ("critical", critical()),
        Severity::Warning => ("warning", warning()),
        Severity::Info => ("info", dim()),
    }
}

/// The Alerts table's columns: the kind, the subject and the message stay; on a narrow
/// terminal the name goes first, then the severity (the row's colour says it), then the age;
/// the message takes the rest of the width and is cut with `…`, never silently.
const COLUMNS: [Column; 6] = [
    Column::number("age", 3),
    Column::text("severity", (8, 8), 4),
    Column::text("kind", (4, 22), 0),
    Column::text("product/node", (6, 24), 0),
    Column::text("name", (4, 20), 5),
    Column::rest("message", 12),
];

pub fn render(frame: &mut Frame, area: Rect, app: &App) {
    let lines = app.views.alerts.lines(&app.stock);
    let count = app.stock.report().map_or(0, |r| r.alerts.len());
    let name_of = |product: Option<&str>| -> String {
        product
            .and_then(|p| app.stock.alert_names.get(p))
            .cloned()
            .unwrap_or_default()
    };
    let title = Line::from(vec![
        Span::styled(" Alerts ", bold()),
        Span::styled(
            format!("{count} newest first, {} line(s) ", lines.len()),
            dim(),
        ),
    ]);
    let spec = ColumnsSpec {
        title,
        columns: &COLUMNS,
        empty: empty_reason(app, &app.stock.feed, "No alerts: every product is ok."),
        bottom: error_line(&app.stock.feed),
    };
    table::render_columns(frame, area, app, View::Alerts, spec, lines.len(), |i| {
        match &lines[i] {
            AlertLine::Group {
                kind,
                severity,
                rows,
                open,
            } => {
                let (severity, style) = severity_text(*severity);
                let names: Vec<&str> = rows
                    .iter()
                    .take(3)
                    .filter_map(|r| r.alert.product.as_deref())
                    .collect();
                let more = if rows.len() > 3 { ", ..." } else { "" };
                let hint = if *open {
                    "Enter folds them"
                } else {
                    "Enter lists them"
                };
                let cells = vec![
                    // How long the group has stood: its oldest member's age.
                    age(rows.iter().map(|r| r.age_secs).max().unwrap_or(0)),
                    severity.to_string(),
                    format!("{} x{}", kind.as_str(), rows.len()),
                    format!("{} products", rows.len()),
                    String::new(),
                    format!("{}{more} ({hint})", names.join(", ")),
                ];
                (cells.into_iter().map(Text::from).collect(), style)
            }
            AlertLine::One { row, member } => {
                let a = row.alert;
                let (severity, style) = severity_text(a.severity);
                let subject = a
                    .product
                    .clone()
                    .or_else(|| a.node.clone())
                    .unwrap_or_else(|| "-".into());
                let subject = if *member {
                    format!("  {subject}")
                } else {
                    subject
                };
                let cells = vec![
                    age(row.age_secs),
                    severity.to_string(),
                    a.kind.as_str().to_string(),
                    subject,
                    name_of(a.product.as_deref()),
                    a.message.clone(),
                ];
                (cells.into_iter().map(Text::from).collect(), style)
            }
        }
    });
}
