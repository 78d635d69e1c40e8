//! A table that builds only the rows it shows: a stock table of 10,000 products costs one
//! screen of rows per frame, not 10,000.

use super::columns::{self, Column, Kind};
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

impl<'a> TableSpec<'a> {
    /// The frame, the header and the widths.
    fn into_parts(self) -> (Framing<'a>, Vec<Cell<'a>>, Vec<Constraint>) {
        let framing = Framing {
            title: self.title,
            empty: self.empty,
            bottom: self.bottom,
        };
        (framing, self.header, self.widths)
    }
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
    let (framing, header, widths) = spec.into_parts();
    draw(frame, area, app, view, framing, len, |window| {
        let rows = window.map(row).collect();
        (Row::new(header), rows, widths, None)
    });
}

/// What a table of measured columns looks like (see [`super::columns`]).
pub struct ColumnsSpec<'a> {
    pub title: Line<'a>,
    pub columns: &'a [Column],
    pub empty: String,
    pub bottom: Option<Line<'a>>,
}

/// Draws `len` rows of measured columns: `row` gives a visible row's cell texts (one per
/// column) and its style; each column is as wide as its widest value in view, columns drop by
/// priority when the table is too wide, and a number never shows cut ([`columns::fit`]).
pub fn render_columns<'a>(
    frame: &mut Frame,
    area: Rect,
    app: &App,
    view: View,
    spec: ColumnsSpec<'a>,
    len: usize,
    row: impl Fn(usize) -> (Vec<Text>, Style),
) {
    let cols = spec.columns;
    let framing = Framing {
        title: spec.title,
        empty: spec.empty,
        bottom: spec.bottom,
    };
    // Borders take two columns, the highlight mark one.
    let room = area.width.saturating_sub(3);
    let skip = app.cursor(view).hscroll;
    draw(frame, area, app, view, framing, len, |window| {
        let m = measured(cols, window.map(row).collect(), room, skip);
        // How far `l` may go with these rows at this width (it clamps to what the last frame
        // showed, as the selection's scroll does).
        app.cursor(view).hscroll_max.set(Some(m.useful_skip));
        let (header, rows, widths) = (m.header, m.rows, m.widths);
        // Columns off screen, scrolled out or dropped for room (not those with nothing to
        // show): the keys that bring them.
        let hidden = m.off_screen;
        let hint = (hidden > 0).then(|| {
            Line::styled(format!(" h / l: {hidden} column(s) off screen "), dim()).right_aligned()
        });
        (header, rows, widths, hint)
    });
}

/// A cell's text, and its own style where it differs from its row's (a state in colour).
#[derive(Clone, Debug, Default)]
pub struct Text {
    pub text: String,
    pub style: Option<Style>,
}

impl From<String> for Text {
    fn from(text: String) -> Self {
        Text { text, style: None }
    }
}

impl From<&str> for Text {
    fn from(text: &str) -> Self {
        text.to_string().into()
    }
}

impl Text {
    /// `text` in `style`.
    pub fn styled(text: impl Into<String>, style: Style) -> Self {
        Text {
            text: text.into(),
            style: Some(style),
        }
    }
}

/// The header, the rows and the widths of a table of measured columns `room` cells wide:
/// each column as wide as its widest value, whole columns dropped by priority when it is too
/// wide, and a number never shown cut ([`columns::fit`]).
pub fn measured(
    cols: &[Column],
    texts: Vec<(Vec<Text>, Style)>,
    room: u16,
    skip: usize,
) -> Measured {
    let cells: Vec<Vec<String>> = texts
        .iter()
        .map(|(c, _)| c.iter().map(|t| t.text.clone()).collect())
        .collect();
    let columns::Layout {
        widths: w,
        useful_skip,
        off_screen,
    } = columns::layout(cols, &cells, room, skip);
    let shown = |texts: Vec<Text>| -> Vec<Cell<'static>> {
        cols.iter()
            .zip(&w)
            .zip(texts.into_iter().chain(std::iter::repeat(Text::default())))
            .filter_map(|((c, w), t)| {
                let w = (*w)?;
                let shown = columns::fit(c.kind, &t.text, w);
                let cell = match c.kind {
                    Kind::Number => Cell::from(Line::from(shown).right_aligned()),
                    _ => Cell::from(shown),
                };
                Some(match t.style {
                    Some(style) => cell.style(style),
                    None => cell,
                })
            })
            .collect()
    };
    let header = Row::new(shown(cols.iter().map(|c| Text::from(c.title)).collect()));
    let rows = texts
        .into_iter()
        .map(|(t, style)| Row::new(shown(t)).style(style))
        .collect();
    let widths = w.iter().flatten().map(|n| Constraint::Length(*n)).collect();
    Measured {
        header,
        rows,
        widths,
        useful_skip,
        off_screen,
    }
}

/// A table of measured columns, ready to draw.
pub struct Measured {
    pub header: Row<'static>,
    pub rows: Vec<Row<'static>>,
    pub widths: Vec<Constraint>,
    /// How many columns `l` may scroll out before nothing more comes into view.
    pub useful_skip: usize,
    /// Columns with something to show that are not shown (scrolled out or dropped for room).
    pub off_screen: usize,
}

/// The frame of a table: its titles and what it says when empty.
struct Framing<'a> {
    title: Line<'a>,
    empty: String,
    bottom: Option<Line<'a>>,
}

/// The block, the empty text, the window of visible rows and the highlight, shared by both
/// kinds of table; `body` builds the header, the visible rows and the widths for a window.
fn draw<'a>(
    frame: &mut Frame,
    area: Rect,
    app: &App,
    view: View,
    framing: Framing<'a>,
    len: usize,
    body: impl FnOnce(
        std::ops::Range<usize>,
    ) -> (
        Row<'a>,
        Vec<Row<'a>>,
        Vec<Constraint>,
        Option<Line<'static>>,
    ),
) {
    // The left title gives way to the filter's on the right, cut with its mark where they
    // would meet (a narrow terminal cut "kept while the console runs" to "r").
    let right = super::filter::title(app, view);
    let room = usize::from(area.width).saturating_sub(right.width() + 3);
    let left = super::fit_line(framing.title.spans, room);
    let mut block = Block::default()
        .borders(Borders::ALL)
        .title(left)
        .title_top(right.right_aligned());
    if let Some(b) = framing.bottom {
        block = block.title_bottom(b);
    }
    if len == 0 {
        let text = Paragraph::new(Line::styled(framing.empty, dim()))
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
    let (header, rows, widths, hint) = body(offset..end);
    if let Some(h) = hint {
        block = block.title_bottom(h);
    }
    let mut state = TableState::default();
    // A row that left the table highlights nothing (the title says so).
    state.select(cursor.row().map(|s| s.min(len - 1) - offset));
    let header = header.style(bold().add_modifier(Modifier::UNDERLINED));
    let table = Table::new(rows, widths)
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
