//! The preheat gate's rules: what to do with each product, the go / no-go decision and the
//! token-bucket figures. No I/O.

use super::meta::{Piece, pause_fields};
use super::stock::{Meta, StockValue};
use super::{Activity, Phase, Product};
use chrono::{DateTime, Utc};
use serde::Serialize;

/// What preheat does with one product.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// The keys are absent: write them.
    Write,
    /// The keys hold exactly what would be written: leave them alone.
    Unchanged,
    /// The keys hold something else and `--force` was not given: a no-go.
    Conflict,
    /// The keys hold something else and `--force` was given: rewrite them (compare-and-set).
    Overwrite,
}

impl Action {
    /// The name, as in the JSON document.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Write => "write",
            Action::Unchanged => "unchanged",
            Action::Conflict => "conflict",
            Action::Overwrite => "overwrite",
        }
    }
}

/// What Redis holds of one product, as preheat weighs it.
#[derive(Clone, Copy, Debug)]
pub struct Found<'a> {
    pub stock: &'a StockValue,
    pub meta: &'a Meta,
    /// The pieces of its evidence Redis lost.
    pub lost: &'a [Piece],
    /// The stock's offset from the scripts' counters and its difference from the truth
    /// (None when the stock is not an integer).
    pub offset: Option<i64>,
    pub drift: Option<i64>,
    /// False when the counters disagree with the ledger.
    pub agrees: bool,
    /// Units of live orders Redis holds no deduction for, and units deducted for nobody past
    /// the grace window: a drift of 0 may hide both.
    pub unledgered: i64,
    pub orphaned: i64,
}

/// Decides the action for one product from what Redis holds and what the truth says.
pub fn plan(found: &Found<'_>, product: &Product, force: bool) -> Action {
    let meta = found.meta;
    // The same books and values; the operator's pause aside (the database's to write back,
    // lost or not: it is never a conflict, as the truth includes the operator's intent).
    let same_books = found.stock.value().is_some()
        && found.offset == Some(0)
        && found.drift == Some(0)
        && found.lost.iter().all(|p| *p == Piece::Pause)
        && found.agrees
        && found.unledgered == 0
        && found.orphaned == 0
        && meta.present
        && meta.corrupt.is_none()
        && meta.limit == Some(product.per_user_limit)
        && meta.initial == Some(product.initial_stock);
    // The pause and the sale window are the database's to write back, never a conflict: a
    // window edited by a re-import, or absent (a product preheated before the meta hash
    // carried it), is written as the activity now says.
    let pause_same = found.lost.is_empty()
        && pause_fields(product, meta).is_empty()
        && !product.window.is_some_and(|w| meta.window_differs(&w));
    let piece_lost = found.lost.iter().any(|p| p.needs_rebuild());
    // A top-up left between its two writes: never "unchanged", and not the gate's to finish
    // unasked (its half-moved figures are no proof the rest agrees): a conflict that `fix`
    // settles, or `--force` (which finishes or undoes it first, as `fix` does).
    let topup = meta.topup.is_some();
    if same_books && pause_same && !topup {
        Action::Unchanged
    } else if (same_books && !topup) || piece_lost {
        // Absent or lost keys: rebuilt from the orders, then written.
        Action::Write
    } else if force {
        Action::Overwrite
    } else {
        Action::Conflict
    }
}

/// Significant digits a bucket's rate keeps. A gateway's rate limit needs no more, and every
/// product's meta hash carries the rate as text: the 17 digits of a float's shortest form
/// ("0.005555555555555555") took the hash to the next allocation size, 32 bytes more of Redis
/// memory per product (248 -> 216 bytes by `MEMORY USAGE`, Redis 7.0).
const RATE_DIGITS: i32 = 5;

/// `x` rounded to `digits` significant digits, computed so that its shortest text has no
/// more digits than that (a power of ten above 1e22 is not exact, and none is needed here).
fn significant(x: f64, digits: i32) -> f64 {
    if !x.is_finite() || x == 0.0 {
        return x;
    }
    let shift = digits - 1 - x.abs().log10().floor() as i32;
    if !(-22..=22).contains(&shift) {
        return x;
    }
    let ten = 10f64.powi(shift.abs());
    if shift >= 0 {
        (x * ten).round() / ten
    } else {
        (x / ten).round() * ten
    }
}

