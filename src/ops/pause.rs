//! Pause and resume: a product launched at the wrong price stops selling at once. The pause is
//! the operator's intent, so it is written to the database first (`seckill_product.paused`,
//! with its reason and a generation, in one transaction with its audit row), then to Redis
//! through `pause.lua` on each product's keys (the deduction then answers -5 and its stock
//! never moves for a sale). Preheat and fix write it back from the database whenever Redis
//! loses it; until then `status` raises a critical `pause_lost`.

use super::guard::{Write, phase_allows};
use super::snapshot::products_of;
use crate::db::audit::{self, AuditEntry};
use crate::db::{Arg, Db};
use crate::domain::{ActivityId, Product};
use crate::error::{Error, Result};
use crate::redis::control::{PauseReply, set_paused_many};
use crate::redis::{KeySpace, ProductKeys, RedisStore};
use serde::Serialize;

/// The longest reason kept (longer ones are refused, naming the length).
pub const MAX_REASON: usize = 500;

/// What a pause or resume did to one product.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PausedProduct {
    pub product: String,
    /// Whether it was paused before, in the database (None when nothing could be read).
    pub was_paused: Option<bool>,
    /// Whether it is paused now, as far as this call knows.
    pub paused: Option<bool>,
    /// False when the database already had it as asked (nothing written there). Redis is
    /// written anyway, which brings back a pause it lost or lifts one set by hand; such a
    /// change in Redis alone is audited and said in `note`.
    pub changed: bool,
    /// Something worth knowing that is no failure (a product without keys in Redis).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Whether Redis has it as asked now (false: the database holds it, Redis does not yet).
    pub applied: bool,
    /// The Redis node of the product's keys.
    pub node: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl PausedProduct {
    /// What became of it, as the text output and the TUI say it: the error, or `paused` /
    /// `already so`, with what its note adds (a pause set by hand lifted, no stock key).
    pub fn result(&self, action: &str) -> String {
        let done = if self.changed {
            format!("{action}d")
        } else {
            "already so".into()
        };
        match (&self.error, &self.note) {
            (Some(e), _) => e.clone(),
            (None, Some(note)) if !self.changed => note.clone(),
            (None, Some(note)) => format!("{done}; {note}"),
            (None, None) => done,
        }
    }
}

/// The result of `pause` or `resume`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PauseReport {
    pub activity: String,
    /// `pause` or `resume`.
    pub action: &'static str,
    pub products: Vec<PausedProduct>,
    /// Products whose Redis copy could not be written (the database holds the intent: fix or
    /// preheat writes it).
    pub errors: usize,
    /// True when a node did not answer (exit 3 rather than 4).
    #[serde(skip)]
    pub unreachable: bool,
}

impl PauseReport {
    /// 0 when every product is as asked; 4 when any could not be changed in Redis.
    pub fn failed(&self) -> bool {
        self.errors > 0
    }
}

/// Checks a `--reason`: printable text of at most [`MAX_REASON`] characters.
pub fn check_reason(reason: &str) -> Result<()> {
    if reason.chars().count() > MAX_REASON {
        return Err(Error::bad_input(format!(
            "--reason is {} characters long; at most {MAX_REASON} are kept: shorten it",
            reason.chars().count()
        )));
    }
    if let Some(c) = reason.chars().find(|c| c.is_control()) {
        return Err(Error::bad_input(format!(
            "--reason holds a control character ({:?}): give it on one line, without escape sequences",
            c
        )));
    }
    Ok(())
}

