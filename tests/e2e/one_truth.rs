//! One truth through restarts, failovers and rollbacks (issue 52): a pause always wins, a
//! Sentinel master name never goes unused, a checkpoint keeps what it understands.

use crate::harness::cli::console_env;
use crate::harness::fixtures::{product_keys, redis_cmd};
use crate::harness::{Console, TestDb, Topo};

/// Item 7: a database restored or failed over holds an older pause generation than Redis. A
/// pause said "another operator's newer pause stands" and Redis kept selling: a pause always
/// wins now, and a resume that Redis's newer generation stops is said, not passed as done.
#[tokio::test]
async fn a_pause_always_wins_and_a_resume_redis_refuses_is_said() {
    let topo = Topo::standalone();
    let store = topo.store().await;
    let db = TestDb::sqlite();
    let lib = db.open().await;
    let c = Console::new(&topo, &db);
    c.import_preheat(&lib, "gen", &[("p1", 10, 2)]).await;
    let k = product_keys("gen", "p1");
    // Redis remembers generations the database lost (it was restored from an older backup).
    redis_cmd(&store, &["HSET", &k.meta, "paused", "0", "pause_gen", "10"]).await;
    let r = c.run(&["--json", "pause", "gen", "--yes", "--reason", "stop now"]);
    r.expect_code(0);
    assert_eq!(
        redis_cmd(&store, &["HGET", &k.meta, "paused"]).await,
        redis::Value::BulkString(b"1".to_vec()),
        "the pause reached Redis: {}",
        r.stdout
    );
    // A resume is not applied over Redis's newer generation, and says so (exit 4).
    let r = c.run(&["--json", "resume", "gen", "--yes"]);
    r.expect_code(4);
    let doc = r.json();
    let row = &doc["products"][0];
    assert_eq!(row["applied"], false, "{doc}");
    assert!(
        row["error"]
            .as_str()
            .unwrap_or("")
            .contains("newer than the database"),
        "{doc}"
    );
    assert_eq!(
        redis_cmd(&store, &["HGET", &k.meta, "paused"]).await,
        redis::Value::BulkString(b"1".to_vec()),
        "still paused in Redis"
    );
    lib.close().await;
}

/// Item 9: `--sentinel-master` without Sentinels (or with an empty SECKILL_REDIS_SENTINEL) sent
/// the console to `--redis` or 127.0.0.1:6379 unawares.
#[test]
fn a_sentinel_master_without_sentinels_is_bad_input() {
    let r = console_env(&["--sentinel-master", "mymaster", "status", "a1"], &[]);
    r.expect_code(2);
    assert!(r.stderr.contains("--redis-sentinel"), "{}", r.all_output());
    let r = console_env(
        &["status", "a1"],
        &[
            ("SECKILL_SENTINEL_MASTER", "mymaster"),
            ("SECKILL_REDIS_SENTINEL", ""),
        ],
    );
    r.expect_code(2);
    assert!(r.stderr.contains("--redis-sentinel"), "{}", r.all_output());
}

/// Item 12: a checkpoint holding a field this version does not know was thrown away and
/// overwritten, so two console versions undid each other's checkpoints on every read. What this
/// version understands is read now.
#[tokio::test]
async fn a_checkpoint_with_a_newer_consoles_field_is_still_read() {
    let topo = Topo::standalone();
    let store = topo.store().await;
    let db = TestDb::sqlite();
    let lib = db.open().await;
    let c = Console::new(&topo, &db);
    c.import_preheat(&lib, "ver", &[("p1", 10, 2)]).await;
    crate::harness::fixtures::buy(&store, &lib, "ver", "p1", "r1", "u1", 1).await;
    c.ok(&["status", "ver"]);
    let k = product_keys("ver", "p1");
    let saved = redis_cmd(&store, &["HGET", &k.books, "pos"]).await;
    assert_ne!(saved, redis::Value::Nil, "status saved a checkpoint");
    redis_cmd(&store, &["HSET", &k.books, "z|from-a-newer-console", "1"]).await;
    let r = c.run_env(
        &["status", "ver"],
        &[("SECKILL_LOG", "seckill_console=debug")],
    );
    r.expect_code(0);
    let line = r
        .stderr
        .lines()
        .find(|l| l.contains("snapshot read"))
        .unwrap_or_else(|| panic!("{}", r.stderr));
    assert!(line.contains("resumed=1"), "{line}");
    assert!(line.contains("settled=0"), "{line}");
    lib.close().await;
}

