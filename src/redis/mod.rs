//! The Redis layer: one handle that serves a single server (`--redis`) or a Redis Cluster
//! (`--redis-cluster`), routes each command by its key's slot, pipelines per node, runs the
//! scripts with EVALSHA and reloads them on NOSCRIPT.

pub mod checkpoint;
pub mod cut;
pub mod events;
pub mod keys;
pub mod ledger;
pub mod node;
pub mod product_state;
pub mod reply;
pub mod scripts;
pub mod slots;
pub mod stock;

use crate::error::{Error, ErrorKind as Kind, Result};
use crate::redact::SecretUrl;
use futures::future::join_all;
use node::Node;
use redis::{Client, Cmd, ErrorKind, RedisError, RedisResult, ServerErrorKind, Value};
use scripts::LuaScript;
use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

pub use keys::{KeySpace, ProductKeys};

/// Where Redis is.
#[derive(Clone, Debug)]
pub enum RedisTarget {
    /// One server.
    Standalone(SecretUrl),
    /// Seed nodes of a Redis Cluster; the rest is discovered with CLUSTER SLOTS.
    Cluster(Vec<SecretUrl>),
}

/// How to reach Redis.
#[derive(Clone, Debug)]
pub struct RedisSettings {
    pub target: RedisTarget,
    pub connect_timeout: Duration,
    pub response_timeout: Duration,
    /// PEM of a CA that signs the servers' certificates (`rediss://` with a private CA).
    pub tls_ca: Option<Vec<u8>>,
    /// When set, every write command is refused before it is sent.
    pub read_only: bool,
}

impl RedisTarget {
    /// The target as it may be shown: redacted URLs.
    pub fn label(&self) -> String {
        match self {
            RedisTarget::Standalone(u) => u.redacted().to_string(),
            RedisTarget::Cluster(seeds) => {
                let list: Vec<&str> = seeds.iter().map(SecretUrl::redacted).collect();
                format!("cluster {}", list.join(","))
            }
        }
    }

    fn seeds(&self) -> &[SecretUrl] {
        match self {
            RedisTarget::Standalone(u) => std::slice::from_ref(u),
            RedisTarget::Cluster(seeds) => seeds,
        }
    }
}

/// A node's role, for the Redis view and SCRIPT EXISTS checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Primary,
    Replica,
}

impl Role {
    /// The name, as in the JSON documents.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Primary => "primary",
            Role::Replica => "replica",
        }
    }
}

/// A command and the key that routes it.
pub struct Keyed {
    /// The cluster slot of the routing key (computed once; no key copy is kept).
    pub slot: u16,
    pub cmd: Cmd,
}

impl Keyed {
    pub fn new(key: impl AsRef<str>, cmd: Cmd) -> Self {
        Keyed {
            slot: slots::key_slot(key.as_ref().as_bytes()),
            cmd,
        }
    }
}

#[derive(Default)]
struct Topology {
    /// Primary addresses; index into this from `slot_owner`.
    primaries: Vec<String>,
    /// The connections of `primaries`, same order: routing a command never allocates.
    primary_nodes: Vec<Arc<Node>>,
    /// (replica, its primary).
    replicas: Vec<(String, String)>,
    /// For a cluster, the index of the primary that serves each slot (u16::MAX: none).
    slot_owner: Vec<u16>,
}

struct Inner {
    settings: RedisSettings,
    cluster: bool,
    nodes: RwLock<HashMap<String, Arc<Node>>>,
    topology: RwLock<Topology>,
    last_refresh: tokio::sync::Mutex<Option<Instant>>,
}

/// The Redis handle, cheap to clone and shared by every task.
#[derive(Clone)]
pub struct RedisStore {
    inner: Arc<Inner>,
}

/// Commands for one node, with their positions in the caller's list.
type NodeGroup = (String, Vec<(usize, Keyed)>);

/// Commands per pipeline chunk: big enough to amortise round trips, small enough that one chunk
/// answers well inside the response timeout.
const PIPELINE_CHUNK: usize = 2000;
const MAX_REDIRECTS: usize = 5;

