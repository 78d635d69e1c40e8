//! The modal dialog: a preview or question before a write (yes/no, or the activity id typed
//! for activity-wide writes), a "working" window while a background job runs, a result.

use super::{bold, clip, critical, dim, pager};
use crate::tui::app::{App, Dialog};
use crate::tui::views::dry_run::{FormField, StrategyChoice};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};

/// The centered rectangle of `w` x `h` inside `area`, clipped to it.
fn centered(area: Rect, w: u16, h: u16) -> Rect {
    let w = w.min(area.width);
    let h = h.min(area.height);
    Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    )
}

pub fn render(frame: &mut Frame, area: Rect, app: &App, dialog: &Dialog) {
    let (title, mut lines, border) = match dialog {
        Dialog::Working {
            title,
            detail,
            since,
            ..
        } => {
            let secs = app.now.saturating_duration_since(*since).as_secs();
            let mut lines: Vec<Line> = wrap(detail, text_width(area.width))
                .into_iter()
                .map(Line::raw)
                .collect();
            lines.extend([
                Line::raw(format!("working for {secs}s ...")),
                Line::raw(""),
                Line::styled("Esc close", dim()),
            ]);
            (title.clone(), lines, Style::default().fg(Color::Cyan))
        }
        Dialog::Message { title, error, .. } => {
            let mut out = scrolled(dialog, area);
            out.push(Line::raw(""));
            out.push(Line::styled("Esc / Enter close", dim()));
            let border = if *error {
                critical()
            } else {
                Style::default().fg(Color::Green)
            };
            (title.clone(), out, border)
        }
        Dialog::DryRunForm => dry_run_form(app),
        Dialog::TopupForm {
            activity,
            product,
            input,
            error,
            refused,
        } => {
            let width = text_width(area.width);
            let mut out: Vec<Line> = wrap(
                &format!("Units to add to {product} (negative: take unsold units away)."),
                width,
            )
            .into_iter()
            .map(Line::raw)
            .collect();
            out.extend([
                Line::raw(""),
                Line::from(vec![
                    Span::raw("units: "),
                    Span::styled(input.clone(), Style::default().fg(Color::Cyan)),
                    Span::styled(refused.map(String::from).unwrap_or_default(), critical()),
                    Span::styled("_", Style::default().fg(Color::Cyan)),
                ]),
            ]);
            // What the units do, as typed (the last read's figures).
            if let Some(f) = app.topup_figures(product) {
                let n = crate::tui::topup_form::units(input).unwrap_or(0);
                out.push(Line::raw(""));
                out.extend(
                    crate::tui::topup_form::before_after(n, &f)
                        .iter()
                        .flat_map(|l| wrap(l, width))
                        .map(Line::raw),
                );
            }
            // The reason a keystroke was refused, whole (wrapped, never cut).
            if let Some(e) = error {
                out.push(Line::raw(""));
                out.extend(
                    wrap(e, width)
                        .into_iter()
                        .map(|l| Line::styled(l, critical())),
                );
            }
            out.push(Line::styled("Enter next   Esc cancel", dim()));
            (
                format!("Top up {product} of {activity}"),
                out,
                Style::default().fg(Color::Yellow),
            )
        }
        Dialog::Confirm(c) => {
            let mut out = scrolled(dialog, area);
            out.push(Line::raw(""));
            let cursor = |on: bool| if on { "_" } else { "" };
            if let Some(expected) = &c.typed {
                out.push(Line::from(vec![
                    Span::raw("type "),
                    Span::styled(expected.clone(), bold()),
                    Span::raw(": "),
                    Span::styled(
                        format!("{}{}", c.input, cursor(!c.types_reason())),
                        Style::default().fg(Color::Cyan),
                    ),
                ]));
                if c.mismatch {
                    out.push(Line::styled(
                        format!("'{}' is not '{expected}'", clip(&c.input, 40)),
                        critical(),
                    ));
                }
            }
            if let Some(reason) = &c.reason {
                // The end of a long reason, where the operator types.
                let room = text_width(area.width).saturating_sub(10).max(10);
                let shown = tail(reason, room);
                let mut line = vec![
                    Span::raw("reason: "),
                    Span::styled(
                        format!("{shown}{}", cursor(c.types_reason())),
                        Style::default().fg(Color::Cyan),
                    ),
                ];
                if reason.is_empty() {
                    line.push(Span::styled(" (optional: \"from the TUI\")", dim()));
                }
                out.push(Line::from(line));
            }
            if let Some(n) = &c.note {
                out.extend(
                    wrap(n, text_width(area.width))
                        .into_iter()
                        .map(|l| Line::styled(l, Style::default().fg(Color::Yellow))),
                );
            }
            out.push(Line::styled(
                match (&c.typed, &c.reason) {
                    (Some(_), Some(_)) => "Enter confirm   Tab id / reason   Esc cancel",
                    (Some(_), None) | (None, Some(_)) => "Enter confirm   Esc cancel",
                    (None, None) => "Enter confirm   n / Esc cancel",
                },
                dim(),
            ));
            (c.title.clone(), out, Style::default().fg(Color::Yellow))
        }
    };
    let inner_w = text_width(area.width);
    let widest = lines
        .iter()
        .map(Line::width)
        .chain(std::iter::once(title.chars().count() + 2))
        .max()
        .unwrap_or(0)
        .min(inner_w);
    // Rows that do not fit are summarised, keeping the dialog's last lines (the question).
    let max_rows = usize::from(area.height.saturating_sub(4));
    if lines.len() > max_rows && max_rows >= 4 {
        let tail = 3;
        let keep = max_rows - tail - 1;
        let hidden = lines.len() - keep - tail;
        let end: Vec<Line> = lines.split_off(lines.len() - tail);
        lines.truncate(keep);
        lines.push(Line::styled(
            format!("... and {hidden} more line(s)"),
            dim(),
        ));
        lines.extend(end);
    }
    let w = u16::try_from(widest + 4).unwrap_or(u16::MAX);
    let h = u16::try_from(lines.len() + 2).unwrap_or(u16::MAX);
    let rect = centered(area, w, h);
    frame.render_widget(Clear, rect);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_style(border)
        .title(Span::styled(format!(" {} ", clip(&title, inner_w)), bold()));
    frame.render_widget(Paragraph::new(lines).block(block), rect);
}

