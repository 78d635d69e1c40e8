//! The resharding drill (issue 21): the slots of an activity's products move between primaries
//! (`CLUSTER SETSLOT ... IMPORTING/MIGRATING`, `MIGRATE` key by key, `SETSLOT ... NODE`, as
//! `redis-cli --cluster reshard` does) while `load` sells, `watch` polls and an operator runs
//! `status` and `fix --yes` over and over. Every command answers throughout (never exit 1), the
//! books balance after and nothing is oversold; `cleanup` in the middle of a migration sees
//! every key of the activity exactly once. On SQLite and PostgreSQL.

use crate::harness::cli::finish;
use crate::harness::fixtures::{P, import, live_window, product_keys};
use crate::harness::redis_server::{RedisCluster, RedisServer};
use crate::harness::session::products;
use crate::harness::{Console, TestDb, assert_books};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const PRODUCTS: usize = 6;

fn id_of(n: &RedisServer) -> String {
    n.cli(&["CLUSTER", "MYID"]).trim().to_string()
}

/// Moves `slot` from `src` to `dst` the way `redis-cli --cluster reshard` does, one key at a
/// time with `pause` between keys, so readers meet the slot half moved.
fn migrate_slot(
    cluster: &RedisCluster,
    slot: &str,
    src: &RedisServer,
    dst: &RedisServer,
    pause: Duration,
) {
    let (src_id, dst_id) = (id_of(src), id_of(dst));
    dst.cli(&["CLUSTER", "SETSLOT", slot, "IMPORTING", &src_id]);
    src.cli(&["CLUSTER", "SETSLOT", slot, "MIGRATING", &dst_id]);
    let addr = dst.addr();
    let (host, port) = addr.rsplit_once(':').expect("host:port");
    loop {
        let keys: Vec<String> = src
            .cli(&["CLUSTER", "GETKEYSINSLOT", slot, "1"])
            .lines()
            .map(str::to_string)
            .filter(|k| !k.is_empty())
            .collect();
        let Some(key) = keys.first() else { break };
        let out = src.cli(&["MIGRATE", host, port, "", "0", "5000", "KEYS", key]);
        assert!(
            out.contains("OK") || out.contains("NOKEY"),
            "MIGRATE {key}: {out}"
        );
        std::thread::sleep(pause);
    }
    // The new owner first, then the old one, then the rest (as redis-cli does).
    dst.cli(&["CLUSTER", "SETSLOT", slot, "NODE", &dst_id]);
    src.cli(&["CLUSTER", "SETSLOT", slot, "NODE", &dst_id]);
    for n in &cluster.nodes {
        let _ = n.try_cli(&["CLUSTER", "SETSLOT", slot, "NODE", &dst_id]);
    }
}

fn slot_of(cluster: &RedisCluster, key: &str) -> String {
    cluster.nodes[0]
        .cli(&["CLUSTER", "KEYSLOT", key])
        .trim()
        .to_string()
}

/// The primary after `n` in the cluster's list (another owner for its slots).
fn next_of<'a>(cluster: &'a RedisCluster, n: &RedisServer) -> &'a RedisServer {
    let i = cluster
        .nodes
        .iter()
        .position(|x| x.port == n.port)
        .expect("node in cluster");
    &cluster.nodes[(i + 1) % cluster.nodes.len()]
}

/// Keys of activity `a` over every primary.
fn activity_keys(cluster: &RedisCluster, a: &str) -> Vec<String> {
    let mut all: Vec<String> = cluster
        .nodes
        .iter()
        .flat_map(|n| {
            n.cli(&["--scan", "--pattern", &format!("seckill:{{{a}:*")])
                .lines()
                .map(str::to_string)
                .filter(|k| !k.is_empty())
                .collect::<Vec<_>>()
        })
        .collect();
    all.sort();
    all
}

