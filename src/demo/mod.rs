//! `demo`: the whole console on an embedded default. A private redis-server child, a SQLite
//! file, a demo activity of a dozen products, preheated, and the worker buying in the
//! background at a modest rate with occasional faults — so that within a minute the operator
//! sees sales, alerts, a compensation entry and drift to fix in the TUI. Everything it started
//! is stopped and removed on exit.

pub mod embedded;

use crate::domain::activity::{Activity, ActivityDef, Product};
use crate::domain::{ActivityId, ProductId};
use crate::error::Result;
use crate::redis::{KeySpace, RedisStore};
use chrono::{DateTime, Duration, Utc};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// The demo activity's id.
pub const DEMO_ACTIVITY: &str = "demo";

/// (id, name, stock, per-user limit): varied stock and limits, one product that sells out fast.
const PRODUCTS: [(&str, &str, i64, i64); 12] = [
    ("phone", "Phone X", 120, 1),
    ("laptop", "Laptop Pro", 40, 1),
    ("headphones", "Headphones", 200, 2),
    ("watch", "Smart watch", 80, 1),
    ("tablet", "Tablet", 60, 1),
    ("camera", "Camera", 30, 1),
    ("speaker", "Speaker", 150, 2),
    ("charger", "Charger", 500, 3),
    ("case", "Phone case", 400, 3),
    ("keyboard", "Keyboard", 100, 2),
    ("mouse", "Mouse", 250, 2),
    ("monitor", "Monitor", 25, 1),
];

/// The demo activity: live from a few minutes ago for two hours.
pub fn activity(now: DateTime<Utc>) -> Result<ActivityDef> {
    let products = PRODUCTS
        .iter()
        .map(|(id, name, stock, limit)| {
            Ok(Product::new(ProductId::parse(id)?, name, *stock, *limit))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(ActivityDef {
        activity: Activity {
            activity_id: ActivityId::parse(DEMO_ACTIVITY)?,
            name: "Demo flash sale".into(),
            starts_at: now - Duration::minutes(5),
            ends_at: now + Duration::hours(2),
            status: crate::domain::activity::ActivityStatus::Scheduled,
        },
        products,
        status_given: true,
    })
}

/// What goes wrong in the demo, on a schedule: lost writes on one product (Redis shows 5 more
/// than there is: drift, oversell risk), then a crashed rollback on another (3 fewer: lost
/// sales). Both are what `fix` repairs.
pub async fn chaos(
    redis: RedisStore,
    keys: KeySpace,
    after: std::time::Duration,
    stop: Arc<AtomicBool>,
) {
    let Ok(activity) = ActivityId::parse(DEMO_ACTIVITY) else {
        return;
    };
    let steps: [(&str, i64); 2] = [("headphones", 5), ("speaker", -3)];
    for (i, (product, delta)) in steps.iter().enumerate() {
        let wait = after * u32::try_from(i + 1).unwrap_or(1);
        let started = tokio::time::Instant::now();
        while started.elapsed() < wait {
            if stop.load(Ordering::Relaxed) {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        let Ok(p) = ProductId::parse(product) else {
            continue;
        };
        let k = keys.product(&activity, &p);
        let _ = redis
            .query(&k.stock, redis::cmd("INCRBY").arg(&k.stock).arg(*delta))
            .await;
    }
}

/// The shop's outbox relay, as the demo plays it: every second it marks the pending messages
/// sent, except for a while after `hold_after` (a broker outage, the demo's third fault): then
/// messages pile up and the outbox alert fires, and clears once the relay is back.
pub async fn relay(
    db: crate::db::Db,
    hold_after: std::time::Duration,
    hold_for: std::time::Duration,
    stop: Arc<AtomicBool>,
) {
    let Ok(activity) = ActivityId::parse(DEMO_ACTIVITY) else {
        return;
    };
    let started = tokio::time::Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let since = started.elapsed();
        let held = since >= hold_after && since < hold_after + hold_for;
        if !held {
            // A failed batch is tried again next second, as a relay would.
            let _ = crate::db::outbox::relay_batch(&db, &activity, 500).await;
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
}
