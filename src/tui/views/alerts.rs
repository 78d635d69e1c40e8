//! Alerts of the selected activity: newest first, with age, severity, kind and product.

use super::{age, empty_reason, error_line};
use crate::domain::alerts::Severity;
use crate::tui::app::{App, View};
use crate::tui::widgets::table::{self, TableSpec, h, hn, num};
use crate::tui::widgets::{bold, critical, dim, warning};
use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Row};

pub fn render(frame: &mut Frame, area: Rect, app: &App) {
    let rows = app.alert_rows();
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
