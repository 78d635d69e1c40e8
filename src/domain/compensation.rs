//! How a compensation entry resolves, from what the ledger and the orders say. No I/O.

use super::stock::LedgerEntry;
use serde::Serialize;

/// What the order table says about a request id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OrderSeen {
    /// No order with this request id.
    None,
    /// An order in `pending_payment` or `paid`.
    Live,
    /// An order that was `cancelled` or `expired`.
    Dead,
}

/// The verdict for one pending entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The deduction happened and its order exists: nothing to do but close the entry.
    Applied,
    /// The deduction happened, no live order backs it and it is older than the grace window:
    /// return its stock with the restore script, then close the entry as `returned`.
    Return,
    /// The ledger shows the stock was returned already: close the entry as `returned`.
    AlreadyReturned,
    /// The deduction never happened: close the entry as `not_applied`.
    NotApplied,
    /// The deduction happened recently and its order may still land: leave it pending.
    InFlight,
}

/// Decides one entry. `ledger` is the entry's ledger record, if any; `now_ms - at_ms` is its age.
pub fn decide(
    ledger: Option<&LedgerEntry>,
    order: OrderSeen,
    now_ms: i64,
    grace_ms: i64,
) -> Verdict {
    match (ledger, order) {
        (Some(e), _) if e.returned => Verdict::AlreadyReturned,
        (Some(_), OrderSeen::Live) => Verdict::Applied,
        (Some(e), _) if now_ms - e.at_ms() < grace_ms => Verdict::InFlight,
        (Some(_), _) => Verdict::Return,
        // The ledger lost the record (a Redis restart) but the order exists: it was applied.
        (None, OrderSeen::Live) => Verdict::Applied,
        (None, _) => Verdict::NotApplied,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(state: &str, at: i64) -> LedgerEntry {
        LedgerEntry::parse("r", format!("{state}|1|{at}|5|u").as_bytes()).expect("valid")
    }

    #[test]
    fn verdicts() {
        let d_old = entry("d", 0);
        let d_new = entry("d", 99_000);
        let r = entry("r", 0);
        let now = 100_000;
        let g = 60_000;
        assert_eq!(
            decide(Some(&d_old), OrderSeen::Live, now, g),
            Verdict::Applied
        );
        assert_eq!(
            decide(Some(&d_old), OrderSeen::None, now, g),
            Verdict::Return
        );
        assert_eq!(
            decide(Some(&d_old), OrderSeen::Dead, now, g),
            Verdict::Return
        );
        assert_eq!(
            decide(Some(&d_new), OrderSeen::None, now, g),
            Verdict::InFlight
        );
        assert_eq!(
            decide(Some(&r), OrderSeen::Dead, now, g),
            Verdict::AlreadyReturned
        );
        assert_eq!(decide(None, OrderSeen::None, now, g), Verdict::NotApplied);
        assert_eq!(decide(None, OrderSeen::Live, now, g), Verdict::Applied);
    }
}
