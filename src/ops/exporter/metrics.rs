//! The console's truth as Prometheus metrics: one registry kept for the exporter's life (the
//! product series beside it, [`ProductSeries`]), filled from each round of status reports and
//! encoded once per round (a scrape serves the text of the last round; it never reads Redis or
//! the database). No I/O.
//!
//! Names follow Prometheus's rules: base units (`_seconds`, units of stock as `_units`),
//! `_total` on the one counter, labels `activity` and `product` only on product series (never a
//! user or a request id: their number would grow with the sale).

use super::products::ProductSeries;
use crate::domain::alerts::{AlertKind, Severity};
use crate::error::{Error, ErrorKind, Service};
use crate::ops::status::StatusReport;
use chrono::{DateTime, Utc};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ActivityLabels {
    activity: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AlertLabels {
    activity: String,
    kind: String,
    severity: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TargetLabels {
    target: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    kind: String,
}

type Seconds = Gauge<f64, AtomicU64>;

/// The exporter's metrics.
pub struct Metrics {
    registry: Registry,
    /// The product series, written out by hand ([`ProductSeries`]).
    products: std::sync::Mutex<ProductSeries>,
    alerts: Family<AlertLabels, Gauge>,
    compensation_pending: Family<ActivityLabels, Gauge>,
    compensation_oldest: Family<ActivityLabels, Seconds>,
    outbox_pending: Family<ActivityLabels, Gauge>,
    outbox_oldest: Family<ActivityLabels, Seconds>,
    last_success: Family<ActivityLabels, Seconds>,
    poll_duration: Family<ActivityLabels, Seconds>,
    up: Family<TargetLabels, Gauge>,
    errors: Family<ErrorLabels, Counter>,
    interval: Seconds,
    /// The activities whose own series (`last_success`, `poll_duration`) were written.
    known: std::sync::Mutex<std::collections::BTreeSet<String>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

/// Every alert kind the activity metric names, so that a rule reads 0, not an absent series,
/// when an alert is not raised.
const ALERT_KINDS: &[(AlertKind, Severity)] = &[
    (AlertKind::Oversold, Severity::Critical),
    (AlertKind::Negative, Severity::Critical),
    (AlertKind::Corrupt, Severity::Critical),
    (AlertKind::Missing, Severity::Critical),
    (AlertKind::Drift, Severity::Critical),
    (AlertKind::Drift, Severity::Warning),
    (AlertKind::Orphaned, Severity::Warning),
    (AlertKind::PauseLost, Severity::Critical),
    (AlertKind::CancelledOnSale, Severity::Critical),
    (AlertKind::CompensationPending, Severity::Warning),
    (AlertKind::OutboxStale, Severity::Warning),
    (AlertKind::Evicting, Severity::Critical),
    (AlertKind::MemoryHigh, Severity::Warning),
    (AlertKind::MemoryHigh, Severity::Critical),
    (AlertKind::RequestReused, Severity::Warning),
    (AlertKind::OrderMismatch, Severity::Critical),
    (AlertKind::OrderMismatch, Severity::Warning),
    (AlertKind::OutsideWindow, Severity::Warning),
    (AlertKind::OrderAfterReturn, Severity::Critical),
    (AlertKind::WindowMismatch, Severity::Warning),
    (AlertKind::SlotMigrating, Severity::Critical),
];

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let alerts = Family::<AlertLabels, Gauge>::default();
        registry.register(
            "seckill_alerts",
            "Alerts raised now, by kind and severity",
            alerts.clone(),
        );
        let compensation_pending = Family::<ActivityLabels, Gauge>::default();
        registry.register(
            "seckill_compensation_pending",
            "Deductions with an unknown outcome waiting in the compensation queue (counted up to 10,000)",
            compensation_pending.clone(),
        );
        let compensation_oldest = Family::<ActivityLabels, Seconds>::default();
        registry.register(
            "seckill_compensation_oldest_seconds",
            "Age of the oldest pending compensation entry (0 when none)",
            compensation_oldest.clone(),
        );
        let outbox_pending = Family::<ActivityLabels, Gauge>::default();
        registry.register(
            "seckill_outbox_pending",
            "Outbox messages not sent yet (counted up to 10,000)",
            outbox_pending.clone(),
        );
        let outbox_oldest = Family::<ActivityLabels, Seconds>::default();
        registry.register(
            "seckill_outbox_oldest_seconds",
            "Age of the oldest unsent outbox message (0 when none)",
            outbox_oldest.clone(),
        );
        let last_success = Family::<ActivityLabels, Seconds>::default();
        registry.register(
            "seckill_exporter_last_success_timestamp_seconds",
            "When the activity was last read whole (Unix time)",
            last_success.clone(),
        );
        let poll_duration = Family::<ActivityLabels, Seconds>::default();
        registry.register(
            "seckill_exporter_poll_duration_seconds",
            "How long the activity's last poll took",
            poll_duration.clone(),
        );
        let up = Family::<TargetLabels, Gauge>::default();
        registry.register(
            "seckill_up",
            "1 when the last poll reached the target (redis, database)",
            up.clone(),
        );
        let errors = Family::<ErrorLabels, Counter>::default();
        registry.register(
            "seckill_exporter_errors",
            "Polls that failed, by kind",
            errors.clone(),
        );
        let interval = Seconds::default();
        registry.register(
            "seckill_exporter_interval_seconds",
            "Seconds between two polls (--interval): the staleness rule scales with it",
            interval.clone(),
        );
        Metrics {
            interval,
            known: Default::default(),
            registry,
            products: Default::default(),
            alerts,
            compensation_pending,
            compensation_oldest,
            outbox_pending,
            outbox_oldest,
            last_success,
            poll_duration,
            up,
            errors,
        }
    }

    /// The exporter's `--interval`.
    pub fn set_interval(&self, secs: f64) {
        self.interval.set(secs);
    }

    /// Keeps only `activities`' own series: one no longer exported (it ended, another took
    /// its place among the 20) must not read as a poll that stopped succeeding.
    pub fn retain_activities(&self, activities: &[String]) {
        if let Ok(mut p) = self.products.lock() {
            p.retain(activities);
        }
        let Ok(mut known) = self.known.lock() else {
            return;
        };
        known.retain(|a| {
            let keep = activities.contains(a);
            if !keep {
                let l = ActivityLabels {
                    activity: a.clone(),
                };
                self.last_success.remove(&l);
                self.poll_duration.remove(&l);
            }
            keep
        });
    }

    fn note(&self, activity: &str) {
        if let Ok(mut known) = self.known.lock()
            && !known.contains(activity)
        {
            known.insert(activity.to_string());
        }
    }

    /// Listing the activities failed with `e`: counted, and the server it names is down.
    pub fn listing_failed(&self, e: &Error) {
        self.count_error(e);
        if let (ErrorKind::Unavailable, Some(s)) = (e.kind, e.service) {
            self.reached(s, false);
        }
    }

    fn count_error(&self, e: &Error) {
        let kind = match (e.kind, e.service) {
            (ErrorKind::Unavailable, Some(Service::Redis)) => "redis_unavailable",
            (ErrorKind::Unavailable, Some(Service::Database)) => "db_unavailable",
            (k, _) => k.as_str(),
        };
        self.errors
            .get_or_create(&ErrorLabels {
                kind: kind.to_string(),
            })
            .inc();
    }

    /// Starts a round: what the last one said of products and alerts goes (an activity that
    /// fails to read this round has no product series, rather than figures that are no longer
    /// true; its `last_success` tells how old its last reading is).
    pub fn begin_round(&self) {
        if let Ok(mut p) = self.products.lock() {
            p.begin_round();
        }
        self.alerts.clear();
        self.compensation_pending.clear();
        self.compensation_oldest.clear();
        self.outbox_pending.clear();
        self.outbox_oldest.clear();
    }

    /// One activity read whole at `at` in `secs`.
    pub fn report(&self, r: &StatusReport, at: DateTime<Utc>, secs: f64) {
        if let Ok(mut p) = self.products.lock() {
            p.report(&r.activity, &r.products);
        }
        let mut counts: BTreeMap<(AlertKind, Severity), i64> =
            ALERT_KINDS.iter().map(|k| (*k, 0)).collect();
        for a in &r.alerts {
            *counts.entry((a.kind, a.severity)).or_default() += 1;
        }
        for ((kind, severity), n) in counts {
            self.alerts
                .get_or_create(&AlertLabels {
                    activity: r.activity.clone(),
                    kind: kind.as_str().to_string(),
                    severity: severity.as_str().to_string(),
                })
                .set(n);
        }
        self.note(&r.activity);
        let a = ActivityLabels {
            activity: r.activity.clone(),
        };
        self.compensation_pending
            .get_or_create(&a)
            .set(r.compensation.pending);
        self.compensation_oldest
            .get_or_create(&a)
            .set(seconds(r.compensation.oldest_secs));
        self.outbox_pending.get_or_create(&a).set(r.outbox.pending);
        self.outbox_oldest
            .get_or_create(&a)
            .set(seconds(r.outbox.oldest_secs));
        self.last_success
            .get_or_create(&a)
            .set(at.timestamp_millis() as f64 / 1000.0);
        self.poll_duration.get_or_create(&a).set(secs);
        self.reached(Service::Redis, true);
        self.reached(Service::Database, true);
    }

    /// One activity's poll failed with `e` after `secs`.
    pub fn failed(&self, activity: &str, e: &Error, secs: f64) {
        if let Ok(mut p) = self.products.lock() {
            p.failed(activity);
        }
        self.count_error(e);
        self.note(activity);
        self.poll_duration
            .get_or_create(&ActivityLabels {
                activity: activity.to_string(),
            })
            .set(secs);
        if let (ErrorKind::Unavailable, Some(s)) = (e.kind, e.service) {
            self.reached(s, false);
        }
    }

    /// Whether the last poll reached `service`.
    pub fn reached(&self, service: Service, ok: bool) {
        let target = match service {
            Service::Redis => "redis",
            Service::Database => "database",
        };
        self.up
            .get_or_create(&TargetLabels {
                target: target.to_string(),
            })
            .set(i64::from(ok));
    }

    /// The metrics in the OpenMetrics text format, ending with `# EOF`.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode_registry(&mut out, &self.registry);
        if let Ok(p) = self.products.lock() {
            p.encode(&mut out);
        }
        out.push_str("# EOF\n");
        out
    }
}

