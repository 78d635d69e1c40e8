//! The footer: a message line (results, refusals, the filter prompt), the view keys, and the
//! keys of the current view. Write keys are left out in read-only mode.

use super::{bold, clip, critical, dim};
use crate::tui::app::{App, View};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

/// The keys of a view: (key, what), writes marked so read-only mode can hide them.
pub fn view_keys(view: View) -> &'static [(&'static str, &'static str, bool)] {
    match view {
        View::Activities => &[("Enter", "show activity", false)],
        View::Stock => &[
            ("s", "sort", false),
            ("S", "reverse", false),
            ("f", "fix product", true),
            ("F", "fix all", true),
        ],
        View::Alerts => &[],
        View::Compensation => &[("r", "resolve", true), ("R", "resolve all", true)],
        View::Reconcile => &[("f", "fix product", true), ("F", "fix all", true)],
        View::Preheat => &[("p", "preheat", true), ("P", "preheat --force", true)],
        View::Redis => &[],
        View::Audit => &[],
        View::Help => &[("Esc", "back", false)],
    }
}

fn key(k: &str, what: &str) -> Vec<Span<'static>> {
    vec![
        Span::styled(format!(" {k}"), bold().fg(Color::Cyan)),
        Span::raw(format!(" {what} ")),
    ]
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
    }

    let mut tabs = Vec::new();
    let current = if app.view == View::Help {
        app.back_to
    } else {
        app.view
    };
    for v in View::TABBED {
        let mut label = v.title().to_string();
        match v {
            View::Alerts => {
                if let Some(r) = app.stock.report() {
                    label = format!("{label}({})", r.alerts.len());
                }
            }
            View::Compensation => {
                if let Some(r) = app.stock.report() {
                    label = format!("{label}({})", r.compensation.pending);
                }
            }
            _ => {}
        }
        let style = if v == current {
            Style::default().add_modifier(Modifier::REVERSED | Modifier::BOLD)
        } else {
            Style::default()
        };
        tabs.push(Span::styled(
            format!(" {}", v.key()),
            bold().fg(Color::Cyan),
        ));
        tabs.push(Span::styled(format!(" {label} "), style));
    }
    frame.render_widget(Line::from(tabs), views);

    let mut spans = Vec::new();
    if app.view.has_table() {
        spans.extend(key("↑↓", "move"));
        spans.extend(key("/", "filter"));
    }
    for (k, what, writes) in view_keys(app.view) {
        if *writes && app.config.read_only {
            continue;
        }
        spans.extend(key(k, what));
    }
    spans.extend(key("?", "help"));
    spans.extend(key("q", "quit"));
    if app.config.read_only && view_keys(app.view).iter().any(|(_, _, w)| *w) {
        spans.push(Span::styled(" (read-only: writes hidden)", dim()));
    }
    frame.render_widget(Line::from(spans), actions);
}