/// Commands that never write; in read-only mode nothing else is sent.
/// (HGETALL, HKEYS, HVALS and friends are reads too, but the console never sends them: their
/// work grows with the sale.)
const READ_COMMANDS: &[&str] = &[
    "GET",
    "MGET",
    "STRLEN",
    "EXISTS",
    "TYPE",
    "TTL",
    "PTTL",
    "HGET",
    "HMGET",
    "HLEN",
    "HEXISTS",
    "HSCAN",
    "XRANGE",
    "XREVRANGE",
    "XLEN",
    "SCAN",
    "PING",
    "INFO",
    "TIME",
    "DBSIZE",
    "ECHO",
    "SLOWLOG",
    "CLUSTER",
    "READONLY",
    "ASKING",
    "MEMORY",
    "ROLE",
    "LASTSAVE",
    "COMMAND",
];

fn command_name(cmd: &Cmd) -> String {
    match cmd.args_iter().next() {
        Some(redis::Arg::Simple(name)) => String::from_utf8_lossy(name).to_ascii_uppercase(),
        _ => String::new(),
    }
}

/// True when `cmd` may be sent in read-only mode. `SCRIPT EXISTS` reads; `SCRIPT LOAD` does not
/// change data but is refused too, so a MONITOR shows nothing but reads.
pub fn is_read_command(cmd: &Cmd) -> bool {
    let name = command_name(cmd);
    if name == "SCRIPT" {
        return matches!(
            cmd.args_iter().nth(1),
            Some(redis::Arg::Simple(sub)) if sub.eq_ignore_ascii_case(b"EXISTS")
        );
    }
    if name == "SLOWLOG" || name == "MEMORY" || name == "CLUSTER" {
        // Only their reading subcommands are used; CLUSTER FAILOVER and friends are not.
        return matches!(
            cmd.args_iter().nth(1),
            Some(redis::Arg::Simple(sub)) if [&b"GET"[..], b"LEN", b"USAGE", b"STATS", b"SLOTS",
                b"INFO", b"NODES", b"MYID", b"KEYSLOT", b"SHARDS"]
                .iter().any(|s| sub.eq_ignore_ascii_case(s))
        );
    }
    READ_COMMANDS.contains(&name.as_str())
}

fn read_only_refusal(cmd: &Cmd) -> RedisError {
    RedisError::from((
        ErrorKind::Client,
        "read-only mode",
        format!("{} is a write command", command_name(cmd)),
    ))
}

fn server_error_kind(err: &RedisError) -> Option<ServerErrorKind> {
    match err.kind() {
        ErrorKind::Server(k) => Some(k),
        _ => None,
    }
}

impl RedisStore {
    /// Connects and, for a cluster, reads the slot map. Fails with `unavailable` naming the
    /// redacted URL when no server answers within the timeouts.
    pub async fn connect(settings: RedisSettings) -> Result<Self> {
        for seed in settings.target.seeds() {
            validate_url(seed)?;
        }
        if settings.target.seeds().is_empty() {
            return Err(Error::bad_input(
                "--redis-cluster needs at least one seed URL, e.g. redis://127.0.0.1:7000",
            ));
        }
        let cluster = matches!(settings.target, RedisTarget::Cluster(_));
        let store = RedisStore {
            inner: Arc::new(Inner {
                settings,
                cluster,
                nodes: RwLock::new(HashMap::new()),
                topology: RwLock::new(Topology::default()),
                last_refresh: tokio::sync::Mutex::new(None),
            }),
        };
        if cluster {
            store.refresh_topology(true).await?;
        } else {
            let seed = store.inner.settings.target.seeds()[0].clone();
            let addr = url_host_port(&seed)?;
            let node = store.make_node(&addr, &seed)?;
            if let Err(e) = node.query(&redis::cmd("PING")).await {
                return Err(store.error(&e));
            }
            if let Ok(mut topo) = store.inner.topology.write() {
                topo.primaries = vec![addr];
                topo.primary_nodes = vec![node];
            }
        }
        Ok(store)
    }

    /// The redacted target, for headers and messages.
    pub fn label(&self) -> String {
        self.inner.settings.target.label()
    }

