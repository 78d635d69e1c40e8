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
use crate::tui::widgets::table::{self, TableSpec, h, hn, num};
use crate::tui::widgets::{bold, critical, dim, good, warning};
use chrono::{DateTime, Datelike, FixedOffset, Utc};
use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Row};

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
        Span::styled(format!("{} ", rows.len()), dim()),
    ]);
    let empty = if app.activities.data.is_none() {
        match app.activities.error_text() {
            Some(e) => format!("No data: {e}. Retrying every refresh."),
            None => "Waiting for the database ...".into(),
        }
    } else {
        "No activities: import one with `seckill-console activity import FILE`.".into()
    };
    // As wide as the longest window shown: a window across a new year needs its end's year.
    let window_width = rows
        .iter()
        .map(|a| {
            let tz = app.config.tz;
            window_text(tz.at(a.activity.starts_at), tz.at(a.activity.ends_at)).len()
        })
        .max()
        .unwrap_or(0)
        .clamp(12, 36) as u16;
    let spec = TableSpec {
        title,
        header: vec![
            h(" "),
            h("activity"),
            h("name"),
            h(&format!("window ({})", app.config.tz.name())),
            h("state"),
            hn("products"),
            hn("stock"),
            hn("alerts"),
        ],
        widths: vec![
            Constraint::Length(1),
            Constraint::Min(12),
            Constraint::Min(10),
            Constraint::Length(window_width),
            Constraint::Length(9),
            Constraint::Length(8),
            Constraint::Length(9),
            Constraint::Length(6),
        ],
        empty,
        bottom: error_line(&app.activities),
    };
    table::render(frame, area, app, View::Activities, spec, rows.len(), |i| {
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
        let alert_style = match alerts {
            Some(n) if n > 0 => critical(),
            _ => Style::default(),
        };
        let tz = app.config.tz;
        let window = window_text(tz.at(a.activity.starts_at), tz.at(a.activity.ends_at));
        let marker = if app.activity.as_ref() == Some(&a.activity.activity_id) {
            Cell::from(Span::styled("*", warning()))
        } else {
            Cell::from(" ")
        };
        Row::new(vec![
            marker,
            Cell::from(id.to_string()),
            Cell::from(a.activity.name.clone()),
            Cell::from(window),
            Cell::from(Span::styled(state, state_style)),
            num(a.products.to_string()),
            num(a.total_stock.to_string()),
            num(alerts.map_or_else(|| "-".into(), |n| n.to_string())).style(alert_style),
        ])
    });
}

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
