//! The headless watch: what changed between two status reports, as events a pager reads —
//! an alert raised, an alert cleared, a product's state changed. No I/O.

use super::status::StatusReport;
use crate::domain::alerts::{Alert, AlertKind, Severity};
use crate::domain::stock::State;
use crate::error::Service;
use chrono::{DateTime, Utc};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// What an event says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    Raised,
    Cleared,
    State,
    /// Sentinel named another primary: the console follows it from here.
    Master,
}

/// One line of the watch. Every key is written on every line (null when it does not apply), so
/// that a consumer reads one shape.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WatchEvent {
    pub at: DateTime<chrono::FixedOffset>,
    pub event: EventKind,
    /// The alert's kind (raised, cleared).
    pub kind: Option<AlertKind>,
    pub severity: Option<Severity>,
    pub product: Option<String>,
    pub node: Option<String>,
    pub message: Option<String>,
    /// The product's state now and before (state events).
    pub state: Option<&'static str>,
    pub previous: Option<&'static str>,
}

impl WatchEvent {
    /// The event as `watch` prints it (and the TUI's event log shows it), its time in `tz`.
    pub fn text(&self, tz: crate::domain::zone::Zone) -> String {
        let at = tz.show(self.at.with_timezone(&Utc));
        match self.event {
            EventKind::Master => format!(
                "{at} master  {}: {}",
                self.node.as_deref().unwrap_or("-"),
                self.message.as_deref().unwrap_or("")
            ),
            EventKind::State => format!(
                "{at} state   {} {} -> {}",
                self.product.as_deref().unwrap_or("-"),
                self.previous.unwrap_or("-"),
                self.state.unwrap_or("-")
            ),
            EventKind::Raised | EventKind::Cleared => format!(
                "{at} {} [{}] {}: {}",
                if self.event == EventKind::Raised {
                    "raised "
                } else {
                    "cleared"
                },
                self.severity.map_or("-", Severity::as_str),
                self.kind.map_or("-", |k| k.as_str()),
                self.message.as_deref().unwrap_or("")
            ),
        }
    }
}

/// An alert is the same alert while its kind and subject stay (its figures may move).
type AlertKey = (AlertKind, Option<String>, Option<String>);

fn key(a: &Alert) -> AlertKey {
    (a.kind, a.product.clone(), a.node.clone())
}

/// What the watch has seen so far.
#[derive(Debug, Default)]
pub struct Watcher {
    alerts: HashMap<AlertKey, Alert>,
    /// Each product's state at the last report, in its order (looked up in a map of 100,000
    /// ids at every report, they were a sixth of a live view's CPU).
    states: Vec<(String, State)>,
    started: bool,
    /// The primary Sentinel named at the last report.
    master: Option<String>,
}

impl Watcher {
    /// Critical alerts raised at the last report and not cleared since.
    pub fn critical_raised(&self) -> usize {
        self.alerts
            .values()
            .filter(|a| a.severity == crate::domain::alerts::Severity::Critical)
            .count()
    }