/// The gateway token bucket for one product: capacity = 2 x stock, rate = stock / activity
/// seconds x 1.2 (tokens per second).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct TokenBucket {
    pub capacity: i64,
    pub rate_per_sec: f64,
}

impl TokenBucket {
    pub fn new(stock: i64, window_secs: i64) -> Self {
        let rate = stock as f64 / window_secs.max(1) as f64 * 1.2;
        // Rounded to significant digits, never to decimals: a small stock over a long window
        // is a rate far below 0.001 tokens a second, which three decimals would store as 0 (no
        // sale ever admitted).
        TokenBucket {
            capacity: stock.saturating_mul(2),
            rate_per_sec: significant(rate, RATE_DIGITS),
        }
    }

    /// The rate as tables show it, always as a plain decimal (a column that mixes `3.333e-4`
    /// with `0.003` misleads): three decimals, or three significant digits below 0.001.
    pub fn shown_rate(&self) -> String {
        let r = self.rate_per_sec;
        if !r.is_finite() || r == 0.0 || r >= 0.001 {
            format!("{r:.3}")
        } else {
            // Digits after the point that keep three significant ones.
            let decimals = (2 - r.log10().floor() as i64).clamp(3, 20) as usize;
            format!("{r:.decimals$}")
        }
    }
}

