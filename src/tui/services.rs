//! Connections for the background tasks. Opening one may fail (Redis down at start): the
//! failure is remembered for a moment so that five pollers do not each wait for the same
//! timeout, then the next caller tries again, so the TUI heals by itself. Once open, a Redis
//! handle reconnects its nodes on its own and a database pool its connections.

use crate::ctx::Ctx;
use crate::db::Db;
use crate::error::{Error, Result};
use crate::redis::RedisStore;
use std::time::{Duration, Instant};
use tokio::sync::Mutex;

/// A failed connect is retried after this long.
const RETRY_AFTER: Duration = Duration::from_secs(1);

struct Slot<T> {
    conn: Option<T>,
    failed: Option<(Instant, Error)>,
}

impl<T> Default for Slot<T> {
    fn default() -> Self {
        Slot {
            conn: None,
            failed: None,
        }
    }
}

/// Shared by every poller and job.
pub struct Services {
    pub ctx: Ctx,
    redis: Mutex<Slot<RedisStore>>,
    db: Mutex<Slot<Db>>,
}

impl Services {
    pub fn new(ctx: Ctx) -> Self {
        Services {
            ctx,
            redis: Mutex::new(Slot::default()),
            db: Mutex::new(Slot::default()),
        }
    }

    /// The Redis handle, connecting if needed.
    pub async fn redis(&self) -> Result<RedisStore> {
        cached(&self.redis, || self.ctx.redis()).await
    }

    /// The database pool, connecting if needed.
    pub async fn db(&self) -> Result<Db> {
        cached(&self.db, || self.ctx.db()).await
    }

    /// Closes the pool (SQLite checkpoints its WAL); bounded, so a hung server cannot hold
    /// the exit.
    pub async fn close(&self) {
        let db = match tokio::time::timeout(Duration::from_millis(500), self.db.lock()).await {
            Ok(mut slot) => slot.conn.take(),
            Err(_) => None,
        };
        if let Some(db) = db {
            let _ = tokio::time::timeout(Duration::from_secs(1), db.close()).await;
        }
    }
}

/// The connection in `slot`, or a new one; after a failure, the same error for
/// [`RETRY_AFTER`] instead of a connection attempt per poll.
async fn cached<T: Clone, F: std::future::Future<Output = Result<T>>>(
    slot: &Mutex<Slot<T>>,
    connect: impl FnOnce() -> F,
) -> Result<T> {
    let mut slot = slot.lock().await;
    if let Some(c) = &slot.conn {
        return Ok(c.clone());
    }
    if let Some((at, e)) = &slot.failed
        && at.elapsed() < RETRY_AFTER
    {
        return Err(e.clone());
    }
    match connect().await {
        Ok(c) => {
            slot.conn = Some(c.clone());
            slot.failed = None;
            Ok(c)
        }
        Err(e) => {
            slot.failed = Some((Instant::now(), e.clone()));
            Err(e)
        }
    }
}
