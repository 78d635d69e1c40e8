//! `status` and `reconcile`: per product the truth, what Redis holds, the drift and the state;
//! alerts for the activity.

use super::health;
use super::snapshot::{self, Reading, Scope};
use super::tracker::Tracker;
use crate::db::{Db, compensation, outbox};
use crate::domain::alerts::{self, Alert, AlertKind, QueueSummary};
use crate::domain::stock::{ProductStatus, State};
use crate::domain::{ActivityId, Phase};
use crate::error::Result;
use crate::redis::{KeySpace, RedisStore, scripts};
use chrono::{DateTime, Utc};
use serde::Serialize;
use std::collections::HashMap;
use std::time::Duration;

/// Thresholds and windows of the status.
#[derive(Clone, Debug)]
pub struct StatusOptions {
    pub grace: Duration,
    pub compensation_alert: Duration,
    pub outbox_alert: Duration,
    /// Counts a settle from scratch as it reads (a terminal's progress line); none by default.
    pub gauge: super::progress::SettleGauge,
}

/// Sums over the activity's products.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Totals {
    pub initial: i64,
    pub redis_remaining: i64,
    pub db_sold: i64,
    pub in_flight: i64,
    pub orphaned: i64,
    pub expected_remaining: i64,
    pub not_ok: usize,
    /// Products whose Redis stock is not in `redis_remaining` (missing, not an integer, or
    /// behind a corrupt meta hash): the total is of the others only.
    pub redis_unreadable: usize,
}

/// The status / reconcile report.
#[derive(Clone, Debug, Serialize)]
pub struct StatusReport {
    pub activity: String,
    pub phase: Phase,
    pub products: Vec<ProductStatus>,
    pub alerts: Vec<Alert>,
    pub totals: Totals,
    pub compensation: QueueSummary,
    pub outbox: QueueSummary,
    pub taken_at: DateTime<Utc>,
    /// How far the orders' timestamps run ahead of Redis's clock (negative: behind), as the
    /// orders seen landing show it; null before any landed in view.
    pub clock_skew_ms: Option<i64>,
    /// The live view only: how many seconds ago the least recently read product's keys were
    /// read whole. Quiet products are asked whether their stream moved, which no write outside
    /// the scripts shows (a key set or deleted by hand): such a write may be this old.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keys_age_secs: Option<u64>,
    /// Each Redis node: its role and memory (policy, used / max, evicted keys).
    pub redis_nodes: Vec<NodeBrief>,
    /// Behind Sentinel: the primary followed now, and when it last changed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub master: Option<Box<crate::redis::sentinel::MasterInfo>>,
}

/// Whether a product is as its activity's phase wants it: `ok`, or `paused` with the right
/// numbers; in a cancelled activity, its keys gone (its stock left in Redis still sells, and
/// counts against it whatever its state). An oversold, drifting or corrupt product never is.
/// An activity with no key at all before its start still counts its products as missing:
/// nothing in Redis tells a preheat not run yet from one lost whole.
pub fn as_wanted(phase: Phase, p: &ProductStatus) -> bool {
    let gone = p.state == State::Missing && p.redis_remaining.is_none();
    match phase {
        Phase::Cancelled => gone,
        _ => matches!(p.state, State::Ok | State::Paused),
    }
}

/// One Redis node in the status report.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct NodeBrief {
    pub addr: String,
    pub role: crate::redis::Role,
    pub ok: bool,
    pub memory: crate::redis::info::Memory,
}

impl StatusReport {
    /// True when every product is as its activity's phase wants it (see [`as_wanted`]):
    /// what `reconcile --fail-on-drift` and the "not ok" counts go by.
    pub fn all_ok(&self) -> bool {
        self.products.iter().all(|p| as_wanted(self.phase, p))
    }

    /// Alerts that ask for action (warnings and critical ones; not the informational).
    pub fn alarms(&self) -> usize {
        self.alerts
            .iter()
            .filter(|a| a.severity > alerts::Severity::Info)
            .count()
    }
}

