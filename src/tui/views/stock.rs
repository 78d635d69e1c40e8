//! Stock: per product initial, Redis remaining, DB sold, in-flight, drift, state, sales per
//! second and a sold-percentage gauge; the activity's sold gauge and sales-rate sparkline on
//! top. Rows that need attention are coloured; only the visible rows are built.

use super::{bar, drift, empty_reason, error_line, opt};
use crate::domain::stock::{ProductStatus, State};
use crate::tui::app::{App, View};
use crate::tui::widgets::table::{self, TableSpec, h, hn, num};
use crate::tui::widgets::{bold, critical, dim, warning};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Gauge, Row, Sparkline};

/// The style of a product's row: red for what breaks sales or oversells, yellow for lost
/// sales and orphans, blue for paused.
pub fn row_style(p: &ProductStatus) -> Style {
    match p.state {
        State::Negative | State::Missing | State::Corrupt => critical(),
        State::Drift if p.drift.is_some_and(|d| d > 0) => critical(),
        State::Drift => warning(),
        State::Paused => Style::default().fg(Color::Blue),
        State::Ok if p.orphaned > 0 => warning(),
        State::Ok => Style::default(),
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
    let order = &app.stock.order;
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
            app.sort.name(),
            if app.sort_descending { "desc" } else { "asc" }
        ),
        dim(),
    ));
    let spec = TableSpec {
        title: Line::from(title),
        header: vec![
            h("product"),
            hn("initial"),
            hn("redis"),
            hn("db sold"),
            hn("in-flt"),
            hn("drift"),
            h("state"),
            hn("rate/s"),
            h("sold"),
        ],
        widths: vec![
            Constraint::Min(12),
            Constraint::Length(8),
            Constraint::Length(8),
            Constraint::Length(8),
            Constraint::Length(6),
            Constraint::Length(7),
            Constraint::Length(8),
            Constraint::Length(7),
            Constraint::Length(17),
        ],
        empty: empty_reason(app, &app.stock.feed, "No product matches the filter."),
        bottom: error_line(&app.stock.feed),
    };
    let Some(report) = report else {
        table::render(frame, rest, app, View::Stock, spec, 0, |_| Row::default());
        return;
    };
    table::render(frame, rest, app, View::Stock, spec, order.len(), |i| {
        let p = &report.products[order[i]];
        Row::new(vec![
            Cell::from(p.product.clone()),
            num(p.initial.to_string()),
            num(opt(p.redis_remaining)),
            num(p.db_sold.to_string()),
            num(p.in_flight.to_string()),
            num(drift(p.drift)),
            Cell::from(p.state.as_str()),
            num(rate(app, &p.product)),
            Cell::from(bar(p.sold_percent, 10)),
        ])
        .style(row_style(p))
    });
}

/// The activity's sold gauge and its sales-rate sparkline.
fn render_top(frame: &mut Frame, area: Rect, app: &App) {
    let [left, right] =
        Layout::horizontal([Constraint::Percentage(50), Constraint::Percentage(50)]).areas(area);
    let (ratio, label) = match app.stock.report() {
        Some(r) if r.totals.initial > 0 => {
            let ratio = (r.totals.db_sold as f64 / r.totals.initial as f64).clamp(0.0, 1.0);
            (
                ratio,
                format!(
                    "{} of {} sold ({:.1}%), {} left in Redis",
                    r.totals.db_sold,
                    r.totals.initial,
                    ratio * 100.0,
                    r.totals.redis_remaining
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
    let peak = history.iter().copied().fold(0.0_f64, f64::max);
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
