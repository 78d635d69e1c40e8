//! The eviction drill (issue 19): Redis shared with a cache under `volatile-lru` and a small
//! `maxmemory` evicts keys of the sale while buyers deduct (every key of an activity carries an
//! expiry, so any one of them may go). Products missing a piece stop selling (the scripts
//! answer -1) instead of selling unchecked; after the memory is raised, `preheat`,
//! `compensation resolve --all` and `fix --yes` leave every product balanced, and a second load
//! sells the rest: for every product, live units <= initial stock and no buyer above the limit.
//! On a standalone server and a 3-primary cluster.

use crate::harness::cli::finish;
use crate::harness::fixtures::{import, live_window};
use crate::harness::redis_server::RedisCluster;
use crate::harness::session::products;
use crate::harness::{Console, RedisServer, TestDb};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

const PRODUCTS: [(&str, i64, i64); 3] = [("p0", 2000, 2), ("p1", 2000, 2), ("p2", 2000, 2)];

/// A cache beside the sale: keys with an expiry, written and read in a loop until `stop`, so
/// that under `volatile-lru` the sale's own keys are the least recently used.
fn fill(ports: Vec<u16>, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let blob = "x".repeat(16 * 1024);
        let mut n = 0u64;
        // A steady trickle (about 1.5 MB a second per node) rather than a flood: the memory
        // runs out part way through the sale, and what goes is what LRU picks, some of the
        // sale's keys among the cache's.
        while !stop.load(Ordering::Relaxed) {
            for port in &ports {
                let key = format!("cache:{n}");
                let _ = std::process::Command::new("redis-cli")
                    .args([
                        "-p",
                        &port.to_string(),
                        "-c",
                        "SET",
                        &key,
                        &blob,
                        "EX",
                        "3600",
                    ])
                    .output();
                n += 1;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        n
    })
}

/// Evicted keys so far, over every node.
fn evicted(ports: &[u16]) -> u64 {
    ports
        .iter()
        .map(|p| {
            let out = std::process::Command::new("redis-cli")
                .args(["-p", &p.to_string(), "INFO", "stats"])
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default();
            out.lines()
                .find_map(|l| l.strip_prefix("evicted_keys:"))
                .and_then(|v| v.trim().parse::<u64>().ok())
                .unwrap_or(0)
        })
        .sum()
}

async fn drill(c: &Console, ports: Vec<u16>, label: &str) {
    let stop = Arc::new(AtomicBool::new(false));
    let filler = fill(ports.clone(), stop.clone());
    let load = c.spawn(
        "--json load ev --buyers 9000 --concurrency 32 --rate 3000 --retries 1 --yes --pay-share 0.5
         --payment-window-secs 2",
    );
    let first = finish(load, Duration::from_secs(180));
    first.expect_code(0);
    // The cache goes on filling: the node is at its limit and evicting. `status` raises
    // `evicting` at once, `watch` on its first polls.
    let watch = c.spawn("--json watch ev --interval 1 --count 3");
    let s = c.json("status ev");
    let kinds = alert_kinds(&s);
    assert!(
        kinds.contains(&"evicting".to_string()),
        "{label}: status alerts {kinds:?}"
    );
    let w = finish(watch, Duration::from_secs(60));
    // The cache goes on filling until the sale itself has lost a piece: what LRU takes is
    // otherwise chance (each read of the console's touches the sale's keys), and a drill that
    // evicted only the cache would check nothing of the sale.
    let lost = sale_loses_a_piece(c, label);
    stop.store(true, Ordering::Relaxed);
    let _ = filler.join();
    let raised: Vec<serde_json::Value> = w
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|e: &serde_json::Value| e["event"] == "raised" && e["kind"] == "evicting")
        .collect();
    assert!(
        !raised.is_empty(),
        "{label}: watch raised no evicting alert: {}",
        w.all_output()
    );
    assert!(
        raised[0]["node"]
            .as_str()
            .is_some_and(|n| n.starts_with("127.0.0.1:")),
        "{label}: {}",
        raised[0]
    );
    let n = evicted(&ports);
    assert!(n > 0, "{label}: nothing was evicted");
    eprintln!("{label}: {n} keys evicted; the sale's products lost: {lost:?}");
    // The memory raised: nothing is evicted any more.
    for p in &ports {
        let _ = std::process::Command::new("redis-cli")
            .args(["-p", &p.to_string(), "CONFIG", "SET", "maxmemory", "0"])
            .output();
    }
    // What the operator runs: preheat (lost stock keys), the queue, then fix until nothing is
    // left to fix (a rebuild holds back units a lost ledger cannot name until their orders had
    // the grace window: a second fix puts them back).
    let now = c.clone().with("--grace-secs 1");
    let pre = now.run("--json preheat ev --accept-eviction");
    assert!(
        matches!(pre.code, 0 | 4 | 5),
        "{label}: preheat {}",
        pre.all_output()
    );
    now.ok("compensation resolve ev --all");
    for _ in 0..3 {
        now.ok("fix ev --yes");
        std::thread::sleep(Duration::from_millis(1200));
    }
    let r = now.reconcile("ev");
    for p in products(&r) {
        assert_eq!(p["state"], "ok", "{label}: {p}");
        assert_eq!(p["drift"], 0, "{label}: {p}");
    }
    // The second load sells what is left, and never more.
    now.ok("load ev --buyers 9000 --concurrency 32 --retries 1 --yes --pay-share 1");
    let r = now.json("status ev");
    for p in products(&r) {
        let (initial, sold) = (
            p["initial"].as_i64().unwrap_or(0),
            p["db_sold"].as_i64().unwrap_or(0),
        );
        assert!(sold <= initial, "{label}: oversold: {p}");
        assert_ne!(p["state"], "oversold", "{label}: {p}");
    }
}

