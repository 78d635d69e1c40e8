//! The books of one product at one cut (one instant of Redis: a position in its event stream),
//! reconciled with the database per request id. No I/O: the console feeds it what it read.
//!
//! At the cut the scripts' counters say how many units are held by active deductions
//! (`A = deducted - returned`); the database says how many units live orders hold whose
//! deduction came at or before the cut (`L`). Every active deduction either has a live order
//! (backed) or not (`U`: in flight, or orphaned once old); every live order either has an
//! active deduction or not (`V`: unledgered, a sale Redis forgot). Then `A - L = ΣU - ΣV`, so
//! the differences are found by looking only where they can be, and the console knows when
//! it has found them all: when the equation holds.
//!
//! The stock's drift then splits into three parts that each have their own repair:
//! `drift = X - orphaned + ΣV`, where `X = stock - initial + A` is the stock's offset from the
//! scripts' own counters (a write outside the scripts), orphaned deductions go back through
//! the restore script, and unledgered orders are recorded as deductions.

use super::SaleWindow;
use super::events::{Event, EventId, EventKind};
use super::rid_hash::{RidMap, RidSet};
use super::stock::LedgerEntry;
use std::collections::BTreeMap;

/// What the database says of one request id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OrderState {
    /// No order with this request id.
    Missing,
    /// An order in `pending_payment` or `paid`, of this many units.
    Live(i64),
    /// An order that was `cancelled` or `expired`, and when (ms since the epoch).
    Dead { quantity: i64, at_ms: i64 },
}

impl OrderState {
    pub fn is_live(&self) -> bool {
        matches!(self, OrderState::Live(_))
    }
}

/// An active deduction that no live order backs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unbacked {
    pub quantity: i64,
    /// Redis time of the deduction.
    pub at_ms: i64,
    /// When its order died (cancelled or expired, its return not yet made), if it has one.
    pub dead_at_ms: Option<i64>,
    /// `at_ms` is when a buyer was served (a `d` event), so its order's stamp can say how far
    /// the database's clock lies from Redis's; false for a recording's time (a `b` event or a
    /// ledger entry a console rebuilt, maybe long after the order), which says nothing of it.
    pub served: bool,
}

impl Unbacked {
    /// The moment its grace window counts from: its order's death (a return on its way), else
    /// the deduction (an order on its way).
    pub fn since_ms(&self) -> i64 {
        self.dead_at_ms.unwrap_or(self.at_ms)
    }
}

/// Unbacked units split by age.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Split {
    /// Younger than the grace window: an order, or a return, on its way.
    pub in_flight: i64,
    /// Older: stock that leaked.
    pub orphaned: i64,
    /// Request ids of the orphaned deductions, oldest first.
    pub orphans: Vec<String>,
    /// Of the orphaned units, those the counters hold without a ledger entry
    /// ([`Books::unexplained`]) whose orders had the grace window to land: a fix puts them back
    /// on sale.
    pub release: i64,
}

/// The reconciliation of one product at one cut.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Books {
    /// The cut: the last event at or before which everything here holds.
    pub position: EventId,
    /// `L`: units of live orders whose deduction came at or before the cut (or that have
    /// none): `db_sold` at the cut.
    pub live_units: i64,
    /// `U`: active deductions without a live order.
    pub unbacked: RidMap<Unbacked>,
    /// `V`: live orders (request id, units) without an active deduction.
    pub unledgered: RidMap<i64>,
    /// Backed deductions returned by the events just applied (request id, units), whose
    /// orders are yet to be looked up: empty between refreshes.
    pub returned: RidMap<i64>,
    /// Entries of the ledger or buyers hash found, where they were read, holding a value that
    /// is not a ledger record or an integer (which hash and field, to the value as shown):
    /// every script refuses that request or buyer, so the product is corrupt until they are
    /// gone. At most [`MAX_BAD_ENTRIES`]; checked again on every refresh.
    pub bad_entries: BTreeMap<(HashOf, String), String>,
    /// Where the bounded sweep of the ledger and buyers hashes stands.
    pub sweep: SweepAt,
    /// Units the counters hold that no ledger entry names, as the meta hash says (a rebuild
    /// after the ledger was lost left them: deductions whose orders may still land), and since
    /// when (Redis time, ms). Counted like unbacked deductions without a request id.
    pub unexplained: i64,
    pub unexplained_since: Option<i64>,
    /// What the counters hold beyond everything the ledger names (negative: less), as the last
    /// settle found it reading the whole ledger: a piece of evidence lost (ledger entries, or
    /// counters written by hand). Zero when they agree.
    pub discrepancy: i64,
    /// True when the last settle found the event stream short of what the counters hold (an
    /// entry deleted or trimmed) and had to read the ledger instead.
    pub stream_gap: bool,
    /// What the app servers did against the contract, per request ([`Breaches`]).
    pub breaches: Breaches,
    /// The sale window the deductions are checked against (the activity's); set by the
    /// reader on every read, never kept in a checkpoint.
    pub window: Option<SaleWindow>,
}

/// What the app servers did against the contract, per request: absent on nearly every product,
/// so the maps sit behind one pointer (four empty maps in every one of 100,000 products' books,
/// twice, took a `status` 338 MB where it took 264).
#[derive(Clone, Debug, Default)]
pub struct Breaches(Option<Box<BreachMaps>>);

/// The maps of [`Breaches`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BreachMaps {
    /// `M`: active deductions whose live order holds another quantity than they took (an app
    /// server wrote the order wrong). Counted apart, not as a gap in the stream: the live
    /// units hold what the orders say, the counters what the deductions took.
    pub mismatched: RidMap<Mismatch>,
    /// Unledgered orders (in [`Books::unledgered`]) whose request's deduction was returned: an
    /// order written after its units went back, or a deduction returned before its order was
    /// marked dead.
    pub after_return: RidSet,
    /// Unbacked deductions whose request's order belongs to another product (that product):
    /// a request id used on two products, or an order written for the wrong one.
    pub elsewhere: RidMap<String>,
    /// Active deductions served outside the sale window (request id, units), as far as their
    /// events show it.
    pub outside: RidMap<i64>,
}

