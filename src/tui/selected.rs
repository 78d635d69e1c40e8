//! The selected activity's status as the App keeps it: the last report and what successive
//! reports tell (sales rates, when each alert was first seen). Shared by the views that show
//! the activity (Stock, Alerts, Reconcile, Activities) and by the header and footer.

use super::feed::Feed;
use crate::domain::alerts::AlertKind;
use crate::domain::stock::{ProductStatus, State};
use crate::ops::status::StatusReport;
use chrono::{DateTime, Utc};
use std::collections::{HashMap, VecDeque};

/// The status of the selected activity, with what the UI derives from successive snapshots.
#[derive(Debug, Default)]
pub struct StockData {
    pub feed: Feed<StatusReport>,
    /// Units per second per product, from the last two snapshots.
    pub rates: HashMap<String, f64>,
    /// The activity's units per second, oldest first, for the sparkline.
    pub rate_history: VecDeque<f64>,
    /// The highest of them since the console began watching the activity (the sparkline keeps
    /// only its last minutes).
    pub rate_peak: f64,
    /// Sold units per product at the previous snapshot.
    pub prev_sold: Option<(DateTime<Utc>, HashMap<String, i64>)>,
    /// When each alert was first seen (the alerts carry no time of their own).
    pub alert_seen: HashMap<AlertKey, DateTime<Utc>>,
    /// The imported names of the products alerts name (the alerts carry ids only).
    pub alert_names: HashMap<String, String>,
    /// A settle from scratch runs beside the polls: about this share read (the header says
    /// so); None once its snapshot came.
    pub settling: Option<u8>,
}

impl StockData {
    pub fn report(&self) -> Option<&StatusReport> {
        self.feed.data.as_ref()
    }

    /// Rates and alert ages from the new report against the previous one.
    pub fn derive(&mut self, report: &StatusReport) {
        let s = self;
        // Updated in place: a refresh of 10,000 products allocates nothing here once they are
        // known (building both maps anew every second was a twentieth of the live view's CPU).
        let dt = s.prev_sold.as_ref().map_or(0.0, |(prev_at, _)| {
            (report.taken_at - *prev_at).num_milliseconds() as f64 / 1000.0
        });
        let (_, prev) = s
            .prev_sold
            .get_or_insert_with(|| (report.taken_at, HashMap::new()));
        let first = prev.is_empty();
        let mut total = 0.0;
        for p in &report.products {
            let sold = sold_units(p);
            let before = match prev.get_mut(&p.product) {
                Some(v) => Some(std::mem::replace(v, sold)),
                None => {
                    prev.insert(p.product.clone(), sold);
                    None
                }
            };
            if first || dt <= 0.0 {
                continue;
            }
            // A fix or a cancelled order lowers the count; that is not a negative sale.
            let delta = before.map_or(0, |b| (sold - b).max(0));
            let rate = delta as f64 / dt;
            total += rate;
            match s.rates.get_mut(&p.product) {
                Some(r) => *r = rate,
                None => {
                    s.rates.insert(p.product.clone(), rate);
                }
            }
        }
        // Products taken out of the activity are forgotten.
        if prev.len() > report.products.len() || s.rates.len() > report.products.len() {
            let listed: std::collections::HashSet<&str> =
                report.products.iter().map(|p| p.product.as_str()).collect();
            prev.retain(|k, _| listed.contains(k.as_str()));
            s.rates.retain(|k, _| listed.contains(k.as_str()));
        }
        if let Some((at, _)) = &mut s.prev_sold {
            *at = report.taken_at;
        }
        if !first && dt > 0.0 {
            s.rate_history.push_back(total);
            s.rate_peak = s.rate_peak.max(total);
            while s.rate_history.len() > RATE_HISTORY {
                s.rate_history.pop_front();
            }
        }

        let mut seen = HashMap::with_capacity(report.alerts.len());
        for a in &report.alerts {
            let key = (a.kind, a.product.clone(), a.node.clone());
            let first = match a.age_secs {
                // Queue alerts know the age of their oldest item.
                Some(age) => aged(report.taken_at, age),
                None => s.alert_seen.get(&key).copied().unwrap_or(report.taken_at),
            };
            seen.insert(key, first);
        }
        s.alert_seen = seen;
        // Once per snapshot, for the products that have alerts only (a frame looks them up).
        let named: std::collections::HashSet<&str> = report
            .alerts
            .iter()
            .filter_map(|a| a.product.as_deref())
            .collect();
        s.alert_names.clear();
        if !named.is_empty() {
            s.alert_names.extend(
                report
                    .products
                    .iter()
                    .filter(|p| !p.name.is_empty() && named.contains(p.product.as_str()))
                    .map(|p| (p.product.clone(), p.name.clone())),
            );
        }
    }
}

/// When a queue alert's oldest item was first seen: `age_secs` before the snapshot. A row
/// stamped at the edge of time (written by hand) gives the earliest instant rather than a
/// time chrono cannot hold.
fn aged(taken_at: DateTime<Utc>, age_secs: i64) -> DateTime<Utc> {
    chrono::Duration::try_seconds(age_secs)
        .and_then(|age| taken_at.checked_sub_signed(age))
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
}

/// Units a product has sold for the rate: orders plus deductions whose orders are on the way.
fn sold_units(p: &ProductStatus) -> i64 {
    p.db_sold + p.in_flight
}

/// Identifies an alert across snapshots.
pub type AlertKey = (AlertKind, Option<String>, Option<String>);

/// Points kept for the sales-rate sparkline.
pub const RATE_HISTORY: usize = 240;

/// Severity order of states, worst last (so a descending sort puts the worst first).
pub fn state_rank(s: State) -> u8 {
    match s {
        State::Ok => 0,
        State::Paused => 1,
        State::Drift => 2,
        State::Missing => 3,
        State::Corrupt => 4,
        State::Negative => 5,
        State::Oversold => 6,
    }
}

/// True when every product has its stock key: the activity was preheated.
pub fn preheated(r: &StatusReport) -> bool {
    !r.products.is_empty() && r.products.iter().all(|p| p.state != State::Missing)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_alert_aged_past_the_edge_of_time_was_first_seen_at_the_earliest_instant() {
        let now = DateTime::<Utc>::from_timestamp(1_800_000_000, 0).expect("time");
        assert_eq!(
            aged(now, 60),
            DateTime::<Utc>::from_timestamp(1_799_999_940, 0).expect("time")
        );
        let near_the_start = DateTime::<Utc>::MIN_UTC + chrono::Duration::seconds(1);
        assert_eq!(aged(near_the_start, 2), DateTime::<Utc>::MIN_UTC);
        assert_eq!(aged(now, i64::MAX), DateTime::<Utc>::MIN_UTC);
    }
}
