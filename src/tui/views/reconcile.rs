//! Reconcile: the products whose Redis stock differs from database truth (or that hold
//! orphaned deductions), worst first. `f` fixes the highlighted one, `F` the whole activity;
//! both show the preview (before -> after) in a confirmation dialog first.

use super::ViewKey;
use super::{drift, empty_reason, error_line};
use crate::domain::stock::ProductStatus;
use crate::tui::action::Action;
use crate::tui::app::App;
use crate::tui::cursor::{TableCursor, matches};
use crate::tui::selected::{StockData, state_rank};
use crate::tui::view::View;
use crate::tui::views::stock::row_style;
use crate::tui::widgets::columns::{Column, grouped, signed};
use crate::tui::widgets::table::Text;
use crate::tui::widgets::table::{self, ColumnsSpec};
use crate::tui::widgets::{bold, critical, dim, good};
use crossterm::event::KeyCode;
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

/// The Reconcile view: the products a fix would touch, worst first.
#[derive(Debug, Default)]
pub struct ReconcileView {
    pub cursor: TableCursor,
}

impl ReconcileView {
    /// This view's own keys for the footer: (key, what, writes).
    pub const KEYS: &'static [ViewKey] = &[("f", "fix product", true), ("F", "fix all", true)];

    /// The action of one of this view's keys.
    pub fn key(code: KeyCode) -> Option<Action> {
        match code {
            KeyCode::Char('f') => Some(Action::FixProduct),
            KeyCode::Char('F') => Some(Action::FixActivity),
            _ => None,
        }
    }

    /// The rows (filter applied), worst first.
    pub fn rows<'a>(&self, stock: &'a StockData) -> Vec<&'a ProductStatus> {
        let Some(report) = stock.report() else {
            return Vec::new();
        };
        let f = self.cursor.needle();
        let mut rows: Vec<&ProductStatus> = report
            .products
            .iter()
            .filter(|p| {
                p.needs_fix()
                    && (matches(&p.product, &f)
                        || matches(&p.name, &f)
                        || matches(p.state.as_str(), &f))
            })
            .collect();
        rows.sort_by_key(|p| std::cmp::Reverse(state_rank(p.state)));
        rows
    }

    /// The product highlighted, if any.
    pub fn selected<'a>(&self, stock: &'a StockData) -> Option<&'a ProductStatus> {
        self.rows(stock).get(self.cursor.row()?).copied()
    }
}

pub fn render(frame: &mut Frame, area: Rect, app: &App) {
    let [summary, rest] = Layout::vertical([Constraint::Length(2), Constraint::Min(3)]).areas(area);
    let rows = app.views.reconcile.rows(&app.stock);
    if let Some(r) = app.stock.report() {
        let net: i64 = r.products.iter().filter_map(|p| p.drift).sum();
        let orphaned = r.totals.orphaned;
        let line = if r.totals.not_ok == 0 && orphaned == 0 {
            Line::styled(
                " Redis matches the database truth for every product.",
                good(),
            )
        } else {
            Line::from(vec![Span::styled(
                format!(
                    " {} product(s) differ from the truth; net drift {}; {orphaned} orphaned unit(s).",
                    r.totals.not_ok,
                    drift(Some(net))
                ),
                critical(),
            )])
        };
        let hint = if app.config.read_only {
            Line::styled(" read-only: fixing is disabled", dim())
        } else {
            Line::styled(
                " f fixes the highlighted product, F the whole activity; each shows a preview first.",
                dim(),
            )
        };
        frame.render_widget(Paragraph::new(vec![line, hint]), summary);
    }
    let title = Line::from(vec![
        Span::styled(" Reconcile ", bold()),
        Span::styled(format!("{} to fix ", rows.len()), dim()),
    ]);
    let spec = ColumnsSpec {
        title,
        columns: &COLUMNS,
        empty: empty_reason(app, &app.stock.feed, "No drift: nothing to fix."),
        bottom: error_line(&app.stock.feed),
    };
    table::render_columns(frame, rest, app, View::Reconcile, spec, rows.len(), |i| {
        let p = rows[i];
        let cells = vec![
            p.product.clone(),
            p.name.clone(),
            p.state.as_str().to_string(),
            p.redis_remaining.map_or_else(|| "-".into(), grouped),
            grouped(p.expected_remaining),
            p.drift.map_or_else(|| "-".into(), signed),
            grouped(p.db_sold),
            grouped(p.in_flight),
            grouped(p.orphaned),
        ];
        (cells.into_iter().map(Text::from).collect(), row_style(p))
    });
}

/// The reconcile table's columns: the product, its state and drift are never dropped.
const COLUMNS: [Column; 9] = [
    Column::text("product", (6, 24), 0),
    Column::text("name", (4, 20), 6),
    Column::text("state", (5, 9), 0),
    Column::number("redis", 1),
    Column::number("expected", 2),
    Column::number("drift", 0),
    Column::number("db sold", 5),
    Column::number("in-flt", 4),
    Column::number("orphaned", 3),
];