/// Item 11: `load` run twice with one `--seed` gave the same request ids; the second run's
/// replays wrote orders that failed on UNIQUE, and the worker restored those deductions, whose
/// orders (the first run's) lived: 44 live orders for 40 users with a limit of 1, exit 0. Each
/// run's request ids are its own now, and a deduction whose order exists is never restored.
#[tokio::test]
async fn load_twice_with_one_seed_sells_each_buyer_within_the_limit() {
    let topo = Topo::standalone();
    let db = TestDb::sqlite();
    let lib = db.open().await;
    let c = Console::new(&topo, &db).with("--grace-secs 600");
    c.import_preheat(&lib, "twice", &[("p1", 40, 1)]).await;
    let run = "load twice --buyers 40 --concurrency 8 --yes --pay-share 1 --seed 7";
    let first = c.json(run);
    assert_eq!(first["oversold"], 0, "{first}");
    let second = c.run(format!("--json {run}"));
    second.expect_code(0);
    let rows: Vec<(String, i64)> = lib
        .fetch_all_as(
            "SELECT user_id, quantity FROM seckill_order WHERE activity_id = 'twice' \
             AND status IN ('pending_payment', 'paid')",
            &[],
        )
        .await
        .expect("orders");
    let mut held: std::collections::HashMap<String, i64> = Default::default();
    for (u, q) in rows {
        *held.entry(u).or_default() += q;
    }
    let most = held.values().copied().max().unwrap_or(0);
    assert!(most <= 1, "a buyer holds {most} of a limit of 1: {held:?}");
    let doc = c.reconcile("twice");
    assert_eq!(doc["totals"]["not_ok"], 0, "{doc}");
    lib.close().await;
}

/// Item 10: a planned failover lost acknowledged writes and nothing warned. `ping` shows each
/// primary's replicas with their lag and its `min-replicas-to-write`, and says what a failover
/// can lose; the preheat gate says it too (a warning: the shop's choice, not a no-go).
#[tokio::test]
async fn ping_and_the_preheat_gate_show_what_a_failover_can_lose() {
    use crate::harness::RedisServer;
    let primary = RedisServer::start();
    let port = primary.port.to_string();
    let replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &port]);
    let online = (0..100).any(|_| {
        let info = primary.cli(&["INFO", "replication"]);
        if info.contains("state=online") {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        false
    });
    assert!(online, "the replica {} never came online", replica.addr());
    let db = TestDb::sqlite();
    let c = Console::redis(&primary.url(), &db.url);
    c.ok(&["migrate"]);
    let ping = c.json(&["ping"]);
    let r = &ping["redis"]["nodes"][0]["replication"];
    assert_eq!(r["replicas"][0]["addr"], replica.addr(), "{ping}");
    assert_eq!(r["replicas"][0]["state"], "online");
    assert!(r["replicas"][0]["lag_secs"].as_i64().is_some(), "{r}");
    assert_eq!(r["min_replicas_to_write"], 0);
    assert!(
        r["warning"]
            .as_str()
            .unwrap_or("")
            .contains("min-replicas-to-write is 0"),
        "{r}"
    );
    let text = c.ok(&["ping"]);
    assert!(text.stdout.contains("replication of"), "{}", text.stdout);

    let lib = db.open().await;
    c.import_preheat(&lib, "repl", &[("p1", 10, 2)]).await;
    let again = c.json(&["preheat", "repl", "--force"]);
    assert!(
        again["warnings"]
            .to_string()
            .contains("min-replicas-to-write"),
        "{again}"
    );

    primary.cli(&["CONFIG", "SET", "min-replicas-to-write", "1"]);
    primary.cli(&["CONFIG", "SET", "min-replicas-max-lag", "10"]);
    let ping = c.json(&["ping"]);
    let r = &ping["redis"]["nodes"][0]["replication"];
    assert_eq!(r["min_replicas_to_write"], 1, "{r}");
    assert_eq!(r["good_replicas"], 1, "{r}");
    assert!(r["warning"].is_null(), "{r}");
    lib.close().await;
}

