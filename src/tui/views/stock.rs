//! Stock: per product initial, Redis remaining, DB sold, in-flight, drift, state, sales per
//! second and a sold-percentage gauge; the activity's sold gauge and sales-rate sparkline on
//! top. Rows that need attention are coloured; only the visible rows are built.

use super::ViewKey;
use super::{bar, empty_reason, error_line};
use crate::domain::stock::{ProductStatus, State};
use crate::tui::action::Action;
use crate::tui::app::App;
use crate::tui::cursor::{TableCursor, matches};
use crate::tui::selected::{StockData, state_rank};
use crate::tui::view::View;
use crate::tui::widgets::columns::{Column, Kind, grouped, signed, width};
use crate::tui::widgets::table::Text;
use crate::tui::widgets::table::{self, ColumnsSpec};
use crate::tui::widgets::{bold, critical, dim, warning};
use crossterm::event::KeyCode;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Gauge, Sparkline};
use std::cmp::Ordering;

/// Sort columns of the stock table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SortKey {
    Product,
    Remaining,
    SoldPercent,
    Drift,
    State,
    Rate,
}

impl SortKey {
    pub const ALL: [SortKey; 6] = [
        SortKey::Product,
        SortKey::Remaining,
        SortKey::SoldPercent,
        SortKey::Drift,
        SortKey::State,
        SortKey::Rate,
    ];

    pub fn name(self) -> &'static str {
        match self {
            SortKey::Product => "product",
            SortKey::Remaining => "redis",
            SortKey::SoldPercent => "sold%",
            SortKey::Drift => "drift",
            SortKey::State => "state",
            SortKey::Rate => "rate",
        }
    }

    pub fn next(self) -> SortKey {
        let i = SortKey::ALL.iter().position(|k| *k == self).unwrap_or(0);
        SortKey::ALL[(i + 1) % SortKey::ALL.len()]
    }
}

/// The Stock view: the table's cursor, its sort, and the order of the rows.
#[derive(Debug)]
pub struct StockView {
    pub cursor: TableCursor,
    pub sort: SortKey,
    pub descending: bool,
    /// Indices into the report's products in the table's order (filter and sort applied);
    /// rebuilt once per snapshot, sort or filter change, so a frame of 10,000 products sorts
    /// nothing.
    pub order: Vec<usize>,
}

impl Default for StockView {
    fn default() -> Self {
        StockView {
            cursor: TableCursor::default(),
            sort: SortKey::Product,
            descending: false,
            order: Vec::new(),
        }
    }
}

