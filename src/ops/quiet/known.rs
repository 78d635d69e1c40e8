//! What the Watchlist knows of each product between refreshes, in the list's order.

use super::RidMap;
use crate::redis::cut::ProductCut;
use std::time::Instant;

/// How long a product has been quiet and when it is read whole next (its last whole cut is
/// kept beside it, apart: a refresh that plans every product reads only these).
#[derive(Clone, Copy, Debug)]
pub(super) struct Brief {
    /// The refresh that last saw it move.
    pub(super) moved_at: u64,
    /// When it was last read whole (see [`Watchlist::turn`]).
    pub(super) whole_at: Instant,
    /// Its turn: which refreshes ask it, and when its whole read falls due.
    pub(super) lane: u64,
    /// When its next whole read falls due, with Redis's pushes and without them (worked out
    /// once per whole read: two 128-bit divisions per product every refresh were a fifth of
    /// a live view's CPU at 100,000 quiet products).
    pub(super) due: (Instant, Instant),
    /// Its last cut was settled ([`settled`]) and had no key ([`absent`]).
    pub(super) settled: bool,
    pub(super) absent: bool,
}

/// Every product's last whole cut and its [`Brief`], in the order of the caller's list of
/// products (looked up by id for each product at every refresh, in a map of 100,000 cuts, they
/// cost a cache miss or two each: most of a quiet refresh).
#[derive(Debug, Default)]
pub(super) struct Known {
    /// The caller's generation of the list these stand in the order of.
    pub(super) generation: Option<u64>,
    pub(super) index: RidMap<usize>,
    pub(super) brief: Vec<Option<Brief>>,
    pub(super) cuts: Vec<Option<ProductCut>>,
    pub(super) count: usize,
}

impl Known {
    /// Puts what is known in the order of `ids` (only when the list changed): products taken
    /// out are forgotten.
    pub(super) fn align(&mut self, ids: &[&str], generation: u64) {
        let n = ids.len();
        let same = self.generation == Some(generation)
            && self.brief.len() == n
            && [0, n / 2, n.saturating_sub(1)]
                .into_iter()
                .filter(|&i| i < n)
                .all(|i| self.index.get(ids[i]) == Some(&i));
        if same {
            return;
        }
        let mut brief = vec![None; n];
        let mut cuts = vec![None; n];
        let mut index = RidMap::default();
        let mut count = 0;
        for (i, id) in ids.iter().enumerate() {
            if let Some(&j) = self.index.get(*id)
                && let Some(c) = self.cuts.get_mut(j).and_then(Option::take)
            {
                brief[i] = self.brief.get(j).copied().flatten();
                cuts[i] = Some(c);
                count += 1;
            }
            index.insert(id.to_string(), i);
        }
        *self = Known {
            generation: Some(generation),
            index,
            brief,
            cuts,
            count,
        };
    }

    pub(super) fn clear(&mut self) {
        self.brief.iter_mut().for_each(|b| *b = None);
        self.cuts.iter_mut().for_each(|c| *c = None);
        self.count = 0;
    }

    pub(super) fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub(super) fn cut(&self, i: usize) -> Option<&ProductCut> {
        self.cuts.get(i)?.as_ref()
    }

    pub(super) fn brief(&self, i: usize) -> Option<&Brief> {
        self.brief.get(i)?.as_ref()
    }

    pub(super) fn insert(&mut self, i: usize, brief: Brief, cut: ProductCut) {
        if let (Some(b), Some(c)) = (self.brief.get_mut(i), self.cuts.get_mut(i)) {
            if c.is_none() {
                self.count += 1;
            }
            *b = Some(brief);
            *c = Some(cut);
        }
    }
}