/// Item 8: a slot left migrating with one product's keys split between two nodes: every
/// deduction answered TRYAGAIN while `status`, `watch` and `ping` said ok. A critical alert
/// names the slot, both nodes, the product and the remedy.
#[tokio::test]
async fn a_slot_stuck_migrating_is_a_critical_alert_naming_it() {
    use crate::harness::RedisCluster;
    use seckill_console::redis::stock::deduct;
    let cluster = RedisCluster::start();
    let topo = Topo::Cluster(cluster);
    let Topo::Cluster(cl) = &topo else {
        unreachable!()
    };
    let store = topo.store().await;
    let db = TestDb::sqlite();
    let lib = db.open().await;
    let c = Console::new(&topo, &db);
    c.import_preheat(&lib, "stuck", &[("p1", 10, 2), ("p2", 10, 2)])
        .await;
    let k = product_keys("stuck", "p1");
    let source = cl.node_for(&k.stock);
    let slot = source
        .cli(&["CLUSTER", "KEYSLOT", &k.stock])
        .trim()
        .to_string();
    let target = cl
        .nodes
        .iter()
        .find(|n| n.port != source.port && n.cli(&["ROLE"]).starts_with("master"))
        .expect("another primary");
    let source_id = source.cli(&["CLUSTER", "MYID"]).trim().to_string();
    let target_id = target.cli(&["CLUSTER", "MYID"]).trim().to_string();
    target.cli(&["CLUSTER", "SETSLOT", &slot, "IMPORTING", &source_id]);
    source.cli(&["CLUSTER", "SETSLOT", &slot, "MIGRATING", &target_id]);
    // One key of the product moved, the others not: a reshard that died half way.
    let port = target.port.to_string();
    source.cli(&["MIGRATE", "127.0.0.1", &port, &k.stock, "0", "5000"]);
    let refused = deduct(&store, &k, "r1", "u1", "1").await;
    assert!(
        refused
            .as_ref()
            .is_err_and(|e| e.to_string().to_uppercase().contains("TRYAGAIN")),
        "{refused:?}"
    );
    let doc = c.status("stuck");
    let alert = doc["alerts"]
        .as_array()
        .and_then(|a| a.iter().find(|a| a["kind"] == "slot_migrating"))
        .unwrap_or_else(|| panic!("no slot_migrating alert: {doc}"))
        .clone();
    assert_eq!(alert["severity"], "critical", "{alert}");
    assert_eq!(alert["product"], "p1", "{alert}");
    let message = alert["message"].as_str().unwrap_or_default();
    for part in [
        format!("slot {slot} "),
        format!("from {} to {}", source.addr(), target.addr()),
        "TRYAGAIN".to_string(),
        format!("redis-cli --cluster fix {}", source.addr()),
    ] {
        assert!(message.contains(&part), "{part}: {message}");
    }
    let w = c.run(&["--json", "watch", "stuck", "--count", "1"]);
    assert!(
        w.stdout.contains("\"slot_migrating\""),
        "watch: {}",
        w.all_output()
    );
    let ping = c.json(&["ping"]);
    assert!(
        ping.to_string().contains(&format!("\"slot\":{slot}")),
        "ping names the migrating slot: {ping}"
    );
    // A pause and a fix refused by the split slot name it and the remedy.
    for args in [
        vec![
            "pause",
            "stuck",
            "--product",
            "p1",
            "--yes",
            "--reason",
            "slot",
        ],
        vec!["fix", "stuck", "--yes", "--product", "p1"],
    ] {
        let r = c.run(&args);
        let out = r.all_output();
        assert!(
            out.contains(&format!("slot {slot} ")) && out.contains("redis-cli --cluster fix"),
            "{args:?} names the slot {slot} and the remedy: {out}"
        );
    }
    // The remedy the alert gives ends it.
    let port = source.port.to_string();
    let fixed = std::process::Command::new("redis-cli")
        .args(["--cluster", "fix", &format!("127.0.0.1:{port}")])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("redis-cli --cluster fix");
    assert!(fixed.status.success(), "{fixed:?}");
    let doc = c.status("stuck");
    assert!(
        !doc["alerts"].to_string().contains("slot_migrating"),
        "{doc}"
    );
    lib.close().await;
}
