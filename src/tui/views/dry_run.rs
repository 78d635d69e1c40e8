//! Dry run: what it does and the form's last values when idle; while it runs, the running
//! strategy's progress, ops/s and latency, and a throughput chart over the whole run; after it,
//! the results of every strategy side by side and the detail of each failed invariant.

use super::ViewKey;
use super::age;
use crate::domain::ActivityId;
use crate::error::Error;
use crate::tui::action::Action;
use crate::tui::app::App;
use crate::tui::widgets::columns::{Column, grouped};
use crate::tui::widgets::table::{Text, measured};
use crate::tui::widgets::{bold, clip, critical, dim, good, warning};
use crate::worker::Strategy;
use crate::worker::{LiveSnapshot, RunStats};
use crossterm::event::KeyCode;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::{
    Axis, Block, Borders, Chart, Dataset, Gauge, GraphType, Paragraph, Table, Wrap,
};
use std::time::Instant;

/// What a dry run compares: one strategy, or all four side by side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StrategyChoice {
    One(Strategy),
    All,
}

impl StrategyChoice {
    /// The choices in the form's order.
    pub const CHOICES: [StrategyChoice; 5] = [
        StrategyChoice::One(Strategy::Lua),
        StrategyChoice::One(Strategy::Hincrby),
        StrategyChoice::One(Strategy::Lock),
        StrategyChoice::One(Strategy::Sql),
        StrategyChoice::All,
    ];

    /// The name, as `dry-run --strategy` spells it.
    pub fn name(self) -> &'static str {
        match self {
            StrategyChoice::One(s) => s.as_str(),
            StrategyChoice::All => "all",
        }
    }

    /// The strategies run, in order.
    pub fn strategies(self) -> Vec<Strategy> {
        match self {
            StrategyChoice::One(s) => vec![s],
            StrategyChoice::All => Strategy::ALL.to_vec(),
        }
    }

    /// The choice `n` steps away in [`Self::CHOICES`], wrapping around.
    pub fn step(self, n: isize) -> StrategyChoice {
        let len = Self::CHOICES.len() as isize;
        let i = Self::CHOICES.iter().position(|c| *c == self).unwrap_or(0) as isize;
        Self::CHOICES[(i + n).rem_euclid(len) as usize]
    }
}

/// A field of the dry-run form.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FormField {
    Buyers,
    Concurrency,
    Strategy,
}

impl FormField {
    pub const ALL: [FormField; 3] = [
        FormField::Buyers,
        FormField::Concurrency,
        FormField::Strategy,
    ];

    /// The field `n` steps away, wrapping around.
    pub fn step(self, n: isize) -> FormField {
        let len = Self::ALL.len() as isize;
        let i = Self::ALL.iter().position(|f| *f == self).unwrap_or(0) as isize;
        Self::ALL[(i + n).rem_euclid(len) as usize]
    }
}

/// The dry-run form as typed (numbers stay text until Enter, so a half-typed value is shown
/// as it is).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DryRunForm {
    pub buyers: String,
    pub concurrency: String,
    pub strategy: StrategyChoice,
    pub field: FormField,
    /// Why the last Enter was refused.
    pub error: Option<String>,
}

impl Default for DryRunForm {
    fn default() -> Self {
        DryRunForm {
            buyers: "1000".into(),
            concurrency: "50".into(),
            strategy: StrategyChoice::One(Strategy::Lua),
            field: FormField::Buyers,
            error: None,
        }
    }
}

/// Throughput points kept per strategy (an hour at one a second).
pub const THROUGHPUT_POINTS: usize = 3600;

