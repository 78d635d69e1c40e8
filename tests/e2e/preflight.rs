//! The check before a write (issue 21): pointed at a replica, or as an ACL user that may run
//! the scripts but not the commands inside them, every write command refuses with exit 5
//! naming the node and the command, before it writes anything: the database's rows and every
//! Redis key's DUMP are as they were. `ping` says what each node really is.

use crate::harness::fixtures::{import, live_window};
use crate::harness::{Console, RedisServer, TestDb};
use seckill_console::db::Db;
use std::time::Duration;

/// What a write could change in the database, as one comparable value.
async fn db_state(db: &Db) -> Vec<(String, i64)> {
    let mut out = Vec::new();
    for (what, sql) in [
        ("audit rows", "SELECT COUNT(*) FROM seckill_audit"),
        ("stock", "SELECT SUM(initial_stock) FROM seckill_product"),
        (
            "paused",
            "SELECT COUNT(*) FROM seckill_product WHERE paused <> 0",
        ),
        (
            "resolved",
            "SELECT COUNT(*) FROM seckill_compensation WHERE status <> 'pending'",
        ),
    ] {
        let rows: Vec<(i64,)> = db.fetch_all_as(sql, &[]).await.expect(what);
        out.push((what.to_string(), rows[0].0));
    }
    out
}

/// Every key of the server with its DUMP.
fn redis_state(server: &RedisServer) -> Vec<(String, String)> {
    let mut keys: Vec<String> = server
        .cli(&["--scan"])
        .lines()
        .map(str::to_string)
        .filter(|k| !k.is_empty())
        .collect();
    keys.sort();
    keys.into_iter()
        .map(|k| {
            let dump = server.cli(&["DUMP", &k]);
            (k, dump)
        })
        .collect()
}

/// Each write command the operator has, on activity `a` / product `p0`.
const WRITES: [&str; 7] = [
    "topup a --product p0 --add 5 --yes",
    "pause a --yes",
    "resume a --yes",
    "fix a --yes",
    "preheat a",
    "cleanup a --force",
    "compensation resolve a --all",
];