impl BreachMaps {
    fn is_empty(&self) -> bool {
        self.mismatched.is_empty()
            && self.after_return.is_empty()
            && self.elsewhere.is_empty()
            && self.outside.is_empty()
    }
}

impl Breaches {
    /// The maps, when any was ever written.
    pub fn get(&self) -> Option<&BreachMaps> {
        self.0.as_deref()
    }

    /// The maps, made on the first write.
    pub fn maps(&mut self) -> &mut BreachMaps {
        self.0.get_or_insert_with(Box::default)
    }

    /// The maps, when they exist (for a removal, which never makes them).
    fn existing(&mut self) -> Option<&mut BreachMaps> {
        self.0.as_deref_mut()
    }

    pub fn mismatched(&self) -> impl Iterator<Item = (&String, &Mismatch)> {
        self.get().into_iter().flat_map(|m| m.mismatched.iter())
    }

    pub fn elsewhere(&self) -> impl Iterator<Item = (&String, &String)> {
        self.get().into_iter().flat_map(|m| m.elsewhere.iter())
    }

    pub fn outside(&self) -> impl Iterator<Item = (&String, &i64)> {
        self.get().into_iter().flat_map(|m| m.outside.iter())
    }

    pub fn after_return(&self, rid: &str) -> bool {
        self.get().is_some_and(|m| m.after_return.contains(rid))
    }

    pub fn after_return_all(&self) -> impl Iterator<Item = &String> {
        self.get().into_iter().flat_map(|m| m.after_return.iter())
    }

    /// Requests it names (what a checkpoint of it holds).
    pub fn len(&self) -> usize {
        self.get().map_or(0, |m| {
            m.mismatched.len() + m.after_return.len() + m.elsewhere.len() + m.outside.len()
        })
    }

    pub fn is_empty(&self) -> bool {
        self.get().is_none_or(BreachMaps::is_empty)
    }

    /// Only the mismatches (what a view's trimmed copy keeps: a fix's plan depends on them).
    pub fn mismatches_only(&self) -> Breaches {
        match self.get() {
            Some(m) if !m.mismatched.is_empty() => Breaches(Some(Box::new(BreachMaps {
                mismatched: m.mismatched.clone(),
                ..BreachMaps::default()
            }))),
            _ => Breaches(None),
        }
    }

    /// The request's order is not another product's after all.
    pub fn forget_elsewhere(&mut self, rid: &str) {
        if let Some(m) = self.existing() {
            m.elsewhere.remove(rid);
        }
    }

    fn remove_mismatch(&mut self, rid: &str) -> Option<Mismatch> {
        self.existing()?.mismatched.remove(rid)
    }
}

/// Breaches are equal when they name the same requests, whether or not their maps were made.
impl PartialEq for Breaches {
    fn eq(&self, other: &Self) -> bool {
        match (self.get(), other.get()) {
            (Some(a), Some(b)) => a == b,
            (Some(x), None) | (None, Some(x)) => x.is_empty(),
            (None, None) => true,
        }
    }
}

impl Eq for Breaches {}

/// An order whose quantity is not its deduction's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mismatch {
    /// Units the deduction took (the ledger's).
    pub deducted: i64,
    /// Units the live order holds.
    pub ordered: i64,
}

impl Mismatch {
    /// Units the order holds beyond its deduction (negative: fewer).
    pub fn excess(&self) -> i64 {
        self.ordered.saturating_sub(self.deducted)
    }
}

/// Unreadable entries a product's books name at most (one is enough to call it corrupt; a few
/// tell the operator where to look).
pub const MAX_BAD_ENTRIES: usize = 16;

/// A per-request or per-buyer hash of a product.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HashOf {
    #[default]
    Ledger,
    Buyers,
}

/// Where the bounded sweep of a product's ledger and buyers hashes stands: the HSCAN cursor
/// of the next page of each (0: from the start again).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SweepAt {
    pub ledger: u64,
    pub buyers: u64,
}

impl SweepAt {
    pub fn cursor(&self, hash: HashOf) -> u64 {
        match hash {
            HashOf::Ledger => self.ledger,
            HashOf::Buyers => self.buyers,
        }
    }

    pub fn set(&mut self, hash: HashOf, cursor: u64) {
        match hash {
            HashOf::Ledger => self.ledger = cursor,
            HashOf::Buyers => self.buyers = cursor,
        }
    }
}

impl Books {
    /// Notes an entry of the ledger (not a ledger record) or the buyers hash (not an
    /// integer).
    pub fn note_bad_entry(&mut self, hash: HashOf, field: &str, raw: &[u8]) {
        let key = (hash, field.to_string());
        if self.bad_entries.len() < MAX_BAD_ENTRIES || self.bad_entries.contains_key(&key) {
            self.bad_entries
                .insert(key, crate::domain::stock::shown(raw));
        }
    }

    /// The first unreadable entry, as an operator reads it, with how many more there are.
    pub fn bad_entry_shown(&self, ledger: &str, buyers: &str) -> Option<String> {
        let ((hash, field), value) = self.bad_entries.iter().next()?;
        let first = match hash {
            HashOf::Ledger => {
                format!(
                    "ledger entry of request {field} in {ledger} is not a ledger record ('{value}')"
                )
            }
            HashOf::Buyers => {
                format!("holding of user {field} in {buyers} is not an integer ('{value}')")
            }
        };
        Some(match self.bad_entries.len() - 1 {
            0 => first,
            more => format!("{first} (and {more} more)"),
        })
    }

    /// `ΣU - ΣV`: the units held by deductions no live order backs, less the units of live
    /// orders Redis holds no deduction for. With everything known, the counters' active units
    /// less the live orders' units (`A - L`) come to this, plus what the counters hold that the
    /// ledger cannot name ([`Books::unexplained`], [`Books::discrepancy`]).
    pub fn gap(&self) -> i64 {
        self.unbacked
            .values()
            .fold(0i64, |sum, u| sum.saturating_add(u.quantity))
            .saturating_sub(self.unledgered_units())
            .saturating_sub(self.mismatch_excess())
    }

    /// `ΣM`: units live orders hold beyond what their deductions took (negative: fewer).
    pub fn mismatch_excess(&self) -> i64 {
        self.breaches
            .mismatched()
            .fold(0i64, |sum, (_, m)| sum.saturating_add(m.excess()))
    }

