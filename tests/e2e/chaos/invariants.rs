//! What Redis holds for a product, read whole by the test (a probe), and the invariants each
//! step is checked against: the model's recomputation from its own history on one side, what
//! Redis would sell and what the console says on the other.

use super::steps::{PRODUCTS, Step};
use super::world::{Order, Violation, World, pname};
use seckill_console::domain::stock::{State, parse_int};
use seckill_console::ops::status::{StatusOptions, StatusReport, status};
use seckill_console::redis::{Keyed, ProductKeys, RedisStore};
use std::collections::{HashMap, HashSet};
use std::time::Duration;

/// One product's keys as Redis holds them now.
#[derive(Clone, Debug, Default)]
pub struct Probe {
    pub stock: Option<Vec<u8>>,
    pub meta: bool,
    pub limit: Option<Vec<u8>>,
    pub paused: Option<Vec<u8>>,
    pub deducted: Option<Vec<u8>>,
    pub returned: Option<Vec<u8>>,
    pub topup: Option<Vec<u8>>,
    pub frozen: Option<Vec<u8>>,
    pub buyers: bool,
    pub ledger: bool,
    pub events: bool,
    /// The buyers hash: user -> units (placeholder left out).
    pub holdings: HashMap<String, String>,
    /// Requests with an active (`d|`) ledger entry.
    pub active: HashSet<String>,
}

fn bulk(v: &redis::Value) -> Option<Vec<u8>> {
    match v {
        redis::Value::BulkString(b) => Some(b.clone()),
        redis::Value::SimpleString(s) => Some(s.as_bytes().to_vec()),
        _ => None,
    }
}

fn pairs(v: &redis::Value) -> Vec<(Vec<u8>, Vec<u8>)> {
    match v {
        redis::Value::Array(items) => items
            .chunks(2)
            .filter_map(|c| Some((bulk(c.first()?)?, bulk(c.get(1)?)?)))
            .collect(),
        redis::Value::Map(items) => items
            .iter()
            .filter_map(|(k, v)| Some((bulk(k)?, bulk(v)?)))
            .collect(),
        _ => Vec::new(),
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).to_string()
}

impl Probe {
    pub async fn read(store: &RedisStore, k: &ProductKeys) -> Probe {
        let on = |key: &str, args: &[&str]| {
            let mut c = redis::cmd(args[0]);
            for a in &args[1..] {
                c.arg(*a);
            }
            Keyed::new(key, c)
        };
        let items = vec![
            on(&k.stock, &["GET", &k.stock]),
            on(
                &k.meta,
                &[
                    "HMGET", &k.meta, "limit", "paused", "deducted", "returned", "topup", "frozen",
                ],
            ),
            on(&k.meta, &["EXISTS", &k.meta]),
            on(&k.buyers, &["EXISTS", &k.buyers]),
            on(&k.ledger, &["EXISTS", &k.ledger]),
            on(&k.events, &["EXISTS", &k.events]),
            on(&k.buyers, &["HGETALL", &k.buyers]),
            on(&k.ledger, &["HGETALL", &k.ledger]),
        ];
        let r: Vec<redis::Value> = store
            .pipeline(items)
            .await
            .into_iter()
            .map(|v| v.unwrap_or(redis::Value::Nil))
            .collect();
        let field = |i: usize| match &r[1] {
            redis::Value::Array(f) => f.get(i).and_then(bulk),
            _ => None,
        };
        let exists = |i: usize| matches!(r[i], redis::Value::Int(1));
        Probe {
            stock: bulk(&r[0]),
            meta: exists(2),
            limit: field(0),
            paused: field(1),
            deducted: field(2),
            returned: field(3),
            topup: field(4),
            frozen: field(5),
            buyers: exists(3),
            ledger: exists(4),
            events: exists(5),
            holdings: pairs(&r[6])
                .into_iter()
                .filter(|(u, _)| !u.is_empty())
                .map(|(u, n)| (text(&u), text(&n)))
                .collect(),
            active: pairs(&r[7])
                .into_iter()
                .filter(|(rid, v)| !rid.is_empty() && v.starts_with(b"d|"))
                .map(|(rid, _)| text(&rid))
                .collect(),
        }
    }

    pub fn stock_value(&self) -> Option<i64> {
        self.stock.as_deref().and_then(parse_int)
    }

    fn int_or_absent(v: &Option<Vec<u8>>) -> bool {
        v.as_deref().is_none_or(|b| parse_int(b).is_some())
    }

    fn limit_ok(&self) -> bool {
        self.limit
            .as_deref()
            .and_then(parse_int)
            .is_some_and(|l| l >= 1)
    }

