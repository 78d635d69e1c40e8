//! Alerts: what on-call must look at, derived from product states, the compensation queue, the
//! outbox and the nodes' scripts. No I/O.

use super::meta::Piece;
use super::stock::{ProductStatus, State, lost_shown};
use serde::Serialize;

/// What an alert is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AlertKind {
    Negative,
    Missing,
    Corrupt,
    Drift,
    Orphaned,
    LimitMismatch,
    CancelledOnSale,
    Paused,
    CompensationPending,
    OutboxStale,
    ScriptMissing,
    /// More units held by live orders and deductions in flight than the product had.
    Oversold,
    /// The database says paused; Redis sells.
    PauseLost,
    /// Redis pauses a product the database does not (paused by hand, or by an older console).
    PauseUnrecorded,
    /// A top-up between its two writes, or a rebuild holding the product, for longer than such
    /// a step takes: its console died; fix finishes it.
    Held,
    /// The event stream lost entries; the figures come from the ledger.
    StreamGap,
    /// The orders' clock runs far from Redis's.
    ClockSkew,
    /// An activity whose window has not opened has no key in Redis yet (info: preheat it
    /// before it starts).
    NotPreheated,
    /// A node evicts keys while an activity is live there: any key of the sale may go next.
    Evicting,
    /// A node near its `maxmemory`: under `noeviction` deductions start failing with OOM.
    MemoryHigh,
    /// `watch` could not read Redis (raised at the first failed poll, critical after half of
    /// `--give-up-secs`).
    RedisUnreachable,
    /// `watch` could not read the database, likewise.
    DbUnreachable,
    /// A request id deducted on two products (one of the deductions has no order of its own).
    RequestReused,
    /// A live order whose quantity, or product, is not its deduction's.
    OrderMismatch,
    /// Deductions served outside the sale window.
    OutsideWindow,
    /// A live order of a request whose units were returned.
    OrderAfterReturn,
    /// Redis enforces another sale window than the activity's (or none).
    WindowMismatch,
    /// A cluster slot holding products of the sale is left migrating: their deductions answer
    /// TRYAGAIN while their keys are split ([`super::migration`]).
    SlotMigrating,
}

impl AlertKind {
    /// The name, as in the JSON documents.
    pub fn as_str(self) -> &'static str {
        match self {
            AlertKind::Negative => "negative",
            AlertKind::Missing => "missing",
            AlertKind::Corrupt => "corrupt",
            AlertKind::Drift => "drift",
            AlertKind::Orphaned => "orphaned",
            AlertKind::LimitMismatch => "limit_mismatch",
            AlertKind::CancelledOnSale => "cancelled_on_sale",
            AlertKind::Paused => "paused",
            AlertKind::CompensationPending => "compensation_pending",
            AlertKind::OutboxStale => "outbox_stale",
            AlertKind::ScriptMissing => "script_missing",
            AlertKind::Oversold => "oversold",
            AlertKind::PauseLost => "pause_lost",
            AlertKind::PauseUnrecorded => "pause_unrecorded",
            AlertKind::Held => "held",
            AlertKind::StreamGap => "stream_gap",
            AlertKind::ClockSkew => "clock_skew",
            AlertKind::NotPreheated => "not_preheated",
            AlertKind::Evicting => "evicting",
            AlertKind::MemoryHigh => "memory_high",
            AlertKind::RedisUnreachable => "redis_unreachable",
            AlertKind::DbUnreachable => "db_unreachable",
            AlertKind::RequestReused => "request_reused",
            AlertKind::OrderMismatch => "order_mismatch",
            AlertKind::OutsideWindow => "outside_window",
            AlertKind::OrderAfterReturn => "order_after_return",
            AlertKind::WindowMismatch => "window_mismatch",
            AlertKind::SlotMigrating => "slot_migrating",
        }
    }
}

/// How urgent it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Worth knowing, nothing wrong (a product paused on purpose).
    Info,
    Warning,
    Critical,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Critical => "critical",
        }
    }
}

