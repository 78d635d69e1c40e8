//! Orders land asynchronously, as in the architecture the console serves: a buyer gets its
//! answer from Redis at once and its order goes to a writer task, which commits the queued
//! orders with their outbox messages in one transaction per batch. Between the deduction and
//! that commit the deduction is "in flight" — exactly what reconciliation counts as such.

use super::payment::Sold;
use super::stats::Live;
use crate::db::Db;
use crate::db::orders::{NewOrder, insert_with_outbox_at};
use crate::redis::stock::restore;
use crate::redis::{ProductKeys, RedisStore};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// Orders per transaction at most: large enough to amortise the commit, small enough that
/// building one batch never holds the buyers' thread for long.
const BATCH: usize = 100;

/// An order to write, with what is needed if it cannot be.
pub struct Pending {
    pub order: NewOrder,
    pub keys: Arc<ProductKeys>,
    /// The deduction can be given back with `restore.lua` (the Lua path keeps a ledger).
    pub restorable: bool,
}

/// The writer's queue; dropping every sender ends the writer after the last batch.
pub fn spawn(
    db: Db,
    redis: RedisStore,
    (pay, clock): (Option<mpsc::Sender<Sold>>, super::run::OrderClock),
    live: Arc<Live>,
) -> (mpsc::UnboundedSender<Pending>, JoinHandle<()>) {
    let (tx, mut rx) = mpsc::unbounded_channel::<Pending>();
    let handle = tokio::spawn(async move {
        let mut late: Vec<JoinHandle<()>> = Vec::new();
        while let Some(first) = rx.recv().await {
            let mut batch = vec![first];
            while batch.len() < BATCH {
                match rx.try_recv() {
                    Ok(p) => batch.push(p),
                    Err(_) => break,
                }
            }
            let out = Written {
                db: db.clone(),
                redis: redis.clone(),
                pay: pay.clone(),
                live: live.clone(),
            };
            // Stamped now (by the drill's clock); a drill of late commits lands each batch up
            // to its delay later, as a slow writer does, while the next batches go on.
            let stamp = clock.now();
            if clock.commit_delay_ms > 0 {
                let wait = super::demand::mix(u64::try_from(stamp.timestamp_micros()).unwrap_or(0))
                    % (clock.commit_delay_ms + 1);
                late.retain(|h| !h.is_finished());
                late.push(tokio::spawn(async move {
                    tokio::time::sleep(std::time::Duration::from_millis(wait)).await;
                    out.write(batch, stamp).await;
                }));
            } else {
                out.write(batch, stamp).await;
            }
            // Let the buyers' requests through between two batches.
            tokio::task::yield_now().await;
        }
        for h in late {
            let _ = h.await;
        }
    });
    (tx, handle)
}

/// Where a batch of orders goes, and what follows it.
struct Written {
    db: Db,
    redis: RedisStore,
    pay: Option<mpsc::Sender<Sold>>,
    live: Arc<Live>,
}

impl Written {
    /// Writes one batch (one by one if the batch fails), then hands each order written to the
    /// payment step; an order that cannot be written gives its stock back.
    async fn write(&self, batch: Vec<Pending>, stamp: chrono::DateTime<chrono::Utc>) {
        let orders: Vec<NewOrder> = batch.iter().map(|p| p.order.clone()).collect();
        let written: Vec<bool> = match insert_with_outbox_at(&self.db, &orders, stamp).await {
            Ok(()) => vec![true; batch.len()],
            // One bad order must not sink the batch: write them one by one.
            Err(_) => {
                let mut each = Vec::with_capacity(batch.len());
                for o in &orders {
                    each.push(
                        insert_with_outbox_at(&self.db, std::slice::from_ref(o), stamp)
                            .await
                            .is_ok(),
                    );
                }
                each
            }
        };
        // An order that failed because one with its request id exists already (a retry, or an
        // id used twice) must keep its deduction: restoring it would leave that order without
        // one. Only a request with no order at all gives its units back.
        let failed: Vec<&str> = batch
            .iter()
            .zip(&written)
            .filter(|(_, ok)| !**ok)
            .map(|(p, _)| p.order.request_id.as_str())
            .collect();
        let existing: std::collections::HashSet<String> = if failed.is_empty() {
            std::collections::HashSet::new()
        } else {
            let activity = batch
                .first()
                .and_then(|p| crate::domain::ActivityId::parse(&p.order.activity_id).ok());
            let found = match &activity {
                Some(a) => crate::db::orders::statuses(&self.db, a, &failed).await.ok(),
                None => None,
            };
            match found {
                Some(found) => found.into_keys().collect(),
                // Not known: restore nothing (an orphan `fix` returns beats a lost order).
                None => failed.iter().map(|r| r.to_string()).collect(),
            }
        };
        for (p, ok) in batch.into_iter().zip(written) {
            if ok {
                if let Some(pay) = &self.pay {
                    let _ = pay
                        .send(Sold {
                            request_id: p.order.request_id.clone(),
                            keys: p.keys.clone(),
                            at: tokio::time::Instant::now(),
                        })
                        .await;
                }
                continue;
            }
            // The order could not be written: give the stock back (an app server would), unless
            // an order of its request exists; if even that fails the deduction is an orphan
            // that `fix` returns.
            if p.restorable && !existing.contains(&p.order.request_id) {
                let _ = restore(&self.redis, &p.keys, &p.order.request_id).await;
            }
            let c = &self.live.counters;
            if let Ok(mut reasons) = c.error_reasons.lock() {
                let why = if existing.contains(&p.order.request_id) {
                    "order exists already (request id used before)"
                } else {
                    "order write failed"
                };
                *reasons.entry(why.to_string()).or_default() += 1;
            }
            c.succeeded.fetch_sub(1, Ordering::Relaxed);
            c.errors.fetch_add(1, Ordering::Relaxed);
            c.order_failures.fetch_add(1, Ordering::Relaxed);
        }
    }
}
