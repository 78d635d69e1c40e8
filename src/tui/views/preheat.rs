//! Preheat: runs the gate (after a confirmation) with a progress bar, then shows the go /
//! no-go report with its reasons and what happened to each product.

use super::ViewKey;
use crate::domain::ActivityId;
use crate::domain::preheat::Action;
use crate::domain::stock::State;
use crate::error::Error;
use crate::ops::preheat::PreheatProduct;
use crate::ops::preheat::PreheatReport;
use crate::tui::action::Action as Do;
use crate::tui::app::App;
use crate::tui::cursor::{TableCursor, matches};
use crate::tui::view::View;
use crate::tui::widgets::columns::{Column, grouped};
use crate::tui::widgets::table::{self, ColumnsSpec, Text};
use crate::tui::widgets::{bold, critical, dim, good, warning};
use crossterm::event::KeyCode;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Gauge, Paragraph, Wrap};

/// A preheat in progress.
#[derive(Clone, Debug)]
pub struct PreheatRun {
    pub seq: u64,
    pub activity: ActivityId,
    pub force: bool,
    pub stage: String,
    pub done: usize,
    pub total: usize,
    /// When it started (the progress says for how long it has run).
    pub since: std::time::Instant,
}

/// The Preheat view: the gate's progress while it runs and its last report.
#[derive(Debug, Default)]
pub struct PreheatView {
    pub cursor: TableCursor,
    pub run: Option<PreheatRun>,
    /// The last preheat's outcome, for the activity it ran on.
    pub report: Option<(ActivityId, Result<PreheatReport, Error>)>,
    /// When that outcome arrived (the report says how old it is).
    pub reported_at: Option<std::time::Instant>,
}

impl PreheatView {
    /// This view's own keys for the footer: (key, what, writes).
    pub const KEYS: &'static [ViewKey] = &[("p", "preheat", true), ("P", "preheat --force", true)];

    /// The action of one of this view's keys.
    pub fn key(code: KeyCode) -> Option<Do> {
        match code {
            KeyCode::Char('p') => Some(Do::Preheat { force: false }),
            KeyCode::Char('P') => Some(Do::Preheat { force: true }),
            _ => None,
        }
    }

    /// The report rows of the last preheat of `activity` (filter applied).
    pub fn rows(&self, activity: Option<&ActivityId>) -> Vec<&PreheatProduct> {
        let f = self.cursor.needle();
        match &self.report {
            Some((id, Ok(r))) if Some(id) == activity => r
                .products
                .iter()
                .filter(|p| matches(&p.product, &f))
                .collect(),
            _ => Vec::new(),
        }
    }
}

/// Reasons listed above the table; the rest are counted.
const REASONS_SHOWN: usize = 4;

pub fn render(frame: &mut Frame, area: Rect, app: &App) {
    let selected = app.activity.as_ref();
    let report = match &app.views.preheat.report {
        Some((id, r)) if Some(id) == selected => Some(r),
        _ => None,
    };
    let running = app
        .views
        .preheat
        .run
        .as_ref()
        .filter(|r| Some(&r.activity) == selected);
    let top_height = match (running, report) {
        (Some(_), _) => 4,
        // The banner, the summary, its age and what moved since, the reasons, the border.
        (None, Some(Ok(r))) => {
            // A warning names up to ten products: the rows it wraps to, not one (its tail was
            // cut off at the bottom of the box).
            let inner = usize::from(area.width.saturating_sub(2)).max(1);
            let warned: usize = r
                .warnings
                .iter()
                .map(|w| (w.chars().count() + 3).div_ceil(inner))
                .sum();
            (5 + r.reasons.len().min(REASONS_SHOWN + 1) as u16)
                .saturating_add(u16::try_from(warned).unwrap_or(u16::MAX))
        }
        _ => 4,
    };
    let [top, rest] =
        Layout::vertical([Constraint::Length(top_height), Constraint::Min(3)]).areas(area);

    if let Some(run) = running {
        let ratio = if run.total == 0 {
            0.0
        } else {
            (run.done as f64 / run.total as f64).clamp(0.0, 1.0)
        };
        let title = if run.force {
            " Preheat --force running "
        } else {
            " Preheat running "
        };
        let gauge = Gauge::default()
            .block(Block::default().borders(Borders::ALL).title(title))
            .gauge_style(Style::default().fg(Color::Cyan).bg(Color::DarkGray))
            .ratio(ratio)
            .label(format!(
                "{}: {} / {} ({}s)",
                run.stage,
                run.done,
                run.total,
                app.now.saturating_duration_since(run.since).as_secs()
            ));
        frame.render_widget(gauge, top);
    } else {
        let lines = match report {
            Some(Ok(r)) => report_lines(r, app),
            Some(Err(e)) => vec![
                Line::styled(" Preheat failed", critical()),
                Line::raw(format!(" {}", e.message)),
            ],
            None => idle_lines(app),
        };
        frame.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), top);
    }

    let rows = app.views.preheat.rows(app.activity.as_ref());
    let title = Line::from(vec![
        Span::styled(" Preheat report ", bold()),
        Span::styled(format!("{} products ", rows.len()), dim()),
    ]);
    let empty = if app.activity.is_none() {
        "No activity selected: press 1, highlight one, Enter.".to_string()
    } else {
        "No report yet: the per-product result of the gate shows here.".to_string()
    };
    let spec = ColumnsSpec {
        title,
        columns: &COLUMNS,
        empty,
        bottom: None,
    };
    table::render_columns(frame, rest, app, View::Preheat, spec, rows.len(), |i| {
        let p = rows[i];
        let action = p.action.as_str();
        let style = if p.error.is_some() || p.action == Action::Conflict {
            critical()
        } else if !p.verified {
            warning()
        } else {
            Style::default()
        };
        let cells = vec![
            Text::from(p.product.clone()),
            Text::from(action),
            Text::from(grouped(p.stock)),
            Text::from(grouped(p.per_user_limit)),
            Text::from(p.previous.clone().unwrap_or_else(|| "-".into())),
            Text::from(yes_no(p.written)),
            Text::from(yes_no(p.verified)),
            Text::from(grouped(p.token_bucket.capacity)),
            Text::from(p.token_bucket.shown_rate()),
        ];
        (cells, style)
    });
}

