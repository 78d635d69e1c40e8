//! The soak drill (issue 52): a load on a 3-primary cluster with a replica each (AOF), struck
//! by a `kill -9` and restart of a primary, a planned failover and a reshard, watched by the
//! exporter and `watch` while `status` is read again and again. The live views may lag a poll
//! behind a fresh `status`, never two: a product whose state in the exporter or in `watch`
//! differs from `status` at two reads in a row is a failure.
//!
//! Not in the suite (it would take a minute of its 15): `scripts/soak` runs it (30 minutes):
//! `SECKILL_SOAK_SECS` and `SECKILL_SOAK_RATE` (deductions a second) set them.

use crate::harness::cli::{finish, terminate};
use crate::harness::prometheus::get;
use crate::harness::{Console, RedisCluster, TestDb};
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// Each product's state in the exporter's text.
fn exporter_states(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter(|l| l.starts_with("seckill_product_state{") && l.ends_with("} 1"))
        .filter_map(|l| {
            let product = l.split("product=\"").nth(1)?.split('"').next()?;
            let state = l.split("state=\"").nth(1)?.split('"').next()?;
            Some((product.to_string(), state.to_string()))
        })
        .collect()
}

fn status_states(doc: &serde_json::Value) -> BTreeMap<String, String> {
    doc["products"]
        .as_array()
        .map(|ps| {
            ps.iter()
                .filter_map(|p| {
                    Some((
                        p["product"].as_str()?.to_string(),
                        p["state"].as_str()?.to_string(),
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The products whose state differs between the two readings (a product one of them lacks
/// counts as differing).
fn differing(a: &BTreeMap<String, String>, b: &BTreeMap<String, String>) -> Vec<String> {
    let mut out: Vec<String> = a
        .iter()
        .filter(|(p, s)| b.get(*p) != Some(*s))
        .map(|(p, _)| p.clone())
        .collect();
    out.extend(b.keys().filter(|p| !a.contains_key(*p)).cloned());
    out
}

/// The node ids of the cluster's primaries, by address.
fn primaries(cluster: &RedisCluster) -> Vec<(String, String)> {
    let text = cluster.nodes[0].cli(&["CLUSTER", "NODES"]);
    text.lines()
        .filter(|l| l.contains("master") && !l.contains("fail"))
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let id = f.next()?.to_string();
            let addr = f.next()?.split('@').next()?.to_string();
            Some((id, addr))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a drill of its own: scripts/soak runs it"]
async fn the_live_views_agree_with_status_through_a_restart_a_failover_and_a_reshard() {
    let secs = env_u64("SECKILL_SOAK_SECS", 1800);
    let rate = env_u64("SECKILL_SOAK_RATE", 60);
    let mut cl = RedisCluster::start_with_args(3, 1, &["--appendonly", "yes"]);
    let db = TestDb::sqlite();
    let lib = db.open().await;
    let c = Console::cluster(&cl.seeds(), &db.url).with("--grace-secs 5");
    let names: Vec<String> = (0..12).map(|i| format!("p{i:02}")).collect();
    let stock = i64::try_from(secs * rate).unwrap_or(i64::MAX);
    let products: Vec<(&str, i64, i64)> = names.iter().map(|n| (n.as_str(), stock, 50)).collect();
    c.import_preheat(&lib, "soak", &products).await;
    lib.close().await;

    let (exporter, port) = c.spawn_exporter("soak", "1");
    let watch = c.spawn(&["--json", "watch", "soak", "--interval", "1"]);
    let buyers = (secs * rate).to_string();
    let load = c.spawn(&[
        "--json",
        "load",
        "soak",
        "--buyers",
        &buyers,
        "--concurrency",
        "8",
        "--rate",
        &rate.to_string(),
        "--pay-share",
        "0.5",
        "--retries",
        "2",
        "--yes",
    ]);
    let started = Instant::now();
    let at = |share: f64| Duration::from_secs_f64(secs as f64 * share);
    let mut struck = 0;
    // Two readings in a row that differ, per product, and when.
    let mut before: Vec<String> = Vec::new();
    let mut lasting: Vec<String> = Vec::new();
    let mut readings = 0;
    // How many readings saw each state (what the drill put the views through).
    let mut seen: BTreeMap<String, u32> = BTreeMap::new();
    while started.elapsed() < at(1.0) {
        let t = started.elapsed();
        if struck == 0 && t >= at(0.25) {
            // A primary dies and comes back from its AOF, faster than a failover.
            let victim = cl
                .nodes
                .iter()
                .position(|n| n.cli(&["ROLE"]).starts_with("master"))
                .expect("a primary");
            let node = &mut cl.nodes[victim];
            println!("soak {:.0}s: kill -9 {}", t.as_secs_f64(), node.addr());
            node.kill9();
            std::thread::sleep(Duration::from_millis(800));
            node.restart();
            struck = 1;
        } else if struck == 1 && t >= at(0.5) {
            let replica = cl
                .nodes
                .iter()
                .find(|n| n.cli(&["ROLE"]).starts_with("slave"))
                .expect("a replica");
            println!(
                "soak {:.0}s: CLUSTER FAILOVER on {}",
                t.as_secs_f64(),
                replica.addr()
            );
            replica.cli(&["CLUSTER", "FAILOVER"]);
            struck = 2;
        } else if struck == 2 && t >= at(0.75) {
            let p = primaries(&cl);
            if p.len() >= 2 {
                println!(
                    "soak {:.0}s: reshard 200 slots {} -> {}",
                    t.as_secs_f64(),
                    p[0].1,
                    p[1].1
                );
                let out = std::process::Command::new("redis-cli")
                    .args([
                        "--cluster",
                        "reshard",
                        &p[0].1,
                        "--cluster-from",
                        &p[0].0,
                        "--cluster-to",
                        &p[1].0,
                        "--cluster-slots",
                        "200",
                        "--cluster-yes",
                    ])
                    .stdin(std::process::Stdio::null())
                    .output()
                    .expect("redis-cli --cluster reshard");
                assert!(out.status.success(), "{out:?}");
            }
            struck = 3;
        }
        let s = c.run(&["--json", "--read-only", "status", "soak"]);
        let Ok(doc) = serde_json::from_str::<serde_json::Value>(&s.stdout) else {
            // A status refused mid-incident (a node down) is no reading.
            before.clear();
            continue;
        };
        let metrics = get(port, "/metrics").map(|(_, t)| t).unwrap_or_default();
        let now = differing(&status_states(&doc), &exporter_states(&metrics));
        readings += 1;
        for s in status_states(&doc).into_values() {
            *seen.entry(s).or_default() += 1;
        }
        for p in now.iter().filter(|p| before.contains(p)) {
            lasting.push(format!(
                "{p} at {:.0}s: status {:?}, exporter {:?}",
                t.as_secs_f64(),
                status_states(&doc).get(p),
                exporter_states(&metrics).get(p)
            ));
        }
        before = now;
        std::thread::sleep(Duration::from_millis(1500));
    }
    let l = finish(load, Duration::from_secs(secs + 300));
    // Quiet now: the last status and watch's last word on each product agree.
    std::thread::sleep(Duration::from_secs(4));
    let doc = c.json(&["--read-only", "status", "soak"]);
    terminate(&watch);
    terminate(&exporter);
    let w = finish(watch, Duration::from_secs(30));
    finish(exporter, Duration::from_secs(30));
    println!(
        "soak: {secs} s at {rate}/s, {readings} readings (product states seen: {seen:?}), load exit {}",
        l.code
    );
    assert!(readings > 5, "too few readings: {readings}");
    assert!(
        lasting.is_empty(),
        "the exporter disagreed with status at two readings in a row: {lasting:#?}"
    );
    // watch: each product's state as its lines tell it (ok until one says otherwise).
    let mut states: HashMap<String, String> = HashMap::new();
    for e in w
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["event"] == "state")
    {
        if let (Some(p), Some(s)) = (e["product"].as_str(), e["state"].as_str()) {
            states.insert(p.to_string(), s.to_string());
        }
    }
    for (p, s) in status_states(&doc) {
        let shown = states.get(&p).cloned().unwrap_or_else(|| "ok".into());
        assert_eq!(shown, s, "watch left {p} at {shown}: {}", w.stdout);
    }
}
