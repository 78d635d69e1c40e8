//! `conform A`: what a shop runs after its own staging sale. It checks every rule of the app
//! servers' contract (docs/app-servers.md) that Redis and the database can show, and names each
//! one broken with counts and examples. It reads every ledger entry, order, outbox message and
//! compensation entry of the activity, in pages, and writes nothing: a check of a sale that
//! is over (or of staging), not a live view's read.

use crate::db::Db;
use crate::db::activity as store;
use crate::db::conform::{self as rows, OrderRow, Stamp};
use crate::db::orders::ORDER_TOPIC;
use crate::domain::events::{EventId, EventKind};
use crate::domain::order::OrderStatus;
use crate::domain::{ActivityId, SaleWindow};
use crate::error::Result;
use crate::redis::ledger::scan_page;
use crate::redis::{KeySpace, Keyed, ProductKeys, RedisStore, events};
use futures::StreamExt;
use serde::Serialize;
use std::collections::{HashMap, HashSet};
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

/// Ledgers read at once (each a walk of HSCAN pages).
const LEDGERS_IN_FLIGHT: usize = 8;

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

/// What a product's ledger could say.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct LedgerState {
    exists: bool,
    wrong_type: bool,
    corrupt: usize,
}

impl LedgerState {
    fn whole(&self) -> bool {
        self.exists && !self.wrong_type && self.corrupt == 0
    }

    fn why(&self) -> &'static str {
        if !self.exists {
            "is gone (expired after the sale, cleaned up, or lost)"
        } else if self.wrong_type {
            "is not a hash"
        } else {
            "holds entries that are not ledger records (see `status`)"
        }
    }
}

/// Every product's ledger, by request id, and what each ledger could say.
struct Ledgers {
    by_request: HashMap<String, Vec<Ded>>,
    state: Vec<LedgerState>,
}

/// A deduction as its ledger entry records it.
struct Ded {
    product: u32,
    quantity: i64,
    at: EventId,
    returned: bool,
    returned_by: Option<EventId>,
    user: Box<[u8]>,
}

/// The rules' tallies as the rows go by.
struct Tally {
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

/// What an order's outbox message must say, kept from the walk of the orders for the walk of
/// the messages that follows (a message is checked as it goes by: no payload is held).
struct Expected {
    request_id: Box<str>,
    product: Box<str>,
    user: Box<str>,
    quantity: i64,
    /// Messages seen for the order.
    messages: u32,
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

/// Every product's ledger, by request id (HSCAN may give an entry twice: kept once), and
/// whether each could be read whole. Each walk is merged as it ends, so at most a few are
/// held twice.
async fn read_ledgers(
    redis: &RedisStore,
    pkeys: &[ProductKeys],
    read: &mut Read,
) -> Result<Ledgers> {
    let exists: Vec<Keyed> = pkeys
        .iter()
        .map(|k| Keyed::new(&k.ledger, redis::cmd("EXISTS").arg(&k.ledger).clone()))
        .collect();
    let mut state: Vec<LedgerState> = Vec::with_capacity(pkeys.len());
    for r in redis.pipeline(exists).await {
        state.push(LedgerState {
            exists: matches!(r.map_err(|e| redis.error(&e))?, redis::Value::Int(n) if n > 0),
            ..LedgerState::default()
        });
    }
    let mut walks = futures::stream::iter(pkeys.iter().enumerate().map(|(i, k)| async move {
        let mut out: HashMap<String, Ded> = HashMap::new();
        let mut found = LedgerState::default();
        let mut cursor = 0;
        loop {
            let page = scan_page(redis, k, cursor).await?;
            found.wrong_type |= page.wrong_type;
            found.corrupt += page.corrupt.len();
            for e in page.entries {
                out.insert(
                    e.request_id.clone(),
                    Ded {
                        product: u32::try_from(i).unwrap_or(u32::MAX),
                        quantity: e.quantity,
                        at: e.at,
                        returned: e.returned,
                        returned_by: e.returned_by,
                        user: e.user_raw.into_boxed_slice(),
                    },
                );
            }
            cursor = page.next;
            if cursor == 0 || page.wrong_type {
                return Ok::<_, redis::RedisError>((i, out, found));
            }
        }
    }))
    .buffer_unordered(LEDGERS_IN_FLIGHT);
    let mut by_request: HashMap<String, Vec<Ded>> = HashMap::new();
    while let Some(w) = walks.next().await {
        let (i, entries, found) = w.map_err(|e| redis.error(&e))?;
        if let Some(s) = state.get_mut(i) {
            s.wrong_type = found.wrong_type;
            s.corrupt = found.corrupt;
        }
        for (rid, d) in entries {
            read.ledger_entries += 1;
            by_request.entry(rid).or_default().push(d);
        }
    }
    Ok(Ledgers { by_request, state })
}

fn product_of<'a>(ids: &'a [String], d: &Ded) -> &'a str {
    ids.get(d.product as usize).map_or("", String::as_str)
}