/// A dry run started from the Dry run view: running, or done with its results (kept until the
/// next one starts).
#[derive(Debug)]
pub struct DryRun {
    pub seq: u64,
    pub activity: ActivityId,
    pub buyers: usize,
    pub concurrency: usize,
    pub strategies: Vec<Strategy>,
    /// When it started (UI clock).
    pub started: Instant,
    /// The strategy running now and its latest live figures.
    pub current: Option<(Strategy, LiveSnapshot)>,
    /// Ops/s over time per strategy: (seconds since the run started, ops/s).
    pub throughput: Vec<(Strategy, Vec<(f64, f64)>)>,
    /// Seconds since the start at the latest progress report.
    pub elapsed_secs: f64,
    /// The figures of each strategy that has finished, in run order.
    pub results: Vec<RunStats>,
    /// The operator asked it to stop while the strategy at this index of `strategies` ran.
    pub stopped_at: Option<usize>,
    /// When the executor reported its end (UI clock); `None` while it runs.
    pub finished: Option<Instant>,
    /// Why it ended early, if it failed.
    pub error: Option<Error>,
}

impl DryRun {
    pub fn running(&self) -> bool {
        self.finished.is_none()
    }
}

/// The Dry run view: the form's values (kept between runs) and the running or last run.
#[derive(Debug, Default)]
pub struct DryRunView {
    pub form: DryRunForm,
    pub run: Option<DryRun>,
}

impl DryRunView {
    /// This view's own keys for the footer: (key, what, writes).
    pub const KEYS: &'static [ViewKey] = &[("d", "dry run", true), ("x/Esc", "stop", true)];

    /// The action of one of this view's keys.
    pub fn key(code: KeyCode) -> Option<Action> {
        match code {
            KeyCode::Char('d') => Some(Action::OpenDryRunForm),
            KeyCode::Char('x') => Some(Action::StopDryRun),
            _ => None,
        }
    }

    /// A dry run is running now.
    pub fn running(&self) -> bool {
        self.run.as_ref().is_some_and(DryRun::running)
    }
}

/// Lines of failed-invariant detail under the results; the rest are counted.
const FAILURES_SHOWN: usize = 4;

/// The colour of a strategy in the chart.
pub fn colour(s: Strategy) -> Color {
    match s {
        Strategy::Lua => Color::Cyan,
        Strategy::Hincrby => Color::Yellow,
        Strategy::Lock => Color::Magenta,
        Strategy::Sql => Color::Green,
    }
}

pub fn render(frame: &mut Frame, area: Rect, app: &App) {
    match &app.views.dry_run.run {
        None => idle(frame, area, app),
        Some(run) => with_run(frame, area, app, run),
    }
}

fn idle(frame: &mut Frame, area: Rect, app: &App) {
    let [info, results] = Layout::vertical([Constraint::Length(7), Constraint::Min(3)]).areas(area);
    let f = &app.views.dry_run.form;
    let mut lines = match &app.activity {
        Some(a) => vec![Line::styled(
            format!(
                " Simulated buyers on a shadow copy of {a}, with the invariants checked after."
            ),
            bold(),
        )],
        None => vec![Line::styled(
            " No activity selected: press 1, highlight one, Enter.",
            bold(),
        )],
    };
    lines.extend([
        Line::raw(
            " The same deduct.lua the app servers run (or hincrby, lock, sql to compare), on keys of \
             their own prefix and a temporary database: the live keys and orders are never written.",
        ),
        Line::raw(
            " Checked: sold = what demand and limits allow, no user above its limit, nothing \
             oversold, stock never negative, the books balance.",
        ),
    ]);
    lines.push(if app.config.read_only {
        Line::styled(
            " read-only: dry runs are disabled (they write shadow keys)",
            dim(),
        )
    } else {
        Line::styled(
            format!(
                " d opens the form: buyers {}, concurrency {}, strategy {} (the last values).",
                f.buyers,
                f.concurrency,
                f.strategy.name()
            ),
            dim(),
        )
    });
    frame.render_widget(Paragraph::new(lines).wrap(Wrap { trim: false }), info);
    let block = Block::default()
        .borders(Borders::ALL)
        .title(Span::styled(" Results ", bold()));
    frame.render_widget(
        Paragraph::new(Line::styled("No dry run in this session yet.", dim())).block(block),
        results,
    );
}

