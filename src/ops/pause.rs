//! Pause and resume: a product launched at the wrong price stops selling at once, through
//! `pause.lua` on each product's keys (the deduction then answers -5 and its stock never moves
//! for a sale), audited per product with actor and reason.

use super::snapshot::products_of;
use crate::db::Db;
use crate::db::audit::{self, AuditEntry};
use crate::domain::ActivityId;
use crate::error::{Error, Result};
use crate::redis::control::{PauseReply, set_paused_many};
use crate::redis::{KeySpace, ProductKeys, RedisStore};
use serde::Serialize;

/// What a pause or resume did to one product.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PausedProduct {
    pub product: String,
    /// Whether it was paused before (None when nothing could be read).
    pub was_paused: Option<bool>,
    /// Whether it is paused now, as far as this call knows.
    pub paused: Option<bool>,
    /// False when it already was as asked (written anyway, and audited).
    pub changed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The result of `pause` or `resume`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PauseReport {
    pub activity: String,
    /// `pause` or `resume`.
    pub action: &'static str,
    pub products: Vec<PausedProduct>,
    /// Products it could not change (missing keys, a corrupt meta hash).
    pub errors: usize,
}

impl PauseReport {
    /// 0 when every product is as asked; 4 when any could not be changed.
    pub fn failed(&self) -> bool {
        self.errors > 0
    }
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
    if redis.read_only() || db.read_only() {
        return Err(Error::refused(format!(
            "read-only mode: refused to {action}; run without --read-only"
        )));
    }
    crate::db::activity::require(db, activity).await?;
    let products = products_of(db, activity, only).await?;
    if products.is_empty() {
        return Err(Error::bad_input(format!(
            "activity '{activity}' has no products to {action}"
        )));
    }
    // The database must answer before Redis is written: the audit rows go there.
    db.check().await?;
    let pkeys: Vec<ProductKeys> = products
        .iter()
        .map(|p| keys.product(activity, &p.product_id))
        .collect();
    let refs: Vec<&ProductKeys> = pkeys.iter().collect();
    let replies = set_paused_many(redis, &refs, pause).await;
    let mut report = PauseReport {
        activity: activity.to_string(),
        action,
        products: Vec::with_capacity(products.len()),
        errors: 0,
    };
    let mut audits = Vec::new();
    let mut stop = None;
    for ((p, k), reply) in products.iter().zip(&pkeys).zip(replies) {
        let mut row = PausedProduct {
            product: p.product_id.to_string(),
            was_paused: None,
            paused: None,
            changed: false,
            error: None,
        };
        match reply {
            Ok(PauseReply::Written { was_paused }) => {
                row.was_paused = Some(was_paused);
                row.paused = Some(pause);
                row.changed = was_paused != pause;
                let mut e = AuditEntry::new(actor, action, activity);
                e.product_id = Some(row.product.clone());
                e.before_value = Some(flag(was_paused).into());
                e.after_value = Some(flag(pause).into());
                e.reason = reason.to_string();
                audits.push(e);
            }
            Ok(PauseReply::Missing) => {
                row.error = Some(format!(
                    "{} is missing: nothing to {action} (run `seckill-console preheat {activity}` first)",
                    k.stock
                ));
            }
            Err(e) => match super::repair::fatal(redis, &e) {
                Some(err) => stop = stop.or(Some(err)),
                None => row.error = Some(crate::redis::describe(&e)),
            },
        }
        report.errors += usize::from(row.error.is_some());
        report.products.push(row);
    }
    // Audited before any error returns: what was written is on record.
    audit::record_many(db, &audits)
        .await
        .map_err(|e| db.error(&e))?;
    if let Some(e) = stop {
        return Err(e);
    }
    Ok(report)
}

fn flag(paused: bool) -> &'static str {
    if paused { "paused" } else { "selling" }
}
