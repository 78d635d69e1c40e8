//! The failure drills: what Redis, the network and the database do to a live sale, and what the
//! console shows and fixes. Each ends with the books checked: units sold in the database plus
//! Redis remaining plus in-flight equals initial, and nothing is oversold.

use crate::harness::cli::finish;
use crate::harness::fixtures::ledger_entries;
use crate::harness::fixtures::{buy, import, live_window, product_keys, redis_cmd};
use crate::harness::proxy::{Mode, Proxy};
use crate::harness::redis_server::RedisCluster;
use crate::harness::{RedisServer, Run, TestDb, console};
use crate::preheat::dump_activity;
use seckill_console::redis::cut;
use serde_json::Value as Json;
use std::process::Child;
use std::time::{Duration, Instant};

fn run_with(redis_flags: &[&str], db: &str, rest: &[&str]) -> Run {
    let mut v: Vec<&str> = redis_flags.to_vec();
    v.extend(["--db", db]);
    v.extend_from_slice(rest);
    console(&v)
}

/// Starts the binary in the background (for a load that a drill interrupts).
fn spawn(redis_flags: &[&str], db: &str, rest: &[&str]) -> Child {
    let mut v: Vec<&str> = redis_flags.to_vec();
    v.extend(["--db", db]);
    v.extend_from_slice(rest);
    crate::harness::cli::spawn(&v)
}

/// Every product balances and nothing is oversold.
fn assert_books(doc: &Json, label: &str) {
    for p in doc["products"].as_array().expect("products") {
        let initial = p["initial"].as_i64().unwrap_or(-1);
        let sold = p["db_sold"].as_i64().unwrap_or(-1);
        let sum = sold
            + p["redis_remaining"].as_i64().unwrap_or(-1000)
            + p["in_flight"].as_i64().unwrap_or(-1000);
        assert_eq!(sum, initial, "{label}: books do not balance: {p}");
        assert!(sold <= initial, "{label}: oversold: {p}");
        assert_eq!(p["state"], "ok", "{label}: {p}");
    }
}

/// Resolves the compensation queue, fixes, and checks the books (grace 0: nothing in flight).
fn settle_and_check(redis_flags: &[&str], db: &str, a: &str, label: &str) {
    run_with(
        redis_flags,
        db,
        &["--grace-secs", "0", "compensation", "resolve", a, "--all"],
    )
    .expect_code(0);
    run_with(redis_flags, db, &["--grace-secs", "0", "fix", a, "--yes"]).expect_code(0);
    let r = run_with(
        redis_flags,
        db,
        &[
            "--json",
            "--grace-secs",
            "0",
            "reconcile",
            a,
            "--fail-on-drift",
        ],
    );
    r.expect_code(0);
    assert_books(&r.json(), label);
}