    /// The events between the last report and `r`. The first report raises every alert it
    /// holds (a pager started during an incident learns of it) and states nothing.
    pub fn step(&mut self, r: &StatusReport, at: DateTime<Utc>) -> Vec<WatchEvent> {
        let at = at.fixed_offset();
        let mut out = Vec::new();
        let now: HashMap<AlertKey, &Alert> = r.alerts.iter().map(|a| (key(a), a)).collect();
        let mut gone: Vec<&AlertKey> = self
            .alerts
            .keys()
            .filter(|k| !now.contains_key(*k))
            .collect();
        gone.sort();
        for k in gone {
            if let Some(a) = self.alerts.get(k) {
                out.push(alert_event(at, EventKind::Cleared, a));
            }
        }
        for a in &r.alerts {
            match self.alerts.get(&key(a)) {
                None => out.push(alert_event(at, EventKind::Raised, a)),
                // The same alert grown worse (a drift from lost sales to oversell risk, memory
                // from high to full) is raised again at its new severity, so a pager that
                // takes only critical alerts hears of it.
                Some(before) if a.severity > before.severity => {
                    out.push(alert_event(at, EventKind::Raised, a));
                }
                Some(_) => {}
            }
        }
        self.alerts = r.alerts.iter().map(|a| (key(a), a.clone())).collect();
        let aligned = self.states.len() == r.products.len()
            && self
                .states
                .iter()
                .zip(&r.products)
                .all(|(s, p)| s.0 == p.product);
        let mut earlier: HashMap<String, State> = HashMap::new();
        if !aligned {
            // Another list of products: the states known are matched by id, once.
            earlier = std::mem::take(&mut self.states).into_iter().collect();
            self.states = r
                .products
                .iter()
                .map(|p| (p.product.clone(), p.state))
                .collect();
        }
        for (i, p) in r.products.iter().enumerate() {
            // In place once known: no allocation per product per poll.
            let before = if aligned {
                self.states
                    .get_mut(i)
                    .map(|s| std::mem::replace(&mut s.1, p.state))
            } else {
                earlier.get(&p.product).copied()
            };
            if self.started
                && let Some(b) = before.filter(|b| *b != p.state)
            {
                out.push(WatchEvent {
                    at,
                    event: EventKind::State,
                    kind: None,
                    severity: None,
                    product: Some(p.product.clone()),
                    node: None,
                    message: None,
                    state: Some(p.state.as_str()),
                    previous: Some(b.as_str()),
                });
            }
        }
        if let Some(m) = &r.master {
            if let Some(before) = self.master.as_ref().filter(|b| **b != m.addr) {
                out.push(WatchEvent {
                    at,
                    event: EventKind::Master,
                    kind: None,
                    severity: None,
                    product: None,
                    node: Some(m.addr.clone()),
                    message: Some(format!(
                        "Sentinel names {} the primary of {} (was {before}); the console follows it",
                        m.addr, m.name
                    )),
                    state: None,
                    previous: None,
                });
            }
            self.master = Some(m.addr.clone());
        }
        self.started = true;
        out
    }
}

/// The outages `watch` has seen: an unreachable Redis or database is an alert like any other,
/// raised (warning) at the first failed poll, raised again as critical once it has lasted
/// `critical_after`, and cleared by the next poll that reads the books.
#[derive(Debug, Default)]
pub struct Outages {
    /// Since when each service fails, and whether its alert is critical yet.
    open: BTreeMap<AlertKind, (DateTime<Utc>, Severity)>,
}

/// The alert an unreachable `service` raises.
pub fn outage_kind(service: Service) -> AlertKind {
    match service {
        Service::Redis => AlertKind::RedisUnreachable,
        Service::Database => AlertKind::DbUnreachable,
    }
}

impl Outages {
    /// A poll failed at `at` because `service` did not answer (`message` says how): the events
    /// this raises, none while the alert stands at the severity it has.
    pub fn failed(
        &mut self,
        service: Service,
        message: &str,
        at: DateTime<Utc>,
        critical_after: chrono::Duration,
    ) -> Vec<WatchEvent> {
        let kind = outage_kind(service);
        let (since, shown) = *self.open.entry(kind).or_insert((at, Severity::Info));
        let severity = if at - since >= critical_after {
            Severity::Critical
        } else {
            Severity::Warning
        };
        if severity <= shown {
            return Vec::new();
        }
        self.open.insert(kind, (since, severity));
        let secs = (at - since).num_seconds();
        let alert = Alert {
            kind,
            severity,
            product: None,
            node: None,
            message: format!("unreachable for {secs} s: {message}"),
            age_secs: Some(secs),
        };
        vec![alert_event(at.fixed_offset(), EventKind::Raised, &alert)]
    }

    /// A poll read the books at `at`: every outage clears.
    pub fn recovered(&mut self, at: DateTime<Utc>) -> Vec<WatchEvent> {
        std::mem::take(&mut self.open)
            .into_iter()
            .map(|(kind, (since, severity))| {
                let alert = Alert {
                    kind,
                    severity,
                    product: None,
                    node: None,
                    message: format!("reading again after {} s", (at - since).num_seconds()),
                    age_secs: None,
                };
                alert_event(at.fixed_offset(), EventKind::Cleared, &alert)
            })
            .collect()
    }

    /// Outages raised as critical and not cleared.
    pub fn critical(&self) -> usize {
        self.open
            .values()
            .filter(|(_, s)| *s == Severity::Critical)
            .count()
    }
}