    /// Notes an active deduction served at `at_ms` (Redis time) outside the sale window.
    fn note_served(&mut self, rid: &str, quantity: i64, at_ms: i64) {
        if self.window.is_some_and(|w| w.excludes(at_ms)) {
            self.breaches
                .maps()
                .outside
                .insert(rid.to_string(), quantity);
        }
    }

    /// Backs the deduction `rid` of `deducted` units with its live order of `ordered` units:
    /// a different quantity is a mismatch.
    fn backed(&mut self, rid: &str, deducted: i64, ordered: i64) {
        if deducted != ordered {
            self.breaches
                .maps()
                .mismatched
                .insert(rid.to_string(), Mismatch { deducted, ordered });
        }
    }

    /// The request leaves the unledgered orders (booked again, or dead).
    fn ledgered(&mut self, rid: &str) -> Option<i64> {
        if let Some(m) = self.breaches.existing() {
            m.after_return.remove(rid);
        }
        self.unledgered.remove(rid)
    }

    /// The request's deduction is no longer unbacked.
    fn unbacked_gone(&mut self, rid: &str) -> Option<Unbacked> {
        if let Some(m) = self.breaches.existing() {
            m.elsewhere.remove(rid);
        }
        self.unbacked.remove(rid)
    }

    /// `ΣV`: units of live orders that Redis holds no deduction for.
    pub fn unledgered_units(&self) -> i64 {
        self.unledgered
            .values()
            .fold(0i64, |sum, q| sum.saturating_add(*q))
    }

    /// True when the scripts' counters (`active` = deducted - returned at the cut) agree with
    /// everything the books know.
    pub fn balanced(&self, active: i64) -> bool {
        active.saturating_sub(self.live_units)
            == self
                .gap()
                .saturating_add(self.unexplained)
                .saturating_add(self.discrepancy)
    }

    /// Splits the unbacked units by the grace window, as of `now_ms` (Redis time); the
    /// unexplained units count from when the rebuild left them.
    pub fn split(&self, now_ms: i64, grace_ms: i64) -> Split {
        let mut out = Split::default();
        let mut orphans: Vec<(i64, &str)> = Vec::new();
        if self.unexplained > 0 {
            match self.unexplained_since {
                Some(since) if now_ms - since >= grace_ms => {
                    out.orphaned += self.unexplained;
                    out.release = self.unexplained;
                }
                _ => out.in_flight += self.unexplained,
            }
        }
        for (rid, u) in &self.unbacked {
            if now_ms - u.since_ms() < grace_ms {
                out.in_flight += u.quantity;
            } else {
                out.orphaned += u.quantity;
                orphans.push((u.at_ms, rid));
            }
        }
        orphans.sort_unstable();
        out.orphans = orphans.into_iter().map(|(_, r)| r.to_string()).collect();
        out
    }

    /// Moves the books over one event after `position` (the live view, between two cuts). A
    /// backed deduction that is returned waits in [`Books::returned`] until its order is looked
    /// up ([`Books::on_returned`]); one booked again before that was backed all along.
    pub fn apply(&mut self, e: &Event) {
        self.position = self.position.max(e.id);
        match e.kind {
            EventKind::Deducted | EventKind::Booked => {
                if e.kind == EventKind::Deducted {
                    self.note_served(&e.request_id, e.quantity, e.id.ms);
                }
                // A deduction (a booking, or a retry after the first was lost) of an unledgered
                // order: the order, already counted live, is now backed. A booking of an order
                // whose deduction just went back: backed again. Anything else is a deduction
                // whose order is yet to be seen.
                if let Some(ordered) = self.ledgered(&e.request_id) {
                    self.backed(&e.request_id, e.quantity, ordered);
                    return;
                }
                if self.returned.remove(&e.request_id).is_some() {
                    // Backed again before its order was looked up: a mismatch it had is now
                    // between this booking and the order.
                    if let Some(m) = self.breaches.remove_mismatch(&e.request_id) {
                        self.backed(&e.request_id, e.quantity, m.ordered);
                    }
                    return;
                }
                self.unbacked.insert(
                    e.request_id.clone(),
                    Unbacked {
                        quantity: e.quantity,
                        at_ms: e.id.ms,
                        dead_at_ms: None,
                        served: e.kind == EventKind::Deducted,
                    },
                );
            }
            EventKind::Returned => {
                if let Some(m) = self.breaches.existing() {
                    m.outside.remove(&e.request_id);
                }
                if self.unbacked_gone(&e.request_id).is_none() {
                    self.returned.insert(e.request_id.clone(), e.quantity);
                }
            }
            EventKind::Adjusted | EventKind::Rebuilt | EventKind::Other => {}
        }
    }

    /// What the database says of an unbacked deduction's request: a live order backs it now.
    pub fn on_order(&mut self, rid: &str, state: OrderState) {
        let Some(u) = self.unbacked.get_mut(rid) else {
            return;
        };
        match state {
            OrderState::Live(quantity) => {
                let deducted = u.quantity;
                self.unbacked_gone(rid);
                self.live_units += quantity;
                self.backed(rid, deducted, quantity);
            }
            // The first time the console saw it dead counts: the grace window of its return
            // runs on Redis's clock from then, not again from every lookup.
            OrderState::Dead { at_ms, .. } => {
                u.dead_at_ms.get_or_insert(at_ms);
            }
            OrderState::Missing => u.dead_at_ms = None,
        }
    }

    /// A backed deduction of `quantity` units was returned: its order left the live units,
    /// unless it still lives (then it is a sale Redis no longer holds).
    pub fn on_returned(&mut self, rid: &str, quantity: i64, state: OrderState) {
        self.returned.remove(rid);
        // The live units held the order's quantity, whatever the deduction took.
        let counted = self
            .breaches
            .remove_mismatch(rid)
            .map_or(quantity, |m| m.ordered);
        match state {
            OrderState::Live(q) => {
                // Returned while its order lives: the order was not marked dead first (or was
                // written after the return).
                self.unledgered.insert(rid.to_string(), q);
                self.breaches.maps().after_return.insert(rid.to_string());
            }
            OrderState::Dead { quantity: q, .. } => self.live_units -= q,
            OrderState::Missing => self.live_units -= counted,
        }
    }

