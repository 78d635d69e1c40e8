//! A table that builds only the rows it shows: a stock table of 10,000 products costs one
//! screen of rows per frame, not 10,000.

use super::{bold, dim};
use crate::tui::app::App;
use crate::tui::view::View;
use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table, TableState, Wrap};

/// What a view's table looks like.
pub struct TableSpec<'a> {
    /// Left title (the view, its scope and counts).
    pub title: Line<'a>,
    /// Column titles; [`h`] for text, [`hn`] for numbers (right-aligned like their cells).
    pub header: Vec<Cell<'a>>,
    pub widths: Vec<Constraint>,
    /// Shown instead of rows when there are none (why there are none, what to do).
    pub empty: String,
    /// A line under the table (an error of the last poll, a hint).
    pub bottom: Option<Line<'a>>,
}

/// Draws `len` rows in `area`, building only the visible ones with `row`.
pub fn render<'a>(
    frame: &mut Frame,
    area: Rect,
    app: &App,
    view: View,
    spec: TableSpec<'a>,
    len: usize,
    row: impl Fn(usize) -> Row<'a>,
) {
    let mut block = Block::default()
        .borders(Borders::ALL)
        .title(spec.title)
        .title_top(super::filter::title(app, view).right_aligned());
    if let Some(b) = spec.bottom {
        block = block.title_bottom(b);
    }
    if len == 0 {
        let text = Paragraph::new(Line::styled(spec.empty, dim()))
            .wrap(Wrap { trim: true })
            .block(block);
        frame.render_widget(text, area);
        return;
    }
    // Borders take two rows, the header one.
    let height = usize::from(area.height.saturating_sub(3));
    let cursor = app.cursor(view);
    let offset = cursor.window(len, height);
    let end = len.min(offset + height);
    let rows: Vec<Row<'a>> = (offset..end).map(row).collect();
    let mut state = TableState::default();
    // A row that left the table highlights nothing (the title says so).
    state.select(cursor.row().map(|s| s.min(len - 1) - offset));
    let header = Row::new(spec.header).style(bold().add_modifier(Modifier::UNDERLINED));
    let table = Table::new(rows, spec.widths)
        .header(header)
        .block(block)
        .column_spacing(1)
        .row_highlight_style(Style::default().add_modifier(Modifier::REVERSED))
        .highlight_symbol(">");
    frame.render_stateful_widget(table, area, &mut state);
}

/// A text column title.
pub fn h(title: &str) -> Cell<'static> {
    Cell::from(title.to_string())
}

/// A number column title, right-aligned.
pub fn hn(title: &str) -> Cell<'static> {
    num(title)
}

/// A right-aligned cell, for figures.
pub fn num<'a>(text: impl Into<String>) -> Cell<'a> {
    Cell::from(Line::from(text.into()).right_aligned())
}
