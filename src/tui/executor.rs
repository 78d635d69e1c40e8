//! The executor: runs `update`'s Commands. Pointing the pollers is immediate; everything that
//! touches the network is a background task that answers with an Action, so the loop goes on
//! drawing and answering keys while a fix or a preheat runs.

use super::action::{Action, Command, ResolveWhich};
use super::services::Services;
use crate::domain::ActivityId;
use crate::error::{Error, Result};
use crate::ops::compensation::{Which, resolve};
use crate::ops::fix::{FixOptions, fix};
use crate::ops::preheat::{PreheatOptions, preheat};
use std::future::Future;
use std::sync::Arc;
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::watch;

/// What the executor needs.
pub struct Executor {
    pub services: Arc<Services>,
    pub tx: UnboundedSender<Action>,
    pub activity: watch::Sender<Option<ActivityId>>,
    pub refresh: watch::Sender<u64>,
}

impl Executor {
    /// Runs one Command; returns at once.
    pub fn execute(&self, cmd: Command) {
        let config = &self.services.ctx.config;
        if cmd.writes() && config.read_only {
            // `update` never emits these in read-only mode; the ops refuse them as well.
            tracing::warn!("read-only mode: a write command was refused: {cmd:?}");
            return;
        }
        let (keys, actor, grace) = (config.keys.clone(), config.actor.clone(), config.grace);
        let s = self.services.clone();
        match cmd {
            Command::Watch(id) => {
                self.activity.send_replace(Some(id));
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
                };
                self.job(fix_job(s, keys, activity, opts), move |result| {
                    Action::FixPreviewed { seq, result }
                })
            }
            Command::ApplyFix {
                seq,
                activity,
                product,
            } => {
                let opts = FixOptions {
                    product,
                    preview: false,
                    actor,
                    grace,
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
                            actor,
                            grace,
                        };
                        preheat(&redis, &db, &keys, &activity, &opts, &progress).await
                    },
                    move |result| Action::PreheatDone { seq, result },
                )
            }
            Command::ResolveCompensation {
                seq,
                activity,
                which,
            } => self.job(
                async move {
                    let (redis, db) = (s.redis().await?, s.db().await?);
                    let which = match which {
                        ResolveWhich::One(r) => Which::One(r),
                        ResolveWhich::All => Which::All,
                    };
                    resolve(&redis, &db, &keys, &activity, &which, &actor, grace).await
                },
                move |result| Action::Resolved { seq, result },
            ),
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
