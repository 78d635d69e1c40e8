//! The operator's controls (issue 12): pause and resume, the audit trail on the command line.
//! On standalone and cluster.

use crate::harness::fixtures::{import, live_window, product_keys, redis_cmd};
use crate::harness::{Run, TestDb, Topo, console};
use redis::Value;

fn run(topo: &Topo, db: &TestDb, rest: &[&str]) -> Run {
    let flags = topo.flags();
    let mut v: Vec<&str> = flags.iter().map(String::as_str).collect();
    v.extend(["--db", db.url.as_str()]);
    v.extend_from_slice(rest);
    console(&v)
}

async fn stock(
    store: &seckill_console::redis::RedisStore,
    activity: &str,
    product: &str,
) -> String {
    let k = product_keys(activity, product);
    match redis_cmd(store, &["GET", &k.stock]).await {
        Value::BulkString(b) => String::from_utf8_lossy(&b).into_owned(),
        other => format!("{other:?}"),
    }
}

fn load(topo: &Topo, db: &TestDb, activity: &str) -> serde_json::Value {
    let r = run(
        topo,
        db,
        &[
            "--json",
            "load",
            activity,
            "--yes",
            "--buyers",
            "40",
            "--concurrency",
            "4",
            "--seed",
            "7",
            "--pay-share",
            "1",
        ],
    );
    r.expect_code(0);
    r.json()
}

/// Pause, then `load`: nothing sold, every answer `paused`, the stock unchanged, an info alert
/// in `status`; resume: it sells. The audit trail lists both with the actor and the reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_activity_sells_nothing_until_it_is_resumed() {
    for topo in Topo::both() {
        let store = topo.store().await;
        let db = TestDb::sqlite();
        let lib = db.open().await;
        let label = topo.name();
        import(
            &lib,
            "hold",
            &[("p1", 100, 5), ("p2", 100, 5)],
            live_window(),
        )
        .await;
        run(&topo, &db, &["preheat", "hold"]).expect_code(0);

        // Without a terminal, --yes is required; read-only refuses.
        run(&topo, &db, &["pause", "hold"]).expect_code(5);
        run(&topo, &db, &["--read-only", "pause", "hold", "--yes"]).expect_code(5);
        // An unknown product is named, nothing written.
        let bad = run(&topo, &db, &["pause", "hold", "--product", "p9", "--yes"]);
        bad.expect_code(2);
        assert!(bad.stderr.contains("p9"), "{label}: {}", bad.stderr);

        let p = run(
            &topo,
            &db,
            &[
                "--json",
                "--actor",
                "alice",
                "pause",
                "hold",
                "--yes",
                "--reason",
                "wrong price",
            ],
        );
        p.expect_code(0);
        let doc = p.json();
        assert_eq!(doc["action"], "pause", "{label}: {doc}");
        for row in doc["products"].as_array().expect("products") {
            assert_eq!(row["paused"], true, "{label}: {row}");
            assert_eq!(row["changed"], true, "{label}: {row}");
        }
        let s = run(&topo, &db, &["--json", "status", "hold"]);
        let doc = s.json();
        for p in doc["products"].as_array().expect("products") {
            assert_eq!(p["paused"], true, "{label}: {p}");
            assert_eq!(p["state"], "paused", "{label}: {p}");
        }
        let infos = doc["alerts"]
            .as_array()
            .expect("alerts")
            .iter()
            .filter(|a| a["kind"] == "paused" && a["severity"] == "info")
            .count();
        assert_eq!(infos, 2, "{label}: {doc}");
        // Paused on purpose is not drift.
        run(&topo, &db, &["reconcile", "hold", "--fail-on-drift"]).expect_code(0);

        // A dry run shows the same: its copy of a paused product is paused, and it says why.
        let d = run(
            &topo,
            &db,
            &[
                "dry-run",
                "hold",
                "--buyers",
                "20",
                "--concurrency",
                "2",
                "--seed",
                "3",
            ],
        );
        d.expect_code(0);
        assert!(
            d.stdout.contains("paused in Redis: p1, p2"),
            "{label}: {}",
            d.stdout
        );
        let d = run(
            &topo,
            &db,
            &[
                "--json",
                "dry-run",
                "hold",
                "--buyers",
                "20",
                "--concurrency",
                "2",
                "--seed",
                "3",
            ],
        );
        let dj = d.json();
        assert_eq!(dj["succeeded"], 0, "{label}: {dj}");
        assert_eq!(dj["paused"], dj["requests"], "{label}: {dj}");

        let l = load(&topo, &db, "hold");
        let stats = &l;
        assert_eq!(stats["succeeded"], 0, "{label}: {l}");
        assert_eq!(stats["paused"], stats["requests"], "{label}: {l}");
        assert!(
            stats["requests"].as_u64().is_some_and(|n| n > 0),
            "{label}: {l}"
        );
        assert_eq!(stock(&store, "hold", "p1").await, "100", "{label}");
        assert_eq!(stock(&store, "hold", "p2").await, "100", "{label}");

        // Resume one product: only it sells.
        let r = run(
            &topo,
            &db,
            &[
                "--json",
                "--actor",
                "bob",
                "resume",
                "hold",
                "--product",
                "p1",
                "--yes",
                "--reason",
                "price fixed",
            ],
        );
        r.expect_code(0);
        assert_eq!(r.json()["products"][0]["product"], "p1");
        assert_eq!(r.json()["products"].as_array().map(Vec::len), Some(1));
        let l = load(&topo, &db, "hold");
        let stats = &l;
        assert!(
            stats["succeeded"].as_u64().is_some_and(|n| n > 0),
            "{label}: {l}"
        );
        assert!(
            stats["paused"].as_u64().is_some_and(|n| n > 0),
            "{label}: {l}"
        );
        assert_ne!(stock(&store, "hold", "p1").await, "100", "{label}");
        assert_eq!(stock(&store, "hold", "p2").await, "100", "{label}");

        let a = run(&topo, &db, &["--json", "audit", "hold", "--since", "1h"]);
        a.expect_code(0);
        let entries = a.json()["entries"].as_array().cloned().unwrap_or_default();
        let pauses: Vec<_> = entries.iter().filter(|e| e["action"] == "pause").collect();
        assert_eq!(pauses.len(), 2, "{label}: {entries:?}");
        for e in &pauses {
            assert_eq!(e["actor"], "alice");
            assert_eq!(e["reason"], "wrong price");
            assert_eq!(e["before"], "selling");
            assert_eq!(e["after"], "paused");
        }
        let resumes: Vec<_> = entries.iter().filter(|e| e["action"] == "resume").collect();
        assert_eq!(resumes.len(), 1, "{label}: {entries:?}");
        assert_eq!(resumes[0]["actor"], "bob");
        assert_eq!(resumes[0]["product"], "p1");
        // Newest first.
        assert_eq!(entries[0]["action"], "resume", "{label}");
        let since = run(&topo, &db, &["audit", "hold", "--since", "yesterday"]);
        since.expect_code(2);
        assert!(since.stderr.contains("'yesterday'"), "{}", since.stderr);
        lib.close().await;
    }
}
