//! Every view on a fixed-size TestBackend with fixed data, compared with the expected screen
//! in `tests/snapshots/tui/<name>.snap` by insta. After a deliberate change of a view, run the
//! tests: the new screens land beside the old ones as `.snap.new`; review and accept them with
//! `cargo insta review` (cargo install cargo-insta), or accept all with
//! `INSTA_UPDATE=always cargo test --lib tui`, and read the diff of those files.

use super::fixtures::{self, app, at, fetched, id, screen};
use crate::error::Error;
use crate::tui::action::Action;
use crate::tui::feed::Fetched;
use crate::tui::view::View;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::style::{Color, Modifier};

const W: u16 = 100;
const H: u16 = 30;

/// Compares `actual` with the stored screen `name`.
pub fn assert_screen(name: &str, actual: &str) {
    let mut settings = insta::Settings::clone_current();
    // Relative to this file: the repository's tests/snapshots/tui.
    settings.set_snapshot_path("../../../tests/snapshots/tui");
    settings.set_prepend_module_to_snapshot(false);
    settings.set_omit_expression(true);
    settings.bind(|| insta::assert_snapshot!(name, actual));
}

fn key(c: char) -> Action {
    Action::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE))
}

fn show(view: View, read_only: bool) -> crate::tui::app::App {
    let mut a = app(read_only);
    a.update(Action::SwitchView(view));
    a
}

#[test]
fn activities_view() {
    assert_screen("activities", &screen(&show(View::Activities, false), W, H));
}

#[test]
fn stock_view() {
    assert_screen("stock", &screen(&show(View::Stock, false), W, H));
}

#[test]
fn stock_view_read_only() {
    let s = screen(&show(View::Stock, true), W, H);
    assert!(s.contains("READ-ONLY"), "{s}");
    assert!(!s.contains("fix product"), "write keys are hidden: {s}");
    assert_screen("stock_read_only", &s);
}

#[test]
fn stock_view_filtered_and_sorted() {
    let mut a = show(View::Stock, false);
    for c in ['/', 'a'] {
        a.update(key(c));
    }
    a.update(Action::Key(KeyEvent::new(
        KeyCode::Enter,
        KeyModifiers::NONE,
    )));
    for _ in 0..3 {
        a.update(key('s')); // redis, sold%, drift
    }
    a.update(key('S'));
    assert_screen("stock_filtered_sorted", &screen(&a, W, H));
}

#[test]
fn stock_pause_dialogs() {
    // The highlighted product: a yes / no dialog.
    let mut a = show(View::Stock, false);
    a.update(key('z'));
    let s = screen(&a, W, H);
    assert!(s.contains("Pause"), "{s}");
    assert_screen("stock_pause_product", &s);
    // The whole activity: its id typed.
    a.update(Action::Cancel);
    a.update(key('Z'));
    let s = screen(&a, W, H);
    assert!(s.contains("Type the activity id"), "{s}");
    assert_screen("stock_pause_activity", &s);
    // Read-only: refused before any dialog.
    let mut r = show(View::Stock, true);
    r.update(key('z'));
    assert!(r.dialog.is_none());
}

#[test]
fn stock_topup_form_and_confirmation() {
    let mut a = show(View::Stock, false);
    a.update(key('t'));
    for c in ['5', 'x'] {
        a.update(key(c)); // a letter is not taken: it stays refused until Backspace
    }
    a.update(key('0'));
    assert!(screen(&a, W, H).contains("units: 5x_"));
    a.update(Action::Key(KeyEvent::new(
        KeyCode::Backspace,
        KeyModifiers::NONE,
    )));
    a.update(key('0'));
    let s = screen(&a, W, H);
    assert!(s.contains("units: 50_"), "{s}");
    assert_screen("stock_topup_form", &s);
    a.update(Action::Enter);
    let s = screen(&a, W, H);
    assert!(s.contains("Top up case of spring-sale by +50?"), "{s}");
    assert_screen("stock_topup_confirm", &s);
    // Zero is refused in the form, naming it.
    let mut b = show(View::Stock, false);
    b.update(key('t'));
    b.update(key('0'));
    b.update(Action::Enter);
    let s = screen(&b, W, H);
    assert!(s.contains("'0' is not a whole number"), "{s}");
    // Read-only: no form.
    let mut r = show(View::Stock, true);
    r.update(key('t'));
    assert!(r.dialog.is_none());
}

