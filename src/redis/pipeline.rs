//! Many commands at once: grouped by the node that serves each key, one pipeline per node (in
//! chunks), every node at the same time; redirected commands go again after a refresh.

use super::errors::server_error_kind;
use super::guard::{is_read_command, refusal};
use super::{Keyed, RedisStore};
use futures::StreamExt;
use futures::future::join_all;
use redis::{ErrorKind, RedisError, RedisResult, ServerErrorKind, Value};

/// Commands per pipeline chunk: big enough to amortise round trips, small enough that one chunk
/// answers well inside the response timeout.
const PIPELINE_CHUNK: usize = 2000;

/// Chunks of one node in flight at once: enough to keep the node busy while a reply travels
/// back, few enough that the last one sent is answered well inside the response timeout.
const IN_FLIGHT: usize = 3;

impl RedisStore {
    /// The connection of `addr`; without one, every command of `group` is answered with why.
    fn node_or_fail(
        &self,
        addr: &str,
        group: &[(usize, Keyed)],
        results: &mut [Option<RedisResult<Value>>],
    ) -> Option<std::sync::Arc<super::node::Node>> {
        match self.node(addr) {
            Ok(n) => Some(n),
            Err(e) => {
                for (i, _) in group {
                    results[*i] = Some(Err(e.clone()));
                }
                None
            }
        }
    }

    /// Sends each ASK-redirected command to the node it names, after ASKING, one pipeline per
    /// node; their answers go into `results`. Returns those the importing node answered with
    /// MOVED (the migration finished meanwhile): they go again after a slot-map refresh.
    async fn send_asked(
        &self,
        asked: Vec<(usize, Keyed, String)>,
        results: &mut [Option<RedisResult<Value>>],
    ) -> Vec<(usize, Keyed)> {
        let mut by_node: std::collections::BTreeMap<String, Vec<(usize, Keyed)>> =
            Default::default();
        for (i, k, addr) in asked {
            by_node.entry(addr).or_default().push((i, k));
        }
        let mut again = Vec::new();
        for (addr, group) in by_node {
            let Some(node) = self.node_or_fail(&addr, &group, results) else {
                continue;
            };
            let mut pipe = redis::pipe();
            pipe.ignore_errors();
            for (_, k) in &group {
                // ASKING holds for the one command after it.
                pipe.cmd("ASKING").ignore().add_command(k.cmd.clone());
            }
            match node.pipeline(&pipe).await {
                Ok(values) if values.len() == group.len() => {
                    for ((i, k), v) in group.into_iter().zip(values) {
                        match v {
                            Value::ServerError(se) => {
                                let e = RedisError::from(se);
                                if server_error_kind(&e) == Some(ServerErrorKind::Moved) {
                                    again.push((i, k));
                                    results[i] = Some(Err(e));
                                } else {
                                    // The importing node lacks some of the keys: named, as
                                    // the migrating node's TRYAGAIN is.
                                    results[i] =
                                        Some(Err(super::errors::naming_the_slot(e, k.slot)));
                                }
                            }
                            v => results[i] = Some(Ok(v)),
                        }
                    }
                }
                Ok(_) => {
                    let e = RedisError::from((ErrorKind::Parse, "pipeline reply length mismatch"));
                    for (i, _) in group {
                        results[i] = Some(Err(e.clone()));
                    }
                }
                Err(e) => {
                    for (i, _) in group {
                        results[i] = Some(Err(e.clone()));
                    }
                }
            }
        }
        again
    }

