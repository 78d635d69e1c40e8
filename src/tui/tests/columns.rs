//! Numbers on screen are whole or an overflow mark, at any width (issue 20: a cut figure read
//! `35567` for 1,235,567 and lost the sign of a drift).

use super::fixtures::{self, app, fetched, screen};
use crate::tui::action::Action;
use crate::tui::view::View;
use crate::tui::widgets::columns::{OVERFLOW, grouped, signed};

/// The figures a product's row may show, as shown.
fn shown_values(p: &crate::domain::stock::ProductStatus) -> Vec<String> {
    let mut v = vec![
        grouped(p.initial),
        grouped(p.db_sold),
        grouped(p.in_flight),
        grouped(p.expected_remaining),
        grouped(p.orphaned),
    ];
    v.extend(p.redis_remaining.map(grouped));
    v.extend(p.drift.map(signed));
    v
}

/// A token that reads as an integer figure: digits, commas and a sign.
fn is_figure(t: &str) -> bool {
    let body = t.trim_start_matches(['+', '-']);
    !body.is_empty() && body.chars().all(|c| c.is_ascii_digit() || c == ',')
}

proptest::proptest! {
    /// Random figures (up to 13 digits, signed drifts) at any terminal size: every figure in a
    /// product's row is one of that product's values whole, or the overflow mark.
    #[test]
    fn every_number_on_screen_is_whole_or_an_overflow_mark(
        figures in proptest::collection::vec(
            (0i64..10_000_000_000_000, -9_999_999_999_999i64..10_000_000_000_000),
            6,
        ),
        w in 60u16..200,
        h in 12u16..60,
    ) {
        let mut a = app(false);
        let mut r = fixtures::report(4, 0);
        for (p, (big, drift)) in r.products.iter_mut().zip(&figures) {
            p.initial = *big;
            p.redis_remaining = Some(big / 3 + drift / 7);
            p.db_sold = big / 5;
            p.in_flight = big % 100_003;
            p.drift = Some(*drift);
            p.expected_remaining = big / 3;
            p.orphaned = drift.abs() % 1_000_003;
        }
        let products = r.products.clone();
        a.update(Action::Status(fixtures::id("spring-sale"), fetched(4, 4, r)));
        // Stock shows every product; Reconcile the ones with a drift (here all but the zeros).
        for view in [View::Stock, View::Reconcile] {
            a.update(Action::SwitchView(view));
            let s = screen(&a, w, h);
            let mut rows = 0;
            for line in s.lines() {
                let Some(rest) = line.strip_prefix('│') else { continue };
                let rest = rest.trim_start_matches('>');
                let mut tokens = rest.split(['│', ' ']).filter(|t| !t.is_empty());
                let Some(id) = tokens.next() else { continue };
                let Some(p) = products.iter().find(|p| p.product == id) else { continue };
                let values = shown_values(p);
                rows += 1;
                // A name may hold digits ("Laptop Pro 14"): its words are no figures.
                let name: Vec<&str> = p.name.split_whitespace().collect();
                for t in tokens
                    .filter(|t| !name.contains(t))
                    .filter(|t| is_figure(t) || *t == OVERFLOW)
                {
                    proptest::prop_assert!(
                        t == OVERFLOW || values.iter().any(|v| v == t),
                        "{id}: '{t}' is none of {values:?} at {w}x{h}:\n{s}"
                    );
                }
            }
            // The table has room for rows from this height on: they were read.
            if h >= 14 {
                proptest::prop_assert!(rows > 0, "no product row read at {w}x{h}:\n{s}");
            }
        }
    }
}

/// Text cut to its column ends after a whole word, with the mark (the audit view showed
/// `paused -> sellin`, which reads as another word); a value without a space early enough is
/// cut by characters, a wide one never split.
#[test]
fn text_is_cut_after_a_whole_word() {
    use crate::tui::widgets::columns::{Kind, fit};
    let text = Kind::Text { min: 1, max: 80 };
    assert_eq!(fit(text, "paused -> selling", 17), "paused -> selling");
    assert_eq!(fit(text, "paused -> selling", 16), "paused -> …");
    assert_eq!(fit(text, "restock from warehouse", 12), "restock …");
    assert_eq!(fit(text, "sku00042-blue-xl", 10), "sku00042-…");
    assert_eq!(fit(text, "a verylongword", 10), "a verylon…");
    assert_eq!(fit(text, "商品 四十二号", 9), "商品 …");
    assert_eq!(fit(Kind::Number, "1,000,000", 5), OVERFLOW);
}
