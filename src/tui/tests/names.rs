//! Names and the first screen: a product's name shows beside its id and `/` finds it (in any
//! script); the console opens on the live activity selling most, else the soonest to open, and
//! the Activities view opens on the activity shown.

use super::fixtures::{activity, app, at, config, fetched, screen};
use crate::tui::action::{Action, Command};
use crate::tui::app::App;
use crate::tui::view::View;
use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

fn key(c: char) -> Action {
    Action::Key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::NONE))
}

#[test]
fn a_slash_finds_products_by_name_in_any_script() {
    let mut a = app(false);
    let s = screen(&a, 120, 30);
    assert!(s.contains("Laptop Pro 14"), "the name column: {s}");
    a.update(key('/'));
    for c in "手机".chars() {
        a.update(key(c));
    }
    let ids: Vec<String> = {
        let r = a.stock.report().expect("report");
        a.views
            .stock
            .order
            .iter()
            .map(|&i| r.products[i].product.clone())
            .collect()
    };
    assert_eq!(ids, vec!["case", "phone"], "手机 is in 手机 X and 手机壳");
}

/// A fresh console (nothing chosen) given `list`.
fn fresh(list: Vec<crate::db::activity::ActivitySummary>) -> (App, Vec<Command>) {
    let mut a = App::new(config(false), None, at(0));
    a.update(Action::Resize(100, 30));
    let cmds = a.update(Action::Activities(fetched(0, 0, list)));
    (a, cmds)
}

#[test]
fn the_first_screen_is_the_live_activity_selling_most() {
    let quiet = activity("quiet", "Quiet", -3600, 3600, "scheduled", 5, 50);
    let busy = activity("busy", "Busy", -7200, 3600, "scheduled", 2000, 100_000);
    let (mut a, cmds) = fresh(vec![quiet.clone(), busy.clone()]);
    match cmds.as_slice() {
        [Command::CountRecentSales(ids)] => assert_eq!(ids.len(), 2),
        other => panic!("{other:?}"),
    }
    assert!(a.activity.is_none(), "nothing shown before the count");
    let counts = [("quiet".to_string(), 0), ("busy".to_string(), 9000)].into();
    let cmds = a.update(Action::Busiest(Ok(counts)));
    assert_eq!(a.activity.as_ref().map(|i| i.as_str()), Some("busy"));
    assert!(matches!(cmds.as_slice(), [Command::Watch(_)]), "{cmds:?}");
    // The Activities view opens on it, not on the top row.
    a.update(key('1'));
    let rows = a.views.activities.rows(&a);
    let on = a
        .cursor(View::Activities)
        .row()
        .and_then(|i| rows.get(i))
        .map(|r| r.activity.activity_id.to_string());
    assert_eq!(on.as_deref(), Some("busy"));

    // The count failed: the first live one, still something on screen.
    let (mut a, _) = fresh(vec![quiet, busy]);
    a.update(Action::Busiest(Err(crate::error::Error::internal(
        "db down",
    ))));
    assert_eq!(a.activity.as_ref().map(|i| i.as_str()), Some("quiet"));
}

#[test]
fn without_a_live_activity_the_first_screen_is_the_soonest_to_open() {
    let later = activity("later", "Later", 86_400, 90_000, "scheduled", 1, 1);
    let soon = activity("soon", "Soon", 3600, 7200, "scheduled", 1, 1);
    let over = activity("over", "Over", -7200, -3600, "scheduled", 1, 1);
    let (a, _) = fresh(vec![over, later, soon]);
    assert_eq!(a.activity.as_ref().map(|i| i.as_str()), Some("soon"));
}
