//! The executor: runs `update`'s Commands. Pointing the pollers is immediate; everything that
//! touches the network is a background task that answers with an Action, so the loop goes on
//! drawing and answering keys while a fix or a preheat runs. A dry run gets a thread and a
//! runtime of its own (`dry_run_job.rs`): thousands of buyer tasks never share a thread with
//! the render loop.

use super::action::{Action, Command};
use super::dry_run_job::{self, DryRunJob};
use super::services::Services;
use crate::ctx::Ctx;
use crate::domain::ActivityId;
use crate::error::{Error, Result};
use crate::ops::compensation::resolve;
use crate::ops::fix::{FixOptions, fix};
use crate::ops::pause::set_paused;
use crate::ops::preheat::{PreheatOptions, preheat};
use crate::ops::topup::topup;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::watch;

/// What the executor needs.
pub struct Executor {
    pub services: Arc<Services>,
    pub tx: UnboundedSender<Action>,
    pub activity: watch::Sender<Option<ActivityId>>,
    pub refresh: watch::Sender<u64>,
    /// The running dry run, if any (its stop flag and thread).
    dry_run: Mutex<Option<DryRunJob>>,
}

impl Executor {
    pub fn new(
        services: Arc<Services>,
        tx: UnboundedSender<Action>,
        activity: watch::Sender<Option<ActivityId>>,
        refresh: watch::Sender<u64>,
    ) -> Self {
        Executor {
            services,
            tx,
            activity,
            refresh,
            dry_run: Mutex::new(None),
        }
    }

