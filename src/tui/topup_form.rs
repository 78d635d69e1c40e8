//! The top-up form's rules, checked as the operator types: whole units only, a sign first, and
//! a figure whose initial stock would leave its range refused at the keystroke that makes it
//! so (more digits only move it further), with the reason on the form.

use crate::domain::import::MAX_STOCK;
use crate::domain::stock::ProductStatus;
use crate::tui::widgets::columns::{grouped, signed};

/// What the form knows of the product, from the last status read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Figures {
    pub initial: i64,
    pub redis: Option<i64>,
    /// Units sold or in flight: a cut never goes below them.
    pub held: i64,
}

impl Figures {
    pub fn of(p: &ProductStatus) -> Figures {
        Figures {
            initial: p.initial,
            redis: p.redis_remaining,
            held: p.db_sold.saturating_add(p.in_flight),
        }
    }
}

/// The units typed so far, as a number (None: nothing or only a sign yet).
pub fn units(input: &str) -> Option<i64> {
    input.trim_start_matches('+').parse::<i64>().ok()
}

/// `c` typed after `input`: the new text, or why the keystroke is refused.
pub fn type_key(input: &str, c: char, f: Option<&Figures>) -> Result<String, String> {
    match c {
        '+' | '-' if input.is_empty() => return Ok(c.to_string()),
        '+' | '-' => return Err(format!("'{c}' refused: a sign goes first")),
        '0'..='9' => {}
        _ => {
            return Err(format!(
                "'{c}' refused: whole units only (digits, a leading + or -)"
            ));
        }
    }
    let next = format!("{input}{c}");
    let Some(n) = units(&next) else {
        return Err(format!("'{c}' refused: {next} is beyond any stock"));
    };
    if let Some(f) = f {
        range(n, f)?;
    }
    Ok(next)
}

/// Whether adding `n` keeps the initial stock in its range: between what is sold or in flight
/// and [`MAX_STOCK`].
pub fn range(n: i64, f: &Figures) -> Result<i64, String> {
    let after = f
        .initial
        .checked_add(n)
        .filter(|a| (0..=MAX_STOCK).contains(a));
    match after {
        Some(a) if a >= f.held || n >= 0 => Ok(a),
        Some(a) => Err(format!(
            "{} would cut the initial stock to {}, below the {} unit(s) sold or in flight",
            signed(n),
            grouped(a),
            grouped(f.held)
        )),
        None => Err(format!(
            "{} would take the initial stock out of 0 to {}",
            signed(n),
            grouped(MAX_STOCK)
        )),
    }
}

/// The initial stock and the Redis stock before and after adding `n` (Redis as last read).
pub fn before_after(n: i64, f: &Figures) -> Vec<String> {
    let redis = |v: Option<i64>| v.map_or_else(|| "(no key)".to_string(), grouped);
    vec![
        format!(
            "initial stock {} -> {}",
            grouped(f.initial),
            grouped(f.initial.saturating_add(n))
        ),
        format!(
            "Redis stock   {} -> {} (as last read; buyers may move it meanwhile)",
            redis(f.redis),
            redis(f.redis.map(|r| r.saturating_add(n)))
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    const F: Figures = Figures {
        initial: 100,
        redis: Some(60),
        held: 40,
    };

    fn typed(keys: &str) -> (String, Option<String>) {
        let mut input = String::new();
        let mut last = None;
        for c in keys.chars() {
            match type_key(&input, c, Some(&F)) {
                Ok(next) => input = next,
                Err(e) => last = Some(e),
            }
        }
        (input, last)
    }

    #[test]
    fn what_is_not_a_whole_unit_is_refused_with_a_reason() {
        let (input, err) = typed("10.5");
        assert_eq!(input, "105");
        assert_eq!(
            err.as_deref(),
            Some("'.' refused: whole units only (digits, a leading + or -)")
        );
        assert_eq!(typed("1e3").0, "13");
        assert_eq!(typed("1,000").0, "1000");
        assert_eq!(typed("+25").0, "+25");
        let (_, err) = typed("2-");
        assert!(err.expect("refused").contains("a sign goes first"));
    }

    #[test]
    fn the_range_is_checked_at_the_keystroke() {
        // Twenty nines: refused from the digit that leaves the range (100 + 12 nines), said so.
        let (input, err) = typed(&"9".repeat(20));
        assert_eq!(input, "9".repeat(11));
        assert!(
            err.expect("refused")
                .contains("out of 0 to 1,000,000,000,000")
        );
        // A cut below what is sold or in flight: refused at the digit that crosses it.
        let (input, err) = typed("-61");
        assert_eq!(input, "-6");
        assert!(
            err.expect("refused")
                .contains("below the 40 unit(s) sold or in flight")
        );
        assert_eq!(typed("-60"), ("-60".to_string(), None));
    }

    #[test]
    fn before_and_after_are_shown() {
        assert_eq!(
            before_after(25, &F),
            vec![
                "initial stock 100 -> 125".to_string(),
                "Redis stock   60 -> 85 (as last read; buyers may move it meanwhile)".to_string()
            ]
        );
    }
}