#[test]
fn stock_alert_rows_are_highlighted() {
    let a = show(View::Stock, false);
    let buf = fixtures::draw(&a, W, H);
    let text = fixtures::buffer_text(&buf);
    let row_of = |name: &str| -> u16 {
        let y = text
            .lines()
            .position(|l| {
                l.trim_start_matches('│')
                    .trim_start_matches(['>', ' '])
                    .starts_with(&format!("{name} "))
            })
            .unwrap_or_else(|| panic!("no row for {name}:\n{text}"));
        u16::try_from(y).expect("small screen")
    };
    let style_at = |name: &str| {
        let y = row_of(name);
        let x = text
            .lines()
            .nth(usize::from(y))
            .and_then(|l| l.find(name))
            .unwrap_or(0);
        buf.cell((u16::try_from(x).expect("narrow"), y))
            .expect("cell")
            .style()
    };
    // Negative stock and a missing key stop sales: red and bold.
    for bad in ["tablet", "watch", "laptop"] {
        let s = style_at(bad);
        assert_eq!(s.fg, Some(Color::Red), "{bad} row: {s:?}");
        assert!(s.add_modifier.contains(Modifier::BOLD), "{bad} row: {s:?}");
    }
    // Orphaned units: yellow. Healthy rows: the terminal's colour.
    assert_eq!(style_at("case").fg, Some(Color::Yellow));
    let ok = style_at("charger");
    assert!(
        matches!(ok.fg, None | Some(Color::Reset)),
        "an ok row is not highlighted: {ok:?}"
    );
    assert!(!ok.add_modifier.contains(Modifier::BOLD));
}

#[test]
fn alerts_view() {
    assert_screen("alerts", &screen(&show(View::Alerts, false), W, H));
}

#[test]
fn compensation_view() {
    assert_screen(
        "compensation",
        &screen(&show(View::Compensation, false), W, H),
    );
}

#[test]
fn reconcile_view() {
    assert_screen("reconcile", &screen(&show(View::Reconcile, false), W, H));
}

#[test]
fn reconcile_fix_preview_dialog() {
    let mut a = show(View::Reconcile, false);
    let cmds = a.update(key('F'));
    let seq = match cmds.first() {
        Some(crate::tui::Command::PreviewFix { seq, .. }) => *seq,
        other => panic!("expected a preview, got {other:?}"),
    };
    a.update(Action::FixPreviewed {
        seq,
        result: Ok(super::update::preview_report()),
    });
    for c in "spring".chars() {
        a.update(key(c));
    }
    assert_screen("reconcile_fix_dialog", &screen(&a, W, H));
}

#[test]
fn preheat_view_idle_running_and_reported() {
    let a = show(View::Preheat, false);
    assert_screen("preheat_idle", &screen(&a, W, H));

    let mut a = show(View::Preheat, false);
    a.update(key('p'));
    fixtures::confirm(&mut a);
    let seq = a
        .views
        .preheat
        .run
        .as_ref()
        .map(|r| r.seq)
        .expect("running");
    a.update(Action::PreheatProgress {
        seq,
        stage: "writing".into(),
        done: 3,
        total: 6,
    });
    assert_screen("preheat_running", &screen(&a, W, H));

    a.update(Action::PreheatDone {
        seq,
        result: Ok(fixtures::preheat_report(false)),
    });
    assert_screen("preheat_no_go", &screen(&a, W, H));
}

#[test]
fn preheat_view_read_only() {
    let s = screen(&show(View::Preheat, true), W, H);
    assert!(s.contains("read-only: preheat is disabled"), "{s}");
    assert_screen("preheat_read_only", &s);
}

#[test]
fn redis_view() {
    assert_screen("redis", &screen(&show(View::Redis, false), W, H));
}

#[test]
fn audit_view() {
    assert_screen("audit", &screen(&show(View::Audit, false), W, H));
}

#[test]
fn help_view() {
    assert_screen("help", &screen(&show(View::Help, false), W, H));
}

