//! The check before a write: is each node the console will write a writable primary, and may
//! its user run every command the write needs? A replica (READONLY), a Sentinel or an ACL that
//! denies one command would otherwise be found by the write itself, after the database or some
//! of the products had changed.
//!
//! The role comes from `INFO replication` (else `ROLE`). The permissions come from
//! `ACL DRYRUN` where the user may run it, else from the console's `probe.lua`, which asks
//! `redis.acl_check_cmd` (Redis 7) and writes nothing; where neither can run, the write goes on
//! and the check says what it could not see.

use super::errors::server_error_kind;
use super::node::Node;
use super::{RedisStore, describe, info, scripts};
use redis::{RedisResult, ServerErrorKind, Value};
use std::sync::Arc;

/// What the check found on one node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Preflight {
    /// A primary whose user may run everything asked.
    Ready,
    /// The write would fail there: why, naming the node and the command.
    Refused(String),
    /// The node answered but could not be checked (a command renamed or denied): what.
    Unchecked(String),
    /// The node did not answer (timed out, refused, hung).
    Unreachable(String),
}

impl RedisStore {
    /// Checks every primary the console writes (each with a key of its own slots, so that a
    /// cluster routes the probe there) for `commands` (`NAME arg ...`, the key as `$`). A node
    /// that does not answer is `Unreachable`: the caller decides.
    pub async fn preflight(
        &self,
        key_on: impl Fn(&str) -> Option<String>,
        commands: &[&str],
    ) -> RedisResult<Vec<(String, Preflight)>> {
        let mut out = Vec::new();
        for node in self.primaries() {
            let checked = match self.role_problem(&node).await {
                Ok(Some(problem)) => Ok(Preflight::Refused(problem)),
                Ok(None) => match key_on(&node.addr) {
                    Some(key) => self.permissions(&node, &key, commands).await,
                    None => Ok(Preflight::Unchecked(format!(
                        "node {}: no key of its slots to check permissions on",
                        node.addr
                    ))),
                },
                Err(e) => Err(e),
            };
            let verdict = checked.unwrap_or_else(|e| {
                Preflight::Unreachable(format!("node {}: {}", node.addr, describe(&e)))
            });
            out.push((node.addr.clone(), verdict));
        }
        Ok(out)
    }

    /// A problem with the node's role: a replica or a Sentinel where a primary is needed.
    async fn role_problem(&self, node: &Arc<Node>) -> RedisResult<Option<String>> {
        let cmd = redis::cmd("INFO").arg("replication").clone();
        let text = match node.query(&cmd).await {
            Ok(v) => redis::from_redis_value::<String>(v).unwrap_or_default(),
            Err(e) if super::node::is_connection_error(&e) => return Err(e),
            Err(_) => match node.query(&redis::cmd("ROLE")).await {
                Ok(Value::Array(items)) => match items.first() {
                    Some(Value::BulkString(b)) => format!("role:{}", String::from_utf8_lossy(b)),
                    _ => String::new(),
                },
                Err(e) if super::node::is_connection_error(&e) => return Err(e),
                _ => String::new(),
            },
        };
        let mut server = info::stats_from_info(&text).server;
        // ROLE's answer, as the fallback above spells it, names a Sentinel too.
        if server.is_none() && text.contains("role:sentinel") {
            server = Some(info::ServerRole::Sentinel);
        }
        Ok(match server {
            Some(info::ServerRole::Replica(of)) => Some(format!(
                "node {} is a replica (of {}): a write there fails with READONLY; point the console at the primary (or at Sentinel with --redis-sentinel)",
                node.addr,
                of.as_deref().unwrap_or("an unnamed primary")
            )),
            Some(info::ServerRole::Sentinel) => Some(format!(
                "node {} is a Sentinel, not a data node: use --redis-sentinel {} --sentinel-master NAME",
                node.addr, node.addr
            )),
            _ => None,
        })
    }

    /// May the node's user run `commands` on `key`? `ACL DRYRUN`, else the probe script.
    async fn permissions(
        &self,
        node: &Arc<Node>,
        key: &str,
        commands: &[&str],
    ) -> RedisResult<Preflight> {
        let user = self.acl_user();
        // Every command's DRYRUN in one pipeline: one round trip per node.
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        for c in commands {
            let cmd = pipe.cmd("ACL").arg("DRYRUN").arg(&user);
            for w in c.split_whitespace() {
                cmd.arg(if w == "$" { key } else { w });
            }
        }
        let replies = node.pipeline(&pipe).await?;
        let mut denied = Vec::new();
        // An error reply (DRYRUN refused to this user, or unknown before Redis 7): the probe.
        let mut dryrun_works = replies.len() == commands.len();
        for (c, reply) in commands.iter().zip(&replies) {
            match reply {
                Value::Okay => {}
                Value::SimpleString(s) if s == "OK" => {}
                Value::ServerError(_) => dryrun_works = false,
                // DRYRUN answers a denial as a bulk string that says why.
                _ => denied.push((*c).to_string()),
            }
        }
        if dryrun_works {
            return Ok(verdict(&node.addr, &user, denied));
        }
        let args: Vec<&str> = commands.to_vec();
        match self.eval(&scripts::PROBE, &[key], &args).await {
            Ok(v) => {
                let denied: Vec<String> = redis::from_redis_value(v).unwrap_or_default();
                Ok(verdict(&node.addr, &user, denied))
            }
            Err(e) if super::node::is_connection_error(&e) => Err(e),
            // The user may not run scripts at all: a write through them cannot work.
            Err(e)
                if server_error_kind(&e) == Some(ServerErrorKind::NoPerm)
                    && commands.iter().any(|c| c.starts_with("EVALSHA")) =>
            {
                Ok(Preflight::Refused(format!(
                    "node {}: ACL user '{user}' may not run EVALSHA, which this write needs ({}; see the README's ACL files)",
                    node.addr,
                    describe(&e)
                )))
            }
            Err(e) if server_error_kind(&e) == Some(ServerErrorKind::NoPerm) => {
                Ok(Preflight::Unchecked(format!(
                    "node {}: user '{user}' may run neither ACL DRYRUN nor the console's scripts ({})",
                    node.addr,
                    describe(&e)
                )))
            }
            Err(e) => Ok(Preflight::Unchecked(format!(
                "node {}: permissions unchecked ({})",
                node.addr,
                describe(&e)
            ))),
        }
    }

    /// The ACL user the data nodes' URL names (`default` without one).
    fn acl_user(&self) -> String {
        self.inner
            .settings
            .target
            .seeds()
            .first()
            .and_then(|u| url::Url::parse(u.expose()).ok())
            .map(|u| u.username().to_string())
            .filter(|u| !u.is_empty())
            .unwrap_or_else(|| "default".to_string())
    }
}

fn verdict(addr: &str, user: &str, denied: Vec<String>) -> Preflight {
    if denied.is_empty() {
        return Preflight::Ready;
    }
    let names: Vec<String> = denied
        .iter()
        .map(|c| c.split_whitespace().next().unwrap_or("").to_string())
        .collect();
    Preflight::Refused(format!(
        "node {addr}: ACL user '{user}' may not run {}, which this write needs (grant them, see the README's ACL files)",
        names.join(", ")
    ))
}
