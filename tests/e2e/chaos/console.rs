//! The console's steps: fix, preheat, top-up (and one whose console dies between its
//! writes), pause and resume; the second console that acts at a stage of the first one's
//! write; and the executor of every step.

use super::steps::{Hook, PRODUCTS, Rng, Second, Step};
use super::world::{ACTOR, Order, World, cmd, now_ms, pname};
use seckill_console::ErrorKind;
use seckill_console::db::{Arg, Db};
use seckill_console::domain::{ActivityId, ProductId};
use seckill_console::ops::fix::{FixOptions, FixReport, fix};
use seckill_console::ops::pause::set_paused;
use seckill_console::ops::preheat::{PreheatOptions, PreheatReport, preheat};
use seckill_console::ops::progress::Silent;
use seckill_console::ops::snapshot::Interleave;
use seckill_console::ops::topup::{TopupRequest, topup};
use seckill_console::redis::control::{TopupReply, TopupStep, topup as topup_step};
use seckill_console::redis::{KeySpace, RedisStore};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
use tokio::sync::Mutex;

/// The handles a console call needs, cloned out of the world so that no lock is held while
/// the console runs (its hook takes the lock).
#[derive(Clone)]
pub struct Handles {
    pub store: RedisStore,
    pub db: Db,
    pub keys: KeySpace,
    pub id: ActivityId,
    pub grace: Duration,
}

fn fix_options(h: &Handles, interleave: Interleave) -> FixOptions {
    FixOptions {
        product: None,
        preview: false,
        actor: ACTOR.into(),
        grace: h.grace,
        confirmed: None,
        key_ttl_days: 7,
        interleave,
    }
}

fn preheat_options(h: &Handles, force: bool, interleave: Interleave) -> PreheatOptions {
    PreheatOptions {
        force,
        interleave,
        ..crate::harness::fixtures::preheat_options(ACTOR, h.grace)
    }
}

fn fix_shown(r: &FixReport) -> String {
    let rows: Vec<String> = r
        .products
        .iter()
        .map(|p| {
            format!(
                "{} {} {:?}->{} applied={} ret={} rec={} held={} rel={}{}{}",
                p.product,
                p.plan,
                p.before,
                p.after,
                p.applied,
                p.orphans_returned,
                p.sales_recorded,
                p.held_back,
                p.released,
                if p.conflict { " CONFLICT" } else { "" },
                p.error
                    .as_ref()
                    .map(|e| format!(" error: {e}"))
                    .unwrap_or_default()
            )
        })
        .collect();
    if rows.is_empty() {
        "nothing to do".into()
    } else {
        rows.join("; ")
    }
}

fn preheat_shown(r: &PreheatReport) -> String {
    let rows: Vec<String> = r
        .products
        .iter()
        .map(|p| {
            format!(
                "{} {:?} {:?}->{} written={} verified={}{}",
                p.product,
                p.action,
                p.previous,
                p.stock,
                p.written,
                p.verified,
                p.error
                    .as_ref()
                    .map(|e| format!(" error: {e}"))
                    .unwrap_or_default()
            )
        })
        .collect();
    format!("{}: {}", r.decision, rows.join("; "))
}

/// Whether the outer repair left product `p` clean: reported without conflict or error, or
/// not reported at all (nothing to do).
fn fix_clean(r: &FixReport, p: usize) -> bool {
    r.products
        .iter()
        .find(|row| row.product == pname(p))
        .is_none_or(|row| !row.conflict && row.error.is_none())
}

fn preheat_clean(r: &PreheatReport, p: usize) -> bool {
    let id = pname(p);
    !r.conflicts.iter().any(|c| c.product == id)
        && r.products
            .iter()
            .find(|row| row.product == id)
            .is_some_and(|row| row.error.is_none() && row.verified)
}

impl World {
    pub async fn pause(&mut self, p: usize, pause: bool) {
        let only = [pname(p).to_string()];
        let r = set_paused(
            &self.store,
            &self.db,
            &self.keys,
            &self.id,
            Some(&only),
            pause,
            (ACTOR, ACTOR),
        )
        .await;
        match r {
            Ok(r) => {
                let row = r.products.first();
                let ok = row.is_some_and(|row| row.error.is_none());
                if ok && pause {
                    self.fx.paused_written[p] = true;
                }
                self.say(format!(
                    "   {} {}: {:?}",
                    if pause { "pause" } else { "resume" },
                    pname(p),
                    row
                ));
            }
            Err(e) => self.violation(
                "E-console-error",
                format!("{} failed: {e}", if pause { "pause" } else { "resume" }),
            ),
        }
    }

    pub async fn topup_inner(&mut self, p: usize, change: i64) {
        let h = self.handles();
        let line = run_topup(&h, p, change, Interleave::default()).await;
        self.topup_result(line);
    }

    fn topup_result(&mut self, r: Result<String, String>) {
        match r {
            Ok(line) => self.say(line),
            Err(e) => self.violation("E-console-error", e),
        }
    }

