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
use crate::tui::widgets::columns::{Kind, fit};
use crate::tui::widgets::table::{self, TableSpec, h, hn, num};
use crate::tui::widgets::{bold, critical, dim, warning};
use chrono::{DateTime, Utc};
use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Row};
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

pub fn render(frame: &mut Frame, area: Rect, app: &App) {
    let lines = app.views.alerts.lines(&app.stock);
    let count = app.stock.report().map_or(0, |r| r.alerts.len());
    // The name column only when a product has a name, as wide as the widest (display width:
    // Chinese names take two columns a character), at most 20.
    let name_width = app
        .stock
        .alert_names
        .values()
        .map(|n| unicode_width::UnicodeWidthStr::width(n.as_str()))
        .max()
        .map_or(0, |w| u16::try_from(w.clamp(4, 20)).unwrap_or(20));
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
    let named = name_width > 0;
    let mut header = vec![hn("age"), h("severity"), h("kind"), h("product/node")];
    let mut widths = vec![
        Constraint::Length(6),
        Constraint::Length(8),
        Constraint::Length(20),
        Constraint::Length(14),
    ];
    if named {
        header.push(h("name"));
        widths.push(Constraint::Length(name_width));
    }
    header.push(h("message"));
    widths.push(Constraint::Min(20));
    // The name cell, when the column is shown.
    let with_name = |mut cells: Vec<Cell<'static>>, name: String| {
        if named {
            cells.insert(4, Cell::from(name));
        }
        Row::new(cells)
    };
    let spec = TableSpec {
        title,
        header,
        widths,
        empty: empty_reason(app, &app.stock.feed, "No alerts: every product is ok."),
        bottom: error_line(&app.stock.feed),
    };
    table::render(
        frame,
        area,
        app,
        View::Alerts,
        spec,
        lines.len(),
        |i| match &lines[i] {
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
                with_name(
                    vec![
                        // How long the group has stood: its oldest member's age.
                        num(age(rows.iter().map(|r| r.age_secs).max().unwrap_or(0))),
                        Cell::from(severity),
                        Cell::from(format!("{} x{}", kind.as_str(), rows.len())),
                        Cell::from(format!("{} products", rows.len())),
                        Cell::from(format!("{}{more} ({hint})", names.join(", "))),
                    ],
                    String::new(),
                )
                .style(style)
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
                with_name(
                    vec![
                        num(age(row.age_secs)),
                        Cell::from(severity),
                        Cell::from(a.kind.as_str()),
                        Cell::from(subject),
                        Cell::from(a.message.clone()),
                    ],
                    fit(
                        Kind::Text { min: 4, max: 20 },
                        &name_of(a.product.as_deref()),
                        name_width,
                    ),
                )
                .style(style)
            }
        },
    );
}