    /// A live order seen among the database's recent changes, with its request's ledger entry
    /// now. An order of no deduction active at the cut, and of none made after it, is a sale
    /// Redis does not hold (its deduction was lost, or returned before the order landed).
    pub fn on_live_order(&mut self, rid: &str, quantity: i64, ledger: Option<&LedgerEntry>) {
        if self.unbacked.contains_key(rid) || self.unledgered.contains_key(rid) {
            return;
        }
        let counted = ledger.is_some_and(|e| e.active_at(self.position) || e.at > self.position);
        if !counted {
            self.unledgered.insert(rid.to_string(), quantity);
            self.live_units += quantity;
            if ledger.is_some_and(|e| e.returned) {
                self.breaches.maps().after_return.insert(rid.to_string());
            }
        }
    }

    /// An order died (from the database's recent changes); `ledger` is its request's ledger
    /// entry now. A backed deduction whose order died and that was not yet returned at the cut
    /// is unbacked: a return on its way, orphaned if it never comes.
    pub fn on_death(&mut self, rid: &str, quantity: i64, at_ms: i64, ledger: Option<&LedgerEntry>) {
        if let Some(u) = self.unbacked.get_mut(rid) {
            u.dead_at_ms.get_or_insert(at_ms);
            return;
        }
        if self.ledgered(rid).is_some() {
            self.live_units -= quantity;
            return;
        }
        if let Some(e) = ledger
            && e.active_at(self.position)
        {
            self.breaches.remove_mismatch(rid);
            self.live_units -= quantity;
            self.unbacked.insert(
                rid.to_string(),
                Unbacked {
                    quantity: e.quantity,
                    at_ms: e.at_ms(),
                    dead_at_ms: Some(at_ms),
                    served: false,
                },
            );
        }
    }
}

/// A stamp of the orders' clock (an order's `updated_at`) on Redis's clock, given the smallest
/// lead of the orders' stamps over their deductions (`lead`). Only a clock clearly behind is
/// corrected: the lead is the clocks' offset plus the quickest order's delay, so a lead may be
/// nothing but orders landing late, while a lag of seconds is the clock.
pub fn stamp_to_redis(stamp_ms: i64, lead: Option<i64>) -> i64 {
    /// A lag this small is the ordinary spread of clocks and delays.
    const NOISE_MS: i64 = 1_000;
    match lead {
        Some(l) if l < -NOISE_MS => stamp_ms.saturating_sub(l),
        _ => stamp_ms,
    }
}

/// Where a settle (the books built from scratch at a cut) goes next.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Next {
    /// The next page of live orders (any order: they are kept until the events match them).
    Orders,
    /// The next page of the event stream, newest first, ending before [`Settle::cursor`].
    Events,
    /// The next page of the ledger (HSCAN), for deductions older than the stream.
    Ledger,
    /// The ledger entries of the live orders no event matched ([`Settle::unmatched`]).
    Confirm,
    Done,
}

/// Building a product's books at a cut from scratch, in bounded pages: every live order (kept
/// in memory, request id and units), then every event up to the cut: an active deduction whose
/// request has a live order is backed (and the order leaves the set); any other is unbacked
/// (looked up: an order that ended, or none). If the counters still disagree, the ledger
/// itself (deductions older than the stream). The live orders left over are checked against
/// the ledger: without an active deduction at the cut, they are unledgered. What the console
/// reads once per product, after which it keeps the books.
#[derive(Clone, Debug)]
pub struct Settle {
    pub books: Books,
    /// `A - L` at the cut: what `ΣU - ΣV` must come to.
    pub target: i64,
    /// The stream is read before this id (exclusive); None: not started.
    pub cursor: Option<EventId>,
    pub orders_done: bool,
    pub events_done: bool,
    pub ledger_done: bool,
    pub confirmed: bool,
    /// Live orders (request id, units), sorted by request id once all are read, and which of
    /// them an active deduction matched. (A sorted list: a million live orders cost about 40
    /// MB here, half what a hash map would.)
    live: Vec<(Box<str>, i64, i64)>,
    matched: Vec<bool>,
    /// Requests whose return (at or before the cut) the backward scan has passed: their
    /// deduction, further back, was not active at the cut.
    returned: RidSet,
    /// Ledger entries taken from HSCAN pages (which may repeat one).
    counted: RidSet,
    /// True once the ledger is being counted in place of the stream.
    recounting: bool,
    /// True when the scan stopped at a rebuild's event: the ledger holds the history before
    /// it, by design, so reading it there is no gap in the stream.
    after_rebuild: bool,
    /// Redis's clock just before the cut's counters were read (ms): a ledger entry of an
    /// earlier millisecond is before the cut, whatever happened to its event.
    pub cut_ms: i64,
    /// The smallest lead of a live order's creation stamp over its deduction's Redis time
    /// (ms): the orders' clock offset, plus the quickest order's delay.
    pub lead: Option<i64>,
    /// Requests whose first event after the cut activates them: their orders belong to after
    /// the cut.
    pub after_cut: RidSet,
    /// Events, ledger entries and orders read (what the settle cost).
    pub read: u64,
}

/// A deduction active at the cut whose order must be looked up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    pub request_id: String,
    pub quantity: i64,
    pub at_ms: i64,
    /// `at_ms` is when a buyer was served ([`Unbacked::served`]).
    pub served: bool,
}

impl Settle {
    /// Starts at the cut `position`, with `live_units` (L) and `active` (A) read there, the
    /// units the counters hold without a ledger entry (`unexplained`, from the meta hash, since
    /// when), and the requests whose first event after the cut activates them.
    pub fn new(
        position: EventId,
        live_units: i64,
        (active, unexplained, since): (i64, i64, Option<i64>),
        after_cut: RidSet,
    ) -> Self {
        Settle {
            books: Books {
                position,
                live_units,
                unexplained,
                unexplained_since: since,
                ..Books::default()
            },
            target: active
                .saturating_sub(live_units)
                .saturating_sub(unexplained),
            cursor: None,
            // No live order at the cut: no page of them to read (a product not yet sold, the
            // most of a large activity, costs no query of its own).
            orders_done: live_units == 0,
            events_done: position == EventId::ZERO,
            ledger_done: false,
            confirmed: false,
            live: Vec::new(),
            matched: Vec::new(),
            returned: RidSet::default(),
            counted: RidSet::default(),
            recounting: false,
            after_rebuild: false,
            cut_ms: 0,
            lead: None,
            after_cut,
            read: 0,
        }
    }