#[tokio::test]
async fn kill_9_during_load_with_aof_everysec() {
    let mut server = RedisServer::start_with(&["--appendonly", "yes", "--appendfsync", "everysec"]);
    let db = TestDb::sqlite();
    let lib = db.open().await;
    import(&lib, "k9", &[("p1", 400, 5), ("p2", 400, 5)], live_window()).await;
    let url = server.url();
    let flags = ["--redis", url.as_str()];
    run_with(&flags, &db.url, &["preheat", "k9"]).expect_code(0);

    let load = spawn(
        &flags,
        &db.url,
        &[
            "--json",
            "--response-timeout-ms",
            "300",
            "--connect-timeout-ms",
            "300",
            "load",
            "k9",
            "--buyers",
            "6000",
            "--concurrency",
            "64",
            "--rate",
            "1500",
            "--retries",
            "0",
            "--yes",
            "--pay-share",
            "1",
        ],
    );
    std::thread::sleep(Duration::from_millis(1200));
    server.kill9();
    std::thread::sleep(Duration::from_millis(300));
    server.restart();
    let r = finish(load, Duration::from_secs(60));
    r.expect_code(0);
    let doc = r.json();
    assert!(
        doc["unknown"].as_i64().unwrap_or(0) + doc["errors"].as_i64().unwrap_or(0) > 0,
        "the kill went unnoticed: {doc}"
    );

    // What the console shows after the restart: deductions without orders (their replies
    // died with the server) and the compensation entries the worker wrote for them.
    let seen = run_with(
        &flags,
        &db.url,
        &["--json", "--grace-secs", "0", "reconcile", "k9"],
    );
    let sdoc = seen.json();
    let not_ok = sdoc["products"]
        .as_array()
        .expect("products")
        .iter()
        .any(|p| p["state"] != "ok");
    assert!(
        not_ok || sdoc["compensation"]["pending"].as_i64().unwrap_or(0) > 0,
        "nothing to see after kill -9: {sdoc}"
    );
    settle_and_check(&flags, &db.url, "k9", "kill -9 with AOF");

    // The incident report: a write outside the scripts, fixed, then the report names the fix
    // with before and after, the compensation resolutions and balanced books, with the same
    // figures in Markdown and JSON.
    let store = crate::harness::fixtures::standalone(&server.url()).await;
    let k = crate::harness::fixtures::product_keys("k9", "p1");
    crate::harness::fixtures::redis_cmd(&store, &["INCRBY", &k.stock, "3"]).await;
    run_with(
        &flags,
        &db.url,
        &["--grace-secs", "0", "fix", "k9", "--yes"],
    )
    .expect_code(0);
    let j = run_with(
        &flags,
        &db.url,
        &[
            "--grace-secs",
            "0",
            "--tz",
            "UTC",
            "report",
            "k9",
            "--format",
            "json",
        ],
    );
    j.expect_code(0);
    let rep: Json = serde_json::from_str(&j.stdout).expect("the report as JSON");
    assert_eq!(rep["balanced"], true, "{rep}");
    let fixes = rep["fixes"].as_array().cloned().unwrap_or_default();
    let fix = fixes
        .iter()
        .find(|f| {
            f["product_id"] == "p1" && f["before_value"].is_string() && f["after_value"].is_string()
        })
        .unwrap_or_else(|| panic!("no fix of p1 with before and after: {rep}"));
    let comp = rep["compensation"].as_array().cloned().unwrap_or_default();
    assert!(
        comp.iter().all(|c| c["status"] != "pending"),
        "a compensation entry is still pending: {comp:?}"
    );
    let md = run_with(
        &flags,
        &db.url,
        &["--grace-secs", "0", "--tz", "UTC", "report", "k9"],
    );
    md.expect_code(0);
    let text = &md.stdout;
    for part in [
        "## Sales",
        "## Verdict now",
        "## Compensation queue",
        "## Fixes",
        "## Console writes",
    ] {
        assert!(text.contains(part), "{part} missing:\n{text}");
    }
    assert!(text.contains("books now: balanced"), "{text}");
    for s in rep["sales"].as_array().expect("sales") {
        let row = format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            s["product"].as_str().unwrap_or(""),
            s["initial"],
            s["sold"],
            s["paid"],
            s["expired"],
            s["cancelled"],
            s["remaining"],
            s["state"].as_str().unwrap_or("")
        );
        assert!(text.contains(&row), "{row} not in:\n{text}");
    }
    let fix_row = format!(
        "| p1 | {} | {} |",
        fix["before_value"].as_str().unwrap_or(""),
        fix["after_value"].as_str().unwrap_or("")
    );
    assert!(text.contains(&fix_row), "{fix_row} not in:\n{text}");
    for c in &comp {
        assert!(
            text.contains(c["request_id"].as_str().unwrap_or("?")),
            "{c} not in the report"
        );
    }
    lib.close().await;
}

