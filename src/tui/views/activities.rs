//! Activities: id, window, state (draft, scheduled, preheated, live, ended, cancelled), alert
//! count. Enter shows one in every other view.

use super::ViewKey;
use super::error_line;
use crate::db::activity::ActivitySummary;
use crate::domain::Phase;
use crate::tui::app::App;
use crate::tui::cursor::{TableCursor, matches};
use crate::tui::feed::{Feed, Overview};
use crate::tui::selected::preheated;
use crate::tui::view::View;
use crate::tui::widgets::columns::{Column, Kind, grouped};
use crate::tui::widgets::table::{self, ColumnsSpec, Text};
use crate::tui::widgets::{bold, critical, dim, good, warning};
use chrono::{DateTime, Datelike, FixedOffset, Utc};
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};

/// The Activities view: every activity with its phase, preheat state and alert count. Enter
/// makes the highlighted one the activity every other view shows.
#[derive(Debug, Default)]
pub struct ActivitiesView {
    pub cursor: TableCursor,
    /// Alert counts and preheat state of activities other than the selected one.
    pub overview: Feed<Vec<Overview>>,
}

impl ActivitiesView {
    /// This view's own keys for the footer: (key, what, writes).
    pub const KEYS: &'static [ViewKey] = &[("Enter", "show activity", false)];

    /// The rows shown (filter applied).
    pub fn rows<'a>(&'a self, app: &'a App) -> Vec<&'a ActivitySummary> {
        let f = self.cursor.needle();
        let at = app.activities.taken_at.unwrap_or_else(Utc::now);
        app.activities
            .data
            .iter()
            .flatten()
            .filter(|a| {
                matches(a.activity.activity_id.as_str(), &f)
                    || matches(&a.activity.name, &f)
                    || matches(self.state(app, a, at), &f)
            })
            .collect()
    }

    /// draft, cancelled, live, ended, preheated (upcoming, every key in Redis) or scheduled.
    pub fn state(&self, app: &App, a: &ActivitySummary, now: DateTime<Utc>) -> &'static str {
        match a.activity.status.as_str() {
            "cancelled" => return "cancelled",
            "draft" => return "draft",
            _ => {}
        }
        match a.activity.phase(now) {
            Phase::Live => "live",
            Phase::Ended => "ended",
            Phase::Cancelled => "cancelled",
            Phase::Upcoming => {
                if self.preheated(app, a.activity.activity_id.as_str()) == Some(true) {
                    "preheated"
                } else {
                    "scheduled"
                }
            }
        }
    }

    fn preheated(&self, app: &App, id: &str) -> Option<bool> {
        if app.activity.as_ref().is_some_and(|a| a.as_str() == id)
            && let Some(r) = app.stock.report()
        {
            return Some(preheated(r));
        }
        self.overview_of(id).map(|o| o.preheated)
    }

    fn overview_of(&self, id: &str) -> Option<&Overview> {
        self.overview
            .data
            .iter()
            .flatten()
            .find(|o| o.activity == id)
    }

    /// The activities other than the selected one that have alerts, and how many, most first.
    pub fn others_alerting(&self, app: &App) -> Vec<(String, usize)> {
        let mut out: Vec<(String, usize)> = self
            .overview
            .data
            .iter()
            .flatten()
            .filter(|o| o.alerts > 0)
            .filter(|o| {
                app.activity
                    .as_ref()
                    .is_none_or(|a| a.as_str() != o.activity)
            })
            .map(|o| (o.activity.clone(), o.alerts))
            .collect();
        out.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        out
    }

    /// The alert count of an activity, when known.
    pub fn alert_count(&self, app: &App, id: &str) -> Option<usize> {
        if app.activity.as_ref().is_some_and(|a| a.as_str() == id)
            && let Some(r) = app.stock.report()
        {
            return Some(r.alarms());
        }
        self.overview_of(id).map(|o| o.alerts)
    }
}

