//! Redis: every node with its role, latency, the deduction script's presence, ops/s and
//! memory; the slowest recent commands below. Read-only commands only (INFO, SLOWLOG GET).

use super::ViewKey;
use super::{age, error_line};
use crate::ops::health::{NodeInfo, RedisInfo};
use crate::tui::app::App;
use crate::tui::cursor::{TableCursor, matches};
use crate::tui::feed::Feed;
use crate::tui::view::View;
use crate::tui::widgets::columns::{Column, grouped};
use crate::tui::widgets::table::{self, ColumnsSpec, Text};
use crate::tui::widgets::{bold, clip, critical, dim};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};

/// The Redis view: every node with its role, health, INFO figures and slowlog.
#[derive(Debug, Default)]
pub struct RedisView {
    pub cursor: TableCursor,
}

impl RedisView {
    /// This view's own keys for the footer: (key, what, writes).
    pub const KEYS: &'static [ViewKey] = &[];

    /// The rows (filter applied).
    pub fn rows<'a>(&self, feed: &'a Feed<RedisInfo>) -> Vec<&'a NodeInfo> {
        let f = self.cursor.needle();
        feed.data
            .iter()
            .flat_map(|r| r.nodes.iter())
            .filter(|n| matches(&n.health.addr, &f) || matches(n.health.role.as_str(), &f))
            .collect()
    }
}

/// Slowlog entries listed (the slowest first, over every node).
const SLOWLOG_SHOWN: usize = 10;

pub fn render(frame: &mut Frame, area: Rect, app: &App) {
    let rows = app.views.redis.rows(&app.redis);
    let [nodes_area, slow_area] =
        Layout::vertical([Constraint::Min(5), Constraint::Length(8)]).areas(area);
    let title = Line::from(vec![
        Span::styled(" Redis ", bold()),
        Span::styled(format!("{} node(s) ", rows.len()), dim()),
    ]);
    let empty = match (&app.redis.data, app.redis.error_text()) {
        (_, Some(e)) => format!("No answer: {e}. Retrying every refresh."),
        (None, None) => "Connecting ...".into(),
        (Some(_), None) => "No node matches the filter.".into(),
    };
    let spec = ColumnsSpec {
        title,
        columns: &COLUMNS,
        empty,
        bottom: error_line(&app.redis),
    };
    table::render_columns(frame, nodes_area, app, View::Redis, spec, rows.len(), |i| {
        let n = rows[i];
        let h = &n.health;
        let deduct = h.deduct_loaded();
        let loaded = h.scripts.iter().filter(|(_, l)| *l).count();
        let style = if !h.ok || deduct == Some(false) {
            critical()
        } else {
            Style::default()
        };
        let cells = vec![
            Text::from(h.addr.clone()),
            Text::from(n.health.role.as_str()),
            Text::from(if h.ok { "yes" } else { "NO" }),
            Text::from(
                h.latency_ms
                    .map_or_else(|| "-".into(), |ms| format!("{ms:.2}ms")),
            ),
            Text::from(match deduct {
                Some(true) => "loaded",
                Some(false) => "MISSING",
                None => "-",
            }),
            Text::from(if h.scripts.is_empty() {
                "-".to_string()
            } else {
                format!("{loaded}/{}", h.scripts.len())
            }),
            Text::from(
                n.stats
                    .ops_per_sec
                    .map_or_else(|| "-".into(), |o| grouped(o.round() as i64)),
            ),
            Text::from(memory_cell(&n.stats)),
            Text::from(n.stats.memory.policy.clone().unwrap_or_else(|| "-".into())),
            Text::from(n.stats.memory.evicted_keys.map_or_else(
                || "-".into(),
                |e| grouped(i64::try_from(e).unwrap_or(i64::MAX)),
            )),
            Text::from(n.stats.version.clone().unwrap_or_else(|| "-".into())),
        ];
        (cells, style)
    });

    let mut slow: Vec<(&str, &crate::redis::info::SlowEntry)> = rows
        .iter()
        .flat_map(|n| n.slowlog.iter().map(move |e| (n.health.addr.as_str(), e)))
        .collect();
    slow.sort_by_key(|s| std::cmp::Reverse(s.1.micros));
    let now = app.redis.taken_at.map_or(0, |t| t.timestamp());
    let width = usize::from(slow_area.width.saturating_sub(40));
    let lines: Vec<Line> = if slow.is_empty() {
        vec![Line::styled("no slow commands logged", dim())]
    } else {
        slow.iter()
            .take(SLOWLOG_SHOWN)
            .map(|(addr, e)| {
                Line::raw(format!(
                    "{:>9.2}ms {:>6} ago  {:<21} {}",
                    e.micros as f64 / 1000.0,
                    age(now - e.at_unix),
                    clip(addr, 21),
                    clip(&e.command, width)
                ))
            })
            .collect()
    };
    let block = Block::default()
        .borders(Borders::ALL)
        .title(Span::styled(" Slowlog (slowest first) ", bold()));
    frame.render_widget(Paragraph::new(lines).block(block), slow_area);
}

/// `2.3M/64.0M 4%`: used against `maxmemory` (`none` without a limit).
fn memory_cell(stats: &crate::redis::info::NodeStats) -> String {
    let Some(used) = stats.used_memory.clone() else {
        return "-".into();
    };
    let max = stats.max_memory.clone().unwrap_or_else(|| "-".into());
    match stats.memory.used_share() {
        Some(share) => format!("{used}/{max} {:.0}%", share * 100.0),
        None => format!("{used}/{max}"),
    }
}

/// The nodes' columns: the node, whether it answers and whether it holds the deduction stay.
const COLUMNS: [Column; 11] = [
    Column::text("node", (9, 40), 0),
    Column::text("role", (4, 8), 3),
    Column::text("ok", (3, 3), 0),
    Column::number("latency", 4),
    Column::text("deduct", (6, 7), 0),
    Column::text("scripts", (7, 7), 6),
    Column::number("ops/s", 2),
    Column::text("memory", (6, 22), 1),
    Column::text("policy", (6, 14), 5),
    Column::number("evicted", 4),
    Column::text("version", (7, 9), 7),
];
