//! A dry run started from the TUI, on a thread with its own single-threaded runtime and its own
//! Redis and database connections: its buyer tasks (up to 10,000) never queue in front of the
//! render loop, whatever the concurrency. It runs the strategies one after the other with the
//! same seed (the same demand), so that the stop flag is also looked at between strategies,
//! and sends the running strategy's live figures about once a second, then each strategy's
//! result, then the end.

use super::action::Action;
use crate::ctx::Ctx;
use crate::domain::ActivityId;
use crate::error::{Error, Result};
use crate::worker::demand::mix;
use crate::worker::dry_run::{DryRunSpec, dry_run};
use crate::worker::{Faults, Live, Strategy};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tokio::sync::mpsc::UnboundedSender;

/// How often the live figures are sent: `Live::snapshot` computes its rate and percentiles
/// over the time since the previous call, so one steady caller at this pace.
pub const PROGRESS_EVERY: Duration = Duration::from_secs(1);
/// The share of buyers who click repeatedly (the `dry-run` command's default).
const REPEAT_SHARE: f64 = 0.1;

/// The strategy running now and its live counters, as the observer hands them over.
type Shown = Arc<Mutex<Option<(Strategy, Arc<Live>)>>>;

/// What to run.
#[derive(Clone, Debug)]
pub struct Spec {
    pub seq: u64,
    pub activity: ActivityId,
    pub buyers: usize,
    pub concurrency: usize,
    pub strategies: Vec<Strategy>,
}

/// A running (or finished) dry run as the executor holds it.
pub struct DryRunJob {
    pub seq: u64,
    activity: ActivityId,
    /// The shadow prefix; each strategy appends `-<strategy>`.
    base: String,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl DryRunJob {
    /// Sets the stop flag: the buyers stop, the run checks what it did and removes its keys.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    pub fn finished(&self) -> bool {
        self.thread.as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// What to tell the operator when the run did not end in time (Redis stopped, say).
    pub fn leftover_note(&self, waited: Duration) -> String {
        format!(
            "the dry run did not end within {} s: shadow keys under '{}-<strategy>' may remain; remove them with `seckill-console --prefix {}-lua cleanup {} --force` (and -hincrby, -lock)",
            waited.as_secs(),
            self.base,
            self.base,
            self.activity
        )
    }
}

/// Starts the dry run on its own thread; its Actions go to `tx`. A failure to start is
/// reported as the run's end, so the view never waits for a run that does not exist.
pub fn spawn(ctx: Ctx, spec: Spec, tx: UnboundedSender<Action>) -> DryRunJob {
    let seed = chrono::Utc::now().timestamp_micros() as u64;
    let base = format!(
        "{}-dry-{:08x}",
        ctx.config.keys.prefix(),
        mix(seed ^ spec.seq) as u32
    );
    let stop = Arc::new(AtomicBool::new(false));
    let (seq, activity) = (spec.seq, spec.activity.clone());
    let (job_stop, job_base, job_tx) = (stop.clone(), base.clone(), tx.clone());
    let fail_tx = tx.clone();
    let thread = std::thread::Builder::new()
        .name("tui-dry-run".into())
        .spawn(move || {
            let result = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt.block_on(async move {
                    let task = tokio::spawn(run(ctx, spec, seed, job_base, job_stop, job_tx));
                    match task.await {
                        Ok(r) => r,
                        Err(e) => Err(Error::internal(format!(
                            "the dry run stopped unexpectedly: {e}"
                        ))),
                    }
                }),
                Err(e) => Err(Error::internal(format!(
                    "cannot start the dry run's runtime: {e}"
                ))),
            };
            let _ = tx.send(Action::DryRunDone { seq, result });
        });
    let thread = match thread {
        Ok(t) => Some(t),
        Err(e) => {
            let _ = fail_tx.send(Action::DryRunDone {
                seq,
                result: Err(Error::internal(format!(
                    "cannot start the dry run's thread: {e}"
                ))),
            });
            None
        }
    };
    DryRunJob {
        seq,
        activity,
        base,
        stop,
        thread,
    }
}

/// The strategies in turn, then the connections closed.
async fn run(
    ctx: Ctx,
    spec: Spec,
    seed: u64,
    base: String,
    stop: Arc<AtomicBool>,
    tx: UnboundedSender<Action>,
) -> Result<()> {
    let redis = ctx.redis().await?;
    let db = ctx.db().await?;
    let keys = ctx.config.keys.clone();
    let shown: Shown = Arc::default();
    let started = Instant::now();
    let ticker = {
        let (shown, tx, seq) = (shown.clone(), tx.clone(), spec.seq);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(PROGRESS_EVERY);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await; // the first tick is immediate: nothing to measure yet
            loop {
                tick.tick().await;
                let current = shown.lock().ok().and_then(|g| g.clone());
                if let Some((strategy, live)) = current {
                    let progress = Action::DryRunProgress {
                        seq,
                        strategy,
                        elapsed_secs: started.elapsed().as_secs_f64(),
                        snapshot: live.snapshot(),
                    };
                    if tx.send(progress).is_err() {
                        return; // the UI is gone
                    }
                }
            }
        })
    };
    let mut outcome = Ok(());
    for &strategy in &spec.strategies {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let one = DryRunSpec {
            activity: spec.activity.clone(),
            buyers: spec.buyers,
            concurrency: spec.concurrency,
            repeat_share: REPEAT_SHARE,
            strategies: vec![strategy],
            faults: Faults::default(),
            rate: None,
            seed,
            shadow_prefix: Some(base.clone()),
        };
        let observer = |s: Strategy, live: Arc<Live>| {
            if let Ok(mut g) = shown.lock() {
                *g = Some((s, live));
            }
        };
        let result = dry_run(&redis, &db, &keys, &one, &observer, stop.clone()).await;
        if let Ok(mut g) = shown.lock() {
            *g = None;
        }
        match result {
            Ok(runs) => {
                for stats in runs {
                    let _ = tx.send(Action::DryRunStrategyDone {
                        seq: spec.seq,
                        stats: Box::new(stats),
                    });
                }
            }
            Err(e) => {
                outcome = Err(e);
                break;
            }
        }
    }
    ticker.abort();
    db.close().await;
    outcome
}