pub fn render(frame: &mut Frame, area: Rect, app: &App) {
    let rows = app.views.activities.rows(app);
    let now = app.activities.taken_at.unwrap_or_else(Utc::now);
    let title = Line::from(vec![
        Span::styled(" Activities ", bold()),
        Span::styled(
            format!("{}, windows in {} ", rows.len(), app.config.tz.name()),
            dim(),
        ),
    ]);
    let empty = if app.activities.data.is_none() {
        match app.activities.error_text() {
            Some(e) => format!("No data: {e}. Retrying every refresh."),
            None => "Waiting for the database ...".into(),
        }
    } else {
        "No activities: import one with `seckill-console activity import FILE`.".into()
    };
    let spec = ColumnsSpec {
        title,
        columns: &COLUMNS,
        empty,
        bottom: error_line(&app.activities),
    };
    table::render_columns(frame, area, app, View::Activities, spec, rows.len(), |i| {
        let a = rows[i];
        let id = a.activity.activity_id.as_str();
        let state = app.views.activities.state(app, a, now);
        let state_style = match state {
            "live" => good(),
            "preheated" => Style::default().fg(ratatui::style::Color::Cyan),
            "ended" | "cancelled" | "draft" => dim(),
            _ => Style::default(),
        };
        let alerts = app.views.activities.alert_count(app, id);
        let tz = app.config.tz;
        let window = window_text(tz.at(a.activity.starts_at), tz.at(a.activity.ends_at));
        let marker = if app.activity.as_ref() == Some(&a.activity.activity_id) {
            Text::styled("*", warning())
        } else {
            Text::from(" ")
        };
        let alerts = match alerts {
            Some(n) if n > 0 => Text::styled(n.to_string(), critical()),
            Some(n) => Text::from(n.to_string()),
            None => Text::from("-"),
        };
        let cells = vec![
            marker,
            Text::from(id),
            Text::from(a.activity.name.clone()),
            Text::from(window),
            Text::styled(state, state_style),
            Text::from(grouped(a.products)),
            Text::from(grouped(a.total_stock)),
            alerts,
        ];
        (cells, Style::default())
    });
}

/// The activities table's columns: the id, the state and the alerts stay on any terminal.
const COLUMNS: [Column; 8] = [
    Column {
        title: " ",
        kind: Kind::Fixed(1),
        drop: 0,
    },
    Column::text("activity", (8, 24), 0),
    Column::text("name", (4, 24), 5),
    Column::text("window", (12, 36), 4),
    Column::text("state", (5, 9), 0),
    Column::number("products", 3),
    Column::number("stock", 2),
    Column::number("alerts", 0),
];

/// The window as an operator reads it: the end leaves out what it shares with the start (the
/// date, or the year), never more.
fn window_text(starts: DateTime<FixedOffset>, ends: DateTime<FixedOffset>) -> String {
    let end = if ends.date_naive() == starts.date_naive() {
        ends.format("%H:%M")
    } else if ends.year() == starts.year() {
        ends.format("%m-%d %H:%M")
    } else {
        ends.format("%Y-%m-%d %H:%M")
    };
    format!("{} -> {end}", starts.format("%Y-%m-%d %H:%M"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn a_window_end_shows_its_year_when_it_is_another() {
        let at = |y, m, d, h| {
            Utc.with_ymd_and_hms(y, m, d, h, 0, 0)
                .single()
                .expect("time")
                .fixed_offset()
        };
        let start = at(2026, 12, 31, 20);
        assert_eq!(
            window_text(start, at(2026, 12, 31, 22)),
            "2026-12-31 20:00 -> 22:00"
        );
        assert_eq!(
            window_text(at(2026, 11, 30, 20), start),
            "2026-11-30 20:00 -> 12-31 20:00"
        );
        assert_eq!(
            window_text(start, at(2027, 1, 1, 2)),
            "2026-12-31 20:00 -> 2027-01-01 02:00"
        );
    }
}
