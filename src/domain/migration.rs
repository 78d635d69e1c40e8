//! A Redis Cluster slot left migrating, and the alert for the products in it. No I/O.
//!
//! While a slot migrates, its keys move from the source to the target a batch at a time; a
//! product's five keys share one slot, so between two batches they sit on both nodes, and
//! every deduction (one script over all five keys) answers TRYAGAIN on the source and ASK on
//! the target. A reshard that dies there (its `redis-cli` killed, a node restarted) leaves
//! the slot migrating for good: reads still follow ASK and look fine, while the product sells
//! nothing. Only the nodes' own slot tables say so.

use super::alerts::{Alert, AlertKind, Severity};
use serde::Serialize;

/// One slot its source node says it is migrating.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Migration {
    pub slot: u16,
    /// The source (`host:port`), which says `[slot->-target]` of itself.
    pub from: String,
    /// The target (`host:port`, or its node id when the table does not name it).
    pub to: String,
    /// The target's node id, for `CLUSTER SETSLOT slot NODE id`.
    pub to_id: String,
}

/// The address of a `CLUSTER NODES` line (`ip:port@cport[,hostname]`), as `ip:port`.
fn addr_of(field: &str) -> &str {
    field.split(['@', ',']).next().unwrap_or(field)
}

/// The slots the node that answered `CLUSTER NODES` (its `myself` line) is migrating.
pub fn migrating_from_nodes(text: &str) -> Vec<Migration> {
    let lines: Vec<Vec<&str>> = text
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<&str>>())
        .filter(|f| f.len() >= 8)
        .collect();
    let addr_by_id = |id: &str| {
        lines
            .iter()
            .find(|f| f[0] == id)
            .map(|f| addr_of(f[1]).to_string())
    };
    let Some(me) = lines
        .iter()
        .find(|f| f[2].split(',').any(|flag| flag == "myself"))
    else {
        return Vec::new();
    };
    let from = addr_of(me[1]).to_string();
    me[8..]
        .iter()
        .filter_map(|s| {
            let inner = s.strip_prefix('[')?.strip_suffix(']')?;
            let (slot, target) = inner.split_once("->-")?;
            let slot: u16 = slot.parse().ok()?;
            Some(Migration {
                slot,
                from: from.clone(),
                to: addr_by_id(target).unwrap_or_else(|| target.to_string()),
                to_id: target.to_string(),
            })
        })
        .collect()
}

/// Product ids an alert names at most.
const NAMED: usize = 5;

/// The critical alert of a migrating slot that holds products of the sale (`products`: their
/// ids, in the slot); none for a slot without any.
pub fn slot_alert(m: &Migration, products: &[&str]) -> Option<Alert> {
    let first = products.first()?;
    let named: Vec<&str> = products.iter().take(NAMED).copied().collect();
    let more = products.len().saturating_sub(NAMED);
    let which = if more > 0 {
        format!("{} and {more} more", named.join(", "))
    } else {
        named.join(", ")
    };
    Some(Alert {
        kind: AlertKind::SlotMigrating,
        severity: Severity::Critical,
        product: (products.len() == 1).then(|| first.to_string()),
        node: Some(m.from.clone()),
        message: format!(
            "slot {} is migrating from {} to {} with {} product(s) of this sale in it ({which}): while a product's keys are split between the two nodes every deduction of it answers TRYAGAIN. If no reshard is running, finish the move: redis-cli --cluster fix {} (or CLUSTER SETSLOT {} NODE {} on both nodes once its keys are moved)",
            m.slot,
            m.from,
            m.to,
            products.len(),
            m.from,
            m.slot,
            m.to_id
        ),
        age_secs: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODES: &str = "\
07c37dfeb235213a872192d90877d0cd55635b91 127.0.0.1:30004@31004,host-a slave e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 0 1426238317239 4 connected
67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:30002@31002 master - 0 1426238316232 2 connected 5461-10922 [5462-<-e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca]
e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca 127.0.0.1:30001@31001 myself,master - 0 0 1 connected 0-5460 [5462->-67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1] [93->-nosuchnode]
";

    #[test]
    fn the_sources_own_line_names_its_migrating_slots_and_their_targets() {
        let m = migrating_from_nodes(NODES);
        assert_eq!(
            m,
            vec![
                Migration {
                    slot: 5462,
                    from: "127.0.0.1:30001".into(),
                    to: "127.0.0.1:30002".into(),
                    to_id: "67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1".into(),
                },
                Migration {
                    slot: 93,
                    from: "127.0.0.1:30001".into(),
                    to: "nosuchnode".into(),
                    to_id: "nosuchnode".into(),
                },
            ]
        );
        // The target's line shows the import, which is not a migration of its own.
        let target = NODES.replace("myself,master", "master").replacen(
            "67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:30002@31002 master",
            "67ed2db8d677e59ec4a4cefb06858cf2a1a89fa1 127.0.0.1:30002@31002 myself,master",
            1,
        );
        assert!(migrating_from_nodes(&target).is_empty());
        assert!(migrating_from_nodes("").is_empty());
        assert!(migrating_from_nodes("garbage\n[1->-x]").is_empty());
    }

    #[test]
    fn the_alert_names_the_slot_the_nodes_the_products_and_the_remedy() {
        let m = &migrating_from_nodes(NODES)[0];
        assert!(slot_alert(m, &[]).is_none());
        let a = slot_alert(m, &["p1"]).expect("an alert");
        assert_eq!(a.severity, Severity::Critical);
        assert_eq!(a.product.as_deref(), Some("p1"));
        for part in [
            "slot 5462",
            "127.0.0.1:30001 to 127.0.0.1:30002",
            "(p1)",
            "TRYAGAIN",
            "redis-cli --cluster fix 127.0.0.1:30001",
        ] {
            assert!(a.message.contains(part), "{part}: {}", a.message);
        }
        let many: Vec<String> = (0..7).map(|i| format!("p{i}")).collect();
        let ids: Vec<&str> = many.iter().map(String::as_str).collect();
        let a = slot_alert(m, &ids).expect("an alert");
        assert!(a.product.is_none());
        assert!(
            a.message.contains("p0, p1, p2, p3, p4 and 2 more"),
            "{}",
            a.message
        );
    }
}
