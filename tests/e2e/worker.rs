//! The embedded worker: dry runs with invariants, load followed by reconcile, the four
//! strategies side by side, fault drills.

use crate::harness::fixtures::{buy, dump_activity, ledger_entries, live_request_ids};
use crate::harness::fixtures::{commandstats, product_keys, redis_cmd};
use crate::harness::session::{alert_kinds, products};
use crate::harness::{Console, TestDb, Topo};
use serde_json::Value as Json;
use std::collections::HashSet;

/// Stock 500 over several products, limits 1 and 2.
const PRODUCTS: [(&str, i64, i64); 4] = [
    ("p1", 100, 1),
    ("p2", 150, 2),
    ("p3", 50, 1),
    ("p4", 200, 2),
];

fn invariants_ok(doc: &Json) -> bool {
    doc["ok"] == true
        && doc["invariants"]
            .as_array()
            .is_some_and(|v| !v.is_empty() && v.iter().all(|i| i["ok"] == true))
}

/// Keys on every server of the topology.
fn all_keys(topo: &Topo) -> usize {
    topo.cli_all(&["DBSIZE"])
        .iter()
        .map(|s| s.trim().parse::<usize>().unwrap_or(0))
        .sum()
}

#[tokio::test]
async fn a_dry_run_sells_exactly_what_is_allowed_and_touches_nothing_live() {
    for topo in Topo::both() {
        let store = topo.store().await;
        let db = TestDb::sqlite();
        let c = Console::new(&topo, &db);
        let lib = db.open().await;
        c.import_preheat(&lib, "dry", &PRODUCTS).await;
        // Some live sales first, so the live keys are not pristine.
        buy(&store, &lib, "dry", "p1", "live-1", "u1", 1).await;
        let before = dump_activity(&store, "dry").await;
        let all_before = all_keys(&topo);

        let doc = c.json("dry-run dry --buyers 5000 --concurrency 128 --repeat-share 0.3 --seed 7");
        assert_eq!(doc["strategy"], "lua");
        // Demand far exceeds every product's stock: each sells out, exactly.
        assert_eq!(doc["succeeded"], 500, "{}: {doc}", topo.name());
        assert_eq!(doc["sold"], 500);
        assert_eq!(doc["stock"], 500);
        assert_eq!(doc["oversold"], 0);
        assert_eq!(doc["negative_seen"], 0);
        assert_eq!(doc["errors"], 0);
        assert_eq!(doc["requests"], 5000 + 1500 * 2);
        assert!(invariants_ok(&doc), "{}: {doc}", topo.name());

        assert_eq!(
            dump_activity(&store, "dry").await,
            before,
            "{}: a live key changed",
            topo.name()
        );
        assert_eq!(
            all_keys(&topo),
            all_before,
            "{}: shadow keys were left behind",
            topo.name()
        );

        // A demand below the stock: the limits decide, and still exactly.
        let d = c.json("dry-run dry --buyers 120 --concurrency 32 --repeat-share 0.5 --seed 3");
        assert!(invariants_ok(&d), "{d}");
        assert!(
            d["succeeded"].as_i64().unwrap_or(0) > 120,
            "limit-2 repeaters buy twice: {d}"
        );
        assert!(d["user_limited"].as_i64().unwrap_or(0) > 0, "{d}");

        // The live prefix is refused.
        c.run("--json dry-run dry --buyers 10 --concurrency 2 --shadow-prefix seckill")
            .expect_code(5);
        lib.close().await;
    }
}

#[tokio::test]
async fn load_then_reconcile_balances_and_orders_equal_the_ledger() {
    for topo in Topo::both() {
        let store = topo.store().await;
        for db in TestDb::sqlite_and_postgres().await {
            let c = Console::new(&topo, &db);
            let lib = db.open().await;
            let a = format!("ld{}", db.name());
            c.import_preheat(&lib, &a, &PRODUCTS).await;
            let doc = c.json(format!(
                "load {a} --buyers 1500 --concurrency 64 --yes --pay-share 0.7
                 --payment-window-secs 0.3 --seed 11"
            ));
            assert_eq!(doc["errors"], 0, "{doc}");
            assert_eq!(doc["oversold"], 0);
            assert!(doc["succeeded"].as_i64().unwrap_or(0) >= 500, "{doc}");
            assert!(
                doc["expired"].as_i64().unwrap_or(0) > 0,
                "the payment step expired nothing: {doc}"
            );
            assert!(doc["paid"].as_i64().unwrap_or(0) > 0);

            for p in products(&c.reconcile(&a)) {
                assert_eq!(p["drift"], 0, "{p}");
                assert_eq!(p["in_flight"], 0, "{p}");
            }
            // Orders in the database equal the ledger: every live order's request id is an
            // active ledger entry and the other way round.
            for (p, _, _) in PRODUCTS {
                let (entries, bad) = ledger_entries(&store, &product_keys(&a, p)).await;
                assert_eq!(bad, 0);
                let active: HashSet<String> = entries
                    .iter()
                    .filter(|e| !e.returned)
                    .map(|e| e.request_id.clone())
                    .collect();
                let ordered = live_request_ids(&lib, &a, p).await;
                assert_eq!(active, ordered, "{}: ledger != orders for {p}", c.label());
            }
            lib.close().await;
        }
    }
}

