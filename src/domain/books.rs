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

use super::events::{Event, EventId, EventKind};
use super::stock::LedgerEntry;
use std::collections::{HashMap, HashSet};

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
    pub unbacked: HashMap<String, Unbacked>,
    /// `V`: live orders (request id, units) without an active deduction.
    pub unledgered: HashMap<String, i64>,
    /// Backed deductions returned by the events just applied (request id, units), whose
    /// orders are yet to be looked up: empty between refreshes.
    pub returned: HashMap<String, i64>,
}

impl Books {
    /// `ΣU - ΣV`: what `A - L` must equal when every difference is known.
    pub fn gap(&self) -> i64 {
        self.unbacked.values().map(|u| u.quantity).sum::<i64>() - self.unledgered_units()
    }

    /// `ΣV`: units of live orders that Redis holds no deduction for.
    pub fn unledgered_units(&self) -> i64 {
        self.unledgered.values().sum()
    }

    /// True when the scripts' counters (`active` = deducted - returned at the cut) agree with
    /// everything the books know.
    pub fn balanced(&self, active: i64) -> bool {
        active - self.live_units == self.gap()
    }

    /// Splits the unbacked units by the grace window, as of `now_ms` (Redis time).
    pub fn split(&self, now_ms: i64, grace_ms: i64) -> Split {
        let mut out = Split::default();
        let mut orphans: Vec<(i64, &str)> = Vec::new();
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
                // A deduction (a booking, or a retry after the first was lost) of an unledgered
                // order: the order, already counted live, is now backed. A booking of an order
                // whose deduction just went back: backed again. Anything else is a deduction
                // whose order is yet to be seen.
                if self.unledgered.remove(&e.request_id).is_some()
                    || self.returned.remove(&e.request_id).is_some()
                {
                    return;
                }
                self.unbacked.insert(
                    e.request_id.clone(),
                    Unbacked {
                        quantity: e.quantity,
                        at_ms: e.id.ms,
                        dead_at_ms: None,
                    },
                );
            }
            EventKind::Returned => {
                if self.unbacked.remove(&e.request_id).is_none() {
                    self.returned.insert(e.request_id.clone(), e.quantity);
                }
            }
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
                self.unbacked.remove(rid);
                self.live_units += quantity;
            }
            OrderState::Dead { at_ms, .. } => u.dead_at_ms = Some(at_ms),
            OrderState::Missing => u.dead_at_ms = None,
        }
    }

    /// A backed deduction of `quantity` units was returned: its order left the live units,
    /// unless it still lives (then it is a sale Redis no longer holds).
    pub fn on_returned(&mut self, rid: &str, quantity: i64, state: OrderState) {
        self.returned.remove(rid);
        match state {
            OrderState::Live(q) => {
                self.unledgered.insert(rid.to_string(), q);
            }
            OrderState::Dead { quantity: q, .. } => self.live_units -= q,
            OrderState::Missing => self.live_units -= quantity,
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
        }
    }

    /// An order died (from the database's recent changes); `ledger` is its request's ledger
    /// entry now. A backed deduction whose order died and that was not yet returned at the cut
    /// is unbacked: a return on its way, orphaned if it never comes.
    pub fn on_death(&mut self, rid: &str, quantity: i64, at_ms: i64, ledger: Option<&LedgerEntry>) {
        if let Some(u) = self.unbacked.get_mut(rid) {
            u.dead_at_ms = Some(at_ms);
            return;
        }
        if self.unledgered.remove(rid).is_some() {
            self.live_units -= quantity;
            return;
        }
        if let Some(e) = ledger
            && e.active_at(self.position)
        {
            self.live_units -= quantity;
            self.unbacked.insert(
                rid.to_string(),
                Unbacked {
                    quantity: e.quantity,
                    at_ms: e.at_ms(),
                    dead_at_ms: Some(at_ms),
                },
            );
        }
    }
}

/// Where a settle (the books built from scratch at a cut) goes next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// The next page of the event stream, newest first, ending before [`Settle::cursor`].
    Events,
    /// The next page of live orders, newest first.
    Orders,
    /// The next page of the ledger (HSCAN), for deductions older than the stream.
    Ledger,
    Done,
}