fn with_run(frame: &mut Frame, area: Rect, app: &App, run: &DryRun) {
    let failures = failure_lines(run, usize::from(area.width));
    let gauge_h = if run.running() { 3 } else { 0 };
    let table_h = if run.results.is_empty() {
        0
    } else {
        run.results.len() as u16 + 3
    };
    let [info, gauge, chart, table, notes] = Layout::vertical([
        Constraint::Length(2),
        Constraint::Length(gauge_h),
        Constraint::Min(6),
        Constraint::Length(table_h),
        Constraint::Length(failures.len() as u16),
    ])
    .areas(area);

    frame.render_widget(Paragraph::new(info_lines(app, run)), info);
    if run.running() {
        render_gauge(frame, gauge, run);
    }
    render_chart(frame, chart, run);
    if !run.results.is_empty() {
        render_results(frame, table, run);
    }
    frame.render_widget(Paragraph::new(failures), notes);
}

fn info_lines(app: &App, run: &DryRun) -> Vec<Line<'static>> {
    let names: Vec<&str> = run.strategies.iter().map(|s| s.as_str()).collect();
    let first = Line::from(vec![
        Span::styled(format!(" Dry run of {}", run.activity), bold()),
        Span::raw(format!(
            ": {} buyers, concurrency {}, strateg{} {}",
            run.buyers,
            run.concurrency,
            if names.len() == 1 { "y" } else { "ies" },
            names.join(", ")
        )),
    ]);
    let (text, style) = match run.finished {
        None => {
            let secs = app.now.saturating_duration_since(run.started).as_secs() as i64;
            if run.stopped_at.is_some() {
                (
                    format!(
                        " stopping after {}: checking what was done, removing the shadow keys ...",
                        age(secs)
                    ),
                    warning(),
                )
            } else {
                let n = run.strategies.len();
                let k = (run.results.len() + 1).min(n);
                let name = run
                    .strategies
                    .get(k.saturating_sub(1))
                    .map_or("-", |s| s.as_str());
                (
                    format!(
                        " running for {}: {name} ({k} of {n}); x or Esc stops it",
                        age(secs)
                    ),
                    bold(),
                )
            }
        }
        Some(end) => {
            let took = age(end.saturating_duration_since(run.started).as_secs() as i64);
            let failed: Vec<&str> = (0..run.results.len())
                .filter(|&i| run.verdict(i) == "FAILED")
                .map(|i| run.results[i].strategy.as_str())
                .collect();
            if let Some(e) = &run.error {
                (
                    format!(" failed after {took}: {}", clip(&e.message, 200)),
                    critical(),
                )
            } else if !failed.is_empty() {
                (
                    format!(
                        " finished in {took}: invariant FAILED in {}",
                        failed.join(", ")
                    ),
                    critical(),
                )
            } else if run.stopped_at.is_some() {
                (
                    format!(
                        " stopped after {took} ({} of {} ran); the shadow keys were removed",
                        run.results.len(),
                        run.strategies.len()
                    ),
                    warning(),
                )
            } else {
                (
                    format!(
                        " finished in {took}: every invariant held; the shadow keys were removed"
                    ),
                    good(),
                )
            }
        }
    };
    vec![first, Line::styled(text, style)]
}

/// The running strategy's progress, the longest wording that fits `room` (a gauge's label is
/// centred and cut on both sides when too long: `09/1701227` once stood for 120,409).
fn progress_label(l: &LiveSnapshot, ratio: f64, room: u16) -> String {
    let g = |n: u64| grouped(i64::try_from(n).unwrap_or(i64::MAX));
    let (done, total) = (g(l.done), g(l.total));
    [
        format!(
            "{done} / {total} requests   sold {}   sold out {}   limited {}   errors {}   unknown {}",
            g(l.succeeded),
            g(l.sold_out),
            g(l.user_limited),
            g(l.errors),
            g(l.unknown)
        ),
        format!("{done} / {total} requests   sold {}", g(l.succeeded)),
        format!("{done} / {total}"),
        format!("{:.0}%", ratio * 100.0),
    ]
    .into_iter()
    .find(|t| unicode_width::UnicodeWidthStr::width(t.as_str()) <= usize::from(room))
    .unwrap_or_default()
}

