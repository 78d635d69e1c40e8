//! The outbox messages and compensation entries, each checked as it goes by.

use super::ledgers::{Ded, product_of};
use super::{COMPENSATION, OUTBOX, Read, TIMESTAMPS, Tally, stamp_shown};
use crate::db::Db;
use crate::db::conform as rows;
use crate::db::orders::ORDER_TOPIC;
use crate::domain::ActivityId;
use crate::error::Result;
use std::collections::{HashMap, HashSet};

/// What an order's outbox message must say, kept from the walk of the orders for the walk of
/// the messages that follows (a message is checked as it goes by: no payload is held).
pub(super) struct Expected {
    pub(super) request_id: Box<str>,
    pub(super) product: Box<str>,
    pub(super) user: Box<str>,
    pub(super) quantity: i64,
    /// Messages seen for the order.
    pub(super) messages: u32,
}

/// Walks every outbox message of the activity: each one checked against the order it names as
/// it goes by, then the orders that got none or several.
pub(super) async fn check_outbox(
    db: &Db,
    activity: &ActivityId,
    expected: &mut HashMap<Box<str>, Expected>,
    read: &mut Read,
    t: &mut Tally,
) -> Result<()> {
    let mut after = 0;
    loop {
        let page = rows::outbox_page(db, activity, after).await?;
        let Some(last) = page.last() else {
            break;
        };
        after = last.id;
        let full = page.len() as i64 >= rows::PAGE;
        read.outbox_messages += page.len() as u64;
        t.checked(TIMESTAMPS, page.len() as u64);
        for m in page {
            let order = expected.get_mut(m.order_id.as_str());
            let (rid, product) = order
                .as_ref()
                .map_or(("", ""), |e| (&*e.request_id, &*e.product));
            if !m.created.documented() {
                t.broken(
                    TIMESTAMPS,
                    rid,
                    product,
                    format!(
                        "outbox message {} of order {}: created_at {}",
                        m.id,
                        m.order_id,
                        stamp_shown(&m.created)
                    ),
                );
            }
            let Some(e) = order else {
                t.broken(
                    OUTBOX,
                    "",
                    "",
                    format!(
                        "message {} names order {}, which is not an order of this activity",
                        m.id, m.order_id
                    ),
                );
                continue;
            };
            e.messages += 1;
            let mut wrong = Vec::new();
            if m.topic != ORDER_TOPIC {
                wrong.push(format!(
                    "topic '{}' (expected {ORDER_TOPIC})",
                    crate::domain::stock::shown(m.topic.as_bytes())
                ));
            }
            if !matches!(m.status.as_str(), "pending" | "sent") {
                wrong.push(format!(
                    "status '{}' (pending or sent)",
                    crate::domain::stock::shown(m.status.as_bytes())
                ));
            }
            if let Some(why) = payload_differs(&m.order_id, e, activity.as_str(), &m.payload) {
                wrong.push(why);
            }
            if !wrong.is_empty() {
                let (rid, product) = (e.request_id.to_string(), e.product.to_string());
                t.broken(
                    OUTBOX,
                    &rid,
                    &product,
                    format!(
                        "message {} of order {}: {}",
                        m.id,
                        m.order_id,
                        wrong.join("; ")
                    ),
                );
            }
        }
        if !full {
            break;
        }
    }
    let mut counts: Vec<(&Box<str>, &Expected)> =
        expected.iter().filter(|(_, e)| e.messages != 1).collect();
    counts.sort_by(|a, b| a.1.request_id.cmp(&b.1.request_id));
    t.checked(OUTBOX, expected.len() as u64);
    for (order_id, e) in counts {
        let detail = match e.messages {
            0 => format!("order {order_id} has no outbox message"),
            n => format!("order {order_id} has {n} outbox messages"),
        };
        t.broken(OUTBOX, &e.request_id, &e.product, detail);
    }
    Ok(())
}

/// Why a message's payload is not the order's, if it is not.
pub(super) fn payload_differs(
    order_id: &str,
    o: &Expected,
    activity: &str,
    payload: &str,
) -> Option<String> {
    let Ok(serde_json::Value::Object(v)) = serde_json::from_str::<serde_json::Value>(payload)
    else {
        return Some("the payload is not a JSON object".into());
    };
    let text = |k: &str| v.get(k).and_then(serde_json::Value::as_str);
    let fields = [
        ("activity_id", text("activity_id") == Some(activity)),
        ("order_id", text("order_id") == Some(order_id)),
        ("product_id", text("product_id") == Some(&*o.product)),
        ("request_id", text("request_id") == Some(&*o.request_id)),
        ("user_id", text("user_id") == Some(&*o.user)),
        (
            "quantity",
            v.get("quantity").and_then(serde_json::Value::as_i64) == Some(o.quantity),
        ),
    ];
    let off: Vec<&str> = fields
        .iter()
        .filter(|(_, ok)| !ok)
        .map(|(k, _)| *k)
        .collect();
    (!off.is_empty()).then(|| format!("payload fields {} differ from the order's", off.join(", ")))
}

/// Every compensation entry: its form, and its deduction's figures.
pub(super) async fn check_compensation(
    db: &Db,
    activity: &ActivityId,
    (ledger, ids): (&HashMap<String, Vec<Ded>>, &[String]),
    read: &mut Read,
    t: &mut Tally,
) -> Result<()> {
    let known: HashSet<&str> = ids.iter().map(String::as_str).collect();
    let mut after = 0;
    loop {
        let page = rows::compensation_page(db, activity, after).await?;
        let Some(last) = page.last() else {
            break;
        };
        after = last.id;
        let full = page.len() as i64 >= rows::PAGE;
        read.compensation_entries += page.len() as u64;
        for c in &page {
            t.checked(COMPENSATION, 1);
            t.checked(TIMESTAMPS, 1);
            if !c.created.documented() {
                t.broken(
                    TIMESTAMPS,
                    &c.request_id,
                    &c.product_id,
                    format!(
                        "compensation entry {}: created_at {}",
                        c.id,
                        stamp_shown(&c.created)
                    ),
                );
            }
            let mut wrong = Vec::new();
            if !matches!(
                c.status.as_str(),
                "pending" | "applied" | "returned" | "not_applied"
            ) {
                wrong.push(format!(
                    "status '{}'",
                    crate::domain::stock::shown(c.status.as_bytes())
                ));
            }
            if c.quantity < 1 {
                wrong.push(format!("quantity {}", c.quantity));
            }
            if !known.contains(c.product_id.as_str()) {
                wrong.push(format!(
                    "product '{}' is not in the activity",
                    crate::domain::stock::shown(c.product_id.as_bytes())
                ));
            }
            let deds = ledger.get(&c.request_id).map(Vec::as_slice).unwrap_or(&[]);
            if !deds.is_empty() {
                match deds.iter().find(|d| product_of(ids, d) == c.product_id) {
                    None => wrong.push(format!(
                        "its deduction was on {}",
                        deds.iter()
                            .map(|d| product_of(ids, d))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )),
                    Some(d) => {
                        if d.quantity != c.quantity {
                            wrong.push(format!(
                                "quantity {} where the deduction took {}",
                                c.quantity, d.quantity
                            ));
                        }
                        if *d.user != *c.user_id.as_bytes() {
                            wrong.push("another user than the deduction's".into());
                        }
                    }
                }
            }
            if !wrong.is_empty() {
                t.broken(
                    COMPENSATION,
                    &c.request_id,
                    &c.product_id,
                    format!("compensation entry {}: {}", c.id, wrong.join("; ")),
                );
            }
        }
        if !full {
            break;
        }
    }
    Ok(())
}