/// Building a product's books at a cut from scratch: every event up to the cut (the active
/// deductions, each looked up), every live order (each checked against the ledger), and, if
/// the counters still disagree, the ledger itself (deductions older than the stream). All in
/// bounded pages; what the console reads once per product, after which it keeps the books.
#[derive(Clone, Debug)]
pub struct Settle {
    pub books: Books,
    /// `A - L` at the cut: what `ΣU - ΣV` must come to.
    pub target: i64,
    /// The stream is read before this id (exclusive); None: not started.
    pub cursor: Option<EventId>,
    pub events_done: bool,
    pub ledger_done: bool,
    pub orders_done: bool,
    /// Requests whose return (at or before the cut) the backward scan has passed: their
    /// deduction, further back, was not active at the cut.
    returned: HashSet<String>,
    /// Requests whose activating event the scan has examined.
    examined: HashSet<String>,
    /// Requests whose first event after the cut activates them: their orders belong to after
    /// the cut.
    pub after_cut: HashSet<String>,
    /// Events, ledger entries and orders read (what the settle cost).
    pub read: u64,
}

/// A deduction active at the cut whose order must be looked up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    pub request_id: String,
    pub quantity: i64,
    pub at_ms: i64,
}

impl Settle {
    /// Starts at the cut `position`, with `live_units` (L) and `active` (A) read there, and
    /// the requests whose first event after the cut activates them.
    pub fn new(
        position: EventId,
        live_units: i64,
        active: i64,
        after_cut: HashSet<String>,
    ) -> Self {
        Settle {
            books: Books {
                position,
                live_units,
                ..Books::default()
            },
            target: active - live_units,
            cursor: None,
            events_done: position == EventId::ZERO,
            ledger_done: false,
            orders_done: false,
            returned: HashSet::new(),
            examined: HashSet::new(),
            after_cut,
            read: 0,
        }
    }

    /// True when `A - L = ΣU - ΣV`: the differences found account for the counters.
    pub fn explained(&self) -> bool {
        self.books.gap() == self.target
    }

    /// What to read next.
    pub fn next(&self) -> Next {
        if !self.events_done {
            Next::Events
        } else if !self.orders_done {
            Next::Orders
        } else if !self.explained() && !self.ledger_done {
            Next::Ledger
        } else {
            Next::Done
        }
    }