#[test]
fn stale_data_keeps_the_numbers_and_says_so() {
    let mut a = show(View::Stock, false);
    a.update(Action::Status(
        id("spring-sale"),
        Fetched {
            at: at(4),
            taken_at: fixtures::t(4),
            result: Err(Error::unavailable(
                "Redis at redis://ops:***@10.0.0.5:6379 timed out: timed out",
            )),
        },
    ));
    a.update(Action::Redis(Fetched {
        at: at(4),
        taken_at: fixtures::t(4),
        result: Err(Error::unavailable(
            "Redis at redis://ops:***@10.0.0.5:6379 timed out",
        )),
    }));
    a.update(Action::Tick(at(9)));
    let s = screen(&a, W, H);
    assert!(s.contains("stale 7s"), "{s}");
    assert_screen("stock_stale", &s);
}

#[test]
fn nothing_reachable_at_start() {
    let mut a = crate::tui::app::App::new(fixtures::config(false), None, at(0));
    fn down<T>(what: &str) -> Fetched<T> {
        Fetched {
            at: at(1),
            taken_at: fixtures::t(1),
            result: Err(Error::unavailable(format!(
                "{what} is unreachable: connection refused"
            ))),
        }
    }
    a.update(Action::Activities(down(
        "database at postgres://ops:***@db.internal:5432/shop",
    )));
    a.update(Action::Redis(down(
        "Redis at redis://ops:***@10.0.0.5:6379",
    )));
    a.update(Action::Tick(at(2)));
    assert_screen("unreachable", &screen(&a, W, H));
    a.update(Action::SwitchView(View::Activities));
    let s = screen(&a, W, H);
    assert!(
        s.contains("No data: database at postgres://ops:***@db.internal"),
        "{s}"
    );
}

#[test]
fn small_and_resized_terminals() {
    let a = show(View::Stock, false);
    assert_screen("too_small", &screen(&a, 40, 8));
    // Just above the minimum every view still draws without a panic.
    for v in View::TABBED.into_iter().chain([View::Help]) {
        let mut a = show(v, false);
        a.update(Action::Resize(60, 12));
        let s = screen(&a, 60, 12);
        assert!(s.contains("seckill-console"), "{v:?}:\n{s}");
    }
}

#[test]
fn ten_thousand_products_scroll_to_the_last() {
    let mut a = show(View::Stock, false);
    let mut r = fixtures::report(4, 6);
    r.products = (0..10_000)
        .map(|i| {
            let mut p = r.products[4].clone();
            p.product = format!("p{i:05}");
            p
        })
        .collect();
    a.update(Action::Status(id("spring-sale"), fetched(4, 4, r)));
    let first = screen(&a, W, H);
    assert!(
        first.contains("p00000") && !first.contains("p09999"),
        "{first}"
    );
    a.update(key('G'));
    let last = screen(&a, W, H);
    assert!(last.contains(">p09999"), "{last}");
    assert!(last.contains("10000/10000 products"), "{last}");
}

/// The figures (a top-up of 1,234,567 and an INCRBY of 123,456 on one product) at the
/// narrowest size the console takes and at 80 and 200 columns: each figure whole, the drift
/// with its sign; the columns least needed go first.
#[test]
fn stock_view_big_numbers_at_every_size() {
    let mut r = fixtures::report(4, 0);
    let p = &mut r.products[0];
    p.initial = 1_235_567;
    p.redis_remaining = Some(1_359_012);
    p.db_sold = 14;
    p.drift = Some(123_459);
    let mut a = show(View::Stock, false);
    a.update(Action::Status(id("spring-sale"), fetched(4, 4, r)));
    for (w, h) in [(60, 20), (80, 24), (200, 60)] {
        let s = screen(&a, w, h);
        assert!(s.contains("+123,459"), "{w}x{h}:\n{s}");
        assert_screen(&format!("stock_big_numbers_{w}x{h}"), &s);
    }
}

/// Every view at the sizes operators run it: a 60x20 split pane, an 80x24 terminal, a 200x60
/// screen (issue 20). Stored as `<view>_<w>x<h>.snap`.
#[test]
fn every_view_at_60x20_80x24_and_200x60() {
    for view in View::TABBED.into_iter().chain([View::Help]) {
        for (w, h) in [(60u16, 20u16), (80, 24), (200, 60)] {
            let mut a = show(view, false);
            a.update(Action::Resize(w, h));
            let name = format!(
                "view_{}_{w}x{h}",
                view.title().to_lowercase().replace(' ', "_")
            );
            assert_screen(&name, &screen(&a, w, h));
        }
    }
}