    /// A second console's action, or buyers, at a stage of the first console's write.
    pub async fn second(&mut self, a: &Second) {
        let h = self.handles();
        match a {
            Second::Fix => match fix(
                &h.store,
                &h.db,
                &h.keys,
                &h.id,
                &fix_options(&h, Interleave::default()),
            )
            .await
            {
                Ok(r) => self.say(format!("   second fix: {}", fix_shown(&r))),
                Err(e) => self.violation("E-console-error", format!("second fix failed: {e}")),
            },
            Second::Topup { p, change } => self.topup_inner(*p, *change).await,
            Second::Pause { p, pause } => self.pause(*p, *pause).await,
            Second::PreheatForce => {
                let o = preheat_options(&h, true, Interleave::default());
                match preheat(&h.store, &h.db, &h.keys, &h.id, &o, &Silent).await {
                    Ok(r) => self.say(format!("   second preheat --force: {}", preheat_shown(&r))),
                    Err(e) => {
                        self.violation("E-console-error", format!("second preheat failed: {e}"))
                    }
                }
            }
            Second::Buyers { n, seed } => {
                let mut r = Rng::new(u64::from(*seed));
                for _ in 0..*n {
                    match r.below(6) {
                        0 | 1 => {
                            let (p, user, units) = (
                                r.index(PRODUCTS.len()),
                                r.index(super::steps::USERS),
                                1 + r.below(2) as i64,
                            );
                            self.deduct_new(p, user, units).await;
                        }
                        2 => {
                            let (pick, late) = (r.pick(), u32::try_from(r.below(800)).unwrap_or(0));
                            self.land(pick, late).await;
                        }
                        3 => self.pay(r.pick()).await,
                        4 => self.expire(r.pick()).await,
                        _ => self.give_back(r.pick()).await,
                    }
                }
            }
        }
    }

    /// A top-up whose console dies between its writes.
    pub async fn crash_topup(&mut self, p: usize, change: i64, db: bool, aged: bool) {
        let initial = self.products[p].initial;
        // Its console checked the change as a top-up does before its first write.
        let held: i64 = self
            .deds
            .iter()
            .filter(|d| d.p == p && d.order != Some(Order::Ended { given_back: true }))
            .map(|d| d.units)
            .sum();
        if initial + change < held.max(0) {
            self.say(format!(
                "   crash top-up {change:+} refused: {held} held of {initial}"
            ));
            return;
        }
        self.next += 1;
        let id = format!("crash{}", self.next);
        let keys = self.pkeys(p);
        let r = topup_step(&self.store, &keys, TopupStep::Begin(change), &id).await;
        self.say(format!(
            "   crash top-up {id} {change:+} of {}: begin -> {r:?}",
            pname(p)
        ));
        if !matches!(r, Ok(TopupReply::Done(_))) {
            return;
        }
        if db {
            let n = self
                .db
                .execute(
                    "UPDATE seckill_product SET initial_stock = initial_stock + ? WHERE activity_id = ? AND product_id = ? \
                     AND initial_stock = ? AND (topup_fence IS NULL OR topup_fence <> ?)",
                    &[
                        Arg::Int(change),
                        self.activity.as_str().into(),
                        pname(p).into(),
                        Arg::Int(initial),
                        id.as_str().into(),
                    ],
                )
                .await
                .expect("the top-up's database write");
            self.say(format!(
                "   database write: {n} row(s); then its console dies"
            ));
        } else {
            self.say("   its console dies before the database write");
        }
        if aged {
            self.lease_pass(p).await;
        }
    }

    /// Backdates a top-up marker by the lease (time passing, without the wait).
    pub async fn lease_pass(&mut self, p: usize) {
        let keys = self.pkeys(p);
        let Ok(redis::Value::BulkString(raw)) =
            cmd(&self.store, &[b"HGET", keys.meta.as_bytes(), b"topup"]).await
        else {
            return;
        };
        let text = String::from_utf8_lossy(&raw).to_string();
        let mut parts = text.rsplitn(2, '|');
        let (_, head) = (parts.next(), parts.next());
        let Some(head) = head else {
            return;
        };
        let old = format!(
            "{head}|{}",
            now_ms() - seckill_console::ops::repair::TOPUP_LEASE_MS - 1_000
        );
        let _ = cmd(
            &self.store,
            &[b"HSET", keys.meta.as_bytes(), b"topup", old.as_bytes()],
        )
        .await;
        self.say(format!("   the lease of top-up '{text}' passes: '{old}'"));
        // In production the lease passes by the clock alone, which a live view reads on every
        // refresh; here the marker is backdated by hand, a write no event shows.
        self.recut_live();
    }
}

