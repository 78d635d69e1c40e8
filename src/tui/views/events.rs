//! Events (`0`): what changed while the console ran, as `watch` prints it: alerts raised and
//! cleared and products' state changes of the selected activity, newest first, kept until the
//! console exits (the last [`KEPT`]). The same [`Watcher`] as `watch`, fed by the snapshots the
//! views already read: it costs Redis and the database nothing.

use super::ViewKey;
use crate::domain::ActivityId;
use crate::domain::alerts::Severity;
use crate::ops::status::StatusReport;
use crate::ops::watch::{EventKind, WatchEvent, Watcher};
use crate::tui::app::App;
use crate::tui::cursor::{TableCursor, matches};
use crate::tui::view::View;
use crate::tui::widgets::columns::Column;
use crate::tui::widgets::table::{self, ColumnsSpec, Text};
use crate::tui::widgets::{bold, critical, dim, good, warning};
use chrono::Utc;
use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use std::collections::VecDeque;

/// Events kept: a long incident's worth, bounded.
pub const KEPT: usize = 10_000;

/// One logged event and the activity it happened on.
#[derive(Clone, Debug)]
pub struct Logged {
    pub activity: ActivityId,
    pub event: WatchEvent,
}

/// The Events view: the log and the watcher that writes it.
#[derive(Debug, Default)]
pub struct EventsView {
    pub cursor: TableCursor,
    /// Oldest first; shown newest first.
    pub log: VecDeque<Logged>,
    watcher: Watcher,
    watching: Option<ActivityId>,
}

impl EventsView {
    /// This view's own keys for the footer: (key, what, writes).
    pub const KEYS: &'static [ViewKey] = &[("Enter", "whole", false)];

    /// Logs what changed between the last snapshot of `activity` and `r`; returns the events
    /// logged, and whether `r` was the activity's first snapshot (a new activity starts a new
    /// watcher: its first snapshot raises what it holds).
    pub fn observe(&mut self, activity: &ActivityId, r: &StatusReport) -> (Vec<WatchEvent>, bool) {
        let first = self.watching.as_ref() != Some(activity);
        if first {
            self.watcher = Watcher::default();
            self.watching = Some(activity.clone());
        }
        let events = self.watcher.step(r, r.taken_at);
        for e in &events {
            if self.log.len() == KEPT {
                self.log.pop_front();
            }
            self.log.push_back(Logged {
                activity: activity.clone(),
                event: e.clone(),
            });
        }
        (events, first)
    }

    /// The rows, newest first (filter applied).
    pub fn rows(&self) -> Vec<&Logged> {
        let f = self.cursor.needle();
        self.log
            .iter()
            .rev()
            .filter(|l| {
                let e = &l.event;
                matches(l.activity.as_str(), &f)
                    || e.product.as_deref().is_some_and(|p| matches(p, &f))
                    || e.kind.is_some_and(|k| matches(k.as_str(), &f))
                    || e.message.as_deref().is_some_and(|m| matches(m, &f))
            })
            .collect()
    }
}

/// The event's word and its style.
fn what(e: &WatchEvent) -> (&'static str, Style) {
    match (e.event, e.severity) {
        (EventKind::State, _) => ("state", Style::default()),
        (EventKind::Master, _) => ("master", warning()),
        (EventKind::Cleared, _) => ("cleared", good()),
        (EventKind::Raised, Some(Severity::Critical)) => ("raised", critical()),
        (EventKind::Raised, Some(Severity::Warning)) => ("raised", warning()),
        (EventKind::Raised, _) => ("raised", dim()),
    }
}

pub fn render(frame: &mut Frame, area: Rect, app: &App) {
    let rows = app.views.events.rows();
    let title = Line::from(vec![
        Span::styled(" Events ", bold()),
        Span::styled(
            format!("{} newest first, kept while the console runs ", rows.len()),
            dim(),
        ),
    ]);
    let empty = if app.activity.is_none() {
        "No activity selected: press 1, highlight one, Enter.".to_string()
    } else {
        "Nothing has changed since the console started.".to_string()
    };
    let spec = ColumnsSpec {
        title,
        columns: &COLUMNS,
        empty,
        bottom: None,
    };
    let tz = app.config.tz;
    table::render_columns(frame, area, app, View::Events, spec, rows.len(), |i| {
        let l = rows[i];
        let e = &l.event;
        let (word, style) = what(e);
        let kind = match e.event {
            EventKind::State => format!(
                "{} -> {}",
                e.previous.unwrap_or("-"),
                e.state.unwrap_or("-")
            ),
            _ => e.kind.map_or("-", |k| k.as_str()).to_string(),
        };
        let cells = vec![
            tz.at(e.at.with_timezone(&Utc))
                .format("%H:%M:%S")
                .to_string(),
            l.activity.to_string(),
            word.to_string(),
            e.severity.map_or("", Severity::as_str).to_string(),
            kind,
            e.product.clone().unwrap_or_else(|| "-".into()),
            e.message.clone().unwrap_or_default(),
        ];
        (cells.into_iter().map(Text::from).collect(), style)
    });
}

/// The event log's columns: on a narrow terminal the activity goes first (the header names
/// the selected one), then the severity (the colour says it); ids are cut with `…`, never
/// silently, and the message takes the rest of the width.
const COLUMNS: [Column; 7] = [
    Column::text("time", (8, 8), 0),
    Column::text("activity", (8, 20), 5),
    Column::text("event", (5, 7), 0),
    Column::text("severity", (8, 8), 4),
    Column::text("kind / state", (8, 24), 0),
    Column::text("product", (7, 24), 0),
    Column::rest("message", 12),
];
