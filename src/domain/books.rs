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
pub use super::breaches::{BreachMaps, Breaches, Mismatch};
use super::events::{Event, EventId, EventKind};
use super::rid_hash::RidMap;
pub use super::settle::{Candidate, Next, Settle};
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
    pub(super) fn note_served(&mut self, rid: &str, quantity: i64, at_ms: i64) {
        if self.window.is_some_and(|w| w.excludes(at_ms)) {
            self.breaches
                .maps()
                .outside
                .insert(rid.to_string(), quantity);
        }
    }

    /// Backs the deduction `rid` of `deducted` units with its live order of `ordered` units:
    /// a different quantity is a mismatch.
    pub(super) fn backed(&mut self, rid: &str, deducted: i64, ordered: i64) {
        if deducted != ordered {
            self.breaches
                .maps()
                .mismatched
                .insert(rid.to_string(), Mismatch { deducted, ordered });
        }
    }

    /// The request leaves the unledgered orders (booked again, or dead).
    pub(super) fn ledgered(&mut self, rid: &str) -> Option<i64> {
        if let Some(m) = self.breaches.existing() {
            m.after_return.remove(rid);
        }
        self.unledgered.remove(rid)
    }

    /// The request's deduction is no longer unbacked.
    pub(super) fn unbacked_gone(&mut self, rid: &str) -> Option<Unbacked> {
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
    ///
    /// Units held back wait for orders Redis holds no deduction for: a live order that lands
    /// unledgered meanwhile is taken as one of them (what the hold waits for), counted once,
    /// as the order; the rest of the hold stays in flight. Counted twice, a landed order made a
    /// sold-out product read oversold. Such a product reads `drift` whatever the figures (its
    /// unledgered order is to record), so the order is never hidden.
    pub fn split(&self, now_ms: i64, grace_ms: i64) -> Split {
        let mut out = Split::default();
        let mut orphans: Vec<(i64, &str)> = Vec::new();
        let reserve = self
            .unexplained
            .saturating_sub(self.unledgered_units())
            .max(0);
        if reserve > 0 {
            match self.unexplained_since {
                Some(since) if now_ms - since >= grace_ms => {
                    out.orphaned += reserve;
                    out.release = reserve;
                }
                _ => out.in_flight += reserve,
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
            // A repair's marker: the stream is whole from here on (what came before is the
            // ledger's, as a settle from scratch reads it). Books carried over it no longer
            // have a gap: they kept one a fix had ended, which `status` settled afresh did not
            // show (chaos test, invariant 7).
            EventKind::Rebuilt => self.stream_gap = false,
            EventKind::Adjusted | EventKind::Other => {}
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
    /// `cut_ms`: Redis's clock at the cut. An entry deducted before it counts even past the
    /// books' position: a stream trimmed or deleted leaves the books at an older event, and the
    /// death of such a deduction's order was never placed (chaos test, invariant 7).
    pub fn on_death(
        &mut self,
        rid: &str,
        quantity: i64,
        at_ms: i64,
        (ledger, cut_ms): (Option<&LedgerEntry>, i64),
    ) {
        if let Some(u) = self.unbacked.get_mut(rid) {
            u.dead_at_ms.get_or_insert(at_ms);
            return;
        }
        if self.ledgered(rid).is_some() {
            self.live_units -= quantity;
            return;
        }
        if let Some(e) = ledger
            && e.active_at_cut(self.position, cut_ms)
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
        b.on_death("r1", 1, 5, (Some(&entry), i64::MIN));
        assert_eq!(b.live_units, 2);
        assert!(b.balanced(3));
        assert_eq!(b.split(6, 60_000).in_flight, 1);
        // The return arrives: nothing left unbacked, the order was already out of L.
        b.apply(&ev(6, EventKind::Returned, "r1", 1));
        assert!(b.returned.is_empty());
        assert!(b.balanced(2));
        // A death whose return the books already passed changes nothing.
        let gone = LedgerEntry::parse("r1", b"r@6-0|1|2-0|9|u").expect("entry");
        b.on_death("r1", 1, 5, (Some(&gone), i64::MIN));
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
}
