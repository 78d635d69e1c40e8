//! Pipelines the concurrent buyers' script calls: one dispatcher drains whatever the buyer
//! tasks queued and sends it as one pipeline per node through the store's one script runner
//! (`RedisStore::eval_each`: EVALSHA, NOSCRIPT answered with EVAL), several batches in flight
//! at once. On the wire this is what a busy app server's
//! multiplexed connection does; per request it saves a channel message, a timer and a wakeup,
//! which is what limits a single client thread.

use crate::redis::scripts::LuaScript;
use crate::redis::{ProductKeys, RedisStore, ScriptCall};
use redis::{ErrorKind, RedisError, RedisResult, Value};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

/// Requests per pipeline at most.
const MAX_BATCH: usize = 64;

struct Job {
    keys: Arc<ProductKeys>,
    args: [Vec<u8>; 3],
    reply: oneshot::Sender<RedisResult<Value>>,
}

/// A handle to the dispatcher of one product script (KEYS: the product's five keys).
#[derive(Clone)]
pub struct Batcher {
    tx: mpsc::UnboundedSender<Job>,
}

impl ScriptCall for Job {
    fn route(&self) -> &str {
        &self.keys.stock
    }
    fn append(&self, cmd: &mut redis::Cmd) {
        cmd.arg(5).arg(&self.keys.script_keys()[..]);
        for a in &self.args {
            cmd.arg(a.as_slice());
        }
    }
}

impl Batcher {
    /// Starts the dispatcher; it ends when every handle is dropped.
    pub fn new(redis: RedisStore, script: &'static LuaScript) -> Self {
        let (tx, mut rx) = mpsc::unbounded_channel::<Job>();
        tokio::spawn(async move {
            while let Some(first) = rx.recv().await {
                let mut jobs = vec![first];
                while jobs.len() < MAX_BATCH {
                    match rx.try_recv() {
                        Ok(j) => jobs.push(j),
                        Err(_) => break,
                    }
                }
                let redis = redis.clone();
                tokio::spawn(async move {
                    let results = redis.eval_each(script, &jobs).await;
                    for (job, r) in jobs.into_iter().zip(results) {
                        let _ = job.reply.send(r);
                    }
                });
            }
        });
        Batcher { tx }
    }

    /// Runs the script once for one product with these three arguments.
    pub async fn eval(&self, keys: Arc<ProductKeys>, args: [Vec<u8>; 3]) -> RedisResult<Value> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Job { keys, args, reply })
            .map_err(|_| RedisError::from((ErrorKind::Client, "the dispatcher stopped")))?;
        rx.await.map_err(|_| {
            RedisError::from((ErrorKind::Client, "the dispatcher dropped the request"))
        })?
    }
}