/// Pauses (`pause`) or resumes every product of `activity`, or those of `only`.
pub async fn set_paused(
    redis: &RedisStore,
    db: &Db,
    keys: &KeySpace,
    activity: &ActivityId,
    only: Option<&[String]>,
    pause: bool,
    (actor, reason): (&str, &str),
) -> Result<PauseReport> {
    let action = if pause { "pause" } else { "resume" };
    super::guard::writable(redis, db, action)?;
    check_reason(reason)?;
    let a = crate::db::activity::require(db, activity).await?;
    let what = if pause { Write::Pause } else { Write::Resume };
    phase_allows(&a, what)?;
    super::guard::redis_ready(redis, keys, activity, what).await?;
    let products = products_of(db, activity, only).await?;
    if products.is_empty() {
        return Err(Error::bad_input(format!(
            "activity '{activity}' has no products to {action}"
        )));
    }
    let generations = record_intent(db, activity, &products, pause, (actor, reason)).await?;
    let pkeys: Vec<ProductKeys> = products
        .iter()
        .map(|p| keys.product(activity, &p.product_id))
        .collect();
    let calls: Vec<(&ProductKeys, i64)> = pkeys
        .iter()
        .zip(&generations)
        .map(|(k, g)| (k, *g))
        .collect();
    let replies = set_paused_many(redis, &calls, pause).await;
    let mut report = PauseReport {
        activity: activity.to_string(),
        action,
        products: Vec::with_capacity(products.len()),
        errors: 0,
        unreachable: false,
    };
    let mut redis_only = Vec::new();
    for (((p, reply), k), generation) in products.iter().zip(replies).zip(&pkeys).zip(&generations)
    {
        let node = redis.node_for_key(&k.stock).ok().map(|n| n.addr.clone());
        let mut row = PausedProduct {
            product: p.product_id.to_string(),
            was_paused: Some(p.pause.paused),
            paused: Some(pause),
            changed: p.pause.paused != pause,
            note: None,
            applied: reply.is_ok(),
            node,
            error: None,
        };
        match reply {
            Ok(PauseReply::Written {
                was_paused,
                stock_present,
            }) => {
                // Redis changed though the database did not: a pause set by hand lifted, or a
                // pause Redis lost written back. Audited below like any change, so nothing the
                // console did to a sale goes untraced. Without a stock key nothing sold either
                // way (and `was_paused` reads an absent meta hash as selling): the note below
                // says what there is to know.
                if !row.changed && was_paused != pause && stock_present {
                    let (before, said) = if pause {
                        (
                            "selling in Redis (the pause was lost)",
                            "Redis had lost the pause: written back",
                        )
                    } else {
                        (
                            "paused in Redis only",
                            "Redis held a pause the database did not record (set by hand?): lifted",
                        )
                    };
                    add_note(&mut row, said);
                    redis_only.push(audit_entry(
                        (actor, reason),
                        action,
                        activity,
                        p,
                        (before, flag(pause)),
                    ));
                }
                if !stock_present {
                    add_note(
                        &mut row,
                        &format!(
                            "no stock key in Redis: it sells nothing now, and `seckill-console preheat {activity}` writes it {}",
                            flag(pause)
                        ),
                    );
                }
            }
            // Only a resume meets this (a pause always wins in pause.lua): Redis holds a
            // newer generation than the database's, so the resume is not applied there.
            // Either another operator paused it since, or the database was restored or failed
            // over and lost the generations Redis kept: a person must look before it sells.
            Ok(PauseReply::Stale(held)) => {
                row.applied = false;
                row.error = Some(format!(
                    "not resumed in Redis: it holds pause generation {held}, newer than the database's {} (a pause since, by another operator, or a database restored or failed over that lost it): Redis keeps what it holds; see `seckill-console audit {activity} --product {}` and resume again once you know",
                    generation, p.product_id
                ));
            }
            // Every product is reported, whatever its node did: a hung node in a cluster
            // leaves the others' products applied, and the operator sees which are not.
            Err(e) => {
                if super::repair::fatal(redis, &e)
                    .is_some_and(|err| err.kind == crate::error::ErrorKind::Unavailable)
                {
                    report.unreachable = true;
                }
                row.error = Some(format!(
                    "not applied in Redis{}: {} (the database holds the {action}; `seckill-console fix {activity} --product {}` writes it to Redis)",
                    super::repair::on_node(row.node.as_deref()),
                    crate::redis::describe(&e),
                    p.product_id
                ));
            }
        }
        report.errors += usize::from(row.error.is_some());
        report.products.push(row);
    }
    // Redis is written already: an audit that fails now is said on the rows it concerns (the
    // change stands either way), not turned into an error that would hide the report.
    if !redis_only.is_empty()
        && let Err(e) = audit::record_many(db, &redis_only).await
    {
        let why = db.error(&e);
        let unaudited: std::collections::HashSet<&str> = redis_only
            .iter()
            .filter_map(|a| a.product_id.as_deref())
            .collect();
        for row in report.products.iter_mut() {
            if unaudited.contains(row.product.as_str()) {
                add_note(row, &format!("not audited: {why}"));
            }
        }
    }
    Ok(report)
}