/// Reads the activity and builds the report: one grouped database query per activity and
/// pipelined Redis reads per node.
pub async fn status(
    redis: &RedisStore,
    db: &Db,
    keys: &KeySpace,
    activity: &ActivityId,
    opts: &StatusOptions,
) -> Result<StatusReport> {
    // The books are saved as checkpoints, so the next read starts where this one ended.
    let scope = Scope {
        save: true,
        gauge: opts.gauge.clone(),
        ..Scope::default()
    };
    // Keys evicted at the start: a count that grows while this report reads is eviction now.
    let evicted_at_start = health::evicted_keys(redis).await;
    let snap = snapshot::take(redis, db, keys, activity, opts.grace, &scope).await?;
    let compensation = compensation::summary(db, activity).await?;
    let outbox = outbox::summary(db, activity).await?;
    let nodes = health::redis_nodes(redis).await;
    let mut report = build(
        Reading::of(snap),
        compensation,
        outbox,
        (&nodes, Some((&evicted_at_start, true))),
        opts,
    );
    report.master = redis.master().map(Box::new);
    Ok(report)
}

/// The same report for the activity a live view follows: only what changed since its last
/// refresh is read ([`Tracker::refresh`]).
pub async fn status_tracked(
    tracker: &mut Tracker,
    redis: &RedisStore,
    db: &Db,
    keys: &KeySpace,
    opts: &StatusOptions,
) -> Result<StatusReport> {
    let snap = tracker.refresh(redis, db, keys).await?;
    let compensation = compensation::summary(db, tracker.activity()).await?;
    let outbox = outbox::summary(db, tracker.activity()).await?;
    let nodes = health::redis_nodes(redis).await;
    let mut report = build(
        snap,
        compensation,
        outbox,
        (&nodes, Some((&tracker.evicted, tracker.evicted.is_empty()))),
        opts,
    );
    report.master = redis.master().map(Box::new);
    // The next refresh weighs its eviction counts against these. A node that evicted keys
    // since may have taken a piece of a quiet product: every product is read whole next.
    let evicted: HashMap<String, u64> = nodes
        .iter()
        .filter_map(|n| Some((n.addr.clone(), n.memory.evicted_keys?)))
        .collect();
    if health::evicted_since(&tracker.evicted, &evicted) {
        tracker.recut();
    }
    tracker.evicted.extend(evicted);
    Ok(report)
}

/// The alerts of the migrating slots that hold products of the sale.
fn slot_alerts(r: &Reading, nodes: &[health::NodeHealth]) -> Vec<crate::domain::alerts::Alert> {
    let moving: Vec<&crate::domain::migration::Migration> =
        nodes.iter().flat_map(|n| &n.migrating).collect();
    if moving.is_empty() {
        return Vec::new();
    }
    moving
        .into_iter()
        .filter_map(|m| {
            let inside: Vec<&str> = r
                .statuses
                .iter()
                .zip(r.slots.iter())
                .filter(|(_, slot)| **slot == m.slot)
                .map(|(s, _)| s.product.as_str())
                .collect();
            crate::domain::migration::slot_alert(m, &inside)
        })
        .collect()
}