    pub fn is_cluster(&self) -> bool {
        self.inner.cluster
    }

    pub fn read_only(&self) -> bool {
        self.inner.settings.read_only
    }

    pub fn response_timeout(&self) -> Duration {
        self.inner.settings.response_timeout
    }

    /// Maps a Redis error to the console's error, naming the redacted target.
    pub fn error(&self, err: &RedisError) -> Error {
        redis_error(&self.label(), err)
    }

    fn make_node(&self, addr: &str, template: &SecretUrl) -> Result<Arc<Node>> {
        if let Some(node) = self
            .inner
            .nodes
            .read()
            .ok()
            .and_then(|m| m.get(addr).cloned())
        {
            return Ok(node);
        }
        let url = if url_host_port(template).ok().as_deref() == Some(addr) {
            template.clone()
        } else {
            with_host_port(template, addr)?
        };
        let client = open_client(&url, self.inner.settings.tls_ca.as_deref())?;
        let node = Arc::new(Node::new(
            addr.to_string(),
            client,
            self.inner.settings.connect_timeout,
            self.inner.settings.response_timeout,
        ));
        let mut nodes = self
            .inner
            .nodes
            .write()
            .map_err(|_| Error::internal("redis node table poisoned"))?;
        Ok(nodes.entry(addr.to_string()).or_insert(node).clone())
    }

    fn node(&self, addr: &str) -> RedisResult<Arc<Node>> {
        let template = &self.inner.settings.target.seeds()[0];
        self.make_node(addr, template)
            .map_err(|e| RedisError::from((ErrorKind::InvalidClientConfig, "bad node", e.message)))
    }

    /// Re-reads CLUSTER SLOTS from any reachable node. Rate-limited: callers that arrive during
    /// or just after a refresh reuse its result.
    pub async fn refresh_topology(&self, force: bool) -> Result<()> {
        if !self.inner.cluster {
            return Ok(());
        }
        let mut last = self.inner.last_refresh.lock().await;
        if !force && last.is_some_and(|t| t.elapsed() < Duration::from_millis(200)) {
            return Ok(());
        }
        let mut candidates: Vec<(String, SecretUrl)> = Vec::new();
        let template = self.inner.settings.target.seeds()[0].clone();
        for addr in self.primary_addrs() {
            candidates.push((addr, template.clone()));
        }
        for seed in self.inner.settings.target.seeds() {
            candidates.push((url_host_port(seed)?, seed.clone()));
        }
        let mut last_err = None;
        for (addr, url) in candidates {
            let node = self.make_node(&addr, &url)?;
            let cmd = redis::cmd("CLUSTER").arg("SLOTS").clone();
            match node.query(&cmd).await {
                Ok(reply) => {
                    let ranges = slots::parse_cluster_slots(&reply);
                    if ranges.is_empty() {
                        last_err = Some(Error::unavailable(format!(
                            "Redis cluster at {} has no slots assigned (is the cluster created?)",
                            self.label()
                        )));
                        continue;
                    }
                    self.install(&ranges)?;
                    *last = Some(Instant::now());
                    return Ok(());
                }
                Err(e) => last_err = Some(self.error(&e)),
            }
        }
        Err(last_err
            .unwrap_or_else(|| Error::unavailable(format!("no node of {} answered", self.label()))))
    }

    /// Makes `ranges` the topology. A node that cannot be set up fails the refresh, rather
    /// than leaving the old topology in place as if it were fresh.
    fn install(&self, ranges: &[slots::SlotRange]) -> Result<()> {
        let mut primaries: Vec<String> = ranges.iter().map(|r| r.primary.clone()).collect();
        primaries.sort();
        primaries.dedup();
        let mut slot_owner = vec![u16::MAX; slots::SLOT_COUNT];
        let mut replicas: Vec<(String, String)> = Vec::new();
        for r in ranges {
            let owner = primaries
                .iter()
                .position(|p| *p == r.primary)
                .and_then(|i| u16::try_from(i).ok())
                .unwrap_or(u16::MAX);
            for s in r.start..=r.end {
                slot_owner[usize::from(s)] = owner;
            }
            for rep in &r.replicas {
                if !replicas.iter().any(|(a, _)| a == rep) {
                    replicas.push((rep.clone(), r.primary.clone()));
                }
            }
        }
        replicas.sort();
        let template = &self.inner.settings.target.seeds()[0];
        let primary_nodes = primaries
            .iter()
            .map(|a| self.make_node(a, template))
            .collect::<Result<Vec<Arc<Node>>>>()?;
        let mut t = self
            .inner
            .topology
            .write()
            .map_err(|_| Error::internal("redis topology poisoned"))?;
        *t = Topology {
            primaries,
            primary_nodes,
            replicas,
            slot_owner,
        };
        Ok(())
    }