    fn paused_readable(&self) -> bool {
        matches!(self.paused.as_deref(), None | Some(b"0") | Some(b"1"))
    }

    pub fn is_paused(&self) -> bool {
        self.paused.as_deref() == Some(b"1")
    }

    /// The pieces missing, as the scripts see them.
    pub fn lost(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        if self.stock.is_none() {
            v.push("stock");
        }
        if !self.meta {
            v.push("meta");
        } else if self.limit.is_none() {
            v.push("limit");
        }
        if !self.buyers {
            v.push("buyers");
        }
        if !self.ledger {
            v.push("ledger");
        }
        if !self.events {
            v.push("events");
        }
        v
    }

    /// Every piece there and readable (the console can vouch for its figures).
    pub fn whole(&self) -> bool {
        self.lost().is_empty()
            && self.stock_value().is_some()
            && self.limit_ok()
            && Self::int_or_absent(&self.deducted)
            && Self::int_or_absent(&self.returned)
            && self.paused_readable()
    }

    /// `deduct.lua` would sell: an integer stock, a limit, every piece, not paused, counters
    /// it can read.
    pub fn can_sell(&self) -> bool {
        self.stock_value().is_some()
            && self.limit_ok()
            && self.buyers
            && self.ledger
            && self.events
            && !self.is_paused()
            && self.paused_readable()
            && Self::int_or_absent(&self.deducted)
    }

    /// Every piece there for `deduct.lua` to sell from (paused or not: a pause hides an excess,
    /// it does not repair it, so a resume must not be what exposes one).
    pub fn open(&self) -> bool {
        self.stock_value().is_some()
            && self.limit_ok()
            && self.buyers
            && self.ledger
            && self.events
            && Self::int_or_absent(&self.deducted)
    }

    pub fn shown(&self) -> String {
        let s = |v: &Option<Vec<u8>>| v.as_deref().map_or_else(|| "-".into(), text);
        format!(
            "stock {} limit {} paused {} deducted {} returned {} topup {} frozen {} lost [{}] active {}",
            s(&self.stock),
            s(&self.limit),
            s(&self.paused),
            s(&self.deducted),
            s(&self.returned),
            s(&self.topup),
            s(&self.frozen),
            self.lost().join(","),
            self.active.len()
        )
    }
}

pub async fn probes(w: &World) -> Vec<Probe> {
    let mut v = Vec::with_capacity(PRODUCTS.len());
    for p in 0..PRODUCTS.len() {
        v.push(Probe::read(&w.store, &w.pkeys(p)).await);
    }
    v
}

/// Units Redis holds for deductions that are neither live nor pending (abandoned, or whose
/// order ended) and still names in its ledger: the app servers or the console give them back,
/// so they are for sale again later.
pub fn due(w: &World, p: usize, probe: &Probe) -> i64 {
    w.deds
        .iter()
        .filter(|d| d.p == p && (d.abandoned || matches!(d.order, Some(Order::Ended { .. }))))
        .filter(|d| probe.active.contains(&d.rid))
        .map(|d| d.units)
        .sum()
}

/// What Redis would sell once the returns due came back (and the pause, if any, went).
pub fn sellable(w: &World, p: usize, probe: &Probe) -> i64 {
    if probe.open() {
        (probe.stock_value().unwrap_or(0) + due(w, p, probe)).max(0)
    } else {
        0
    }
}

/// How many units Redis would sell beyond what the truth allows, per product (an oversold
/// product allows nothing: selling none is all it can do). Units held for returns on their way
/// count as for sale: otherwise an expiry would hide an excess and its return reveal it.
/// What Redis would sell beyond what the truth allows, per product. Measured against the
/// truth itself, below zero when it is oversold already: an expiry that takes an oversold
/// product back toward its stock then frees as many units as the truth gains, no growth.
pub fn excess(w: &World, probes: &[Probe]) -> Vec<i64> {
    (0..PRODUCTS.len())
        .map(|p| (sellable(w, p, &probes[p]) - w.allowed(p)).max(0))
        .collect()
}

/// What a repair leaves for sale beyond the truth: an oversold truth (allowed below zero)
/// leaves nothing to sell, and a repair cannot do better.
fn left_for_sale(w: &World, p: usize, probe: &Probe) -> i64 {
    (sellable(w, p, probe) - w.allowed(p).max(0)).max(0)
}

