//! The operator's controls (issue 12): pause and resume, the audit trail on the command line.
//! On standalone and cluster.

use crate::harness::cli::finish;
use crate::harness::fixtures::{import, live_window, product_keys, redis_cmd};
use crate::harness::session::products;
use crate::harness::{Console, TestDb, Topo};
use redis::Value;
use std::time::Duration;

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

fn load(c: &Console, activity: &str) -> serde_json::Value {
    c.json(format!(
        "load {activity} --yes --buyers 40 --concurrency 4 --seed 7 --pay-share 1"
    ))
}

/// Pause, then `load`: nothing sold, every answer `paused`, the stock unchanged, an info alert
/// in `status`; resume: it sells. The audit trail lists both with the actor and the reason.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_activity_sells_nothing_until_it_is_resumed() {
    for topo in Topo::both() {
        let store = topo.store().await;
        let db = TestDb::sqlite();
        let c = Console::new(&topo, &db);
        let lib = db.open().await;
        let label = topo.name();
        c.import_preheat(&lib, "hold", &[("p1", 100, 5), ("p2", 100, 5)])
            .await;

        // Without a terminal, --yes is required; read-only refuses.
        c.run("pause hold").expect_code(5);
        c.run("--read-only pause hold --yes").expect_code(5);
        // An unknown product is named, nothing written.
        let bad = c.run("pause hold --product p9 --yes");
        bad.expect_code(2);
        assert!(bad.stderr.contains("p9"), "{label}: {}", bad.stderr);
        // A reason is one line of printable text of at most 500 characters: anything else is
        // refused before a write, and never echoed back (it could repaint the terminal).
        let long = "x".repeat(501);
        for reason in ["two\nlines", "\u{1b}[2Jcleared", long.as_str()] {
            let r = c.run(&["pause", "hold", "--yes", "--reason", reason]);
            r.expect_code(2);
            assert!(r.stderr.contains("--reason"), "{label}: {}", r.stderr);
            assert!(!r.stderr.contains(reason), "{label}: {}", r.stderr);
            let r = c.run(&[
                "topup",
                "hold",
                "--product",
                "p1",
                "--add",
                "1",
                "--yes",
                "--reason",
                reason,
            ]);
            r.expect_code(2);
        }

        let doc = c.json(&[
            "--actor",
            "alice",
            "pause",
            "hold",
            "--yes",
            "--reason",
            "wrong price",
        ]);
        assert_eq!(doc["action"], "pause", "{label}: {doc}");
        for row in products(&doc) {
            assert_eq!(row["paused"], true, "{label}: {row}");
            assert_eq!(row["changed"], true, "{label}: {row}");
        }
        let doc = c.run("--json status hold").json();
        for p in products(&doc) {
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
        for a in doc["alerts"].as_array().expect("alerts") {
            for k in ["kind", "severity", "product", "node", "message", "age_secs"] {
                assert!(a.get(k).is_some(), "{label}: {k} missing: {a}");
            }
        }
        // Paused on purpose is not drift.
        c.ok("reconcile hold --fail-on-drift");

        // A dry run shows the same: its copy of a paused product is paused, and it says why.
        let dry = "dry-run hold --buyers 20 --concurrency 2 --seed 3";
        let d = c.ok(dry);
        assert!(
            d.stdout.contains("paused in Redis: p1, p2"),
            "{label}: {}",
            d.stdout
        );
        let dj = c.run(format!("--json {dry}")).json();
        assert_eq!(dj["succeeded"], 0, "{label}: {dj}");
        assert_eq!(dj["paused"], dj["requests"], "{label}: {dj}");

        let l = load(&c, "hold");
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
        let r = c.json(&[
            "--actor",
            "bob",
            "resume",
            "hold",
            "--product",
            "p1",
            "--yes",
            "--reason",
            "price fixed",
        ]);
        assert_eq!(r["products"][0]["product"], "p1");
        assert_eq!(r["products"].as_array().map(Vec::len), Some(1));
        let l = load(&c, "hold");
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

        let a = c.json("audit hold --since 1h");
        let entries = a["entries"].as_array().cloned().unwrap_or_default();
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
        // The refused top-ups wrote nothing.
        assert!(
            entries.iter().all(|e| e["action"] != "topup"),
            "{label}: {entries:?}"
        );
        assert_eq!(resumes[0]["actor"], "bob");
        assert_eq!(resumes[0]["product"], "p1");
        // Newest first.
        assert_eq!(entries[0]["action"], "resume", "{label}");
        let since = c.run("audit hold --since yesterday");
        since.expect_code(2);
        assert!(since.stderr.contains("'yesterday'"), "{}", since.stderr);
        // Filters narrow the trail: by action, by actor, by product; each entry in the names
        // the incident report uses.
        let only = |filter: &str| -> Vec<serde_json::Value> {
            c.json(format!("audit hold {filter}"))["entries"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        };
        let paused = only("--action pause");
        assert_eq!(paused.len(), 2, "{label}: {paused:?}");
        assert!(paused.iter().all(|e| e["action"] == "pause"), "{label}");
        let by_bob = only("--by bob");
        assert_eq!(by_bob.len(), 1, "{label}: {by_bob:?}");
        assert_eq!(by_bob[0]["action"], "resume", "{label}");
        let p2 = only("--product p2");
        assert!(!p2.is_empty(), "{label}");
        assert!(p2.iter().all(|e| e["product"] == "p2"), "{label}: {p2:?}");
        assert!(
            only("--action pause --by bob --product p1").is_empty(),
            "{label}"
        );
        for k in [
            "at", "actor", "action", "activity", "product", "before", "after", "reason", "detail",
        ] {
            assert!(
                paused[0].get(k).is_some(),
                "{label}: {k} missing: {}",
                paused[0]
            );
        }
        c.run("audit hold --product no/such").expect_code(2);
        lib.close().await;
    }
}

/// A top-up of +50 while `load` sells the product at full speed: afterwards the initial stock
/// is 50 higher, the books balance and nothing is oversold. On SQLite and PostgreSQL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_top_up_during_a_sale_keeps_the_books_balanced() {
    let topo = Topo::standalone();
    for db in TestDb::sqlite_and_postgres().await {
        let label = db.name();
        let c = Console::new(&topo, &db);
        let lib = db.open().await;
        let a = format!("top{}", db.name());
        c.import_preheat(&lib, &a, &[("p1", 1500, 1)]).await;
        let child = c.spawn(format!(
            "--json load {a} --yes --buyers 3000 --concurrency 32 --repeat-share 0
             --payment-window-secs 1"
        ));
        std::thread::sleep(Duration::from_millis(400));
        let t = c.json(&[
            "--actor",
            "carol",
            "topup",
            &a,
            "--product",
            "p1",
            "--add",
            "50",
            "--yes",
            "--reason",
            "more stock arrived",
        ]);
        assert_eq!(t["initial_after"], 1550, "{label}: {t}");
        let l = finish(child, Duration::from_secs(300));
        l.expect_code(0);
        let stats = l.json();
        assert_eq!(stats["oversold"], 0, "{label}: {stats}");
        // The load's figures count against the stock as it stands after the top-up (issue 19,
        // 18: it used to report the top-up's units as oversold).
        assert_eq!(stats["stock"], 1550, "{label}: {stats}");
        let doc = c.reconcile(&a);
        let p = &doc["products"][0];
        assert_eq!(p["initial"], 1550, "{label}: {p}");
        assert_eq!(p["state"], "ok", "{label}: {p}");
        let sum = p["redis_remaining"].as_i64().unwrap_or(-1)
            + p["db_sold"].as_i64().unwrap_or(-1)
            + p["in_flight"].as_i64().unwrap_or(-1);
        assert_eq!(sum, 1550, "{label}: {p}");
        // Taking away more than is unsold is refused, nothing written.
        let before = stock(&topo.store().await, &a, "p1").await;
        let unsold = p["redis_remaining"].as_i64().unwrap_or(0);
        let too_many = format!("-{}", unsold + p["in_flight"].as_i64().unwrap_or(0) + 1);
        c.run(&["topup", &a, "--product", "p1", "--add", &too_many, "--yes"])
            .expect_code(5);
        // So is a cut past 0, with the same figure allowed (it was a range error, exit 2).
        let deep = c.run(&["topup", &a, "--product", "p1", "--add", "-100000", "--yes"]);
        deep.expect_code(5);
        assert!(deep.stderr.contains("at most --add"), "{}", deep.stderr);
        assert_eq!(
            stock(&topo.store().await, &a, "p1").await,
            before,
            "{label}"
        );
        let audit = c.run(&["--json", "audit", &a]).json();
        let e = &audit["entries"];
        let tops: Vec<_> = e
            .as_array()
            .map(|v| {
                v.iter()
                    .filter(|x| x["action"] == "topup")
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        assert_eq!(tops.len(), 1, "{label}: {e}");
        assert_eq!(tops[0]["actor"], "carol");
        assert_eq!(tops[0]["before"], "1500");
        assert_eq!(tops[0]["after"], "1550");
        lib.close().await;
    }
}

/// The Redis connection cut between the two writes of a top-up: the database holds the new
/// initial stock, Redis not yet (the top-up's marker says one is between its writes); the
/// console says so and what to do (exit 3); Redis never holds more than the truth; once the
/// top-up's lease has passed, the `fix` the README names finishes it: the books balance.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_top_up_cut_between_its_writes_is_finished_by_fix() {
    use crate::harness::proxy::{Mode, Proxy};
    let server = crate::harness::RedisServer::start();
    let proxy = Proxy::start(&server.addr());
    let db = TestDb::sqlite();
    let lib = db.open().await;
    let c = Console::redis(&format!("redis://{}", proxy.addr()), &db.url);
    c.import_preheat(&lib, "cut", &[("p1", 100, 5)]).await;
    let store = crate::harness::fixtures::standalone(&server.url()).await;
    crate::harness::fixtures::buy(&store, &lib, "cut", "p1", "r1", "u1", 3).await;

    // The second step of a raise, once the database took it.
    proxy.set(Mode::CutBefore(b"$5\r\napply\r\n"));
    let t = c.run("--json topup cut --product p1 --add 50 --yes");
    t.expect_code(3);
    let err = t.json_error()["error"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(
        err.contains("initial_stock 150")
            && err.contains("Do not run topup again")
            && err.contains("fix cut --product p1"),
        "{err}"
    );
    assert!(proxy.cuts() > 0);
    proxy.set(Mode::Pass);
    assert_eq!(stock(&store, "cut", "p1").await, "97");
    let s = c.run("--json status cut").json();
    let p = &s["products"][0];
    assert_eq!(p["initial"], 150, "{p}");
    // Redis holds fewer units than the truth until the top-up is finished: never more.
    assert!(
        p["redis_remaining"].as_i64().is_some_and(|r| r <= 97),
        "{p}"
    );
    // While the top-up's console may still finish it, a fix does not correct across it.
    let early = c.run("--json fix cut --product p1 --yes");
    early.expect_code(5);
    assert_eq!(stock(&store, "cut", "p1").await, "97");
    // What the README tells the operator to do, once the lease has passed.
    let lease = seckill_console::ops::repair::TOPUP_LEASE_MS as u64;
    tokio::time::sleep(Duration::from_millis(lease + 500)).await;
    let s = c.run("--json status cut").json();
    assert!(
        s["alerts"]
            .as_array()
            .is_some_and(|a| a.iter().any(|x| x["kind"] == "held"
                && x["product"] == "p1"
                && x["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("p1: a top-up")))),
        "a top-up left between its writes is an alert: {s}"
    );
    c.ok("fix cut --product p1 --yes");
    assert_eq!(stock(&store, "cut", "p1").await, "147");
    assert_eq!(c.reconcile("cut")["products"][0]["state"], "ok");
    lib.close().await;
}

/// A top-up marker left by a console that died long ago (past its lease): `preheat` names it
/// and stops (a conflict, exit 5: the gate does not finish a top-up unasked; it said
/// "unchanged" and took the marker away unreported); `--force` finishes or undoes it as `fix`
/// does and says so: the product written, its row naming the top-up, a `preheat.topup` audit row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_top_up_marker_stops_preheat_until_forced_and_is_audited() {
    for topo in Topo::both() {
        let store = topo.store().await;
        let db = TestDb::sqlite();
        let c = Console::new(&topo, &db);
        let lib = db.open().await;
        c.import_preheat(&lib, "stale", &[("p1", 100, 5)]).await;
        let k = product_keys("stale", "p1");
        let long_ago = chrono::Utc::now().timestamp_millis() - 60_000;
        let marker = format!("deadbeef|5|{long_ago}");
        redis_cmd(&store, &["HSET", &k.meta, "topup", &marker]).await;
        let stopped = c.run("--json preheat stale");
        stopped.expect_code(5);
        let doc = stopped.json();
        assert_eq!(doc["decision"], "no-go", "{doc}");
        let row = &products(&doc)[0];
        assert_eq!(row["action"], "conflict", "{row}");
        assert!(
            row["error"]
                .as_str()
                .is_some_and(|e| e.contains("top-up (deadbeef, +5)") && e.contains("fix")),
            "{row}"
        );
        assert_eq!(
            redis_cmd(&store, &["HEXISTS", &k.meta, "topup"]).await,
            Value::Int(1),
            "{}: the no-go wrote",
            topo.name()
        );
        let pre = c.json("preheat stale --force");
        assert_eq!(pre["decision"], "go", "{}: {pre}", topo.name());
        let row = &products(&pre)[0];
        assert_eq!(row["written"], true, "{row}");
        assert!(row["topup"].is_string(), "{row}");
        assert_eq!(
            redis_cmd(&store, &["HEXISTS", &k.meta, "topup"]).await,
            Value::Int(0)
        );
        let audit = c
            .run(&["--json", "audit", "stale", "--action", "preheat.topup"])
            .json();
        let rows = audit["entries"].as_array().cloned().unwrap_or_default();
        assert_eq!(rows.len(), 1, "{}: {audit}", topo.name());
        assert_eq!(rows[0]["product"], "p1", "{audit}");
        assert_eq!(stock(&store, "stale", "p1").await, "100");
        lib.close().await;
    }
}

/// The demo's outbox relay marks the oldest pending messages sent, in batches, on every
/// backend; the outbox summary the alert reads follows.
#[tokio::test]
async fn the_relay_marks_the_oldest_pending_messages_sent() {
    use seckill_console::db::orders::insert_with_outbox;
    use seckill_console::db::outbox::{relay_batch, summary};
    use seckill_console::domain::ActivityId;
    for db in TestDb::all().await {
        let lib = db.open().await;
        import(&lib, "relay", &[("p1", 100, 5)], live_window()).await;
        insert_with_outbox(&lib, &unpaid_orders("relay", 5))
            .await
            .expect("orders");
        let a = ActivityId::parse("relay").expect("id");
        assert_eq!(
            summary(&lib, &a).await.expect("summary").pending,
            5,
            "{}",
            db.name()
        );
        assert_eq!(
            relay_batch(&lib, &a, 3).await.expect("relay"),
            3,
            "{}",
            db.name()
        );
        assert_eq!(summary(&lib, &a).await.expect("summary").pending, 2);
        assert_eq!(relay_batch(&lib, &a, 500).await.expect("relay"), 2);
        assert_eq!(relay_batch(&lib, &a, 500).await.expect("relay"), 0);
        let s = summary(&lib, &a).await.expect("summary");
        assert_eq!((s.pending, s.oldest_secs), (0, None), "{}", db.name());
        lib.close().await;
    }
}

/// A queue counted to its cap says there are more, in the text (`10,000+`) and in the JSON
/// (`"more": true`, the key always there).
#[tokio::test]
async fn a_queue_past_its_count_says_so() {
    use seckill_console::db::orders::insert_with_outbox;
    let topo = Topo::standalone();
    let db = TestDb::sqlite();
    let c = Console::new(&topo, &db);
    let lib = db.open().await;
    c.import_preheat(&lib, "flood", &[("p1", 20_000, 1)]).await;
    insert_with_outbox(&lib, &unpaid_orders("flood", 10_001))
        .await
        .expect("orders");
    let text = c.run("status flood");
    assert!(
        text.stdout
            .contains("compensation 0 pending  outbox 10,000+ unsent"),
        "{}",
        text.stdout
    );
    let doc = c.json("status flood");
    assert_eq!(doc["outbox"]["pending"], 10_000, "{}", doc["outbox"]);
    assert_eq!(doc["outbox"]["more"], true, "{}", doc["outbox"]);
    assert_eq!(
        doc["compensation"]["more"], false,
        "{}",
        doc["compensation"]
    );
    lib.close().await;
}

/// `n` unpaid orders of one unit each on product p1 of `activity`, as the order writer makes
/// them (with no deduction in Redis behind them).
fn unpaid_orders(activity: &str, n: usize) -> Vec<seckill_console::db::orders::NewOrder> {
    (0..n)
        .map(|i| seckill_console::db::orders::NewOrder {
            order_id: format!("o{i}"),
            request_id: format!("r{i}"),
            activity_id: activity.into(),
            product_id: "p1".into(),
            user_id: format!("u{i}"),
            quantity: 1,
            status: seckill_console::domain::order::OrderStatus::PendingPayment,
        })
        .collect()
}

/// A pause set by hand in Redis (the database does not record it): `resume` lifts it, says so
/// on the product's row and audits it; and a pause Redis lost that `pause` writes back is
/// audited the same way. A Redis change nobody can trace was the gap: resume wrote Redis and
/// no audit row, as if nothing had been done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_changed_in_redis_only_is_audited() {
    let topo = Topo::standalone();
    let store = topo.store().await;
    let db = TestDb::sqlite();
    let c = Console::new(&topo, &db);
    let lib = db.open().await;
    c.import_preheat(&lib, "hand", &[("p1", 10, 1), ("p2", 10, 1)])
        .await;
    let k1 = product_keys("hand", "p1");
    redis_cmd(&store, &["HSET", &k1.meta, "paused", "1"]).await;
    let doc = c.json(&[
        "--actor",
        "carol",
        "resume",
        "hand",
        "--yes",
        "--reason",
        "nobody knows who",
    ]);
    let rows = products(&doc);
    let p1 = rows.iter().find(|r| r["product"] == "p1").expect("p1");
    assert_eq!(p1["changed"], false, "{doc}");
    assert!(
        p1["note"].as_str().is_some_and(|n| n.contains("by hand")),
        "{doc}"
    );
    let p2 = rows.iter().find(|r| r["product"] == "p2").expect("p2");
    assert!(p2["note"].is_null(), "{doc}");
    let audit = c.json("audit hand --action resume");
    let entries = audit["entries"].as_array().expect("entries").clone();
    assert_eq!(entries.len(), 1, "only p1 changed: {audit}");
    assert_eq!(entries[0]["product"], "p1", "{audit}");
    assert_eq!(entries[0]["actor"], "carol", "{audit}");
    assert_eq!(entries[0]["after"], "selling", "{audit}");
    assert!(
        entries[0]["before"]
            .as_str()
            .is_some_and(|b| b.contains("Redis only")),
        "{audit}"
    );
    assert_eq!(c.json("status hand")["products"][0]["state"], "ok");

    // Paused in the database; Redis loses p2's pause; `pause` writes it back and says so.
    c.ok("pause hand --yes");
    let k2 = product_keys("hand", "p2");
    redis_cmd(&store, &["HSET", &k2.meta, "paused", "0"]).await;
    let doc = c.json("pause hand --yes");
    let p2 = products(&doc)
        .iter()
        .find(|r| r["product"] == "p2")
        .expect("p2");
    assert!(
        p2["note"].as_str().is_some_and(|n| n.contains("lost")),
        "{doc}"
    );
    let audit = c.json("audit hand --action pause --product p2");
    let entries = audit["entries"].as_array().expect("entries");
    assert_eq!(entries.len(), 2, "the pause and its rewrite: {audit}");
    lib.close().await;
}
