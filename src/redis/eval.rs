//! Running the contract's Lua scripts: EVALSHA first; the calls that meet NOSCRIPT (a SCRIPT
//! FLUSH, a restart, a failover to a replica that never loaded it) are sent again once with
//! EVAL and the body, which runs the script and caches it in one step. A SCRIPT LOAD followed by
//! EVALSHA could lose a race with another flush. Every caller goes through [`RedisStore::eval`]
//! or [`RedisStore::eval_each`], the worker's batches included, so this rule lives here only.

use super::errors::server_error_kind;
use super::node::Node;
use super::scripts::{self, LuaScript};
use super::{Keyed, RedisStore};
use redis::{Cmd, RedisResult, ServerErrorKind, Value};
use std::sync::Arc;

/// One call of a script: the keys and arguments written after `EVALSHA <sha>` or
/// `EVAL <body>`, and the key that routes it (its first key).
pub trait ScriptCall {
    /// The key whose slot decides the node.
    fn route(&self) -> &str;
    /// Appends `numkeys key... arg...`.
    fn append(&self, cmd: &mut Cmd);
}

/// Keys and arguments as string slices (the single calls of the console).
impl ScriptCall for (&[&str], &[&str]) {
    fn route(&self) -> &str {
        self.0.first().copied().unwrap_or("")
    }
    fn append(&self, cmd: &mut Cmd) {
        cmd.arg(self.0.len()).arg(self.0).arg(self.1);
    }
}

/// Owned keys and binary arguments (batches built in a loop).
impl ScriptCall for (Vec<String>, Vec<Vec<u8>>) {
    fn route(&self) -> &str {
        self.0.first().map(String::as_str).unwrap_or("")
    }
    fn append(&self, cmd: &mut Cmd) {
        cmd.arg(self.0.len()).arg(&self.0);
        for a in &self.1 {
            cmd.arg(a.as_slice());
        }
    }
}

/// How a call names its script.
#[derive(Clone, Copy)]
enum Form {
    /// EVALSHA and the digest: the normal case, a few bytes on the wire.
    Sha,
    /// EVAL and the body: after NOSCRIPT only.
    Body,
}

fn command(script: &LuaScript, form: Form, call: &impl ScriptCall) -> Keyed {
    // Built in place: this runs once per buyer request in the worker, so no copy of the command.
    let mut cmd = match form {
        Form::Sha => redis::cmd("EVALSHA"),
        Form::Body => redis::cmd("EVAL"),
    };
    cmd.arg(match form {
        Form::Sha => script.sha(),
        Form::Body => script.body,
    });
    call.append(&mut cmd);
    Keyed::new(call.route(), cmd)
}

fn is_noscript(r: &RedisResult<Value>) -> bool {
    matches!(r, Err(e) if server_error_kind(e) == Some(ServerErrorKind::NoScript))
}

impl RedisStore {
    /// Runs a script once with EVALSHA on the node of the call's first key, following
    /// redirects; on NOSCRIPT, once more with EVAL.
    pub async fn eval(
        &self,
        script: &LuaScript,
        keys: &[&str],
        args: &[&str],
    ) -> RedisResult<Value> {
        let call = (keys, args);
        let first = command(script, Form::Sha, &call);
        let result = self.query(call.route(), &first.cmd).await;
        if !is_noscript(&result) {
            return result;
        }
        tracing::info!(script = script.name, "NOSCRIPT: sending the body with EVAL");
        let again = command(script, Form::Body, &call);
        self.query(call.route(), &again.cmd).await
    }

    /// Runs a script once per call, pipelined per node; the calls that meet NOSCRIPT go again
    /// with EVAL in one more pipeline. Results keep the input order.
    pub async fn eval_each<C: ScriptCall>(
        &self,
        script: &LuaScript,
        calls: &[C],
    ) -> Vec<RedisResult<Value>> {
        let items = calls
            .iter()
            .map(|c| command(script, Form::Sha, c))
            .collect();
        let mut results = self.pipeline(items).await;
        let missing: Vec<usize> = (0..results.len())
            .filter(|&i| is_noscript(&results[i]))
            .collect();
        if missing.is_empty() {
            return results;
        }
        tracing::info!(
            script = script.name,
            calls = missing.len(),
            "NOSCRIPT: sending the body with EVAL"
        );
        let again = missing
            .iter()
            .map(|&i| command(script, Form::Body, &calls[i]))
            .collect();
        for (i, r) in missing.into_iter().zip(self.pipeline(again).await) {
            results[i] = r;
        }
        results
    }

    /// Loads every script on every node (replicas too: a promoted replica then has them).
    pub async fn load_scripts(&self) -> Vec<(String, RedisResult<Value>)> {
        let nodes: Vec<Arc<Node>> = self.nodes().into_iter().map(|(n, _)| n).collect();
        let mut out = Vec::new();
        for script in scripts::all() {
            let cmd = redis::cmd("SCRIPT").arg("LOAD").arg(script.body).clone();
            out.extend(self.on_nodes(&nodes, &cmd).await);
        }
        out
    }
}
