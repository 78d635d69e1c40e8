//! Keys to Actions, by mode: a dialog takes every key, then the filter input, then the normal
//! bindings. The Help view lists [`BINDINGS`], so what it shows is what this file does.

use super::action::Action;
use super::app::{App, Dialog};
use super::view::View;
use super::views;
use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

/// Every binding, for the Help view: (keys, what they do, where).
pub const BINDINGS: &[(&str, &str, &str)] = &[
    (
        "1-9, 0",
        "show a view (listed in the footer; 0 is the event log)",
        "everywhere",
    ),
    ("Tab / Shift-Tab", "next / previous view", "everywhere"),
    (
        "? / w",
        "this help (Esc or ? goes back) / write the incident report",
        "everywhere",
    ),
    (
        "b",
        "switch the bell on a newly raised critical alert (on at start)",
        "everywhere",
    ),
    (
        "q / Ctrl-C",
        "quit (q asks while a write or a dry run runs) / quit now",
        "everywhere",
    ),
    ("Up/Down, k/j", "move the selection", "tables"),
    ("PgUp/PgDn", "move by a page", "tables"),
    (
        "h / l",
        "scroll a wide table's columns: those a narrow terminal left out come into view",
        "tables",
    ),
    ("g / G, Home/End", "first / last row", "tables"),
    (
        "/",
        "filter the table (Enter keeps it, Esc clears it)",
        "tables",
    ),
    (
        "Enter / Right",
        "the row behind the cursor: Activities shows that activity everywhere; Stock, Reconcile and Alerts open the product's detail (keys, counters, events, orders, alerts, writes); Compensation and Audit show the row whole",
        "tables",
    ),
    ("s / S", "next sort column / reverse the order", "Stock"),
    (
        "f",
        "fix the highlighted product (preview, then Enter)",
        "Stock, Reconcile",
    ),
    (
        "F",
        "fix the whole activity (preview, then type its id)",
        "Stock, Reconcile",
    ),
    (
        "t, z, Z / U",
        "top up (a form) / pause or resume the highlighted one / pause all / resume all",
        "Stock",
    ),
    (
        "r / R",
        "resolve the highlighted / every pending entry (counted first; then Enter)",
        "Compensation",
    ),
    (
        "p / P",
        "preheat gate (then Enter) / --force (type the id)",
        "Preheat",
    ),
    (
        "d",
        "start a dry run on shadow keys (a form, then Enter)",
        "Dry run",
    ),
    ("x / Esc", "stop the running dry run", "Dry run"),
    (
        "Tab / arrows",
        "next field (Tab, Up/Down) / pick the strategy (Left/Right)",
        "dry-run form",
    ),
    ("Enter / n, Esc", "confirm / cancel a dialog", "dialogs"),
    (
        "Up/Down, PgUp/PgDn",
        "scroll a dialog (a long one confirms once read to its end)",
        "dialogs, help",
    ),
];

/// Rows a page key scrolls a dialog: about the smallest dialog's window.
const PAGE: isize = 10;

/// Rows a page key moves: about a screen of table rows (the header, footer and borders
/// take about ten lines).
fn page(app: &App) -> isize {
    (i32::from(app.size.1) as isize - 10).max(1)
}

/// The Action for a key in the App's current mode, if the key means anything there.
pub fn map(app: &App, key: KeyEvent) -> Option<Action> {
    // Terminals that report releases (Windows, kitty protocol) would double every key.
    if key.kind == KeyEventKind::Release {
        return None;
    }
    let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
    if ctrl && matches!(key.code, KeyCode::Char('c') | KeyCode::Char('C')) {
        return Some(Action::ForceQuit);
    }
    if let Some(dialog) = &app.dialog {
        return dialog_key(dialog, key);
    }
    if app.filtering {
        return match key.code {
            KeyCode::Esc => Some(Action::Cancel),
            KeyCode::Enter => Some(Action::Enter),
            KeyCode::Backspace => Some(Action::Backspace),
            KeyCode::Up => Some(Action::Move(-1)),
            KeyCode::Down => Some(Action::Move(1)),
            KeyCode::Char(c) if !ctrl => Some(Action::Input(c)),
            _ => None,
        };
    }
    normal_key(app, key, ctrl)
}

