//! The update logic, driven by Actions (mostly keys) without a terminal: what the operator
//! does, what the state becomes, which Commands come out.

use super::fixtures::{self, app, at, fetched, id, screen};
use crate::domain::stock::State;
use crate::error::Error;
use crate::ops::compensation::Which;
use crate::ops::compensation::{Resolution, ResolveReport};
use crate::ops::fix::{FixProduct, FixReport};
use crate::tui::action::{Action, Command};
use crate::tui::app::{App, Dialog};
use crate::tui::feed::Fetched;
use crate::tui::view::View;
use crate::tui::views::stock::SortKey;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

fn key(c: char) -> Action {
    Action::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE))
}

fn code(k: KeyCode) -> Action {
    Action::Key(KeyEvent::new(k, KeyModifiers::NONE))
}

fn keys(app: &mut App, text: &str) -> Vec<Command> {
    text.chars().flat_map(|c| app.update(key(c))).collect()
}

/// The product ids of the stock table, in order.
fn stock_ids(app: &App) -> Vec<String> {
    let r = app.stock.report().expect("report");
    app.views
        .stock
        .order
        .iter()
        .map(|&i| r.products[i].product.clone())
        .collect()
}

/// A preview of an activity-wide fix, as `ops::fix` returns it.
pub fn preview_report() -> FixReport {
    let p = FixProduct::example;
    FixReport {
        activity: "spring-sale".into(),
        preview: true,
        products: vec![
            p("laptop", State::Drift, Some("23"), 18),
            p("tablet", State::Negative, Some("-2"), 0),
            FixProduct {
                plan: "rebuild",
                rebuild: Some("lost: the stock key".into()),
                lost: vec![crate::domain::meta::Piece::Stock],
                ..p("watch", State::Missing, None, 10)
            },
        ],
        left: Vec::new(),
        conflicts: 0,
        errors: 0,
        failure: None,
    }
}

#[test]
fn keys_switch_views_and_help_returns() {
    let mut a = app(false);
    assert_eq!(a.view, View::Stock);
    for (c, v) in [
        ('1', View::Activities),
        ('4', View::Compensation),
        ('8', View::Audit),
        ('9', View::DryRun),
        ('0', View::Events),
    ] {
        a.update(key(c));
        assert_eq!(a.view, v);
    }
    a.update(code(KeyCode::Tab));
    assert_eq!(a.view, View::Activities, "Tab wraps around");
    a.update(code(KeyCode::BackTab));
    assert_eq!(a.view, View::Events);
    a.update(code(KeyCode::BackTab));
    assert_eq!(a.view, View::DryRun);
    a.update(key('?'));
    assert_eq!(a.view, View::Help);
    a.update(code(KeyCode::Esc));
    assert_eq!(a.view, View::DryRun, "Esc leaves Help for the view before");
    a.update(key('?'));
    a.update(key('?'));
    assert_eq!(a.view, View::DryRun, "? toggles Help");
}

#[test]
fn selection_moves_and_stays_inside_the_table() {
    let mut a = app(false);
    let n = a.row_count(View::Stock);
    assert_eq!(n, 6);
    keys(&mut a, "jj");
    assert_eq!(a.cursor(View::Stock).selected, 2);
    a.update(code(KeyCode::Up));
    assert_eq!(a.cursor(View::Stock).selected, 1);
    keys(&mut a, "G");
    assert_eq!(a.cursor(View::Stock).selected, n - 1);
    keys(&mut a, "jjj");
    assert_eq!(
        a.cursor(View::Stock).selected,
        n - 1,
        "no moving past the end"
    );
    keys(&mut a, "g");
    assert_eq!(a.cursor(View::Stock).selected, 0);
    keys(&mut a, "kk");
    assert_eq!(a.cursor(View::Stock).selected, 0);
    a.update(code(KeyCode::PageDown));
    assert_eq!(a.cursor(View::Stock).selected, n - 1);
}

#[test]
fn filter_narrows_the_table_and_esc_clears_it() {
    let mut a = app(false);
    keys(&mut a, "/ta");
    assert!(a.filtering);
    assert_eq!(stock_ids(&a), vec!["tablet"], "filtered as typed");
    a.update(code(KeyCode::Backspace));
    // "t" matches ids and states: laptop (drift), tablet (negative), watch.
    assert_eq!(stock_ids(&a), vec!["laptop", "tablet", "watch"]);
    a.update(code(KeyCode::Backspace));
    keys(&mut a, "missing");
    a.update(code(KeyCode::Enter));
    assert!(!a.filtering, "Enter keeps the filter and closes the input");
    assert_eq!(stock_ids(&a), vec!["watch"], "states match too");
    // Keys are bindings again once the input is closed.
    keys(&mut a, "j");
    assert_eq!(a.filter(View::Stock), "missing");
    a.update(code(KeyCode::Esc));
    assert_eq!(a.filter(View::Stock), "");
    assert_eq!(a.row_count(View::Stock), 6);
    // Each table has its own filter.
    keys(&mut a, "8/fix");
    assert_eq!(a.views.audit.rows().len(), 1);
    a.update(Action::SwitchView(View::Stock));
    assert!(!a.filtering, "switching views closes the input");
    assert_eq!(a.row_count(View::Stock), 6);
    assert_eq!(a.filter(View::Audit), "fix");
}

