//! The Dry run view: its screens (the idle form, a run with its chart, the four strategies'
//! results with a failed invariant, read-only) and its flow driven by keys (start, stop,
//! refusals), with the Commands it hands the executor.

use super::fixtures::{self, app, at, screen};
use super::snapshots::assert_screen;
use crate::error::Error;
use crate::tui::action::{Action, Command};
use crate::tui::app::{App, Dialog};
use crate::tui::view::View;
use crate::tui::views::dry_run::StrategyChoice;
use crate::worker::Strategy;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

const W: u16 = 100;
const H: u16 = 30;

fn key(c: char) -> Action {
    Action::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE))
}

fn code(k: KeyCode) -> Action {
    Action::Key(KeyEvent::new(k, KeyModifiers::NONE))
}

fn keys(app: &mut App, text: &str) -> Vec<Command> {
    text.chars().flat_map(|c| app.update(key(c))).collect()
}

fn flash(app: &App) -> String {
    app.flash
        .as_ref()
        .map(|f| f.text.clone())
        .unwrap_or_default()
}

/// The Dry run view with the form filled in: 5000 buyers, concurrency 200, all strategies.
fn filled_form(read_only: bool) -> App {
    let mut a = app(read_only);
    keys(&mut a, "9d");
    for _ in 0..4 {
        a.update(code(KeyCode::Backspace));
    }
    keys(&mut a, "5000");
    a.update(code(KeyCode::Tab));
    a.update(code(KeyCode::Backspace));
    a.update(code(KeyCode::Backspace));
    keys(&mut a, "200");
    a.update(code(KeyCode::Down));
    a.update(code(KeyCode::Left)); // lua wraps round to all
    a
}

/// A confirmed dry run of every strategy; returns its sequence number.
fn started(a: &mut App) -> u64 {
    a.update(code(KeyCode::Enter));
    match fixtures::confirm(a).as_slice() {
        [Command::StartDryRun { seq, .. }] => *seq,
        other => panic!("expected the dry run to start, got {other:?}"),
    }
}

/// Ops/s of lua over 8 s, then hincrby for 4 s, as the executor reports them.
fn feed_progress(a: &mut App, seq: u64) {
    let lua = [
        3100.0, 8800.0, 9400.0, 9150.0, 9600.0, 9020.0, 9300.0, 8900.0,
    ];
    for (i, ops) in lua.iter().enumerate() {
        a.update(Action::DryRunProgress {
            seq,
            strategy: Strategy::Lua,
            elapsed_secs: (i + 1) as f64,
            snapshot: fixtures::live(130 * (i as u64 + 1), *ops),
        });
    }
    a.update(Action::DryRunStrategyDone {
        seq,
        stats: Box::new(fixtures::all_four().remove(0)),
    });
    for (i, ops) in [10_200.0, 11_900.0, 11_300.0, 11_600.0].iter().enumerate() {
        a.update(Action::DryRunProgress {
            seq,
            strategy: Strategy::Hincrby,
            elapsed_secs: (i + 10) as f64,
            snapshot: fixtures::live(250 * (i as u64 + 1), *ops),
        });
    }
}

#[test]
fn idle_view_and_form() {
    let a = {
        let mut a = app(false);
        keys(&mut a, "9");
        a
    };
    let s = screen(&a, W, H);
    assert!(
        s.contains("d opens the form: buyers 1000, concurrency 50"),
        "{s}"
    );
    assert!(s.contains("9[Dry run]"), "the footer marks the view: {s}");
    assert_screen("dry_run_idle", &s);

    let a = filled_form(false);
    assert_eq!(a.dialog, Some(Dialog::DryRunForm));
    assert_eq!(a.views.dry_run.form.buyers, "5000");
    assert_eq!(a.views.dry_run.form.concurrency, "200");
    assert_eq!(a.views.dry_run.form.strategy, StrategyChoice::All);
    assert_screen("dry_run_form", &screen(&a, W, H));
}

