//! The event log (`0`), the bell on a newly raised critical alert, and alerts of one kind on
//! many products folded into one line.

use super::fixtures::{app, fetched, id, report, screen};
use crate::domain::alerts::{AlertKind, product_alerts};
use crate::tui::action::{Action, Command};
use crate::tui::app::{App, Dialog};
use crate::tui::view::View;
use crate::tui::views::alerts::AlertLine;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

fn key(c: char) -> Action {
    Action::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE))
}

fn code(k: KeyCode) -> Action {
    Action::Key(KeyEvent::new(k, KeyModifiers::NONE))
}

/// The fixture's report at `t(secs)` with the phone's stock gone from Redis (a new critical
/// `missing` alert).
fn phone_lost(secs: i64) -> crate::ops::status::StatusReport {
    let mut r = report(secs, 6);
    if let Some(p) = r.products.iter_mut().find(|p| p.product == "phone") {
        p.redis_remaining = None;
        p.state = crate::domain::stock::State::Missing;
        p.drift = None;
    }
    r.alerts = product_alerts(&r.products);
    r
}

#[test]
fn the_event_log_keeps_what_changed_and_the_bell_rings_on_a_new_critical_alert() {
    let mut a = app(false);
    // The fixture's two snapshots: the first raised what it held; nothing since.
    let raised_at_start = a.views.events.log.len();
    assert!(raised_at_start > 0);
    let cmds = a.update(Action::Status(
        id("spring-sale"),
        fetched(4, 4, phone_lost(4)),
    ));
    assert_eq!(cmds, vec![Command::Bell], "a new critical alert rings");
    let s = {
        a.update(key('0'));
        screen(&a, 120, 30)
    };
    assert!(s.contains("Events"), "{s}");
    assert!(s.contains("missing"), "{s}");
    assert!(s.contains("ok -> missing"), "the phone's state change: {s}");
    // Enter shows the event whole, as `watch` prints it.
    a.update(code(KeyCode::Enter));
    let Some(Dialog::Message { lines, .. }) = &a.dialog else {
        panic!("{:?}", a.dialog);
    };
    assert!(
        lines[0].contains("state   phone ok -> missing"),
        "{lines:?}"
    );
    a.update(code(KeyCode::Esc));
    // The same alert again rings nothing; switched off, a new one rings nothing either.
    let again = a.update(Action::Status(
        id("spring-sale"),
        fetched(5, 5, phone_lost(5)),
    ));
    assert!(again.is_empty(), "{again:?}");
    a.update(key('b'));
    assert!(!a.bell);
    let cleared = a.update(Action::Status(
        id("spring-sale"),
        fetched(6, 6, report(6, 6)),
    ));
    assert!(cleared.is_empty());
    let back = a.update(Action::Status(
        id("spring-sale"),
        fetched(7, 7, phone_lost(7)),
    ));
    assert!(back.is_empty(), "the bell is off: {back:?}");
    let s = screen(&a, 120, 30);
    assert!(s.contains("cleared"), "{s}");
}

/// A report where `n` products lost their stock key (Redis restarted empty).
fn many_missing(n: usize) -> crate::ops::status::StatusReport {
    let mut r = report(4, 6);
    let template = r.products[0].clone();
    r.products = (0..n)
        .map(|i| {
            let mut p = template.clone();
            p.product = format!("p{i:04}");
            p.redis_remaining = None;
            p.state = crate::domain::stock::State::Missing;
            p.drift = None;
            p
        })
        .collect();
    r.alerts = product_alerts(&r.products);
    r
}

/// Five products missing, the last of them (by id, so named last) made critical: the folded
/// line names it first, and lists it first when open.
#[test]
fn a_critical_alert_heads_its_folded_group() {
    let mut a: App = app(false);
    let mut r = many_missing(5);
    for alert in r.alerts.iter_mut() {
        if alert.product.as_deref() == Some("p0004") {
            alert.severity = crate::domain::alerts::Severity::Critical;
        } else {
            alert.severity = crate::domain::alerts::Severity::Warning;
        }
    }
    a.update(Action::Status(id("spring-sale"), fetched(4, 4, r)));
    a.update(key('3'));
    let lines = a.views.alerts.lines(&a.stock);
    let AlertLine::Group { rows, severity, .. } = &lines[0] else {
        panic!("{lines:?}");
    };
    assert_eq!(*severity, crate::domain::alerts::Severity::Critical);
    assert_eq!(rows[0].alert.product.as_deref(), Some("p0004"));
    let s = screen(&a, 120, 30);
    assert!(s.contains("p0004, p0000, p0001, ..."), "{s}");
}

