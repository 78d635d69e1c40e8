//! Rewriting products' Redis books from database truth, shared by `fix` and `preheat`. One rule
//! for every repair: a unit goes back on sale only from complete evidence.
//!
//! Each product gets a [`Plan`] from its view alone, the same computation for a preview and
//! for the write:
//! - **heal** ([`heal`]): every piece is there; orphaned deductions go back through
//!   `restore.lua` (each checked in the database at that moment), live orders whose deduction
//!   Redis lost are recorded with `record.lua`, and the stock's offset from its own counters is
//!   taken away by `set_stock.lua`, which computes it in the same atomic step as the write;
//! - **rebuild** ([`rebuild`]): a piece is missing or unreadable, or the counters disagree with
//!   the ledger. The product is held (its stock key goes, so nothing sells), the ledger and the
//!   holdings are rebuilt from the live orders, the counters from the ledger, and the stock is
//!   written last; units the counters hold that nothing can name are held back until their
//!   orders had the grace window to land;
//! - **top-up** ([`topups`]): a top-up left between its two writes by a console that died is
//!   finished or undone, as the database says, after fencing its late write.
//!
//! Every write carries the guard of what the console read (the meta `rev`, the stock value or
//! the rebuild's token): another console's write in between makes it a conflict, never a lost
//! or doubled unit. After a rebuild or a write that met changed evidence, the product is read
//! again (from scratch) and repaired once more, a few rounds at most.

pub mod heal;
pub mod rebuild;
pub mod topups;

use super::snapshot::{self, ProductView, Scope};
use crate::db::Db;
use crate::domain::ActivityId;
use crate::domain::Product;
use crate::domain::meta::{Meta, Piece, TopupMarker};
use crate::domain::stock::StockValue;
use crate::error::{Error, ErrorKind, Result};
use crate::redis::{KeySpace, RedisStore};
use redis::RedisError;
use std::time::Duration;

/// Rewrite attempts per product when the offset moved (a `--yes` fix re-reads and retries).
pub const MAX_ATTEMPTS: u32 = 5;

/// Rounds of read-and-repair per product (a rebuild, then the heal of what it rebuilt).
const MAX_ROUNDS: usize = 3;

/// What a repair of one product does, decided from its view alone.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Plan {
    /// Nothing to write.
    Nothing,
    /// Every piece is there: return orphans, record lost sales, take the offset away, write
    /// the meta fields the database says.
    Heal,
    /// Pieces are missing, unreadable or disagree (named): rebuild them under a hold.
    Rebuild(String),
    /// A top-up left between its two writes: finish or undo it first.
    Topup(TopupMarker),
    /// Another console holds it now (why): a conflict, nothing written.
    Busy(String),
    /// The console cannot repair it (why): it says so and writes nothing.
    Refuse(String),
}

/// How long a top-up may sit between its two writes before a fix treats its console as gone.
/// A top-up takes milliseconds; its database write may wait on a lock for up to the busy
/// timeout. A fix that takes over fences the database row first, so a top-up still waiting is
/// refused rather than landing late: the lease only spares it that.
pub const TOPUP_LEASE_MS: i64 = 10_000;

/// Decides what the repair of `v` does.
pub fn plan(v: &ProductView) -> Plan {
    let c = &v.cut;
    if let Some(shown) = v.books.bad_entry_shown(&v.keys.ledger, &v.keys.buyers) {
        return Plan::Refuse(format!(
            "{shown}: fix cannot rebuild such an entry from the database, and every script refuses that request or buyer until it is set right by hand (see the README, \"Unreadable entries\")"
        ));
    }
    if let Some(foreign) = &c.keys.foreign {
        return Plan::Refuse(format!(
            "{foreign}; what it holds is not the console's to throw away: rename or delete it by hand, then fix again"
        ));
    }
    if let Some(f) = &c.meta.frozen {
        let age = c.now_ms.saturating_sub(f.at_ms);
        if age < crate::redis::rewrite::REBUILD_LEASE_MS {
            return Plan::Busy(format!(
                "another console is rebuilding it (for {} s): try again when it is done",
                age / 1000
            ));
        }
        return Plan::Rebuild(format!(
            "a rebuild began {} s ago and never ended (its console died): taken over",
            age / 1000
        ));
    }
    if let Some(t) = &c.meta.topup {
        return Plan::Topup(t.clone());
    }
    if let Some(why) = rebuild_reason(v) {
        return Plan::Rebuild(why);
    }
    if needs_heal(v) {
        Plan::Heal
    } else {
        Plan::Nothing
    }
}

/// Why a product must be rebuilt, if it must.
fn rebuild_reason(v: &ProductView) -> Option<String> {
    let c = &v.cut;
    let lost: Vec<Piece> = c.lost();
    if !lost.is_empty() {
        return Some(format!("lost: {}", crate::domain::stock::lost_shown(&lost)));
    }
    if !matches!(c.stock, StockValue::Value(_)) {
        return Some(format!(
            "the stock is {}",
            c.stock.shown().unwrap_or_else(|| "missing".into())
        ));
    }
    if let Some(why) = &c.meta.corrupt {
        return Some(why.clone());
    }
    if c.active().is_none() {
        return Some("the meta hash's counters are unreadable".into());
    }
    match v.books.discrepancy {
        0 => None,
        d => Some(format!(
            "the counters hold {d:+} unit(s) beside what the ledger names"
        )),
    }
}