/// One alert. Every key is written (null when it does not apply): a consumer of the JSON reads
/// one shape.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Alert {
    pub kind: AlertKind,
    pub severity: Severity,
    pub product: Option<String>,
    pub node: Option<String>,
    pub message: String,
    /// Age of the oldest item, for queue alerts.
    pub age_secs: Option<i64>,
}

/// The pending items of a queue (compensation entries, outbox messages).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct QueueSummary {
    /// Pending items, counted up to [`QUEUE_COUNT_CAP`] (then "at least").
    pub pending: i64,
    /// True when there are more pending items than were counted.
    pub more: bool,
    /// Age of the oldest pending item.
    pub oldest_secs: Option<i64>,
}

/// Pending items a summary counts at most: a queue that backs up during a sale must not make
/// every refresh count a million rows.
pub const QUEUE_COUNT_CAP: i64 = 10_000;

/// What a drift is made of (`drift = offset - orphaned + unledgered`), for the operator.
fn drift_causes(p: &ProductStatus) -> String {
    let mut parts = Vec::new();
    if let Some(x) = p.offset.filter(|x| *x != 0) {
        parts.push(format!(
            "the stock is {x:+} off its own counters (a write outside the scripts)"
        ));
    }
    if p.unledgered > 0 {
        parts.push(format!(
            "{} unit(s) of live orders have no deduction in Redis (lost in a restart or failover)",
            p.unledgered
        ));
    }
    if p.orphaned > 0 {
        parts.push(format!(
            "{} unit(s) deducted with no order past the grace window",
            p.orphaned
        ));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!("; {}", parts.join("; "))
    }
}

/// Alerts for products: one per product that is not ok, and one more for each other thing it
/// shows (orphaned stock, a lost or unrecorded pause, a limit Redis does not enforce, a gap in
/// its stream, a step left half done).
pub fn product_alerts(products: &[ProductStatus]) -> Vec<Alert> {
    let mut out = Vec::new();
    for p in products {
        let alert = |kind, severity, message: String| Alert {
            kind,
            severity,
            product: Some(p.product.clone()),
            node: None,
            message,
            age_secs: None,
        };
        if let Some(a) = state_alert(p) {
            out.push(alert(a.0, a.1, a.2));
        }
        if p.lost.contains(&Piece::Pause) {
            out.push(alert(
                AlertKind::PauseLost,
                Severity::Critical,
                format!(
                    "{} is paused in the database{} but Redis sells it (its pause was lost or lifted in Redis): fix writes it back",
                    p.product,
                    reason_shown(&p.pause_reason)
                ),
            ));
        }
        if p.paused && !p.db_paused {
            out.push(alert(
                AlertKind::PauseUnrecorded,
                Severity::Warning,
                format!(
                    "Redis pauses {} but the database does not record it (paused by hand, or by an older console): `pause` records it, `resume` lifts it; fix keeps it paused",
                    p.product
                ),
            ));
        } else if p.paused {
            out.push(alert(
                AlertKind::Paused,
                Severity::Info,
                format!(
                    "{} is paused{}: every deduction answers -5 and nothing sells until it is resumed",
                    p.product,
                    reason_shown(&p.pause_reason)
                ),
            ));
        }
        if let Some(enforced) = p.limit_differs() {
            out.push(alert(
                AlertKind::LimitMismatch,
                Severity::Warning,
                format!(
                    "{}: Redis enforces a per-user limit of {}, the database says {}: fix applies it",
                    p.product,
                    enforced.map_or_else(|| "(none)".to_string(), |l| l.to_string()),
                    p.per_user_limit
                ),
            ));
        }
        if p.orphaned > 0 {
            out.push(alert(
                AlertKind::Orphaned,
                Severity::Warning,
                format!(
                    "{} has {} orphaned unit(s): deducted, no order, older than the grace window",
                    p.product, p.orphaned
                ),
            ));
        }
        if let Some(held) = &p.held {
            // The alert names its product (the row's own text does not need to).
            out.push(alert(
                AlertKind::Held,
                Severity::Warning,
                format!("{}: {held}", p.product),
            ));
        }
        for (kind, severity, message) in super::contract_alerts::fault_alerts(p) {
            out.push(alert(kind, severity, message));
        }
        if p.stream_gap {
            out.push(alert(
                AlertKind::StreamGap,
                Severity::Warning,
                format!(
                    "the event stream of {} lacks entries (deleted or trimmed): its figures come from the ledger, read whole; a fix writes a new starting point",
                    p.product
                ),
            ));
        }
    }
    out.extend(super::contract_alerts::window_alerts(products));
    out
}

