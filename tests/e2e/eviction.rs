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
    stop.store(true, Ordering::Relaxed);
    let _ = filler.join();
    first.expect_code(0);
    let n = evicted(&ports);
    assert!(n > 0, "{label}: nothing was evicted");
    // What was lost of the sale itself, as the console names it.
    let s = c.run("--json status ev");
    let lost: Vec<String> = products(&s.json())
        .iter()
        .filter(|p| p["state"] != "ok")
        .map(|p| format!("{} {} {}", p["product"], p["state"], p["lost"]))
        .collect();
    eprintln!("{label}: {n} keys evicted; the sale's products now: {lost:?}");
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
    let pre = now.run("--json preheat ev");
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
    c.preheat("ev");
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
    c.preheat("ev");
    let ports: Vec<u16> = cluster.nodes.iter().map(|n| n.port).collect();
    drill(&c, ports, "cluster").await;
    check_orders(&lib, "cluster").await;
    lib.close().await;
}
