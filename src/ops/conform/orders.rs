//! The walk of the activity's orders: each held against its deduction, its stamps and the
//! window.

use super::ledgers::{Ded, product_of};
use super::messages::Expected;
use super::{
    ConformOptions, DEAD_BEFORE_RETURN, NO_ORDER_AFTER_RETURN, ORDER_AFTER_SUCCESS, ORDER_COPIES,
    Read, SOLD_IN_WINDOW, TIMESTAMPS, Tally, UPDATED_AT_MOVES, shown_gap, shown_ms, stamp_shown,
};
use crate::db::Db;
use crate::db::conform::{self as rows, OrderRow};
use crate::domain::order::OrderStatus;
use crate::domain::{ActivityId, SaleWindow};
use crate::error::Result;
use std::collections::{HashMap, HashSet};

/// Walks every order of the activity; returns what each order's outbox message must say, and
/// per product the orders not held against the ledger (one that could not be read whole).
pub(super) async fn check_orders(
    db: &Db,
    activity: &ActivityId,
    (ledger, ids, whole): (&HashMap<String, Vec<Ded>>, &[String], &HashSet<&str>),
    window: SaleWindow,
    opts: ConformOptions,
    read: &mut Read,
    t: &mut Tally,
) -> Result<(HashMap<Box<str>, Expected>, HashMap<String, u64>)> {
    let mut expected: HashMap<Box<str>, Expected> = HashMap::new();
    let mut skipped: HashMap<String, u64> = HashMap::new();
    let mut after: Option<String> = None;
    let grace_ms = i64::try_from(opts.grace.as_millis()).unwrap_or(i64::MAX);
    loop {
        let page = rows::orders_page(db, activity, after.as_deref()).await?;
        let Some(last) = page.last() else {
            break;
        };
        after = Some(last.request_id.clone());
        let full = page.len() as i64 >= rows::PAGE;
        read.orders += page.len() as u64;
        for o in &page {
            check_times(o, window, (grace_ms, opts.clock_slack_ms), t);
            expected.insert(
                o.order_id.as_str().into(),
                Expected {
                    request_id: o.request_id.as_str().into(),
                    product: o.product_id.as_str().into(),
                    user: o.user_id.as_str().into(),
                    quantity: o.quantity,
                    messages: 0,
                },
            );
            if !whole.contains(o.product_id.as_str()) {
                *skipped.entry(o.product_id.clone()).or_default() += 1;
                continue;
            }
            let deds = ledger.get(&o.request_id).map(Vec::as_slice).unwrap_or(&[]);
            check_order(o, deds, ids, t);
            let here = deds.iter().find(|d| product_of(ids, d) == o.product_id);
            check_return(o, here, opts.clock_slack_ms, t);
        }
        if !full {
            break;
        }
    }
    Ok((expected, skipped))
}

/// The order against its deduction.
pub(super) fn check_order(o: &OrderRow, deds: &[Ded], ids: &[String], t: &mut Tally) {
    let (rid, product) = (o.request_id.as_str(), o.product_id.as_str());
    t.checked(ORDER_AFTER_SUCCESS, 1);
    if deds.is_empty() {
        t.broken(
            ORDER_AFTER_SUCCESS,
            rid,
            product,
            format!(
                "order {} ({}) has no deduction in any product's ledger (written without a sale, or the ledger was lost: see `status`)",
                o.order_id, o.status
            ),
        );
        return;
    }
    t.checked(ORDER_COPIES, 1);
    let Some(d) = deds.iter().find(|d| product_of(ids, d) == product) else {
        let elsewhere: Vec<&str> = deds.iter().map(|d| product_of(ids, d)).collect();
        t.broken(
            ORDER_COPIES,
            rid,
            product,
            format!(
                "the order is for {product}, the deduction was on {}",
                elsewhere.join(", ")
            ),
        );
        return;
    };
    let mut wrong = Vec::new();
    if d.quantity != o.quantity {
        wrong.push(format!(
            "quantity {} where the deduction took {}",
            o.quantity, d.quantity
        ));
    }
    if *d.user != *o.user_id.as_bytes() {
        wrong.push(format!(
            "user '{}' where the deduction's is '{}'",
            crate::domain::stock::shown(o.user_id.as_bytes()),
            crate::domain::stock::shown(&d.user)
        ));
    }
    if !wrong.is_empty() {
        t.broken(ORDER_COPIES, rid, product, wrong.join("; "));
    }
}

