//! What does not fit is read whole: long confirmations scroll and count only once read to
//! their end, results list every product with the right counts, the help scrolls to its last
//! binding at 80x24, and Enter on a row shows what is behind it.

use super::fixtures::{self, app, screen};
use super::update::preview_report;
use crate::domain::events::{Event, EventId, EventKind};
use crate::ops::detail::{KeyInfo, ProductDetail};
use crate::ops::pause::{PauseReport, PausedProduct};
use crate::tui::action::{Action, Command};
use crate::tui::app::{App, Dialog};
use crate::tui::view::View;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

fn key(c: char) -> Action {
    Action::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE))
}

fn code(k: KeyCode) -> Action {
    Action::Key(KeyEvent::new(k, KeyModifiers::NONE))
}

fn flash(a: &App) -> String {
    a.flash.as_ref().map(|f| f.text.clone()).unwrap_or_default()
}

/// The app on an 80x24 terminal.
fn small() -> App {
    let mut a = app(false);
    a.update(Action::Resize(80, 24));
    a
}

#[test]
fn an_activity_wide_fix_of_56_products_counts_only_once_read_to_its_end() {
    let mut a = small();
    a.update(key('5'));
    let seq = match a.update(key('F')).as_slice() {
        [Command::PreviewFix { seq, .. }] => *seq,
        other => panic!("{other:?}"),
    };
    let mut report = preview_report();
    let one = report.products[0].clone();
    report.products = (0..56)
        .map(|i| {
            let mut p = one.clone();
            p.product = format!("p{i:04}");
            p
        })
        .collect();
    a.update(Action::FixPreviewed {
        seq,
        result: Ok(report),
    });
    let s = screen(&a, 80, 24);
    assert!(s.contains("p0000"), "{s}");
    assert!(!s.contains("p0055"), "{s}");
    assert!(s.contains("below: Down / PgDn / End"), "{s}");
    // The id typed and Enter: refused, the list has not been seen to its end.
    for c in "spring-sale".chars() {
        a.update(key(c));
    }
    let cmds = fixtures::confirm(&mut a);
    assert!(cmds.is_empty(), "{cmds:?}");
    assert!(
        flash(&a).starts_with("read it all first: "),
        "{}",
        flash(&a)
    );
    assert!(matches!(a.dialog, Some(Dialog::Confirm(_))));
    // Scrolled to the end, the last product is on screen and the same Enter applies.
    a.update(code(KeyCode::End));
    let s = screen(&a, 80, 24);
    assert!(s.contains("p0055"), "{s}");
    assert!(s.contains("(end; Up / PgUp / Home)"), "{s}");
    // Scrolling back up keeps it read.
    a.update(code(KeyCode::Home));
    let cmds = fixtures::confirm(&mut a);
    match cmds.as_slice() {
        [
            Command::ApplyFix {
                product: None,
                confirmed: Some(c),
                ..
            },
        ] => assert_eq!(c.len(), 56),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_short_confirmation_needs_no_scrolling() {
    let mut a = small();
    a.update(key('z'));
    let cmds = fixtures::confirm(&mut a);
    assert!(
        matches!(cmds.as_slice(), [Command::SetPaused { .. }]),
        "{cmds:?}"
    );
}

#[test]
fn the_pause_result_counts_each_outcome_and_lists_every_product() {
    let mut a = small();
    a.update(key('Z'));
    for c in "spring-sale".chars() {
        a.update(key(c));
    }
    let seq = match fixtures::confirm(&mut a).as_slice() {
        [Command::SetPaused { seq, .. }] => *seq,
        other => panic!("{other:?}"),
    };
    let products = (0..2000)
        .map(|i| PausedProduct {
            product: format!("p{i:04}"),
            was_paused: Some(i >= 1823),
            paused: Some(true),
            changed: i < 1823,
            // The last one: Redis had lost its pause, written back (its note is said).
            note: (i == 1999).then(|| "Redis had lost the pause: written back".into()),
            applied: true,
            node: None,
            error: None,
        })
        .collect();
    a.update(Action::PauseDone {
        seq,
        result: Ok(PauseReport {
            activity: "spring-sale".into(),
            action: "pause",
            products,
            errors: 0,
            unreachable: false,
        }),
    });
    let Some(Dialog::Message { title, lines, .. }) = &a.dialog else {
        panic!("{:?}", a.dialog);
    };
    assert_eq!(title, "pause: 1,823 paused, 177 already so");
    assert_eq!(lines.len(), 2000);
    a.update(code(KeyCode::End));
    let s = screen(&a, 80, 24);
    assert!(
        s.contains("p1999                    Redis had lost the pause: written back"),
        "{s}"
    );
    assert!(s.contains("already so"), "{s}");
    assert!(s.contains("of 2000 (end"), "{s}");
}

#[test]
fn the_help_scrolls_to_its_last_binding_at_80x24() {
    let mut a = small();
    a.update(key('?'));
    let s = screen(&a, 80, 24);
    assert!(!s.contains("dry-run form"), "{s}");
    assert!(s.contains("below: Down / PgDn / End"), "{s}");
    a.update(code(KeyCode::End));
    let s = screen(&a, 80, 24);
    for text in [
        "dry-run form",
        "confirm / cancel a dialog",
        "scroll a dialog",
    ] {
        assert!(s.contains(text), "{text} not on\n{s}");
    }
    // Nothing in the help is cut: no clipping mark inside its box, and the footer still shows
    // every view's key and "? help".
    let inside: String = s
        .lines()
        .skip_while(|l| !l.starts_with("┌ Help"))
        .take_while(|l| !l.starts_with('└'))
        .collect();
    assert!(!inside.contains("..."), "{s}");
    assert!(
        s.contains("Every write asks first") || s.contains("read-only"),
        "{s}"
    );
    assert!(s.contains("9") && s.contains("? help"), "{s}");
    a.update(code(KeyCode::Home));
    assert!(screen(&a, 80, 24).contains("show a view"));
}

fn detail() -> ProductDetail {
    let k = |suffix: &'static str, kind: &str, size: Option<i64>| KeyInfo {
        suffix,
        name: format!("seckill:{{spring-sale:laptop}}:{suffix}"),
        kind: kind.into(),
        size,
        ttl_ms: Some(86_400_000),
        bytes: Some(120),
    };
    ProductDetail {
        product: "laptop".into(),
        keys: vec![
            k("stock", "string", Some(2)),
            k("meta", "hash", Some(9)),
            k("buyers", "hash", Some(1_234)),
            k("ledger", "none", None),
            k("events", "stream", Some(1_240)),
            k("books", "hash", Some(6)),
        ],
        stock: Some("23".into()),
        meta: vec![("initial".into(), "1000".into())],
        events: vec![Event {
            id: EventId {
                ms: 1_700_000_000_000,
                seq: 3,
            },
            kind: EventKind::Deducted,
            request_id: "req-77".into(),
            quantity: 2,
        }],
        events_bad: 0,
        orders: vec![crate::db::orders::OrderCount {
            status: "paid".into(),
            orders: 1_200,
        }],
        orders_capped: false,
        writes: Vec::new(),
        read_at: chrono::Utc::now(),
    }
}

#[test]
fn enter_on_a_stock_row_reads_that_products_detail() {
    let mut a = small();
    let want = a.selected_product().map(|p| p.product.clone());
    let cmds = a.update(code(KeyCode::Enter));
    let seq = match cmds.as_slice() {
        [Command::ReadDetail { seq, product, .. }] if Some(product) == want.as_ref() => *seq,
        other => panic!("{other:?} for {want:?}"),
    };
    // → does the same.
    a.update(code(KeyCode::Esc));
    assert!(matches!(
        a.update(code(KeyCode::Right)).as_slice(),
        [Command::ReadDetail { .. }]
    ));
    let seq2 = match &a.dialog {
        Some(Dialog::Working { seq, .. }) => *seq,
        other => panic!("{other:?}"),
    };
    // The answer of the closed request is dropped; the open one shows.
    a.update(Action::DetailRead {
        seq,
        result: Ok(Box::new(detail())),
    });
    assert!(matches!(a.dialog, Some(Dialog::Working { .. })));
    a.update(Action::DetailRead {
        seq: seq2,
        result: Ok(Box::new(detail())),
    });
    let Some(Dialog::Message { title, lines, .. }) = &a.dialog else {
        panic!("{:?}", a.dialog);
    };
    assert_eq!(title, "laptop of spring-sale");
    let text = lines.join("\n");
    for want in [
        "stock   string",
        "buyers  hash           1,234",
        "ledger  none",
        "paid",
        "1,200 order(s)",
        "req-77",
        "Orders by status",
    ] {
        assert!(text.contains(want), "{want} not in\n{text}");
    }
}

#[test]
fn enter_shows_a_compensation_entry_and_an_audit_row_whole() {
    let mut a = small();
    a.update(key('4'));
    assert!(a.update(code(KeyCode::Enter)).is_empty());
    let Some(Dialog::Message { lines, .. }) = &a.dialog else {
        panic!("{:?}", a.dialog);
    };
    assert!(lines.iter().any(|l| l == "request   req-0001"), "{lines:?}");
    assert!(lines.iter().any(|l| l == "reason: timeout"), "{lines:?}");
    a.update(code(KeyCode::Esc));
    assert!(a.dialog.is_none());
    a.update(key('8'));
    a.update(code(KeyCode::Enter));
    let Some(Dialog::Message { lines, .. }) = &a.dialog else {
        panic!("{:?}", a.dialog);
    };
    assert!(
        lines.iter().any(|l| l.starts_with("actor     alice")),
        "{lines:?}"
    );
    assert_eq!(a.view, View::Audit);
}

#[test]
fn a_long_message_wraps_instead_of_cutting() {
    let mut a = small();
    let long = format!("Connection refused (os error 111) {}", "x".repeat(150));
    a.dialog = Some(Dialog::Message {
        title: "Detail failed".into(),
        lines: vec![long.clone()],
        error: true,
        scroll: 0,
    });
    let s = screen(&a, 80, 24);
    assert!(s.contains("Connection refused (os error 111)"), "{s}");
    assert!(s.matches('x').count() >= 150, "{s}");
}

#[test]
fn the_footer_keeps_every_view_and_help_down_to_60_columns() {
    for (w, h) in [(60, 20), (80, 24), (100, 30)] {
        for c in "1234567890".chars() {
            let mut a = app(false);
            a.update(Action::Resize(w, h));
            a.update(key(c));
            let s = screen(&a, w, h);
            let footer: Vec<&str> = s.lines().rev().take(2).collect();
            let (keys, views) = (footer[0], footer[1]);
            assert!(keys.contains("? help") && keys.contains("q quit"), "{s}");
            // Every view's key, the current one bracketed (marked without colour too).
            for v in "1234567890".chars() {
                assert!(views.contains(v), "{v} missing at {w}x{h}: {s}");
            }
            assert!(
                views.contains(&format!("{c}[")),
                "{c} not marked at {w}x{h}: {s}"
            );
        }
    }
}

/// The README's key table, as the help lists the bindings.
fn readme_key_table() -> String {
    let mut t = String::from("| key | does | where |\n| --- | --- | --- |\n");
    for (k, does, where_) in crate::tui::keys::BINDINGS {
        t.push_str(&format!("| `{k}` | {does} | {where_} |\n"));
    }
    t
}

/// The README and `?` agree: the README's key table is the help's, row for row.
#[test]
fn the_readme_key_table_is_the_help() {
    let readme = include_str!("../../../README.md");
    let want = readme_key_table();
    assert!(
        readme.contains(&want),
        "the README's key table differs from the help; put this in \"The TUI\":\n\n{want}"
    );
}

/// A terminal without Unicode gets ASCII only, in every view, a dialog and the help included.
#[test]
fn an_ascii_terminal_gets_ascii_everywhere() {
    let mut a = app(false);
    a.config.ascii = true;
    for c in "1234567890?".chars() {
        a.update(key(c));
        let s = screen(&a, 100, 30);
        assert!(s.is_ascii(), "view {c}:\n{s}");
        a.update(code(KeyCode::Esc));
    }
    a.update(key('2'));
    a.update(key('z'));
    let s = screen(&a, 100, 30);
    assert!(s.contains("+-") && s.contains('|'), "borders: {s}");
    assert!(s.contains('#') || s.contains('.'), "the gauges: {s}");
    assert!(s.is_ascii(), "{s}");
}

/// A table too wide for the terminal scrolls its columns: `l` brings in those dropped on the
/// right (the sold gauge at 60 columns), `h` goes back, and the frame says how many are off.
#[test]
fn l_and_h_scroll_a_wide_tables_columns() {
    let mut a = app(false);
    a.update(Action::Resize(60, 20));
    a.update(key('2'));
    let header = |s: &str| -> String {
        s.lines()
            .find(|l| l.starts_with("│ product"))
            .unwrap_or_default()
            .to_string()
    };
    let s = screen(&a, 60, 20);
    assert!(
        !header(&s).contains("rate/s"),
        "the rate is dropped at first: {s}"
    );
    assert!(s.contains("h / l:") && s.contains("off screen"), "{s}");
    for _ in 0..4 {
        a.update(key('l'));
    }
    let s = screen(&a, 60, 20);
    assert!(header(&s).contains("rate/s"), "{s}");
    assert!(
        header(&s).contains("drift") && header(&s).contains("state"),
        "never scrolled out: {s}"
    );
    for _ in 0..4 {
        a.update(key('h'));
    }
    assert_eq!(a.cursor(crate::tui::view::View::Stock).hscroll, 0);
    // `l` stops where the last column is in view: pressed on and on, it blanked columns with
    // nothing more to show, and `h` then took as many presses before anything came back.
    for _ in 0..12 {
        a.update(key('l'));
        screen(&a, 60, 20);
    }
    let far = screen(&a, 60, 20);
    assert!(header(&far).contains("rate/s"), "{far}");
    a.update(key('h'));
    let back = screen(&a, 60, 20);
    assert_ne!(
        header(&back),
        header(&far),
        "one h brings a column back: {back}"
    );
}