fn dialog_key(dialog: &Dialog, key: KeyEvent) -> Option<Action> {
    // A confirmation or a message scrolls when its lines do not fit.
    if matches!(dialog, Dialog::Confirm(_) | Dialog::Message { .. }) {
        let scroll = match key.code {
            KeyCode::Up => Some(Action::Move(-1)),
            KeyCode::Down => Some(Action::Move(1)),
            KeyCode::PageUp => Some(Action::Move(-PAGE)),
            KeyCode::PageDown => Some(Action::Move(PAGE)),
            KeyCode::Home => Some(Action::Top),
            KeyCode::End => Some(Action::Bottom),
            _ => None,
        };
        if scroll.is_some() {
            return scroll;
        }
    }
    match dialog {
        // A reason field: letters type it (Enter alone confirms, as ever); Tab goes between it
        // and the activity id a typed confirmation asks for.
        Dialog::Confirm(c) if c.reason.is_some() => match key.code {
            KeyCode::Esc => Some(Action::Cancel),
            KeyCode::Enter if c.typed.is_some() => Some(Action::Enter),
            KeyCode::Enter => Some(Action::Confirm),
            KeyCode::Tab | KeyCode::BackTab => Some(Action::FormField(1)),
            KeyCode::Backspace => Some(Action::Backspace),
            KeyCode::Char(c) => Some(Action::Input(c)),
            _ => None,
        },
        Dialog::Confirm(c) if c.typed.is_some() => match key.code {
            KeyCode::Esc => Some(Action::Cancel),
            KeyCode::Enter => Some(Action::Enter),
            KeyCode::Backspace => Some(Action::Backspace),
            KeyCode::Char(c) => Some(Action::Input(c)),
            _ => None,
        },
        // Enter confirms: a key that types no text, so letters typed ahead (a word meant for
        // the filter) cannot open a dialog and answer it.
        Dialog::Confirm(_) => match key.code {
            KeyCode::Enter => Some(Action::Confirm),
            KeyCode::Char('y') | KeyCode::Char('Y') => Some(Action::Unknown('y')),
            KeyCode::Char('n') | KeyCode::Char('N') | KeyCode::Esc => Some(Action::Cancel),
            _ => None,
        },
        Dialog::DryRunForm => match key.code {
            KeyCode::Esc => Some(Action::Cancel),
            KeyCode::Enter => Some(Action::Enter),
            KeyCode::Backspace => Some(Action::Backspace),
            KeyCode::Tab | KeyCode::Down => Some(Action::FormField(1)),
            KeyCode::BackTab | KeyCode::Up => Some(Action::FormField(-1)),
            KeyCode::Left => Some(Action::FormChoice(-1)),
            KeyCode::Right | KeyCode::Char(' ') => Some(Action::FormChoice(1)),
            KeyCode::Char(c) => Some(Action::Input(c)),
            _ => None,
        },
        Dialog::TopupForm { .. } => match key.code {
            KeyCode::Esc => Some(Action::Cancel),
            KeyCode::Enter => Some(Action::Enter),
            KeyCode::Backspace => Some(Action::Backspace),
            KeyCode::Char(c) => Some(Action::Input(c)),
            _ => None,
        },
        Dialog::Working { .. } => match key.code {
            KeyCode::Esc => Some(Action::Cancel),
            _ => None,
        },
        Dialog::Message { .. } => match key.code {
            KeyCode::Esc | KeyCode::Enter => Some(Action::Cancel),
            KeyCode::Char('q') | KeyCode::Char(' ') => Some(Action::Dismiss),
            _ => None,
        },
    }
}

fn normal_key(app: &App, key: KeyEvent, ctrl: bool) -> Option<Action> {
    if ctrl {
        return None;
    }
    let action = match key.code {
        KeyCode::Char('q') => Action::Quit,
        KeyCode::Char('?') if app.view == View::Help => Action::Cancel,
        KeyCode::Char('?') => Action::SwitchView(View::Help),
        KeyCode::Tab => Action::NextView,
        KeyCode::BackTab => Action::PrevView,
        KeyCode::Up | KeyCode::Char('k') => Action::Move(-1),
        KeyCode::Down | KeyCode::Char('j') => Action::Move(1),
        KeyCode::PageUp => Action::Move(-page(app)),
        KeyCode::PageDown => Action::Move(page(app)),
        KeyCode::Home | KeyCode::Char('g') => Action::Top,
        KeyCode::End | KeyCode::Char('G') => Action::Bottom,
        KeyCode::Char('/') => Action::StartFilter,
        KeyCode::Enter | KeyCode::Right => Action::Enter,
        KeyCode::Esc => Action::Cancel,
        KeyCode::Char('w') => Action::WriteReport,
        KeyCode::Char('b') => Action::ToggleBell,
        KeyCode::Char('h') => Action::ScrollColumns(-1),
        KeyCode::Char('l') => Action::ScrollColumns(1),
        KeyCode::Char(c) if View::for_key(c).is_some() => {
            return View::for_key(c).map(Action::SwitchView);
        }
        // The current view's own keys first; a key of another view still maps, so that its
        // handler can say where it works.
        // A stray letter (typed while no input was open) says so and does nothing else.
        code => {
            return views::view_key(app.view, code)
                .or_else(|| views::other_view_key(code))
                .or(match code {
                    KeyCode::Char(c) if !c.is_control() => Some(Action::Unknown(c)),
                    _ => None,
                });
        }
    };
    Some(action)
}
