//! One component per view, one file each: the view's own state (its table cursor with the
//! selection and filter, and whatever only it shows), its rows, its keys and its drawing. The
//! App holds the components in [`Views`] and keeps only what several views share. Drawing
//! reads `&App` and changes nothing beyond a table's scroll position; no I/O.

pub mod activities;
pub mod alerts;
pub mod audit;
pub mod compensation;
pub mod dry_run;
pub mod events;
pub mod help;
pub mod preheat;
pub mod reconcile;
pub mod redis;
pub mod stock;

use super::action::Action;
use super::app::App;
use super::cursor::TableCursor;
use super::view::View;
use super::widgets;
use crossterm::event::KeyCode;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::Line;
use ratatui::widgets::Paragraph;

/// A key a view answers, for its footer: (key, what it does, whether it writes; writes are
/// left out in read-only mode).
pub type ViewKey = (&'static str, &'static str, bool);

/// Every view's component.
#[derive(Debug, Default)]
pub struct Views {
    pub activities: activities::ActivitiesView,
    pub stock: stock::StockView,
    pub alerts: alerts::AlertsView,
    pub compensation: compensation::CompensationView,
    pub reconcile: reconcile::ReconcileView,
    pub preheat: preheat::PreheatView,
    pub redis: redis::RedisView,
    pub audit: audit::AuditView,
    pub dry_run: dry_run::DryRunView,
    pub events: events::EventsView,
    /// The first binding the help shows (it scrolls on a small terminal).
    pub help_scroll: usize,
    /// The cursor of the views without a table (Dry run, Help): never drawn, never moved.
    no_table: TableCursor,
}

impl Views {
    /// The table cursor of a view.
    pub fn cursor(&self, view: View) -> &TableCursor {
        match view {
            View::Activities => &self.activities.cursor,
            View::Stock => &self.stock.cursor,
            View::Alerts => &self.alerts.cursor,
            View::Compensation => &self.compensation.cursor,
            View::Reconcile => &self.reconcile.cursor,
            View::Preheat => &self.preheat.cursor,
            View::Redis => &self.redis.cursor,
            View::Audit => &self.audit.cursor,
            View::Events => &self.events.cursor,
            View::DryRun | View::Help => &self.no_table,
        }
    }

    pub fn cursor_mut(&mut self, view: View) -> &mut TableCursor {
        match view {
            View::Activities => &mut self.activities.cursor,
            View::Stock => &mut self.stock.cursor,
            View::Alerts => &mut self.alerts.cursor,
            View::Compensation => &mut self.compensation.cursor,
            View::Reconcile => &mut self.reconcile.cursor,
            View::Preheat => &mut self.preheat.cursor,
            View::Redis => &mut self.redis.cursor,
            View::Audit => &mut self.audit.cursor,
            View::Events => &mut self.events.cursor,
            View::DryRun | View::Help => &mut self.no_table,
        }
    }
}

/// The keys a view answers, for its footer.
pub fn view_keys(view: View) -> &'static [ViewKey] {
    match view {
        View::Activities => activities::ActivitiesView::KEYS,
        View::Stock => stock::StockView::KEYS,
        View::Alerts => alerts::AlertsView::KEYS,
        View::Compensation => compensation::CompensationView::KEYS,
        View::Reconcile => reconcile::ReconcileView::KEYS,
        View::Preheat => preheat::PreheatView::KEYS,
        View::Redis => redis::RedisView::KEYS,
        View::Audit => audit::AuditView::KEYS,
        View::DryRun => dry_run::DryRunView::KEYS,
        View::Events => events::EventsView::KEYS,
        View::Help => &[("Esc", "back", false)],
    }
}

/// The action of a view's own key, if `code` is one of them.
pub fn view_key(view: View, code: KeyCode) -> Option<Action> {
    match view {
        View::Stock => stock::StockView::key(code),
        View::Compensation => compensation::CompensationView::key(code),
        View::Reconcile => reconcile::ReconcileView::key(code),
        View::Preheat => preheat::PreheatView::key(code),
        View::DryRun => dry_run::DryRunView::key(code),
        View::Activities | View::Alerts | View::Redis | View::Audit | View::Events | View::Help => {
            None
        }
    }
}

/// The action of a key that belongs to another view: the action's handler, finding the wrong
/// view, says where the key works (so `s` on the Alerts view answers "press s on the Stock
/// view (2)" instead of nothing).
pub fn other_view_key(code: KeyCode) -> Option<Action> {
    View::TABBED.into_iter().find_map(|v| view_key(v, code))
}

/// Below this the screen says so instead of drawing a broken layout.
pub const MIN_WIDTH: u16 = 60;
pub const MIN_HEIGHT: u16 = 12;

