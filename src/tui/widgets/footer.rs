//! The footer: a message line (results, refusals, the filter prompt), the view keys, and the
//! keys of the current view. Write keys are left out in read-only mode.

use super::{bold, clip, critical, dim};
use crate::tui::app::App;
use crate::tui::view::View;
use crate::tui::views::view_keys;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

fn key(k: &str, what: &str) -> Vec<Span<'static>> {
    vec![
        Span::styled(format!(" {k}"), bold().fg(Color::Cyan)),
        Span::raw(format!(" {what} ")),
    ]
}

/// How much room the views' line has: full titles, short ones, or short ones packed.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fit {
    Full,
    Short,
    Packed,
    /// Three letters a view (60 columns).
    Tiny,
}

/// A view's name at `fit`.
fn tab_label(v: View, fit: Fit) -> &'static str {
    match (fit, v) {
        (Fit::Full, _) => v.title(),
        (Fit::Tiny, View::Activities) => "Act",
        (Fit::Tiny, View::Stock) => "Stk",
        (Fit::Tiny, View::Alerts) => "Alr",
        (Fit::Tiny, View::Compensation) => "Cmp",
        (Fit::Tiny, View::Reconcile) => "Rec",
        (Fit::Tiny, View::Preheat) => "Pre",
        (Fit::Tiny, View::Redis) => "Rds",
        (Fit::Tiny, View::Audit) => "Aud",
        (Fit::Tiny, View::DryRun) => "Dry",
        (Fit::Tiny, View::Events) => "Evt",
        (_, View::Activities) => "Activ.",
        (_, View::Compensation) => "Comp.",
        (_, View::Reconcile) => "Recon.",
        (Fit::Packed, View::Preheat) => "Preh.",
        _ => v.title(),
    }
}

fn tab_spans(app: &App, current: View, fit: Fit) -> Vec<Span<'static>> {
    let mut tabs = Vec::new();
    for v in View::TABBED {
        let mut label = tab_label(v, fit).to_string();
        match v {
            View::Alerts => {
                if let Some(r) = app.stock.report() {
                    label = format!("{label}({})", r.alarms());
                }
            }
            View::Compensation => {
                if let Some(r) = app.stock.report() {
                    label = format!(
                        "{label}({})",
                        crate::render::queue_count(r.compensation.pending, r.compensation.more)
                    );
                }
            }
            View::DryRun if app.views.dry_run.run.as_ref().is_some_and(|r| r.running()) => {
                label = format!("{label}*");
            }
            _ => {}
        }
        // The current view is bracketed as well as reversed, so that it stays marked where
        // attributes do not show (NO_COLOR, a plain terminal, a screen reader).
        let (style, open, close) = if v == current {
            (
                Style::default().add_modifier(Modifier::REVERSED | Modifier::BOLD),
                "[",
                "]",
            )
        } else {
            (Style::default(), " ", " ")
        };
        let lead = if matches!(fit, Fit::Packed | Fit::Tiny) && tabs.is_empty() {
            ""
        } else {
            " "
        };
        tabs.push(Span::styled(
            format!("{lead}{}", v.key()),
            bold().fg(Color::Cyan),
        ));
        let text = if matches!(fit, Fit::Packed | Fit::Tiny) {
            if v == current {
                format!("{open}{label}{close}")
            } else {
                label
            }
        } else {
            format!("{open}{label}{close}")
        };
        tabs.push(Span::styled(text, style));
    }
    tabs
}

pub fn render(frame: &mut Frame, area: Rect, app: &App) {
    let [message, views, actions] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Length(1),
        Constraint::Length(1),
    ])
    .areas(area);
    let width = usize::from(area.width);

    if app.filtering {
        super::filter::prompt(frame, message, app);
    } else if let Some(f) = &app.flash {
        let style = if f.error { critical() } else { bold() };
        frame.render_widget(
            Line::styled(
                format!(" {}", clip(&f.text, width.saturating_sub(1))),
                style,
            ),
            message,
        );
    } else if let Some(b) = &app.busy {
        let secs = app.now.saturating_duration_since(b.since).as_secs();
        frame.render_widget(
            Line::styled(format!(" {} is running ({secs}s) ...", b.what), bold()),
            message,
        );
    } else if let Some(r) = app.views.dry_run.run.as_ref().filter(|r| r.running())
        && app.view != View::DryRun
    {
        let secs = app.now.saturating_duration_since(r.started).as_secs();
        frame.render_widget(
            Line::styled(
                format!(
                    " a dry run of {} is running ({secs}s): 9 shows it",
                    r.activity
                ),
                bold(),
            ),
            message,
        );
    }

    let current = if app.view == View::Help {
        app.back_to
    } else {
        app.view
    };
    // Full titles when they fit, else the long ones shortened, else packed, so that every
    // view's key stays on screen down to 60 columns.
    let mut tabs = tab_spans(app, current, Fit::Full);
    for fit in [Fit::Short, Fit::Packed, Fit::Tiny] {
        if Line::from(tabs.clone()).width() <= width {
            break;
        }
        tabs = tab_spans(app, current, fit);
    }
    frame.render_widget(Line::from(tabs), views);

    let mut own: Vec<Vec<Span>> = Vec::new();
    if app.view.has_table() {
        own.push(key("↑↓", "move"));
        own.push(key("/", "filter"));
    }
    for (k, what, writes) in view_keys(app.view) {
        if *writes && app.config.read_only {
            continue;
        }
        own.push(key(k, what));
    }
    let mut tail = key("?", "help");
    tail.extend(key("q", "quit"));
    if app.config.read_only && view_keys(app.view).iter().any(|(_, _, w)| *w) {
        tail.push(Span::styled(" (read-only: writes hidden)", dim()));
        if matches!(app.view, View::Stock | View::Reconcile) {
            tail.extend(key("f/F", "preview a fix"));
        }
    }
    // "? help" and "q quit" always show: the view's own keys give way from the right, and
    // a mark says that the help lists the rest.
    let tail_w = Line::from(tail.clone()).width();
    let mut dropped = false;
    while !own.is_empty()
        && Line::from(own.concat()).width() + tail_w + usize::from(dropped) * 2 > width
    {
        own.pop();
        dropped = true;
    }
    let mut spans = own.concat();
    if dropped {
        spans.push(Span::styled(" …", dim()));
    }
    spans.extend(tail);
    frame.render_widget(Line::from(spans), actions);
}
