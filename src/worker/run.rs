//! The runner: concurrent buyer tasks over the demand stream, an optional request rate, fault
//! tasks (SCRIPT FLUSH), a watcher that samples the stock for negative values, the payment step,
//! and the final figures.

use super::demand::{Demand, mix};
use super::payment::{PaymentSpec, Sold, settle};
use super::stats::{Live, Outcome, RunStats};
use super::strategy::{Attempter, Target};
use super::{Faults, SCRIPT_FLUSH_EVERY, Strategy};
use crate::db::compensation::{self, NewCompensation};
use crate::db::{Db, activity as activities, orders};
use crate::domain::ActivityId;
use crate::error::{Error, Result};
use crate::redis::{KeySpace, Keyed, RedisStore};
use redis::Value;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// The shared live state of a run (counters, latency window), for progress and the TUI.
pub type LiveStats = Live;

/// What to run.
#[derive(Clone, Debug)]
pub struct LoadSpec {
    pub activity: ActivityId,
    pub keys: KeySpace,
    pub strategy: Strategy,
    pub demand: Demand,
    /// Requests in flight at once.
    pub concurrency: usize,
    /// Requests per second over all buyers; None: as fast as they go.
    pub rate: Option<f64>,
    pub faults: Faults,
    /// The payment step (`load`); None leaves every order `pending_payment` (dry runs).
    pub payment: Option<PaymentSpec>,
    /// Sample the stock while the run goes on and count negative values.
    pub watch_negative: bool,
    /// Retries of a request whose outcome is unknown (Lua only: idempotent per request id).
    pub retries: u32,
    /// How the orders are stamped and committed (a drill of late commits and clocks off).
    pub clock: OrderClock,
}

/// How the worker's order writer and payment step stamp and commit, for drills: an app server
/// (or database) whose clock is off by `skew_ms`, and commits that land up to
/// `commit_delay_ms` after their stamp.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OrderClock {
    pub skew_ms: i64,
    pub commit_delay_ms: u64,
}

impl OrderClock {
    /// The stamp an order written now carries.
    pub fn now(&self) -> chrono::DateTime<chrono::Utc> {
        chrono::Utc::now() + chrono::Duration::milliseconds(self.skew_ms)
    }
}

/// Pause before retrying a request whose outcome was unknown (lets the connection heal).
const RETRY_PAUSE: Duration = Duration::from_millis(20);

/// Latencies a buyer task collects before it hands them in.
const LATENCY_BATCH: usize = 64;
/// The watcher samples at most this many products per round.
const WATCH_SAMPLE: usize = 64;