fn reason_shown(reason: &str) -> String {
    if reason.is_empty() {
        String::new()
    } else {
        format!(" ({})", super::stock::shown(reason.as_bytes()))
    }
}

/// The alert of a product's state, if it is not ok: kind, severity, message.
fn state_alert(p: &ProductStatus) -> Option<(AlertKind, Severity, String)> {
    let truth = p.expected_remaining;
    Some(match p.state {
        State::Oversold => {
            // What the stock should hold: below zero by the units sold twice. A fix writes it
            // only where Redis holds more (it cannot undo a sale).
            let owed = super::stock::owed(p.initial, p.db_sold, p.in_flight);
            // Whether `fix` has anything to write, as its plan decides: a stock missing,
            // unreadable or off its counters, a lost piece, orphans or unledgered sales.
            let fix_writes = p.redis_remaining.is_none_or(|v| v > owed)
                || p.offset.is_some_and(|o| o != 0)
                || p.orphaned > 0
                || p.unledgered > 0
                || !p.lost.is_empty();
            let then = if fix_writes {
                format!(
                    "fix rewrites it from the database, which leaves its stock at {owed} so nothing more sells"
                )
            } else {
                "nothing more sells while its stock is at or below 0: cancel orders in the shop (their returns pay it back) or top it up".to_string()
            };
            (
                AlertKind::Oversold,
                Severity::Critical,
                format!(
                    "{} is oversold: live orders hold {} and deductions in flight {} of an initial stock of {}; {then}",
                    p.product, p.db_sold, p.in_flight, p.initial
                ),
            )
        }
        State::Negative => (
            AlertKind::Negative,
            Severity::Critical,
            format!(
                "stock of {} is {} (below zero); database truth is {truth}",
                p.product,
                p.redis_remaining.unwrap_or_default(),
            ),
        ),
        State::Missing if p.lost == [Piece::Pause] => return None,
        State::Missing => {
            let pieces: Vec<Piece> = p
                .lost
                .iter()
                .copied()
                .filter(|x| *x != Piece::Pause)
                .collect();
            // Every piece named: a product that lost all its keys read "stock key of p1 is
            // missing", as if only the stock were gone.
            let what = match pieces.as_slice() {
                [] | [Piece::Stock] => format!("stock key of {} is missing", p.product),
                [_] => format!("{} of {} is missing", lost_shown(&pieces), p.product),
                _ => format!("{} of {} are missing", lost_shown(&pieces), p.product),
            };
            (
                AlertKind::Missing,
                Severity::Critical,
                format!(
                    "{what}: every deduction answers -1 until fix or preheat rebuilds it from the database; database truth is {truth}"
                ),
            )
        }
        State::Corrupt => (
            AlertKind::Corrupt,
            Severity::Critical,
            format!(
                "{}: {}; database truth is {truth}",
                p.product,
                p.corrupt_value.as_deref().unwrap_or("corrupt"),
            ),
        ),
        State::Drift => {
            let drift = p.drift.unwrap_or_default();
            let (severity, what) = if drift > 0 {
                (Severity::Critical, "oversell risk")
            } else if drift == 0 && p.unledgered > 0 {
                (
                    Severity::Critical,
                    "oversell risk: differences that cancel out",
                )
            } else {
                (Severity::Warning, "lost sales")
            };
            (
                AlertKind::Drift,
                severity,
                format!(
                    "{} drifts {drift:+} ({what}): Redis {} vs database truth {truth}{}",
                    p.product,
                    p.redis_remaining.unwrap_or_default(),
                    drift_causes(p)
                ),
            )
        }
        State::Ok | State::Paused => return None,
    })
}