#[tokio::test]
async fn restart_without_persistence_then_preheat_rewrites_truth() {
    let mut server = RedisServer::start();
    let store = crate::harness::fixtures::standalone(&server.url()).await;
    let db = TestDb::sqlite();
    let lib = db.open().await;
    import(&lib, "np", &[("p1", 50, 10), ("p2", 80, 10)], live_window()).await;
    let url = server.url();
    let flags = ["--redis", url.as_str()];
    run_with(&flags, &db.url, &["preheat", "np"]).expect_code(0);
    for i in 0..30 {
        buy(
            &store,
            &lib,
            "np",
            if i % 2 == 0 { "p1" } else { "p2" },
            &format!("r{i}"),
            &format!("u{i}"),
            1,
        )
        .await;
    }
    server.restart();
    let s = run_with(&flags, &db.url, &["--json", "status", "np"]);
    s.expect_code(0);
    for p in s.json()["products"].as_array().expect("products") {
        assert_eq!(p["state"], "missing", "{p}");
    }
    assert!(
        s.json()["alerts"]
            .as_array()
            .expect("alerts")
            .iter()
            .filter(|a| a["kind"] == "missing")
            .count()
            == 2
    );
    let pre = run_with(&flags, &db.url, &["--json", "preheat", "np"]);
    pre.expect_code(0);
    assert_eq!(pre.json()["total_stock"], 130 - 30);
    // Sell everything that is left, and more: nothing is oversold.
    run_with(
        &flags,
        &db.url,
        &[
            "load",
            "np",
            "--buyers",
            "400",
            "--concurrency",
            "16",
            "--yes",
            "--pay-share",
            "1",
        ],
    )
    .expect_code(0);
    let r = run_with(
        &flags,
        &db.url,
        &["--json", "reconcile", "np", "--fail-on-drift"],
    );
    r.expect_code(0);
    assert_books(&r.json(), "restart without persistence");
    for p in r.json()["products"].as_array().expect("products") {
        assert_eq!(p["db_sold"], p["initial"], "{p}");
    }
    lib.close().await;
}

/// The node id and replica of the primary serving `key`.
fn primary_and_replica(cluster: &RedisCluster, key: &str) -> (usize, usize) {
    let primary = cluster.node_for(key);
    let pi = cluster
        .nodes
        .iter()
        .position(|n| n.port == primary.port)
        .expect("primary index");
    let nodes = primary.cli(&["CLUSTER", "NODES"]);
    let my_id = nodes
        .lines()
        .find(|l| l.contains("myself"))
        .and_then(|l| l.split_whitespace().next())
        .expect("my id")
        .to_string();
    let replica_port: u16 = nodes
        .lines()
        .find(|l| l.contains("slave") && l.contains(&my_id))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|a| a.split('@').next())
        .and_then(|a| a.rsplit(':').next())
        .and_then(|p| p.parse().ok())
        .expect("a replica of the primary");
    let ri = cluster
        .nodes
        .iter()
        .position(|n| n.port == replica_port)
        .expect("replica index");
    (pi, ri)
}