/// The gate's columns: the product, what it did and whether it verified stay.
const COLUMNS: [Column; 9] = [
    Column::text("product", (6, 24), 0),
    Column::text("action", (6, 9), 0),
    Column::number("stock", 1),
    Column::number("limit", 4),
    Column::number("previous", 3),
    Column::text("written", (7, 7), 2),
    Column::text("verified", (8, 8), 0),
    Column::number("bucket", 6),
    Column::number("rate/s", 5),
];

/// What the gate did, or, when it stopped before writing, what it had planned: a no-go over a
/// table of "unchanged" rows once read "0 written, 0 unchanged".
fn summary(r: &PreheatReport) -> String {
    match r.planned() {
        Some(plan) => format!(
            " {plan} ({} conflict(s)), {} ms",
            r.conflicts.len(),
            r.elapsed_ms
        ),
        None => format!(
            " {} written, {} unchanged, {} conflict(s), total stock {}, {} ms",
            grouped(i64::try_from(r.written).unwrap_or(i64::MAX)),
            grouped(i64::try_from(r.unchanged).unwrap_or(i64::MAX)),
            r.conflicts.len(),
            grouped(r.total_stock),
            r.elapsed_ms
        ),
    }
}

fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.to_string()
}

/// When the report was made, and whether Redis has moved away from it since (a GO of an hour
/// ago says nothing of a key deleted since).
fn report_age(app: &App) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    if let Some(seen) = app.views.preheat.reported_at {
        let ago = app.now.saturating_duration_since(seen).as_secs();
        out.push(Line::styled(
            format!(
                " made {} ago",
                super::age(i64::try_from(ago).unwrap_or(i64::MAX))
            ),
            dim(),
        ));
    }
    if let Some((missing, _)) = missing_now(app).filter(|(m, _)| *m > 0) {
        out.push(Line::styled(
            format!(
                " since then: {missing} product(s) have lost keys in Redis (the Stock view lists them; p runs the gate again)"
            ),
            warning(),
        ));
    }
    out
}

fn report_lines(r: &PreheatReport, app: &App) -> Vec<Line<'static>> {
    let go = r.decision == "go";
    let banner = Span::styled(
        if go { "  GO  " } else { " NO-GO " },
        Style::default()
            .fg(Color::Black)
            .bg(if go { Color::Green } else { Color::Red })
            .add_modifier(Modifier::BOLD),
    );
    let mut lines = vec![
        Line::from(vec![
            Span::raw(" "),
            banner,
            Span::styled(format!("  preheat of {}", r.activity), bold()),
        ]),
        Line::raw(summary(r)),
    ];
    lines.extend(report_age(app));
    for reason in r.reasons.iter().take(REASONS_SHOWN) {
        lines.push(Line::styled(format!(" - {reason}"), critical()));
    }
    if r.reasons.len() > REASONS_SHOWN {
        lines.push(Line::styled(
            format!(
                " ... and {} more reason(s)",
                r.reasons.len() - REASONS_SHOWN
            ),
            dim(),
        ));
    }
    for warning in &r.warnings {
        lines.push(Line::styled(format!(" ! {warning}"), critical()));
    }
    lines
}

/// Products of the last refresh whose keys are missing, and how many products there are.
fn missing_now(app: &App) -> Option<(usize, usize)> {
    let r = app.stock.report()?;
    let missing = r
        .products
        .iter()
        .filter(|p| p.state == State::Missing)
        .count();
    Some((missing, r.products.len()))
}

fn idle_lines(app: &App) -> Vec<Line<'static>> {
    let mut lines = vec![Line::styled(
        " The preheat gate writes the activity's keys from database truth, verifies them and decides go / no-go.",
        bold(),
    )];
    if let Some((missing, total)) = missing_now(app) {
        let style = if missing == 0 { good() } else { warning() };
        lines.push(Line::styled(
            format!(" Now: {missing} of {total} product(s) have no stock key in Redis.",),
            style,
        ));
    }
    lines.push(if app.config.read_only {
        Line::styled(" read-only: preheat is disabled", dim())
    } else {
        Line::styled(
            " p runs it (asks first); P forces it over conflicting keys (asks for the activity id).",
            dim(),
        )
    });
    lines
}