/// An alert when the orders' clock (their stamps) runs more than `bound_ms` from Redis's.
pub fn clock_alert(skew_ms: Option<i64>, bound_ms: i64) -> Option<Alert> {
    let skew = skew_ms?;
    (skew.abs() > bound_ms).then(|| Alert {
        kind: AlertKind::ClockSkew,
        severity: Severity::Warning,
        product: None,
        node: None,
        message: format!(
            "the orders' timestamps run {:.1} s {} Redis's clock (measured from orders landing): ages are corrected by it, but check the clocks of the database and the app servers",
            skew.abs() as f64 / 1000.0,
            if skew < 0 { "behind" } else { "ahead of" }
        ),
        age_secs: None,
    })
}

/// The alerts of an activity that is not selling yet (its window has not opened, or it is a
/// draft) and has not been preheated: no product has any key in Redis. Its keys are not meant
/// to exist yet, so a missing stock is no alert; one `info` says so and when the window opens.
/// A partly preheated activity keeps its `missing` alerts: a preheat stopped half way, or an
/// eviction, is worth an operator's look before the sale.
pub fn for_unpreheated(
    activity: &str,
    starts_in_secs: i64,
    mut alerts: Vec<Alert>,
    products: &[ProductStatus],
) -> Vec<Alert> {
    let untouched = |p: &ProductStatus| p.state == State::Missing && p.redis_remaining.is_none();
    if products.is_empty() || !products.iter().all(untouched) {
        return alerts;
    }
    alerts.retain(|a| a.kind != AlertKind::Missing);
    let when = if starts_in_secs > 0 {
        format!("starts in {}", span(starts_in_secs))
    } else {
        "a draft".to_string()
    };
    alerts.push(Alert {
        kind: AlertKind::NotPreheated,
        severity: Severity::Info,
        product: None,
        node: None,
        message: format!(
            "activity {activity} is not preheated ({when}): its {} product(s) have no keys in Redis yet; run `seckill-console preheat {activity}` before it opens",
            products.len()
        ),
        age_secs: None,
    });
    alerts
}

/// A span of time as an operator says it: "3h 12m", "2d 4h", "45s".
fn span(secs: i64) -> String {
    let s = secs.max(0);
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86_400 => format!("{}h {}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d {}h", s / 86_400, (s % 86_400) / 3600),
    }
}

/// The alerts of a cancelled activity: its keys are meant to be gone, so a missing stock is
/// not an alert; a stock still in Redis is, because the deduction script would go on selling
/// it (the script knows nothing of the database's status).
pub fn for_cancelled(
    activity: &str,
    mut alerts: Vec<Alert>,
    products: &[ProductStatus],
) -> Vec<Alert> {
    alerts.retain(|a| a.kind != AlertKind::Missing);
    let on_sale: Vec<&str> = products
        .iter()
        .filter(|p| p.state != State::Missing)
        .map(|p| p.product.as_str())
        .collect();
    if !on_sale.is_empty() {
        alerts.push(Alert {
            kind: AlertKind::CancelledOnSale,
            severity: Severity::Critical,
            product: None,
            node: None,
            message: format!(
                "activity {activity} is cancelled but the stock of {} product(s) ({}) is still in Redis, where deductions can take it: run `seckill-console cleanup {activity}`",
                on_sale.len(),
                on_sale.join(", ")
            ),
            age_secs: None,
        });
    }
    alerts
}

