//! What the app servers did against the contract, per request, as a product's books carry it
//! (docs/app-servers.md): an order whose quantity is not its deduction's, an order written after
//! its deduction's return, a deduction whose order is another product's, a sale outside the
//! window. No I/O.

use super::rid_hash::{RidMap, RidSet};

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
    /// Unledgered orders (in [`super::books::Books::unledgered`]) whose request's deduction was returned: an
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
    pub(super) fn existing(&mut self) -> Option<&mut BreachMaps> {
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

    pub(super) fn remove_mismatch(&mut self, rid: &str) -> Option<Mismatch> {
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
