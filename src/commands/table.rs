//! Plain-text tables for the headless commands' human output.

/// Renders rows under headers with columns padded to their widest cell. Numeric-looking cells
/// are right-aligned so digits line up.
pub fn render(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(cell.chars().count());
            }
        }
    }
    let mut out = String::new();
    let line = |cells: Vec<&str>, out: &mut String| {
        let mut parts = Vec::new();
        for (i, cell) in cells.iter().enumerate() {
            let w = widths.get(i).copied().unwrap_or(0);
            let numeric = !cell.is_empty()
                && cell
                    .trim_start_matches(['-', '+'])
                    .chars()
                    .all(|c| c.is_ascii_digit() || c == '.');
            if numeric {
                parts.push(format!("{cell:>w$}"));
            } else {
                parts.push(format!("{cell:<w$}"));
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
}