fn check_unique(ledger: &HashMap<String, Vec<Ded>>, ids: &[String], t: &mut Tally) {
    t.checked(REQUEST_UNIQUE, ledger.len() as u64);
    let mut reused: Vec<(&String, &Vec<Ded>)> =
        ledger.iter().filter(|(_, d)| d.len() > 1).collect();
    reused.sort_by(|a, b| a.0.cmp(b.0));
    for (rid, deds) in reused {
        let products: Vec<&str> = deds.iter().map(|d| product_of(ids, d)).collect();
        t.broken(
            REQUEST_UNIQUE,
            rid,
            products.first().copied().unwrap_or(""),
            format!(
                "deducted on {} products: {}",
                products.len(),
                products.join(", ")
            ),
        );
    }
}

/// Deductions whose ledger time falls outside the window, kept when their event says a buyer
/// was served then (a console's recording after the window, `b`, is no sale).
async fn check_deductions_window(
    redis: &RedisStore,
    ledger: &HashMap<String, Vec<Ded>>,
    (ids, pkeys): (&[String], &[ProductKeys]),
    window: SaleWindow,
    t: &mut Tally,
) -> Result<()> {
    let mut outside: Vec<(&String, &Ded)> = Vec::new();
    let mut n = 0u64;
    for (rid, deds) in ledger {
        for d in deds {
            n += 1;
            if window.excludes(d.at.ms) {
                outside.push((rid, d));
            }
        }
    }
    t.checked(SOLD_IN_WINDOW, n);
    outside.sort_by(|a, b| a.0.cmp(b.0));
    for chunk in outside.chunks(500) {
        let asks: Vec<(&ProductKeys, EventId)> = chunk
            .iter()
            .filter_map(|(_, d)| Some((pkeys.get(d.product as usize)?, d.at)))
            .collect();
        let kinds = events::kinds_at(redis, &asks).await;
        for ((rid, d), kind) in chunk.iter().zip(kinds) {
            if kind.map_err(|e| redis.error(&e))? == Some(EventKind::Deducted) {
                t.broken(
                    SOLD_IN_WINDOW,
                    rid,
                    product_of(ids, d),
                    format!(
                        "deducted at {} (Redis time), outside the window {} - {}",
                        shown_ms(d.at.ms),
                        shown_ms(window.opens_ms),
                        shown_ms(window.closes_ms)
                    ),
                );
            }
        }
    }
    Ok(())
}

fn shown_gap(d: chrono::TimeDelta) -> String {
    match d.num_milliseconds() {
        0 => format!("{} us", d.num_microseconds().unwrap_or(0)),
        ms => format!("{ms} ms"),
    }
}

fn shown_ms(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_else(|| ms.to_string())
}