#[tokio::test]
async fn cluster_failover_with_lost_writes_is_found_and_fixed_before_an_oversell() {
    let mut cluster = RedisCluster::start_with(3, 1);
    let db = TestDb::sqlite();
    let lib = db.open().await;
    import(
        &lib,
        "fo",
        &[("hot", 100, 100), ("cold", 100, 100)],
        live_window(),
    )
    .await;
    let seeds = cluster.seeds();
    let flags = ["--redis-cluster", seeds.as_str()];
    run_with(&flags, &db.url, &["preheat", "fo"]).expect_code(0);
    let store = crate::harness::fixtures::cluster(&seeds).await;
    let hot = product_keys("fo", "hot");
    let (pi, ri) = primary_and_replica(&cluster, &hot.stock);
    // The replica has the preheat (WAIT for its acknowledgement), then it freezes.
    let acked = cluster.nodes[pi].cli(&["WAIT", "1", "5000"]);
    assert_eq!(
        acked.trim(),
        "1",
        "the replica did not acknowledge the preheat"
    );
    cluster.nodes[ri].signal("STOP");
    // Cut the replication link while the replica is frozen: what the primary acknowledges
    // from now on exists only on the primary (a network partition, in effect).
    cluster.nodes[pi].cli(&["CLIENT", "KILL", "TYPE", "replica"]);
    for i in 0..30 {
        buy(
            &store,
            &lib,
            "fo",
            "hot",
            &format!("h{i}"),
            &format!("u{i}"),
            1,
        )
        .await;
    }
    // The primary dies with 30 acknowledged sales its replica never saw.
    cluster.nodes[pi].kill9();
    cluster.nodes[ri].signal("CONT");
    let replica_port = cluster.nodes[ri].port;
    cluster.nodes[ri].cli(&["CLUSTER", "FAILOVER", "TAKEOVER"]);
    let started = Instant::now();
    loop {
        let promoted = cluster.nodes[ri].cli(&["ROLE"]).starts_with("master");
        let others_agree = cluster
            .nodes
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != pi)
            .all(|(_, n)| {
                n.cli(&["CLUSTER", "NODES"])
                    .lines()
                    .any(|l| l.contains(&format!(":{replica_port}@")) && l.contains("master"))
            });
        if promoted && others_agree {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "failover did not complete"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let live_seeds: Vec<String> = cluster
        .nodes
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != pi)
        .map(|(_, n)| n.url())
        .collect();
    let seeds = live_seeds.join(",");
    let flags = ["--redis-cluster", seeds.as_str()];

    let r = run_with(&flags, &db.url, &["--json", "reconcile", "fo"]);
    r.expect_code(0);
    let doc = r.json();
    let p = doc["products"]
        .as_array()
        .expect("products")
        .iter()
        .find(|p| p["product"] == "hot")
        .expect("hot")
        .clone();
    assert_eq!(p["state"], "drift", "{p}");
    assert_eq!(
        p["drift"], 30,
        "the lost writes show as positive drift: {p}"
    );
    assert!(doc["alerts"].to_string().contains("oversell risk"));
    run_with(&flags, &db.url, &["fix", "fo", "--yes"]).expect_code(0);
    let after = run_with(
        &flags,
        &db.url,
        &["--json", "reconcile", "fo", "--fail-on-drift"],
    );
    after.expect_code(0);
    // Sell out after the fix: exactly the stock, never more.
    let store = crate::harness::fixtures::cluster(&seeds).await;
    for i in 30..200 {
        buy(
            &store,
            &lib,
            "fo",
            "hot",
            &format!("h{i}"),
            &format!("u{i}"),
            1,
        )
        .await;
    }
    let r = run_with(
        &flags,
        &db.url,
        &["--json", "reconcile", "fo", "--fail-on-drift"],
    );
    r.expect_code(0);
    assert_books(&r.json(), "cluster failover");
    let hot_doc = r.json()["products"]
        .as_array()
        .expect("products")
        .iter()
        .find(|p| p["product"] == "hot")
        .expect("hot")
        .clone();
    assert_eq!(hot_doc["db_sold"], 100, "{hot_doc}");
    lib.close().await;
}

#[tokio::test]
async fn replies_lost_after_the_server_ran_the_script_never_double_deduct() {
    let server = RedisServer::start();
    let proxy = Proxy::start(&server.addr());
    let db = TestDb::sqlite();
    let lib = db.open().await;
    let products = [("p1", 300, 3), ("p2", 300, 3), ("p3", 300, 3)];
    import(&lib, "px", &products, live_window()).await;
    let direct = server.url();
    run_with(&["--redis", direct.as_str()], &db.url, &["preheat", "px"]).expect_code(0);
    proxy.set(Mode::CutAfterRequest(0.03));
    let via = format!("redis://{}", proxy.addr());
    let r = run_with(
        &["--redis", via.as_str()],
        &db.url,
        &[
            "--json",
            "--response-timeout-ms",
            "500",
            "load",
            "px",
            "--buyers",
            "2500",
            "--concurrency",
            "16",
            "--retries",
            "3",
            "--yes",
            "--pay-share",
            "1",
            "--repeat-share",
            "0.2",
        ],
    );
    proxy.set(Mode::Pass);
    // The load may still fail to reach Redis on its very first connection through a cutting
    // proxy; a started run always ends with figures.
    r.expect_code(0);
    let doc = r.json();
    assert!(proxy.cuts() > 0, "the proxy cut nothing");
    assert!(
        doc["retries"].as_i64().unwrap_or(0) > 0,
        "nothing was retried: {doc}"
    );
    let store = crate::harness::fixtures::standalone(&direct).await;
    let keys: Vec<_> = products
        .iter()
        .map(|(p, _, _)| product_keys("px", p))
        .collect();
    let states = cut::read(&store, &keys).await.expect("states");
    let mut ledgers = Vec::new();
    for k in &keys {
        ledgers.push(ledger_entries(&store, k).await);
    }
    for (((p, initial, _), st), (entries, _)) in products.iter().zip(&states).zip(&ledgers) {
        // Every unit that left the stock is one ledger entry: a retried request id never took
        // a second unit.
        let in_ledger: i64 = entries
            .iter()
            .filter(|e| !e.returned)
            .map(|e| e.quantity)
            .sum();
        assert_eq!(initial - st.stock.value().unwrap_or(-1), in_ledger, "{p}");
    }
    let flags = ["--redis", direct.as_str()];
    settle_and_check(&flags, &db.url, "px", "lost replies");
    lib.close().await;
}