/// Checks before anything is written; each failure is a no-go reason.
pub fn prechecks(activity: &Activity, products: &[Product], now: DateTime<Utc>) -> Vec<String> {
    let mut reasons = Vec::new();
    if products.is_empty() {
        reasons.push(format!(
            "activity '{}' has no products",
            activity.activity_id
        ));
    }
    if activity.phase(now) == Phase::Ended {
        reasons.push(format!(
            "activity '{}' ended at {}; preheat is for activities that have not ended",
            activity.activity_id,
            activity.ends_at.to_rfc3339()
        ));
    }
    if activity.status == super::activity::ActivityStatus::Cancelled {
        reasons.push(format!("activity '{}' is cancelled", activity.activity_id));
    }
    for p in products {
        if p.initial_stock < 0 {
            reasons.push(format!(
                "product '{}' has negative stock {}",
                p.product_id, p.initial_stock
            ));
        }
        if p.per_user_limit < 1 {
            reasons.push(format!(
                "product '{}' has per-user limit {} (must be >= 1)",
                p.product_id, p.per_user_limit
            ));
        }
    }
    reasons
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::ProductId;

    fn product() -> Product {
        Product::new(ProductId::parse("p").expect("valid"), "", 10, 2)
    }

    fn plan(
        stock: &StockValue,
        meta: &Meta,
        p: &Product,
        (offset, drift): (Option<i64>, Option<i64>),
        force: bool,
    ) -> Action {
        let lost: Vec<Piece> = if *stock == StockValue::Missing {
            vec![Piece::Stock]
        } else {
            Vec::new()
        };
        let found = Found {
            stock,
            meta,
            lost: &lost,
            offset,
            drift,
            agrees: true,
            unledgered: 0,
            orphaned: 0,
        };
        super::plan(&found, p, force)
    }

    fn meta(initial: i64, limit: i64) -> Meta {
        Meta {
            present: true,
            initial: Some(initial),
            limit: Some(limit),
            ..Meta::default()
        }
    }

    #[test]
    fn plans() {
        let p = product();
        let at = |x: i64, d: i64| (Some(x), Some(d));
        assert_eq!(
            plan(
                &StockValue::Missing,
                &Meta::default(),
                &p,
                (None, None),
                false
            ),
            Action::Write
        );
        // Eight left, no offset, no drift: already preheated.
        assert_eq!(
            plan(&StockValue::Value(8), &meta(10, 2), &p, at(0, 0), false),
            Action::Unchanged
        );
        // One unit written outside the scripts.
        assert_eq!(
            plan(&StockValue::Value(9), &meta(10, 2), &p, at(1, 1), false),
            Action::Conflict
        );
        assert_eq!(
            plan(&StockValue::Value(9), &meta(10, 2), &p, at(1, 1), true),
            Action::Overwrite
        );
        // An orphan: the stock agrees with its counters, not with the truth.
        assert_eq!(
            plan(&StockValue::Value(7), &meta(10, 2), &p, at(0, -1), false),
            Action::Conflict
        );
        // A changed limit.
        assert_eq!(
            plan(&StockValue::Value(8), &meta(10, 3), &p, at(0, 0), false),
            Action::Conflict
        );
        assert_eq!(
            plan(
                &StockValue::Corrupt(b"x".to_vec()),
                &meta(10, 2),
                &p,
                (None, None),
                false
            ),
            Action::Conflict
        );
        // A piece lost beside a stock that agrees: rebuilt, without --force.
        let found = Found {
            stock: &StockValue::Value(8),
            meta: &meta(10, 2),
            lost: &[Piece::Buyers],
            offset: Some(0),
            drift: Some(0),
            agrees: true,
            unledgered: 0,
            orphaned: 0,
        };
        assert_eq!(super::plan(&found, &p, false), Action::Write);
        // An orphan and a live order Redis forgot cancel out in the drift: not unchanged.
        let clean = Found { lost: &[], ..found };
        assert_eq!(super::plan(&clean, &p, false), Action::Unchanged);
        let hidden = Found {
            unledgered: 2,
            orphaned: 2,
            ..clean
        };
        assert_eq!(super::plan(&hidden, &p, false), Action::Conflict);
        // A pause the database holds and Redis lost: written back, without --force.
        let mut paused = p.clone();
        paused.pause.paused = true;
        paused.pause.generation = 1;
        assert_eq!(
            plan(
                &StockValue::Value(8),
                &meta(10, 2),
                &paused,
                at(0, 0),
                false
            ),
            Action::Write
        );
        // So with the pause named among the lost pieces, as a status finds it.
        let lost_pause = Found {
            lost: &[Piece::Pause],
            ..clean
        };
        assert_eq!(super::plan(&lost_pause, &paused, false), Action::Write);
        // A pause lost beside a changed limit is still a conflict: the limit is.
        let mut limit = meta(10, 3);
        limit.paused = false;
        let both = Found {
            meta: &limit,
            ..lost_pause
        };
        assert_eq!(super::plan(&both, &paused, false), Action::Conflict);
    }

    #[test]
    fn token_bucket() {
        let b = TokenBucket::new(1000, 3600);
        assert_eq!(b.capacity, 2000);
        assert_eq!(b.rate_per_sec.to_string(), "0.33333");
        assert_eq!(b.shown_rate(), "0.333");
        assert_eq!(TokenBucket::new(10, 0).rate_per_sec, 12.0);
        // One unit over a week: a rate, not zero, with its five digits.
        let small = TokenBucket::new(1, 7 * 86_400);
        assert_eq!(small.rate_per_sec.to_string(), "0.0000019841");
        assert_eq!(small.shown_rate(), "0.00000198");
        // What the meta hash holds, as Redis stores it: at most five significant digits.
        assert_eq!(
            TokenBucket::new(100, 21_600).rate_per_sec.to_string(),
            "0.0055556"
        );
        assert_eq!(
            TokenBucket::new(1_000_000_000, 1).rate_per_sec.to_string(),
            "1200000000"
        );
        assert_eq!(TokenBucket::new(7, 3).rate_per_sec.to_string(), "2.8");
    }

    #[test]
    fn significant_digits_keep_their_size() {
        for (x, text) in [
            (123_456.7, "123460"),
            (0.000_123_456, "0.00012346"),
            (-2.345_678, "-2.3457"),
            (0.0, "0"),
        ] {
            assert_eq!(significant(x, 5).to_string(), text, "{x}");
        }
        assert!(significant(f64::NAN, 5).is_nan());
    }
}
