//! One buyer's attempt under each of the four ways to keep flash-sale stock that the README's
//! "The worker: load and dry runs" compares: one Lua script, DECRBY with a client rollback, a
//! lock, a conditional SQL UPDATE. Every strategy enforces the stock and the per-user limit;
//! they differ in how many round trips that takes and in what a crash or a race in the middle
//! leaves behind.

use super::demand::Request;
use super::stats::Outcome;
use super::{Faults, Strategy};
use crate::db::orders::{NewOrder, insert_in};
use crate::db::{Arg, Db};
use crate::redis::node::is_connection_error;
use crate::redis::scripts::UNLOCK;
use crate::redis::stock::{Deducted, deduct, parse_deduct};
use crate::redis::{ProductKeys, RedisStore};
use redis::{RedisError, Value};
use std::time::{Duration, Instant};

/// One product as the buyers see it.
#[derive(Clone, Debug)]
pub struct Target {
    pub product: String,
    pub keys: std::sync::Arc<ProductKeys>,
    pub limit: i64,
}

/// The strategy-private tables of the `sql` strategy (created in the dry run's own database).
pub const SQL_TABLES: [&str; 2] = [
    "CREATE TABLE IF NOT EXISTS dryrun_stock (product_id TEXT PRIMARY KEY NOT NULL, stock INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS dryrun_holding (product_id TEXT NOT NULL, user_id TEXT NOT NULL, \
     qty INTEGER NOT NULL, PRIMARY KEY (product_id, user_id))",
];

/// How long the `lock` strategy tries to take a lock before it gives up, and its lease.
pub const LOCK_WAIT: Duration = Duration::from_millis(200);
pub const LOCK_LEASE_MS: u64 = 2000;

/// Runs attempts of one strategy.
pub struct Attempter {
    pub redis: RedisStore,
    /// Pipelines the Lua calls of all buyer tasks (the `lua` strategy).
    pub batcher: Option<super::batch::Batcher>,
    pub db: Db,
    pub strategy: Strategy,
    pub faults: Faults,
    pub activity: String,
}

/// A number in [0, 1) from the low bits of a roll.
fn frac(roll: u64) -> f64 {
    (roll & 0xFFFF_FFFF) as f64 / 4_294_967_296.0
}

fn redis_outcome(e: &RedisError) -> Outcome {
    if is_connection_error(e) {
        Outcome::Unknown(crate::redis::describe(e))
    } else {
        Outcome::Error(crate::redis::describe(e))
    }
}

fn int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(i) => Some(*i),
        Value::BulkString(b) => crate::domain::stock::parse_int(b),
        _ => None,
    }
}

impl Attempter {
    /// One attempt; returns the outcome and the Redis round trips it took. `roll` is a random
    /// number for this request (fault decisions).
    pub async fn attempt(&self, t: &Target, req: &Request, roll: u64) -> (Outcome, u32) {
        match self.strategy {
            Strategy::Lua => self.lua(t, req, roll).await,
            Strategy::Hincrby => self.hincrby(t, req, roll).await,
            Strategy::Lock => self.lock(t, req).await,
            Strategy::Sql => (self.sql(t, req).await, 0),
        }
    }

    /// The order of a successful deduction (`pending_payment`).
    pub fn order(&self, t: &Target, req: &Request) -> NewOrder {
        NewOrder {
            order_id: format!("o-{}", req.request_id),
            request_id: req.request_id.clone(),
            activity_id: self.activity.clone(),
            product_id: t.product.clone(),
            user_id: req.user.clone(),
            quantity: req.quantity,
            status: crate::domain::order::OrderStatus::PendingPayment,
        }
    }

