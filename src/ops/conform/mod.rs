//! `conform A`: what a shop runs after its own staging sale. It checks every rule of the app
//! servers' contract (docs/app-servers.md) that Redis and the database can show, and names each
//! one broken with counts and examples. It reads every ledger entry, order, outbox message and
//! compensation entry of the activity, in pages, and writes nothing: a check of a sale that
//! is over (or of staging), not a live view's read.

mod ledgers;
mod messages;
mod orders;

use crate::db::Db;
use crate::db::activity as store;
use crate::db::conform::Stamp;
use crate::domain::ActivityId;
use crate::error::Result;
use crate::redis::{KeySpace, ProductKeys, RedisStore};
use ledgers::{check_deductions_window, check_unique, read_ledgers};
use messages::{check_compensation, check_outbox};
use orders::check_orders;
use serde::Serialize;
use std::collections::HashSet;
use std::time::Duration;

/// The rules, by id, in the guide's order, with what each says.
pub const RULES: [(&str, &str); 10] = [
    (
        REQUEST_UNIQUE,
        "a request id is deducted on one product only, once",
    ),
    (
        ORDER_AFTER_SUCCESS,
        "an order is written only for a deduction that answered >= 0",
    ),
    (
        ORDER_COPIES,
        "an order copies product, user and quantity from its deduction",
    ),
    (
        NO_ORDER_AFTER_RETURN,
        "no live order of a request whose units were returned",
    ),
    (
        DEAD_BEFORE_RETURN,
        "an order is marked dead before its deduction is returned",
    ),
    (SOLD_IN_WINDOW, "nothing is sold outside the sale window"),
    (
        UPDATED_AT_MOVES,
        "updated_at is set on every status change, never before created_at",
    ),
    (
        TIMESTAMPS,
        "times are written in the documented spelling (SQLite: RFC 3339, T, +00:00)",
    ),
    (
        OUTBOX,
        "every order has one outbox message, in the documented form",
    ),
    (
        COMPENSATION,
        "compensation entries are well formed and name their deduction",
    ),
];

pub const REQUEST_UNIQUE: &str = "request-unique";
pub const ORDER_AFTER_SUCCESS: &str = "order-after-success";
pub const ORDER_COPIES: &str = "order-copies-deduction";
pub const NO_ORDER_AFTER_RETURN: &str = "no-order-after-return";
pub const DEAD_BEFORE_RETURN: &str = "dead-before-return";
pub const SOLD_IN_WINDOW: &str = "sold-in-window";
pub const UPDATED_AT_MOVES: &str = "updated-at-moves";
pub const TIMESTAMPS: &str = "timestamps";
pub const OUTBOX: &str = "outbox";
pub const COMPENSATION: &str = "compensation";

/// Examples a rule names at most.
const EXAMPLES: usize = 5;

/// How `conform` reads.
#[derive(Clone, Copy, Debug)]
pub struct ConformOptions {
    /// The grace window: an order may land this long after its deduction, so after the
    /// window closed.
    pub grace: Duration,
    /// How far the database's clock and Redis's may lie apart (ms).
    pub clock_slack_ms: i64,
}

/// One request behind a broken rule.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Breach {
    pub request_id: String,
    pub product: String,
    pub detail: String,
}

/// One rule's verdict.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RuleResult {
    pub rule: &'static str,
    pub title: &'static str,
    pub ok: bool,
    /// Rows or entries looked at for it.
    pub checked: u64,
    /// Those that break it.
    pub broken: u64,
    pub examples: Vec<Breach>,
}

/// What was read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Read {
    pub products: usize,
    pub ledger_entries: u64,
    pub orders: u64,
    pub outbox_messages: u64,
    pub compensation_entries: u64,
}

/// The report of `conform`.
#[derive(Clone, Debug, Serialize)]
pub struct ConformReport {
    pub activity: String,
    pub ok: bool,
    /// The ids of the rules broken.
    pub broken: Vec<&'static str>,
    pub rules: Vec<RuleResult>,
    pub read: Read,
    /// What could not be checked, and why (a product's ledger gone, of another type, or
    /// holding unreadable entries: its orders are not held against deductions nobody can
    /// read, which would blame the app servers for Redis's loss).
    pub unchecked: Vec<String>,
}