#[test]
fn running_with_a_chart() {
    let mut a = filled_form(false);
    let seq = started(&mut a);
    feed_progress(&mut a, seq);
    a.update(Action::Tick(at(16)));
    let s = screen(&a, W, H);
    assert!(
        s.contains("hincrby (2/4)") && s.contains("1,000 / 1,100 requests"),
        "{s}"
    );
    assert!(s.contains("Throughput"), "{s}");
    assert!(
        s.contains("Dry run*"),
        "the tab marks a running dry run: {s}"
    );
    assert_screen("dry_run_running", &s);
}

#[test]
fn results_of_all_four_with_a_failed_invariant() {
    let mut a = filled_form(false);
    let seq = started(&mut a);
    feed_progress(&mut a, seq);
    for stats in fixtures::all_four().into_iter().skip(1) {
        a.update(Action::DryRunStrategyDone {
            seq,
            stats: Box::new(stats),
        });
    }
    a.update(Action::Tick(at(40)));
    a.update(Action::DryRunDone {
        seq,
        result: Ok(()),
    });
    let run = a
        .views
        .dry_run
        .run
        .as_ref()
        .expect("the run stays for its results");
    assert!(!run.running());
    let verdicts: Vec<&str> = (0..4).map(|i| run.verdict(i)).collect();
    assert_eq!(verdicts, ["ok", "FAILED", "ok", "ok"]);
    assert_eq!(flash(&a), "dry run: invariant FAILED in hincrby");
    let s = screen(&a, W, H);
    assert!(
        s.contains("FAILED hincrby: stock never negative: negative stock left behind: phone at -1"),
        "{s}"
    );
    assert_screen("dry_run_results", &s);
}

#[test]
fn read_only_view_and_refusal() {
    let mut a = app(true);
    keys(&mut a, "9");
    let s = screen(&a, W, H);
    assert!(s.contains("read-only: dry runs are disabled"), "{s}");
    assert!(!s.contains(" d dry run"), "the start key is hidden: {s}");
    assert_screen("dry_run_read_only", &s);

    let cmds = keys(&mut a, "d");
    assert!(cmds.is_empty());
    assert!(a.dialog.is_none(), "no form in read-only mode");
    let f = a.flash.as_ref().expect("a refusal");
    assert!(
        f.error && f.text.contains("read-only mode: dry run refused"),
        "{}",
        f.text
    );

    // Even a confirmation opened some other way starts nothing.
    let mut rw = app(false);
    keys(&mut rw, "9d");
    rw.update(code(KeyCode::Enter));
    a.dialog = rw.dialog.take();
    assert!(a.update(Action::Confirm).is_empty());
    assert!(a.views.dry_run.run.is_none());
}

