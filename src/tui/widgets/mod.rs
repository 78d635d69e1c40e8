//! Pieces shared by the views: header, footer, dialog, the filter line and the windowed table.

pub mod ascii;
pub mod columns;
pub mod dialog;
pub mod filter;
pub mod footer;
pub mod header;
pub mod pager;
pub mod table;

use ratatui::style::{Color, Modifier, Style};

/// Rows that need the operator's eyes now.
pub fn critical() -> Style {
    Style::default().fg(Color::Red).add_modifier(Modifier::BOLD)
}

/// Rows that need a look.
pub fn warning() -> Style {
    Style::default().fg(Color::Yellow)
}

/// Healthy figures.
pub fn good() -> Style {
    Style::default().fg(Color::Green)
}

/// Less important text.
pub fn dim() -> Style {
    Style::default().fg(Color::DarkGray)
}

/// Titles and headers.
pub fn bold() -> Style {
    Style::default().add_modifier(Modifier::BOLD)
}

/// Cuts `s` to `max` cells of the terminal, marking the cut with `…` (as table cells are), so
/// a long value never breaks a line layout; a wide character is never split.
pub fn clip(s: &str, max: usize) -> String {
    use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};
    if s.width() <= max {
        return s.to_string();
    }
    let mut out = String::new();
    let mut used = 0;
    for ch in s.chars() {
        let cw = ch.width().unwrap_or(0);
        if used + cw + 1 > max {
            break;
        }
        used += cw;
        out.push(ch);
    }
    if max > 0 {
        out.push_str(columns::OVERFLOW);
    }
    out
}

/// A line of spans in `width` cells: whole when it fits; otherwise the spans that fit whole,
/// then the first that does not cut with `…` where at least [`CUT_INSIDE`] cells of it fit (a
/// long label; a word was cut silently there), else `…` after the last whole span where a cell
/// is free for it (items left out whole, the zone first, need no cut mark when none is).
pub fn fit_line<'a>(spans: Vec<ratatui::text::Span<'a>>, width: usize) -> ratatui::text::Line<'a> {
    use ratatui::text::{Line, Span};
    use unicode_width::UnicodeWidthStr;
    let whole: usize = spans.iter().map(|s| s.content.width()).sum();
    if whole <= width {
        return Line::from(spans);
    }
    let mut used = 0;
    let mut out: Vec<Span<'a>> = Vec::new();
    for span in spans {
        let w = span.content.width();
        if used + w <= width {
            used += w;
            out.push(span);
            continue;
        }
        if width - used > CUT_INSIDE {
            out.push(Span::styled(clip(&span.content, width - used), span.style));
            return Line::from(out);
        }
        break;
    }
    // A separator left last leads nowhere: the mark takes its place.
    if out.last().is_some_and(|s| s.content.trim() == "│")
        && let Some(sep) = out.pop()
    {
        used -= sep.content.width();
    }
    if used + 2 <= width {
        out.push(Span::raw(" "));
        out.push(Span::styled(columns::OVERFLOW, dim()));
    }
    Line::from(out)
}

/// The fewest cells of a span [`fit_line`] shows cut rather than leave out whole.
pub const CUT_INSIDE: usize = 12;

#[cfg(test)]
mod tests {
    use super::fit_line;
    use ratatui::text::{Line, Span};

    fn text(line: &Line) -> String {
        line.spans.iter().map(|s| s.content.as_ref()).collect()
    }

    #[test]
    fn a_line_too_wide_is_marked_where_it_is_cut() {
        let spans = || -> Vec<Span<'static>> {
            ["abc", " │ ", "data 1s old", " │ ", "UTC"]
                .into_iter()
                .map(Span::raw)
                .collect()
        };
        assert_eq!(text(&fit_line(spans(), 23)), "abc │ data 1s old │ UTC");
        // Exactly the whole spans that fit: nothing is cut, no room for a mark.
        assert_eq!(text(&fit_line(spans(), 17)), "abc │ data 1s old");
        // Room for the mark after the last whole span; the separator goes.
        assert_eq!(text(&fit_line(spans(), 20)), "abc │ data 1s old …");
        // A long span is cut inside, with its mark.
        let long = vec![
            Span::raw("id "),
            Span::raw("a-very-long-activity-identifier"),
        ];
        assert_eq!(text(&fit_line(long, 20)), "id a-very-long-acti…");
        // No room at all, or one cell: nothing, never a panic.
        assert_eq!(text(&fit_line(spans(), 0)), "");
        assert_eq!(text(&fit_line(spans(), 1)), "");
        assert_eq!(text(&fit_line(spans(), 4)), "abc");
    }

    #[test]
    fn clip_marks_its_cut_by_display_width() {
        use super::clip;
        assert_eq!(clip("redis://10.0.0.5:6379", 30), "redis://10.0.0.5:6379");
        assert_eq!(clip("redis://10.0.0.5:6379", 10), "redis://1…");
        // Two cells a character: never split, never past its room.
        assert_eq!(clip("商品四十二号", 6), "商品…");
        assert_eq!(clip("abc", 0), "");
    }
}
