//! What an app server did against the contract, as one product's books show it: each a fault of
//! its own kind with the request ids behind it, never folded into `corrupt` or `stream_gap`
//! (docs/app-servers.md, "What the console shows when a rule is broken"). No I/O.

use super::books::Books;
use super::stock::printable;
use serde::Serialize;

/// Examples a fault names at most (the count says how many there are).
pub const MAX_EXAMPLES: usize = 5;

/// One request behind a fault.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Example {
    pub request_id: String,
    /// What is wrong with it, in a few words.
    pub detail: String,
}

/// One kind of fault on one product.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Fault {
    /// Requests showing it.
    pub count: usize,
    /// The units they move: held by the deductions, or by the orders beyond their deductions.
    pub units: i64,
    /// The first few, by request id.
    pub examples: Vec<Example>,
}

impl Fault {
    fn of(mut all: Vec<(String, i64, String)>) -> Option<Fault> {
        if all.is_empty() {
            return None;
        }
        all.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        Some(Fault {
            count: all.len(),
            units: all.iter().fold(0i64, |s, (_, u, _)| s.saturating_add(*u)),
            examples: all
                .into_iter()
                .take(MAX_EXAMPLES)
                .map(|(request_id, _, detail)| Example { request_id, detail })
                .collect(),
        })
    }

    /// The example request ids, then how many more: `r1, r2 (and 3 more)`.
    pub fn requests_shown(&self) -> String {
        let ids: Vec<&str> = self
            .examples
            .iter()
            .map(|e| e.request_id.as_str())
            .collect();
        let more = self.count.saturating_sub(self.examples.len());
        if more == 0 {
            ids.join(", ")
        } else {
            format!("{} (and {more} more)", ids.join(", "))
        }
    }
}

/// The faults of one product (each absent when not seen).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Faults {
    /// Deductions of this product whose request id's order belongs to another product, which
    /// deducted the same id too: one request id used for two products.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_reused: Option<Fault>,
    /// Live orders whose quantity, or product, is not their deduction's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub order_mismatch: Option<Fault>,
    /// Active deductions served outside the sale window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outside_window: Option<Fault>,
    /// Live orders whose request's units were returned.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub order_after_return: Option<Fault>,
}

impl Faults {
    pub fn is_empty(&self) -> bool {
        self.request_reused.is_none()
            && self.order_mismatch.is_none()
            && self.outside_window.is_none()
            && self.order_after_return.is_none()
    }

    /// The faults `books` show. `unledgered_in(product, request)`: whether that other product
    /// holds the request as a live order without a deduction (then this product's deduction
    /// and that order are one sale split over two products: the order names the wrong one;
    /// otherwise the other product deducted the id too); None when its books are not at hand.
    /// Ids are the app servers' data: printed with control characters escaped.
    pub fn of(books: &Books, unledgered_in: impl Fn(&str, &str) -> Option<bool>) -> Faults {
        let mut reused = Vec::new();
        let mut mismatch = Vec::new();
        for (rid, other) in books.breaches.elsewhere() {
            let Some(u) = books.unbacked.get(rid) else {
                continue;
            };
            let shown = printable(other);
            match unledgered_in(other, rid) {
                Some(true) => mismatch.push((
                    printable(rid),
                    u.quantity,
                    format!("deducted here, its order is for product {shown}"),
                )),
                Some(false) => reused.push((
                    printable(rid),
                    u.quantity,
                    format!("its order is for product {shown}, which deducted this id too"),
                )),
                None => reused.push((
                    printable(rid),
                    u.quantity,
                    format!("its order is for product {shown}"),
                )),
            }
        }
        for (rid, m) in books.breaches.mismatched() {
            mismatch.push((
                printable(rid),
                m.excess(),
                format!(
                    "the order holds {} unit(s), its deduction took {}",
                    m.ordered, m.deducted
                ),
            ));
        }
        let outside: Vec<(String, i64, String)> = books
            .breaches
            .outside()
            .map(|(rid, q)| {
                (
                    printable(rid),
                    *q,
                    "sold outside the sale window".to_string(),
                )
            })
            .collect();
        let after: Vec<(String, i64, String)> = books
            .breaches
            .after_return_all()
            .filter_map(|rid| {
                let q = *books.unledgered.get(rid)?;
                Some((
                    printable(rid),
                    q,
                    "a live order of a request whose units were returned".to_string(),
                ))
            })
            .collect();
        Faults {
            request_reused: Fault::of(reused),
            order_mismatch: Fault::of(mismatch),
            outside_window: Fault::of(outside),
            order_after_return: Fault::of(after),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::books::{Mismatch, Unbacked};

    fn unbacked(q: i64) -> Unbacked {
        Unbacked {
            quantity: q,
            at_ms: 1,
            dead_at_ms: None,
            served: true,
        }
    }

    #[test]
    fn each_fault_names_its_requests() {
        let mut b = Books::default();
        b.unbacked.insert("twice".into(), unbacked(1));
        b.breaches
            .maps()
            .elsewhere
            .insert("twice".into(), "p2".into());
        b.unbacked.insert("wrong".into(), unbacked(2));
        b.breaches
            .maps()
            .elsewhere
            .insert("wrong".into(), "p3".into());
        b.breaches.maps().mismatched.insert(
            "more".into(),
            Mismatch {
                deducted: 1,
                ordered: 3,
            },
        );
        b.breaches.maps().outside.insert("late".into(), 1);
        b.unledgered.insert("again".into(), 2);
        b.breaches.maps().after_return.insert("again".into());
        let f = Faults::of(&b, |product, rid| Some(product == "p3" && rid == "wrong"));
        let reused = f.request_reused.expect("reused");
        assert_eq!((reused.count, reused.units), (1, 1));
        assert!(reused.examples[0].detail.contains("p2"));
        let mismatch = f.order_mismatch.expect("mismatch");
        assert_eq!(mismatch.count, 2);
        assert_eq!(mismatch.requests_shown(), "more, wrong");
        assert_eq!(
            mismatch.units,
            2 + 2,
            "the order's excess, and the misplaced units"
        );
        assert_eq!(f.outside_window.expect("outside").units, 1);
        assert_eq!(f.order_after_return.expect("after").units, 2);
    }

    #[test]
    fn a_fault_counts_past_its_examples() {
        let all: Vec<(String, i64, String)> = (0..8)
            .map(|i| (format!("r{i}"), 1, String::new()))
            .collect();
        let f = Fault::of(all).expect("fault");
        assert_eq!((f.count, f.examples.len()), (8, MAX_EXAMPLES));
        assert_eq!(f.requests_shown(), "r0, r1, r2, r3, r4 (and 3 more)");
        assert!(Faults::of(&Books::default(), |_, _| None).is_empty());
    }
}