/// An alert when pending items are older than `threshold_secs`.
pub fn queue_alert(
    kind: AlertKind,
    what: &str,
    q: &QueueSummary,
    threshold_secs: i64,
) -> Option<Alert> {
    let oldest = q.oldest_secs?;
    (q.pending > 0 && oldest >= threshold_secs).then(|| Alert {
        kind,
        severity: Severity::Warning,
        product: None,
        node: None,
        message: format!(
            "{}{} {what} pending, the oldest for {oldest} s",
            if q.more { "more than " } else { "" },
            q.pending
        ),
        age_secs: Some(oldest),
    })
}

/// An alert for a node that cannot run the deduction script.
pub fn script_alert(node: &str, script: &str) -> Alert {
    Alert {
        kind: AlertKind::ScriptMissing,
        severity: Severity::Warning,
        product: None,
        node: Some(node.to_string()),
        message: format!(
            "node {node} lacks the {script} script (a restart, failover or SCRIPT FLUSH); callers reload it on NOSCRIPT, preheat loads it"
        ),
        age_secs: None,
    }
}

/// A node's memory, as the memory alerts weigh it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeMemory<'a> {
    pub node: &'a str,
    pub used: u64,
    /// 0: no limit.
    pub max: u64,
    pub policy: &'a str,
    pub evicted: u64,
    /// `evicted` at the previous refresh of a live view, or at the start of a one-shot read
    /// (None: not known).
    pub evicted_before: Option<u64>,
    /// No previous refresh to compare with (a one-shot `status`, a view's first refresh):
    /// evicted keys at the limit count as evicting too.
    pub first_look: bool,
}

/// Share of `maxmemory` above which a node warns.
pub const MEMORY_WARN: f64 = 0.80;
/// Share of `maxmemory` above which a `noeviction` node is critical: deductions are about to
/// fail with OOM.
pub const MEMORY_CRITICAL: f64 = 0.95;

