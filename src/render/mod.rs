//! Text renderings shared by the headless commands and the TUI: aligned plain-text tables, the
//! incident report as Markdown, grouped counts. Pure functions of the data; no I/O.

pub mod report;
pub mod table;

/// An integer with thousands separators: `1,235,567`, `-2,002`.
pub fn grouped(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    if n < 0 {
        out.push('-');
    }
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(d);
    }
    out
}

/// A queue's pending count as a person reads it: `10,000+` when the count stopped at its cap
/// (there are more), else the count grouped.
pub fn queue_count(pending: i64, more: bool) -> String {
    if more {
        format!("{}+", grouped(pending))
    } else {
        grouped(pending)
    }
}

#[cfg(test)]
mod tests {
    use super::{grouped, queue_count};

    #[test]
    fn counts_are_grouped_and_a_capped_queue_says_more() {
        assert_eq!(grouped(1_235_567), "1,235,567");
        assert_eq!(grouped(-2_002), "-2,002");
        assert_eq!(grouped(0), "0");
        assert_eq!(queue_count(10_000, true), "10,000+");
        assert_eq!(queue_count(42, false), "42");
    }
}