#[test]
fn sort_cycles_columns_and_reverses() {
    let mut a = app(false);
    assert_eq!(a.views.stock.sort, SortKey::Product);
    assert_eq!(stock_ids(&a)[0], "case");
    keys(&mut a, "S");
    assert_eq!(stock_ids(&a)[0], "watch", "product, descending");
    keys(&mut a, "s");
    assert_eq!(a.views.stock.sort, SortKey::Remaining);
    // Descending by Redis stock: the biggest first, the missing key (no value) last.
    assert_eq!(
        stock_ids(&a),
        vec!["case", "charger", "phone", "laptop", "tablet", "watch"]
    );
    keys(&mut a, "sss");
    assert_eq!(a.views.stock.sort, SortKey::State);
    assert_eq!(stock_ids(&a)[0], "tablet", "negative is the worst state");
    keys(&mut a, "s");
    assert_eq!(a.views.stock.sort, SortKey::Rate);
    assert_eq!(stock_ids(&a)[0], "phone", "phone sold 6 units in 2 s");
    assert!((a.stock.rates["phone"] - 3.0).abs() < 1e-9);
    keys(&mut a, "4s");
    assert!(
        a.flash
            .as_ref()
            .is_some_and(|f| f.text.contains("Stock view"))
    );
}

#[test]
fn enter_selects_an_activity_and_drops_the_old_data() {
    let mut a = app(false);
    keys(&mut a, "1");
    // The list is newest window first: autumn, summer, flash-2, spring-sale, winter.
    keys(&mut a, "j");
    let cmds = a.update(code(KeyCode::Enter));
    assert_eq!(cmds, vec![Command::Watch(id("summer"))]);
    assert_eq!(a.view, View::Stock);
    assert_eq!(a.activity, Some(id("summer")));
    assert!(a.stock.report().is_none(), "spring-sale's numbers are gone");
    // A late answer for the activity the operator left is ignored.
    a.update(Action::Status(
        id("spring-sale"),
        fetched(4, 4, fixtures::report(4, 0)),
    ));
    assert!(a.stock.report().is_none());
    let s = screen(&a, 100, 30);
    assert!(
        s.contains("activity summer") && s.contains("waiting for data"),
        "{s}"
    );
}

#[test]
fn the_first_activities_list_picks_the_live_activity() {
    let mut a = App::new(fixtures::config(false), None, at(0));
    let cmds = a.update(Action::Activities(fetched(0, 0, fixtures::activities())));
    assert_eq!(cmds, vec![Command::Watch(id("spring-sale"))]);
    // A later list does not override the operator's choice.
    a.update(Action::SelectActivity(id("winter")));
    let cmds = a.update(Action::Activities(fetched(1, 1, fixtures::activities())));
    assert!(cmds.is_empty());
    assert_eq!(a.activity, Some(id("winter")));
}

#[test]
fn activity_wide_fix_previews_then_asks_for_the_activity_id() {
    let mut a = app(false);
    keys(&mut a, "5");
    let cmds = keys(&mut a, "F");
    let seq = match cmds.as_slice() {
        [
            Command::PreviewFix {
                seq,
                activity,
                product: None,
            },
        ] if *activity == id("spring-sale") => *seq,
        other => panic!("expected a preview of the whole activity, got {other:?}"),
    };
    assert!(matches!(a.dialog, Some(Dialog::Working { .. })));
    // Nothing is written before the operator has seen the preview.
    assert!(keys(&mut a, "y").is_empty());
    a.update(Action::FixPreviewed {
        seq,
        result: Ok(preview_report()),
    });
    let s = screen(&a, 100, 30);
    assert!(s.contains("23 -> 18") && s.contains("missing -> 10"), "{s}");
    // y is text here, not a yes; a wrong id does not confirm.
    assert!(keys(&mut a, "y").is_empty());
    assert!(a.update(code(KeyCode::Enter)).is_empty());
    match &a.dialog {
        Some(Dialog::Confirm(c)) => assert!(c.mismatch && c.input == "y"),
        other => panic!("the dialog stays open, got {other:?}"),
    }
    a.update(code(KeyCode::Backspace));
    assert!(keys(&mut a, "spring-sale").is_empty());
    let cmds = a.update(code(KeyCode::Enter));
    let apply = match cmds.as_slice() {
        [
            Command::ApplyFix {
                seq,
                activity,
                product: None,
                confirmed: Some(plan),
            },
        ] if *activity == id("spring-sale") => {
            // Exactly what the preview showed, product by product: the fix applies those and
            // each only while it still shows that.
            assert_eq!(plan, &preview_report().confirmation());
            *seq
        }
        other => panic!("expected the confirmed fix, got {other:?}"),
    };
    assert!(a.busy.is_some());
    // While it runs, another write is refused (the working window swallows keys, so the
    // Action is sent directly).
    a.update(Action::FixProduct);
    assert!(
        a.flash
            .as_ref()
            .is_some_and(|f| f.text.contains("still running"))
    );
    let mut done = preview_report();
    done.preview = false;
    for p in &mut done.products {
        p.applied = true;
    }
    // The fix ran for seconds: the result's moment starts when it opens, not at the confirm.
    a.update(Action::Tick(fixtures::at(30)));
    let cmds = a.update(Action::FixApplied {
        seq: apply,
        result: Ok(done),
    });
    assert_eq!(cmds, vec![Command::RefreshNow]);
    assert!(a.busy.is_none());
    match &a.dialog {
        Some(Dialog::Message { title, error, .. }) => {
            assert_eq!(title, "Fix applied to 3 product(s)");
            assert!(!error);
        }
        other => panic!("expected the result, got {other:?}"),
    }
    // A key the moment it opened (a `q` typed while the fix ran) does not close it unread.
    a.update(key('q'));
    assert!(
        matches!(a.dialog, Some(Dialog::Message { .. })),
        "{:?}",
        a.dialog
    );
    assert!(
        a.flash
            .as_ref()
            .is_some_and(|f| f.text.starts_with("too quick"))
    );
    fixtures::read_a_moment(&mut a);
    a.update(code(KeyCode::Esc));
    assert!(a.dialog.is_none());
}

