//! The compensation queue of the selected activity: deductions whose outcome is unknown, with
//! age and status. `r` resolves the highlighted entry, `R` every pending one (after a yes).

use super::ViewKey;
use super::{age, empty_reason, error_line};
use crate::db::compensation::Compensation;
use crate::tui::action::Action;
use crate::tui::app::App;
use crate::tui::cursor::{TableCursor, matches};
use crate::tui::feed::Feed;
use crate::tui::view::View;
use crate::tui::widgets::columns::{Column, grouped};
use crate::tui::widgets::table::{self, ColumnsSpec, Text};
use crate::tui::widgets::{bold, dim, warning};
use crossterm::event::KeyCode;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};

/// The Compensation view: the queue of the selected activity.
#[derive(Debug, Default)]
pub struct CompensationView {
    pub cursor: TableCursor,
    pub feed: Feed<Vec<Compensation>>,
}

impl CompensationView {
    /// This view's own keys for the footer: (key, what, writes).
    pub const KEYS: &'static [ViewKey] = &[("r", "resolve", true), ("R", "resolve all", true)];

    /// The action of one of this view's keys.
    pub fn key(code: KeyCode) -> Option<Action> {
        match code {
            KeyCode::Char('r') => Some(Action::ResolveSelected),
            KeyCode::Char('R') => Some(Action::ResolveAll),
            _ => None,
        }
    }

    /// The rows: pending first (oldest first), then resolved (filter applied).
    pub fn rows(&self) -> Vec<&Compensation> {
        let f = self.cursor.needle();
        self.feed
            .data
            .iter()
            .flatten()
            .filter(|c| {
                matches(&c.request_id, &f)
                    || matches(&c.product_id, &f)
                    || matches(&c.status, &f)
                    || matches(&c.user_id, &f)
            })
            .collect()
    }

    /// Entries still waiting for a decision.
    pub fn pending_count(&self) -> usize {
        self.feed
            .data
            .iter()
            .flatten()
            .filter(|c| c.is_pending())
            .count()
    }

    /// The entry highlighted, if any.
    pub fn selected(&self) -> Option<&Compensation> {
        self.rows().get(self.cursor.row()?).copied()
    }
}

pub fn render(frame: &mut Frame, area: Rect, app: &App) {
    let rows = app.views.compensation.rows();
    let at = app.views.compensation.feed.taken_at;
    // The queue's count is the database's (the status summary's), not the feed's: the feed
    // lists the first 1,000 entries only.
    let pending = match app.stock.report().map(|r| r.compensation) {
        Some(q) => crate::render::queue_count(q.pending, q.more),
        None => grouped(i64::try_from(app.views.compensation.pending_count()).unwrap_or(0)),
    };
    let title = Line::from(vec![
        Span::styled(" Compensation ", bold()),
        Span::styled(format!("{pending} pending, {} shown ", rows.len()), dim()),
    ]);
    let spec = ColumnsSpec {
        title,
        columns: &COLUMNS,
        empty: empty_reason(app, &app.views.compensation.feed, "The queue is empty."),
        bottom: error_line(&app.views.compensation.feed),
    };
    table::render_columns(
        frame,
        area,
        app,
        View::Compensation,
        spec,
        rows.len(),
        |i| {
            let c = rows[i];
            let since = at.map_or(Some(0), |t| c.age_secs(t));
            let why = match &c.resolution {
                Some(r) => r.clone(),
                None => c.reason.clone(),
            };
            let style = if c.is_pending() {
                warning()
            } else {
                Style::default()
            };
            let cells = vec![
                Text::from(c.request_id.clone()),
                Text::from(c.product_id.clone()),
                Text::from(c.user_id.clone()),
                Text::from(grouped(c.quantity)),
                Text::from(c.status.clone()),
                Text::from(since.map_or_else(|| "unknown".to_string(), age)),
                Text::from(why),
            ];
            (cells, style)
        },
    );
}

/// The queue's columns: the request, its units, status and age stay; the reason is cut last
/// (Enter shows it whole).
const COLUMNS: [Column; 7] = [
    Column::text("request", (10, 36), 0),
    Column::text("product", (7, 20), 3),
    Column::text("user", (4, 16), 4),
    Column::number("qty", 0),
    Column::text("status", (6, 11), 0),
    Column::number("age", 2),
    Column::text("reason / resolution", (16, 120), 1),
];