fn alert_event(at: DateTime<chrono::FixedOffset>, event: EventKind, a: &Alert) -> WatchEvent {
    WatchEvent {
        at,
        event,
        kind: Some(a.kind),
        severity: Some(a.severity),
        product: a.product.clone(),
        node: a.node.clone(),
        message: Some(a.message.clone()),
        state: None,
        previous: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(stock: i64) -> StatusReport {
        crate::ops::status::one_product_report("a", stock)
    }

    #[test]
    fn an_alert_is_raised_once_and_cleared_once() {
        let mut w = Watcher::default();
        assert!(w.step(&report(10), Utc::now()).is_empty());
        let e = w.step(&report(17), Utc::now());
        let kinds: Vec<EventKind> = e.iter().map(|e| e.event).collect();
        assert_eq!(kinds, vec![EventKind::Raised, EventKind::State], "{e:?}");
        assert_eq!(e[0].kind, Some(AlertKind::Drift));
        assert_eq!(e[1].state, Some("drift"));
        assert_eq!(e[1].previous, Some("ok"));
        // The drift moves; it is the same alert.
        assert!(w.step(&report(18), Utc::now()).is_empty());
        let e = w.step(&report(10), Utc::now());
        let kinds: Vec<EventKind> = e.iter().map(|e| e.event).collect();
        assert_eq!(kinds, vec![EventKind::Cleared, EventKind::State], "{e:?}");
    }

    /// Lost sales (warning) that turn into oversell risk (critical) are raised again; the
    /// way back down raises nothing.
    #[test]
    fn an_alert_grown_worse_is_raised_again_at_its_new_severity() {
        let mut w = Watcher::default();
        let e = w.step(&report(7), Utc::now());
        assert_eq!(e[0].severity, Some(Severity::Warning), "{e:?}");
        let e = w.step(&report(17), Utc::now());
        let raised: Vec<_> = e
            .iter()
            .filter(|e| e.event == EventKind::Raised)
            .map(|e| (e.kind, e.severity))
            .collect();
        assert_eq!(
            raised,
            vec![(Some(AlertKind::Drift), Some(Severity::Critical))]
        );
        assert_eq!(w.critical_raised(), 1);
        assert!(
            w.step(&report(7), Utc::now())
                .iter()
                .all(|e| e.event != EventKind::Raised)
        );
    }

    #[test]
    fn the_first_report_raises_what_it_holds() {
        let mut w = Watcher::default();
        let e = w.step(&report(17), Utc::now());
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].event, EventKind::Raised);
    }

    #[test]
    fn an_outage_is_raised_at_once_critical_after_a_while_and_cleared_when_read_again() {
        let mut o = Outages::default();
        let t0 = Utc::now();
        let half = chrono::Duration::seconds(30);
        let at = |s: i64| t0 + chrono::Duration::seconds(s);
        let e = o.failed(Service::Redis, "Redis at x is unreachable", at(0), half);
        assert_eq!(e.len(), 1);
        assert_eq!(
            (e[0].event, e[0].kind, e[0].severity),
            (
                EventKind::Raised,
                Some(AlertKind::RedisUnreachable),
                Some(Severity::Warning)
            )
        );
        assert!(o.failed(Service::Redis, "again", at(10), half).is_empty());
        assert_eq!(o.critical(), 0);
        let e = o.failed(Service::Redis, "still", at(30), half);
        assert_eq!(e[0].severity, Some(Severity::Critical), "{e:?}");
        assert!(e[0].message.as_deref().is_some_and(|m| m.contains("30 s")));
        assert!(o.failed(Service::Redis, "still", at(40), half).is_empty());
        // The database fails too: its own alert.
        let e = o.failed(Service::Database, "db", at(41), half);
        assert_eq!(e[0].kind, Some(AlertKind::DbUnreachable));
        assert_eq!(o.critical(), 1);
        let e = o.recovered(at(50));
        let kinds: Vec<_> = e.iter().map(|e| (e.event, e.kind)).collect();
        assert_eq!(
            kinds,
            vec![
                (EventKind::Cleared, Some(AlertKind::RedisUnreachable)),
                (EventKind::Cleared, Some(AlertKind::DbUnreachable))
            ]
        );
        assert_eq!(o.critical(), 0);
        assert!(o.recovered(at(51)).is_empty(), "cleared once");
    }
}