/// Walks every outbox message of the activity: each one checked against the order it names as
/// it goes by, then the orders that got none or several.
async fn check_outbox(
    db: &Db,
    activity: &ActivityId,
    expected: &mut HashMap<Box<str>, Expected>,
    read: &mut Read,
    t: &mut Tally,
) -> Result<()> {
    let mut after = 0;
    loop {
        let page = rows::outbox_page(db, activity, after).await?;
        let Some(last) = page.last() else {
            break;
        };
        after = last.id;
        let full = page.len() as i64 >= rows::PAGE;
        read.outbox_messages += page.len() as u64;
        t.checked(TIMESTAMPS, page.len() as u64);
        for m in page {
            let order = expected.get_mut(m.order_id.as_str());
            let (rid, product) = order
                .as_ref()
                .map_or(("", ""), |e| (&*e.request_id, &*e.product));
            if !m.created.documented() {
                t.broken(
                    TIMESTAMPS,
                    rid,
                    product,
                    format!(
                        "outbox message {} of order {}: created_at {}",
                        m.id,
                        m.order_id,
                        stamp_shown(&m.created)
                    ),
                );
            }
            let Some(e) = order else {
                t.broken(
                    OUTBOX,
                    "",
                    "",
                    format!(
                        "message {} names order {}, which is not an order of this activity",
                        m.id, m.order_id
                    ),
                );
                continue;
            };
            e.messages += 1;
            let mut wrong = Vec::new();
            if m.topic != ORDER_TOPIC {
                wrong.push(format!(
                    "topic '{}' (expected {ORDER_TOPIC})",
                    crate::domain::stock::shown(m.topic.as_bytes())
                ));
            }
            if !matches!(m.status.as_str(), "pending" | "sent") {
                wrong.push(format!(
                    "status '{}' (pending or sent)",
                    crate::domain::stock::shown(m.status.as_bytes())
                ));
            }
            if let Some(why) = payload_differs(&m.order_id, e, activity.as_str(), &m.payload) {
                wrong.push(why);
            }
            if !wrong.is_empty() {
                let (rid, product) = (e.request_id.to_string(), e.product.to_string());
                t.broken(
                    OUTBOX,
                    &rid,
                    &product,
                    format!(
                        "message {} of order {}: {}",
                        m.id,
                        m.order_id,
                        wrong.join("; ")
                    ),
                );
            }
        }
        if !full {
            break;
        }
    }
    let mut counts: Vec<(&Box<str>, &Expected)> =
        expected.iter().filter(|(_, e)| e.messages != 1).collect();
    counts.sort_by(|a, b| a.1.request_id.cmp(&b.1.request_id));
    t.checked(OUTBOX, expected.len() as u64);
    for (order_id, e) in counts {
        let detail = match e.messages {
            0 => format!("order {order_id} has no outbox message"),
            n => format!("order {order_id} has {n} outbox messages"),
        };
        t.broken(OUTBOX, &e.request_id, &e.product, detail);
    }
    Ok(())
}

fn stamp_shown(s: &Stamp) -> String {
    match &s.text {
        Some(text) => format!(
            "'{}' is not the documented spelling",
            crate::domain::stock::shown(text.as_bytes())
        ),
        None => "is not a time".into(),
    }
}

/// Walks every order of the activity; returns what each order's outbox message must say, and
/// per product the orders not held against the ledger (one that could not be read whole).
async fn check_orders(
    db: &Db,
    activity: &ActivityId,
    (ledger, ids, whole): (&HashMap<String, Vec<Ded>>, &[String], &HashSet<&str>),
    window: SaleWindow,
    opts: ConformOptions,
    read: &mut Read,
    t: &mut Tally,
) -> Result<(HashMap<Box<str>, Expected>, HashMap<String, u64>)> {
    let mut expected: HashMap<Box<str>, Expected> = HashMap::new();
    let mut skipped: HashMap<String, u64> = HashMap::new();
    let mut after: Option<String> = None;
    let grace_ms = i64::try_from(opts.grace.as_millis()).unwrap_or(i64::MAX);
    loop {
        let page = rows::orders_page(db, activity, after.as_deref()).await?;
        let Some(last) = page.last() else {
            break;
        };
        after = Some(last.request_id.clone());
        let full = page.len() as i64 >= rows::PAGE;
        read.orders += page.len() as u64;
        for o in &page {
            check_times(o, window, (grace_ms, opts.clock_slack_ms), t);
            expected.insert(
                o.order_id.as_str().into(),
                Expected {
                    request_id: o.request_id.as_str().into(),
                    product: o.product_id.as_str().into(),
                    user: o.user_id.as_str().into(),
                    quantity: o.quantity,
                    messages: 0,
                },
            );
            if !whole.contains(o.product_id.as_str()) {
                *skipped.entry(o.product_id.clone()).or_default() += 1;
                continue;
            }
            let deds = ledger.get(&o.request_id).map(Vec::as_slice).unwrap_or(&[]);
            check_order(o, deds, ids, t);
            let here = deds.iter().find(|d| product_of(ids, d) == o.product_id);
            check_return(o, here, opts.clock_slack_ms, t);
        }
        if !full {
            break;
        }
    }
    Ok((expected, skipped))
}

