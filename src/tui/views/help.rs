//! Help (`?`): every key binding, and what the header's marks mean.

use crate::tui::app::App;
use crate::tui::keys::BINDINGS;
use crate::tui::widgets::{bold, dim};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Row, Table};

pub fn render(frame: &mut Frame, area: Rect, app: &App) {
    let [keys_area, notes_area] =
        Layout::vertical([Constraint::Min(5), Constraint::Length(3)]).areas(area);
    let rows: Vec<Row> = BINDINGS
        .iter()
        .map(|(k, what, where_)| {
            Row::new(vec![
                Span::styled(*k, Style::default().fg(Color::Cyan)),
                Span::raw(*what),
                Span::styled(*where_, dim()),
            ])
        })
        .collect();
    let table = Table::new(
        rows,
        [
            Constraint::Length(16),
            Constraint::Min(30),
            Constraint::Length(18),
        ],
    )
    .header(Row::new(vec!["key", "does", "where"]).style(bold()))
    .block(
        Block::default()
            .borders(Borders::ALL)
            .title(Span::styled(" Help: keys (Esc or ? goes back) ", bold())),
    );
    frame.render_widget(table, keys_area);

    let stale = app.config.stale_after().as_secs();
    let notes = vec![
        Line::styled(
            format!(
                " Data refreshes every {:.1}s in the background; \"stale Ns\": nothing fresh for over {stale}s.",
                app.config.refresh.as_secs_f64()
            ),
            dim(),
        ),
        Line::styled(
            " Every write asks first; activity-wide writes ask for the activity id.",
            dim(),
        ),
        Line::styled(
            if app.config.read_only {
                " READ-ONLY: this session refuses every write; their keys are hidden."
            } else {
                " --read-only starts a session that refuses every write."
            },
            dim(),
        ),
    ];
    frame.render_widget(Paragraph::new(notes), notes_area);
}
