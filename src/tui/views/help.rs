//! Help (`?`): every key binding, and what the header's marks mean. The bindings and the notes
//! wrap to the terminal's width and scroll (Up / Down / PgUp / PgDn), so every one can be read
//! at 80x24.

use crate::tui::app::App;
use crate::tui::keys::BINDINGS;
use crate::tui::widgets::{bold, dim, pager};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};
use unicode_width::UnicodeWidthStr;

/// The columns of the key and the "where" columns.
fn column_widths() -> (usize, usize) {
    let key_w = BINDINGS.iter().map(|b| b.0.width()).max().unwrap_or(0);
    let where_w = BINDINGS.iter().map(|b| b.2.width()).max().unwrap_or(0);
    (key_w, where_w)
}

/// The column header of the bindings.
fn header(width: u16) -> Line<'static> {
    let (key_w, _) = column_widths();
    let does_w = does_width(width);
    Line::styled(
        format!("{:<key_w$} {:<does_w$} where", "key", "does"),
        bold(),
    )
}

/// The columns of "does" in a box `width` columns wide.
fn does_width(width: u16) -> usize {
    let (key_w, where_w) = column_widths();
    // Borders, and a space between columns.
    usize::from(width)
        .saturating_sub(2 + key_w + where_w + 2)
        .max(20)
}

/// The notes under the bindings.
fn notes(app: &App) -> Vec<String> {
    let stale = app.config.stale_after().as_secs();
    vec![
        format!(
            "Data refreshes every {:.1}s in the background; \"stale Ns\": nothing fresh for over {stale}s.",
            app.config.refresh.as_secs_f64()
        ),
        "Every write asks first; activity-wide writes ask for the activity id.".into(),
        if app.config.read_only {
            "READ-ONLY: this session refuses every write; their keys are hidden.".into()
        } else {
            "--read-only starts a session that refuses every write.".into()
        },
    ]
}

/// Every line of the help under its column header, wrapped to a box `width` columns wide:
/// each binding (what it does wrapped in its column), then the notes.
pub fn lines(app: &App, width: u16) -> Vec<Line<'static>> {
    let (key_w, _) = column_widths();
    let does_w = does_width(width);
    let mut out = Vec::new();
    for (k, does, where_) in BINDINGS {
        for (i, part) in pager::wrap(does, does_w).into_iter().enumerate() {
            let (k, w) = if i == 0 { (*k, *where_) } else { ("", "") };
            out.push(Line::from(vec![
                Span::styled(format!("{k:<key_w$}"), Style::default().fg(Color::Cyan)),
                Span::raw(" "),
                Span::raw(format!("{part:<does_w$}")),
                Span::raw(" "),
                Span::styled(w.to_string(), dim()),
            ]));
        }
    }
    out.push(Line::raw(""));
    let text_w = usize::from(width.saturating_sub(2)).max(20);
    for note in notes(app) {
        out.extend(
            pager::wrap(&note, text_w)
                .into_iter()
                .map(|l| Line::styled(l, dim())),
        );
    }
    out
}

/// Rows of the help shown at once on a screen `height` rows high: the header and the footer
/// of the screen, the box's borders and the column header take the rest, and a position line
/// when it does not all fit.
pub fn visible(height: u16, total: usize) -> usize {
    let room = usize::from(height.saturating_sub(2 + 3 + 2 + 1)).max(2);
    if total <= room { room } else { room - 1 }
}

pub fn render(frame: &mut Frame, area: Rect, app: &App) {
    let body = lines(app, area.width);
    let room = usize::from(area.height.saturating_sub(3)).max(2);
    let rows = if body.len() <= room { room } else { room - 1 };
    let (shown, position) = pager::span(app.views.help_scroll, body.len(), rows);
    let mut out = vec![header(area.width)];
    out.extend(body[shown].iter().cloned());
    if let Some(p) = position {
        out.push(Line::styled(p, Style::default().fg(Color::Cyan)));
    }
    let block = Block::default()
        .borders(Borders::ALL)
        .title(Span::styled(" Help: keys (Esc or ? goes back) ", bold()));
    frame.render_widget(Paragraph::new(out).block(block), area);
}