/// The order against its deduction.
fn check_order(o: &OrderRow, deds: &[Ded], ids: &[String], t: &mut Tally) {
    let (rid, product) = (o.request_id.as_str(), o.product_id.as_str());
    t.checked(ORDER_AFTER_SUCCESS, 1);
    if deds.is_empty() {
        t.broken(
            ORDER_AFTER_SUCCESS,
            rid,
            product,
            format!(
                "order {} ({}) has no deduction in any product's ledger (written without a sale, or the ledger was lost: see `status`)",
                o.order_id, o.status
            ),
        );
        return;
    }
    t.checked(ORDER_COPIES, 1);
    let Some(d) = deds.iter().find(|d| product_of(ids, d) == product) else {
        let elsewhere: Vec<&str> = deds.iter().map(|d| product_of(ids, d)).collect();
        t.broken(
            ORDER_COPIES,
            rid,
            product,
            format!(
                "the order is for {product}, the deduction was on {}",
                elsewhere.join(", ")
            ),
        );
        return;
    };
    let mut wrong = Vec::new();
    if d.quantity != o.quantity {
        wrong.push(format!(
            "quantity {} where the deduction took {}",
            o.quantity, d.quantity
        ));
    }
    if *d.user != *o.user_id.as_bytes() {
        wrong.push(format!(
            "user '{}' where the deduction's is '{}'",
            crate::domain::stock::shown(o.user_id.as_bytes()),
            crate::domain::stock::shown(&d.user)
        ));
    }
    if !wrong.is_empty() {
        t.broken(ORDER_COPIES, rid, product, wrong.join("; "));
    }
}

/// Returns against the order's life: a live order of a returned deduction, and a return made
/// before the order died.
fn check_return(o: &OrderRow, here: Option<&Ded>, slack_ms: i64, t: &mut Tally) {
    let Some(d) = here else {
        return;
    };
    let live = OrderStatus::spelled_live(&o.status);
    t.checked(NO_ORDER_AFTER_RETURN, 1);
    if live && d.returned {
        t.broken(
            NO_ORDER_AFTER_RETURN,
            &o.request_id,
            &o.product_id,
            format!(
                "order {} is {} but its deduction's units were returned",
                o.order_id, o.status
            ),
        );
    }
    if !live && d.returned {
        t.checked(DEAD_BEFORE_RETURN, 1);
        if let (Some(by), Some(died)) = (d.returned_by, o.updated.ms())
            && by.ms < died.saturating_sub(slack_ms)
        {
            t.broken(
                DEAD_BEFORE_RETURN,
                &o.request_id,
                &o.product_id,
                format!(
                    "returned at {} (Redis time), {} ms before its order was marked {} at {}",
                    shown_ms(by.ms),
                    died - by.ms,
                    o.status,
                    shown_ms(died)
                ),
            );
        }
    }
}

/// The order's stamps: their spelling, their order, and the window.
fn check_times(o: &OrderRow, window: SaleWindow, (grace_ms, slack_ms): (i64, i64), t: &mut Tally) {
    let (rid, product) = (o.request_id.as_str(), o.product_id.as_str());
    t.checked(TIMESTAMPS, 1);
    for (name, s) in [("created_at", &o.created), ("updated_at", &o.updated)] {
        if !s.documented() {
            t.broken(
                TIMESTAMPS,
                rid,
                product,
                format!("{name} {}", stamp_shown(s)),
            );
        }
    }
    let (Some(created_at), Some(updated_at)) = (o.created.at, o.updated.at) else {
        return;
    };
    let created = created_at.timestamp_millis();
    t.checked(UPDATED_AT_MOVES, 1);
    // Compared at the stamps' full precision (a payment a few microseconds after the order is
    // a move); stamps written to the second only cannot tell a move within that second.
    let fine = o.created.fractional() && o.updated.fractional();
    if updated_at < created_at {
        t.broken(
            UPDATED_AT_MOVES,
            rid,
            product,
            format!(
                "updated_at is {} before created_at",
                shown_gap(created_at - updated_at)
            ),
        );
    } else if o.status != OrderStatus::PendingPayment.as_str() && updated_at == created_at && fine {
        t.broken(
            UPDATED_AT_MOVES,
            rid,
            product,
            format!(
                "the order is {} but updated_at still equals created_at: its status change did not set it",
                o.status
            ),
        );
    }
    t.checked(SOLD_IN_WINDOW, 1);
    if created < window.opens_ms.saturating_sub(slack_ms)
        || created
            > window
                .closes_ms
                .saturating_add(grace_ms)
                .saturating_add(slack_ms)
    {
        t.broken(
            SOLD_IN_WINDOW,
            rid,
            product,
            format!(
                "order {} created at {}, outside the window {} - {} (and its grace window)",
                o.order_id,
                shown_ms(created),
                shown_ms(window.opens_ms),
                shown_ms(window.closes_ms)
            ),
        );
    }
}