/// The dry-run form: two numbers and the strategy, the focused field marked and in colour.
fn dry_run_form(app: &App) -> (String, Vec<Line<'static>>, Style) {
    let f = &app.views.dry_run.form;
    let activity = app
        .activity
        .as_ref()
        .map_or_else(|| "-".to_string(), ToString::to_string);
    let focus = Style::default()
        .fg(Color::Cyan)
        .add_modifier(Modifier::BOLD);
    let marker = |field: FormField| {
        if f.field == field {
            Span::styled("> ", focus)
        } else {
            Span::raw("  ")
        }
    };
    let number = |field: FormField, name: &str, value: &str| {
        let shown = if f.field == field {
            Span::styled(format!("{value}_"), focus)
        } else {
            Span::raw(value.to_string())
        };
        Line::from(vec![marker(field), Span::raw(format!("{name:<13}")), shown])
    };
    let mut strategy = vec![
        marker(FormField::Strategy),
        Span::raw(format!("{:<13}", "strategy")),
    ];
    // The choice is bracketed as well as reversed, so it reads on any terminal.
    for c in StrategyChoice::CHOICES {
        if c == f.strategy {
            strategy.push(Span::styled(
                format!("[{}]", c.name()),
                Style::default().add_modifier(Modifier::REVERSED | Modifier::BOLD),
            ));
        } else {
            strategy.push(Span::styled(format!(" {} ", c.name()), dim()));
        }
        strategy.push(Span::raw(" "));
    }
    let mut lines = vec![
        Line::raw("Simulated buyers on a shadow copy: the live keys are never written."),
        Line::raw(""),
        number(FormField::Buyers, "buyers", &f.buyers),
        number(FormField::Concurrency, "concurrency", &f.concurrency),
        Line::from(strategy),
        Line::raw(""),
    ];
    if let Some(e) = &f.error {
        lines.push(Line::styled(e.clone(), critical()));
    }
    lines.push(Line::styled(
        "Tab / Up / Down field   Left / Right strategy   Enter next   Esc cancel",
        dim(),
    ));
    (
        format!("Dry run of {activity}"),
        lines,
        Style::default().fg(Color::Cyan),
    )
}

/// The columns a dialog's text may take on a screen `width` columns wide.
pub fn text_width(width: u16) -> usize {
    usize::from(width.saturating_sub(8)).max(20)
}

/// The part of a confirmation or a message that scrolls: its lines wrapped to the screen, and
/// how many rows of them show at once. None for the other dialogs (forms, "working").
pub struct Body {
    pub lines: Vec<String>,
    pub rows: usize,
    pub scroll: usize,
}

/// The scrolling body of `dialog` on a screen of `size` (columns, rows); every line fits when
/// the size is not known yet.
pub fn body(dialog: &Dialog, size: (u16, u16)) -> Option<Body> {
    let (lines, scroll, tail) = match dialog {
        // Under the body: a blank line, the input line and its mismatch, the keys.
        Dialog::Confirm(c) => (
            &c.lines,
            c.scroll,
            2 + usize::from(c.typed.is_some())
                + usize::from(c.mismatch)
                + c.note
                    .as_ref()
                    .map_or(0, |n| pager::wrap(n, text_width(size.0)).len()),
        ),
        Dialog::Message { lines, scroll, .. } => (lines, *scroll, 2),
        _ => return None,
    };
    let lines = pager::wrap_all(lines, text_width(size.0));
    if size.1 == 0 {
        let rows = lines.len();
        return Some(Body {
            lines,
            rows,
            scroll,
        });
    }
    // Borders and a margin of one row above and below; the position line when it overflows.
    let room = usize::from(size.1).saturating_sub(4 + tail).max(2);
    let rows = if lines.len() <= room { room } else { room - 1 };
    Some(Body {
        lines,
        rows,
        scroll,
    })
}

/// The rows of the body shown now, and the position line when not everything fits.
fn scrolled(dialog: &Dialog, area: Rect) -> Vec<Line<'static>> {
    let Some(b) = body(dialog, (area.width, area.height)) else {
        return Vec::new();
    };
    let (shown, position) = pager::window(&b.lines, b.scroll, b.rows);
    let mut out: Vec<Line> = shown.into_iter().map(Line::raw).collect();
    if let Some(p) = position {
        out.push(Line::styled(p, Style::default().fg(Color::Cyan)));
    }
    out
}

/// `text` in lines of at most `width` columns, broken at spaces (never cut).
fn wrap(text: &str, width: usize) -> Vec<String> {
    pager::wrap(text, width)
}

/// The end of `text` that fits `width` columns (a field shows where the cursor is).
fn tail(text: &str, width: usize) -> String {
    use unicode_width::UnicodeWidthChar;
    let mut used = 0;
    let mut start = text.len();
    for (i, ch) in text.char_indices().rev() {
        used += ch.width().unwrap_or(0);
        if used > width {
            break;
        }
        start = i;
    }
    text[start..].to_string()
}