/// Assembles the report from what was read (pure). Takes the reading whole: each product's
/// status is moved into the report, not copied (100,000 copies a poll were a visible share of
/// the live view's CPU).
pub fn build(
    snap: Reading,
    compensation: QueueSummary,
    outbox: QueueSummary,
    (nodes, evicted_before): (&[health::NodeHealth], EvictedBefore<'_>),
    opts: &StatusOptions,
) -> StatusReport {
    let slots = slot_alerts(&snap, nodes);
    let Reading {
        activity,
        statuses: products,
        taken_at,
        skew_ms,
        keys_age,
        ..
    } = snap;
    let phase = activity.phase(taken_at);
    let mut alerts = alerts::product_alerts(&products);
    if phase == Phase::Cancelled {
        alerts = alerts::for_cancelled(activity.activity_id.as_str(), alerts, &products);
    }
    // Not selling yet (a draft sells nothing either): keys nobody has written yet are no
    // alert.
    let draft = activity.status == crate::domain::activity::ActivityStatus::Draft;
    if phase == Phase::Upcoming || (draft && phase != Phase::Cancelled) {
        let starts_in = if draft {
            0
        } else {
            (activity.starts_at - taken_at).num_seconds()
        };
        alerts =
            alerts::for_unpreheated(activity.activity_id.as_str(), starts_in, alerts, &products);
    }
    alerts.extend(alerts::queue_alert(
        AlertKind::CompensationPending,
        "compensation entries",
        &compensation,
        secs(opts.compensation_alert),
    ));
    alerts.extend(alerts::queue_alert(
        AlertKind::OutboxStale,
        "outbox messages",
        &outbox,
        secs(opts.outbox_alert),
    ));
    for node in nodes.iter().filter(|n| n.ok) {
        for (name, loaded) in &node.scripts {
            if !loaded && name == scripts::DEDUCT.name {
                alerts.push(alerts::script_alert(&node.addr, name));
            }
        }
    }
    alerts.extend(alerts::clock_alert(skew_ms, CLOCK_SKEW_ALERT_MS));
    alerts.extend(slots);
    for node in nodes.iter().filter(|n| n.answered) {
        let m = &node.memory;
        let Some(used) = m.used_bytes else { continue };
        let memory = alerts::NodeMemory {
            node: &node.addr,
            used,
            max: m.max_bytes.unwrap_or(0),
            policy: m.policy.as_deref().unwrap_or("unknown"),
            evicted: m.evicted_keys.unwrap_or(0),
            // A view's first refresh has nothing to compare with: it weighs it as a one-shot read.
            evicted_before: evicted_before.and_then(|(b, _)| b.get(&node.addr).copied()),
            first_look: evicted_before.is_none_or(|(_, first)| first),
        };
        alerts.extend(alerts::memory_alerts(&memory, phase == Phase::Live));
    }
    alerts.sort_by_key(|a| std::cmp::Reverse(a.severity));
    let mut totals = Totals::default();
    for p in &products {
        totals.initial += p.initial;
        match p.redis_remaining {
            Some(v) => totals.redis_remaining += v,
            None => totals.redis_unreadable += 1,
        }
        totals.db_sold += p.db_sold;
        totals.in_flight += p.in_flight;
        totals.orphaned += p.orphaned;
        totals.expected_remaining += p.expected_remaining;
        if !as_wanted(phase, p) {
            totals.not_ok += 1;
        }
    }
    StatusReport {
        activity: activity.activity_id.to_string(),
        phase,
        products,
        alerts,
        totals,
        compensation,
        outbox,
        taken_at,
        clock_skew_ms: skew_ms,
        keys_age_secs: keys_age.map(|d| d.as_secs()),
        redis_nodes: nodes
            .iter()
            .map(|n| NodeBrief {
                addr: n.addr.clone(),
                role: n.role,
                ok: n.ok,
                memory: n.memory.clone(),
            })
            .collect(),
        master: None,
    }
}

/// Each node's evicted keys at the last look (the previous refresh, or the start of this
/// report), and whether this is the first look (no previous refresh).
pub type EvictedBefore<'a> = Option<(&'a HashMap<String, u64>, bool)>;

/// How far the orders' clock may run from Redis's before it is an alert of its own.
pub const CLOCK_SKEW_ALERT_MS: i64 = 5_000;

fn secs(d: Duration) -> i64 {
    i64::try_from(d.as_secs()).unwrap_or(i64::MAX)
}

/// A report of one live product `p1` of 10 units, none sold, whose Redis stock reads `stock`
/// (7: lost sales, 17: oversell risk), for the tests of what reads a report.
#[cfg(test)]
pub(crate) fn one_product_report(activity: &str, stock: i64) -> StatusReport {
    use crate::domain::stock::{Meta, StockValue, Truth};
    let meta = Meta {
        present: true,
        limit: Some(1),
        ..Meta::default()
    };
    let p = ProductStatus::build(
        "p1",
        1,
        (&StockValue::Value(stock), &meta, &[]),
        Truth::new(10, 0, 0, 0),
    );
    StatusReport {
        activity: activity.into(),
        phase: Phase::Live,
        alerts: crate::domain::alerts::product_alerts(std::slice::from_ref(&p)),
        products: vec![p],
        totals: Totals::default(),
        compensation: QueueSummary::default(),
        outbox: QueueSummary::default(),
        taken_at: Utc::now(),
        clock_skew_ms: None,
        keys_age_secs: None,
        redis_nodes: Vec::new(),
        master: None,
    }
}