/// Why a message's payload is not the order's, if it is not.
fn payload_differs(order_id: &str, o: &Expected, activity: &str, payload: &str) -> Option<String> {
    let Ok(serde_json::Value::Object(v)) = serde_json::from_str::<serde_json::Value>(payload)
    else {
        return Some("the payload is not a JSON object".into());
    };
    let text = |k: &str| v.get(k).and_then(serde_json::Value::as_str);
    let fields = [
        ("activity_id", text("activity_id") == Some(activity)),
        ("order_id", text("order_id") == Some(order_id)),
        ("product_id", text("product_id") == Some(&*o.product)),
        ("request_id", text("request_id") == Some(&*o.request_id)),
        ("user_id", text("user_id") == Some(&*o.user)),
        (
            "quantity",
            v.get("quantity").and_then(serde_json::Value::as_i64) == Some(o.quantity),
        ),
    ];
    let off: Vec<&str> = fields
        .iter()
        .filter(|(_, ok)| !ok)
        .map(|(k, _)| *k)
        .collect();
    (!off.is_empty()).then(|| format!("payload fields {} differ from the order's", off.join(", ")))
}

/// Every compensation entry: its form, and its deduction's figures.
async fn check_compensation(
    db: &Db,
    activity: &ActivityId,
    (ledger, ids): (&HashMap<String, Vec<Ded>>, &[String]),
    read: &mut Read,
    t: &mut Tally,
) -> Result<()> {
    let known: HashSet<&str> = ids.iter().map(String::as_str).collect();
    let mut after = 0;
    loop {
        let page = rows::compensation_page(db, activity, after).await?;
        let Some(last) = page.last() else {
            break;
        };
        after = last.id;
        let full = page.len() as i64 >= rows::PAGE;
        read.compensation_entries += page.len() as u64;
        for c in &page {
            t.checked(COMPENSATION, 1);
            t.checked(TIMESTAMPS, 1);
            if !c.created.documented() {
                t.broken(
                    TIMESTAMPS,
                    &c.request_id,
                    &c.product_id,
                    format!(
                        "compensation entry {}: created_at {}",
                        c.id,
                        stamp_shown(&c.created)
                    ),
                );
            }
            let mut wrong = Vec::new();
            if !matches!(
                c.status.as_str(),
                "pending" | "applied" | "returned" | "not_applied"
            ) {
                wrong.push(format!(
                    "status '{}'",
                    crate::domain::stock::shown(c.status.as_bytes())
                ));
            }
            if c.quantity < 1 {
                wrong.push(format!("quantity {}", c.quantity));
            }
            if !known.contains(c.product_id.as_str()) {
                wrong.push(format!(
                    "product '{}' is not in the activity",
                    crate::domain::stock::shown(c.product_id.as_bytes())
                ));
            }
            let deds = ledger.get(&c.request_id).map(Vec::as_slice).unwrap_or(&[]);
            if !deds.is_empty() {
                match deds.iter().find(|d| product_of(ids, d) == c.product_id) {
                    None => wrong.push(format!(
                        "its deduction was on {}",
                        deds.iter()
                            .map(|d| product_of(ids, d))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )),
                    Some(d) => {
                        if d.quantity != c.quantity {
                            wrong.push(format!(
                                "quantity {} where the deduction took {}",
                                c.quantity, d.quantity
                            ));
                        }
                        if *d.user != *c.user_id.as_bytes() {
                            wrong.push("another user than the deduction's".into());
                        }
                    }
                }
            }
            if !wrong.is_empty() {
                t.broken(
                    COMPENSATION,
                    &c.request_id,
                    &c.product_id,
                    format!("compensation entry {}: {}", c.id, wrong.join("; ")),
                );
            }
        }
        if !full {
            break;
        }
    }
    Ok(())
}
