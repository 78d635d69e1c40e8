//! The world a chaos case acts on (real Redis and SQLite) and the model's own bookkeeping of
//! every deduction and order: what the truth is, recomputed from the history, never from the
//! console. The steps themselves are in `buyers`, `console` and `faults`.

use super::console::Handles;
use super::steps::PRODUCTS;
use crate::harness::fixtures::product_keys;
use seckill_console::db::Db;
use seckill_console::domain::ActivityId;
use seckill_console::redis::{KeySpace, ProductKeys, RedisStore};
use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

pub const ACTOR: &str = "chaos";

pub fn pname(p: usize) -> &'static str {
    PRODUCTS[p % PRODUCTS.len()].0
}

/// Where Redis still holds a deduction: its ledger entry (`l`), the meta counters (`c`), the
/// stock it took (`s`, which a rebuild reads when the counters are gone), the buyer's holding
/// (`b`). A deduction none of `l`, `c`, `s` holds is untraced: nobody can know it until its
/// order lands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Evidence {
    pub l: bool,
    pub c: bool,
    pub s: bool,
    pub b: bool,
}

impl Evidence {
    pub const ALL: Evidence = Evidence {
        l: true,
        c: true,
        s: true,
        b: true,
    };
    pub const NONE: Evidence = Evidence {
        l: false,
        c: false,
        s: false,
        b: false,
    };

    pub fn traced(self) -> bool {
        self.l || self.c || self.s
    }

    /// The buyer's holding counts it (or a rebuild will, from the ledger).
    pub fn held(self) -> bool {
        self.b || self.l
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    Unpaid,
    Paid,
    /// Expired or cancelled; `given_back`: the app server sent its return.
    Ended {
        given_back: bool,
    },
}

/// A deduction Redis answered with a sale.
#[derive(Clone, Debug)]
pub struct Deduction {
    pub rid: String,
    pub p: usize,
    pub user: usize,
    pub units: i64,
    pub at: Instant,
    /// Its order never comes (an orphan).
    pub abandoned: bool,
    /// It aged so close to the grace window that the console may have taken it for an orphan:
    /// the model no longer counts on Redis holding it.
    pub stale: bool,
    pub order: Option<Order>,
    pub ev: Evidence,
}

impl Deduction {
    /// Its order is still coming.
    pub fn pending(&self) -> bool {
        !self.abandoned && self.order.is_none()
    }

    pub fn live(&self) -> bool {
        matches!(self.order, Some(Order::Unpaid | Order::Paid))
    }

    pub fn traced(&self) -> bool {
        !self.stale && self.ev.traced()
    }
}

/// A request Redis refused (for retries).
#[derive(Clone, Debug)]
pub struct Request {
    pub rid: String,
    pub p: usize,
    pub user: usize,
    pub units: i64,
}

/// The database's word on a product, and what the model promises about it.
#[derive(Clone, Debug, Default)]
pub struct ProductModel {
    pub initial: i64,
    pub limit: i64,
    /// The operator's intent (the database's `paused`).
    pub paused: bool,
    /// A pause was written to Redis (or a repair wrote it back) and no fault has undone it
    /// since: nothing may sell.
    pub pause_enforced: bool,
    /// A fault touched the buyers or the ledger (or rolled the product back, or flushed it)
    /// since the last clean repair: per-user limits are not promised.
    pub limit_exempt: bool,
}

/// A broken promise.
#[derive(Clone, Debug)]
pub struct Violation {
    /// The invariant: `1-oversell`, `2-limit`, `3-pause`, `4-oversold`, `5-convergence`,
    /// `6-lost-reads-ok`, `E-console-error`.
    pub inv: &'static str,
    /// What kind of failure of that invariant (the shrinker takes one case of each).
    pub tag: String,
    pub detail: String,
}

/// What the current step did that the checks need to know.
#[derive(Clone, Debug, Default)]
pub struct Effects {
    /// Units of orders of untraced deductions that landed (the delayed effect of a fault).
    pub untraced_landed: [i64; 2],
    pub violations: Vec<Violation>,
    /// A pause was written without an error for the product.
    pub paused_written: [bool; 2],
    /// The outer repair reported the product without conflict or error (or had nothing to
    /// do for it).
    pub clean: [bool; 2],
}

/// Saved keys of one product, and the evidence the model had then.
pub struct Saved {
    pub p: usize,
    pub dumps: Vec<(String, Option<Vec<u8>>)>,
    pub ev: HashMap<String, Evidence>,
    pub rids: HashSet<String>,
}

pub struct World {
    pub store: RedisStore,
    pub db: Db,
    pub activity: String,
    pub id: ActivityId,
    pub keys: KeySpace,
    pub grace: Duration,
    pub deds: Vec<Deduction>,
    pub failed: Vec<Request>,
    pub next: u64,
    /// How far the database's clock lags Redis's (ms).
    pub behind_ms: i64,
    pub saved: Option<Saved>,
    pub products: [ProductModel; 2],
    pub log: Vec<String>,
    pub fx: Effects,
    /// The live view carried from step to step (None while a step has it out).
    pub live: Option<super::live::Live>,
    /// Every product's keys before each of the last steps (what a lagging replica holds).
    pub history: super::live::History,
}

/// Runs one Redis command, routed by its first key.
pub async fn cmd(store: &RedisStore, args: &[&[u8]]) -> redis::RedisResult<redis::Value> {
    let mut c = redis::cmd(std::str::from_utf8(args[0]).unwrap_or("PING"));
    for a in &args[1..] {
        c.arg(*a);
    }
    let route = std::str::from_utf8(args.get(1).copied().unwrap_or(b"")).unwrap_or("");
    store.query(route, &c).await
}

pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

impl World {
    pub fn handles(&self) -> Handles {
        Handles {
            store: self.store.clone(),
            db: self.db.clone(),
            keys: self.keys.clone(),
            id: self.id.clone(),
            grace: self.grace,
        }
    }

