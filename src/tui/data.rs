//! Snapshots into state: what the App derives from successive polls (sales rates, alert ages,
//! the stock table's order), and the rows each table shows (filter applied), shared by the
//! views and by `update` so that "the selected row" means the same thing to both.

use super::action::{Command, Fetched, NodeInfo, Overview};
use super::app::{App, RATE_HISTORY, SortKey, StockData, View};
use crate::db::activity::ActivitySummary;
use crate::db::audit::AuditEntry;
use crate::db::compensation::Compensation;
use crate::domain::ActivityId;
use crate::domain::Phase;
use crate::domain::alerts::Alert;
use crate::domain::stock::{ProductStatus, State};
use crate::ops::preheat::PreheatProduct;
use crate::ops::status::StatusReport;
use chrono::{DateTime, Utc};
use std::cmp::Ordering;
use std::collections::HashMap;

/// A service's connection as the header shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Link {
    /// No answer yet.
    Connecting,
    Up,
    /// Some nodes answer, some do not.
    Degraded(String),
    Down(String),
}

/// One row of the Alerts view.
#[derive(Clone, Debug)]
pub struct AlertRow<'a> {
    pub alert: &'a Alert,
    pub first_seen: DateTime<Utc>,
    pub age_secs: i64,
}

/// Case-insensitive "contains" of an already lower-cased needle.
pub fn matches(hay: &str, needle_lower: &str) -> bool {
    needle_lower.is_empty() || hay.to_lowercase().contains(needle_lower)
}

/// Severity order of states, worst last (so a descending sort puts the worst first).
pub fn state_rank(s: State) -> u8 {
    match s {
        State::Ok => 0,
        State::Paused => 1,
        State::Drift => 2,
        State::Missing => 3,
        State::Corrupt => 4,
        State::Negative => 5,
    }
}

/// Units a product has sold for the rate: orders plus deductions whose orders are on the way.
fn sold_units(p: &ProductStatus) -> i64 {
    p.db_sold + p.in_flight
}

/// True when every product has its stock key: the activity was preheated.
pub fn preheated(r: &StatusReport) -> bool {
    !r.products.is_empty() && r.products.iter().all(|p| p.state != State::Missing)
}

impl App {
    /// Makes `id` the activity every view shows; data of the previous one is dropped.
    pub(super) fn set_activity(&mut self, id: ActivityId) -> Vec<Command> {
        if self.activity.as_ref() == Some(&id) {
            return Vec::new();
        }
        self.activity = Some(id.clone());
        self.stock = StockData::default();
        self.compensation = Default::default();
        for v in [
            View::Stock,
            View::Alerts,
            View::Compensation,
            View::Reconcile,
            View::Preheat,
        ] {
            let c = self.cursor_mut(v);
            c.selected = 0;
            c.offset.set(0);
        }
        vec![Command::Watch(id)]
    }

    pub(super) fn on_activities(&mut self, f: Fetched<Vec<ActivitySummary>>) -> Vec<Command> {
        self.activities.apply(f);
        self.clamp(View::Activities);
        if self.activity.is_some() {
            return Vec::new();
        }
        // Nothing chosen yet: show the live activity (else the newest) so the first screen
        // has numbers; the operator picks another with 1 and Enter.
        let (Some(list), Some(at)) = (&self.activities.data, self.activities.taken_at) else {
            return Vec::new();
        };
        let pick = list
            .iter()
            .find(|a| a.activity.phase(at) == Phase::Live)
            .or_else(|| list.first())
            .map(|a| a.activity.activity_id.clone());
        match pick {
            Some(id) => self.set_activity(id),
            None => Vec::new(),
        }
    }

    pub(super) fn on_overview(&mut self, f: Fetched<Vec<Overview>>) {
        self.overview.apply(f);
    }

    pub(super) fn on_status(&mut self, id: ActivityId, f: Fetched<StatusReport>) {
        if self.activity.as_ref() != Some(&id) {
            return; // an answer for an activity the operator has left
        }
        if let Ok(report) = &f.result {
            self.derive(report);
        }
        self.stock.feed.apply(f);
        self.rebuild_stock_order();
        for v in [View::Alerts, View::Reconcile] {
            self.clamp(v);
        }
    }

