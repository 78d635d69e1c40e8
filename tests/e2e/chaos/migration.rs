//! `migrate.pN` (cluster only): the product's slot is left migrating from its primary to
//! another, as a reshard that died half way leaves it. Both the live view and a fresh `status`
//! must raise the critical `slot_migrating` alert naming the product; then the slot is set
//! stable on both nodes again (what `redis-cli --cluster fix` does when no key has moved yet).

use super::invariants::read_status;
use super::world::{World, pname};
use seckill_console::domain::alerts::AlertKind;
use seckill_console::ops::status::StatusReport;
use seckill_console::redis::RedisStore;
use seckill_console::redis::node::Node;
use std::sync::Arc;

/// A primary of the cluster's table: (id, `ip:port`, slot ranges).
struct Primary {
    id: String,
    addr: String,
    ranges: Vec<(u16, u16)>,
}

fn text(v: redis::Value) -> String {
    match v {
        redis::Value::BulkString(b) => String::from_utf8_lossy(&b).to_string(),
        redis::Value::VerbatimString { text, .. } => text,
        redis::Value::SimpleString(s) => s,
        _ => String::new(),
    }
}

/// The primaries of a `CLUSTER NODES` table.
fn primaries(table: &str) -> Vec<Primary> {
    table
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<&str>>())
        .filter(|f| f.len() >= 8 && f[2].split(',').any(|flag| flag == "master"))
        .map(|f| Primary {
            id: f[0].to_string(),
            addr: f[1]
                .split(['@', ','])
                .next()
                .unwrap_or_default()
                .to_string(),
            ranges: f[8..]
                .iter()
                .filter(|s| !s.starts_with('['))
                .filter_map(|s| match s.split_once('-') {
                    Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
                    None => s.parse().ok().map(|a| (a, a)),
                })
                .collect(),
        })
        .collect()
}

async fn setslot(node: &Node, args: &[&str]) -> String {
    let mut cmd = redis::cmd("CLUSTER");
    cmd.arg("SETSLOT");
    for a in args {
        cmd.arg(*a);
    }
    format!("{:?}", node.query(&cmd).await)
}

fn node_at(store: &RedisStore, addr: &str) -> Option<Arc<Node>> {
    store.primaries().into_iter().find(|n| n.addr == addr)
}

/// The report raises the critical `slot_migrating` alert naming `product`.
fn raised(r: &StatusReport, product: &str) -> bool {
    r.alerts.iter().any(|a| {
        a.kind == AlertKind::SlotMigrating
            && (a.product.as_deref() == Some(product) || a.message.contains(product))
    })
}

impl World {
    pub async fn migrate(&mut self, p: usize) {
        if !self.store.is_cluster() {
            self.say("   (a single server: no slot to leave migrating)");
            return;
        }
        let slot = seckill_console::redis::slots::key_slot(self.pkeys(p).stock.as_bytes());
        let Some(first) = self.store.primaries().into_iter().next() else {
            return;
        };
        let table = match first
            .query(&redis::cmd("CLUSTER").arg("NODES").clone())
            .await
        {
            Ok(v) => text(v),
            Err(e) => {
                self.say(format!("   CLUSTER NODES failed: {e}"));
                return;
            }
        };
        let all = primaries(&table);
        let owner = all
            .iter()
            .find(|n| n.ranges.iter().any(|(a, b)| (*a..=*b).contains(&slot)));
        let (Some(owner), Some(target)) =
            (owner, owner.and_then(|o| all.iter().find(|n| n.id != o.id)))
        else {
            self.say(format!(
                "   (slot {slot} has no owner and target in {table:?})"
            ));
            return;
        };
        let (Some(from), Some(to)) = (
            node_at(&self.store, &owner.addr),
            node_at(&self.store, &target.addr),
        ) else {
            self.say("   (the nodes of the table are not the store's)");
            return;
        };
        let s = slot.to_string();
        let a = setslot(&to, &[&s, "IMPORTING", &owner.id]).await;
        let b = setslot(&from, &[&s, "MIGRATING", &target.id]).await;
        self.say(format!(
            "   slot {slot} of {} left migrating {} -> {}: {a} {b}",
            pname(p),
            owner.addr,
            target.addr
        ));
        let fresh = read_status(self).await;
        let live = match self.live.take() {
            Some(mut live) => {
                let r = live.read(self).await;
                self.live = Some(live);
                Some(r)
            }
            None => None,
        };
        // The remedy, whatever the views said: the slot is stable again on both nodes.
        let a = setslot(&from, &[&s, "STABLE"]).await;
        let b = setslot(&to, &[&s, "STABLE"]).await;
        self.say(format!("   slot {slot} stable again: {a} {b}"));
        match fresh {
            Ok(r) if raised(&r, pname(p)) => {}
            Ok(r) => self.violation(
                "7-live-view",
                format!(
                    "slot_migrating missing from status: slot {slot} of {} migrating, alerts {:?}",
                    pname(p),
                    r.alerts.iter().map(|a| &a.message).collect::<Vec<_>>()
                ),
            ),
            Err(v) => self.violation("E-console-error", v.detail),
        }
        match live {
            Some(Ok(r)) if raised(&r, pname(p)) => {}
            Some(Ok(r)) => self.violation(
                "7-live-view",
                format!(
                    "slot_migrating missing from the live view: slot {slot} of {} migrating, alerts {:?}",
                    pname(p),
                    r.alerts.iter().map(|a| &a.message).collect::<Vec<_>>()
                ),
            ),
            Some(Err(v)) => self.violation(v.inv, v.detail),
            None => {}
        }
    }
}