    pub fn pkeys(&self, p: usize) -> ProductKeys {
        product_keys(&self.activity, pname(p))
    }

    pub fn say(&mut self, line: impl Into<String>) {
        self.log.push(line.into());
    }

    pub fn violation(&mut self, inv: &'static str, detail: String) {
        self.log.push(format!("   !! {inv}: {detail}"));
        let tag = detail.split(':').next().unwrap_or_default().to_string();
        self.fx.violations.push(Violation { inv, tag, detail });
    }

    pub fn grace_ms(&self) -> u128 {
        self.grace.as_millis()
    }

    // ---- the model's figures ----

    pub fn live(&self, p: usize) -> i64 {
        self.deds
            .iter()
            .filter(|d| d.p == p && d.live())
            .map(|d| d.units)
            .sum()
    }

    pub fn pending(&self, p: usize) -> i64 {
        self.deds
            .iter()
            .filter(|d| d.p == p && d.pending())
            .map(|d| d.units)
            .sum()
    }

    pub fn pending_traced(&self, p: usize) -> i64 {
        self.deds
            .iter()
            .filter(|d| d.p == p && d.pending() && d.traced())
            .map(|d| d.units)
            .sum()
    }

    /// What may be for sale: the initial stock less live orders and the deductions whose
    /// orders are still coming (those Redis can still know of).
    pub fn allowed(&self, p: usize) -> i64 {
        self.products[p].initial - self.live(p) - self.pending_traced(p)
    }

    /// Units of live orders per user of a product.
    pub fn live_by_user(&self, p: usize) -> HashMap<String, i64> {
        let mut m = HashMap::new();
        for d in self.deds.iter().filter(|d| d.p == p && d.live()) {
            *m.entry(format!("u{}", d.user)).or_insert(0) += d.units;
        }
        m
    }

    /// Refreshes the database's word on each product (a top-up or a pause changed it).
    pub async fn refresh_products(&mut self) {
        let rows = seckill_console::db::activity::products(&self.db, &self.id)
            .await
            .expect("read the products");
        for row in rows {
            if let Some(p) = PRODUCTS
                .iter()
                .position(|(id, _, _)| *id == row.product_id.as_str())
            {
                let m = &mut self.products[p];
                m.initial = row.initial_stock;
                m.limit = row.per_user_limit;
                m.paused = row.pause.paused;
                if !m.paused {
                    m.pause_enforced = false;
                }
            }
        }
    }

    /// A per-user limit broken by the sale just made, unless a fault excuses it.
    pub fn limit_check(&mut self, p: usize, user: usize, units: i64, except: Option<&str>) {
        if self.products[p].limit_exempt {
            return;
        }
        let held: i64 = self
            .deds
            .iter()
            .filter(|d| d.p == p && d.user == user && Some(d.rid.as_str()) != except)
            .filter(|d| (d.pending() || d.live()) && !d.stale && d.ev.held())
            .map(|d| d.units)
            .sum();
        let limit = self.products[p].limit;
        if held + units > limit {
            self.violation(
                "2-limit",
                format!(
                    "{}: user u{user} bought {units} while holding {held} (live orders and pending deductions Redis knows) of a limit of {limit}",
                    pname(p)
                ),
            );
        }
    }

    /// A repair that left `p` clean: the evidence of every deduction it could know is whole
    /// again, live orders are recorded, the limits hold again, and the pause is back.
    pub fn credit_repair(&mut self, p: usize) {
        for d in self.deds.iter_mut().filter(|d| d.p == p && !d.stale) {
            if d.live() {
                d.ev = Evidence::ALL;
            } else if d.pending() && d.ev.traced() {
                d.ev.c = true;
                d.ev.s = true;
                d.ev.b = d.ev.b || d.ev.l;
            }
        }
        let m = &mut self.products[p];
        m.limit_exempt = false;
        if m.paused {
            m.pause_enforced = true;
        }
    }
}
