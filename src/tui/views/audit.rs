//! Audit: the console's own writes (fix, preheat, resolve, import, cleanup), newest first,
//! with who, what, before and after.

use super::ViewKey;
use super::error_line;
use crate::db::audit::AuditEntry;
use crate::tui::app::App;
use crate::tui::cursor::{TableCursor, matches};
use crate::tui::feed::Feed;
use crate::tui::view::View;
use crate::tui::widgets::columns::Column;
use crate::tui::widgets::table::{self, ColumnsSpec, Text};
use crate::tui::widgets::{bold, dim};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};

/// The Audit view: the console's writes (every operator, every activity), newest first.
#[derive(Debug, Default)]
pub struct AuditView {
    pub cursor: TableCursor,
    pub feed: Feed<Vec<AuditEntry>>,
}

impl AuditView {
    /// This view's own keys for the footer: (key, what, writes).
    pub const KEYS: &'static [ViewKey] = &[];

    /// The rows, newest first (filter applied).
    pub fn rows(&self) -> Vec<&AuditEntry> {
        let f = self.cursor.needle();
        self.feed
            .data
            .iter()
            .flatten()
            .filter(|e| {
                matches(&e.action, &f)
                    || matches(&e.actor, &f)
                    || matches(&e.activity_id, &f)
                    || e.product_id.as_deref().is_some_and(|p| matches(p, &f))
            })
            .collect()
    }
}

pub fn render(frame: &mut Frame, area: Rect, app: &App) {
    let rows = app.views.audit.rows();
    let title = Line::from(vec![
        Span::styled(" Audit ", bold()),
        Span::styled(format!("{} newest first ", rows.len()), dim()),
    ]);
    let empty = match (
        &app.views.audit.feed.data,
        app.views.audit.feed.error_text(),
    ) {
        (None, Some(e)) => format!("No data: {e}. Retrying every refresh."),
        (None, None) => "Waiting for the database ...".into(),
        (Some(_), _) => "No writes recorded.".into(),
    };
    let spec = ColumnsSpec {
        title,
        columns: &COLUMNS,
        empty,
        bottom: error_line(&app.views.audit.feed),
    };
    table::render_columns(frame, area, app, View::Audit, spec, rows.len(), |i| {
        let e = rows[i];
        let change = match (&e.before_value, &e.after_value) {
            (None, None) => "-".to_string(),
            (b, a) => format!(
                "{} -> {}",
                b.as_deref().unwrap_or("-"),
                a.as_deref().unwrap_or("-")
            ),
        };
        let cells = vec![
            app.config.tz.at(e.at).format("%m-%d %H:%M:%S").to_string(),
            e.actor.clone(),
            e.action.clone(),
            e.activity_id.clone(),
            e.product_id.clone().unwrap_or_else(|| "-".into()),
            change,
            e.reason.clone(),
        ];
        (
            cells.into_iter().map(Text::from).collect(),
            ratatui::style::Style::default(),
        )
    });
}

/// The audit's columns: when, what and the change stay; a long value is cut with `…` and
/// Enter shows the row whole.
const COLUMNS: [Column; 7] = [
    Column::text("at", (14, 14), 0),
    Column::text("actor", (5, 16), 3),
    Column::text("action", (6, 22), 0),
    Column::text("activity", (8, 20), 4),
    Column::text("product", (7, 16), 2),
    // 17: a state change (`selling -> paused`) whole at the narrowest.
    Column::text("before -> after", (17, 40), 0),
    Column::text("reason", (6, 80), 1),
];