/// One top-up through the console; the line to log, or the unexpected error.
pub async fn run_topup(
    h: &Handles,
    p: usize,
    change: i64,
    interleave: Interleave,
) -> Result<String, String> {
    let pid = ProductId::parse(pname(p)).expect("product id");
    let r = topup(
        &h.store,
        &h.db,
        &h.keys,
        &TopupRequest {
            activity: &h.id,
            product: &pid,
            change,
            actor: ACTOR,
            reason: ACTOR,
            grace: h.grace,
            interleave,
        },
    )
    .await;
    match r {
        Ok(r) => Ok(format!(
            "   topup {} {change:+}: initial {} -> {}, redis {:?} -> {:?}",
            pname(p),
            r.initial_before,
            r.initial_after,
            r.redis_before,
            r.redis_after
        )),
        // Refusals are answers: a cut below what is held, a product that needs a fix first,
        // another top-up between its writes.
        Err(e)
            if matches!(
                e.kind,
                ErrorKind::Refused | ErrorKind::BadInput | ErrorKind::CheckFailed
            ) =>
        {
            Ok(format!(
                "   topup {} {change:+}: {:?}: {}",
                pname(p),
                e.kind,
                e.message
            ))
        }
        Err(e) => Err(format!("topup of {} failed: {e}", pname(p))),
    }
}

/// The hook that runs `hook`'s action the `nth` time the console reaches its stage, and a
/// counter that says whether it did.
fn interleave(world: &Arc<Mutex<World>>, hook: Option<&Hook>) -> (Interleave, Arc<AtomicU32>) {
    let seen = Arc::new(AtomicU32::new(0));
    let Some(h) = hook.cloned() else {
        return (Interleave::default(), seen);
    };
    let (world, count) = (world.clone(), seen.clone());
    let il = Interleave::new(move |stage| {
        let (world, count, h) = (world.clone(), count.clone(), h.clone());
        Box::pin(async move {
            if stage != h.stage || count.fetch_add(1, Ordering::SeqCst) != h.nth {
                return;
            }
            let mut w = world.lock().await;
            w.say(format!("   @{stage:?} #{}: {}", h.nth, h.action));
            w.second(&h.action).await;
        })
    });
    (il, seen)
}

/// Executes one step. Buyer steps and faults run under the world's lock; the console runs
/// without it, so that its hook can take it.
pub async fn exec(world: &Arc<Mutex<World>>, step: &Step) {
    let (il, seen) = interleave(world, step.hook());
    let h = world.lock().await.handles();
    match step {
        Step::Fix { .. } => {
            let r = fix(&h.store, &h.db, &h.keys, &h.id, &fix_options(&h, il)).await;
            let mut w = world.lock().await;
            match r {
                Ok(r) => {
                    w.say(format!("   fix: {}", fix_shown(&r)));
                    for p in 0..PRODUCTS.len() {
                        w.fx.clean[p] = fix_clean(&r, p);
                    }
                }
                Err(e) => w.violation("E-console-error", format!("fix failed: {e}")),
            }
        }
        Step::Preheat { force, .. } => {
            let o = preheat_options(&h, *force, il);
            let r = preheat(&h.store, &h.db, &h.keys, &h.id, &o, &Silent).await;
            let mut w = world.lock().await;
            match r {
                Ok(r) => {
                    w.say(format!(
                        "   preheat{}: {}",
                        if *force { " --force" } else { "" },
                        preheat_shown(&r)
                    ));
                    for p in 0..PRODUCTS.len() {
                        w.fx.clean[p] = preheat_clean(&r, p);
                    }
                }
                Err(e) => w.violation("E-console-error", format!("preheat failed: {e}")),
            }
        }
        Step::Topup { p, change, .. } => {
            let r = run_topup(&h, *p, *change, il).await;
            world.lock().await.topup_result(r);
        }
        other => {
            let mut w = world.lock().await;
            match other {
                Step::Deduct { p, user, units } => w.deduct_new(*p, *user, *units).await,
                Step::Retry { pick } => w.retry(*pick).await,
                Step::Land { pick, late_ms } => w.land(*pick, *late_ms).await,
                Step::Abandon { pick } => w.abandon(*pick),
                Step::Pay { pick } => w.pay(*pick).await,
                Step::Expire { pick } => w.expire(*pick).await,
                Step::GiveBack { pick } => w.give_back(*pick).await,
                Step::Compensate { pick } => w.compensate(*pick).await,
                Step::Resolve => w.resolve().await,
                Step::Wait { pick } => w.wait(*pick).await,
                Step::Clock { behind_ms } => {
                    w.behind_ms = i64::from(*behind_ms);
                    w.say(format!("   the database clock now lags {behind_ms} ms"));
                }
                Step::CrashTopup {
                    p,
                    change,
                    db,
                    aged,
                } => {
                    w.crash_topup(*p, *change, *db, *aged).await;
                }
                Step::Pause { p, pause } => w.pause(*p, *pause).await,
                Step::LeasePass { p } => w.lease_pass(*p).await,
                Step::Checkpoint { p } => w.checkpoint(*p).await,
                Step::Reconnect => w.reconnect(),
                Step::Migrate { p } => w.migrate(*p).await,
                fault => w.fault(fault).await,
            }
        }
    }
    if let Some(h) = step.hook()
        && seen.load(Ordering::SeqCst) <= h.nth
    {
        world
            .lock()
            .await
            .say("   (the hook's stage was not reached: the second action did not run)");
    }
}