#[test]
fn product_fix_asks_yes_or_no() {
    let mut a = app(false);
    keys(&mut a, "5"); // Reconcile: worst first, tablet (negative) on top
    let cmds = keys(&mut a, "f");
    let seq = match cmds.as_slice() {
        [Command::PreviewFix { seq, product, .. }] => {
            assert_eq!(product.as_deref(), Some("tablet"));
            *seq
        }
        other => panic!("{other:?}"),
    };
    let mut one = preview_report();
    one.products.retain(|p| p.product == "tablet");
    a.update(Action::FixPreviewed {
        seq,
        result: Ok(one),
    });
    let cmds = fixtures::confirm(&mut a);
    match cmds.as_slice() {
        [
            Command::ApplyFix {
                product: Some(p),
                confirmed: Some(plan),
                ..
            },
        ] if p == "tablet" => {
            let products: Vec<&String> = plan.keys().collect();
            assert_eq!(products, vec!["tablet"], "only the previewed product");
        }
        other => panic!("expected the confirmed fix of tablet, got {other:?}"),
    }
}

#[test]
fn a_cancelled_preview_is_ignored_when_it_arrives() {
    let mut a = app(false);
    keys(&mut a, "5");
    let seq = match keys(&mut a, "F").as_slice() {
        [Command::PreviewFix { seq, .. }] => *seq,
        other => panic!("{other:?}"),
    };
    a.update(code(KeyCode::Esc));
    a.update(Action::FixPreviewed {
        seq,
        result: Ok(preview_report()),
    });
    assert!(a.dialog.is_none());
    // An ok product has nothing to fix: no preview, a note.
    keys(&mut a, "2");
    while a.selected_product().is_some_and(|p| p.product != "charger") {
        keys(&mut a, "j");
    }
    assert!(keys(&mut a, "f").is_empty());
    assert!(
        a.flash
            .as_ref()
            .is_some_and(|f| f.text.contains("charger is ok"))
    );
}

#[test]
fn a_failed_preview_says_why() {
    let mut a = app(false);
    keys(&mut a, "5");
    let seq = match keys(&mut a, "F").as_slice() {
        [Command::PreviewFix { seq, .. }] => *seq,
        other => panic!("{other:?}"),
    };
    a.update(Action::FixPreviewed {
        seq,
        result: Err(Error::unavailable(
            "Redis at redis://ops:***@10.0.0.5:6379 timed out",
        )),
    });
    assert!(
        matches!(&a.dialog, Some(Dialog::Message { error: true, lines, .. }) if lines[0].contains("timed out"))
    );
}

#[test]
fn read_only_refuses_every_write_before_any_command() {
    let mut a = app(true);
    for (view, k) in [
        ("2", 'z'),
        ("2", 'Z'),
        ("2", 'U'),
        ("2", 't'),
        ("4", 'r'),
        ("4", 'R'),
        ("6", 'p'),
        ("6", 'P'),
        ("9", 'd'),
    ] {
        keys(&mut a, view);
        a.flash = None;
        let cmds = a.update(key(k));
        assert!(cmds.is_empty(), "{k} on {view} emitted {cmds:?}");
        assert!(a.dialog.is_none(), "{k} on {view} opened a dialog");
        let f = a.flash.as_ref().expect("a refusal is shown");
        assert!(f.error && f.text.contains("read-only mode"), "{}", f.text);
    }
}

/// An oversold product has nothing for a fix to write (its stock is on its counters; only the
/// shop can undo a sale): `F` says so and why, never that every product matches the truth.
#[test]
fn a_fix_with_nothing_to_write_names_what_is_still_not_ok() {
    let mut report = preview_report();
    report.products.clear();
    report.left = vec![seckill_left("case")];
    let a = previewed_whole_fix(report);
    let Some(Dialog::Message { title, lines, .. }) = &a.dialog else {
        panic!("{:?}", a.dialog);
    };
    assert_eq!(title, "Nothing a fix can write");
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("case (oversold): 3 unit(s)")),
        "{lines:?}"
    );
}