    /// On the way out: stops a running dry run and waits up to `grace` for it to remove its
    /// shadow keys. Returns what the operator should know, if anything.
    pub async fn shutdown(&self, grace: Duration) -> Option<String> {
        let job = self.dry_run.lock().ok().and_then(|mut j| j.take())?;
        if job.finished() {
            return None;
        }
        job.stop();
        let started = std::time::Instant::now();
        while !job.finished() && started.elapsed() < grace {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Some(if job.finished() {
            "the running dry run was stopped; its shadow keys were removed".to_string()
        } else {
            job.leftover_note(grace)
        })
    }

    /// Runs one Command; returns at once.
    pub fn execute(&self, cmd: Command) {
        let config = &self.services.ctx.config;
        if cmd.writes() && config.read_only {
            // `update` never emits these in read-only mode; the ops refuse them as well.
            tracing::warn!("read-only mode: a write command was refused: {cmd:?}");
            return;
        }
        let (keys, actor, grace) = (config.keys.clone(), config.actor.clone(), config.grace);
        let key_ttl_days = config.key_ttl_days;
        let s = self.services.clone();
        match cmd {
            Command::Watch(id) => {
                self.activity.send_replace(Some(id));
            }
            Command::CountRecentSales(ids) => self.job(
                async move {
                    let db = s.db().await?;
                    let ids: Vec<&str> = ids.iter().map(ActivityId::as_str).collect();
                    let since = chrono::Utc::now() - chrono::Duration::seconds(60);
                    crate::db::orders::recent_by_activity(&db, &ids, since).await
                },
                Action::Busiest,
            ),
            Command::Bell => {
                use std::io::Write;
                // BEL on the terminal the TUI draws on; a terminal set to flash does that.
                let mut out = std::io::stdout();
                let _ = out.write_all(b"\x07").and_then(|()| out.flush());
            }
            Command::RefreshNow => {
                self.refresh.send_modify(|g| *g = g.wrapping_add(1));
            }
            Command::PreviewFix {
                seq,
                activity,
                product,
            } => {
                let opts = FixOptions {
                    product,
                    preview: true,
                    actor,
                    grace,
                    confirmed: None,
                    key_ttl_days,
                    interleave: Default::default(),
                };
                self.job(fix_job(s, keys, activity, opts), move |result| {
                    Action::FixPreviewed { seq, result }
                })
            }
            Command::ApplyFix {
                seq,
                activity,
                product,
                confirmed,
            } => {
                let opts = FixOptions {
                    product,
                    preview: false,
                    actor,
                    grace,
                    confirmed,
                    key_ttl_days,
                    interleave: Default::default(),
                };
                self.job(fix_job(s, keys, activity, opts), move |result| {
                    Action::FixApplied { seq, result }
                })
            }
            Command::RunPreheat {
                seq,
                activity,
                force,
            } => {
                let progress_tx = self.tx.clone();
                self.job(
                    async move {
                        let (redis, db) = (s.redis().await?, s.db().await?);
                        let progress = move |stage: &str, done: usize, total: usize| {
                            let _ = progress_tx.send(Action::PreheatProgress {
                                seq,
                                stage: stage.to_string(),
                                done,
                                total,
                            });
                        };
                        let opts = PreheatOptions {
                            force,
                            accept_eviction: false,
                            actor,
                            grace,
                            key_ttl_days,
                            interleave: Default::default(),
                        };
                        preheat(&redis, &db, &keys, &activity, &opts, &progress).await
                    },
                    move |result| Action::PreheatDone { seq, result },
                )
            }
            Command::WriteReport { activity } => {
                let (tz, compensation_alert, outbox_alert) =
                    (config.tz, config.compensation_alert, config.outbox_alert);
                self.job(
                    async move {
                        let (redis, db) = (s.redis().await?, s.db().await?);
                        let opts = crate::ops::status::StatusOptions {
                            grace,
                            compensation_alert,
                            outbox_alert,
                            gauge: Default::default(),
                        };
                        let r = crate::ops::report::report(
                            Ok(&redis),
                            &db,
                            &keys,
                            &activity,
                            None,
                            &opts,
                        )
                        .await?;
                        let text = crate::render::report::markdown(&r, tz);
                        let path = format!(
                            "seckill-report-{activity}-{}.md",
                            chrono::Utc::now().format("%Y%m%dT%H%M%SZ")
                        );
                        std::fs::write(&path, text).map_err(|e| {
                            crate::error::Error::unavailable(format!("cannot write '{path}': {e}"))
                        })?;
                        let shown =
                            std::fs::canonicalize(&path).map_or(path, |p| p.display().to_string());
                        Ok(shown)
                    },
                    move |result| Action::ReportWritten { result },
                )
            }
            Command::RunTopup {
                seq,
                activity,
                product,
                add,
                reason,
            } => self.job(
                async move {
                    let (redis, db) = (s.redis().await?, s.db().await?);
                    let product = crate::domain::ProductId::parse(&product)?;
                    let req = crate::ops::topup::TopupRequest {
                        activity: &activity,
                        product: &product,
                        change: add,
                        actor: &actor,
                        reason: audited(&reason),
                        grace,
                        interleave: Default::default(),
                    };
                    topup(&redis, &db, &keys, &req).await
                },
                move |result| Action::TopupDone { seq, result },
            ),
            Command::SetPaused {
                seq,
                activity,
                product,
                pause,
                reason,
            } => self.job(
                async move {
                    let (redis, db) = (s.redis().await?, s.db().await?);
                    let only = product.map(|p| vec![p]);
                    set_paused(
                        &redis,
                        &db,
                        &keys,
                        &activity,
                        only.as_deref(),
                        pause,
                        (&actor, audited(&reason)),
                    )
                    .await
                },
                move |result| Action::PauseDone { seq, result },
            ),
            Command::ReadDetail {
                seq,
                activity,
                product,
            } => self.job(
                async move {
                    let product = crate::domain::ProductId::parse(&product)?;
                    let (redis, db) = (s.redis().await?, s.db().await?);
                    crate::ops::detail::product_detail(&redis, &db, &keys, &activity, &product)
                        .await
                        .map(Box::new)
                },
                move |result| Action::DetailRead { seq, result },
            ),
            Command::CountPending { seq, activity } => self.job(
                async move {
                    let db = s.db().await?;
                    crate::db::compensation::pending_extent(&db, &activity).await
                },
                move |result| Action::PendingCounted { seq, result },
            ),
            Command::ResolveCompensation {
                seq,
                activity,
                which,
            } => self.job(
                async move {
                    let (redis, db) = (s.redis().await?, s.db().await?);
                    resolve(&redis, &db, &keys, &activity, &which, &actor, grace).await
                },
                move |result| Action::Resolved { seq, result },
            ),
            Command::StartDryRun {
                seq,
                activity,
                buyers,
                concurrency,
                strategies,
            } => {
                let spec = dry_run_job::Spec {
                    seq,
                    activity,
                    buyers,
                    concurrency,
                    strategies,
                };
                let ctx = Ctx {
                    config: s.ctx.config.clone(),
                };
                let job = dry_run_job::spawn(ctx, spec, self.tx.clone());
                if let Ok(mut slot) = self.dry_run.lock() {
                    // `update` starts one only when none runs; a finished one is just replaced.
                    if let Some(old) = slot.replace(job) {
                        old.stop();
                    }
                }
            }
            Command::StopDryRun { seq } => {
                if let Ok(slot) = self.dry_run.lock()
                    && let Some(job) = slot.as_ref().filter(|j| j.seq == seq)
                {
                    job.stop();
                }
            }
        }
    }

    /// Runs `fut` in a task and sends its result as an Action; a panic is reported as an
    /// error instead of leaving a dialog waiting forever.
    fn job<T, Fut>(&self, fut: Fut, done: impl FnOnce(Result<T>) -> Action + Send + 'static)
    where
        T: Send + 'static,
        Fut: Future<Output = Result<T>> + Send + 'static,
    {
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let result = match tokio::spawn(fut).await {
                Ok(r) => r,
                Err(e) => Err(Error::internal(format!(
                    "the job stopped unexpectedly: {e}"
                ))),
            };
            let _ = tx.send(done(result));
        });
    }
}

/// A fix (or its preview) on the shared connections.
async fn fix_job(
    s: Arc<Services>,
    keys: crate::redis::KeySpace,
    activity: ActivityId,
    opts: FixOptions,
) -> Result<crate::ops::fix::FixReport> {
    let (redis, db) = (s.redis().await?, s.db().await?);
    fix(&redis, &db, &keys, &activity, &opts).await
}

/// The reason a TUI write is audited with: what the operator typed, or "from the TUI".
fn audited(typed: &str) -> &str {
    if typed.trim().is_empty() {
        "from the TUI"
    } else {
        typed
    }
}