    /// `ΣU - ΣV` with every live order no event matched counted as unledgered: what the
    /// differences come to if none of them has an older deduction.
    fn gap_so_far(&self) -> i64 {
        let unmatched: i64 = self
            .live
            .iter()
            .zip(&self.matched)
            .filter(|(_, m)| !**m)
            .map(|((_, q, _), _)| q)
            .sum();
        self.books.gap() - unmatched
    }

    /// True when `A - L = ΣU - ΣV` (with the unexplained units the meta hash declares): the
    /// differences found account for the counters.
    pub fn explained(&self) -> bool {
        self.books.gap() == self.target
    }

    /// What to read next.
    pub fn next(&self) -> Next {
        if !self.orders_done {
            Next::Orders
        } else if !self.events_done {
            Next::Events
        } else if self.gap_so_far() != self.target && !self.ledger_done {
            Next::Ledger
        } else if !self.confirmed {
            Next::Confirm
        } else {
            Next::Done
        }
    }

    /// Takes one page of live orders (request id, units); `exhausted` when it was the last.
    pub fn on_orders(&mut self, page: &[(String, i64)], exhausted: bool) {
        let stamped: Vec<(String, i64, i64)> = page
            .iter()
            .map(|(r, q)| (r.clone(), *q, i64::MIN))
            .collect();
        self.on_orders_stamped(&stamped, exhausted);
    }

    /// Takes one page of live orders (request id, units, the order's creation stamp in ms, or
    /// `i64::MIN` when unknown); `exhausted` when it was the last.
    pub fn on_orders_stamped(&mut self, page: &[(String, i64, i64)], exhausted: bool) {
        self.read += page.len() as u64;
        for (rid, units, stamp) in page {
            if !self.after_cut.contains(rid) {
                self.live.push((rid.as_str().into(), *units, *stamp));
            }
        }
        if exhausted {
            self.live.sort_unstable_by(|a, b| a.0.cmp(&b.0));
            self.live.dedup_by(|a, b| a.0 == b.0);
            self.matched = vec![false; self.live.len()];
            self.orders_done = true;
        }
    }

    /// Takes one page of the stream (newest first, all at or before the cut) whose last entry
    /// is `last` (parsed or not); `exhausted` when it reached the start. Deductions active at
    /// the cut whose request has a live order are backed; the others are returned, to look up.
    pub fn on_events(
        &mut self,
        page: &[Event],
        last: Option<EventId>,
        exhausted: bool,
    ) -> Vec<Candidate> {
        self.read += page.len() as u64;
        let mut out = Vec::new();
        match last {
            Some(at) => self.cursor = Some(at),
            // Nothing readable to go on from: the stream ends here for this scan.
            None => self.events_done = true,
        }
        for e in page {
            match e.kind {
                EventKind::Returned => {
                    self.returned.insert(e.request_id.clone());
                }
                EventKind::Deducted | EventKind::Booked => {
                    if !self.returned.remove(&e.request_id) {
                        let clock = e.kind == EventKind::Deducted;
                        out.extend(self.active(&e.request_id, e.quantity, e.id.ms, clock));
                    }
                }
                // The history before a rebuild is the ledger's: the scan ends here.
                EventKind::Rebuilt => {
                    self.after_rebuild = true;
                    self.events_done = true;
                    break;
                }
                EventKind::Adjusted | EventKind::Other => {}
            }
        }
        if exhausted {
            self.events_done = true;
        }
        out
    }

    /// An active deduction: backed by its live order, or a candidate to look up. `clock`: the
    /// deduction's time is when the buyer was served (a `d` event), so its order's stamp says
    /// how far the clocks lie apart; a recording's time (`b`, or a ledger entry, which may be
    /// either) is when a console wrote it, maybe hours after the order, and says nothing.
    fn active(&mut self, rid: &str, quantity: i64, at_ms: i64, clock: bool) -> Option<Candidate> {
        if clock {
            self.books.note_served(rid, quantity, at_ms);
        }
        if let Ok(i) = self.live.binary_search_by(|(r, _, _)| r.as_ref().cmp(rid))
            && !self.matched[i]
        {
            self.matched[i] = true;
            self.books.backed(rid, quantity, self.live[i].1);
            // An order and its deduction: how far the orders' clock leads Redis's (plus how
            // long the order took).
            let stamp = self.live[i].2;
            if clock && stamp != i64::MIN {
                let lead = stamp.saturating_sub(at_ms);
                self.lead = Some(self.lead.map_or(lead, |l| l.min(lead)));
            }
            return None;
        }
        Some(Candidate {
            request_id: rid.to_string(),
            quantity,
            at_ms,
            served: clock,
        })
    }

    /// Takes one page of the ledger (HSCAN: any order, maybe repeats); returns the entries
    /// active at the cut that no live order backs, to look up. The stream did not account for
    /// the counters (an entry deleted or trimmed, or a history older than the stream), so the
    /// ledger is counted instead, whole: what the events matched is forgotten at the first page.
    pub fn on_ledger(&mut self, page: &[LedgerEntry], exhausted: bool) -> Vec<Candidate> {
        if !self.recounting {
            self.recounting = true;
            self.books.stream_gap = !self.after_rebuild;
            self.books.unbacked = RidMap::default();
            if let Some(m) = self.books.breaches.existing() {
                m.mismatched.clear();
                m.elsewhere.clear();
            }
            self.matched.iter_mut().for_each(|m| *m = false);
        }
        self.read += page.len() as u64;
        let mut out = Vec::new();
        for e in page {
            if e.active_at_cut(self.books.position, self.cut_ms)
                && self.counted.insert(e.request_id.clone())
            {
                out.extend(self.active(&e.request_id, e.quantity, e.at_ms(), false));
            }
        }
        if exhausted {
            self.ledger_done = true;
        }
        out
    }