#[tokio::test]
async fn a_hung_redis_makes_commands_exit_3_and_the_worker_record_unknown_outcomes() {
    let server = RedisServer::start();
    let db = TestDb::sqlite();
    let lib = db.open().await;
    import(&lib, "hang", &[("p1", 500, 5)], live_window()).await;
    let url = server.url();
    let flags = ["--redis", url.as_str()];
    run_with(&flags, &db.url, &["preheat", "hang"]).expect_code(0);
    let timeouts = [
        "--response-timeout-ms",
        "300",
        "--connect-timeout-ms",
        "300",
    ];

    server.signal("STOP");
    let mut args = timeouts.to_vec();
    args.extend(["--json", "status", "hang"]);
    let s = run_with(&flags, &db.url, &args);
    s.expect_code(3);
    assert!(
        s.elapsed < Duration::from_secs(10),
        "status took {:?}",
        s.elapsed
    );
    server.signal("CONT");

    let mut args = timeouts.to_vec();
    args.extend([
        "--json",
        "load",
        "hang",
        "--buyers",
        "1500",
        "--concurrency",
        "16",
        "--rate",
        "500",
        "--retries",
        "1",
        "--yes",
        "--pay-share",
        "1",
    ]);
    let load = spawn(&flags, &db.url, &args);
    std::thread::sleep(Duration::from_millis(800));
    server.signal("STOP");
    std::thread::sleep(Duration::from_millis(1500));
    server.signal("CONT");
    let r = finish(load, Duration::from_secs(60));
    r.expect_code(0);
    let doc = r.json();
    let unknown = doc["unknown"].as_i64().unwrap_or(0);
    assert!(unknown > 0, "no unknown outcome recorded: {doc}");
    assert_eq!(doc["compensation_entries"], unknown, "{doc}");
    settle_and_check(&flags, &db.url, "hang", "hung redis");
    lib.close().await;
}

#[tokio::test]
async fn the_database_down_during_reconcile_or_fix_exits_3_before_any_redis_write() {
    let server = RedisServer::start();
    let store = crate::harness::fixtures::standalone(&server.url()).await;
    let url = server.url();
    let flags = ["--redis", url.as_str()];
    let mut backends = Vec::new();
    if let Some(db) = TestDb::postgres().await {
        backends.push(db);
    }
    if let Some(db) = TestDb::mysql().await {
        backends.push(db);
    }
    for db in &backends {
        let lib = db.open().await;
        let a = format!("down{}", db.name());
        import(&lib, &a, &[("p1", 50, 5)], live_window()).await;
        lib.close().await;
        let proxy = Proxy::start(&db.server_addr().expect("server address"));
        let via = db.url_via(&proxy.addr());
        run_with(&flags, &via, &["preheat", &a]).expect_code(0);
        redis_cmd(&store, &["INCRBY", &product_keys(&a, "p1").stock, "5"]).await;
        let before = dump_activity(&store, &a).await;
        proxy.set(Mode::Down);
        for cmd in [
            vec!["--json", "reconcile", a.as_str()],
            vec!["--json", "fix", a.as_str(), "--yes"],
        ] {
            let r = run_with(&flags, &via, &cmd);
            r.expect_code(3);
            assert_eq!(r.json_error()["kind"], "unavailable", "{}", db.name());
        }
        assert_eq!(
            dump_activity(&store, &a).await,
            before,
            "{}: Redis was written while the database was down",
            db.name()
        );
        proxy.set(Mode::Pass);
        run_with(&flags, &via, &["fix", &a, "--yes"]).expect_code(0);
    }
    // SQLite: the file's directory is gone. That is a path to correct (exit 2, naming the
    // directory), and still nothing reaches Redis.
    let dir = tempfile::tempdir().expect("tmp");
    let gone = format!("sqlite://{}/no/such/dir/x.db", dir.path().display());
    let r = run_with(&flags, &gone, &["--json", "reconcile", "x"]);
    r.expect_code(2);
    let msg = r.json_error()["error"].as_str().unwrap_or("").to_string();
    assert!(
        msg.contains("no/such/dir") && msg.contains("does not exist"),
        "{msg}"
    );
}

