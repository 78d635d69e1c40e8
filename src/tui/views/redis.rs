//! Redis: every node with its role, latency, the deduction script's presence, ops/s and
//! memory; the slowest recent commands below. Read-only commands only (INFO, SLOWLOG GET).

use super::ViewKey;
use super::{age, error_line};
use crate::ops::health::{NodeInfo, RedisInfo};
use crate::tui::app::App;
use crate::tui::cursor::{TableCursor, matches};
use crate::tui::feed::Feed;
use crate::tui::view::View;
use crate::tui::widgets::table::{self, TableSpec, h, hn, num};
use crate::tui::widgets::{bold, clip, critical, dim};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row};

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
    let spec = TableSpec {
        title,
        header: vec![
            h("node"),
            h("role"),
            h("ok"),
            hn("latency"),
            h("deduct"),
            h("scripts"),
            hn("ops/s"),
            hn("memory"),
            hn("max"),
            h("version"),
        ],
        widths: vec![
            Constraint::Min(16),
            Constraint::Length(7),
            Constraint::Length(4),
            Constraint::Length(8),
            Constraint::Length(7),
            Constraint::Length(7),
            Constraint::Length(8),
            Constraint::Length(8),
            Constraint::Length(8),
            Constraint::Length(8),
        ],
        empty,
        bottom: error_line(&app.redis),
    };
    table::render(frame, nodes_area, app, View::Redis, spec, rows.len(), |i| {
        let n = rows[i];
        let h = &n.health;
        let deduct = h.deduct_loaded();
        let loaded = h.scripts.iter().filter(|(_, l)| *l).count();
        let style = if !h.ok || deduct == Some(false) {
            critical()
        } else {
            Style::default()
        };
        Row::new(vec![
            Cell::from(h.addr.clone()),
            Cell::from(n.health.role.as_str()),
            Cell::from(if h.ok { "yes" } else { "NO" }),
            num(h
                .latency_ms
                .map_or_else(|| "-".into(), |ms| format!("{ms:.2}ms"))),
            Cell::from(match deduct {
                Some(true) => "loaded",
                Some(false) => "MISSING",
                None => "-",
            }),
            Cell::from(if h.scripts.is_empty() {
                "-".to_string()
            } else {
                format!("{loaded}/{}", h.scripts.len())
            }),
            num(n
                .stats
                .ops_per_sec
                .map_or_else(|| "-".into(), |o| format!("{o:.0}"))),
            num(n.stats.used_memory.clone().unwrap_or_else(|| "-".into())),
            num(n.stats.max_memory.clone().unwrap_or_else(|| "-".into())),
            Cell::from(n.stats.version.clone().unwrap_or_else(|| "-".into())),
        ])
        .style(style)
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
