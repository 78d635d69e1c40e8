//! A top-up left between its two writes. While its console lives (the lease), a repair does
//! not cross it: a conflict. After that, the repair first fences the database row (the top-up
//! id goes into `topup_fence`, and the top-up's own write of `initial_stock` refuses a fenced
//! id, so a console that was only stopped cannot land it later), then takes the marker away
//! without moving the stock: for a raise that never reached Redis, and for a cut that Redis
//! already took. Whatever the database holds now, the heal that follows corrects the stock by
//! its offset from that truth: the units the database took are added, the units it kept come
//! back. Redis never holds more than the truth at any step.

use super::{Repaired, TOPUP_LEASE_MS, Target, fatal};
use crate::db::Arg;
use crate::domain::meta::TopupMarker;
use crate::error::Result;
use crate::ops::snapshot::ProductView;
use crate::redis::control::{TopupReply, TopupStep, topup};

/// Resolves the top-up `m` pending on the product of `v`, or says it is in progress.
pub async fn resolve(
    t: &Target<'_>,
    d: &mut Repaired,
    v: &ProductView,
    m: &TopupMarker,
) -> Result<()> {
    let age = v.cut.now_ms.saturating_sub(m.at_ms);
    if age < TOPUP_LEASE_MS {
        d.conflict = Some(format!(
            "a top-up ({}, {:+}) is between its two writes (for {} s): nothing written; try again in a moment",
            m.id,
            m.change,
            age / 1000
        ));
        return Ok(());
    }
    fence(t, v.product.product_id.as_str(), &m.id).await?;
    let step = if m.change > 0 {
        TopupStep::Abort
    } else {
        TopupStep::Finish
    };
    match topup(t.redis, &v.keys, step, &m.id).await {
        Ok(TopupReply::Done(_) | TopupReply::Missing | TopupReply::NotPending(_)) => {
            d.topup = Some(format!(
                "top-up {} ({:+}) left between its writes {} s ago by a console that stopped: its late database write fenced off, the stock corrected from the database's initial stock",
                m.id,
                m.change,
                age / 1000
            ));
            d.again = true;
        }
        Ok(TopupReply::Held(why)) => d.conflict = Some(why),
        Ok(other) => {
            d.error = Some(format!(
                "topup.lua answered {other:?} to the resolution of top-up {}",
                m.id
            ));
        }
        Err(e) => match fatal(t.redis, &e) {
            Some(err) => return Err(err),
            None => d.error = Some(crate::redis::describe(&e)),
        },
    }
    Ok(())
}

/// Writes the top-up id into the product's `topup_fence`: the row lock waits out a write the
/// top-up may have in flight, and the top-up's own UPDATE refuses a fenced id afterwards.
async fn fence(t: &Target<'_>, product: &str, id: &str) -> Result<()> {
    let db = t.db;
    let mut tx = db.begin().await.map_err(|e| db.error(&e))?;
    tx.execute(
        "UPDATE seckill_product SET topup_fence = ? WHERE activity_id = ? AND product_id = ?",
        &[Arg::from(id), t.activity.as_str().into(), product.into()],
    )
    .await
    .map_err(|e| db.error(&e))?;
    tx.commit().await.map_err(|e| db.error(&e))
}
