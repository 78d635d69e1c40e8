//! The smaller items of issue 20: resuming many products without pausing all first, the
//! sparkline's history kept across activities.

use super::fixtures::{app, fetched, id, report};
use crate::tui::action::{Action, Command};
use crate::tui::app::{App, Dialog, PendingWrite};
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

fn key(c: char) -> Action {
    Action::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE))
}

fn flash(a: &App) -> String {
    a.flash.as_ref().map(|f| f.text.clone()).unwrap_or_default()
}

/// The fixture's report with `paused` products paused in Redis.
fn with_paused(a: &mut App, paused: &[&str]) {
    let mut r = report(4, 6);
    for p in &mut r.products {
        p.paused = paused.contains(&p.product.as_str());
    }
    a.update(Action::Status(id("spring-sale"), fetched(4, 4, r)));
}

#[test]
fn u_resumes_every_paused_product_and_z_never_resumes() {
    let mut a = app(false);
    a.update(key('2'));
    // None paused: U says so and asks nothing.
    assert!(a.update(key('U')).is_empty());
    assert!(a.dialog.is_none());
    assert_eq!(flash(&a), "no product of spring-sale is paused");
    // Some paused: Z pauses the rest, U resumes those paused; both ask for the id.
    with_paused(&mut a, &["phone", "laptop"]);
    for (k, pause) in [('Z', true), ('U', false)] {
        a.update(key(k));
        match &a.dialog {
            Some(Dialog::Confirm(c)) => {
                assert_eq!(c.typed.as_deref(), Some("spring-sale"));
                assert!(
                    matches!(c.write, PendingWrite::Pause { product: None, pause: p, .. } if p == pause),
                    "{k}: {:?}",
                    c.write
                );
            }
            other => panic!("{k}: {other:?}"),
        }
        a.update(Action::Key(KeyEvent::new(KeyCode::Esc, KeyModifiers::NONE)));
    }
    // Every product paused: Z says U resumes them.
    let all: Vec<String> = report(4, 6)
        .products
        .iter()
        .map(|p| p.product.clone())
        .collect();
    let names: Vec<&str> = all.iter().map(String::as_str).collect();
    with_paused(&mut a, &names);
    assert!(a.update(key('Z')).is_empty());
    assert!(a.dialog.is_none());
    assert!(flash(&a).contains("U resumes them all"), "{}", flash(&a));
}

#[test]
fn the_sales_rate_history_comes_back_with_its_activity() {
    let mut a = app(false);
    let before = a.stock.rate_history.clone();
    assert!(
        !before.is_empty(),
        "the fixture's two snapshots make a rate"
    );
    let cmds = a.update(Action::SelectActivity(id("summer")));
    assert!(matches!(cmds.as_slice(), [Command::Watch(_)]));
    assert!(a.stock.rate_history.is_empty());
    a.update(Action::SelectActivity(id("spring-sale")));
    assert_eq!(a.stock.rate_history, before);
}

/// The sparkline keeps its last minutes; the peak in its title is the highest rate since the
/// console began watching (it fell from 24.9 to 2.0 over a demo's first minutes).
#[test]
fn the_sales_peak_outlives_the_sparkline_window() {
    let mut a = app(false);
    let peak = a.stock.rate_peak;
    assert!(peak > 0.0, "the fixture's two snapshots make a rate");
    // Five minutes more of snapshots two seconds apart with nothing sold.
    for i in 0..300u64 {
        let secs = 4 + 2 * i;
        let taken = i64::try_from(secs).expect("secs");
        a.update(Action::Status(
            id("spring-sale"),
            fetched(secs, taken, report(taken, 6)),
        ));
    }
    assert!(a.stock.rate_history.iter().all(|r| *r == 0.0));
    let s = super::fixtures::screen(&a, 100, 30);
    assert!(s.contains(&format!("peak {peak:.1}")), "{s}");
}

/// The Preheat view with a gate confirmed and running: the app and the run's sequence number.
fn preheat_asked() -> (crate::tui::App, u64) {
    let mut a = app(false);
    a.update(key('6'));
    a.update(key('p'));
    let seq = match super::fixtures::confirm(&mut a).as_slice() {
        [Command::RunPreheat { seq, .. }] => *seq,
        other => panic!("{other:?}"),
    };
    (a, seq)
}

/// A no-go before anything was written says what it had planned (not "0 written, 0
/// unchanged" over a table of unchanged rows), how old it is, what moved since; and `P` lists
/// the keys the last gate found it would rewrite.
#[test]
fn the_preheat_view_says_what_was_planned_how_old_and_what_p_rewrites() {
    let (mut a, seq) = preheat_asked();
    let mut r = super::fixtures::preheat_report(false);
    r.written = 0;
    r.unchanged = 0;
    r.conflicts = vec![crate::ops::preheat::Conflict {
        product: "tablet".into(),
        redis_stock: Some("0".into()),
        wanted_stock: 30,
        redis_limit: Some(2),
        wanted_limit: 2,
    }];
    a.update(Action::PreheatDone { seq, result: Ok(r) });
    a.update(Action::Tick(super::fixtures::at(70)));
    let s = super::fixtures::screen(&a, 120, 30);
    assert!(s.contains("nothing was written; the plan was: "), "{s}");
    assert!(s.contains("made 1m0"), "{s}");
    assert!(s.contains("since then: 1 product(s) have lost keys"), "{s}");
    a.update(key('P'));
    let Some(Dialog::Confirm(c)) = &a.dialog else {
        panic!("{:?}", a.dialog);
    };
    assert!(
        c.lines.iter().any(|l| l.starts_with("  tablet: stock ")),
        "{:?}",
        c.lines
    );
}

/// A preheat warning naming oversold products wraps over as many rows as it needs: its tail
/// (what to run) was cut off at the bottom of the box.
#[test]
fn a_long_preheat_warning_is_shown_whole() {
    let (mut a, seq) = preheat_asked();
    let mut r = super::fixtures::preheat_report(true);
    r.warnings = vec![format!(
        "10 product(s) oversold in the database: {}; their stock belongs below zero, so nothing more sells until returns pay it back (see `seckill-console reconcile spring-sale`)",
        (0..10)
            .map(|i| format!("product-{i} (12 held of 10)"))
            .collect::<Vec<_>>()
            .join(", ")
    )];
    a.update(Action::PreheatDone { seq, result: Ok(r) });
    let s = super::fixtures::screen(&a, 80, 40);
    assert!(s.contains("! 10 product(s) oversold"), "{s}");
    assert!(s.contains("reconcile spring-sale`)"), "{s}");
}