    fn primary_addrs(&self) -> Vec<String> {
        self.inner
            .topology
            .read()
            .map(|t| t.primaries.clone())
            .unwrap_or_default()
    }

    /// Every primary (one for a single server).
    pub fn primaries(&self) -> Vec<Arc<Node>> {
        self.inner
            .topology
            .read()
            .map(|t| t.primary_nodes.clone())
            .unwrap_or_default()
    }

    /// Every known node with its role (replicas only on a cluster).
    pub fn nodes(&self) -> Vec<(Arc<Node>, Role)> {
        let (primaries, replicas) = match self.inner.topology.read() {
            Ok(t) => (t.primaries.clone(), t.replicas.clone()),
            Err(_) => return Vec::new(),
        };
        let mut out: Vec<(Arc<Node>, Role)> = primaries
            .iter()
            .filter_map(|a| self.node(a).ok().map(|n| (n, Role::Primary)))
            .collect();
        out.extend(
            replicas
                .iter()
                .filter_map(|(a, _)| self.node(a).ok().map(|n| (n, Role::Replica))),
        );
        out
    }

    /// The node that serves `key`.
    pub fn node_for_key(&self, key: &str) -> RedisResult<Arc<Node>> {
        let topo = self
            .inner
            .topology
            .read()
            .map_err(|_| RedisError::from((ErrorKind::Client, "topology poisoned")))?;
        let index = if self.inner.cluster {
            let slot = usize::from(slots::key_slot(key.as_bytes()));
            topo.slot_owner.get(slot).map(|&i| usize::from(i))
        } else {
            Some(0)
        };
        index
            .and_then(|i| topo.primary_nodes.get(i))
            .cloned()
            .ok_or_else(|| {
                RedisError::from((
                    ErrorKind::ClusterConnectionNotFound,
                    "no node serves the key",
                    key.to_string(),
                ))
            })
    }

