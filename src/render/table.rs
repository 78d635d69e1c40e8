//! Plain-text tables for the headless commands' human output.

/// Columns a cell takes on a terminal: CJK ideographs and most emoji take two, combining marks
/// none (what `chars().count()` gets wrong for the product names of a Chinese shop).
pub fn display_width(s: &str) -> usize {
    unicode_width::UnicodeWidthStr::width(s)
}

/// Renders rows under headers with columns padded to their widest cell, by display width.
/// Numeric-looking cells are right-aligned so digits line up.
pub fn render(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| display_width(h)).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(display_width(cell));
            }
        }
    }
    let mut out = String::new();
    let line = |cells: Vec<&str>, out: &mut String| {
        let mut parts = Vec::new();
        for (i, cell) in cells.iter().enumerate() {
            let pad = " ".repeat(
                widths
                    .get(i)
                    .copied()
                    .unwrap_or(0)
                    .saturating_sub(display_width(cell)),
            );
            let numeric = !cell.is_empty()
                && cell
                    .trim_start_matches(['-', '+'])
                    .chars()
                    .all(|c| c.is_ascii_digit() || c == '.');
            if numeric {
                parts.push(format!("{pad}{cell}"));
            } else {
                parts.push(format!("{cell}{pad}"));
            }
        }
        out.push_str(parts.join("  ").trim_end());
        out.push('\n');
    };
    line(headers.to_vec(), &mut out);
    for row in rows {
        line(row.iter().map(String::as_str).collect(), &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn aligns_columns() {
        let t = super::render(
            &["id", "stock"],
            &[
                vec!["p1".into(), "5".into()],
                vec!["p22".into(), "100".into()],
            ],
        );
        assert_eq!(t, "id   stock\np1       5\np22    100\n");
    }

    #[test]
    fn wide_characters_align_by_display_width() {
        let t = super::render(
            &["product", "name", "stock"],
            &[
                vec!["p1".into(), "手机壳".into(), "5".into()],
                vec!["p2".into(), "phone case".into(), "100".into()],
                vec!["p3".into(), "🎧 耳机".into(), "7".into()],
            ],
        );
        // Every "stock" figure ends in the same terminal column.
        let ends: Vec<usize> = t.lines().map(super::display_width).collect();
        assert!(ends.iter().all(|e| *e == ends[0]), "{t}");
        assert!(t.contains("手机壳      "), "{t}");
    }
}
