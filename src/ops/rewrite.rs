//! The compare-and-set of one product from database truth, shared by preheat and fix: the guard
//! is what the snapshot read, the meta fields come from the database, and a meta hash that is
//! rebuilt (absent or corrupt) gets counters that match the ledger, so reconciliation keeps its
//! fast path afterwards.

use super::snapshot::ProductView;
use crate::redis::stock::StockWrite;

/// True when the write replaces the meta hash's counters: the hash is absent or corrupt. One
/// that survived intact keeps its history.
pub fn rebuilds_counters(v: &ProductView) -> bool {
    !v.redis.meta.present || v.redis.meta.corrupt.is_some()
}

/// The `deducted` counter of a rebuilt meta hash: the active units of the ledger when it was
/// read, else (an empty ledger, lost with the rest) the database's sold units.
pub fn counter_baseline(v: &ProductView) -> i64 {
    v.ledger_active_units.unwrap_or(v.truth.db_sold)
}

/// The compare-and-set that makes `v` hold `stock`, only if its stock key still holds what the
/// snapshot read. `extra` meta fields are written after `initial` and `limit`.
pub fn from_truth<'a>(
    v: &'a ProductView,
    stock: i64,
    extra: Vec<(&'static str, String)>,
) -> StockWrite<'a> {
    let mut meta = Vec::with_capacity(4 + extra.len());
    meta.push(("initial", v.product.initial_stock.to_string()));
    meta.push(("limit", v.product.per_user_limit.to_string()));
    meta.extend(extra);
    if rebuilds_counters(v) {
        meta.push(("deducted", counter_baseline(v).to_string()));
        meta.push(("returned", "0".to_string()));
    }
    StockWrite {
        keys: &v.keys,
        guard: v.redis.stock.guard(),
        stock,
        reset_meta: v.redis.meta.corrupt.is_some(),
        meta,
    }
}