#[tokio::test]
async fn all_four_strategies_and_the_crash_between_drill() {
    let topo = Topo::standalone();
    let db = TestDb::sqlite();
    let c = Console::new(&topo, &db);
    let lib = db.open().await;
    c.import_preheat(&lib, "cmp", &PRODUCTS).await;
    let r = c.run("--json dry-run cmp --buyers 2000 --concurrency 64 --strategy all --seed 5");
    let doc = r.json();
    let runs = doc.as_array().expect("a list of four results");
    let names: Vec<&str> = runs.iter().filter_map(|x| x["strategy"].as_str()).collect();
    assert_eq!(names, vec!["lua", "hincrby", "lock", "sql"]);
    for x in runs {
        assert!(x["ops_per_sec"].as_f64().unwrap_or(0.0) > 0.0, "{x}");
        assert!(x.get("p99_ms").is_some() && x.get("round_trips_per_request").is_some());
    }
    for name in ["lua", "sql"] {
        let x = runs.iter().find(|x| x["strategy"] == name).expect("run");
        assert_eq!(x["oversold"], 0, "{name}");
        assert_eq!(x["sold"], 500, "{name}: {x}");
        assert!(invariants_ok(x), "{name}: {x}");
    }
    let lua = runs.iter().find(|x| x["strategy"] == "lua").expect("lua");
    assert_eq!(lua["round_trips_per_request"], 1.0);
    let text = c.run("dry-run cmp --buyers 300 --concurrency 16 --strategy all");
    for name in ["lua", "hincrby", "lock", "sql"] {
        assert!(
            text.stdout.lines().any(|l| l.starts_with(name)),
            "{}",
            text.stdout
        );
    }

    // The hincrby client that dies between its decrement and its rollback leaves negative
    // stock; a dry run fails its invariant, and on a staging activity `status` alerts on it.
    let d = c.run(
        "--json dry-run cmp --buyers 2000 --concurrency 32 --strategy hincrby
         --faults crash-between=0.5",
    );
    d.expect_code(4);
    assert!(
        d.json()["invariants"]
            .to_string()
            .contains("negative stock left behind"),
        "{}",
        d.stdout
    );
    c.json(
        "load cmp --buyers 1500 --concurrency 32 --yes --strategy hincrby
         --faults crash-between=1 --pay-share 1",
    );
    let sdoc = c.run("--json status cmp").json();
    let negative: Vec<&Json> = products(&sdoc)
        .iter()
        .filter(|p| p["state"] == "negative")
        .collect();
    assert!(!negative.is_empty(), "no negative product: {sdoc}");
    assert!(alert_kinds(&sdoc).iter().any(|k| k == "negative"));
    lib.close().await;
}

#[tokio::test]
async fn timeouts_leave_compensation_entries_that_resolve_to_balanced_books() {
    for topo in Topo::both() {
        let db = TestDb::sqlite();
        let c = Console::new(&topo, &db);
        let lib = db.open().await;
        c.import_preheat(&lib, "to", &PRODUCTS).await;
        let doc = c.json(
            "load to --buyers 1200 --concurrency 32 --yes --faults timeout=0.1
             --payment-window-secs 0.2 --seed 9",
        );
        let unknown = doc["unknown"].as_i64().unwrap_or(0);
        assert!(unknown > 0, "{doc}");
        assert_eq!(doc["compensation_entries"], unknown);
        let l = c.run("--json compensation list to").json();
        assert_eq!(
            l["entries"].as_array().map(Vec::len),
            Some(unknown as usize)
        );
        let now = c.clone().with("--grace-secs 0");
        now.ok("compensation resolve to --all");
        let rec = now.reconcile("to");
        for p in products(&rec) {
            assert_eq!(p["drift"], 0, "{}: {p}", topo.name());
            assert_eq!(p["orphaned"], 0);
        }
        assert_eq!(rec["compensation"]["pending"], 0);
        lib.close().await;
    }
}