/// The rules' tallies as the rows go by.
pub(super) struct Tally {
    results: Vec<RuleResult>,
}

impl Tally {
    fn new() -> Self {
        Tally {
            results: RULES
                .iter()
                .map(|(rule, title)| RuleResult {
                    rule,
                    title,
                    ok: true,
                    checked: 0,
                    broken: 0,
                    examples: Vec::new(),
                })
                .collect(),
        }
    }

    fn at(&mut self, rule: &str) -> &mut RuleResult {
        let i = RULES.iter().position(|(r, _)| *r == rule).unwrap_or(0);
        &mut self.results[i]
    }

    fn checked(&mut self, rule: &str, n: u64) {
        self.at(rule).checked += n;
    }

    fn broken(&mut self, rule: &str, rid: &str, product: &str, detail: String) {
        let r = self.at(rule);
        r.ok = false;
        r.broken += 1;
        if r.examples.len() < EXAMPLES {
            r.examples.push(Breach {
                request_id: rid.to_string(),
                product: product.to_string(),
                detail,
            });
        }
    }
}

/// Checks the activity's rows against the contract.
pub async fn conform(
    redis: &RedisStore,
    db: &Db,
    keys: &KeySpace,
    activity: &ActivityId,
    opts: ConformOptions,
) -> Result<ConformReport> {
    let a = store::require(db, activity).await?;
    let products = store::products(db, activity).await?;
    let ids: Vec<String> = products.iter().map(|p| p.product_id.to_string()).collect();
    let pkeys: Vec<ProductKeys> = products
        .iter()
        .map(|p| keys.product(activity, &p.product_id))
        .collect();
    let mut read = Read {
        products: ids.len(),
        ..Read::default()
    };
    let mut t = Tally::new();
    let ledgers = read_ledgers(redis, &pkeys, &mut read).await?;
    let ledger = &ledgers.by_request;
    check_unique(ledger, &ids, &mut t);
    let window = a.sale_window();
    check_deductions_window(redis, ledger, (&ids, &pkeys), window, &mut t).await?;
    let whole: HashSet<&str> = ids
        .iter()
        .zip(&ledgers.state)
        .filter(|(_, s)| s.whole())
        .map(|(p, _)| p.as_str())
        .collect();
    let (mut expected, skipped) = check_orders(
        db,
        activity,
        (ledger, &ids, &whole),
        window,
        opts,
        &mut read,
        &mut t,
    )
    .await?;
    check_outbox(db, activity, &mut expected, &mut read, &mut t).await?;
    let mut unchecked = Vec::new();
    for (p, state) in ids.iter().zip(&ledgers.state) {
        if !state.whole() {
            let n = skipped.get(p.as_str()).copied().unwrap_or(0);
            unchecked.push(format!(
                "the ledger of {p} {}: its {n} order(s) were not checked against their deductions",
                state.why()
            ));
        }
    }
    check_compensation(db, activity, (ledger, &ids), &mut read, &mut t).await?;
    let broken: Vec<&'static str> = t.results.iter().filter(|r| !r.ok).map(|r| r.rule).collect();
    Ok(ConformReport {
        activity: activity.to_string(),
        ok: broken.is_empty(),
        broken,
        rules: t.results,
        read,
        unchecked,
    })
}

pub(super) fn shown_gap(d: chrono::TimeDelta) -> String {
    match d.num_milliseconds() {
        0 => format!("{} us", d.num_microseconds().unwrap_or(0)),
        ms => format!("{ms} ms"),
    }
}

pub(super) fn shown_ms(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_else(|| ms.to_string())
}

pub(super) fn stamp_shown(s: &Stamp) -> String {
    match &s.text {
        Some(text) => format!(
            "'{}' is not the documented spelling",
            crate::domain::stock::shown(text.as_bytes())
        ),
        None => "is not a time".into(),
    }
}
