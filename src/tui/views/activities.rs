//! Activities: id, window, state (draft, scheduled, preheated, live, ended, cancelled), alert
//! count. Enter shows one in every other view.

use super::error_line;
use crate::tui::app::{App, View};
use crate::tui::widgets::table::{self, TableSpec, h, hn, num};
use crate::tui::widgets::{bold, critical, dim, good, warning};
use chrono::{DateTime, Datelike, FixedOffset, Utc};
use ratatui::Frame;
use ratatui::layout::{Constraint, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Cell, Row};

pub fn render(frame: &mut Frame, area: Rect, app: &App) {
    let rows = app.activity_rows();
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
        let state = app.activity_state(a, now);
        let state_style = match state {
            "live" => good(),
            "preheated" => Style::default().fg(ratatui::style::Color::Cyan),
            "ended" | "cancelled" | "draft" => dim(),
            _ => Style::default(),
        };
        let alerts = app.alert_count(id);
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