#[tokio::test]
async fn script_flush_mid_run_fails_no_request() {
    for topo in Topo::both() {
        let store = topo.store().await;
        let db = TestDb::sqlite();
        let c = Console::new(&topo, &db);
        let lib = db.open().await;
        c.import_preheat(&lib, "fl", &PRODUCTS).await;
        // The flushes happened: each run sent SCRIPT FLUSH to the servers it deducted on.
        let flushes = || async {
            commandstats(&store)
                .await
                .get("script|flush")
                .map_or(0, |(calls, _)| *calls)
        };
        let before = flushes().await;
        let doc =
            c.json("dry-run fl --buyers 4000 --concurrency 64 --faults script-flush --rate 8000");
        let after_dry_run = flushes().await;
        assert!(
            after_dry_run > before,
            "{}: the dry run flushed no script ({before} -> {after_dry_run})",
            topo.name()
        );
        assert_eq!(
            (doc["errors"].as_i64(), doc["unknown"].as_i64()),
            (Some(0), Some(0)),
            "{}: {doc}",
            topo.name()
        );
        assert!(invariants_ok(&doc), "{doc}");
        let l = c.json(
            "load fl --buyers 3000 --concurrency 64 --yes --faults script-flush --rate 6000
             --payment-window-secs 0.2",
        );
        assert_eq!(l["errors"], 0, "{}: {l}", topo.name());
        assert_eq!(l["unknown"], 0);
        assert!(
            flushes().await > after_dry_run,
            "{}: the load flushed no script",
            topo.name()
        );
        lib.close().await;
    }
}

#[test]
fn bad_worker_input_exits_2() {
    let topo = Topo::standalone();
    let db = TestDb::sqlite();
    let c = Console::new(&topo, &db);
    for (args, needle) in [
        (
            vec!["dry-run", "x", "--buyers", "0", "--concurrency", "1"],
            "--buyers 0",
        ),
        (
            vec!["dry-run", "x", "--buyers", "10", "--concurrency", "0"],
            "--concurrency 0",
        ),
        (
            vec!["dry-run", "x{", "--buyers", "10", "--concurrency", "1"],
            "'x{'",
        ),
        (
            vec![
                "dry-run",
                "x",
                "--buyers",
                "10",
                "--concurrency",
                "1",
                "--faults",
                "meteor=1",
            ],
            "meteor",
        ),
        (
            vec![
                "dry-run",
                "x",
                "--buyers",
                "10",
                "--concurrency",
                "1",
                "--repeat-share",
                "2",
            ],
            "--repeat-share 2",
        ),
        (
            vec![
                "load",
                "x",
                "--buyers",
                "10",
                "--concurrency",
                "1",
                "--yes",
                "--faults",
                "timeout=7",
            ],
            "'7'",
        ),
        (
            vec!["dry-run", "x", "--buyers", "ten", "--concurrency", "1"],
            "ten",
        ),
        (
            vec!["dry-run", "nosuch", "--buyers", "10", "--concurrency", "1"],
            "'nosuch'",
        ),
    ] {
        let r = c.run(&args);
        r.expect_code(2);
        assert!(r.stderr.contains(needle), "{args:?}: {}", r.stderr);
    }
}

/// A load in which no request got an answer tested nothing: exit 4, saying so. And a strategy
/// that keeps no ledger does not claim that expired orders gave their stock back.
#[tokio::test]
async fn a_load_that_no_request_survived_exits_4_and_expiry_is_reported_as_it_happened() {
    let topo = Topo::standalone();
    let store = topo.store().await;
    let db = TestDb::sqlite();
    let c = Console::new(&topo, &db);
    let lib = db.open().await;
    c.import_preheat(&lib, "dead", &PRODUCTS).await;
    for (p, _, _) in PRODUCTS {
        let k = product_keys("dead", p);
        // A ledger of the wrong type: every deduction answers WRONGTYPE.
        redis_cmd(&store, &["DEL", &k.ledger]).await;
        redis_cmd(&store, &["SET", &k.ledger, "x"]).await;
    }
    let l = c.run("load dead --buyers 50 --concurrency 4 --retries 0 --yes");
    l.expect_code(4);
    assert!(l.stdout.contains("no request was answered"), "{}", l.stdout);

    c.import_preheat(&lib, "noledger", &PRODUCTS).await;
    let l = c.ok(
        "load noledger --buyers 200 --concurrency 8 --strategy hincrby --pay-share 0
         --payment-window-secs 0 --yes",
    );
    assert!(
        l.stdout.contains("stock not returned") && !l.stdout.contains("(stock returned)"),
        "{}",
        l.stdout
    );
    lib.close().await;
}
