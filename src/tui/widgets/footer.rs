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

fn tab_spans(app: &App, current: View, short: bool) -> Vec<Span<'static>> {
    let mut tabs = Vec::new();
    for v in View::TABBED {
        let mut label = match (short, v) {
            (true, View::Activities) => "Activ.".to_string(),
            (true, View::Compensation) => "Comp.".to_string(),
            (true, View::Reconcile) => "Recon.".to_string(),
            _ => v.title().to_string(),
        };
        match v {
            View::Alerts => {
                if let Some(r) = app.stock.report() {
                    label = format!("{label}({})", r.alarms());
                }
            }
            View::Compensation => {
                if let Some(r) = app.stock.report() {
                    label = format!("{label}({})", r.compensation.pending);
                }
            }
            View::DryRun if app.views.dry_run.run.as_ref().is_some_and(|r| r.running()) => {
                label = format!("{label}*");
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
    // Full titles when they fit, else the long ones shortened, so that every view's key
    // stays on screen at 100 columns.
    let mut tabs = tab_spans(app, current, false);
    if Line::from(tabs.clone()).width() > width {
        tabs = tab_spans(app, current, true);
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