/// Beside products a fix writes, those it cannot change are listed in the same confirmation:
/// the preview named them only when nothing else was to be written.
#[test]
fn a_fix_preview_names_what_it_leaves_beside_what_it_writes() {
    let mut report = preview_report();
    assert!(!report.products.is_empty());
    report.left = vec![seckill_left("case")];
    let a = previewed_whole_fix(report);
    let Some(Dialog::Confirm(c)) = &a.dialog else {
        panic!("{:?}", a.dialog);
    };
    assert!(
        c.lines
            .iter()
            .any(|l| l.starts_with("case (oversold): 3 unit(s)")),
        "{:?}",
        c.lines
    );
}

/// `F` on the Stock view, its preview answered with `report`.
fn previewed_whole_fix(report: FixReport) -> App {
    let mut a = app(false);
    keys(&mut a, "2");
    let seq = match a.update(key('F')).as_slice() {
        [Command::PreviewFix { seq, .. }] => *seq,
        other => panic!("{other:?}"),
    };
    a.update(Action::FixPreviewed {
        seq,
        result: Ok(report),
    });
    a
}

fn seckill_left(product: &str) -> crate::ops::fix::LeftAsIs {
    crate::ops::fix::LeftAsIs {
        product: product.into(),
        state: State::Oversold,
        why: "3 unit(s) held above its initial stock of 200".into(),
    }
}

/// Read-only, a fix is previewed (it writes nothing) and never confirmed: the preview comes
/// as a message that says so, and no key after it applies anything.
#[test]
fn read_only_previews_a_fix_and_applies_nothing() {
    let mut a = app(true);
    for (view, k, product) in [("5", 'f', true), ("2", 'F', false)] {
        keys(&mut a, view);
        let seq = match a.update(key(k)).as_slice() {
            [
                Command::PreviewFix {
                    seq, product: p, ..
                },
            ] if p.is_some() == product => *seq,
            other => panic!("{k}: {other:?}"),
        };
        a.update(Action::FixPreviewed {
            seq,
            result: Ok(preview_report()),
        });
        let Some(Dialog::Message { title, lines, .. }) = &a.dialog else {
            panic!("{:?}", a.dialog);
        };
        assert!(title.ends_with("(read-only)"), "{title}");
        assert!(
            lines.iter().any(|l| l.starts_with("READ-ONLY")),
            "{lines:?}"
        );
        assert!(keys(&mut a, "spring-sale").is_empty());
        assert!(fixtures::confirm(&mut a).is_empty());
        assert!(a.dialog.is_none(), "Enter closes the message");
    }
}

#[test]
fn compensation_resolve_one_and_all() {
    let mut a = app(false);
    keys(&mut a, "4");
    assert!(keys(&mut a, "r").is_empty(), "asks first");
    let cmds = fixtures::confirm(&mut a);
    let seq = match cmds.as_slice() {
        [
            Command::ResolveCompensation {
                seq,
                which: Which::One(r),
                ..
            },
        ] if r == "req-0001" => *seq,
        other => panic!("{other:?}"),
    };
    let cmds = a.update(Action::Resolved {
        seq,
        result: Ok(ResolveReport {
            activity: "spring-sale".into(),
            resolutions: vec![Resolution {
                request_id: "req-0001".into(),
                product: "phone".into(),
                quantity: 1,
                verdict: crate::domain::compensation::Verdict::NotApplied,
                status: "not_applied".into(),
                detail: "the ledger has no record of this request".into(),
            }],
            resolved: 1,
            still_pending: 0,
            unreachable: false,
        }),
    });
    assert_eq!(cmds, vec![Command::RefreshNow]);
    assert!(
        matches!(&a.dialog, Some(Dialog::Message { title, .. }) if title == "Resolved 1, 0 still pending")
    );
    fixtures::read_a_moment(&mut a);
    a.update(code(KeyCode::Esc));
    // A resolved entry cannot be resolved again; n cancels the all-dialog.
    keys(&mut a, "G");
    assert!(keys(&mut a, "r").is_empty());
    assert!(a.dialog.is_none());
    // R counts the queue in the database first (the feed is capped), then asks for exactly
    // the entries counted: up to the newest one's id.
    let count = |a: &mut App| match keys(a, "R").as_slice() {
        [Command::CountPending { seq, activity }] if activity.as_str() == "spring-sale" => *seq,
        other => panic!("{other:?} {:?} {:?}", a.dialog, a.flash),
    };
    let seq = count(&mut a);
    a.update(Action::PendingCounted {
        seq,
        result: Ok((2193, Some(9001))),
    });
    let Some(Dialog::Confirm(c)) = &a.dialog else {
        panic!("{:?}", a.dialog);
    };
    assert_eq!(
        c.lines[0],
        "Resolve all 2,193 pending entries of spring-sale?"
    );
    assert!(keys(&mut a, "n").is_empty());
    assert!(a.dialog.is_none());
    let seq = count(&mut a);
    a.update(Action::PendingCounted {
        seq,
        result: Ok((2193, Some(9001))),
    });
    let cmds = fixtures::confirm(&mut a);
    let seq = match cmds.as_slice() {
        [
            Command::ResolveCompensation {
                seq,
                which: Which::UpTo(9001),
                ..
            },
        ] => *seq,
        other => panic!("{other:?}"),
    };
    a.update(Action::Resolved {
        seq,
        result: Ok(ResolveReport {
            activity: "spring-sale".into(),
            resolutions: Vec::new(),
            resolved: 0,
            still_pending: 0,
            unreachable: false,
        }),
    });
    fixtures::read_a_moment(&mut a);
    a.update(code(KeyCode::Esc));
    // An empty queue says so and asks nothing.
    let seq = count(&mut a);
    a.update(Action::PendingCounted {
        seq,
        result: Ok((0, None)),
    });
    assert!(a.dialog.is_none());
    assert_eq!(
        a.flash.as_ref().map(|f| f.text.as_str()),
        Some("no pending compensation entries")
    );
}

