//! Building a product's books at a cut from scratch, in bounded pages (see [`Settle`]): what the
//! console reads once per product, after which [`super::books::Books`] carries them. No I/O.

use super::books::{Books, OrderState, Unbacked, stamp_to_redis};
use super::events::{Event, EventId, EventKind};
use super::rid_hash::{RidMap, RidSet};
use super::stock::LedgerEntry;

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
    /// The lead the reader knew before this settle, from every product and checkpoint of the
    /// activity: a death is dated by the smaller of the two, so that two readers (a live view
    /// and a `status` resumed from a checkpoint a rollback restored) date it alike even where
    /// this product's own orders taught this settle nothing (chaos test, `dated apart`).
    pub prior_lead: Option<i64>,
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
            prior_lead: None,
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
                OrderState::Dead { at_ms, .. } => {
                    let lead = match (self.lead, self.prior_lead) {
                        (Some(a), Some(b)) => Some(a.min(b)),
                        (a, b) => a.or(b),
                    };
                    Some(stamp_to_redis(*at_ms, lead))
                }
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
    use crate::domain::SaleWindow;

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
        b.on_death("more", 3, 5, (Some(&entry), i64::MIN));
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

    /// A product whose own orders taught its settle nothing of the clocks dates a death by the
    /// lead the reader learned from the others: a database 5 s behind does not make a death
    /// 5 s older than a live view dates it.
    #[test]
    fn a_death_is_dated_by_the_lead_learned_from_the_other_products() {
        let dated = |prior: Option<i64>| {
            let mut s = Settle::new(id(20_000, 0), 0, (1, 0, None), RidSet::default());
            s.prior_lead = prior;
            s.on_orders(&[], true);
            let c = s.on_events(
                &[ev(10_000, EventKind::Deducted, "gone", 1)],
                Some(id(10_000, 0)),
                true,
            );
            assert_eq!(c.len(), 1);
            let dead = OrderState::Dead {
                quantity: 1,
                at_ms: 8_000,
            };
            s.on_candidates(&[(c[0].clone(), dead)]);
            s.books.unbacked.get("gone").and_then(|u| u.dead_at_ms)
        };
        assert_eq!(dated(Some(-5_000)), Some(13_000));
        assert_eq!(dated(None), Some(8_000));
        // A lead within the clocks' ordinary spread corrects nothing.
        assert_eq!(dated(Some(-400)), Some(8_000));
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