#[tokio::test]
async fn cluster_restart_without_persistence_then_preheat_rewrites_truth() {
    let mut cluster = RedisCluster::start();
    let seeds = cluster.seeds();
    let flags = ["--redis-cluster", seeds.as_str()];
    let db = TestDb::sqlite();
    let lib = db.open().await;
    let products: Vec<(String, i64, i64)> = (0..12).map(|i| (format!("p{i}"), 30, 10)).collect();
    let refs: Vec<(&str, i64, i64)> = products
        .iter()
        .map(|(p, s, l)| (p.as_str(), *s, *l))
        .collect();
    import(&lib, "cnp", &refs, live_window()).await;
    run_with(&flags, &db.url, &["preheat", "cnp"]).expect_code(0);
    run_with(
        &flags,
        &db.url,
        &[
            "load",
            "cnp",
            "--buyers",
            "100",
            "--concurrency",
            "8",
            "--yes",
            "--pay-share",
            "1",
        ],
    )
    .expect_code(0);
    // Every node restarts empty (the cluster layout survives in nodes.conf, the data does not).
    for n in &mut cluster.nodes {
        n.restart();
    }
    cluster.wait_ok();
    let s = run_with(&flags, &db.url, &["--json", "status", "cnp"]);
    s.expect_code(0);
    assert!(
        s.json()["products"]
            .as_array()
            .expect("products")
            .iter()
            .all(|p| p["state"] == "missing"),
        "{}",
        s.stdout
    );
    run_with(&flags, &db.url, &["preheat", "cnp"]).expect_code(0);
    run_with(
        &flags,
        &db.url,
        &[
            "load",
            "cnp",
            "--buyers",
            "600",
            "--concurrency",
            "8",
            "--yes",
            "--pay-share",
            "1",
        ],
    )
    .expect_code(0);
    let r = run_with(
        &flags,
        &db.url,
        &["--json", "reconcile", "cnp", "--fail-on-drift"],
    );
    r.expect_code(0);
    assert_books(&r.json(), "cluster restart without persistence");
    lib.close().await;
}

#[tokio::test]
async fn a_hung_cluster_node_makes_commands_exit_3_in_time() {
    let cluster = RedisCluster::start();
    let seeds = cluster.seeds();
    let flags = ["--redis-cluster", seeds.as_str()];
    let db = TestDb::sqlite();
    let lib = db.open().await;
    let products: Vec<(String, i64, i64)> = (0..12).map(|i| (format!("p{i}"), 30, 10)).collect();
    let refs: Vec<(&str, i64, i64)> = products
        .iter()
        .map(|(p, s, l)| (p.as_str(), *s, *l))
        .collect();
    import(&lib, "chg", &refs, live_window()).await;
    run_with(&flags, &db.url, &["preheat", "chg"]).expect_code(0);
    let hung = cluster.node_for(&product_keys("chg", "p0").stock);
    hung.signal("STOP");
    let r = run_with(
        &flags,
        &db.url,
        &[
            "--response-timeout-ms",
            "300",
            "--connect-timeout-ms",
            "300",
            "--json",
            "status",
            "chg",
        ],
    );
    hung.signal("CONT");
    r.expect_code(3);
    assert!(
        r.elapsed < Duration::from_secs(15),
        "status took {:?}",
        r.elapsed
    );
    assert!(
        r.json_error()["error"]
            .as_str()
            .unwrap_or("")
            .contains("timed out"),
        "{}",
        r.stderr
    );
    run_with(
        &flags,
        &db.url,
        &["--json", "reconcile", "chg", "--fail-on-drift"],
    )
    .expect_code(0);
    lib.close().await;
}