impl StockView {
    /// This view's own keys for the footer: (key, what, writes).
    pub const KEYS: &'static [ViewKey] = &[
        ("s", "sort", false),
        ("S", "reverse", false),
        ("f", "fix product", true),
        ("F", "fix all", true),
        ("t", "top up", true),
        ("z/Z/U", "pause one/all, resume all", true),
    ];

    /// The action of one of this view's keys.
    pub fn key(code: KeyCode) -> Option<Action> {
        Some(match code {
            KeyCode::Char('s') => Action::CycleSort,
            KeyCode::Char('S') => Action::ReverseSort,
            KeyCode::Char('f') => Action::FixProduct,
            KeyCode::Char('F') => Action::FixActivity,
            KeyCode::Char('t') => Action::OpenTopupForm,
            KeyCode::Char('z') => Action::TogglePause { all: false },
            KeyCode::Char('Z') => Action::TogglePause { all: true },
            KeyCode::Char('U') => Action::ResumeAll,
            _ => return None,
        })
    }

    /// The next sort column, or the same column reversed.
    pub fn change_sort(&mut self, reverse: bool, stock: &StockData) {
        if reverse {
            self.descending = !self.descending;
        } else {
            self.sort = self.sort.next();
        }
        self.rebuild(stock);
    }

    /// Filters and sorts the rows once per snapshot, sort or filter change.
    pub fn rebuild(&mut self, stock: &StockData) {
        let filter = self.cursor.needle();
        let (sort, descending) = (self.sort, self.descending);
        let Some(report) = stock.report() else {
            self.order.clear();
            return;
        };
        let products = &report.products;
        let mut order: Vec<usize> = (0..products.len())
            .filter(|&i| {
                let p = &products[i];
                matches(&p.product, &filter)
                    || matches(&p.name, &filter)
                    || matches(p.state.as_str(), &filter)
                    // "/paused" finds a paused product in another state too, as it reads.
                    || (p.paused && matches("paused", &filter))
            })
            .collect();
        let rates = &stock.rates;
        let key_cmp = |a: &ProductStatus, b: &ProductStatus| -> Ordering {
            match sort {
                SortKey::Product => Ordering::Equal,
                SortKey::Remaining => a.redis_remaining.cmp(&b.redis_remaining),
                SortKey::SoldPercent => a.sold_percent.total_cmp(&b.sold_percent),
                SortKey::Drift => drift_size(a).cmp(&drift_size(b)),
                SortKey::State => state_rank(a.state).cmp(&state_rank(b.state)),
                SortKey::Rate => {
                    let r = |p: &ProductStatus| rates.get(&p.product).copied().unwrap_or(0.0);
                    r(a).total_cmp(&r(b))
                }
            }
        };
        order.sort_by(|&i, &j| {
            let (a, b) = (&products[i], &products[j]);
            let primary = key_cmp(a, b);
            let primary = if descending {
                primary.reverse()
            } else {
                primary
            };
            let tie = if sort == SortKey::Product && descending {
                b.product.cmp(&a.product)
            } else {
                a.product.cmp(&b.product)
            };
            primary.then(tie)
        });
        self.order = order;
        self.cursor.clamp(self.order.len());
    }

    /// The product highlighted, if any.
    pub fn selected<'a>(&self, stock: &'a StockData) -> Option<&'a ProductStatus> {
        let i = *self.order.get(self.cursor.row()?)?;
        stock.report()?.products.get(i)
    }
}

/// |drift|, with a missing or corrupt stock (no drift figure) above every number.
fn drift_size(p: &ProductStatus) -> i64 {
    p.drift.map_or(i64::MAX, i64::abs)
}

/// The style of a product's row: red for what breaks sales or oversells, yellow for lost
/// sales and orphans, blue for paused.
pub fn row_style(p: &ProductStatus) -> Style {
    match p.state {
        State::Negative | State::Missing | State::Corrupt | State::Oversold => critical(),
        State::Drift if p.drift.is_some_and(|d| d > 0) => critical(),
        State::Drift => warning(),
        State::Paused => Style::default().fg(Color::Blue),
        State::Ok if p.orphaned > 0 => warning(),
        State::Ok => Style::default(),
    }
}

/// A product's state as the table shows it: a paused product in another state (a drift, an
/// oversell) says it is paused too, which its colour, taken by the worse state, no longer does.
fn state_text(p: &ProductStatus) -> String {
    if p.paused && p.state != State::Paused {
        format!("{}, paused", p.state.as_str())
    } else {
        p.state.as_str().to_string()
    }
}

/// Sales per second as shown: "-" before the second snapshot.
fn rate(app: &App, product: &str) -> String {
    match app.stock.rates.get(product) {
        Some(r) => format!("{r:.1}"),
        None => "-".into(),
    }
}

pub fn render(frame: &mut Frame, area: Rect, app: &App) {
    let [top, rest] = Layout::vertical([Constraint::Length(3), Constraint::Min(3)]).areas(area);
    render_top(frame, top, app);

    let report = app.stock.report();
    let order = &app.views.stock.order;
    let mut title = vec![Span::styled(" Stock ", bold())];
    if let Some(r) = report {
        title.push(Span::styled(
            format!(
                "{}/{} products, {} not ok ",
                order.len(),
                r.products.len(),
                r.totals.not_ok
            ),
            dim(),
        ));
    }
    title.push(Span::styled(
        format!(
            "sorted by {} {} ",
            app.views.stock.sort.name(),
            if app.views.stock.descending {
                "desc"
            } else {
                "asc"
            }
        ),
        dim(),
    ));
    let spec = ColumnsSpec {
        title: Line::from(title),
        columns: &COLUMNS,
        empty: empty_reason(app, &app.stock.feed, "No product matches the filter."),
        bottom: error_line(&app.stock.feed),
    };
    let Some(report) = report else {
        table::render_columns(frame, rest, app, View::Stock, spec, 0, |_| {
            (Vec::new(), Style::default())
        });
        return;
    };
    table::render_columns(frame, rest, app, View::Stock, spec, order.len(), |i| {
        let p = &report.products[order[i]];
        let cells = vec![
            p.product.clone(),
            p.name.clone(),
            grouped(p.initial),
            p.redis_remaining.map_or_else(|| "-".into(), grouped),
            grouped(p.db_sold),
            grouped(p.in_flight),
            p.drift.map_or_else(|| "-".into(), signed),
            state_text(p),
            rate(app, &p.product),
            bar(p.sold_percent, 10),
        ];
        (cells.into_iter().map(Text::from).collect(), row_style(p))
    });
}