    async fn lua(&self, t: &Target, req: &Request, roll: u64) -> (Outcome, u32) {
        let q = req.quantity.to_string();
        if self.faults.timeout > 0.0 && frac(roll) < self.faults.timeout {
            // Half of the injected timeouts lose the request, half lose the reply after Redis
            // ran the script: the caller cannot tell which, exactly as with a real timeout.
            if (roll >> 40) & 1 == 0 {
                return (Outcome::GaveUp("request lost (injected timeout)".into()), 0);
            }
            let _ = deduct(&self.redis, &t.keys, &req.request_id, &req.user, &q).await;
            return (Outcome::GaveUp("reply lost (injected timeout)".into()), 1);
        }
        let reply = match &self.batcher {
            Some(b) => b
                .eval(
                    t.keys.clone(),
                    [
                        req.request_id.clone().into_bytes(),
                        req.user.clone().into_bytes(),
                        q.into_bytes(),
                    ],
                )
                .await
                .and_then(parse_deduct),
            None => deduct(&self.redis, &t.keys, &req.request_id, &req.user, &q).await,
        };
        let outcome = match reply {
            Ok(Deducted::Remaining(n)) => Outcome::Sold(n),
            Ok(Deducted::SoldOut) => Outcome::SoldOut,
            Ok(Deducted::UserLimit) => Outcome::UserLimited,
            Ok(Deducted::Missing) => Outcome::Refused("stock key missing"),
            Ok(Deducted::Paused) => Outcome::Refused(super::stats::PAUSED),
            // A retry of a request whose units went back meanwhile (its compensation entry
            // was resolved): the sale did not happen, and no order may be written for it.
            Ok(Deducted::Returned) => Outcome::Refused("returned (the request's units went back)"),
            Ok(Deducted::OutsideWindow) => Outcome::Refused("outside the sale window"),
            Ok(Deducted::BadArgs) => Outcome::Error("bad arguments".into()),
            Err(e) => redis_outcome(&e),
        };
        (outcome, 1)
    }

    /// DECRBY, then a client-side rollback when the result is negative: the classic
    /// "decrement, then give back" pattern, whose window between the two commands lets other
    /// buyers see a negative stock and be refused for nothing (on the string stock key). The per-user limit is the same dance on the buyers hash.
    async fn hincrby(&self, t: &Target, req: &Request, roll: u64) -> (Outcome, u32) {
        let r = &self.redis;
        let k = &t.keys;
        let q = req.quantity;
        let left = match r
            .query(&k.stock, redis::cmd("DECRBY").arg(&k.stock).arg(q))
            .await
        {
            Ok(v) => int(&v),
            Err(e) => return (redis_outcome(&e), 1),
        };
        let Some(left) = left else {
            return (Outcome::Error("DECRBY returned a non-integer".into()), 1);
        };
        if left < 0 {
            if self.faults.crash_between > 0.0 && frac(roll) < self.faults.crash_between {
                return (
                    Outcome::Error(
                        "client crashed between its decrement and its rollback (injected)".into(),
                    ),
                    1,
                );
            }
            return match r
                .query(&k.stock, redis::cmd("INCRBY").arg(&k.stock).arg(q))
                .await
            {
                Ok(_) => (Outcome::SoldOut, 2),
                Err(e) => (redis_outcome(&e), 2),
            };
        }
        let held = match r
            .query(
                &k.buyers,
                redis::cmd("HINCRBY").arg(&k.buyers).arg(&req.user).arg(q),
            )
            .await
        {
            Ok(v) => int(&v).unwrap_or(i64::MAX),
            Err(e) => return (redis_outcome(&e), 2),
        };
        if held > t.limit {
            let _ = r
                .query(
                    &k.buyers,
                    redis::cmd("HINCRBY").arg(&k.buyers).arg(&req.user).arg(-q),
                )
                .await;
            return match r
                .query(&k.stock, redis::cmd("INCRBY").arg(&k.stock).arg(q))
                .await
            {
                Ok(_) => (Outcome::UserLimited, 4),
                Err(e) => (redis_outcome(&e), 4),
            };
        }
        (Outcome::Sold(left), 2)
    }