#[tokio::test]
async fn kill_9_of_a_cluster_primary_during_load_with_aof_everysec() {
    let mut cluster =
        RedisCluster::start_with_args(3, 0, &["--appendonly", "yes", "--appendfsync", "everysec"]);
    let seeds = cluster.seeds();
    let flags = ["--redis-cluster", seeds.as_str()];
    let db = TestDb::sqlite();
    let lib = db.open().await;
    let products: Vec<(String, i64, i64)> = (0..9).map(|i| (format!("p{i}"), 200, 5)).collect();
    let refs: Vec<(&str, i64, i64)> = products
        .iter()
        .map(|(p, s, l)| (p.as_str(), *s, *l))
        .collect();
    import(&lib, "ck9", &refs, live_window()).await;
    run_with(&flags, &db.url, &["preheat", "ck9"]).expect_code(0);
    let load = spawn(
        &flags,
        &db.url,
        &[
            "--json",
            "--response-timeout-ms",
            "300",
            "--connect-timeout-ms",
            "300",
            "load",
            "ck9",
            "--buyers",
            "5000",
            "--concurrency",
            "32",
            "--rate",
            "1500",
            "--retries",
            "0",
            "--yes",
            "--pay-share",
            "1",
        ],
    );
    std::thread::sleep(Duration::from_millis(1200));
    let victim = cluster
        .nodes
        .iter()
        .position(|n| n.port == cluster.node_for(&product_keys("ck9", "p0").stock).port)
        .expect("primary of p0");
    cluster.nodes[victim].kill9();
    std::thread::sleep(Duration::from_millis(300));
    cluster.nodes[victim].restart();
    cluster.wait_ok();
    let r = finish(load, Duration::from_secs(90));
    r.expect_code(0);
    assert!(
        r.json()["unknown"].as_i64().unwrap_or(0) + r.json()["errors"].as_i64().unwrap_or(0) > 0,
        "{}",
        r.stdout
    );
    settle_and_check(
        &flags,
        &db.url,
        "ck9",
        "kill -9 of a cluster primary with AOF",
    );
    lib.close().await;
}

#[tokio::test]
async fn the_database_down_with_a_cluster_exits_3_before_any_redis_write() {
    let Some(db) = TestDb::postgres().await else {
        return;
    };
    let cluster = RedisCluster::start();
    let seeds = cluster.seeds();
    let flags = ["--redis-cluster", seeds.as_str()];
    let store = crate::harness::fixtures::cluster(&seeds).await;
    let lib = db.open().await;
    import(
        &lib,
        "cdown",
        &[("p1", 50, 5), ("p2", 50, 5)],
        live_window(),
    )
    .await;
    lib.close().await;
    let proxy = Proxy::start(&db.server_addr().expect("server address"));
    let via = db.url_via(&proxy.addr());
    run_with(&flags, &via, &["preheat", "cdown"]).expect_code(0);
    redis_cmd(&store, &["INCRBY", &product_keys("cdown", "p1").stock, "5"]).await;
    let before = dump_activity(&store, "cdown").await;
    proxy.set(Mode::Down);
    for cmd in [
        vec!["--json", "reconcile", "cdown"],
        vec!["--json", "fix", "cdown", "--yes"],
    ] {
        run_with(&flags, &via, &cmd).expect_code(3);
    }
    assert_eq!(dump_activity(&store, "cdown").await, before);
}