    /// Takes one page of the stream (newest first, all at or before the cut) whose last entry
    /// is `last` (parsed or not); `exhausted` when it reached the start. Returns the
    /// deductions active at the cut to look up.
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
                    self.examined.insert(e.request_id.clone());
                    if !self.returned.remove(&e.request_id) {
                        out.push(Candidate {
                            request_id: e.request_id.clone(),
                            quantity: e.quantity,
                            at_ms: e.id.ms,
                        });
                    }
                }
                EventKind::Adjusted | EventKind::Other => {}
            }
        }
        if exhausted {
            self.events_done = true;
        }
        out
    }

    /// Takes one page of the ledger (HSCAN: any order, maybe repeats); returns the entries
    /// active at the cut that the stream did not show, to look up.
    pub fn on_ledger(&mut self, page: &[LedgerEntry], exhausted: bool) -> Vec<Candidate> {
        self.read += page.len() as u64;
        let mut out = Vec::new();
        for e in page {
            if e.active_at(self.books.position) && self.examined.insert(e.request_id.clone()) {
                out.push(Candidate {
                    request_id: e.request_id.clone(),
                    quantity: e.quantity,
                    at_ms: e.at_ms(),
                });
            }
        }
        if exhausted {
            self.ledger_done = true;
        }
        out
    }

    /// The database's answer for candidates: those without a live order are unbacked.
    pub fn on_candidates(&mut self, found: &[(Candidate, OrderState)]) {
        for (c, state) in found {
            let dead_at_ms = match state {
                OrderState::Live(_) => continue,
                OrderState::Dead { at_ms, .. } => Some(*at_ms),
                OrderState::Missing => None,
            };
            self.books.unbacked.insert(
                c.request_id.clone(),
                Unbacked {
                    quantity: c.quantity,
                    at_ms: c.at_ms,
                    dead_at_ms,
                },
            );
        }
    }

    /// Takes one page of live orders (request id, units), newest first, with each request's
    /// ledger entry now; `exhausted` when it reached the oldest. Orders of requests that had no
    /// active deduction at the cut are unledgered.
    pub fn on_orders(&mut self, page: &[(String, i64, Option<LedgerEntry>)], exhausted: bool) {
        self.read += page.len() as u64;
        for (rid, units, entry) in page {
            if self.after_cut.contains(rid) {
                continue;
            }
            let backed = entry
                .as_ref()
                .is_some_and(|e| e.active_at(self.books.position));
            if !backed {
                self.books.unledgered.insert(rid.clone(), *units);
            }
        }
        if exhausted {
            self.orders_done = true;
        }
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
            },
        );
        b.unbacked.insert(
            "old".into(),
            Unbacked {
                quantity: 2,
                at_ms: 1_000,
                dead_at_ms: None,
            },
        );
        // An old deduction whose order just expired: its return is on its way.
        b.unbacked.insert(
            "dying".into(),
            Unbacked {
                quantity: 4,
                at_ms: 1_000,
                dead_at_ms: Some(95_000),
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
    fn a_settle_reads_both_sides_and_finds_what_each_lacks() {
        // Three deductions active (one in flight, one sold, one whose order lives on after
        // its return), and two orders whose deductions a failover lost: A = 2, L = 4.
        let mut s = Settle::new(id(9, 0), 4, 2, HashSet::new());
        assert_eq!(s.next(), Next::Events);
        let page = vec![
            ev(9, EventKind::Deducted, "fly", 1),
            ev(8, EventKind::Returned, "back", 1),
            ev(7, EventKind::Deducted, "sold", 1),
            ev(6, EventKind::Deducted, "back", 1),
        ];
        let c = s.on_events(&page, Some(id(6, 0)), true);
        let ids: Vec<&str> = c.iter().map(|c| c.request_id.as_str()).collect();
        assert_eq!(ids, vec!["fly", "sold"]);
        s.on_candidates(&[
            (c[0].clone(), OrderState::Missing),
            (c[1].clone(), OrderState::Live(1)),
        ]);
        assert_eq!(s.next(), Next::Orders);
        s.on_orders(
            &[
                ("lost1".into(), 1, None),
                ("lost2".into(), 1, None),
                (
                    "back".into(),
                    1,
                    LedgerEntry::parse("back", b"r@8-0|1|6-0|0|u"),
                ),
                ("sold".into(), 1, LedgerEntry::parse("sold", b"d|1|7-0|0|u")),
            ],
            true,
        );
        assert!(s.explained());
        assert_eq!(s.next(), Next::Done);
        assert_eq!(s.books.unledgered_units(), 3);
        assert_eq!(s.books.split(10, 60_000).in_flight, 1);
    }

    #[test]
    fn a_settle_reads_the_ledger_behind_the_stream_only_when_the_counters_say_so() {
        // The stream starts after a deduction the ledger still holds (an older version).
        let mut s = Settle::new(id(9, 0), 0, 2, HashSet::new());
        let c = s.on_events(
            &[ev(9, EventKind::Deducted, "new", 1)],
            Some(id(9, 0)),
            true,
        );
        s.on_candidates(&[(c[0].clone(), OrderState::Missing)]);
        s.on_orders(&[], true);
        assert_eq!(s.next(), Next::Ledger);
        let old = LedgerEntry::parse("old", b"d|1|5|0|u").expect("entry");
        let again = LedgerEntry::parse("new", b"d|1|9-0|0|u").expect("entry");
        let c = s.on_ledger(&[old, again], true);
        assert_eq!(c.len(), 1);
        s.on_candidates(&[(c[0].clone(), OrderState::Missing)]);
        assert!(s.explained());
        assert_eq!(s.next(), Next::Done);
    }
}
