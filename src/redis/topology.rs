//! The cluster's shape: which primary serves each slot, the replicas, and one connection per
//! node address. A single server is the one-primary case. Refreshed from CLUSTER SLOTS when a
//! redirect or a refused connection says the map is old (rate-limited).

use super::node::Node;
use super::target::{open_client, url_host_port, with_host_port};
use super::{Keyed, RedisStore, Role, slots};
use crate::error::{Error, Result, Service};
use crate::redact::SecretUrl;
use redis::{ErrorKind, RedisError, RedisResult};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Default)]
pub(super) struct Topology {
    /// Primary addresses; index into this from `slot_owner`.
    pub(super) primaries: Vec<String>,
    /// The connections of `primaries`, same order: routing a command never allocates.
    pub(super) primary_nodes: Vec<Arc<Node>>,
    /// (replica, its primary).
    pub(super) replicas: Vec<(String, String)>,
    /// For a cluster, the index of the primary that serves each slot (u16::MAX: none).
    pub(super) slot_owner: Vec<u16>,
}

/// Commands for one node, with their positions in the caller's list.
pub(super) type NodeGroup = (String, Vec<(usize, Keyed)>);

impl RedisStore {
    pub(super) fn make_node(&self, addr: &str, template: &SecretUrl) -> Result<Arc<Node>> {
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

    pub(super) fn node(&self, addr: &str) -> RedisResult<Arc<Node>> {
        let template = &self.inner.settings.target.seeds()[0];
        self.make_node(addr, template)
            .map_err(|e| RedisError::from((ErrorKind::InvalidClientConfig, "bad node", e.message)))
    }

    /// Re-reads CLUSTER SLOTS from any reachable node. Rate-limited: callers that arrive during
    /// or just after a refresh reuse its result.
    pub async fn refresh_topology(&self, force: bool) -> Result<()> {
        if !self.inner.cluster {
            return self.follow_master(force).await;
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
                        last_err = Some(Error::unreachable(
                            Service::Redis,
                            format!(
                                "Redis cluster at {} has no slots assigned (is the cluster created?)",
                                self.label()
                            ),
                        ));
                        continue;
                    }
                    self.install(&ranges)?;
                    *last = Some(Instant::now());
                    return Ok(());
                }
                Err(e) => last_err = Some(self.error(&e)),
            }
        }
        Err(last_err.unwrap_or_else(|| {
            Error::unreachable(
                Service::Redis,
                format!("no node of {} answered", self.label()),
            )
        }))
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

    /// A MOVED reply says where one slot lives now: the map takes it at once (a full refresh
    /// is rate-limited and, during a reshard, may read a node that has not heard yet). A node
    /// not in the map yet is added as a primary.
    pub(super) fn apply_moved(&self, slot: u16, addr: &str) {
        if !self.inner.cluster {
            return;
        }
        let template = self.inner.settings.target.seeds()[0].clone();
        let Ok(node) = self.make_node(addr, &template) else {
            return;
        };
        let Ok(mut t) = self.inner.topology.write() else {
            return;
        };
        let index = match t.primaries.iter().position(|p| p == addr) {
            Some(i) => i,
            None => {
                t.primaries.push(addr.to_string());
                t.primary_nodes.push(node);
                t.primaries.len() - 1
            }
        };
        if let (Some(owner), Ok(index)) = (
            t.slot_owner.get_mut(usize::from(slot)),
            u16::try_from(index),
        ) {
            *owner = index;
        }
    }

    pub(super) fn primary_addrs(&self) -> Vec<String> {
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

    /// Groups items by the primary that serves their key, under one read of the topology.
    /// Items whose slot has no owner come back in the second list.
    pub(super) fn group_by_node(&self, items: Vec<(usize, Keyed)>) -> (Vec<NodeGroup>, Vec<usize>) {
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
}
