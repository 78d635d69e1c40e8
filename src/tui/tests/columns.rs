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

/// Alerts and Events at 60 columns: a message or a product id that does not fit ends with the
/// mark (they were cut silently: a message read as if it ended there, a cut id as another id).
/// The header's own cut is [`crate::tui::widgets::fit_line`]'s test.
#[test]
fn alerts_and_events_mark_what_a_narrow_terminal_cuts() {
    use crate::domain::alerts::product_alerts;
    let mut a = app(false);
    let mut r = fixtures::report(4, 6);
    if let Some(p) = r.products.iter_mut().find(|p| p.product == "phone") {
        p.product = "phone-with-a-very-long-product-id-0042".into();
        p.redis_remaining = None;
        p.state = crate::domain::stock::State::Missing;
        p.drift = None;
    }
    r.alerts = product_alerts(&r.products);
    a.update(Action::Status(
        fixtures::id("spring-sale"),
        fetched(4, 4, r),
    ));
    a.update(Action::Resize(60, 20));
    let rows_of = |s: &str| -> Vec<String> {
        s.lines()
            .filter(|l| l.starts_with('│') && l.contains("missing"))
            .map(str::to_string)
            .collect()
    };
    for view in [View::Alerts, View::Events] {
        a.update(Action::SwitchView(view));
        let s = screen(&a, 60, 20);
        let rows = rows_of(&s);
        assert!(!rows.is_empty(), "{view:?}: {s}");
        for row in &rows {
            assert!(
                row.contains(OVERFLOW),
                "{view:?}: a cut without its mark: {row}\n{s}"
            );
        }
    }
}

/// The message column takes the room the others leave, and gives way to its minimum before a
/// column is dropped.
#[test]
fn the_rest_column_takes_what_is_left() {
    use crate::tui::widgets::columns::{Column, widths};
    let cols = [
        Column::text("kind", (4, 10), 0),
        Column::number("age", 2),
        Column::rest("message", 8),
    ];
    let rows = vec![vec![
        "missing".to_string(),
        "12s".to_string(),
        "the stock key is gone from Redis".to_string(),
    ]];
    // 7 + 1 + 3 + 1 = 12 before the message: 28 cells leave it 16.
    assert_eq!(widths(&cols, &rows, 28), vec![Some(7), Some(3), Some(16)]);
    // Too narrow for all at the message's minimum: the age goes, not the message.
    assert_eq!(widths(&cols, &rows, 17), vec![Some(7), None, Some(9)]);
}
