//! Snapshots into state: each poll's result goes to the App's shared data or to the component
//! of the view that owns it, and the selections are kept inside the new rows. Also the header's
//! view of the two links.

use super::action::Command;
use super::app::App;
use super::feed::Fetched;
use super::feed::Overview;
use super::selected::StockData;
use super::view::View;
use crate::db::activity::ActivitySummary;
use crate::db::audit::AuditEntry;
use crate::db::compensation::Compensation;
use crate::domain::ActivityId;
use crate::domain::Phase;
use crate::domain::stock::ProductStatus;
use crate::ops::status::StatusReport;
use std::borrow::Cow;

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

impl App {
    /// Makes `id` the activity every view shows; data of the previous one is dropped.
    pub(super) fn set_activity(&mut self, id: ActivityId) -> Vec<Command> {
        if self.activity.as_ref() == Some(&id) {
            return Vec::new();
        }
        // The sales-rate history of the activity left is kept for its return (its sparkline and
        // peak), that of the one shown comes back.
        if let Some(old) = self.activity.take() {
            let history = std::mem::take(&mut self.stock.rate_history);
            self.rate_histories
                .insert(old.to_string(), (history, self.stock.rate_peak));
        }
        let (history, peak) = self.rate_histories.remove(id.as_str()).unwrap_or_default();
        self.activity = Some(id.clone());
        self.watch_since = self.now;
        // The Activities view opens on the activity shown, not on its top row.
        self.cursor_mut(View::Activities)
            .anchor_on(Some(id.as_str()));
        self.clamp(View::Activities);
        self.stock = StockData {
            rate_history: history,
            rate_peak: peak,
            ..StockData::default()
        };
        self.views.compensation.feed = Default::default();
        self.views.stock.order.clear();
        for v in [
            View::Stock,
            View::Alerts,
            View::Compensation,
            View::Reconcile,
            View::Preheat,
        ] {
            self.cursor_mut(v).reset();
        }
        vec![Command::Watch(id)]
    }

    pub(super) fn on_activities(&mut self, f: Fetched<Vec<ActivitySummary>>) -> Vec<Command> {
        self.activities.apply(f);
        self.clamp(View::Activities);
        if self.activity.is_some() {
            return Vec::new();
        }
        // Nothing chosen yet: the first screen shows the live activity selling most (asked
        // of the database when there are several), else the soonest to open, else the newest;
        // the operator picks another with 1 and Enter.
        let (Some(list), Some(at)) = (&self.activities.data, self.activities.taken_at) else {
            return Vec::new();
        };
        let live: Vec<ActivityId> = list
            .iter()
            .filter(|a| a.activity.phase(at) == Phase::Live)
            .map(|a| a.activity.activity_id.clone())
            .collect();
        if live.len() > 1 {
            if self.picking {
                return Vec::new();
            }
            self.picking = true;
            return vec![Command::CountRecentSales(live)];
        }
        let pick = live.into_iter().next().or_else(|| {
            list.iter()
                .filter(|a| a.activity.phase(at) == Phase::Upcoming)
                .min_by_key(|a| a.activity.starts_at)
                .or_else(|| list.first())
                .map(|a| a.activity.activity_id.clone())
        });
        match pick {
            Some(id) => self.set_activity(id),
            None => Vec::new(),
        }
    }

    /// The last minute's orders of the live activities: show the busiest (the first live one
    /// when the count failed or none sold), unless the operator chose meanwhile.
    pub(super) fn on_busiest(
        &mut self,
        counts: Result<std::collections::HashMap<String, i64>, crate::error::Error>,
    ) -> Vec<Command> {
        self.picking = false;
        if self.activity.is_some() {
            return Vec::new();
        }
        let (Some(list), Some(at)) = (&self.activities.data, self.activities.taken_at) else {
            return Vec::new();
        };
        let counts = counts.unwrap_or_default();
        // The busiest; of equals, the first listed (the newest window).
        let pick = list
            .iter()
            .filter(|a| a.activity.phase(at) == Phase::Live)
            .enumerate()
            .max_by_key(|(i, a)| {
                (
                    counts
                        .get(a.activity.activity_id.as_str())
                        .copied()
                        .unwrap_or(0),
                    std::cmp::Reverse(*i),
                )
            })
            .map(|(_, a)| a.activity.activity_id.clone());
        match pick {
            Some(id) => self.set_activity(id),
            None => Vec::new(),
        }
    }

    pub(super) fn on_overview(&mut self, f: Fetched<Vec<Overview>>) {
        self.views.activities.overview.apply(f);
    }