/// Returns against the order's life: a live order of a returned deduction, and a return made
/// before the order died.
pub(super) fn check_return(o: &OrderRow, here: Option<&Ded>, slack_ms: i64, t: &mut Tally) {
    let Some(d) = here else {
        return;
    };
    let live = OrderStatus::spelled_live(&o.status);
    t.checked(NO_ORDER_AFTER_RETURN, 1);
    if live && d.returned {
        t.broken(
            NO_ORDER_AFTER_RETURN,
            &o.request_id,
            &o.product_id,
            format!(
                "order {} is {} but its deduction's units were returned",
                o.order_id, o.status
            ),
        );
    }
    if !live && d.returned {
        t.checked(DEAD_BEFORE_RETURN, 1);
        if let (Some(by), Some(died)) = (d.returned_by, o.updated.ms())
            && by.ms < died.saturating_sub(slack_ms)
        {
            t.broken(
                DEAD_BEFORE_RETURN,
                &o.request_id,
                &o.product_id,
                format!(
                    "returned at {} (Redis time), {} ms before its order was marked {} at {}",
                    shown_ms(by.ms),
                    died - by.ms,
                    o.status,
                    shown_ms(died)
                ),
            );
        }
    }
}

/// The order's stamps: their spelling, their order, and the window.
pub(super) fn check_times(
    o: &OrderRow,
    window: SaleWindow,
    (grace_ms, slack_ms): (i64, i64),
    t: &mut Tally,
) {
    let (rid, product) = (o.request_id.as_str(), o.product_id.as_str());
    t.checked(TIMESTAMPS, 1);
    for (name, s) in [("created_at", &o.created), ("updated_at", &o.updated)] {
        if !s.documented() {
            t.broken(
                TIMESTAMPS,
                rid,
                product,
                format!("{name} {}", stamp_shown(s)),
            );
        }
    }
    let (Some(created_at), Some(updated_at)) = (o.created.at, o.updated.at) else {
        return;
    };
    let created = created_at.timestamp_millis();
    t.checked(UPDATED_AT_MOVES, 1);
    // Compared at the stamps' full precision (a payment a few microseconds after the order is
    // a move); stamps written to the second only cannot tell a move within that second.
    let fine = o.created.fractional() && o.updated.fractional();
    if updated_at < created_at {
        t.broken(
            UPDATED_AT_MOVES,
            rid,
            product,
            format!(
                "updated_at is {} before created_at",
                shown_gap(created_at - updated_at)
            ),
        );
    } else if o.status != OrderStatus::PendingPayment.as_str() && updated_at == created_at && fine {
        t.broken(
            UPDATED_AT_MOVES,
            rid,
            product,
            format!(
                "the order is {} but updated_at still equals created_at: its status change did not set it",
                o.status
            ),
        );
    }
    t.checked(SOLD_IN_WINDOW, 1);
    if created < window.opens_ms.saturating_sub(slack_ms)
        || created
            > window
                .closes_ms
                .saturating_add(grace_ms)
                .saturating_add(slack_ms)
    {
        t.broken(
            SOLD_IN_WINDOW,
            rid,
            product,
            format!(
                "order {} created at {}, outside the window {} - {} (and its grace window)",
                o.order_id,
                shown_ms(created),
                shown_ms(window.opens_ms),
                shown_ms(window.closes_ms)
            ),
        );
    }
}