fn render_gauge(frame: &mut Frame, area: Rect, run: &DryRun) {
    let n = run.strategies.len();
    let k = (run.results.len() + 1).min(n);
    let (title, ratio, label) = match &run.current {
        Some((s, l)) => {
            let ratio = if l.total == 0 {
                0.0
            } else {
                (l.done as f64 / l.total as f64).clamp(0.0, 1.0)
            };
            (
                format!(
                    " {} ({k}/{n}): {:.0} ops/s   p50 {:.2} ms   p99 {:.2} ms ",
                    s.as_str(),
                    l.ops_per_sec,
                    l.p50_ms,
                    l.p99_ms
                ),
                ratio,
                progress_label(l, ratio, area.width.saturating_sub(2)),
            )
        }
        None => {
            let name = run
                .strategies
                .get(k.saturating_sub(1))
                .map_or("-", |s| s.as_str());
            (
                format!(" {name} ({k}/{n}) "),
                0.0,
                "preparing the shadow copy (preheat) ...".to_string(),
            )
        }
    };
    let gauge = Gauge::default()
        .block(
            Block::default()
                .borders(Borders::ALL)
                .title(Span::styled(title, bold())),
        )
        .gauge_style(Style::default().fg(Color::Cyan).bg(Color::DarkGray))
        .ratio(ratio)
        .label(label);
    frame.render_widget(gauge, area);
}

/// A round upper bound for an axis: 1, 2 or 5 times a power of ten, at least `v`.
fn nice_ceiling(v: f64) -> f64 {
    if !v.is_finite() || v <= 1.0 {
        return 1.0;
    }
    let mag = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|c| *c >= v)
        .unwrap_or(10.0 * mag)
}

fn render_chart(frame: &mut Frame, area: Rect, run: &DryRun) {
    // The axis covers the live figures and the whole-run ones in the table beside it, so the
    // chart never reads an order of magnitude below the results.
    let peak = run
        .throughput
        .iter()
        .flat_map(|(_, p)| p.iter().map(|(_, y)| *y))
        .chain(
            run.results
                .iter()
                .map(|r| r.ops_per_sec)
                .filter(|v| v.is_finite()),
        )
        .fold(0.0_f64, f64::max);
    let y_max = nice_ceiling(peak * 1.1);
    let x_max = nice_ceiling(run.elapsed_secs.max(10.0));
    let datasets: Vec<Dataset> = run
        .throughput
        .iter()
        .map(|(s, points)| {
            Dataset::default()
                .name(s.as_str())
                .marker(Marker::Braille)
                .graph_type(GraphType::Line)
                .style(Style::default().fg(colour(*s)))
                .data(points)
        })
        .collect();
    let title = if run.throughput.is_empty() {
        " Throughput (ops/s): the first figures come a second after the buyers start "
    } else {
        " Throughput (ops/s over the run's seconds) "
    };
    let chart = Chart::new(datasets)
        .block(
            Block::default()
                .borders(Borders::ALL)
                .title(Span::styled(title, bold())),
        )
        .x_axis(
            Axis::default()
                .style(dim())
                .bounds([0.0, x_max])
                .labels(vec![
                    "0 s".to_string(),
                    format!("{:.0}", x_max / 2.0),
                    format!("{x_max:.0} s"),
                ]),
        )
        .y_axis(
            Axis::default()
                .style(dim())
                .bounds([0.0, y_max])
                .labels(vec![
                    "0".to_string(),
                    format!("{:.0}", y_max / 2.0),
                    format!("{y_max:.0}"),
                ]),
        )
        .legend_position(Some(ratatui::widgets::LegendPosition::TopRight))
        // Four names fit beside the lines on any chart tall enough to read.
        .hidden_legend_constraints((Constraint::Ratio(1, 3), Constraint::Ratio(1, 1)));
    frame.render_widget(chart, area);
}