#[test]
fn preheat_runs_after_a_yes_and_force_needs_the_id() {
    let mut a = app(false);
    keys(&mut a, "6");
    keys(&mut a, "P");
    assert!(keys(&mut a, "y").is_empty(), "y is typed into the id");
    a.update(code(KeyCode::Esc));
    keys(&mut a, "p");
    let cmds = fixtures::confirm(&mut a);
    let seq = match cmds.as_slice() {
        [
            Command::RunPreheat {
                seq, force: false, ..
            },
        ] => *seq,
        other => panic!("{other:?}"),
    };
    a.update(Action::PreheatProgress {
        seq,
        stage: "writing".into(),
        done: 1,
        total: 2,
    });
    assert_eq!(a.views.preheat.run.as_ref().map(|r| r.done), Some(1));
    let cmds = a.update(Action::PreheatDone {
        seq,
        result: Ok(fixtures::preheat_report(true)),
    });
    assert_eq!(cmds, vec![Command::RefreshNow]);
    assert!(a.views.preheat.run.is_none() && a.busy.is_none());
    assert_eq!(a.views.preheat.rows(a.activity.as_ref()).len(), 3);
    assert!(
        a.flash
            .as_ref()
            .is_some_and(|f| f.text == "preheat spring-sale: GO")
    );
}

#[test]
fn the_header_turns_stale_when_snapshots_stop() {
    let mut a = app(false);
    // The last good snapshot arrived at at(2); refresh 1 s, so stale after 3 s.
    a.update(Action::Tick(at(5)));
    assert!(!a.is_stale());
    assert!(
        screen(&a, 100, 30)
            .lines()
            .next()
            .is_some_and(|l| l.contains("data 3s old"))
    );
    a.update(Action::Tick(at(6)));
    assert!(a.is_stale());
    let first = screen(&a, 100, 30);
    assert!(
        first.lines().next().is_some_and(|l| l.contains("stale 4s")),
        "{first}"
    );
    // The old numbers stay on screen; a fresh snapshot clears the mark.
    assert!(first.contains("phone"));
    a.update(Action::Status(
        id("spring-sale"),
        fetched(7, 7, fixtures::report(7, 6)),
    ));
    assert!(!a.is_stale());
}

#[test]
fn the_header_says_how_old_the_least_recently_read_keys_are() {
    let mut a = app(false);
    a.update(Action::Tick(at(3)));
    let first = screen(&a, 120, 30);
    let header = first.lines().next().unwrap_or_default().to_string();
    assert!(!header.contains("keys"), "{header}");
    // Quiet products' keys are read whole in turns: 42 s ago for the least recent one.
    let mut r = fixtures::report(7, 6);
    r.keys_age_secs = Some(42);
    a.update(Action::Status(id("spring-sale"), fetched(7, 7, r)));
    a.update(Action::Tick(at(8)));
    let header = screen(&a, 120, 30)
        .lines()
        .next()
        .unwrap_or_default()
        .to_string();
    assert!(header.contains("data 1s old, keys ≤42s"), "{header}");
}

#[test]
fn quit_asks_while_a_write_runs() {
    let mut a = app(false);
    keys(&mut a, "q");
    assert!(a.should_quit);

    let mut a = app(false);
    keys(&mut a, "4r");
    fixtures::confirm(&mut a);
    assert!(a.busy.is_some());
    a.update(code(KeyCode::Esc)); // hides the working window, the write goes on
    keys(&mut a, "q");
    assert!(!a.should_quit, "asks first");
    keys(&mut a, "n");
    assert!(!a.should_quit && a.dialog.is_none());
    keys(&mut a, "q");
    fixtures::confirm(&mut a);
    assert!(a.should_quit);

    let mut a = app(false);
    keys(&mut a, "/");
    a.update(Action::Key(KeyEvent::new(
        KeyCode::Char('c'),
        KeyModifiers::CONTROL,
    )));
    assert!(a.should_quit, "Ctrl-C quits even while typing a filter");
}

#[test]
fn a_failed_terminal_input_ends_the_ui_with_a_reason() {
    let mut a = app(false);
    a.update(Action::InputClosed("the terminal input failed: EOF".into()));
    assert!(a.should_quit);
    assert_eq!(
        a.exit_error.as_deref(),
        Some("the terminal input failed: EOF")
    );
}

#[test]
fn poll_errors_keep_the_last_good_rows() {
    let mut a = app(false);
    a.update(Action::Compensation(
        id("spring-sale"),
        Fetched {
            at: at(4),
            taken_at: fixtures::t(4),
            result: Err(Error::unavailable(
                "database at postgres://ops:***@db.internal:5432/shop did not answer",
            )),
        },
    ));
    assert_eq!(a.views.compensation.rows().len(), 3);
    keys(&mut a, "4");
    let s = screen(&a, 100, 30);
    assert!(
        s.contains("last poll failed: database at postgres://ops:***@db.internal"),
        "{s}"
    );
}

