//! The Sentinel failover drill (issue 21): the console follows the primary three Sentinels name
//! through a crash (kill -9 of the master, with sales it acknowledged that its replica never
//! got) and a planned switch (`SENTINEL FAILOVER`), both while `load` runs and `watch` polls.
//! Every command answers during the change (retries allowed, never exit 1); the lost sales show
//! as drift with the oversell risk named, `fix` records them, the books balance and nothing is
//! oversold. On SQLite and PostgreSQL.

use crate::harness::cli::finish;
use crate::harness::fixtures::{buy, import, live_window, standalone};
use crate::harness::sentinel::SentinelSet;
use crate::harness::session::products;
use crate::harness::{Console, RedisServer, TestDb, assert_books, product};
use std::time::{Duration, Instant};

/// Short timeouts, so the dead master shows within a second.
const IMPATIENT: &str = "--response-timeout-ms 500 --connect-timeout-ms 500";

fn offset(node: &RedisServer, field: &str) -> i64 {
    node.try_cli(&["INFO", "replication"])
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(-1)
}

/// Waits until `replica` has everything `primary` wrote so far.
fn wait_in_sync(primary: &RedisServer, replica: &RedisServer) {
    let started = Instant::now();
    loop {
        let written = offset(primary, "master_repl_offset");
        if written > 0
            && offset(replica, "slave_repl_offset") >= written
            && replica
                .try_cli(&["INFO", "replication"])
                .is_some_and(|r| r.contains("master_link_status:up"))
        {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the replica did not catch up"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Compensation resolved, fixed, and the books checked (grace 0: nothing in flight).
fn settle(c: &Console, label: &str) -> serde_json::Value {
    let now = c.clone().with("--grace-secs 0");
    now.ok("compensation resolve sn --all");
    now.ok("fix sn --yes");
    let doc = now.reconcile("sn");
    assert_books(&doc, label);
    doc
}

fn master_events(watch_out: &str) -> Vec<serde_json::Value> {
    watch_out
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["event"] == "master")
        .collect()
}

async fn drill(db: &TestDb) {
    let label = db.name();
    let mut set = SentinelSet::start();
    let lib = db.open().await;
    let c = Console::on(set.flags(), &db.url);
    import(
        &lib,
        "sn",
        &[("hot", 20000, 20000), ("p0", 3000, 2), ("p1", 3000, 2)],
        live_window(),
    )
    .await;
    c.preheat("sn");
    let (first, second) = (set.servers[0].addr(), set.servers[1].addr());
    let ping = c.json("ping");
    assert_eq!(
        ping["redis"]["master"]["addr"],
        first.as_str(),
        "{label}: {ping}"
    );
    assert!(
        ping["redis"]["target"]
            .as_str()
            .is_some_and(|t| t.contains("sentinel mymaster")),
        "{label}: {ping}"
    );
    wait_in_sync(&set.servers[0], &set.servers[1]);

    // 1. kill -9 of the master during load, with 30 sales only it knew.
    let watch = c.spawn("--json watch sn --interval 0.5 --count 60");
    let load = c.clone().with(IMPATIENT).spawn(
        "--json load sn --buyers 2500 --concurrency 16 --rate 250 --retries 3 --yes --pay-share 1",
    );
    std::thread::sleep(Duration::from_millis(1500));
    let direct = standalone(&set.servers[0].url()).await;
    set.servers[1].signal("STOP");
    set.servers[0].cli(&["CLIENT", "KILL", "TYPE", "replica"]);
    for i in 0..30 {
        buy(
            &direct,
            &lib,
            "sn",
            "hot",
            &format!("h{i}"),
            &format!("u{i}"),
            1,
        )
        .await;
    }
    set.servers[0].kill9();
    set.servers[1].signal("CONT");
    // Every command answers while the Sentinels fail over: exit 0, or 3 while no primary is
    // named yet; never 1.
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(4) {
        let r = c.clone().with(IMPATIENT).run("--json status sn");
        assert!(
            matches!(r.code, 0 | 3),
            "{label}: status during failover: {}",
            r.all_output()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    set.wait_for_master(&second, Duration::from_secs(30));
    let r = finish(load, Duration::from_secs(120));
    assert!(matches!(r.code, 0 | 4), "{label}: load: {}", r.all_output());
    let doc = c.json("reconcile sn");
    assert_eq!(
        doc["master"]["addr"],
        second.as_str(),
        "{label}: {}",
        doc["master"]
    );
    assert!(
        doc["master"]["changed_at"].is_null(),
        "a fresh console saw no change itself"
    );
    let hot = product(&doc, "hot");
    assert!(
        hot["drift"].as_i64().unwrap_or(0) >= 30,
        "{label}: the 30 sales the replica never got are not drift: {hot}"
    );
    assert!(
        doc["alerts"].to_string().contains("oversell risk"),
        "{label}: {}",
        doc["alerts"]
    );
    let settled = settle(&c, &format!("{label}: after kill -9"));
    assert!(product(&settled, "hot")["db_sold"].as_i64().unwrap_or(0) >= 30);

    // 2. The old master comes back (empty, no persistence): the Sentinels make it a replica.
    set.servers[0].restart();
    let started = Instant::now();
    while !set.servers[0]
        .try_cli(&["ROLE"])
        .is_some_and(|r| r.starts_with("slave"))
    {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{label}: not demoted"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    wait_in_sync(&set.servers[1], &set.servers[0]);

    // 3. A planned switch back during load.
    let load = c.clone().with(IMPATIENT).spawn(
        "--json load sn --buyers 2500 --concurrency 16 --rate 250 --retries 3 --yes --pay-share 1",
    );
    std::thread::sleep(Duration::from_millis(1500));
    set.sentinels[0].cli(&["SENTINEL", "FAILOVER", "mymaster"]);
    set.wait_for_master(&first, Duration::from_secs(30));
    let r = finish(load, Duration::from_secs(120));
    assert!(matches!(r.code, 0 | 4), "{label}: load: {}", r.all_output());
    let w = finish(watch, Duration::from_secs(120));
    assert_ne!(w.code, 1, "{label}: watch: {}", w.all_output());
    let events = master_events(&w.stdout);
    assert!(
        events.iter().any(|e| e["node"] == second.as_str()),
        "{label}: watch printed no change of master to {second}: {}",
        w.stdout
    );
    let doc = settle(&c, &format!("{label}: after SENTINEL FAILOVER"));
    for p in products(&doc) {
        assert!(
            p["db_sold"].as_i64().unwrap_or(0) <= p["initial"].as_i64().unwrap_or(0),
            "{label}: oversold {p}"
        );
    }
    lib.close().await;
}

// One test per database, so that the two drills (each tens of seconds, mostly waiting on
// servers) run side by side in the suite rather than one after the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_failover_and_planned_switch_during_load_sqlite() {
    drill(&TestDb::sqlite()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sentinel_failover_and_planned_switch_during_load_postgres() {
    drill(&TestDb::require_postgres().await).await;
}