/// Polls `status` until a product of the sale has lost a piece to eviction (its `lost` list
/// not empty, never read `ok`); returns each such product with its state and pieces.
fn sale_loses_a_piece(c: &Console, label: &str) -> Vec<String> {
    let started = std::time::Instant::now();
    loop {
        let s = c.run("--json status ev");
        let lost: Vec<String> = products(&s.json())
            .iter()
            .filter(|p| p["lost"].as_array().is_some_and(|l| !l.is_empty()))
            .map(|p| {
                assert_ne!(
                    p["state"], "ok",
                    "{label}: a product that lost a piece reads ok: {p}"
                );
                format!("{} {} {}", p["product"], p["state"], p["lost"])
            })
            .collect();
        if !lost.is_empty() {
            return lost;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "{label}: the sale lost no key to eviction in 120 s: {}",
            s.stdout
        );
        std::thread::sleep(Duration::from_secs(2));
    }
}

/// The kinds of a status document's alerts.
fn alert_kinds(s: &serde_json::Value) -> Vec<String> {
    s["alerts"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|x| x["kind"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The gate on a server that may evict the sale's keys: no-go naming the policy and the flag,
/// nothing written; with the flag, go, and the report names the risk accepted.
fn preheat_on_evicting_server(c: &Console, ports: &[u16], label: &str) {
    let no = c.run("--json preheat ev");
    no.expect_code(4);
    let doc = no.json();
    assert_eq!(doc["decision"], "no-go", "{label}: {doc}");
    let reasons = doc["reasons"].to_string();
    assert!(
        reasons.contains("volatile-lru") && reasons.contains("--accept-eviction"),
        "{label}: {reasons}"
    );
    for p in ports {
        let out = std::process::Command::new("redis-cli")
            .args(["-p", &p.to_string(), "DBSIZE"])
            .output()
            .expect("redis-cli");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            "0",
            "{label}: a no-go wrote keys on {p}"
        );
    }
    let go = c.json("preheat ev --accept-eviction");
    assert_eq!(go["decision"], "go", "{label}: {go}");
    assert!(
        go["accepted"].to_string().contains("volatile-lru"),
        "{label}: {go}"
    );
}

/// Live units per product and the most any buyer holds, from the database.
async fn check_orders(lib: &seckill_console::db::Db, label: &str) {
    let rows: Vec<(String, String, i64)> = lib
        .fetch_all_as(
            "SELECT product_id, user_id, SUM(quantity) FROM seckill_order \
             WHERE activity_id = 'ev' AND status IN ('pending_payment', 'paid') \
             GROUP BY product_id, user_id",
            &[],
        )
        .await
        .expect("holdings");
    for (p, u, n) in &rows {
        assert!(
            *n <= 2,
            "{label}: {u} holds {n} of {p}, above the limit of 2"
        );
    }
    for (p, stock, _) in PRODUCTS {
        let sold: i64 = rows.iter().filter(|(x, _, _)| x == p).map(|r| r.2).sum();
        assert!(sold <= stock, "{label}: {p} sold {sold} of {stock}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eviction_mid_sale_never_oversells_and_one_repair_settles_it_standalone() {
    let server =
        RedisServer::start_with(&["--maxmemory", "3mb", "--maxmemory-policy", "volatile-lru"]);
    let db = TestDb::sqlite();
    let lib = db.open().await;
    let c = Console::redis(&server.url(), &db.url);
    import(&lib, "ev", &PRODUCTS, live_window()).await;
    preheat_on_evicting_server(&c, &[server.port], "standalone");
    drill(&c, vec![server.port], "standalone").await;
    check_orders(&lib, "standalone").await;
    lib.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eviction_mid_sale_never_oversells_and_one_repair_settles_it_cluster() {
    let cluster = RedisCluster::start_with_args(
        3,
        0,
        &["--maxmemory", "3mb", "--maxmemory-policy", "volatile-lru"],
    );
    let db = TestDb::sqlite();
    let lib = db.open().await;
    let c = Console::cluster(&cluster.seeds(), &db.url);
    import(&lib, "ev", &PRODUCTS, live_window()).await;
    let ports: Vec<u16> = cluster.nodes.iter().map(|n| n.port).collect();
    preheat_on_evicting_server(&c, &ports, "cluster");
    drill(&c, ports, "cluster").await;
    check_orders(&lib, "cluster").await;
    lib.close().await;
}

/// `used_memory` and `maxmemory` of one node.
fn memory_of(port: u16) -> (f64, f64) {
    let out = std::process::Command::new("redis-cli")
        .args(["-p", &port.to_string(), "INFO", "memory"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let field = |name: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (field("used_memory:"), field("maxmemory:"))
}

/// A `noeviction` server filled to 96% of its `maxmemory`: `status` raises `memory_high`
/// critical (deductions are about to fail with OOM), and `ping` shows the node's memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_noeviction_server_near_its_limit_is_memory_high_critical() {
    let server =
        RedisServer::start_with(&["--maxmemory", "8mb", "--maxmemory-policy", "noeviction"]);
    let db = TestDb::sqlite();
    let lib = db.open().await;
    let c = Console::redis(&server.url(), &db.url);
    import(&lib, "mem", &[("p0", 100, 2)], live_window()).await;
    c.preheat("mem");
    let s = c.json("status mem");
    assert!(!alert_kinds(&s).iter().any(|k| k == "memory_high"), "{s}");
    let node = &s["redis_nodes"][0];
    assert_eq!(node["memory"]["policy"], "noeviction", "{node}");
    assert_eq!(node["memory"]["max_bytes"], 8 * 1024 * 1024, "{node}");
    // The cache grows in 8 KB steps to between 96% and 99%.
    let blob = "x".repeat(8 * 1024);
    let mut i = 0;
    loop {
        let (used, max) = memory_of(server.port);
        if used / max >= 0.96 {
            assert!(used / max < 0.995, "overshot: {used} of {max}");
            break;
        }
        let out = std::process::Command::new("redis-cli")
            .args([
                "-p",
                &server.port.to_string(),
                "SET",
                &format!("cache:{i}"),
                &blob,
            ])
            .output()
            .expect("redis-cli");
        assert!(
            !String::from_utf8_lossy(&out.stdout).contains("OOM"),
            "the server filled up before 96%"
        );
        i += 1;
    }
    let s = c.json("status mem");
    let high: Vec<&serde_json::Value> = s["alerts"]
        .as_array()
        .expect("alerts")
        .iter()
        .filter(|a| a["kind"] == "memory_high")
        .collect();
    assert_eq!(high.len(), 1, "{s}");
    assert_eq!(high[0]["severity"], "critical", "{}", high[0]);
    assert!(
        high[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains("OOM")),
        "{}",
        high[0]
    );
    let ping = c.json("ping");
    assert_eq!(
        ping["redis"]["nodes"][0]["memory"]["policy"], "noeviction",
        "{ping}"
    );
    lib.close().await;
}