#[test]
fn the_form_checks_its_numbers_then_asks_and_starts() {
    let mut a = app(false);
    keys(&mut a, "2");
    assert!(keys(&mut a, "d").is_empty());
    assert!(a.dialog.is_none());
    assert!(flash(&a).contains("press d on the Dry run view (9)"));

    keys(&mut a, "9d");
    // Digits are typed into the form, not taken as view keys; letters are ignored there.
    for _ in 0..4 {
        a.update(code(KeyCode::Backspace));
    }
    keys(&mut a, "0q");
    assert_eq!(a.view, View::DryRun);
    assert!(!a.should_quit);
    assert!(a.update(code(KeyCode::Enter)).is_empty());
    assert_eq!(
        a.views.dry_run.form.error.as_deref(),
        Some("buyers '0' is out of range: use 1 to 1000000")
    );
    assert_eq!(a.dialog, Some(Dialog::DryRunForm), "the form stays open");
    a.update(code(KeyCode::Backspace));
    keys(&mut a, "300");
    a.update(code(KeyCode::Tab));
    keys(&mut a, "00000"); // concurrency 5000000
    a.update(code(KeyCode::Enter));
    assert!(
        a.views
            .dry_run
            .form
            .error
            .as_deref()
            .is_some_and(|e| e.contains("concurrency '5000000' is out of range")),
        "{:?}",
        a.views.dry_run.form.error
    );
    for _ in 0..5 {
        a.update(code(KeyCode::Backspace));
    }
    // On the strategy field a first letter picks one.
    a.update(code(KeyCode::Tab));
    keys(&mut a, "k");
    assert_eq!(
        a.views.dry_run.form.strategy,
        StrategyChoice::One(Strategy::Lock)
    );
    a.update(code(KeyCode::Right));
    assert_eq!(
        a.views.dry_run.form.strategy,
        StrategyChoice::One(Strategy::Sql)
    );

    assert!(a.update(code(KeyCode::Enter)).is_empty(), "asks first");
    let s = screen(&a, W, H);
    assert!(s.contains("Dry run of spring-sale?"), "{s}");
    assert!(
        s.contains("300 buyers, concurrency 50, strategy sql."),
        "{s}"
    );
    assert!(s.contains("never the live 'seckill' keys"), "{s}");
    assert!(s.contains("spring-sale is LIVE"), "{s}");
    // n cancels: nothing starts; the form keeps its values for the next time.
    assert!(keys(&mut a, "n").is_empty());
    assert!(a.dialog.is_none() && a.views.dry_run.run.is_none());
    assert_eq!(a.views.dry_run.form.buyers, "300");

    keys(&mut a, "d");
    a.update(code(KeyCode::Enter));
    let cmds = fixtures::confirm(&mut a);
    assert_eq!(
        cmds,
        vec![Command::StartDryRun {
            seq: a.views.dry_run.run.as_ref().map_or(0, |r| r.seq),
            activity: fixtures::id("spring-sale"),
            buyers: 300,
            concurrency: 50,
            strategies: vec![Strategy::Sql],
        }]
    );
    assert!(cmds[0].writes(), "a dry run counts as a write");
    assert!(a.dialog.is_none());
    assert!(a.views.dry_run.run.as_ref().is_some_and(|r| r.running()));
    // One at a time.
    assert!(keys(&mut a, "d").is_empty());
    assert!(a.dialog.is_none());
    assert!(flash(&a).contains("already running"));
    // A fix is not held up by a dry run: it touches none of its keys.
    keys(&mut a, "5");
    assert!(
        matches!(keys(&mut a, "F").as_slice(), [Command::PreviewFix { .. }]),
        "fix preview while a dry run runs"
    );
}

#[test]
fn x_or_esc_stops_and_the_cut_strategy_is_not_a_failure() {
    let mut a = filled_form(false);
    let seq = started(&mut a);
    feed_progress(&mut a, seq);
    // x stops; a second x or Esc asks for nothing more.
    assert_eq!(keys(&mut a, "x"), vec![Command::StopDryRun { seq }]);
    assert!(flash(&a).contains("stopping the dry run"));
    assert!(keys(&mut a, "x").is_empty());
    assert!(a.update(code(KeyCode::Esc)).is_empty());
    assert!(
        a.views.dry_run.run.as_ref().is_some_and(|r| r.running()),
        "it runs until it reports its end"
    );
    assert!(screen(&a, W, H).contains("stopping after"));
    // The cut strategy sold less than the demand allowed: that alone is "stopped".
    let mut cut = fixtures::all_four().remove(1);
    cut.requests = 1000;
    cut.invariants = cut
        .invariants
        .into_iter()
        .map(|mut i| {
            i.ok = !i.name.starts_with("sold =");
            i
        })
        .collect();
    cut.ok = false;
    a.update(Action::DryRunStrategyDone {
        seq,
        stats: Box::new(cut),
    });
    a.update(Action::DryRunDone {
        seq,
        result: Ok(()),
    });
    let run = a.views.dry_run.run.as_ref().expect("run");
    assert_eq!(run.verdict(0), "ok");
    assert_eq!(run.verdict(1), "stopped");
    assert_eq!(
        flash(&a),
        "dry run stopped (2 of 4 strategies ran); its shadow keys were removed"
    );
    // Esc on the view with nothing running does nothing; the next run may start.
    assert!(a.update(code(KeyCode::Esc)).is_empty());
    assert!(keys(&mut a, "x").is_empty());
    assert_eq!(flash(&a), "no dry run is running");
    keys(&mut a, "d");
    assert_eq!(a.dialog, Some(Dialog::DryRunForm));

    // Esc alone stops a fresh run too.
    let mut a = filled_form(false);
    let seq = started(&mut a);
    assert_eq!(
        a.update(code(KeyCode::Esc)),
        vec![Command::StopDryRun { seq }]
    );
}