/// The model's figures of one product, for a failure message.
pub fn figures(w: &World, p: usize, probe: &Probe) -> String {
    let m = &w.products[p];
    format!(
        "{}: for sale {} (stock + returns due {}, paused or not) allowed {} (initial {} - live {} - pending traced {}; pending untraced {}) paused(db) {} | redis: {}",
        pname(p),
        sellable(w, p, probe),
        due(w, p, probe),
        w.allowed(p),
        m.initial,
        w.live(p),
        w.pending_traced(p),
        w.pending(p) - w.pending_traced(p),
        m.paused,
        probe.shown()
    )
}

pub async fn read_status(w: &World) -> Result<StatusReport, Violation> {
    status(
        &w.store,
        &w.db,
        &w.keys,
        &w.id,
        &StatusOptions {
            grace: w.grace,
            compensation_alert: Duration::from_secs(3600),
            outbox_alert: Duration::from_secs(3600),
            gauge: Default::default(),
        },
    )
    .await
    .map_err(|e| Violation {
        inv: "E-console-error",
        tag: "status failed".into(),
        detail: format!("status failed: {e}"),
    })
}

fn fail(inv: &'static str, tag: &str, detail: String) -> Result<(), Violation> {
    Err(Violation {
        inv,
        tag: tag.to_string(),
        detail,
    })
}

/// A step's kind and its hook's: `preheat@topup`, `fix`, `resume`.
fn kind(step: &Step) -> String {
    let word = |s: String| s.split(['.', '@']).next().unwrap_or_default().to_string();
    match step.hook() {
        Some(h) => format!("{}@{}", word(step.to_string()), word(h.action.to_string())),
        None => word(step.to_string()),
    }
}

/// Checks every invariant after `step`; `before`: each product's excess before it.
pub async fn check(w: &mut World, step: &Step, before: &[i64]) -> Result<(), Violation> {
    if let Some(v) = w.fx.violations.first() {
        return Err(v.clone());
    }
    let fx = w.fx.clone();
    for p in 0..PRODUCTS.len() {
        if fx.paused_written[p] && w.products[p].paused {
            w.products[p].pause_enforced = true;
        }
        // An order of a deduction Redis forgot that landed during the repair (a second
        // console's step) may have come after the repair's read: the repair vouches for
        // nothing it could not see.
        if step.is_repair() && fx.clean[p] && fx.untraced_landed[p] == 0 {
            w.credit_repair(p);
        }
    }
    let probes = probes(w).await;
    let after = excess(w, &probes);
    for p in 0..PRODUCTS.len() {
        let probe = &probes[p];
        // 1. No console step increases oversell; a clean repair leaves none.
        if !step.is_fault() {
            let landed = fx.untraced_landed[p];
            let left = left_for_sale(w, p, probe);
            if step.is_repair() && fx.clean[p] && landed == 0 && left != 0 {
                return fail(
                    "1-oversell",
                    &format!("left by {}", kind(step)),
                    format!(
                        "the repair reported {} fixed, but Redis would sell {} unit(s) more than the truth allows: {}",
                        pname(p),
                        left,
                        figures(w, p, probe)
                    ),
                );
            }
            if after[p] > before[p] + landed {
                return fail(
                    "1-oversell",
                    &format!("grew at {}", kind(step)),
                    format!(
                        "the oversell of {} grew from {} to {} (untraced orders landed: {landed} unit(s)): {}",
                        pname(p),
                        before[p],
                        after[p],
                        figures(w, p, probe)
                    ),
                );
            }
        }
        // 3. A pause the console wrote holds until a fault undoes it.
        let m = &w.products[p];
        if !step.is_fault() && m.paused && m.pause_enforced && probe.can_sell() {
            return fail(
                "3-pause",
                "sells",
                format!(
                    "{} is paused in the database and its pause was written, but Redis sells it: {}",
                    pname(p),
                    figures(w, p, probe)
                ),
            );
        }
    }
    let st = read_status(w).await?;
    // The console's view after every step, for the failure message.
    let shown: Vec<String> = st
        .products
        .iter()
        .map(|r| {
            format!(
                "{} {} drift {:?} sold {} in_flight {} orphaned {} unledgered {}",
                r.product,
                r.state.as_str(),
                r.drift,
                r.db_sold,
                r.in_flight,
                r.orphaned,
                r.unledgered
            )
        })
        .collect();
    w.say(format!("   status: {}", shown.join("; ")));
    for (p, probe) in probes.iter().enumerate() {
        let Some(row) = st.products.iter().find(|r| r.product == pname(p)) else {
            return fail(
                "E-console-error",
                "status",
                format!("status lacks {}", pname(p)),
            );
        };
        let shown = format!(
            "status: state {} drift {:?} db_sold {} in_flight {} orphaned {} unledgered {} lost {:?}",
            row.state.as_str(),
            row.drift,
            row.db_sold,
            row.in_flight,
            row.orphaned,
            row.unledgered,
            row.lost
        );
        let m = &w.products[p];
        let selling_looks_fine = matches!(row.state, State::Ok | State::Paused);
        // 3. A lost pause never reads as fine.
        if m.paused && probe.can_sell() && selling_looks_fine {
            return fail(
                "3-pause",
                "reads fine",
                format!(
                    "{} is paused in the database and Redis sells it, yet the {shown}: {}",
                    pname(p),
                    figures(w, p, probe)
                ),
            );
        }
        // 4. An oversold product never reads otherwise.
        let visible: i64 = w
            .deds
            .iter()
            .filter(|d| d.p == p && d.pending() && !d.stale && probe.active.contains(&d.rid))
            .map(|d| d.units)
            .sum();
        let live = w.live(p);
        let oversold = live > m.initial || (probe.whole() && live + visible > m.initial);
        if oversold && row.state != State::Oversold {
            return fail(
                "4-oversold",
                "",
                format!(
                    "{}: live {live} + pending in the ledger {visible} > initial {}, but the {shown}: {}",
                    pname(p),
                    m.initial,
                    figures(w, p, probe)
                ),
            );
        }
        // 6. A lost piece never reads as fine.
        if !probe.lost().is_empty() && selling_looks_fine {
            return fail(
                "6-lost-reads-ok",
                "",
                format!(
                    "{} lost {:?}, yet the {shown}: {}",
                    pname(p),
                    probe.lost(),
                    figures(w, p, probe)
                ),
            );
        }
    }
    // 7. The live view shows what this fresh status shows.
    super::live::agrees(w, st).await
}

