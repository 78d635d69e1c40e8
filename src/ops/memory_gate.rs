//! The preheat gate's memory checks, from INFO on every primary (no CONFIG needed, so they work
//! on managed Redis): a server that may evict the activity's keys, and a server without the
//! room the activity will take. Both are no-go reasons; the first can be accepted by name.

use super::health::NodeHealth;
use super::snapshot::ProductView;
use crate::domain::stock::StockValue;
use crate::redis::info::human_bytes;
use crate::redis::{RedisStore, Role};
use std::collections::BTreeMap;

/// Redis memory one unit sold takes: its ledger entry, its holding and its stream entry (the
/// footprint benchmark measures 185-188 bytes).
pub const BYTES_PER_UNIT: u64 = 200;
/// Redis memory one product takes before its first sale: its five keys with their expiries,
/// the placeholders and an empty stream (`first.lua`). Measured at 997 bytes a product over
/// 20,000 products and 1,033-1,078 over 3,000 (the key tables' slots weigh more on fewer keys),
/// with ids of 3 and 6-7 characters; the preheat test checks it stays within this. It was 5.4 KB
/// while preheat wrote the stream's first entry, which opens a 4 KB node.
pub const BYTES_PER_PRODUCT: u64 = 1200;
/// What the gate asks for on top of the estimate: the estimate is a measured average, and the
/// sale is no time to find it low.
pub const MARGIN: f64 = 1.25;

/// The flag that accepts a server which may evict the activity's keys.
pub const ACCEPT_FLAG: &str = "--accept-eviction";

/// What the gate found on the primaries: no-go reasons, and the risks the operator accepted.
#[derive(Debug, Default, PartialEq)]
pub struct MemoryVerdict {
    pub reasons: Vec<String>,
    pub accepted: Vec<String>,
}

/// The bytes an activity's products will need on each primary: a product not yet in Redis
/// takes its keys, and every unit it may still sell takes its books.
pub fn need_per_node(redis: &RedisStore, products: &[ProductView]) -> BTreeMap<String, u64> {
    let mut need: BTreeMap<String, u64> = BTreeMap::new();
    for v in products {
        let Ok(node) = redis.node_for_key(&v.keys.stock) else {
            continue;
        };
        let units = u64::try_from(v.status.expected_remaining.max(0)).unwrap_or(0);
        let keys = if v.cut.stock == StockValue::Missing {
            BYTES_PER_PRODUCT
        } else {
            0
        };
        *need.entry(node.addr.clone()).or_default() += keys + units * BYTES_PER_UNIT;
    }
    need
}

/// Weighs every primary's policy and room against what the activity needs.
pub fn verdict(
    nodes: &[NodeHealth],
    need: &BTreeMap<String, u64>,
    accept_eviction: bool,
) -> MemoryVerdict {
    let mut out = MemoryVerdict::default();
    for n in nodes
        .iter()
        .filter(|n| n.answered && n.role == Role::Primary)
    {
        let m = &n.memory;
        if m.may_evict_ours() {
            let policy = m.policy.as_deref().unwrap_or("?");
            let risk = format!(
                "node {} has maxmemory-policy {policy}: every key of the activity carries an expiry, so at its maxmemory ({}) Redis may evict a stock, meta, ledger or buyers key mid-sale",
                n.addr,
                m.max_bytes
                    .filter(|b| *b > 0)
                    .map_or_else(|| "none set".to_string(), human_bytes)
            );
            if accept_eviction {
                out.accepted
                    .push(format!("{risk} (accepted with {ACCEPT_FLAG})"));
            } else {
                out.reasons.push(format!(
                    "{risk}; set maxmemory-policy noeviction on a Redis of its own, or rerun with {ACCEPT_FLAG} to accept it"
                ));
            }
        }
        let wanted = need.get(&n.addr).copied().unwrap_or(0);
        if let Some(free) = m.free_bytes() {
            let with_margin = (wanted as f64 * MARGIN) as u64;
            if free < with_margin {
                out.reasons.push(format!(
                    "node {} has {} free under its maxmemory, and the activity will need about {} there ({} B per product, {} B per unit it may sell, +{:.0}%): raise maxmemory or free memory",
                    n.addr,
                    human_bytes(free),
                    human_bytes(with_margin),
                    BYTES_PER_PRODUCT,
                    BYTES_PER_UNIT,
                    (MARGIN - 1.0) * 100.0
                ));
            }
        }
        if m.used_bytes.is_none() {
            out.accepted
                .push(format!("node {}: memory unchecked (INFO refused)", n.addr));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redis::info::{Memory, NodeStats};

    fn node(addr: &str, policy: &str, used: u64, max: u64) -> NodeHealth {
        NodeHealth {
            addr: addr.into(),
            role: Role::Primary,
            replica_of: None,
            ok: true,
            latency_ms: Some(0.1),
            scripts: Vec::new(),
            error: None,
            memory: Memory {
                used_bytes: Some(used),
                max_bytes: Some(max),
                policy: Some(policy.into()),
                evicted_keys: Some(0),
            },
            unchecked: Vec::new(),
            replication: None,
            migrating: Vec::new(),
            answered: true,
            stats: NodeStats::default(),
        }
    }

    #[test]
    fn an_evicting_policy_is_a_reason_unless_accepted() {
        let need = BTreeMap::from([("a:1".to_string(), 1000)]);
        let nodes = [node("a:1", "volatile-lru", 1_000, 0)];
        let v = verdict(&nodes, &need, false);
        assert_eq!(v.reasons.len(), 1, "{v:?}");
        assert!(v.reasons[0].contains("volatile-lru"), "{v:?}");
        assert!(v.reasons[0].contains(ACCEPT_FLAG), "{v:?}");
        let v = verdict(&nodes, &need, true);
        assert!(v.reasons.is_empty(), "{v:?}");
        assert!(v.accepted[0].contains("accepted with --accept-eviction"));
        assert!(
            verdict(&[node("a:1", "noeviction", 1_000, 0)], &need, false)
                == MemoryVerdict::default()
        );
    }

    #[test]
    fn too_little_room_is_a_reason_even_when_accepted() {
        let need = BTreeMap::from([("a:1".to_string(), 1_000_000)]);
        // 1.2 MB free is short of 1 MB + 25%.
        let tight = [node("a:1", "noeviction", 800_000, 2_000_000)];
        let v = verdict(&tight, &need, true);
        assert_eq!(v.reasons.len(), 1, "{v:?}");
        assert!(v.reasons[0].contains("free under its maxmemory"), "{v:?}");
        let roomy = [node("a:1", "noeviction", 500_000, 2_000_000)];
        assert!(verdict(&roomy, &need, false).reasons.is_empty());
    }
}