#[test]
fn late_or_foreign_reports_are_ignored_and_errors_are_shown() {
    let mut a = filled_form(false);
    let seq = started(&mut a);
    feed_progress(&mut a, seq);
    let points = |a: &App, s: Strategy| {
        a.views
            .dry_run
            .run
            .as_ref()
            .and_then(|r| r.throughput.iter().find(|(x, _)| *x == s))
            .map_or(0, |(_, p)| p.len())
    };
    assert_eq!(points(&a, Strategy::Lua), 8);
    // A figure of lua after its result, and one of another run: neither counts.
    for (s, strategy) in [(seq, Strategy::Lua), (seq + 100, Strategy::Hincrby)] {
        a.update(Action::DryRunProgress {
            seq: s,
            strategy,
            elapsed_secs: 20.0,
            snapshot: fixtures::live(1, 1.0),
        });
    }
    assert_eq!(points(&a, Strategy::Lua), 8);
    assert_eq!(points(&a, Strategy::Hincrby), 4);
    // Odd numbers from a clock or a rate never reach the chart.
    a.update(Action::DryRunProgress {
        seq,
        strategy: Strategy::Hincrby,
        elapsed_secs: f64::NAN,
        snapshot: fixtures::live(1, f64::INFINITY),
    });
    let last = a
        .views
        .dry_run
        .run
        .as_ref()
        .and_then(|r| r.throughput.iter().find(|(x, _)| *x == Strategy::Hincrby))
        .and_then(|(_, p)| p.last().copied());
    assert_eq!(last, Some((13.0, 0.0)));

    a.update(Action::DryRunDone {
        seq,
        result: Err(Error::unavailable(
            "Redis at redis://ops:***@10.0.0.5:6379 timed out",
        )),
    });
    assert!(flash(&a).starts_with("dry run failed: Redis at redis://ops:***@"));
    let s = screen(&a, W, H);
    assert!(
        s.contains("error: Redis at redis://ops:***@10.0.0.5:6379 timed out"),
        "{s}"
    );
    assert!(!s.contains("Dry run*"));
}

#[test]
fn quit_while_a_dry_run_runs_asks_first() {
    let mut a = filled_form(false);
    started(&mut a);
    keys(&mut a, "q");
    assert!(!a.should_quit);
    assert!(screen(&a, W, H).contains("Quit while a dry run runs?"));
    keys(&mut a, "n");
    assert!(!a.should_quit && a.dialog.is_none());
    keys(&mut a, "q");
    fixtures::confirm(&mut a);
    assert!(
        a.should_quit,
        "the runtime then stops the run and waits for its cleanup"
    );
}

/// A strategy that ends before its first live figure (under a second) still gets its line and
/// its name in the chart's legend (issue 20: the legend showed two of four).
#[test]
fn a_strategy_too_fast_for_a_live_figure_is_still_in_the_chart() {
    let mut a = filled_form(false);
    let seq = started(&mut a);
    let stats = fixtures::run_stats("sql", 250.0, 1.0, 2.0, 1.0, 0, 0, None);
    a.update(Action::DryRunStrategyDone {
        seq,
        stats: Box::new(stats),
    });
    let run = a.views.dry_run.run.as_ref().expect("a run");
    assert!(
        run.throughput
            .iter()
            .any(|(s, p)| s.as_str() == "sql" && p == &vec![(run.elapsed_secs, 250.0)]),
        "{:?}",
        run.throughput
    );
}