/// The stock table's columns: the product, its drift and state are never dropped; the gauge,
/// the rate, the initial stock and the in-flight units go first on a narrow terminal.
const COLUMNS: [Column; 10] = [
    Column::text("product", (6, 24), 0),
    Column::text("name", (4, 20), 7),
    Column::number("initial", 4),
    Column::number("redis", 1),
    Column::number("db sold", 2),
    Column::number("in-flt", 3),
    Column::number("drift", 0),
    Column::text("state", (5, 16), 0),
    Column::number("rate/s", 5),
    Column {
        title: "sold",
        kind: Kind::Fixed(17),
        drop: 6,
    },
];

/// The sold gauge's label, the longest that fits `room` (a figure is never cut): the units
/// sold of the initial stock, the share, what Redis has left.
fn gauge_label((sold, initial, left): (i64, i64, i64), ratio: f64, room: u16) -> String {
    let (sold, initial, left) = (grouped(sold), grouped(initial), grouped(left));
    let share = format!("{:.1}%", ratio * 100.0);
    [
        format!("{sold} of {initial} sold ({share}), {left} left in Redis"),
        format!("{sold} of {initial} sold ({share})"),
        format!("{sold}/{initial} ({share})"),
        share,
    ]
    .into_iter()
    .find(|l| width(l) <= room)
    .unwrap_or_default()
}

/// The activity's sold gauge and its sales-rate sparkline.
fn render_top(frame: &mut Frame, area: Rect, app: &App) {
    let [left, right] =
        Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(area);
    let (ratio, label) = match app.stock.report() {
        Some(r) if r.totals.initial > 0 => {
            // The gauge fills at most its width; its label says the truth (101.5% oversold).
            let share = (r.totals.db_sold as f64 / r.totals.initial as f64).max(0.0);
            (
                share.min(1.0),
                gauge_label(
                    (r.totals.db_sold, r.totals.initial, r.totals.redis_remaining),
                    share,
                    left.width.saturating_sub(2),
                ),
            )
        }
        Some(_) => (0.0, "no stock".to_string()),
        None => (0.0, "-".to_string()),
    };
    let gauge = Gauge::default()
        .block(Block::default().borders(Borders::ALL).title(" Sold "))
        .gauge_style(Style::default().fg(Color::Green).bg(Color::DarkGray))
        .ratio(ratio)
        .label(label);
    frame.render_widget(gauge, left);

    let history = &app.stock.rate_history;
    let now = history.back().copied().unwrap_or(0.0);
    let peak = history.iter().copied().fold(app.stock.rate_peak, f64::max);
    // The sparkline takes integers: hundredths of a unit per second keep slow sales visible.
    let width = usize::from(right.width.saturating_sub(2));
    let skip = history.len().saturating_sub(width);
    let data: Vec<u64> = history
        .iter()
        .skip(skip)
        .map(|r| (r * 100.0).round().max(0.0) as u64)
        .collect();
    let title = format!(" Sales/s {now:.1} now, peak {peak:.1} ");
    let spark = Sparkline::default()
        .block(Block::default().borders(Borders::ALL).title(title))
        .style(Style::default().fg(Color::Cyan))
        .data(&data);
    frame.render_widget(spark, right);
}

#[cfg(test)]
mod tests {
    use super::gauge_label;

    #[test]
    fn an_oversold_activity_reads_above_100_percent() {
        let label = gauge_label((1_963, 1_960, -3), 1_963.0 / 1_960.0, 80);
        assert_eq!(label, "1,963 of 1,960 sold (100.2%), -3 left in Redis");
    }
}