    /// A status snapshot: the views' numbers, the event log, and a bell when it raised a
    /// critical alert that was not there a snapshot ago.
    pub(super) fn on_status(&mut self, id: ActivityId, f: Fetched<StatusReport>) -> Vec<Command> {
        if self.activity.as_ref() != Some(&id) {
            return Vec::new(); // an answer for an activity the operator has left
        }
        let mut out = Vec::new();
        if let Ok(report) = &f.result {
            self.stock.derive(report);
            // The first snapshot of an activity raises what it holds: the log says so, the
            // bell does not (the operator has just looked).
            let (events, first) = self.views.events.observe(&id, report);
            let critical = events.iter().any(|e| {
                e.event == crate::ops::watch::EventKind::Raised
                    && e.severity == Some(crate::domain::alerts::Severity::Critical)
            });
            if critical && !first && self.bell {
                out.push(Command::Bell);
            }
            self.clamp(View::Events);
        }
        self.stock.feed.apply(f);
        self.views.stock.rebuild(&self.stock);
        for v in [View::Stock, View::Alerts, View::Reconcile] {
            self.clamp(v);
        }
        out
    }

    pub(super) fn on_compensation(&mut self, id: ActivityId, f: Fetched<Vec<Compensation>>) {
        if self.activity.as_ref() == Some(&id) {
            self.views.compensation.feed.apply(f);
            self.clamp(View::Compensation);
        }
    }

    pub(super) fn on_audit(&mut self, f: Fetched<Vec<AuditEntry>>) {
        self.views.audit.feed.apply(f);
        self.clamp(View::Audit);
    }

    pub(super) fn on_redis(&mut self, f: Fetched<crate::ops::health::RedisInfo>) {
        self.redis.apply(f);
        self.clamp(View::Redis);
    }

    /// Keeps a table's selection inside its rows, on the row the operator chose where the rows
    /// have keys ([`crate::tui::cursor::TableCursor::follow`]).
    pub(super) fn clamp(&mut self, view: View) {
        // The keys borrow the App (and the rows depend on the cursor's filter): the selection
        // is worked out on a copy of its fields, then set.
        let cur = self.cursor(view);
        let mut c = crate::tui::cursor::TableCursor {
            selected: cur.selected,
            anchor: cur.anchor.clone(),
            lost: cur.lost,
            ..Default::default()
        };
        match self.row_keys(view) {
            Some(keys) if view == View::Alerts => c.follow_or_stay(&keys),
            Some(keys) => c.follow(&keys),
            None => c.clamp(self.row_count(view)),
        }
        let cur = self.cursor_mut(view);
        cur.selected = c.selected;
        cur.anchor = c.anchor;
        cur.lost = c.lost;
    }

    /// The keys of a table's rows in table order, for the tables whose rows a write or a
    /// selection acts on (a product, a compensation request, an activity, an alert); None for
    /// the rest.
    pub fn row_keys(&self, view: View) -> Option<Vec<Cow<'_, str>>> {
        Some(match view {
            View::Activities => self
                .views
                .activities
                .rows(self)
                .into_iter()
                .map(|a| Cow::Borrowed(a.activity.activity_id.as_str()))
                .collect(),
            View::Stock => {
                let products = self.stock.report().map(|r| &r.products[..]).unwrap_or(&[]);
                self.views
                    .stock
                    .order
                    .iter()
                    .filter_map(|&i| products.get(i))
                    .map(|p| Cow::Borrowed(p.product.as_str()))
                    .collect()
            }
            View::Reconcile => self
                .views
                .reconcile
                .rows(&self.stock)
                .into_iter()
                .map(|p| Cow::Borrowed(p.product.as_str()))
                .collect(),
            View::Compensation => self
                .views
                .compensation
                .rows()
                .into_iter()
                .map(|c| Cow::Borrowed(c.request_id.as_str()))
                .collect(),
            View::Alerts => self
                .views
                .alerts
                .lines(&self.stock)
                .iter()
                .map(|l| Cow::Owned(l.key()))
                .collect(),
            _ => return None,
        })
    }

    /// Why no row is under the cursor of `view`, as the operator reads it.
    pub fn no_row(&self, view: View, what: &str) -> String {
        let c = self.cursor(view);
        match (&c.anchor, c.lost) {
            (Some(a), true) => format!(
                "{a} left the table (a refresh, the sort or the filter): nothing is highlighted; move the cursor with ↑/↓ onto a {what} first"
            ),
            _ => format!("no {what} highlighted"),
        }
    }

    /// How many rows a view's table has now.
    pub fn row_count(&self, view: View) -> usize {
        match view {
            View::Activities => self.views.activities.rows(self).len(),
            View::Stock => self.views.stock.order.len(),
            View::Alerts => self.views.alerts.lines(&self.stock).len(),
            View::Compensation => self.views.compensation.rows().len(),
            View::Reconcile => self.views.reconcile.rows(&self.stock).len(),
            View::Preheat => self.views.preheat.rows(self.activity.as_ref()).len(),
            View::Redis => self.views.redis.rows(&self.redis).len(),
            View::Audit => self.views.audit.rows().len(),
            View::Events => self.views.events.rows().len(),
            View::DryRun | View::Help => 0,
        }
    }

    /// The product highlighted in the Stock or Reconcile view.
    pub fn selected_product(&self) -> Option<&ProductStatus> {
        match self.view {
            View::Stock => self.views.stock.selected(&self.stock),
            View::Reconcile => self.views.reconcile.selected(&self.stock),
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