/// True when a whole product still needs a write: orphans, lost sales, an offset, units to
/// release, or meta fields that are not the database's.
fn needs_heal(v: &ProductView) -> bool {
    v.status.orphaned > 0
        || !v.books.unledgered.is_empty()
        || v.offset().is_some_and(|x| x != 0)
        || meta_differs(&v.product, &v.cut.meta)
}

/// True when the meta hash does not say what the database says (initial stock, limit, the
/// sale window, the operator's pause).
pub fn meta_differs(p: &Product, m: &Meta) -> bool {
    m.limit != Some(p.per_user_limit)
        || m.initial != Some(p.initial_stock)
        || p.window.is_some_and(|w| m.window_differs(&w))
        || !pause_fields(p, m).is_empty()
}

/// The stock a repair leaves: the truth, `initial - db_sold - in_flight` (below zero when
/// oversold: nothing more sells until returns pay it back). A preview shows this, and the
/// repair writes it (the counters it corrects by move with the buyers, so a live sale shows a
/// different figure by the time it lands, by exactly what they bought).
pub fn planned_after(v: &ProductView) -> i64 {
    // An order holding more (or fewer) units than its deduction took is not the stock's to
    // absorb: the repair leaves its difference where it is, and says so.
    v.truth.owed().saturating_add(v.books.mismatch_excess())
}

pub use crate::domain::meta::pause_fields;

/// What a repair writes besides what the database says.
#[derive(Clone, Debug, Default)]
pub struct Settings {
    /// Meta fields written with the stock (the preheat epoch and bucket, `fixed_at`).
    pub meta: Vec<(&'static str, String)>,
    pub expire_at: Option<i64>,
    /// Return orphans, record lost sales and release held-back units (else only the stock,
    /// the pieces and the meta hash).
    pub books: bool,
}

/// What a rebuild did to one product.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rebuilt {
    /// What the stock held when the rebuild began (None: absent).
    pub before: Option<String>,
    pub why: String,
    /// Ledger entries written for live orders the ledger lacked.
    pub entries: i64,
    /// Buyers whose holdings were written (the buyers hash was lost).
    pub holdings: i64,
    /// The active units the counters hold afterwards.
    pub active: i64,
    /// Of those, the units nothing names, held back until their orders had time to land.
    pub unexplained: i64,
    /// The buyers hash was lost with deductions whose buyers nobody can name: the whole stock
    /// is held back with them (counted in `unexplained`), so no buyer passes the limit.
    pub limits_held: bool,
}

/// What the repair of one product did, over every round.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Repaired {
    /// Units returned through the restore script, and their requests.
    pub returned_units: i64,
    pub returned: Vec<String>,
    /// Units of live orders recorded as deductions, and their requests.
    pub recorded_units: i64,
    pub recorded: Vec<String>,
    /// Units the counters held without a ledger entry, past their hold, put back on sale.
    pub released: i64,
    /// Units a heal held back instead of adding them to the stock: live orders Redis held no
    /// deduction for (a restart from an older snapshot, a failover that lost writes) may have
    /// others still on their way.
    pub held: i64,
    /// Units of the recorded orders whose deductions the stream does not show (forgotten by
    /// Redis, not held back by a rebuild): the mark of a rollback.
    pub forgotten: i64,
    /// How the stock's rewrites changed it in all (0: none).
    pub change: i64,
    /// The stock right after this repair's last write; None when nothing was written.
    pub stock_after: Option<i64>,
    /// True when the stock key or meta hash was written.
    pub rewritten: bool,
    /// True when the heal's rewrite applied, and how it moved the stock.
    pub rebased: bool,
    pub rebase_change: i64,
    pub rebuilt: Option<Rebuilt>,
    /// A top-up left half done, and how it was resolved.
    pub topup: Option<String>,
    pub attempts: u32,
    /// Why the repair did not finish because another console or a write outside the scripts
    /// moved the product (a conflict: nothing written for it by that step).
    pub conflict: Option<String>,
    /// What Redis refused for this product, or why it cannot be repaired (it stays so).
    pub error: Option<String>,
    /// The evidence changed under the repair: read the product again and go on.
    pub again: bool,
    /// What the last round found calls for a rebuild (a ledger entry gone under a return).
    pub rebuild_next: bool,
}

impl Repaired {
    /// True when anything was written.
    pub fn applied(&self) -> bool {
        self.rewritten
            || self.returned_units > 0
            || self.recorded_units > 0
            || self.rebuilt.is_some()
            || self.topup.is_some()
    }
}

/// " on NODE" for a product's report line, or nothing when its node is not known.
pub fn on_node(node: Option<&str>) -> String {
    node.map(|n| format!(" on {n}")).unwrap_or_default()
}