fn every_write_refused(c: &Console, needle: &str, label: &str) {
    for w in WRITES {
        let r = c.run(format!("--json {w}"));
        assert_eq!(
            r.code,
            5,
            "{label}: `{w}` exit {}: {}",
            r.code,
            r.all_output()
        );
        let e = r.json_error();
        let msg = e["error"].as_str().unwrap_or_default();
        assert!(msg.contains(needle), "{label}: `{w}`: {msg}");
        assert!(msg.contains("before any write"), "{label}: `{w}`: {msg}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_given_as_redis_refuses_every_write_before_it_writes() {
    let primary = RedisServer::start();
    let replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &primary.port.to_string()]);
    let db = TestDb::sqlite();
    let lib = db.open().await;
    import(&lib, "a", &[("p0", 100, 2), ("p1", 50, 1)], live_window()).await;
    Console::redis(&primary.url(), &db.url).preheat("a");
    // The replica has caught up.
    for _ in 0..100 {
        if replica.cli(&["DBSIZE"]).trim() == primary.cli(&["DBSIZE"]).trim()
            && replica
                .cli(&["INFO", "replication"])
                .contains("master_link_status:up")
        {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let c = Console::redis(&replica.url(), &db.url);
    let ping = c.run("--json ping");
    assert_eq!(ping.code, 4, "{}", ping.all_output());
    let doc = ping.json();
    let node = &doc["redis"]["nodes"][0];
    assert_eq!(node["role"], "replica", "{node}");
    assert_eq!(node["ok"], false, "{node}");
    assert_eq!(node["replica_of"], primary.addr(), "{node}");
    let before = (db_state(&lib).await, redis_state(&primary));
    every_write_refused(&c, "is a replica", "replica");
    let after = (db_state(&lib).await, redis_state(&primary));
    assert_eq!(before, after, "a refused write changed something");
    // The reads still work there.
    assert_eq!(
        c.json("status a")["products"].as_array().map(Vec::len),
        Some(2)
    );
    lib.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_without_the_scripts_commands_is_refused_before_any_write() {
    let server = RedisServer::start();
    let db = TestDb::sqlite();
    let lib = db.open().await;
    import(&lib, "a", &[("p0", 100, 2)], live_window()).await;
    let admin = Console::redis(&server.url(), &db.url);
    admin.preheat("a");
    // May read and call scripts, but not the writes inside them.
    server.cli(&[
        "ACL",
        "SETUSER",
        "shop",
        "on",
        ">s3cret-pw",
        "~*",
        "+@read",
        "+@connection",
        "+info",
        "+evalsha",
        "+script|exists",
        "+time",
    ]);
    let url = format!("redis://shop:s3cret-pw@127.0.0.1:{}", server.port);
    let c = Console::redis(&url, &db.url);
    let before = (db_state(&lib).await, redis_state(&server));
    every_write_refused(&c, "ACL user 'shop' may not run", "restricted");
    let after = (db_state(&lib).await, redis_state(&server));
    assert_eq!(before, after, "a refused write changed something");
    // The refusal names the command, and the password never shows.
    let r = c.run("pause a --yes");
    let out = r.all_output();
    assert!(out.contains("HSET"), "{out}");
    assert!(!out.contains("s3cret-pw"), "{out}");
    // Reads work for that user.
    let s = c.json("--read-only status a");
    assert_eq!(s["products"][0]["state"], "ok", "{s}");
    lib.close().await;
}

/// A 3-primary cluster with activity `a` of six products p0..p5 (50 units, limit 2),
/// imported and preheated.
async fn six_products_on_a_cluster(a: &str) -> (crate::harness::RedisCluster, TestDb, Db, Console) {
    let cluster = crate::harness::RedisCluster::start();
    let db = TestDb::sqlite();
    let lib = db.open().await;
    let names: Vec<String> = (0..6).map(|i| format!("p{i}")).collect();
    let list: Vec<crate::harness::fixtures::P<'_>> =
        names.iter().map(|p| (p.as_str(), 50, 2)).collect();
    import(&lib, a, &list, live_window()).await;
    let c = Console::cluster(&cluster.seeds(), &db.url);
    c.preheat(a);
    (cluster, db, lib, c)
}

/// One primary of a cluster hung (SIGSTOP): `pause` pauses every product the other nodes
/// serve and names, per product, what was applied and what was not (exit 3); the database
/// holds the pause of all of them, and once the node answers again `fix` writes the rest. Any
/// other write refuses before writing (exit 3), naming the node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_node_leaves_a_pause_reported_product_by_product() {
    let (cluster, _db, lib, c) = six_products_on_a_cluster("c2").await;
    let k0 = crate::harness::fixtures::product_keys("c2", "p0");
    let hung = cluster.node_for(&k0.stock);
    let hung_addr = hung.addr();
    hung.signal("STOP");
    let impatient = c
        .clone()
        .with("--response-timeout-ms 400 --connect-timeout-ms 400");
    let r = impatient.run("--json pause c2 --yes");
    assert_eq!(r.code, 3, "{}", r.all_output());
    let doc = r.json();
    let rows = doc["products"].as_array().expect("products");
    assert_eq!(rows.len(), 6, "{doc}");
    let (mut applied, mut missed) = (0, 0);
    for p in rows {
        if p["node"] == hung_addr.as_str() {
            missed += 1;
            assert_eq!(p["applied"], false, "{p}");
            let e = p["error"].as_str().unwrap_or_default();
            assert!(e.contains(&hung_addr) && e.contains("not applied"), "{p}");
        } else {
            applied += 1;
            assert_eq!(p["applied"], true, "{p}");
            assert!(p["error"].is_null(), "{p}");
        }
    }
    assert!(missed >= 1 && applied >= 1, "{doc}");
    // The text says the same, product by product.
    let text = impatient.run("pause c2 --yes");
    assert!(text.stdout.contains("not applied"), "{}", text.all_output());
    // The other writes refuse before writing, naming the node.
    let f = impatient.run("--json topup c2 --product p1 --add 5 --yes");
    assert_eq!(f.code, 3, "{}", f.all_output());
    assert!(f.all_output().contains(&hung_addr), "{}", f.all_output());
    let stock: Vec<(i64,)> = lib
        .fetch_all_as(
            "SELECT initial_stock FROM seckill_product WHERE product_id = 'p1'",
            &[],
        )
        .await
        .expect("stock");
    assert_eq!(stock[0].0, 50, "the refused top-up changed the database");
    hung.signal("CONT");
    c.ok("fix c2 --yes");
    let s = c.json("status c2");
    for p in products_of(&s) {
        assert_eq!(p["state"], "paused", "{p}");
    }
    lib.close().await;
}

fn products_of(doc: &serde_json::Value) -> Vec<serde_json::Value> {
    doc["products"].as_array().cloned().unwrap_or_default()
}

/// A primary hangs after the check and before a fix's first write (the hook at
/// `Stage::BeforeWrite`): the fix reports every product, those it wrote as applied and the
/// others as not applied with the node and the reason, and its failure is `unavailable`
/// (exit 3); once the node answers, a second fix settles the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fix_cut_short_by_a_hung_node_reports_each_product() {
    use seckill_console::ops::fix::{FixOptions, fix};
    use seckill_console::ops::snapshot::{Interleave, Stage};
    let (cluster, _db, lib, c) = six_products_on_a_cluster("fx").await;
    let names: Vec<String> = (0..6).map(|i| format!("p{i}")).collect();
    let store = crate::harness::fixtures::cluster(&cluster.seeds()).await;
    for p in &names {
        let k = crate::harness::fixtures::product_keys("fx", p);
        crate::harness::fixtures::redis_cmd(&store, &["INCRBY", &k.stock, "3"]).await;
    }
    let k0 = crate::harness::fixtures::product_keys("fx", "p0");
    let hung = cluster.node_for(&k0.stock);
    let (hung_addr, hung_port) = (hung.addr(), hung.port);
    let opts = FixOptions {
        product: None,
        preview: false,
        actor: "test".into(),
        grace: Duration::from_secs(60),
        confirmed: None,
        key_ttl_days: 7,
        interleave: Interleave::new(move |stage| {
            Box::pin(async move {
                if stage == Stage::BeforeWrite {
                    let pid = std::process::Command::new("redis-cli")
                        .args(["-p", &hung_port.to_string(), "INFO", "server"])
                        .output()
                        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                        .unwrap_or_default()
                        .lines()
                        .find_map(|l| l.strip_prefix("process_id:").map(|v| v.trim().to_string()))
                        .unwrap_or_default();
                    let _ = std::process::Command::new("kill")
                        .args(["-STOP", &pid])
                        .status();
                }
            })
        }),
    };
    let id = seckill_console::domain::ActivityId::parse("fx").expect("id");
    let report = fix(
        &store,
        &lib,
        &seckill_console::redis::KeySpace::default(),
        &id,
        &opts,
    )
    .await
    .expect("a report, not an error");
    hung.signal("CONT");
    assert_eq!(
        report.failure,
        Some(seckill_console::ErrorKind::Unavailable),
        "{report:?}"
    );
    assert_eq!(report.products.len(), 6, "{report:?}");
    let mut not_applied = 0;
    for p in &report.products {
        if p.node.as_deref() == Some(hung_addr.as_str()) {
            assert!(!p.applied, "{p:?}");
        }
        if !p.applied {
            not_applied += 1;
            let e = p.error.as_deref().unwrap_or_default();
            assert!(e.contains("not applied on 127.0.0.1:"), "{p:?}");
        }
    }
    assert!(not_applied >= 1, "{report:?}");
    // The products of the nodes that answered were written, and Redis holds what the report says.
    let applied: Vec<_> = report.products.iter().filter(|p| p.applied).collect();
    assert!(!applied.is_empty(), "{report:?}");
    for p in applied {
        let k = crate::harness::fixtures::product_keys("fx", &p.product);
        let now = crate::harness::fixtures::redis_cmd(&store, &["GET", &k.stock]).await;
        assert_eq!(
            now,
            redis::Value::BulkString(p.after.to_string().into_bytes()),
            "{p:?}"
        );
    }
    // The rest, once the node answers.
    c.ok("fix fx --yes");
    crate::harness::assert_books(&c.reconcile("fx"), "after the hung node");
    lib.close().await;
}