#[test]
fn two_thousand_missing_products_fold_into_one_line_that_enter_opens() {
    let mut a: App = app(false);
    a.update(Action::Status(
        id("spring-sale"),
        fetched(4, 4, many_missing(2000)),
    ));
    a.update(key('3'));
    let lines = a.views.alerts.lines(&a.stock);
    assert_eq!(lines.len(), 1, "one line for 2,000 alerts of a kind");
    assert!(matches!(
        &lines[0],
        AlertLine::Group { kind: AlertKind::Missing, rows, open: false, .. } if rows.len() == 2000
    ));
    let s = screen(&a, 120, 30);
    assert!(s.contains("missing x2000"), "{s}");
    assert!(s.contains("2000 products"), "{s}");
    assert!(s.contains("Enter lists them"), "{s}");
    a.update(code(KeyCode::Enter));
    assert_eq!(a.row_count(View::Alerts), 2001);
    let s = screen(&a, 120, 30);
    assert!(s.contains("  p0000") || s.contains("  p1999"), "{s}");
    assert!(s.contains("Enter folds them"), "{s}");
    a.update(code(KeyCode::Enter));
    assert_eq!(a.row_count(View::Alerts), 1);
}

/// The Alerts view names each product as imported, and `/` finds an alert by that name (the
/// alerts themselves carry ids only).
#[test]
fn alerts_show_product_names_and_the_filter_matches_them() {
    let mut a: App = app(false);
    a.update(key('3'));
    let s = screen(&a, 120, 30);
    assert!(s.contains("Laptop Pro 14"), "{s}");
    let all = a.row_count(View::Alerts);
    assert!(all > 1, "{s}");
    a.update(key('/'));
    for c in "平板".chars() {
        a.update(key(c));
    }
    assert_eq!(a.row_count(View::Alerts), 1);
    let rows = a.views.alerts.rows(&a.stock);
    assert_eq!(rows[0].alert.product.as_deref(), Some("tablet"));
}

/// The Alerts cursor stays on the alert the operator chose when a new one arrives above it (it
/// stayed on the row position, so Enter opened the newcomer's product); when its alert clears
/// it stays where it was, on the alert now there (no write acts on an alert).
#[test]
fn the_alerts_cursor_stays_on_its_alert_when_a_new_one_arrives() {
    let mut a = app(false);
    a.update(key('3'));
    let before: Vec<String> = a
        .views
        .alerts
        .lines(&a.stock)
        .iter()
        .map(AlertLine::key)
        .collect();
    // The last alert of a product other than the phone (those survive the next report).
    let last = before
        .iter()
        .rposition(|k| k.contains(" on ") && !k.contains("phone"))
        .expect("the fixture has product alerts");
    assert!(last >= 1, "{before:?}");
    for _ in 0..last {
        a.update(key('j'));
    }
    let chosen = before[last].clone();
    a.update(Action::Status(
        id("spring-sale"),
        fetched(4, 4, phone_lost(4)),
    ));
    let lines = a.views.alerts.lines(&a.stock);
    assert!(
        lines[0].key().starts_with("missing on phone"),
        "the new alert is the newest: {:?}",
        lines.iter().map(AlertLine::key).collect::<Vec<_>>()
    );
    let at = a.views.alerts.cursor.row().expect("a row is highlighted");
    assert_eq!(lines[at].key(), chosen);
    assert!(at > last, "it moved down with its alert: {at}");
    // Its alert clears: the cursor stays on that line, now the one before.
    let mut r = phone_lost(6);
    r.alerts.retain(|al| one(al).key() != chosen);
    a.update(Action::Status(id("spring-sale"), fetched(6, 6, r)));
    let lines = a.views.alerts.lines(&a.stock);
    let stayed = a
        .views
        .alerts
        .cursor
        .row()
        .expect("a row is still highlighted");
    assert_eq!(stayed, at.min(lines.len() - 1));
    assert_ne!(lines[stayed].key(), chosen);
}

/// An alert as a line of its own, for its key.
fn one(alert: &crate::domain::alerts::Alert) -> AlertLine<'_> {
    AlertLine::One {
        row: crate::tui::views::alerts::AlertRow {
            alert,
            first_seen: super::fixtures::t(0),
            age_secs: 0,
        },
        member: false,
    }
}

/// What an app server did against its contract shows in the Alerts view like any alert, by
/// kind, with the request behind it (docs/app-servers.md).
#[test]
fn an_app_servers_breach_is_an_alert_naming_its_request() {
    use crate::domain::faults::{Example, Fault};
    let mut a: App = app(false);
    let mut r = report(4, 6);
    r.products[0].faults = Some(Box::new(crate::domain::faults::Faults {
        order_mismatch: Some(Fault {
            count: 1,
            units: 1,
            examples: vec![Example {
                request_id: "req-42".into(),
                detail: "the order holds 2 unit(s), its deduction took 1".into(),
            }],
        }),
        ..Default::default()
    }));
    r.alerts = crate::domain::alerts::product_alerts(&r.products);
    a.update(Action::Status(id("spring-sale"), fetched(4, 4, r)));
    a.update(key('3'));
    a.update(key('/'));
    for c in "req-42".chars() {
        a.update(key(c));
    }
    assert_eq!(a.row_count(View::Alerts), 1);
    let s = screen(&a, 200, 30);
    assert!(
        s.contains("order_mismatch") || s.contains("order mismatch"),
        "{s}"
    );
    assert!(s.contains("req-42"), "{s}");
}