    /// Rates and alert ages from the new report against the previous one.
    fn derive(&mut self, report: &StatusReport) {
        let s = &mut self.stock;
        let now_sold: HashMap<String, i64> = report
            .products
            .iter()
            .map(|p| (p.product.clone(), sold_units(p)))
            .collect();
        if let Some((prev_at, prev)) = &s.prev_sold {
            let dt = (report.taken_at - *prev_at).num_milliseconds() as f64 / 1000.0;
            if dt > 0.0 {
                let mut total = 0.0;
                s.rates.clear();
                for (product, sold) in &now_sold {
                    // A fix or a cancelled order lowers the count; that is not a negative sale.
                    let delta = prev.get(product).map_or(0, |p| (sold - p).max(0));
                    let rate = delta as f64 / dt;
                    total += rate;
                    s.rates.insert(product.clone(), rate);
                }
                s.rate_history.push_back(total);
                while s.rate_history.len() > RATE_HISTORY {
                    s.rate_history.pop_front();
                }
            }
        }
        s.prev_sold = Some((report.taken_at, now_sold));

        let mut seen = HashMap::with_capacity(report.alerts.len());
        for a in &report.alerts {
            let key = (a.kind, a.product.clone(), a.node.clone());
            let first = match a.age_secs {
                // Queue alerts know the age of their oldest item.
                Some(age) => report.taken_at - chrono::Duration::seconds(age),
                None => s.alert_seen.get(&key).copied().unwrap_or(report.taken_at),
            };
            seen.insert(key, first);
        }
        s.alert_seen = seen;
    }

    pub(super) fn on_compensation(&mut self, id: ActivityId, f: Fetched<Vec<Compensation>>) {
        if self.activity.as_ref() == Some(&id) {
            self.compensation.apply(f);
            self.clamp(View::Compensation);
        }
    }

    pub(super) fn on_audit(&mut self, f: Fetched<Vec<AuditEntry>>) {
        self.audit.apply(f);
        self.clamp(View::Audit);
    }

    pub(super) fn on_redis(&mut self, f: Fetched<super::action::RedisInfo>) {
        self.redis.apply(f);
        self.clamp(View::Redis);
    }

    /// Keeps a table's selection inside its rows.
    pub(super) fn clamp(&mut self, view: View) {
        let n = self.row_count(view);
        let c = self.cursor_mut(view);
        c.selected = c.selected.min(n.saturating_sub(1));
    }

    /// Filters and sorts the stock table once per snapshot, sort or filter change.
    pub(super) fn rebuild_stock_order(&mut self) {
        let filter = self.filter(View::Stock).to_lowercase();
        let (sort, descending) = (self.sort, self.sort_descending);
        let s = &mut self.stock;
        let Some(report) = s.feed.data.as_ref() else {
            s.order.clear();
            return;
        };
        let products = &report.products;
        let mut order: Vec<usize> = (0..products.len())
            .filter(|&i| {
                let p = &products[i];
                matches(&p.product, &filter) || matches(p.state.as_str(), &filter)
            })
            .collect();
        let rates = &s.rates;
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
        s.order = order;
        self.clamp(View::Stock);
    }

    /// The rows of the Activities view.
    pub fn activity_rows(&self) -> Vec<&ActivitySummary> {
        let f = self.filter(View::Activities).to_lowercase();
        let at = self.activities.taken_at.unwrap_or_else(Utc::now);
        self.activities
            .data
            .iter()
            .flatten()
            .filter(|a| {
                matches(a.activity.activity_id.as_str(), &f)
                    || matches(&a.activity.name, &f)
                    || matches(self.activity_state(a, at), &f)
            })
            .collect()
    }

