//! Orders land asynchronously, as in the architecture the console serves: a buyer gets its
//! answer from Redis at once and its order goes to a writer task, which commits the queued
//! orders with their outbox messages in one transaction per batch. Between the deduction and
//! that commit the deduction is "in flight" — exactly what reconciliation counts as such.

use super::payment::Sold;
use super::stats::Live;
use crate::db::Db;
use crate::db::orders::{NewOrder, insert_with_outbox};
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
    pay: Option<mpsc::Sender<Sold>>,
    live: Arc<Live>,
) -> (mpsc::UnboundedSender<Pending>, JoinHandle<()>) {
    let (tx, mut rx) = mpsc::unbounded_channel::<Pending>();
    let handle = tokio::spawn(async move {
        while let Some(first) = rx.recv().await {
            let mut batch = vec![first];
            while batch.len() < BATCH {
                match rx.try_recv() {
                    Ok(p) => batch.push(p),
                    Err(_) => break,
                }
            }
            let orders: Vec<NewOrder> = batch.iter().map(|p| p.order.clone()).collect();
            let written: Vec<bool> = match insert_with_outbox(&db, &orders).await {
                Ok(()) => vec![true; batch.len()],
                // One bad order must not sink the batch: write them one by one.
                Err(_) => {
                    let mut each = Vec::with_capacity(batch.len());
                    for o in &orders {
                        each.push(
                            insert_with_outbox(&db, std::slice::from_ref(o))
                                .await
                                .is_ok(),
                        );
                    }
                    each
                }
            };
            for (p, ok) in batch.into_iter().zip(written) {
                if ok {
                    if let Some(pay) = &pay {
                        let _ = pay
                            .send(Sold {
                                request_id: p.order.request_id.clone(),
                                keys: (*p.keys).clone(),
                                at: tokio::time::Instant::now(),
                            })
                            .await;
                    }
                    continue;
                }
                // The order could not be written: give the stock back (an app server would);
                // if even that fails the deduction is an orphan that `fix` returns.
                if p.restorable {
                    let _ = restore(&redis, &p.keys, &p.order.request_id).await;
                }
                let c = &live.counters;
                c.succeeded.fetch_sub(1, Ordering::Relaxed);
                c.errors.fetch_add(1, Ordering::Relaxed);
                c.order_failures.fetch_add(1, Ordering::Relaxed);
            }
            // Let the buyers' requests through between two batches.
            tokio::task::yield_now().await;
        }
    });
    (tx, handle)
}