fn seconds(s: Option<i64>) -> f64 {
    s.map_or(0.0, |s| s as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::alerts::QueueSummary;

    fn report(stock: i64) -> StatusReport {
        let mut r = crate::ops::status::one_product_report("a1", stock);
        r.compensation = QueueSummary {
            pending: 2,
            more: false,
            oldest_secs: Some(40),
        };
        r
    }

    fn line<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
        text.lines().find(|l| l.starts_with(prefix))
    }

    /// What an app server did against its contract is counted by kind, and a kind not raised
    /// reads 0 (a rule on it never sees an absent series).
    #[test]
    fn an_app_servers_breach_is_counted_by_its_kind() {
        use crate::domain::faults::Fault;
        let m = Metrics::new();
        m.begin_round();
        let mut r = report(17);
        r.products[0].faults = Some(Box::new(crate::domain::faults::Faults {
            order_after_return: Some(Fault {
                count: 1,
                units: 1,
                examples: Vec::new(),
            }),
            ..Default::default()
        }));
        r.alerts = crate::domain::alerts::product_alerts(&r.products);
        m.report(&r, Utc::now(), 0.25);
        let text = m.encode();
        assert!(
            text.contains(
                r#"seckill_alerts{activity="a1",kind="order_after_return",severity="critical"} 1"#
            ),
            "{text}"
        );
        assert!(
            text.contains(
                r#"seckill_alerts{activity="a1",kind="request_reused",severity="warning"} 0"#
            ),
            "{text}"
        );
    }

    #[test]
    fn a_round_says_each_products_figures_and_state_and_the_activitys_alerts() {
        let m = Metrics::new();
        m.begin_round();
        m.report(&report(17), Utc::now(), 0.25);
        let text = m.encode();
        assert!(text.ends_with("# EOF\n"), "{text}");
        assert_eq!(
            line(&text, "seckill_drift_units{"),
            Some(r#"seckill_drift_units{activity="a1",product="p1"} 7"#)
        );
        assert_eq!(
            line(&text, "seckill_stock_remaining{"),
            Some(r#"seckill_stock_remaining{activity="a1",product="p1"} 17"#)
        );
        assert_eq!(
            line(&text, "seckill_product_state{"),
            Some(r#"seckill_product_state{activity="a1",product="p1",state="drift"} 1"#)
        );
        assert!(
            text.contains(r#"seckill_alerts{activity="a1",kind="drift",severity="critical"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"seckill_alerts{activity="a1",kind="negative",severity="critical"} 0"#),
            "an alert not raised reads 0: {text}"
        );
        assert!(text.contains(r#"seckill_compensation_oldest_seconds{activity="a1"} 40.0"#));
        assert!(text.contains(r#"seckill_up{target="redis"} 1"#));

        // The next round: the drift is gone, and a failed poll counts an error by kind.
        m.begin_round();
        m.report(&report(10), Utc::now(), 0.25);
        m.failed(
            "a2",
            &Error::unreachable(Service::Redis, "Redis at x is unreachable"),
            1.0,
        );
        let text = m.encode();
        assert!(text.contains(r#"seckill_drift_units{activity="a1",product="p1"} 0"#));
        assert!(text.contains(r#"state="ok"} 1"#) && !text.contains(r#"state="drift""#));
        assert!(text.contains(r#"seckill_exporter_errors_total{kind="redis_unavailable"} 1"#));
        assert!(text.contains(r#"seckill_up{target="redis"} 0"#));

        // a1 is no longer exported: its own series go, so no staleness rule fires for it.
        m.retain_activities(&["a2".to_string()]);
        let text = m.encode();
        assert!(
            !text.contains(r#"last_success_timestamp_seconds{activity="a1"}"#),
            "{text}"
        );
        assert!(
            text.contains(r#"poll_duration_seconds{activity="a2"} 1.0"#),
            "{text}"
        );
    }
}