    /// Sends many commands, one pipeline per node (in chunks), all nodes at once. Results come
    /// back in input order; an error reply is an `Err` for that command only. Commands that
    /// meet a MOVED or ASK redirect, or a node that refused the connection, are sent again after
    /// the slot map is refreshed.
    pub async fn pipeline(&self, items: Vec<Keyed>) -> Vec<RedisResult<Value>> {
        let total = items.len();
        let mut results: Vec<Option<RedisResult<Value>>> = (0..total).map(|_| None).collect();
        if self.read_only()
            && let Some(bad) = items.iter().find(|k| !is_read_command(&k.cmd))
        {
            let err = refusal(&bad.cmd);
            return items.iter().map(|_| Err(err.clone())).collect();
        }
        let mut pending: Vec<(usize, Keyed)> = items.into_iter().enumerate().collect();
        let mut lost_node = false;
        for round in 0..3 {
            let (groups, orphans) = self.group_by_node(std::mem::take(&mut pending));
            for i in orphans {
                results[i] = Some(Err(RedisError::from((
                    ErrorKind::ClusterConnectionNotFound,
                    "no node serves the slot",
                ))));
            }
            let mut per_node = Vec::new();
            for (addr, group) in groups {
                let Some(node) = self.node_or_fail(&addr, &group, &mut results) else {
                    continue;
                };
                let mut chunks = Vec::new();
                let mut group = group.into_iter().peekable();
                while group.peek().is_some() {
                    let mut pipe = redis::pipe();
                    pipe.ignore_errors();
                    let mut index = Vec::with_capacity(PIPELINE_CHUNK);
                    let mut slots = Vec::with_capacity(PIPELINE_CHUNK);
                    for (i, item) in group.by_ref().take(PIPELINE_CHUNK) {
                        index.push(i);
                        slots.push(item.slot);
                        pipe.add_command(item.cmd);
                    }
                    chunks.push((index, slots, pipe));
                }
                // A few chunks in flight per node, not all: the response timeout runs from each
                // chunk's send, and a chunk queued behind a hundred others on the one
                // connection would outlive it (100,000 products timed out at the default 1 s).
                per_node.push(
                    futures::stream::iter(chunks)
                        .map(move |(index, slots, pipe)| {
                            let node = node.clone();
                            async move {
                                let outcome = node.pipeline(&pipe).await;
                                (index, slots, pipe, outcome)
                            }
                        })
                        .buffer_unordered(IN_FLIGHT)
                        .collect::<Vec<_>>(),
                );
            }
            let done: Vec<_> = join_all(per_node).await.into_iter().flatten().collect();
            let mut retry: Vec<(usize, Keyed)> = Vec::new();
            let mut again_later = false;
            let mut moved: Vec<(u16, String)> = Vec::new();
            // ASK: the slot is migrating and this key is (or would be) on the importing node,
            // which answers it only after ASKING. The slot map is right as it is: a refresh
            // would send the command back to the migrating node.
            let mut asked: Vec<(usize, Keyed, String)> = Vec::new();
            for (index, slots, pipe, outcome) in done {
                let resend = |j: usize| -> Option<Keyed> {
                    let cmd = pipe.cmd_iter().nth(j)?.clone();
                    Some(Keyed {
                        slot: *slots.get(j)?,
                        cmd,
                    })
                };
                match outcome {
                    Ok(values) if values.len() == index.len() => {
                        for (j, (i, v)) in index.iter().zip(values).enumerate() {
                            match v {
                                Value::ServerError(se) => {
                                    let e = RedisError::from(se);
                                    let kind = server_error_kind(&e);
                                    let target = e.redirect_node().map(|(a, _)| a.to_string());
                                    if self.follows()
                                        && let Some(k) = resend(j)
                                    {
                                        match (kind, target) {
                                            // A demoted primary behind Sentinel refused the
                                            // write before doing any of it.
                                            (Some(ServerErrorKind::ReadOnly), _)
                                                if self.is_sentinel() =>
                                            {
                                                retry.push((*i, k));
                                            }
                                            (Some(ServerErrorKind::Ask), Some(addr)) => {
                                                asked.push((*i, k, addr));
                                            }
                                            (Some(ServerErrorKind::Moved), Some(addr)) => {
                                                moved.push((k.slot, addr));
                                                retry.push((*i, k));
                                            }
                                            (
                                                Some(ServerErrorKind::Moved | ServerErrorKind::Ask),
                                                _,
                                            ) => {
                                                retry.push((*i, k));
                                            }
                                            // A multi-key command whose keys are split by a
                                            // migration in progress: not run; again shortly.
                                            (Some(ServerErrorKind::TryAgain), _) => {
                                                again_later = true;
                                                retry.push((*i, k));
                                            }
                                            _ => {}
                                        }
                                    }
                                    results[*i] = Some(Err(match slots.get(j) {
                                        Some(&slot) => super::errors::naming_the_slot(e, slot),
                                        None => e,
                                    }));
                                }
                                v => results[*i] = Some(Ok(v)),
                            }
                        }
                    }
                    Ok(_) => {
                        let e =
                            RedisError::from((ErrorKind::Parse, "pipeline reply length mismatch"));
                        for i in index {
                            results[i] = Some(Err(e.clone()));
                        }
                    }
                    Err(e) => {
                        let refused = e.is_connection_refusal() && self.follows();
                        if self.is_sentinel() && super::node::is_connection_error(&e) {
                            // The next call finds the primary Sentinel names by then.
                            lost_node = true;
                        }
                        for (j, i) in index.iter().enumerate() {
                            if refused && let Some(k) = resend(j) {
                                retry.push((*i, k));
                            }
                            results[*i] = Some(Err(e.clone()));
                        }
                    }
                }
            }
            retry.extend(self.send_asked(asked, &mut results).await);
            if retry.is_empty() || round == 2 {
                if lost_node {
                    let _ = self.refresh_topology(false).await;
                }
                break;
            }
            moved.sort();
            moved.dedup();
            for (slot, addr) in &moved {
                self.apply_moved(*slot, addr);
            }
            if again_later {
                tokio::time::sleep(std::time::Duration::from_millis(50 * (round as u64 + 1))).await;
            }
            if moved.is_empty() {
                let _ = self.refresh_topology(false).await;
            }
            pending = retry;
        }
        results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(RedisError::from((ErrorKind::Client, "not sent")))))
            .collect()
    }
}