/// Writes the intent into the database with its audit rows, in one transaction; returns each
/// product's pause generation afterwards (its own write's, or the current one for a product
/// already as asked).
async fn record_intent(
    db: &Db,
    activity: &ActivityId,
    products: &[Product],
    pause: bool,
    (actor, reason): (&str, &str),
) -> Result<Vec<i64>> {
    let action = if pause { "pause" } else { "resume" };
    // The database must answer before Redis is written: the intent and the audit go there.
    let mut tx = db.begin().await.map_err(|e| db.error(&e))?;
    let changing: Vec<&str> = products
        .iter()
        .filter(|p| p.pause.paused != pause)
        .map(|p| p.product_id.as_str())
        .collect();
    if !changing.is_empty() {
        tx.execute_in(
            "UPDATE seckill_product SET paused = ?, pause_reason = ?, pause_gen = pause_gen + 1 \
             WHERE activity_id = ? AND paused <> ? AND product_id IN (...)",
            &[
                Arg::Int(i64::from(pause)),
                Arg::from(reason),
                activity.as_str().into(),
                Arg::Int(i64::from(pause)),
            ],
            &changing,
        )
        .await
        .map_err(|e| db.error(&e))?;
        for p in products.iter().filter(|p| p.pause.paused != pause) {
            let e = audit_entry(
                (actor, reason),
                action,
                activity,
                p,
                (flag(p.pause.paused), flag(pause)),
            );
            audit::record_in(&mut tx, &e)
                .await
                .map_err(|e| db.error(&e))?;
        }
    }
    // Read inside the transaction: the generations this write left (a concurrent operator's
    // write waits for it, and then counts on from here).
    let ids: Vec<&str> = products.iter().map(|p| p.product_id.as_str()).collect();
    let rows: Vec<(String, i64)> = tx
        .fetch_all_in(
            "SELECT product_id, pause_gen FROM seckill_product WHERE activity_id = ? AND product_id IN (...)",
            &[activity.as_str().into()],
            &ids,
        )
        .await
        .map_err(|e| db.error(&e))?;
    tx.commit().await.map_err(|e| db.error(&e))?;
    let by_id: std::collections::HashMap<String, i64> = rows.into_iter().collect();
    Ok(products
        .iter()
        .map(|p| {
            by_id
                .get(p.product_id.as_str())
                .copied()
                .unwrap_or(p.pause.generation)
        })
        .collect())
}

/// The audit row of one product's pause or resume: what it was and what it is now.
fn audit_entry(
    (actor, reason): (&str, &str),
    action: &str,
    activity: &ActivityId,
    product: &Product,
    (before, after): (&str, &str),
) -> AuditEntry {
    let mut e = AuditEntry::new(actor, action, activity);
    e.product_id = Some(product.product_id.to_string());
    e.before_value = Some(before.into());
    e.after_value = Some(after.into());
    e.reason = reason.to_string();
    e
}

/// Adds `text` to what a product's row says.
fn add_note(row: &mut PausedProduct, text: &str) {
    row.note = Some(match row.note.take() {
        Some(before) => format!("{before}; {text}"),
        None => text.to_string(),
    });
}

fn flag(paused: bool) -> &'static str {
    if paused { "paused" } else { "selling" }
}