/// Runs the buyers against `spec.activity` and returns the figures. Stops early (with what it
/// has) when `stop` is set.
pub async fn run_load(
    redis: &RedisStore,
    db: &Db,
    spec: &LoadSpec,
    live: Arc<Live>,
    stop: Arc<AtomicBool>,
) -> Result<RunStats> {
    if spec.concurrency == 0 || spec.concurrency > 10_000 {
        return Err(Error::bad_input(format!(
            "concurrency {} is out of range: use 1 to 10000",
            spec.concurrency
        )));
    }
    if let Some(rate) = spec.rate
        && !(rate > 0.0 && rate.is_finite())
    {
        return Err(Error::bad_input(format!(
            "rate {rate} is not a positive number of requests per second"
        )));
    }
    let products = activities::products(db, &spec.activity).await?;
    if products.is_empty() {
        return Err(Error::bad_input(format!(
            "activity '{}' has no products",
            spec.activity
        )));
    }
    let targets: Arc<Vec<Target>> = Arc::new(
        products
            .iter()
            .map(|p| Target {
                product: p.product_id.to_string(),
                keys: Arc::new(spec.keys.product(&spec.activity, &p.product_id)),
                limit: p.per_user_limit,
            })
            .collect(),
    );
    let mut demand = spec.demand.clone();
    demand.products = targets.len();
    let demand = Arc::new(demand);
    let total = demand.total();
    live.total.store(total as u64, Ordering::Relaxed);
    let attempter = Arc::new(Attempter {
        redis: redis.clone(),
        batcher: (spec.strategy == Strategy::Lua)
            .then(|| super::batch::Batcher::new(redis.clone(), &crate::redis::scripts::DEDUCT)),
        db: db.clone(),
        strategy: spec.strategy,
        faults: spec.faults,
        activity: spec.activity.to_string(),
    });
    let done = Arc::new(AtomicBool::new(false));

    let flusher = spec.faults.script_flush.then(|| {
        let (redis, done) = (redis.clone(), done.clone());
        tokio::spawn(async move {
            while !done.load(Ordering::Relaxed) {
                tokio::time::sleep(SCRIPT_FLUSH_EVERY).await;
                let nodes: Vec<_> = redis.nodes().into_iter().map(|(n, _)| n).collect();
                let _ = redis
                    .on_nodes(&nodes, redis::cmd("SCRIPT").arg("FLUSH"))
                    .await;
            }
        })
    });
    let watcher = spec.watch_negative.then(|| {
        let (redis, done, live, targets) =
            (redis.clone(), done.clone(), live.clone(), targets.clone());
        tokio::spawn(async move {
            let mut round = 0usize;
            while !done.load(Ordering::Relaxed) {
                let items: Vec<Keyed> = (0..targets.len().min(WATCH_SAMPLE))
                    .map(|j| {
                        let t = &targets[(round * WATCH_SAMPLE + j) % targets.len()];
                        Keyed::new(
                            t.keys.stock.clone(),
                            redis::cmd("GET").arg(&t.keys.stock).clone(),
                        )
                    })
                    .collect();
                round += 1;
                let negative = redis
                    .pipeline(items)
                    .await
                    .iter()
                    .any(|r| matches!(r, Ok(Value::BulkString(b)) if b.first() == Some(&b'-')));
                if negative {
                    live.counters.negative_seen.fetch_add(1, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        })
    });
    let (pay_tx, payer) = match &spec.payment {
        Some(p) => {
            let (tx, rx) = mpsc::channel::<Sold>(4096);
            let handle = tokio::spawn(settle(
                rx,
                redis.clone(),
                db.clone(),
                (p.clone(), spec.clock),
                live.clone(),
                stop.clone(),
            ));
            (Some(tx), Some(handle))
        }
        None => (None, None),
    };

    let (order_tx, writer) = if spec.strategy == Strategy::Sql {
        (None, None)
    } else {
        let (tx, handle) = super::orders::spawn(
            db.clone(),
            redis.clone(),
            (pay_tx.clone(), spec.clock),
            live.clone(),
        );
        (Some(tx), Some(handle))
    };
    let started = Instant::now();
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::with_capacity(spec.concurrency);
    for _ in 0..spec.concurrency.min(total.max(1)) {
        let ctx = TaskCtx {
            attempter: attempter.clone(),
            targets: targets.clone(),
            demand: demand.clone(),
            live: live.clone(),
            next: next.clone(),
            stop: stop.clone(),
            pay: pay_tx.clone(),
            orders: order_tx.clone(),
            rate: spec.rate,
            retries: spec.retries,
            started,
        };
        tasks.push(tokio::spawn(buyer(ctx)));
    }
    drop(pay_tx);
    drop(order_tx);
    for t in tasks {
        let _ = t.await;
    }
    let hist = live.run_histogram();
    let elapsed = started.elapsed();
    // Every order lands before the figures are taken (and before the payment step ends).
    if let Some(w) = writer {
        let _ = w.await;
    }
    done.store(true, Ordering::Relaxed);
    for h in [flusher, watcher].into_iter().flatten() {
        let _ = h.await;
    }
    if let Some(p) = payer {
        let _ = p.await;
    }
    live.finish();

    let mut stats = RunStats::from_run(spec.strategy.as_str(), &live.counters, &hist, elapsed);
    let sold = orders::sold_by_product(db, &spec.activity).await?;
    // The initial stock as it stands now: a top-up during the run made room for more.
    let products = crate::db::activity::products(db, &spec.activity)
        .await
        .unwrap_or(products);
    for p in &products {
        let s = sold.get(p.product_id.as_str()).copied().unwrap_or(0);
        stats.sold += s;
        stats.stock += p.initial_stock;
        stats.oversold += (s - p.initial_stock).max(0);
    }
    Ok(stats)
}

struct TaskCtx {
    attempter: Arc<Attempter>,
    targets: Arc<Vec<Target>>,
    demand: Arc<Demand>,
    live: Arc<Live>,
    next: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    pay: Option<mpsc::Sender<Sold>>,
    orders: Option<mpsc::UnboundedSender<super::orders::Pending>>,
    rate: Option<f64>,
    retries: u32,
    started: Instant,
}

/// One buyer task: takes the next request of the stream until the stream (or the run) ends.
async fn buyer(ctx: TaskCtx) {
    let mut latencies: Vec<u64> = Vec::with_capacity(LATENCY_BATCH);
    let total = ctx.demand.total();
    loop {
        if ctx.stop.load(Ordering::Relaxed) {
            break;
        }
        let i = ctx.next.fetch_add(1, Ordering::Relaxed);
        if i >= total {
            break;
        }
        if let Some(rate) = ctx.rate {
            tokio::time::sleep_until(ctx.started + Duration::from_secs_f64(i as f64 / rate)).await;
        }
        let req = ctx.demand.request(i);
        let Some(t) = ctx.targets.get(req.product) else {
            continue;
        };
        let sent = Instant::now();
        let roll = mix(ctx.demand.seed ^ (i as u64));
        let (mut outcome, mut trips) = ctx.attempter.attempt(t, &req, roll).await;
        latencies.push(u64::try_from(sent.elapsed().as_micros()).unwrap_or(u64::MAX));
        // A dropped connection or a timeout: retry with the same request id, which the
        // script answers with its first result if it already ran. Only the Lua path is
        // idempotent; the alternatives would deduct twice.
        let mut left = if ctx.attempter.strategy == Strategy::Lua {
            ctx.retries
        } else {
            0
        };
        while left > 0
            && matches!(outcome, Outcome::Unknown(_))
            && !ctx.stop.load(Ordering::Relaxed)
        {
            left -= 1;
            tokio::time::sleep(RETRY_PAUSE).await;
            let (o, extra) = ctx.attempter.attempt(t, &req, roll).await;
            outcome = o;
            trips += extra;
            ctx.live.counters.retries.fetch_add(1, Ordering::Relaxed);
        }
        let outcome = after(&ctx, t, &req, outcome).await;
        let c = &ctx.live.counters;
        c.round_trips.fetch_add(u64::from(trips), Ordering::Relaxed);
        c.record(&outcome);
        if latencies.len() >= LATENCY_BATCH {
            ctx.live.record_latencies(&latencies);
            latencies.clear();
        }
    }
    ctx.live.record_latencies(&latencies);
}

/// What an app server does after the deduction: the order and its outbox message for a sale
/// (the `sql` strategy wrote them in its own transaction), a compensation entry for an unknown
/// outcome.
async fn after(
    ctx: &TaskCtx,
    t: &Target,
    req: &super::demand::Request,
    outcome: Outcome,
) -> Outcome {
    let a = &ctx.attempter;
    match outcome {
        Outcome::Sold(left) => {
            // The `sql` strategy committed its order with the stock; the others hand it to the
            // order writer (asynchronously, as the orders of a real sale land).
            if a.strategy != Strategy::Sql
                && let Some(w) = &ctx.orders
            {
                let _ = w.send(super::orders::Pending {
                    order: a.order(t, req),
                    keys: t.keys.clone(),
                    restorable: a.strategy == Strategy::Lua,
                });
            } else if let Some(pay) = &ctx.pay {
                let _ = pay
                    .send(Sold {
                        request_id: req.request_id.clone(),
                        keys: t.keys.clone(),
                        at: Instant::now(),
                    })
                    .await;
            }
            Outcome::Sold(left)
        }
        Outcome::Unknown(why) | Outcome::GaveUp(why) => {
            let entry = NewCompensation {
                request_id: req.request_id.clone(),
                activity_id: a.activity.clone(),
                product_id: t.product.clone(),
                user_id: req.user.clone(),
                quantity: req.quantity,
                reason: why.clone(),
            };
            if compensation::insert(&a.db, &entry).await.unwrap_or(false) {
                ctx.live
                    .counters
                    .compensation_entries
                    .fetch_add(1, Ordering::Relaxed);
            }
            Outcome::Unknown(why)
        }
        other => other,
    }
}