/// After the faults stopped and every order landed or was abandoned: is every product back
/// to the truth? The kind of the first problem and every problem found, if not.
pub async fn converged(w: &World) -> Result<(), (String, String)> {
    let probes = probes(w).await;
    let st = read_status(w).await.map_err(|v| (v.tag, v.detail))?;
    let mut tag = None;
    let mut problems = Vec::new();
    for (p, probe) in probes.iter().enumerate() {
        let m = &w.products[p];
        let allowed = w.allowed(p);
        let live = w.live(p);
        let mut bad: Vec<(&str, String)> = Vec::new();
        if probe.stock_value() != Some(allowed) {
            bad.push(("stock", format!("the stock is not the truth's {allowed}")));
        }
        if m.paused && !probe.is_paused() {
            bad.push(("pause lost", "paused in the database, not in Redis".into()));
        }
        if !m.paused && (!probe.whole() || probe.is_paused()) {
            bad.push((
                "not selling",
                "not selling though the database says it sells".into(),
            ));
        }
        match st.products.iter().find(|r| r.product == pname(p)) {
            None => bad.push(("status", "not in the status".into())),
            Some(row) => {
                let want = if live > m.initial {
                    State::Oversold
                } else if m.paused {
                    State::Paused
                } else {
                    State::Ok
                };
                let drift_ok = want == State::Oversold || row.drift == Some(0);
                if row.state != want
                    || !drift_ok
                    || row.orphaned != 0
                    || row.unledgered != 0
                    || row.in_flight != 0
                {
                    bad.push(("status", format!(
                        "status: state {} (want {}) drift {:?} in_flight {} orphaned {} unledgered {} lost {:?}",
                        row.state.as_str(),
                        want.as_str(),
                        row.drift,
                        row.in_flight,
                        row.orphaned,
                        row.unledgered,
                        row.lost
                    )));
                }
            }
        }
        for (user, units) in w.live_by_user(p) {
            let held = probe
                .holdings
                .get(&user)
                .and_then(|h| parse_int(h.as_bytes()))
                .unwrap_or(0);
            if held < units {
                bad.push(("holding", format!(
                    "{user} holds {units} unit(s) of live orders but Redis counts {held}: the limit would let them buy more"
                )));
            }
        }
        let unrecorded: Vec<&str> = w
            .deds
            .iter()
            .filter(|d| d.p == p && d.live() && !probe.active.contains(&d.rid))
            .map(|d| d.rid.as_str())
            .collect();
        if !unrecorded.is_empty() {
            bad.push((
                "unrecorded",
                format!("live orders without a ledger entry: {unrecorded:?}"),
            ));
        }
        if let Some((t, _)) = bad.first() {
            tag.get_or_insert_with(|| t.to_string());
            let shown: Vec<&str> = bad.iter().map(|(_, b)| b.as_str()).collect();
            problems.push(format!(
                "{}: {} | {}",
                pname(p),
                shown.join("; "),
                figures(w, p, probe)
            ));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err((tag.unwrap_or_default(), problems.join("\n  ")))
    }
}