async fn drill(db: &TestDb) {
    let label = db.name();
    let cluster = RedisCluster::start();
    let lib = db.open().await;
    let c = Console::cluster(&cluster.seeds(), &db.url);
    let names: Vec<String> = (0..PRODUCTS).map(|i| format!("p{i}")).collect();
    let list: Vec<P<'_>> = names.iter().map(|p| (p.as_str(), 2000, 2)).collect();
    import(&lib, "rs", &list, live_window()).await;
    c.preheat("rs");

    let watch = c.spawn("--json watch rs --interval 0.5 --count 30");
    let load = c.spawn(
        "--json load rs --buyers 4000 --concurrency 16 --rate 400 --retries 3 --yes --pay-share 1",
    );
    // The operator's commands, over and over while the slots move.
    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Mutex::new(Vec::<(String, i32, String)>::new()));
    let operator = {
        let (c, stop, seen) = (c.clone(), stop.clone(), seen.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                for cmd in ["--json status rs", "--json fix rs --yes"] {
                    let r = c.run(cmd);
                    if let Ok(mut s) = seen.lock() {
                        s.push((cmd.to_string(), r.code, r.all_output()));
                    }
                }
            }
        })
    };
    std::thread::sleep(Duration::from_millis(800));
    for p in &names {
        let k = product_keys("rs", p);
        let src = cluster.node_for(&k.stock);
        let dst = next_of(&cluster, src);
        migrate_slot(
            &cluster,
            &slot_of(&cluster, &k.stock),
            src,
            dst,
            Duration::from_millis(120),
        );
    }
    stop.store(true, Ordering::Relaxed);
    let _ = operator.join();
    let r = finish(load, Duration::from_secs(120));
    assert!(matches!(r.code, 0 | 4), "{label}: load: {}", r.all_output());
    let w = finish(watch, Duration::from_secs(120));
    assert_ne!(w.code, 1, "{label}: watch: {}", w.all_output());
    let seen = seen.lock().map(|s| s.clone()).unwrap_or_default();
    assert!(
        seen.len() >= 4,
        "{label}: the operator ran too few commands: {}",
        seen.len()
    );
    for (cmd, code, out) in &seen {
        // fix may find a product it cannot settle yet (4) or a conflict (5); never a failure.
        assert!(
            matches!(code, 0 | 4 | 5),
            "{label}: `{cmd}` exit {code} during the reshard: {out}"
        );
        if cmd.contains("status") {
            assert_eq!(*code, 0, "{label}: `{cmd}`: {out}");
        }
    }
    // Every product now lives on another primary than before; the books balance.
    let now = c.clone().with("--grace-secs 0");
    now.ok("compensation resolve rs --all");
    now.ok("fix rs --yes");
    let doc = now.reconcile("rs");
    assert_books(&doc, &format!("{label}: after the reshard"));
    assert_eq!(products(&doc).len(), PRODUCTS);

    // cleanup in the middle of a migration: every key once, none left behind.
    let before = activity_keys(&cluster, "rs");
    let k = product_keys("rs", "p0");
    let src = cluster.node_for(&k.stock);
    let dst = next_of(&cluster, src);
    let slot = slot_of(&cluster, &k.stock);
    dst.cli(&["CLUSTER", "SETSLOT", &slot, "IMPORTING", &id_of(src)]);
    src.cli(&["CLUSTER", "SETSLOT", &slot, "MIGRATING", &id_of(dst)]);
    let addr = dst.addr();
    let (host, port) = addr.rsplit_once(':').expect("host:port");
    let moved = src.cli(&[
        "MIGRATE", host, port, "", "0", "5000", "KEYS", &k.stock, &k.meta,
    ]);
    assert!(moved.contains("OK"), "{moved}");
    let doc = c.json("cleanup rs --force");
    assert_eq!(
        doc["keys_found"].as_u64(),
        Some(before.len() as u64),
        "{label}: cleanup found another count than the keys there were: {doc}"
    );
    assert_eq!(
        doc["keys_deleted"].as_u64(),
        Some(before.len() as u64),
        "{label}: {doc}"
    );
    assert!(
        activity_keys(&cluster, "rs").is_empty(),
        "{label}: keys left"
    );
    lib.close().await;
}

// One test per database, so that the two drills (each tens of seconds, mostly waiting on
// servers) run side by side in the suite rather than one after the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resharding_during_load_keeps_every_command_answering_sqlite() {
    drill(&TestDb::sqlite()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resharding_during_load_keeps_every_command_answering_postgres() {
    drill(&TestDb::require_postgres().await).await;
}
