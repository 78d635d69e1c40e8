//! The compensation queue of the selected activity: deductions whose outcome is unknown, with
//! age and status. `r` resolves the highlighted entry, `R` every pending one (after a yes).

use super::{age, empty_reason, error_line};
use crate::db::compensation::PENDING;
use crate::tui::app::{App, View};
use crate::tui::widgets::table::{self, TableSpec, h, hn, num};
use crate::tui::widgets::{bold, dim, warning};
use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Row};

pub fn render(frame: &mut Frame, area: Rect, app: &App) {
    let rows = app.compensation_rows();
    let at = app.compensation.taken_at;
    let pending = app
        .compensation
        .data
        .iter()
        .flatten()
        .filter(|c| c.status == PENDING)
        .count();
    let title = Line::from(vec![
        Span::styled(" Compensation ", bold()),
        Span::styled(format!("{pending} pending, {} shown ", rows.len()), dim()),
    ]);
    let spec = TableSpec {
        title,
        header: vec![
            h("request"),
            h("product"),
            h("user"),
            hn("qty"),
            h("status"),
            hn("age"),
            h("reason / resolution"),
        ],
        widths: vec![
            Constraint::Min(14),
            Constraint::Length(14),
            Constraint::Length(10),
            Constraint::Length(4),
            Constraint::Length(11),
            Constraint::Length(7),
            Constraint::Min(16),
        ],
        empty: empty_reason(app, &app.compensation, "The queue is empty."),
        bottom: error_line(&app.compensation),
    };
    table::render(
        frame,
        area,
        app,
        View::Compensation,
        spec,
        rows.len(),
        |i| {
            let c = rows[i];
            let since = at.map_or(0, |t| (t - c.created_at).num_seconds());
            let why = match &c.resolution {
                Some(r) => r.clone(),
                None => c.reason.clone(),
            };
            let style = if c.status == PENDING {
                warning()
            } else {
                Style::default()
            };
            Row::new(vec![
                Cell::from(c.request_id.clone()),
                Cell::from(c.product_id.clone()),
                Cell::from(c.user_id.clone()),
                num(c.quantity.to_string()),
                Cell::from(c.status.clone()),
                num(age(since)),
                Cell::from(why),
            ])
            .style(style)
        },
    );
}