    /// draft, cancelled, live, ended, preheated (upcoming, every key in Redis) or scheduled.
    pub fn activity_state(&self, a: &ActivitySummary, now: DateTime<Utc>) -> &'static str {
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
                if self.activity_preheated(a.activity.activity_id.as_str()) == Some(true) {
                    "preheated"
                } else {
                    "scheduled"
                }
            }
        }
    }

    fn activity_preheated(&self, id: &str) -> Option<bool> {
        if self.activity.as_ref().is_some_and(|a| a.as_str() == id)
            && let Some(r) = self.stock.report()
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

    /// The alert count of an activity, when known.
    pub fn alert_count(&self, id: &str) -> Option<usize> {
        if self.activity.as_ref().is_some_and(|a| a.as_str() == id)
            && let Some(r) = self.stock.report()
        {
            return Some(r.alarms());
        }
        self.overview_of(id).map(|o| o.alerts)
    }

    /// The rows of the Alerts view: newest first, then the most severe.
    pub fn alert_rows(&self) -> Vec<AlertRow<'_>> {
        let Some(report) = self.stock.report() else {
            return Vec::new();
        };
        let f = self.filter(View::Alerts).to_lowercase();
        let mut rows: Vec<AlertRow<'_>> = report
            .alerts
            .iter()
            .filter(|a| {
                matches(&a.message, &f)
                    || a.product.as_deref().is_some_and(|p| matches(p, &f))
                    || matches(a.kind.as_str(), &f)
            })
            .map(|a| {
                let key = (a.kind, a.product.clone(), a.node.clone());
                let first_seen = self
                    .stock
                    .alert_seen
                    .get(&key)
                    .copied()
                    .unwrap_or(report.taken_at);
                AlertRow {
                    alert: a,
                    first_seen,
                    age_secs: (report.taken_at - first_seen).num_seconds().max(0),
                }
            })
            .collect();
        rows.sort_by(|a, b| {
            b.first_seen
                .cmp(&a.first_seen)
                .then(b.alert.severity.cmp(&a.alert.severity))
                .then(a.alert.product.cmp(&b.alert.product))
        });
        rows
    }

    /// The rows of the Compensation view: pending first (oldest first), then resolved.
    pub fn compensation_rows(&self) -> Vec<&Compensation> {
        let f = self.filter(View::Compensation).to_lowercase();
        self.compensation
            .data
            .iter()
            .flatten()
            .filter(|c| {
                matches(&c.request_id, &f)
                    || matches(&c.product_id, &f)
                    || matches(&c.status, &f)
                    || matches(&c.user_id, &f)
            })
            .collect()
    }

    /// The rows of the Reconcile view: the products a fix would touch, worst first.
    pub fn reconcile_rows(&self) -> Vec<&ProductStatus> {
        let Some(report) = self.stock.report() else {
            return Vec::new();
        };
        let f = self.filter(View::Reconcile).to_lowercase();
        let mut rows: Vec<&ProductStatus> = report
            .products
            .iter()
            .filter(|p| p.needs_fix() && (matches(&p.product, &f) || matches(p.state.as_str(), &f)))
            .collect();
        rows.sort_by_key(|p| std::cmp::Reverse(state_rank(p.state)));
        rows
    }

    /// The report rows of the Preheat view (the last preheat of the selected activity).
    pub fn preheat_rows(&self) -> Vec<&PreheatProduct> {
        let f = self.filter(View::Preheat).to_lowercase();
        match &self.preheat_report {
            Some((id, Ok(r))) if Some(id) == self.activity.as_ref() => r
                .products
                .iter()
                .filter(|p| matches(&p.product, &f))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// The rows of the Redis view.
    pub fn redis_rows(&self) -> Vec<&NodeInfo> {
        let f = self.filter(View::Redis).to_lowercase();
        self.redis
            .data
            .iter()
            .flat_map(|r| r.nodes.iter())
            .filter(|n| matches(&n.health.addr, &f) || matches(n.health.role.as_str(), &f))
            .collect()
    }

    /// The rows of the Audit view, newest first.
    pub fn audit_rows(&self) -> Vec<&AuditEntry> {
        let f = self.filter(View::Audit).to_lowercase();
        self.audit
            .data
            .iter()
            .flatten()
            .filter(|e| {
                matches(&e.action, &f)
                    || matches(&e.actor, &f)
                    || matches(&e.activity_id, &f)
                    || e.product_id.as_deref().is_some_and(|p| matches(p, &f))
            })
            .collect()
    }

    /// How many rows a view's table has now.
    pub fn row_count(&self, view: View) -> usize {
        match view {
            View::Activities => self.activity_rows().len(),
            View::Stock => self.stock.order.len(),
            View::Alerts => self.alert_rows().len(),
            View::Compensation => self.compensation_rows().len(),
            View::Reconcile => self.reconcile_rows().len(),
            View::Preheat => self.preheat_rows().len(),
            View::Redis => self.redis_rows().len(),
            View::Audit => self.audit_rows().len(),
            View::DryRun | View::Help => 0,
        }
    }

    /// The product highlighted in the Stock or Reconcile view.
    pub fn selected_product(&self) -> Option<&ProductStatus> {
        let report = self.stock.report()?;
        match self.view {
            View::Stock => {
                let i = *self.stock.order.get(self.cursor(View::Stock).selected)?;
                report.products.get(i)
            }
            View::Reconcile => self
                .reconcile_rows()
                .get(self.cursor(View::Reconcile).selected)
                .copied(),
            _ => None,
        }
    }

    /// Redis as the header shows it.
    pub fn redis_link(&self) -> Link {
        if let Some(e) = self.redis.error_text() {
            return Link::Down(e.to_string());
        }
        match &self.redis.data {
            None => Link::Connecting,
            Some(info) => {
                let down: Vec<&str> = info
                    .nodes
                    .iter()
                    .filter(|n| !n.health.ok)
                    .map(|n| n.health.addr.as_str())
                    .collect();
                if info.nodes.is_empty() {
                    Link::Down("no node known".into())
                } else if down.len() == info.nodes.len() {
                    Link::Down(format!("no node answers ({})", down.join(", ")))
                } else if !down.is_empty() {
                    Link::Degraded(format!("{} down", down.join(", ")))
                } else {
                    Link::Up
                }
            }
        }
    }

    /// The database as the header shows it.
    pub fn db_link(&self) -> Link {
        match (&self.activities.error, &self.activities.data) {
            (Some((e, _)), _) => Link::Down(e.message.clone()),
            (None, Some(_)) => Link::Up,
            (None, None) => Link::Connecting,
        }
    }
}

/// |drift|, with a missing or corrupt stock (no drift figure) above every number.
fn drift_size(p: &ProductStatus) -> i64 {
    p.drift.map_or(i64::MAX, i64::abs)
}