proptest::proptest! {
    /// Any key sequence at any size: no panic, and the selection stays inside the table.
    #[test]
    fn no_key_sequence_panics(
        seq in proptest::collection::vec(0usize..51, 0..80),
        w in 1u16..140,
        h in 1u16..50,
        read_only in proptest::bool::ANY,
    ) {
        const KEYS: &[KeyCode] = &[
            KeyCode::Char('1'), KeyCode::Char('2'), KeyCode::Char('3'), KeyCode::Char('4'),
            KeyCode::Char('5'), KeyCode::Char('6'), KeyCode::Char('7'), KeyCode::Char('8'),
            KeyCode::Char('?'), KeyCode::Char('/'), KeyCode::Char('j'), KeyCode::Char('k'),
            KeyCode::Char('g'), KeyCode::Char('G'), KeyCode::Char('s'), KeyCode::Char('S'),
            KeyCode::Char('f'), KeyCode::Char('F'), KeyCode::Char('r'), KeyCode::Char('R'),
            KeyCode::Char('p'), KeyCode::Char('P'), KeyCode::Char('y'), KeyCode::Char('n'),
            KeyCode::Char('a'), KeyCode::Char('é'), KeyCode::Char('-'), KeyCode::Enter,
            KeyCode::Esc, KeyCode::Backspace, KeyCode::Tab, KeyCode::BackTab, KeyCode::Up,
            KeyCode::Down, KeyCode::PageUp, KeyCode::PageDown, KeyCode::Home, KeyCode::End,
            KeyCode::Left, KeyCode::F(5), KeyCode::Char('9'), KeyCode::Char('d'),
            KeyCode::Char('x'), KeyCode::Right, KeyCode::Char('0'), KeyCode::Char(' '),
            // The write keys of the Stock view and the report.
            KeyCode::Char('z'), KeyCode::Char('Z'), KeyCode::Char('t'), KeyCode::Char('w'),
            KeyCode::Char('q'),
        ];
        // Every key the sequence can draw is one of these.
        proptest::prop_assert_eq!(KEYS.len(), 51);
        let mut a = app(read_only);
        a.update(Action::Resize(w, h));
        for i in seq {
            let cmds = a.update(code(KEYS[i % KEYS.len()]));
            if read_only {
                proptest::prop_assert!(cmds.iter().all(|c| !c.writes()), "{cmds:?}");
            }
            if a.should_quit {
                break;
            }
            let _ = screen(&a, w, h);
            for v in View::TABBED {
                proptest::prop_assert!(a.cursor(v).selected <= a.row_count(v).saturating_sub(1));
            }
        }
    }
}

/// The product of the Stock table's highlighted row as drawn (the row marked `>`), if any.
fn highlighted(screen: &str) -> Option<String> {
    screen.lines().find_map(|l| {
        let rest = l.strip_prefix("│>")?;
        rest.split_whitespace().next().map(str::to_string)
    })
}

/// The product ids in the Stock table now.
fn in_table(a: &App) -> Vec<String> {
    stock_ids(a)
}

proptest::proptest! {
    /// After any sequence of re-sorts, filter changes and moves (each drawn), and refreshes
    /// that arrive after the last frame (new figures that re-sort the rows, products that go
    /// and come back), the pause key acts on the product highlighted in the last frame drawn,
    /// or on nothing when that product is no longer in the table.
    #[test]
    fn a_write_key_acts_on_the_product_drawn_under_the_cursor(
        ops in proptest::collection::vec((0usize..12, 0i64..1000), 1..60),
    ) {
        let mut a = app(false);
        let mut secs = 3;
        let mut frame = screen(&a, 100, 30);
        for (op, n) in ops {
            match op {
                0..=3 => {
                    // A refresh, not drawn yet: new figures (a new order under any sort), and
                    // one product may be gone.
                    secs += 2;
                    let mut r = fixtures::report(secs as i64, n % 7);
                    for (i, p) in r.products.iter_mut().enumerate() {
                        let v = (n * 31 + i as i64 * 17) % 97;
                        p.redis_remaining = Some(v);
                        p.sold_percent = ((v * 7) % 100) as f64;
                    }
                    if n % 3 == 0 {
                        let gone = (n as usize / 3) % r.products.len();
                        r.products.remove(gone);
                    }
                    a.update(Action::Status(fixtures::id("spring-sale"), fetched(secs, secs as i64, r)));
                }
                op => {
                    match op {
                        4 => { a.update(key('s')); }
                        5 => { a.update(key('S')); }
                        6 => {
                            // A filter typed and kept.
                            let c = ['a', 'e', 'p', 't', 'h'][n as usize % 5];
                            a.update(key('/'));
                            a.update(key(c));
                            a.update(code(KeyCode::Enter));
                        }
                        7 => {
                            // The filter cleared.
                            a.update(key('/'));
                            a.update(code(KeyCode::Esc));
                        }
                        8 => { a.update(key('j')); }
                        9 => { a.update(key('k')); }
                        10 => { a.update(key('G')); }
                        _ => { a.update(key('g')); }
                    }
                    frame = screen(&a, 100, 30);
                }
            }
            if n % 4 != 0 {
                continue;
            }
            let drawn = highlighted(&frame);
            let rows = in_table(&a);
            a.update(key('z'));
            let named = match &a.dialog {
                Some(Dialog::Confirm(d)) => d
                    .title
                    .strip_prefix("Pause ")
                    .or_else(|| d.title.strip_prefix("Resume "))
                    .and_then(|t| t.split(" of ").next())
                    .map(str::to_string),
                _ => None,
            };
            match &drawn {
                Some(p) if rows.contains(p) => proptest::prop_assert_eq!(named.as_ref(), Some(p)),
                Some(p) => proptest::prop_assert!(named.is_none(), "{p} left, yet {named:?}"),
                // Nothing drawn under the cursor: no write, unless the product the frame said
                // had left came back.
                None => proptest::prop_assert!(
                    named.as_ref().is_none_or(|n| frame.contains(&format!("{n} left the table"))),
                    "nothing highlighted, yet {named:?}"
                ),
            }
            a.update(Action::Cancel);
            frame = screen(&a, 100, 30);
        }
    }
}

