//! Alerts of the selected activity: newest first, with age, severity, kind and product.

use super::ViewKey;
use super::{age, empty_reason, error_line};
use crate::domain::alerts::Alert;
use crate::domain::alerts::Severity;
use crate::tui::app::App;
use crate::tui::cursor::{TableCursor, matches};
use crate::tui::selected::StockData;
use crate::tui::view::View;
use crate::tui::widgets::table::{self, TableSpec, h, hn, num};
use crate::tui::widgets::{bold, critical, dim, warning};
use chrono::{DateTime, Utc};
use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Row};

/// The Alerts view: the selected activity's alerts, newest first.
#[derive(Debug, Default)]
pub struct AlertsView {
    pub cursor: TableCursor,
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
                    || a.product.as_deref().is_some_and(|p| matches(p, &f))
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
}

pub fn render(frame: &mut Frame, area: Rect, app: &App) {
    let rows = app.views.alerts.rows(&app.stock);
    let title = Line::from(vec![
        Span::styled(" Alerts ", bold()),
        Span::styled(format!("{} newest first ", rows.len()), dim()),
    ]);
    let spec = TableSpec {
        title,
        header: vec![
            hn("age"),
            h("severity"),
            h("kind"),
            h("product/node"),
            h("message"),
        ],
        widths: vec![
            Constraint::Length(6),
            Constraint::Length(8),
            Constraint::Length(20),
            Constraint::Length(12),
            Constraint::Min(20),
        ],
        empty: empty_reason(app, &app.stock.feed, "No alerts: every product is ok."),
        bottom: error_line(&app.stock.feed),
    };
    table::render(frame, area, app, View::Alerts, spec, rows.len(), |i| {
        let r = &rows[i];
        let a = r.alert;
        let (severity, style) = match a.severity {
            Severity::Critical => ("critical", critical()),
            Severity::Warning => ("warning", warning()),
            Severity::Info => ("info", dim()),
        };
        let subject = a
            .product
            .clone()
            .or_else(|| a.node.clone())
            .unwrap_or_else(|| "-".into());
        Row::new(vec![
            num(age(r.age_secs)),
            Cell::from(severity),
            Cell::from(a.kind.as_str()),
            Cell::from(subject),
            Cell::from(a.message.clone()),
        ])
        .style(style)
    });
}
