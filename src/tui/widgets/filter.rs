//! The filter of the current table: shown in the table's title while typed or set, with the
//! terminal cursor at its end while the operator types.

use super::{bold, dim};
use crate::tui::app::App;
use crate::tui::view::View;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};

/// The right-hand title of a table: "/text" when filtered, "/ filter" as a hint otherwise;
/// first, when the row the operator chose left the table, which one it was.
pub fn title(app: &App, view: View) -> Line<'static> {
    let mut line = filter_title(app, view);
    let c = app.cursor(view);
    if let (Some(a), true) = (&c.anchor, c.lost) {
        line.spans.insert(
            0,
            Span::styled(
                format!(" {} left the table: ↑/↓ picks a row ", super::clip(a, 24)),
                Style::default().fg(Color::Yellow),
            ),
        );
    }
    line
}

fn filter_title(app: &App, view: View) -> Line<'static> {
    let f = app.filter(view);
    if app.filtering && app.view == view {
        Line::from(vec![
            Span::styled(" /", bold()),
            Span::styled(
                format!("{}_ ", super::clip(f, 40)),
                Style::default().fg(Color::Cyan),
            ),
        ])
    } else if f.is_empty() {
        Line::from(Span::styled(" / filter ", dim()))
    } else {
        Line::from(vec![
            Span::styled(" /", bold()),
            Span::styled(
                format!("{} ", super::clip(f, 40)),
                Style::default().fg(Color::Cyan),
            ),
            Span::styled("(Esc clears) ", dim()),
        ])
    }
}

/// The footer's prompt while typing a filter.
pub fn prompt(frame: &mut Frame, area: Rect, app: &App) {
    let f = app.filter(app.view);
    let line = Line::from(vec![
        Span::styled("filter /", bold()),
        Span::styled(super::clip(f, 60), Style::default().fg(Color::Cyan)),
        Span::styled("   Enter keep   Esc clear", dim()),
    ]);
    frame.render_widget(line, area);
}