    /// SET NX PX per product, read, check, decrement, release with compare-and-delete: correct,
    /// but every buyer of a product waits in one line, and a holder that stalls past the
    /// expiry lets a second one in. Waits up to [`LOCK_WAIT`] for the lock; then the request fails.
    async fn lock(&self, t: &Target, req: &Request) -> (Outcome, u32) {
        let r = &self.redis;
        let k = &t.keys;
        let token = req.request_id.as_str();
        let started = Instant::now();
        let mut trips = 0u32;
        let mut pause = 1u64;
        loop {
            trips += 1;
            let set = redis::cmd("SET")
                .arg(&k.lock)
                .arg(token)
                .arg("NX")
                .arg("PX")
                .arg(LOCK_LEASE_MS)
                .clone();
            match r.query(&k.lock, &set).await {
                Ok(Value::Okay) | Ok(Value::SimpleString(_)) => break,
                Ok(_) => {}
                Err(e) => return (redis_outcome(&e), trips),
            }
            if started.elapsed() >= LOCK_WAIT {
                return (Outcome::LockBusy, trips);
            }
            tokio::time::sleep(Duration::from_millis(pause)).await;
            pause = (pause * 2).min(8);
        }
        let outcome = self.locked_section(t, req, &mut trips).await;
        trips += 1;
        // A failed release is not the buyer's problem: the lease ends the lock anyway.
        let _ = r.eval(&UNLOCK, &[k.lock.as_str()], &[token]).await;
        (outcome, trips)
    }

    async fn locked_section(&self, t: &Target, req: &Request, trips: &mut u32) -> Outcome {
        let r = &self.redis;
        let k = &t.keys;
        let q = req.quantity;
        *trips += 2;
        let stock = match r.query(&k.stock, redis::cmd("GET").arg(&k.stock)).await {
            Ok(Value::Nil) => return Outcome::Refused("stock key missing"),
            Ok(v) => int(&v),
            Err(e) => return redis_outcome(&e),
        };
        let Some(stock) = stock else {
            return Outcome::Error("stock is not an integer".into());
        };
        let held = match r
            .query(&k.buyers, redis::cmd("HGET").arg(&k.buyers).arg(&req.user))
            .await
        {
            Ok(Value::Nil) => 0,
            Ok(v) => int(&v).unwrap_or(i64::MAX),
            Err(e) => return redis_outcome(&e),
        };
        if stock < q {
            return Outcome::SoldOut;
        }
        if held + q > t.limit {
            return Outcome::UserLimited;
        }
        *trips += 2;
        let left = match r
            .query(&k.stock, redis::cmd("DECRBY").arg(&k.stock).arg(q))
            .await
        {
            Ok(v) => int(&v).unwrap_or(stock - q),
            Err(e) => return redis_outcome(&e),
        };
        if let Err(e) = r
            .query(
                &k.buyers,
                redis::cmd("HINCRBY").arg(&k.buyers).arg(&req.user).arg(q),
            )
            .await
        {
            return redis_outcome(&e);
        }
        Outcome::Sold(left)
    }

    /// A conditional UPDATE in one transaction with the holding check and the order: the
    /// database is the gate (`UPDATE ... SET stock = stock - q WHERE stock >= q`), the design
    /// that Redis in front of it replaces when row locks on one hot product become the limit.
    async fn sql(&self, t: &Target, req: &Request) -> Outcome {
        let q = req.quantity;
        let db = &self.db;
        let run = async {
            let mut tx = db.begin().await?;
            let left = tx
                .scalar_i64(
                    "UPDATE dryrun_stock SET stock = stock - ? WHERE product_id = ? AND stock >= ? RETURNING stock",
                    &[Arg::Int(q), t.product.as_str().into(), Arg::Int(q)],
                )
                .await?;
            let Some(left) = left else {
                return Ok::<Outcome, sqlx::Error>(Outcome::SoldOut);
            };
            tx.execute(
                &db.insert_ignore("dryrun_holding (product_id, user_id, qty) VALUES (?, ?, 0)"),
                &[t.product.as_str().into(), req.user.as_str().into()],
            )
            .await?;
            let ok = tx
                .execute(
                    "UPDATE dryrun_holding SET qty = qty + ? WHERE product_id = ? AND user_id = ? AND qty + ? <= ?",
                    &[
                        Arg::Int(q),
                        t.product.as_str().into(),
                        req.user.as_str().into(),
                        Arg::Int(q),
                        Arg::Int(t.limit),
                    ],
                )
                .await?;
            if ok == 0 {
                // Dropping the transaction rolls the stock back.
                return Ok(Outcome::UserLimited);
            }
            insert_in(&mut tx, &self.order(t, req)).await?;
            tx.commit().await?;
            Ok(Outcome::Sold(left))
        };
        match run.await {
            Ok(o) => o,
            Err(e) => Outcome::Error(crate::db::describe(&e)),
        }
    }
}