    /// Sends one command to the node that serves `key`, following MOVED and ASK redirects and
    /// retrying a command that was refused before it reached any server.
    pub async fn query(&self, key: &str, cmd: &Cmd) -> RedisResult<Value> {
        if self.read_only() && !is_read_command(cmd) {
            return Err(read_only_refusal(cmd));
        }
        let mut ask: Option<Arc<Node>> = None;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let result = match ask.take() {
                Some(node) => {
                    let mut pipe = redis::pipe();
                    pipe.cmd("ASKING").ignore().add_command(cmd.clone());
                    node.pipeline(&pipe).await.and_then(|mut v| {
                        v.pop()
                            .ok_or_else(|| RedisError::from((ErrorKind::Parse, "empty reply")))
                    })
                }
                None => self.node_for_key(key)?.query(cmd).await,
            };
            let err = match result {
                Ok(Value::ServerError(se)) => RedisError::from(se),
                Ok(v) => return Ok(v),
                Err(e) => e,
            };
            if attempt > MAX_REDIRECTS || !self.inner.cluster {
                return Err(err);
            }
            match server_error_kind(&err) {
                Some(ServerErrorKind::Moved) => {
                    let _ = self.refresh_topology(false).await;
                }
                Some(ServerErrorKind::Ask) => match err.redirect_node() {
                    Some((addr, _)) => ask = Some(self.node(addr)?),
                    None => return Err(err),
                },
                Some(ServerErrorKind::TryAgain) => {
                    tokio::time::sleep(Duration::from_millis(20 * attempt as u64)).await;
                }
                _ if err.is_connection_refusal() => {
                    // Nothing was sent: after a failover the slot has a new owner.
                    tokio::time::sleep(Duration::from_millis(50 * attempt as u64)).await;
                    let _ = self.refresh_topology(false).await;
                }
                _ => {
                    if node::is_connection_error(&err) {
                        let _ = self.refresh_topology(false).await;
                    }
                    return Err(err);
                }
            }
        }
    }

    /// Runs a script with EVALSHA on the node of `keys[0]`. On NOSCRIPT (a SCRIPT FLUSH, a
    /// restart, a failover) it sends the body once with EVAL, which runs it and caches it in one
    /// step: a SCRIPT LOAD followed by EVALSHA could lose a race with another flush.
    pub async fn eval(
        &self,
        script: &LuaScript,
        keys: &[&str],
        args: &[&str],
    ) -> RedisResult<Value> {
        let route = keys.first().copied().unwrap_or("");
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(script.sha()).arg(keys.len()).arg(keys).arg(args);
        match self.query(route, &cmd).await {
            Err(e) if server_error_kind(&e) == Some(ServerErrorKind::NoScript) => {
                tracing::info!(script = script.name, "NOSCRIPT: sending the body with EVAL");
                let mut eval = redis::cmd("EVAL");
                eval.arg(script.body).arg(keys.len()).arg(keys).arg(args);
                self.query(route, &eval).await
            }
            other => other,
        }
    }

    /// Groups items by the primary that serves their key, under one read of the topology.
    /// Items whose slot has no owner come back in the second list.
    fn group_by_node(&self, items: Vec<(usize, Keyed)>) -> (Vec<NodeGroup>, Vec<usize>) {
        let Ok(topo) = self.inner.topology.read() else {
            return (Vec::new(), items.into_iter().map(|(i, _)| i).collect());
        };
        if !self.inner.cluster {
            return match topo.primaries.first() {
                Some(addr) => (vec![(addr.clone(), items)], Vec::new()),
                None => (Vec::new(), items.into_iter().map(|(i, _)| i).collect()),
            };
        }
        let mut groups: Vec<Vec<(usize, Keyed)>> =
            (0..topo.primaries.len()).map(|_| Vec::new()).collect();
        let mut orphans = Vec::new();
        for (i, item) in items {
            let slot = usize::from(item.slot);
            match topo
                .slot_owner
                .get(slot)
                .map(|&o| usize::from(o))
                .and_then(|o| groups.get_mut(o))
            {
                Some(g) => g.push((i, item)),
                None => orphans.push(i),
            }
        }
        let grouped = topo
            .primaries
            .iter()
            .cloned()
            .zip(groups)
            .filter(|(_, g)| !g.is_empty())
            .collect();
        (grouped, orphans)
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
            let err = read_only_refusal(&bad.cmd);
            return items.iter().map(|_| Err(err.clone())).collect();
        }
        let mut pending: Vec<(usize, Keyed)> = items.into_iter().enumerate().collect();
        for round in 0..3 {
            let (groups, orphans) = self.group_by_node(std::mem::take(&mut pending));
            for i in orphans {
                results[i] = Some(Err(RedisError::from((
                    ErrorKind::ClusterConnectionNotFound,
                    "no node serves the slot",
                ))));
            }
            let mut jobs = Vec::new();
            for (addr, group) in groups {
                let node = match self.node(&addr) {
                    Ok(n) => n,
                    Err(e) => {
                        for (i, _) in group {
                            results[i] = Some(Err(e.clone()));
                        }
                        continue;
                    }
                };
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
                    let node = node.clone();
                    jobs.push(async move {
                        let outcome = node.pipeline(&pipe).await;
                        (index, slots, pipe, outcome)
                    });
                }
            }
            let mut retry: Vec<(usize, Keyed)> = Vec::new();
            for (index, slots, pipe, outcome) in join_all(jobs).await {
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
                                    let redirect = matches!(
                                        server_error_kind(&e),
                                        Some(ServerErrorKind::Moved | ServerErrorKind::Ask)
                                    );
                                    if redirect
                                        && self.inner.cluster
                                        && let Some(k) = resend(j)
                                    {
                                        retry.push((*i, k));
                                    }
                                    results[*i] = Some(Err(e));
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
                        let refused = e.is_connection_refusal() && self.inner.cluster;
                        for (j, i) in index.iter().enumerate() {
                            if refused && let Some(k) = resend(j) {
                                retry.push((*i, k));
                            }
                            results[*i] = Some(Err(e.clone()));
                        }
                    }
                }
            }
            if retry.is_empty() || round == 2 {
                break;
            }
            let _ = self.refresh_topology(false).await;
            pending = retry;
        }
        results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(RedisError::from((ErrorKind::Client, "not sent")))))
            .collect()
    }

    /// Runs a script once per call, pipelined per node (EVALSHA; calls that meet NOSCRIPT are
    /// sent again with EVAL). Each call is `(keys, args)`; results keep the input order.
    pub async fn eval_many(
        &self,
        script: &LuaScript,
        calls: &[(Vec<String>, Vec<Vec<u8>>)],
    ) -> Vec<RedisResult<Value>> {
        let build = |name: &str, body_or_sha: &str, keys: &[String], args: &[Vec<u8>]| {
            let mut cmd = redis::cmd(name);
            cmd.arg(body_or_sha).arg(keys.len()).arg(keys);
            for a in args {
                cmd.arg(a.as_slice());
            }
            Keyed::new(keys.first().map(String::as_str).unwrap_or(""), cmd)
        };
        let items: Vec<Keyed> = calls
            .iter()
            .map(|(k, a)| build("EVALSHA", script.sha(), k, a))
            .collect();
        let mut results = self.pipeline(items).await;
        let retry: Vec<usize> = results
            .iter()
            .enumerate()
            .filter(|(_, r)| {
                r.as_ref()
                    .err()
                    .is_some_and(|e| server_error_kind(e) == Some(ServerErrorKind::NoScript))
            })
            .map(|(i, _)| i)
            .collect();
        if !retry.is_empty() {
            let again: Vec<Keyed> = retry
                .iter()
                .map(|&i| build("EVAL", script.body, &calls[i].0, &calls[i].1))
                .collect();
            for (i, r) in retry.into_iter().zip(self.pipeline(again).await) {
                results[i] = r;
            }
        }
        results
    }

    /// Every key matching `pattern` on every primary, with SCAN (never KEYS).
    pub async fn scan(&self, pattern: &str) -> RedisResult<Vec<String>> {
        let mut keys = Vec::new();
        for node in self.primaries() {
            let mut cursor: u64 = 0;
            loop {
                let cmd = redis::cmd("SCAN")
                    .arg(cursor)
                    .arg("MATCH")
                    .arg(pattern)
                    .arg("COUNT")
                    .arg(1000)
                    .clone();
                let reply = node.query(&cmd).await?;
                let (next, batch): (u64, Vec<String>) = redis::from_redis_value(reply)?;
                keys.extend(batch);
                cursor = next;
                if cursor == 0 {
                    break;
                }
            }
        }
        keys.sort();
        keys.dedup();
        Ok(keys)
    }

    /// Runs `cmd` on each node given, concurrently; results keep the nodes' order.
    pub async fn on_nodes(
        &self,
        nodes: &[Arc<Node>],
        cmd: &Cmd,
    ) -> Vec<(String, RedisResult<Value>)> {
        if self.read_only() && !is_read_command(cmd) {
            let err = read_only_refusal(cmd);
            return nodes
                .iter()
                .map(|n| (n.addr.clone(), Err(err.clone())))
                .collect();
        }
        let jobs = nodes
            .iter()
            .map(|n| async move { (n.addr.clone(), n.query(cmd).await) });
        join_all(jobs).await
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

fn validate_url(url: &SecretUrl) -> Result<()> {
    let parsed = url::Url::parse(url.expose()).map_err(|e| {
        Error::bad_input(format!(
            "Redis URL '{}' is not a URL ({e}): use redis://[user:password@]host:port or rediss://...",
            url.redacted()
        ))
    })?;
    if !matches!(parsed.scheme(), "redis" | "rediss") {
        return Err(Error::bad_input(format!(
            "Redis URL '{}' has scheme '{}': use redis:// or rediss://",
            url.redacted(),
            parsed.scheme()
        )));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(Error::bad_input(format!(
            "Redis URL '{}' has no host: use redis://host:port",
            url.redacted()
        )));
    }
    Ok(())
}

fn url_host_port(url: &SecretUrl) -> Result<String> {
    let parsed = url::Url::parse(url.expose())
        .map_err(|e| Error::bad_input(format!("Redis URL '{}': {e}", url.redacted())))?;
    let host = parsed.host_str().unwrap_or("127.0.0.1");
    let port = parsed.port().unwrap_or(6379);
    Ok(slots::join_host_port(
        host.trim_matches(['[', ']']),
        i64::from(port),
    ))
}

fn with_host_port(template: &SecretUrl, addr: &str) -> Result<SecretUrl> {
    let mut parsed = url::Url::parse(template.expose())
        .map_err(|e| Error::bad_input(format!("Redis URL '{}': {e}", template.redacted())))?;
    let (host, port) = addr
        .rsplit_once(':')
        .ok_or_else(|| Error::internal(format!("node address '{addr}' has no port")))?;
    let port: u16 = port
        .parse()
        .map_err(|_| Error::internal(format!("node address '{addr}' has a bad port")))?;
    parsed
        .set_host(Some(host))
        .map_err(|e| Error::internal(format!("node address '{addr}': {e}")))?;
    parsed
        .set_port(Some(port))
        .map_err(|_| Error::internal(format!("node address '{addr}': bad port")))?;
    Ok(SecretUrl::new(parsed.to_string()))
}

fn open_client(url: &SecretUrl, tls_ca: Option<&[u8]>) -> Result<Client> {
    let result = match tls_ca {
        Some(pem) if url.expose().starts_with("rediss://") => Client::build_with_tls(
            url.expose(),
            redis::TlsCertificates {
                client_tls: None,
                root_cert: Some(pem.to_vec()),
            },
        ),
        _ => Client::open(url.expose()),
    };
    result.map_err(|e| {
        Error::bad_input(format!(
            "Redis URL '{}' is not usable: {}",
            url.redacted(),
            describe(&e)
        ))
    })
}

/// One line about a Redis error, without anything that could be a secret.
pub fn describe(err: &RedisError) -> String {
    let text = err.to_string();
    let line = text.lines().next().unwrap_or("").trim();
    crate::redact::redact_text(line)
}

/// Maps a Redis error to the console's error kinds: unreachable and timeouts are `unavailable`
/// (exit 3), an ACL denial is `refused` (exit 5).
pub fn redis_error(label: &str, err: &RedisError) -> Error {
    let detail = describe(err);
    if err.kind() == ErrorKind::Client && detail.starts_with("read-only mode") {
        return Error::refused(format!(
            "read-only mode: refused to send a write to Redis ({detail})"
        ));
    }
    if err.is_timeout() {
        return Error::unavailable(format!("Redis at {label} timed out: {detail}"));
    }
    if node::is_connection_error(err) || err.kind() == ErrorKind::ClusterConnectionNotFound {
        return Error::unavailable(format!("Redis at {label} is unreachable: {detail}"));
    }
    match err.kind() {
        ErrorKind::AuthenticationFailed => Error::unavailable(format!(
            "Redis at {label} refused the credentials: {detail}; check the user and password in the URL"
        )),
        ErrorKind::Server(ServerErrorKind::NoPerm) => Error::new(
            Kind::Refused,
            format!(
                "Redis at {label} denied permission: {detail}; the ACL user needs this command and key"
            ),
        ),
        ErrorKind::Server(
            ServerErrorKind::ClusterDown
            | ServerErrorKind::MasterDown
            | ServerErrorKind::BusyLoading
            | ServerErrorKind::TryAgain,
        ) => Error::unavailable(format!("Redis at {label} is not serving: {detail}")),
        _ => Error::internal(format!("Redis at {label} answered with an error: {detail}")),
    }
}
