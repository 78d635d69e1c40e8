//! The payment step of `load`: a share of the orders is paid, the rest expire after the payment
//! window and their stock goes back through the restore script — the order first, then the
//! stock, so a crash in between leaves an orphan that reconciliation finds (never a sale that
//! Redis forgot).

use super::demand::mix;
use super::stats::Live;
use crate::db::{Db, orders};
use crate::redis::stock::{Restored, restore};
use crate::redis::{ProductKeys, RedisStore};
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// How orders are settled.
#[derive(Clone, Debug, PartialEq)]
pub struct PaymentSpec {
    /// Share of the orders that get paid (0.0 to 1.0).
    pub pay_share: f64,
    /// Unpaid orders expire after this.
    pub window: Duration,
    pub seed: u64,
}

/// A sold order handed to the payment step.
#[derive(Clone, Debug)]
pub struct Sold {
    pub request_id: String,
    pub keys: std::sync::Arc<ProductKeys>,
    pub at: Instant,
}

fn pays(spec: &PaymentSpec, request_id: &str) -> bool {
    let h = request_id
        .bytes()
        .fold(spec.seed, |acc, b| mix(acc ^ u64::from(b)));
    (h % 10_000) as f64 / 10_000.0 < spec.pay_share
}

/// Settles orders as they arrive until the channel closes and the last window has passed.
pub async fn settle(
    mut rx: mpsc::Receiver<Sold>,
    redis: RedisStore,
    db: Db,
    (spec, clock): (PaymentSpec, super::run::OrderClock),
    live: std::sync::Arc<Live>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) {
    let mut to_pay: Vec<String> = Vec::new();
    let mut to_expire: VecDeque<Sold> = VecDeque::new();
    let mut open = true;
    let flush_every = Duration::from_millis(100);
    let mut next_flush = Instant::now() + flush_every;
    while open || !to_expire.is_empty() || !to_pay.is_empty() {
        // A stopped run does not wait out the payment window: unpaid orders stay
        // `pending_payment`, exactly as if the payment service went away.
        if !open && to_pay.is_empty() && stop.load(Ordering::Relaxed) {
            break;
        }
        let next_due = to_expire.front().map(|s| s.at + spec.window);
        let wake = match next_due {
            Some(d) if d < next_flush => d,
            _ => next_flush,
        };
        tokio::select! {
            msg = rx.recv(), if open => match msg {
                Some(sold) => {
                    if pays(&spec, &sold.request_id) {
                        to_pay.push(sold.request_id);
                    } else {
                        to_expire.push_back(sold);
                    }
                }
                None => open = false,
            },
            _ = tokio::time::sleep_until(wake) => {}
        }
        let now = Instant::now();
        if now >= next_flush || (!open && !to_pay.is_empty()) {
            next_flush = now + flush_every;
            if !to_pay.is_empty() {
                match orders::pay_at(&db, &to_pay, clock.now()).await {
                    Ok(n) => {
                        live.counters.paid.fetch_add(n, Ordering::Relaxed);
                    }
                    Err(e) => tracing::warn!(error = %e, "payment step: paying orders failed"),
                }
                to_pay.clear();
            }
        }
        let due = take_due(&mut to_expire, spec.window, Instant::now());
        if !due.is_empty() {
            expire(&redis, &db, &due, clock.now(), &live).await;
        }
    }
}

/// The most orders expired in one transaction: short enough that the order writer's inserts
/// never queue long behind it.
const EXPIRE_BATCH: usize = 500;

/// Takes the orders whose payment window has passed by `now` (oldest first, at most
/// [`EXPIRE_BATCH`]).
fn take_due(to_expire: &mut VecDeque<Sold>, window: Duration, now: Instant) -> Vec<Sold> {
    let n = to_expire
        .iter()
        .take(EXPIRE_BATCH)
        .take_while(|s| s.at + window <= now)
        .count();
    to_expire.drain(..n).collect()
}

/// Expires `due` in the database, then returns the stock of each order that changed: the order
/// first, then the stock, so a crash in between leaves orphans that `fix` returns once the
/// grace window has passed (never a sale Redis forgot).
async fn expire(
    redis: &RedisStore,
    db: &Db,
    due: &[Sold],
    now: chrono::DateTime<chrono::Utc>,
    live: &Live,
) {
    let ids: Vec<&str> = due.iter().map(|s| s.request_id.as_str()).collect();
    let changed = match orders::expire_at(db, &ids, now).await {
        Ok(changed) => changed,
        Err(e) => {
            tracing::warn!(error = %e, "payment step: expiring orders failed");
            return;
        }
    };
    let restores = due
        .iter()
        .zip(changed)
        .filter(|(_, changed)| *changed)
        .map(|(sold, _)| restore(redis, &sold.keys, &sold.request_id));
    // Concurrent on the multiplexed connection: one round trip's wait for the batch.
    for result in futures::future::join_all(restores).await {
        live.counters.expired.fetch_add(1, Ordering::Relaxed);
        // The order is expired and, unless its units came back now, the ledger still holds the
        // deduction: an orphan that `fix` returns once the grace window has passed.
        // Counted, not logged one by one: a run on a product that lost its keys answers -1 to
        // thousands of them (the summary says how many).
        let failed = match &result {
            Ok(Restored::Returned(_) | Restored::AlreadyReturned) => false,
            Ok(_) => true,
            Err(e) => {
                tracing::warn!(error = %crate::redis::describe(e), "payment step: restore failed");
                true
            }
        };
        if failed {
            live.counters
                .restore_failures
                .fetch_add(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pay_share_is_respected() {
        let spec = PaymentSpec {
            pay_share: 0.7,
            window: Duration::from_secs(1),
            seed: 1,
        };
        let paid = (0..10_000)
            .filter(|i| pays(&spec, &format!("r-{i}")))
            .count();
        assert!((6_700..7_300).contains(&paid), "{paid}");
    }
}