/// The memory alerts of one node while an activity is `live` on it:
/// - `evicting` (critical) when its evicted keys grew since the previous refresh (for a
///   one-shot read: while it read), or, on a first look, when it has evicted keys and sits at
///   its limit (above 95%: where eviction happens, so it is evicting now);
/// - `memory_high`: warning above 80% of `maxmemory`, critical above 95% under `noeviction`.
pub fn memory_alerts(m: &NodeMemory, live: bool) -> Vec<Alert> {
    let mut out = Vec::new();
    let share = (m.max > 0).then(|| m.used as f64 / m.max as f64);
    let at_limit = share.is_some_and(|s| s >= MEMORY_CRITICAL);
    let grew_by = m
        .evicted_before
        .map(|before| m.evicted.saturating_sub(before))
        .filter(|n| *n > 0);
    let at_limit_evicting = m.first_look && m.evicted > 0 && at_limit;
    if live && (grew_by.is_some() || at_limit_evicting) && m.policy != "noeviction" {
        let since = match grew_by {
            Some(n) => format!("{n} key(s) since the last look"),
            None => format!("{} key(s) so far, and it is at its limit", m.evicted),
        };
        out.push(Alert {
            kind: AlertKind::Evicting,
            severity: Severity::Critical,
            product: None,
            node: Some(m.node.to_string()),
            message: format!(
                "node {} evicts keys under {} while the sale is live: {since}; any key of a product may go (it stops selling, `missing`): raise maxmemory or set maxmemory-policy noeviction, then `fix`",
                m.node, m.policy
            ),
            age_secs: None,
        });
    }
    if let Some(share) = share.filter(|s| *s >= MEMORY_WARN) {
        let noeviction = m.policy == "noeviction";
        let severity = if noeviction && share >= MEMORY_CRITICAL {
            Severity::Critical
        } else {
            Severity::Warning
        };
        let then = if noeviction {
            "under noeviction every deduction fails with OOM at the limit"
        } else {
            "at the limit it evicts keys, the sale's among them"
        };
        out.push(Alert {
            kind: AlertKind::MemoryHigh,
            severity,
            product: None,
            node: Some(m.node.to_string()),
            message: format!(
                "node {} uses {:.1}% of its maxmemory ({} of {} bytes, policy {}): {then}",
                m.node,
                share * 100.0,
                m.used,
                m.max,
                m.policy
            ),
            age_secs: None,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::stock::{Meta, StockValue, Truth};

    #[test]
    fn memory_alerts_by_policy_share_and_growth() {
        let base = NodeMemory {
            node: "n1",
            used: 50,
            max: 100,
            policy: "volatile-lru",
            evicted: 0,
            evicted_before: None,
            first_look: true,
        };
        assert!(memory_alerts(&base, true).is_empty());
        let kinds = |m: &NodeMemory, live| {
            memory_alerts(m, live)
                .into_iter()
                .map(|a| (a.kind, a.severity))
                .collect::<Vec<_>>()
        };
        // A live view sees the count grow: evicting, whatever the share.
        let grew = NodeMemory {
            evicted: 5,
            evicted_before: Some(2),
            first_look: false,
            ..base.clone()
        };
        assert_eq!(
            kinds(&grew, true),
            [(AlertKind::Evicting, Severity::Critical)]
        );
        assert!(kinds(&grew, false).is_empty(), "no live activity there");
        let still = NodeMemory {
            evicted_before: Some(5),
            ..grew.clone()
        };
        assert!(kinds(&still, true).is_empty());
        // A one-shot read: evicted keys and at the limit.
        let full = NodeMemory {
            used: 97,
            evicted: 3,
            ..base.clone()
        };
        assert_eq!(
            kinds(&full, true),
            [
                (AlertKind::Evicting, Severity::Critical),
                (AlertKind::MemoryHigh, Severity::Warning)
            ]
        );
        let noeviction = NodeMemory {
            used: 96,
            policy: "noeviction",
            ..base.clone()
        };
        assert_eq!(
            kinds(&noeviction, false),
            [(AlertKind::MemoryHigh, Severity::Critical)]
        );
        let warm = NodeMemory {
            used: 85,
            ..noeviction.clone()
        };
        assert_eq!(
            kinds(&warm, false),
            [(AlertKind::MemoryHigh, Severity::Warning)]
        );
        let unlimited = NodeMemory {
            max: 0,
            used: 10_000,
            ..noeviction
        };
        assert!(kinds(&unlimited, true).is_empty());
    }

    fn status(stock: StockValue, truth: Truth) -> ProductStatus {
        let meta = Meta {
            present: true,
            limit: Some(1),
            ..Meta::default()
        };
        ProductStatus::build("p1", 1, (&stock, &meta, &[]), truth)
    }

    #[test]
    fn a_missing_alert_names_every_piece_lost() {
        let with = |stock: StockValue, lost: &[Piece]| {
            let meta = Meta {
                present: true,
                limit: Some(1),
                ..Meta::default()
            };
            let p = ProductStatus::build("p1", 1, (&stock, &meta, lost), Truth::new(5, 0, 0, 0));
            product_alerts(&[p])
                .into_iter()
                .find(|a| a.kind == AlertKind::Missing)
                .map(|a| a.message)
                .unwrap_or_default()
        };
        assert!(
            with(StockValue::Missing, &[Piece::Stock]).starts_with("stock key of p1 is missing:")
        );
        let all = with(
            StockValue::Missing,
            &[
                Piece::Stock,
                Piece::Meta,
                Piece::Buyers,
                Piece::Ledger,
                Piece::Events,
            ],
        );
        assert!(
            all.starts_with("the stock key, the meta hash, the buyers hash")
                && all.contains("the event stream of p1 are missing:"),
            "{all}"
        );
        let one = with(StockValue::Value(5), &[Piece::Buyers]);
        assert!(
            one.starts_with("the buyers hash (per-user holdings) of p1 is missing:"),
            "{one}"
        );
    }

    #[test]
    fn a_cancelled_activity_alerts_on_stock_left_in_redis_not_on_missing_keys() {
        let on_sale = status(StockValue::Value(1), Truth::new(1, 0, 0, 0));
        let mut gone = status(StockValue::Missing, Truth::new(1, 0, 0, 0));
        gone.product = "p2".into();
        let both = [on_sale.clone(), gone.clone()];
        let alerts = for_cancelled("a", product_alerts(&both), &both);
        assert_eq!(alerts.len(), 1, "{alerts:?}");
        assert_eq!(alerts[0].kind, AlertKind::CancelledOnSale);
        assert!(alerts[0].message.contains("(p1)"), "{}", alerts[0].message);
        let cleaned = [gone];
        assert!(for_cancelled("a", product_alerts(&cleaned), &cleaned).is_empty());
    }

    #[test]
    fn an_activity_not_preheated_yet_is_information_until_a_key_exists() {
        let mut none = status(StockValue::Missing, Truth::new(5, 0, 0, 0));
        let mut other = none.clone();
        other.product = "p2".into();
        let untouched = [none.clone(), other.clone()];
        let alerts = for_unpreheated(
            "later",
            3 * 3600 + 60,
            product_alerts(&untouched),
            &untouched,
        );
        assert_eq!(alerts.len(), 1, "{alerts:?}");
        assert_eq!(
            (alerts[0].kind, alerts[0].severity),
            (AlertKind::NotPreheated, Severity::Info)
        );
        assert!(
            alerts[0].message.contains("starts in 3h 1m"),
            "{}",
            alerts[0].message
        );
        // Half preheated (one stock in Redis, one not): the missing one stays critical.
        none = status(StockValue::Value(5), Truth::new(5, 0, 0, 0));
        let half = [none, other];
        let alerts = for_unpreheated("later", 60, product_alerts(&half), &half);
        assert_eq!(alerts.len(), 1, "{alerts:?}");
        assert_eq!(
            (alerts[0].kind, alerts[0].severity),
            (AlertKind::Missing, Severity::Critical)
        );
    }

    #[test]
    fn a_limit_redis_does_not_enforce_is_a_warning() {
        let meta = Meta {
            present: true,
            limit: Some(2),
            ..Meta::default()
        };
        let p = ProductStatus::build(
            "p1",
            5,
            (&StockValue::Value(8), &meta, &[]),
            Truth::new(10, 2, 0, 0),
        );
        assert!(p.needs_fix());
        let alerts = product_alerts(&[p]);
        assert_eq!(alerts.len(), 1);
        assert_eq!(alerts[0].kind, AlertKind::LimitMismatch);
        assert_eq!(alerts[0].severity, Severity::Warning);
        assert!(alerts[0].message.contains("limit of 2") && alerts[0].message.contains("says 5"));
    }

    #[test]
    fn one_alert_per_problem() {
        let t = Truth::new(10, 2, 0, 3);
        let alerts = product_alerts(&[
            status(StockValue::Value(8), Truth::new(10, 2, 0, 0)),
            status(StockValue::Value(15), t),
            status(StockValue::Value(-3), Truth::new(10, 2, 0, 0)),
            status(StockValue::Missing, Truth::new(10, 2, 0, 0)),
        ]);
        let kinds: Vec<AlertKind> = alerts.iter().map(|a| a.kind).collect();
        assert_eq!(
            kinds,
            vec![
                AlertKind::Drift,
                AlertKind::Orphaned,
                AlertKind::Negative,
                AlertKind::Missing
            ]
        );
        assert_eq!(alerts[0].severity, Severity::Critical);
        assert!(alerts[0].message.contains("+7"), "{}", alerts[0].message);
    }

    #[test]
    fn queue_alerts_respect_the_threshold() {
        let q = QueueSummary {
            pending: 2,
            more: false,
            oldest_secs: Some(40),
        };
        assert!(
            queue_alert(
                AlertKind::CompensationPending,
                "compensation entries",
                &q,
                30
            )
            .is_some()
        );
        assert!(
            queue_alert(
                AlertKind::CompensationPending,
                "compensation entries",
                &q,
                60
            )
            .is_none()
        );
        assert!(queue_alert(AlertKind::OutboxStale, "x", &QueueSummary::default(), 0).is_none());
    }
}