/// The results table's columns: the strategy, its throughput and its verdict stay on any
/// terminal; the rest go right to left as the room runs out, never cut.
const RESULT_COLUMNS: [Column; 11] = [
    Column::text("strategy", (7, 8), 0),
    Column::number("requests", 6),
    Column::number("sold", 5),
    Column::number("ops/s", 0),
    Column::number("p50 ms", 4),
    Column::number("p99 ms", 3),
    Column::number("rt/req", 7),
    Column::number("oversold", 1),
    Column::number("neg seen", 8),
    Column::number("lock fail", 9),
    Column::text("invariants", (10, 60), 0),
];

fn render_results(frame: &mut Frame, area: Rect, run: &DryRun) {
    let texts: Vec<(Vec<Text>, Style)> = run
        .results
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let v = run.verdict(i);
            let style = match v {
                "FAILED" => critical(),
                "stopped" => warning(),
                _ => Style::default(),
            };
            let cells = vec![
                r.strategy.clone(),
                grouped(i64::try_from(r.requests).unwrap_or(i64::MAX)),
                format!("{}/{}", grouped(r.sold), grouped(r.stock)),
                grouped(r.ops_per_sec.round() as i64),
                format!("{:.2}", r.p50_ms),
                format!("{:.2}", r.p99_ms),
                format!("{:.2}", r.round_trips_per_request),
                grouped(r.oversold),
                grouped(i64::try_from(r.negative_seen).unwrap_or(i64::MAX)),
                grouped(i64::try_from(r.lock_failures).unwrap_or(i64::MAX)),
                v.to_string(),
            ];
            (cells.into_iter().map(Text::from).collect(), style)
        })
        .collect();
    let m = measured(&RESULT_COLUMNS, texts, area.width.saturating_sub(2), 0);
    let (header, rows, widths) = (m.header, m.rows, m.widths);
    let table = Table::new(rows, widths)
        .header(header.style(bold().add_modifier(Modifier::UNDERLINED)))
        .column_spacing(1)
        .block(
            Block::default()
                .borders(Borders::ALL)
                .title(Span::styled(" Results, side by side ", bold())),
        );
    frame.render_widget(table, area);
}

/// One line per failed invariant (the strategy, the invariant, what was wrong), and the
/// error that ended the run; at most [`FAILURES_SHOWN`], the rest counted.
fn failure_lines(run: &DryRun, width: usize) -> Vec<Line<'static>> {
    let mut all = Vec::new();
    for (i, r) in run.results.iter().enumerate() {
        let v = run.verdict(i);
        if v == "ok" {
            continue;
        }
        for inv in r.invariants.iter().filter(|inv| !inv.ok) {
            let (prefix, style) = if v == "stopped" {
                ("stopped early, ", warning())
            } else {
                ("FAILED ", critical())
            };
            let text = format!(" {prefix}{}: {}: {}", r.strategy, inv.name, inv.detail);
            all.push(Line::styled(clip(&text, width.saturating_sub(1)), style));
        }
    }
    if let Some(e) = &run.error {
        all.push(Line::styled(
            clip(&format!(" error: {}", e.message), width.saturating_sub(1)),
            critical(),
        ));
    }
    if all.len() > FAILURES_SHOWN {
        let more = all.len() - (FAILURES_SHOWN - 1);
        all.truncate(FAILURES_SHOWN - 1);
        all.push(Line::styled(format!(" ... and {more} more"), dim()));
    }
    all
}

#[cfg(test)]
mod tests {
    use super::nice_ceiling;

    #[test]
    fn axis_bounds_are_round() {
        assert_eq!(nice_ceiling(0.0), 1.0);
        assert_eq!(nice_ceiling(f64::NAN), 1.0);
        assert_eq!(nice_ceiling(3.2), 5.0);
        assert_eq!(nice_ceiling(10.0), 10.0);
        assert_eq!(nice_ceiling(11.0), 20.0);
        assert_eq!(nice_ceiling(4321.0), 5000.0);
        assert_eq!(nice_ceiling(60_000.0), 100_000.0);
    }
}