#[test]
fn the_cursor_follows_its_product_and_says_when_it_left() {
    let mut a = app(false);
    a.update(key('j')); // the second row, by product id: charger
    let p = highlighted(&screen(&a, 100, 30)).expect("a row is highlighted");
    assert_eq!(p, "charger");
    // Sorted by Redis stock, descending: charger moves, the cursor with it.
    a.update(key('s'));
    a.update(key('S'));
    assert_eq!(
        highlighted(&screen(&a, 100, 30)).as_deref(),
        Some("charger")
    );
    // A refresh without charger: nothing is highlighted, the title names it, `z` writes nothing.
    let mut r = fixtures::report(5, 6);
    r.products.retain(|p| p.product != "charger");
    a.update(Action::Status(
        fixtures::id("spring-sale"),
        fetched(5, 5, r),
    ));
    let s = screen(&a, 100, 30);
    assert_eq!(highlighted(&s), None, "{s}");
    assert!(s.contains("charger left the table"), "{s}");
    a.update(key('z'));
    assert!(a.dialog.is_none());
    let f = a.flash.as_ref().map(|f| f.text.clone()).unwrap_or_default();
    assert!(f.contains("charger left the table"), "{f}");
    // Back in the next refresh: highlighted again.
    a.update(Action::Status(
        fixtures::id("spring-sale"),
        fetched(7, 7, fixtures::report(7, 6)),
    ));
    assert_eq!(
        highlighted(&screen(&a, 100, 30)).as_deref(),
        Some("charger")
    );
}

#[test]
fn a_stray_letter_says_it_is_unknown_and_does_nothing() {
    let mut a = app(false);
    let before = stock_ids(&a);
    let cmds = keys(&mut a, "o");
    assert!(cmds.is_empty(), "{cmds:?}");
    assert!(a.dialog.is_none());
    let f = a.flash.as_ref().map(|f| f.text.clone()).unwrap_or_default();
    assert_eq!(f, "unknown key: o (press ? for help)");
    assert_eq!(stock_ids(&a), before);
    // A key of another view still says where it works, not that it is unknown.
    keys(&mut a, "r");
    let f = a.flash.as_ref().map(|f| f.text.clone()).unwrap_or_default();
    assert!(f.contains("Compensation"), "{f}");
}

#[test]
fn letters_typed_ahead_never_confirm_a_write() {
    // "lazy" typed into the Stock view with no filter open: z opens the pause dialog, y goes
    // into its reason field and confirms nothing.
    let mut a = app(false);
    let cmds = keys(&mut a, "lazy");
    assert!(cmds.is_empty(), "{cmds:?}");
    assert!(matches!(&a.dialog, Some(Dialog::Confirm(c))
        if c.title.starts_with("Pause case") && c.reason.as_deref() == Some("y")));
    // Enter in the moment the dialog opened was typed before it could be read.
    assert!(a.update(code(KeyCode::Enter)).is_empty());
    let f = a.flash.as_ref().map(|f| f.text.clone()).unwrap_or_default();
    assert!(f.starts_with("too quick"), "{f}");
    // A moment later, Enter pauses case.
    let cmds = fixtures::confirm(&mut a);
    assert_eq!(cmds.len(), 1, "{cmds:?}");
    assert!(cmds[0].writes(), "{cmds:?}");
}