/// Draws the whole screen.
pub fn render(frame: &mut Frame, app: &App) {
    let area = frame.area();
    if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
        let text = vec![
            Line::raw(format!("terminal {}x{}", area.width, area.height)),
            Line::raw(format!("needs {MIN_WIDTH}x{MIN_HEIGHT}")),
            Line::raw("q quits"),
        ];
        frame.render_widget(Paragraph::new(text), area);
        return;
    }
    let [header, body, footer] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Min(1),
        Constraint::Length(3),
    ])
    .areas(area);
    widgets::header::render(frame, header, app);
    render_view(frame, body, app);
    widgets::footer::render(frame, footer, app);
    if let Some(d) = &app.dialog {
        widgets::dialog::render(frame, area, app, d);
    }
    if app.config.ascii {
        widgets::ascii::downgrade(frame.buffer_mut());
    }
}

/// The body of the current view.
pub fn render_view(frame: &mut Frame, area: Rect, app: &App) {
    match app.view {
        View::Activities => activities::render(frame, area, app),
        View::Stock => stock::render(frame, area, app),
        View::Alerts => alerts::render(frame, area, app),
        View::Compensation => compensation::render(frame, area, app),
        View::Reconcile => reconcile::render(frame, area, app),
        View::Preheat => preheat::render(frame, area, app),
        View::Redis => redis::render(frame, area, app),
        View::Audit => audit::render(frame, area, app),
        View::DryRun => dry_run::render(frame, area, app),
        View::Events => events::render(frame, area, app),
        View::Help => help::render(frame, area, app),
    }
}

/// Why a per-activity view has no rows: no activity yet, no data yet, or the poll's error.
pub fn empty_reason<T>(app: &App, feed: &super::feed::Feed<T>, none: &str) -> String {
    if app.activity.is_none() {
        return match app.activities.error_text() {
            Some(e) => format!("No activity: the list cannot be read ({e}). Retrying."),
            None => "No activity selected: press 1, highlight one, Enter.".into(),
        };
    }
    match (&feed.data, feed.error_text()) {
        (None, Some(e)) => format!("No data: {e}. Retrying every refresh."),
        (None, None) => waiting(app),
        (Some(_), _) => none.into(),
    }
}

/// What the first snapshot of the selected activity waits on, and for how long.
fn waiting(app: &App) -> String {
    use crate::tui::data::Link;
    let id = app
        .activity
        .as_ref()
        .map_or_else(String::new, ToString::to_string);
    let secs = app.now.saturating_duration_since(app.watch_since).as_secs();
    let on = match (app.redis_link(), app.db_link()) {
        (Link::Down(e), _) => format!("Redis does not answer ({e}); retrying"),
        (_, Link::Down(e)) => format!("the database does not answer ({e}); retrying"),
        (Link::Degraded(e), _) => format!("some Redis nodes do not answer ({e})"),
        _ => match app.stock.settling {
            Some(p) => format!(
                "settling its books from scratch, {p}% read (every event and live order once; a cold start of a big sale takes a while and goes on until it ends)"
            ),
            None => "reading its products from the database and their keys from Redis (a poll gives up after 10 s without a read and says why)".into(),
        },
    };
    format!("Waiting {secs}s for the first snapshot of {id}: {on}.")
}

/// The error line under a table whose last poll failed (its rows are the last good ones).
pub fn error_line<T>(feed: &super::feed::Feed<T>) -> Option<Line<'static>> {
    feed.error_text().map(|e| {
        Line::styled(
            format!(" last poll failed: {} ", widgets::clip(e, 120)),
            widgets::critical(),
        )
    })
}

/// A drift with its sign and grouping ("+7", "-3,002", "0"), "-" when there is none (missing,
/// corrupt).
pub fn drift(v: Option<i64>) -> String {
    v.map_or_else(|| "-".into(), crate::tui::widgets::columns::signed)
}

/// An age in the largest sensible unit: 42s, 3m12s, 2h05m, 3d04h.
pub fn age(secs: i64) -> String {
    let s = secs.max(0);
    if s < 60 {
        format!("{s}s")
    } else if s < 3600 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else if s < 86_400 {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    } else {
        format!("{}d{:02}h", s / 86_400, (s % 86_400) / 3600)
    }
}

/// A text gauge for a table cell: `width` blocks filled by `percent`, then the figure.
pub fn bar(percent: f64, width: usize) -> String {
    // The bar fills at most its width; the figure is the truth (an oversold 101.5%, not 100%).
    let p = if percent.is_finite() {
        percent.max(0.0)
    } else {
        0.0
    };
    let filled = ((p.min(100.0) / 100.0) * width as f64).round() as usize;
    let filled = filled.min(width);
    format!(
        "{}{} {p:>5.1}%",
        "█".repeat(filled),
        "░".repeat(width - filled)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(age(5), "5s");
        assert_eq!(age(192), "3m12s");
        assert_eq!(age(7500), "2h05m");
        assert_eq!(age(-3), "0s");
        assert_eq!(drift(Some(7)), "+7");
        assert_eq!(drift(Some(0)), "0");
        assert_eq!(drift(None), "-");
        assert_eq!(bar(50.0, 4), "██░░  50.0%");
        assert_eq!(bar(f64::NAN, 2), "░░   0.0%");
        // Full, and the figure as it is: an oversold product is not shown at 100%.
        assert_eq!(bar(101.5, 2), "██ 101.5%");
        assert_eq!(bar(-3.0, 2), "░░   0.0%");
    }
}
