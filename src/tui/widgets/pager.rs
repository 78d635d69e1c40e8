//! Text that may not fit: wrapped to the columns at hand (never cut) and shown a window at a
//! time, with what lies below named, so that a dialog, a detail or the help can always be read
//! to its end. Pure functions: `update` uses them to know whether the operator has seen the end
//! of a confirmation, the dialog and the views to draw the same window.

use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// `text` in lines at most `width` columns wide, broken at spaces; a word wider than a line is
/// broken between characters. An empty text is one empty line (a paragraph break stays).
pub fn wrap(text: &str, width: usize) -> Vec<String> {
    let width = width.max(1);
    // Most lines fit (bytes are at least columns for every character but the widest): a
    // dialog of 100,000 products wraps each frame.
    if text.len() <= width {
        return vec![text.to_string()];
    }
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split(' ') {
        let (used, w) = (line.width(), word.width());
        if !line.is_empty() && used + 1 + w > width {
            lines.push(std::mem::take(&mut line));
        } else if !line.is_empty() {
            line.push(' ');
        }
        if word.width() <= width {
            line.push_str(word);
            continue;
        }
        // A word longer than the line: as many characters per line as fit, none lost.
        for c in word.chars() {
            let cw = c.width().unwrap_or(0);
            if line.width() + cw > width && !line.is_empty() {
                lines.push(std::mem::take(&mut line));
            }
            line.push(c);
        }
    }
    lines.push(line);
    lines
}

/// Every line of `lines` wrapped to `width`.
pub fn wrap_all<S: AsRef<str>>(lines: &[S], width: usize) -> Vec<String> {
    lines.iter().flat_map(|l| wrap(l.as_ref(), width)).collect()
}

/// The first row shown of `total` rows seen `rows` at a time, asked to start at `scroll`:
/// never past the point where the last row is at the bottom.
pub fn clamp(scroll: usize, total: usize, rows: usize) -> usize {
    scroll.min(total.saturating_sub(rows))
}

/// True when the window starting at `scroll` shows the last row.
pub fn at_end(scroll: usize, total: usize, rows: usize) -> bool {
    clamp(scroll, total, rows) + rows >= total
}

/// Rows below the window.
pub fn below(scroll: usize, total: usize, rows: usize) -> usize {
    total.saturating_sub(clamp(scroll, total, rows) + rows)
}

/// The window of `lines` from `scroll`, and the line that says where it is when not everything
/// fits ("lines 1-12 of 56, 44 below: Down / PgDn / End"). `rows` counts the window only; the
/// caller keeps one row more for the position line when `lines` overflow.
pub fn window(lines: &[String], scroll: usize, rows: usize) -> (Vec<String>, Option<String>) {
    let (range, position) = span(scroll, lines.len(), rows);
    (lines[range].to_vec(), position)
}

/// The rows of `total` shown from `scroll`, `rows` at a time, and the position line when they
/// do not all fit.
pub fn span(scroll: usize, total: usize, rows: usize) -> (std::ops::Range<usize>, Option<String>) {
    if total <= rows {
        return (0..total, None);
    }
    let start = clamp(scroll, total, rows);
    let end = (start + rows).min(total);
    let left = below(scroll, total, rows);
    let position = if left == 0 {
        format!(
            "lines {}-{end} of {total} (end; Up / PgUp / Home)",
            start + 1
        )
    } else {
        format!(
            "lines {}-{end} of {total}, {left} below: Down / PgDn / End",
            start + 1
        )
    };
    (start..end, Some(position))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn wraps_at_spaces_and_breaks_only_words_too_long() {
        assert_eq!(wrap("ab cd ef", 5), vec!["ab cd", "ef"]);
        assert_eq!(wrap("abcdefgh", 3), vec!["abc", "def", "gh"]);
        assert_eq!(wrap("", 10), vec![""]);
        // Wide characters count two columns.
        assert_eq!(wrap("商品商品", 4), vec!["商品", "商品"]);
    }

    #[test]
    fn the_window_says_what_is_below_and_stops_at_the_end() {
        let lines: Vec<String> = (1..=10).map(|i| i.to_string()).collect();
        let (shown, pos) = window(&lines, 0, 4);
        assert_eq!(shown, vec!["1", "2", "3", "4"]);
        assert_eq!(
            pos.as_deref(),
            Some("lines 1-4 of 10, 6 below: Down / PgDn / End")
        );
        let (shown, pos) = window(&lines, 99, 4);
        assert_eq!(shown, vec!["7", "8", "9", "10"]);
        assert!(pos.is_some_and(|p| p.contains("(end")));
        assert!(at_end(99, 10, 4));
        assert!(!at_end(5, 10, 4));
        assert_eq!(window(&lines, 3, 20), (lines.clone(), None));
    }

    proptest! {
        /// Wrapping loses no character (bar the spaces it breaks at) and no line is wider
        /// than asked.
        #[test]
        fn wrapping_keeps_every_character(text in "[a-z 商0-9,.]{0,200}", width in 1usize..60) {
            let lines = wrap(&text, width);
            for l in &lines {
                prop_assert!(l.width() <= width.max(2), "{l:?} wider than {width}");
            }
            let kept: String = lines.concat().chars().filter(|c| *c != ' ').collect();
            let asked: String = text.chars().filter(|c| *c != ' ').collect();
            prop_assert_eq!(kept, asked);
        }
    }
}