#[test]
fn the_topup_form_refuses_what_is_not_a_whole_unit_as_it_is_typed() {
    let mut a = app(false);
    // "1.5": the '.' is refused and stays on screen; the 5 typed after it is not taken (it
    // made the entry read 15), and Enter goes nowhere until Backspace takes the '.' back.
    keys(&mut a, "t1.5");
    match &a.dialog {
        Some(Dialog::TopupForm {
            input,
            error,
            refused,
            ..
        }) => {
            assert_eq!((input.as_str(), *refused), ("1", Some('.')));
            assert_eq!(
                error.as_deref(),
                Some(
                    "'.' refused: whole units only (digits, a leading + or -) (Backspace takes it back)"
                )
            );
        }
        other => panic!("expected the top-up form, got {other:?}"),
    }
    let s = screen(&a, 100, 30);
    assert!(s.contains("units: 1._"), "{s}");
    assert!(a.update(code(KeyCode::Enter)).is_empty());
    assert!(
        matches!(a.dialog, Some(Dialog::TopupForm { .. })),
        "{:?}",
        a.dialog
    );
    a.update(code(KeyCode::Backspace));
    keys(&mut a, "0");
    assert!(
        matches!(&a.dialog, Some(Dialog::TopupForm { input, refused: None, error: None, .. }) if input == "10"),
        "{:?}",
        a.dialog
    );
    // The case holds 60 sold of 500: a cut to below that is refused at the keystroke, whole.
    for _ in 0..2 {
        a.update(code(KeyCode::Backspace));
    }
    keys(&mut a, "-441");
    let s = screen(&a, 100, 30);
    assert!(s.contains("units: -441_"), "{s}");
    assert!(
        s.contains("-441 would cut the initial stock to 59, below the 60 unit(s) sold or"),
        "{s}"
    );
    assert!(s.contains("sold or in flight"), "the reason is whole: {s}");
    assert!(s.contains("initial stock 500 -> 456"), "{s}");
}

/// Figures in the top-up confirmation carry thousands separators, as everywhere else.
#[test]
fn the_topup_confirmation_groups_its_figures() {
    let mut a = app(false);
    keys(&mut a, "t12345");
    a.update(code(KeyCode::Enter));
    let Some(Dialog::Confirm(c)) = &a.dialog else {
        panic!("{:?}", a.dialog);
    };
    assert!(
        c.title
            .starts_with("Top up case of spring-sale by +12,345?"),
        "{}",
        c.title
    );
    assert!(c.lines[0].ends_with("move by +12,345"), "{:?}", c.lines);
}

/// The pause and top-up dialogs take a reason, audited like `--reason`: typed text goes into
/// the command; left empty, the executor audits "from the TUI". A pause of every product asks
/// for the activity id first, Tab goes to the reason.
#[test]
fn pause_and_topup_take_a_reason_for_the_audit_trail() {
    let mut a = app(false);
    keys(&mut a, "z");
    keys(&mut a, "flash crowd");
    a.update(code(KeyCode::Backspace));
    let cmds = fixtures::confirm(&mut a);
    match cmds.as_slice() {
        [
            Command::SetPaused {
                reason,
                pause: true,
                product: Some(p),
                ..
            },
        ] => {
            assert_eq!((reason.as_str(), p.as_str()), ("flash crow", "case"));
        }
        other => panic!("expected the pause with its reason, got {other:?}"),
    }
    // Control characters are refused; 500 characters at most.
    let mut a = app(false);
    keys(&mut a, "z");
    a.update(Action::Input('\u{1b}'));
    for _ in 0..600 {
        a.update(Action::Input('x'));
    }
    match &a.dialog {
        Some(Dialog::Confirm(c)) => {
            let r = c.reason.as_deref().unwrap_or_default();
            assert_eq!(r.chars().count(), 500);
            assert!(!r.contains('\u{1b}'));
        }
        other => panic!("{other:?}"),
    }
    // Nothing typed: an empty reason, audited as "from the TUI" by the executor.
    let mut a = app(false);
    keys(&mut a, "t5");
    a.update(code(KeyCode::Enter));
    let cmds = fixtures::confirm(&mut a);
    assert!(
        matches!(cmds.as_slice(), [Command::RunTopup { add: 5, reason, .. }] if reason.is_empty()),
        "{cmds:?}"
    );
    // Every product: the id first, then Tab to the reason.
    let mut a = app(false);
    keys(&mut a, "Z");
    keys(&mut a, "spring-sale");
    a.update(code(KeyCode::Tab));
    keys(&mut a, "launch hold");
    let cmds = fixtures::confirm(&mut a);
    assert!(
        matches!(cmds.as_slice(), [Command::SetPaused { product: None, reason, .. }] if reason == "launch hold"),
        "{cmds:?}"
    );
}

/// A paused product that also drifts says both in Stock: its colour is the drift's, and
/// nothing else there said it sells nothing.
#[test]
fn a_paused_product_in_another_state_says_it_is_paused() {
    let mut a = app(false);
    let mut r = fixtures::report(5, 6);
    let p = r
        .products
        .iter_mut()
        .find(|p| p.product == "charger")
        .expect("charger");
    p.paused = true;
    p.state = crate::domain::stock::State::Drift;
    p.drift = Some(-2);
    a.update(Action::Status(
        fixtures::id("spring-sale"),
        fetched(5, 5, r),
    ));
    a.update(key('2'));
    let s = screen(&a, 120, 30);
    let row = s
        .lines()
        .find(|l| l.contains("charger"))
        .unwrap_or_default()
        .to_string();
    assert!(row.contains("drift, paused"), "{s}");
    // And the filter finds it by what it reads.
    a.update(key('/'));
    for c in "paused".chars() {
        a.update(key(c));
    }
    assert!(
        stock_ids(&a).contains(&"charger".to_string()),
        "{:?}",
        stock_ids(&a)
    );
}