/// A Redis error that stops the whole repair (unreachable, timed out, no permission); other
/// errors belong to one product and are reported on it.
pub fn fatal(redis: &RedisStore, e: &RedisError) -> Option<Error> {
    let err = redis.error(e);
    matches!(err.kind, ErrorKind::Unavailable | ErrorKind::Refused).then_some(err)
}

/// Where a repair runs.
pub struct Target<'a> {
    pub redis: &'a RedisStore,
    pub db: &'a Db,
    pub keys: &'a KeySpace,
    pub activity: &'a ActivityId,
    pub grace: Duration,
    /// A write that met a moved offset reads again and retries (else it is a conflict).
    pub retry: bool,
}

/// One product through the repair: as first read, as last read, and what was done.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub first: ProductView,
    pub last: ProductView,
    /// The plan of the first round.
    pub plan: Plan,
    pub done: Repaired,
}

/// A repair stopped by an error, with what had been done by then (callers audit it first).
#[derive(Debug)]
pub struct Partial {
    pub outcomes: Vec<Outcome>,
    pub error: Error,
}

/// Repairs every product of `views` (read from scratch by the caller), in rounds: plan, then
/// top-ups, rebuilds and heals; products whose evidence changed are read again. `settings`
/// gives each product what to write besides the database's truth.
pub async fn run(
    t: &Target<'_>,
    views: Vec<ProductView>,
    settings: &(dyn Fn(&ProductView) -> Settings + Sync),
) -> std::result::Result<Vec<Outcome>, Partial> {
    let mut outcomes: Vec<Outcome> = views
        .into_iter()
        .map(|v| Outcome {
            plan: plan(&v),
            first: v.clone(),
            last: v,
            done: Repaired::default(),
        })
        .collect();
    match rounds(t, &mut outcomes, settings).await {
        Ok(()) => Ok(outcomes),
        Err(error) => Err(Partial { outcomes, error }),
    }
}

async fn rounds(
    t: &Target<'_>,
    outcomes: &mut [Outcome],
    settings: &(dyn Fn(&ProductView) -> Settings + Sync),
) -> Result<()> {
    let token = crate::domain::token::unique();
    let mut todo: Vec<usize> = (0..outcomes.len()).collect();
    for round in 0..MAX_ROUNDS {
        let mut rebuilds: Vec<(usize, String)> = Vec::new();
        let mut heals: Vec<usize> = Vec::new();
        for &i in &todo {
            let o = &mut outcomes[i];
            o.done.again = false;
            let p = if o.done.rebuild_next {
                Plan::Rebuild("a ledger entry vanished under a return".into())
            } else {
                plan(&o.last)
            };
            o.done.rebuild_next = false;
            match p {
                Plan::Nothing if writes_settings(&o.last, &settings(&o.last)) => heals.push(i),
                Plan::Nothing => {}
                Plan::Heal => heals.push(i),
                Plan::Rebuild(_) if o.done.rebuilt.is_some() && round > 0 => {
                    // Rebuilt this run and still not whole: say so rather than loop.
                    o.done.error.get_or_insert_with(|| {
                        "rebuilt, but a piece is still missing or disagrees (see the status); run fix again".into()
                    });
                }
                Plan::Rebuild(why) => rebuilds.push((i, why)),
                Plan::Topup(m) => {
                    topups::resolve(t, &mut o.done, &o.last, &m).await?;
                }
                Plan::Busy(why) => o.done.conflict = Some(why),
                Plan::Refuse(why) => o.done.error = Some(why),
            }
        }
        rebuild::run(t, outcomes, &rebuilds, &token, settings).await?;
        heal::run(t, outcomes, &heals, settings).await?;
        let next: Vec<usize> = todo
            .iter()
            .copied()
            .filter(|&i| outcomes[i].done.again && outcomes[i].done.error.is_none())
            .collect();
        if next.is_empty() {
            return Ok(());
        }
        reread(t, outcomes, &next).await?;
        todo = next;
    }
    for &i in &todo {
        let d = &mut outcomes[i].done;
        if d.again && d.error.is_none() && d.conflict.is_none() {
            d.conflict =
                Some("it kept changing under the repair (other writers): run fix again".into());
        }
    }
    Ok(())
}

/// True when a product that needs no repair still gets a write of what the caller asks for
/// (an expiry to bring up to date).
fn writes_settings(v: &ProductView, s: &Settings) -> bool {
    s.expire_at.is_some() && v.cut.meta.expire_at != s.expire_at
}

/// Reads the products of `which` again, from scratch.
async fn reread(t: &Target<'_>, outcomes: &mut [Outcome], which: &[usize]) -> Result<()> {
    let scope = Scope {
        only: Some(
            which
                .iter()
                .map(|&i| outcomes[i].last.product.product_id.to_string())
                .collect(),
        ),
        full: true,
        ..Scope::default()
    };
    let snap = snapshot::take(t.redis, t.db, t.keys, t.activity, t.grace, &scope).await?;
    let at: std::collections::HashMap<String, usize> = which
        .iter()
        .map(|&i| (outcomes[i].last.product.product_id.to_string(), i))
        .collect();
    for v in snap.products {
        if let Some(&i) = at.get(v.product.product_id.as_str()) {
            outcomes[i].last = v;
        }
    }
    Ok(())
}