    /// The database's answer for candidates: an order that ended, or none (a live order of
    /// the request was matched already, or belongs to another product).
    pub fn on_candidates(&mut self, found: &[(Candidate, OrderState)]) {
        for (c, state) in found {
            // A death's stamp on Redis's clock, as far as the orders seen say.
            let dead_at_ms = match state {
                OrderState::Dead { at_ms, .. } => Some(stamp_to_redis(*at_ms, self.lead)),
                OrderState::Live(_) | OrderState::Missing => None,
            };
            self.books.unbacked.insert(
                c.request_id.clone(),
                Unbacked {
                    quantity: c.quantity,
                    at_ms: c.at_ms,
                    dead_at_ms,
                    served: c.served,
                },
            );
        }
    }

    /// The live orders no event matched: whose ledger entry must be read.
    pub fn unmatched(&self) -> Vec<(String, i64)> {
        self.live
            .iter()
            .zip(&self.matched)
            .filter(|(_, m)| !**m)
            .map(|((r, q, _), _)| (r.to_string(), *q))
            .collect()
    }

    /// Takes the ledger entries of [`Settle::unmatched`]: an order whose request has no
    /// deduction active at the cut is unledgered. What the counters then hold beyond all the
    /// ledger names is the product's discrepancy.
    pub fn on_confirm(&mut self, entries: &[(String, i64, Option<LedgerEntry>)]) {
        for (rid, units, entry) in entries {
            if !entry
                .as_ref()
                .is_some_and(|e| e.active_at_cut(self.books.position, self.cut_ms))
            {
                self.books.unledgered.insert(rid.clone(), *units);
                if entry.as_ref().is_some_and(|e| e.returned) {
                    self.books.breaches.maps().after_return.insert(rid.clone());
                }
            }
        }
        // The orders are all placed: the memory goes.
        self.live = Vec::new();
        self.matched = Vec::new();
        self.counted = RidSet::default();
        self.confirmed = true;
        self.books.discrepancy = self.target.saturating_sub(self.books.gap());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(ms: i64, seq: i64) -> EventId {
        EventId { ms, seq }
    }

    fn ev(ms: i64, kind: EventKind, rid: &str, q: i64) -> Event {
        Event {
            id: id(ms, 0),
            kind,
            request_id: rid.into(),
            quantity: q,
        }
    }

    /// An order of another quantity than its deduction is a mismatch, counted apart: the books
    /// balance, with no discrepancy, whichever way the pair is met (a settle, the live view),
    /// and the mismatch goes with the order's death or its deduction's return.
    #[test]
    fn an_order_of_another_quantity_balances_as_a_mismatch() {
        // Settled: deducted 1, ordered 3.
        let mut s = Settle::new(id(9, 0), 3, (1, 0, None), RidSet::default());
        s.on_orders(&[("more".into(), 3)], true);
        let c = s.on_events(
            &[ev(5, EventKind::Deducted, "more", 1)],
            Some(id(5, 0)),
            true,
        );
        assert!(c.is_empty());
        assert_eq!(s.next(), Next::Confirm, "no ledger read for it");
        s.on_confirm(&[]);
        assert!(s.explained() && !s.books.stream_gap && s.books.discrepancy == 0);
        assert_eq!(s.books.mismatch_excess(), 2);
        assert!(s.books.balanced(1));

        // Live: the deduction, then its order.
        let mut b = Books {
            position: id(1, 0),
            ..Books::default()
        };
        b.apply(&ev(2, EventKind::Deducted, "more", 1));
        b.on_order("more", OrderState::Live(3));
        assert_eq!((b.live_units, b.mismatch_excess()), (3, 2));
        assert!(b.balanced(1));
        // Its death: the deduction is unbacked again, the mismatch gone.
        let entry = LedgerEntry::parse("more", b"d|1|2-0|9|u").expect("entry");
        b.on_death("more", 3, 5, Some(&entry));
        assert!(b.breaches.mismatched().next().is_none() && b.balanced(1));
        assert_eq!(b.live_units, 0);

        // A return while a mismatched order lives: the order is unledgered, after a return.
        let mut b = Books {
            position: id(1, 0),
            ..Books::default()
        };
        b.apply(&ev(2, EventKind::Deducted, "back", 1));
        b.on_order("back", OrderState::Live(2));
        b.apply(&ev(3, EventKind::Returned, "back", 1));
        b.on_returned("back", 1, OrderState::Live(2));
        assert!(b.breaches.mismatched().next().is_none() && b.breaches.after_return("back"));
        assert_eq!(b.unledgered_units(), 2);
        assert!(b.balanced(0));
        // Booked again by a fix: backed, no longer after a return.
        b.apply(&ev(4, EventKind::Booked, "back", 2));
        assert!(b.breaches.after_return_all().next().is_none());
        assert!(b.unledgered.is_empty() && b.balanced(2));
    }

    #[test]
    fn deductions_outside_the_window_are_named_until_returned() {
        let window = SaleWindow {
            opens_ms: 10,
            closes_ms: 20,
        };
        let mut b = Books {
            window: Some(window),
            ..Books::default()
        };
        b.apply(&ev(5, EventKind::Deducted, "early", 1));
        b.apply(&ev(15, EventKind::Deducted, "in", 1));
        b.apply(&ev(25, EventKind::Booked, "recorded", 1));
        let outside: Vec<&String> = b.breaches.outside().map(|(r, _)| r).collect();
        assert_eq!(outside, vec!["early"]);
        b.apply(&ev(26, EventKind::Returned, "early", 1));
        assert!(b.breaches.outside().next().is_none());
        // A settle sees the same.
        let mut s = Settle::new(id(30, 0), 0, (2, 0, None), RidSet::default());
        s.books.window = Some(window);
        s.on_orders(&[], true);
        let c = s.on_events(
            &[
                ev(25, EventKind::Deducted, "late", 1),
                ev(15, EventKind::Deducted, "in", 1),
            ],
            Some(id(15, 0)),
            true,
        );
        assert_eq!(c.len(), 2);
        let outside: Vec<(&String, &i64)> = s.books.breaches.outside().collect();
        assert_eq!(outside, vec![(&"late".to_string(), &1)]);
    }

    #[test]
    fn split_by_grace_counts_deaths_from_the_death() {
        let mut b = Books::default();
        b.unbacked.insert(
            "young".into(),
            Unbacked {
                quantity: 1,
                at_ms: 90_000,
                dead_at_ms: None,
                served: true,
            },
        );
        b.unbacked.insert(
            "old".into(),
            Unbacked {
                quantity: 2,
                at_ms: 1_000,
                dead_at_ms: None,
                served: true,
            },
        );
        // An old deduction whose order just expired: its return is on its way.
        b.unbacked.insert(
            "dying".into(),
            Unbacked {
                quantity: 4,
                at_ms: 1_000,
                dead_at_ms: Some(95_000),
                served: true,
            },
        );
        let s = b.split(100_000, 60_000);
        assert_eq!(
            (s.in_flight, s.orphaned, s.orphans),
            (5, 2, vec!["old".to_string()])
        );
    }

    #[test]
    fn the_live_view_follows_a_sale_and_its_expiry() {
        let mut b = Books {
            position: id(1, 0),
            live_units: 10,
            ..Books::default()
        };
        // A deduction; its order lands; the order expires and the stock comes back.
        b.apply(&ev(2, EventKind::Deducted, "r1", 1));
        assert!(b.balanced(11));
        b.on_order("r1", OrderState::Live(1));
        assert_eq!((b.live_units, b.gap()), (11, 0));
        b.apply(&ev(3, EventKind::Returned, "r1", 1));
        assert_eq!(b.returned.get("r1"), Some(&1));
        b.on_returned(
            "r1",
            1,
            OrderState::Dead {
                quantity: 1,
                at_ms: 3,
            },
        );
        assert!(b.balanced(10));
        assert_eq!(b.position, id(3, 0));
    }

    #[test]
    fn a_death_before_its_return_is_a_return_in_flight() {
        let mut b = Books {
            position: id(5, 0),
            live_units: 3,
            ..Books::default()
        };
        let entry = LedgerEntry::parse("r1", b"d|1|2-0|9|u").expect("entry");
        b.on_death("r1", 1, 5, Some(&entry));
        assert_eq!(b.live_units, 2);
        assert!(b.balanced(3));
        assert_eq!(b.split(6, 60_000).in_flight, 1);
        // The return arrives: nothing left unbacked, the order was already out of L.
        b.apply(&ev(6, EventKind::Returned, "r1", 1));
        assert!(b.returned.is_empty());
        assert!(b.balanced(2));
        // A death whose return the books already passed changes nothing.
        let gone = LedgerEntry::parse("r1", b"r@6-0|1|2-0|9|u").expect("entry");
        b.on_death("r1", 1, 5, Some(&gone));
        assert!(b.balanced(2) && b.unbacked.is_empty());
    }

    #[test]
    fn a_return_and_a_booking_of_one_request_in_one_batch_leave_it_backed() {
        let mut b = Books {
            position: id(1, 0),
            live_units: 1,
            ..Books::default()
        };
        b.apply(&ev(2, EventKind::Returned, "r1", 1));
        b.apply(&ev(3, EventKind::Booked, "r1", 1));
        assert!(b.returned.is_empty() && b.unbacked.is_empty() && b.unledgered.is_empty());
        assert!(b.balanced(1));
    }

    #[test]
    fn a_return_while_the_order_lives_is_unledgered_until_booked() {
        let mut b = Books {
            position: id(1, 0),
            live_units: 1,
            ..Books::default()
        };
        b.apply(&ev(2, EventKind::Returned, "r1", 1));
        assert_eq!(b.returned.len(), 1);
        b.on_returned("r1", 1, OrderState::Live(1));
        assert_eq!((b.live_units, b.unledgered_units()), (1, 1));
        assert!(b.balanced(0));
        b.apply(&ev(3, EventKind::Booked, "r1", 1));
        assert!(b.balanced(1) && b.unledgered.is_empty());
    }

    #[test]
    fn an_order_landing_after_its_deduction_went_back_is_unledgered() {
        let mut b = Books {
            position: id(5, 0),
            live_units: 0,
            ..Books::default()
        };
        let returned = LedgerEntry::parse("late", b"r@4-0|1|2-0|9|u").expect("entry");
        b.on_live_order("late", 1, Some(&returned));
        assert_eq!((b.live_units, b.unledgered_units()), (1, 1));
        // Seen again (the feed re-reads a margin): counted once.
        b.on_live_order("late", 1, Some(&returned));
        assert_eq!(b.live_units, 1);
        // An order of a deduction after the cut waits for its event.
        let later = LedgerEntry::parse("next", b"d|1|6-0|9|u").expect("entry");
        b.on_live_order("next", 1, Some(&later));
        // An order of a deduction the books count as backed already.
        let backed = LedgerEntry::parse("old", b"d|1|3-0|9|u").expect("entry");
        b.on_live_order("old", 1, Some(&backed));
        assert_eq!(b.live_units, 1);
        // The lost deduction is retried: the order is backed now.
        b.apply(&ev(6, EventKind::Deducted, "late", 1));
        assert!(b.unledgered.is_empty() && b.unbacked.is_empty());
    }

    #[test]
    fn a_settle_matches_orders_and_events_and_looks_up_only_the_differences() {
        // Three deductions active (one in flight, one sold, one whose order lives on after
        // its return), and two orders whose deductions a failover lost: A = 2, L = 4.
        let mut s = Settle::new(id(9, 0), 4, (2, 0, None), RidSet::default());
        assert_eq!(s.next(), Next::Orders);
        s.on_orders(
            &[
                ("lost1".into(), 1),
                ("lost2".into(), 1),
                ("back".into(), 1),
                ("sold".into(), 1),
            ],
            true,
        );
        assert_eq!(s.next(), Next::Events);
        let page = vec![
            ev(9, EventKind::Deducted, "fly", 1),
            ev(8, EventKind::Returned, "back", 1),
            ev(7, EventKind::Deducted, "sold", 1),
            ev(6, EventKind::Deducted, "back", 1),
        ];
        // Only the deduction without a live order is looked up.
        let c = s.on_events(&page, Some(id(6, 0)), true);
        let ids: Vec<&str> = c.iter().map(|c| c.request_id.as_str()).collect();
        assert_eq!(ids, vec!["fly"]);
        s.on_candidates(&[(c[0].clone(), OrderState::Missing)]);
        assert_eq!(s.next(), Next::Confirm);
        let left = s.unmatched();
        assert_eq!(left.len(), 3);
        let confirm: Vec<(String, i64, Option<LedgerEntry>)> = left
            .into_iter()
            .map(|(r, q)| {
                let e = (r == "back").then(|| LedgerEntry::parse("back", b"r@8-0|1|6-0|0|u"));
                (r, q, e.flatten())
            })
            .collect();
        s.on_confirm(&confirm);
        assert!(s.explained());
        assert_eq!(s.next(), Next::Done);
        assert_eq!(s.books.unledgered_units(), 3);
        assert_eq!(s.books.split(10, 60_000).in_flight, 1);
    }

    /// The clocks' lead comes from deductions served to buyers: an order recorded by a console
    /// long after it landed (a `b` event) says nothing about the clocks.
    #[test]
    fn only_a_deduction_tells_how_far_the_clocks_lie_apart() {
        let mut s = Settle::new(id(90_000, 0), 2, (2, 0, None), RidSet::default());
        s.on_orders_stamped(
            &[("sold".into(), 1, 10_300), ("booked".into(), 1, 20_000)],
            true,
        );
        let page = vec![
            ev(90_000, EventKind::Booked, "booked", 1),
            ev(10_000, EventKind::Deducted, "sold", 1),
        ];
        assert!(s.on_events(&page, Some(id(10_000, 0)), true).is_empty());
        // 300 ms from the sale's deduction to its order; the booking, 70 s after the order
        // it records, would have read as a clock 70 s behind.
        assert_eq!(s.lead, Some(300));
    }

    #[test]
    fn a_settle_reads_the_ledger_behind_the_stream_only_when_the_counters_say_so() {
        // The stream starts after a deduction the ledger still holds (an older version).
        let mut s = Settle::new(id(9, 0), 1, (3, 0, None), RidSet::default());
        s.on_orders(&[("sold-old".into(), 1)], true);
        let c = s.on_events(
            &[ev(9, EventKind::Deducted, "new", 1)],
            Some(id(9, 0)),
            true,
        );
        s.on_candidates(&[(c[0].clone(), OrderState::Missing)]);
        assert_eq!(s.next(), Next::Ledger);
        let old = LedgerEntry::parse("old", b"d|1|5|0|u").expect("entry");
        let sold = LedgerEntry::parse("sold-old", b"d|1|4|0|u").expect("entry");
        let again = LedgerEntry::parse("new", b"d|1|9-0|0|u").expect("entry");
        let c = s.on_ledger(&[old, sold, again], true);
        // Counted from the ledger alone: the sold one is backed, the other two are looked up.
        let mut ids: Vec<&str> = c.iter().map(|c| c.request_id.as_str()).collect();
        ids.sort_unstable();
        assert_eq!(ids, vec!["new", "old"]);
        let answers: Vec<(Candidate, OrderState)> =
            c.iter().map(|c| (c.clone(), OrderState::Missing)).collect();
        s.on_candidates(&answers);
        assert_eq!(s.next(), Next::Confirm);
        s.on_confirm(&[]);
        assert!(s.explained());
        assert!(s.books.stream_gap && s.books.discrepancy == 0);
        assert_eq!(s.next(), Next::Done);
    }

    #[test]
    fn a_deleted_event_is_found_in_the_ledger_and_counted_once() {
        // Two deductions active, one with an order; the event of the other was deleted.
        let mut s = Settle::new(id(9, 0), 1, (2, 0, None), RidSet::default());
        s.on_orders(&[("sold".into(), 1)], true);
        let c = s.on_events(
            &[ev(8, EventKind::Deducted, "sold", 1)],
            Some(id(8, 0)),
            true,
        );
        assert!(c.is_empty());
        assert_eq!(s.next(), Next::Ledger);
        let sold = LedgerEntry::parse("sold", b"d|1|8-0|0|u").expect("entry");
        let lost = LedgerEntry::parse("unbacked", b"d|1|5-0|0|u").expect("entry");
        // HSCAN may give an entry twice.
        let c = s.on_ledger(&[sold.clone(), lost.clone(), lost], false);
        let c2 = s.on_ledger(&[sold], true);
        assert_eq!(c.len() + c2.len(), 1);
        s.on_candidates(&[(c[0].clone(), OrderState::Missing)]);
        s.on_confirm(&[]);
        assert!(s.explained());
        assert_eq!(s.books.split(6, 60_000).in_flight, 1);
    }

    #[test]
    fn counters_above_the_ledger_are_a_discrepancy_and_declared_units_are_not() {
        // The counters hold 3; the ledger names 1 (entries lost).
        let mut s = Settle::new(id(9, 0), 0, (3, 0, None), RidSet::default());
        s.on_orders(&[], true);
        let c = s.on_events(&[ev(9, EventKind::Deducted, "a", 1)], Some(id(9, 0)), true);
        s.on_candidates(&[(c[0].clone(), OrderState::Missing)]);
        assert_eq!(s.next(), Next::Ledger);
        let a = LedgerEntry::parse("a", b"d|1|9-0|0|u").expect("entry");
        let c = s.on_ledger(&[a], true);
        s.on_candidates(&[(c[0].clone(), OrderState::Missing)]);
        s.on_confirm(&[]);
        assert!(!s.explained());
        assert_eq!(s.books.discrepancy, 2);
        assert!(s.books.balanced(3));
        // The same counters when a rebuild declared the two: explained by the events alone.
        let mut s = Settle::new(id(9, 0), 0, (3, 2, Some(1)), RidSet::default());
        s.on_orders(&[], true);
        let c = s.on_events(&[ev(9, EventKind::Deducted, "a", 1)], Some(id(9, 0)), true);
        s.on_candidates(&[(c[0].clone(), OrderState::Missing)]);
        assert_eq!(s.next(), Next::Confirm);
        s.on_confirm(&[]);
        assert!(s.explained() && s.books.balanced(3));
        // In flight until their orders had the grace window to land, then released.
        assert_eq!(s.books.split(100, 1_000).in_flight, 3);
        let late = s.books.split(5_000, 1_000);
        assert_eq!((late.in_flight, late.orphaned, late.release), (0, 3, 2));
    }
}
