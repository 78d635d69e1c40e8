//! Status, reconciliation drift, one-key fixes, the compensation queue, audit and read-only,
//! on standalone and cluster, SQLite, PostgreSQL and MariaDB.

use crate::harness::fixtures::{buy, dump_activity, import, live_window, product_keys, redis_cmd};
use crate::harness::session::alert_kinds;
use crate::harness::{Console, TestDb, Topo, assert_books, product};
use seckill_console::db::audit;
use seckill_console::db::compensation::{NewCompensation, insert};
use seckill_console::redis::stock::{Deducted, deduct};
use serde_json::Value as Json;
use std::process::{Child, Command, Stdio};

/// A compensation entry of `quantity` units for `request` of `user` on `activity`'s p1.
fn entry(activity: &str, request: &str, user: &str, quantity: i64) -> NewCompensation {
    NewCompensation {
        request_id: request.into(),
        activity_id: activity.into(),
        product_id: "p1".into(),
        user_id: user.into(),
        quantity,
        reason: "timeout".into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clean_buyers_then_drift_from_lost_writes_fixed_with_one_key() {
    for topo in Topo::both() {
        let store = topo.store().await;
        for db in TestDb::all().await {
            let c = Console::new(&topo, &db);
            let lib = db.open().await;
            let a = format!("rc{}", db.name());
            c.import_preheat(&lib, &a, &[("p1", 50, 2), ("p2", 30, 1), ("p3", 5, 5)])
                .await;
            for i in 0..40 {
                for p in ["p1", "p2", "p3"] {
                    buy(
                        &store,
                        &lib,
                        &a,
                        p,
                        &format!("{p}-r{i}"),
                        &format!("u{i}"),
                        1,
                    )
                    .await;
                }
            }
            let doc = c.reconcile(&a);
            assert_books(&doc, c.label());
            assert_eq!(product(&doc, "p3")["db_sold"], 5, "{}", c.label());
            assert_eq!(product(&doc, "p3")["redis_remaining"], 0);
            assert_eq!(doc["alerts"].as_array().map(Vec::len), Some(0), "{doc}");

            // Lost writes: Redis shows 7 more than there is.
            let k = product_keys(&a, "p1");
            redis_cmd(&store, &["INCRBY", &k.stock, "7"]).await;
            let doc = c.json(&["reconcile", &a]);
            let p1 = product(&doc, "p1");
            assert_eq!(p1["state"], "drift");
            assert_eq!(p1["drift"], 7);
            assert!(doc["alerts"].to_string().contains("drift"), "{}", c.label());
            c.run(&["reconcile", &a, "--fail-on-drift"]).expect_code(4);

            let f = c.json(&["--actor", "oncall", "fix", &a, "--yes"]);
            let fixed = product(&f, "p1");
            assert_eq!(fixed["before"], "17");
            assert_eq!(fixed["after"], 10);
            assert_eq!(fixed["applied"], true);
            assert_books(&c.reconcile(&a), c.label());

            let rows = audit::recent(&lib, None, 20).await.expect("audit");
            let row = rows
                .iter()
                .find(|e| e.action == "fix")
                .expect("fix audited");
            assert_eq!(row.actor, "oncall");
            assert_eq!(row.product_id.as_deref(), Some("p1"));
            assert_eq!(
                (row.before_value.as_deref(), row.after_value.as_deref()),
                (Some("17"), Some("10"))
            );
            assert!(row.reason.contains("+7"), "{}", row.reason);
            lib.close().await;
        }
    }
}

#[tokio::test]
async fn negative_missing_and_corrupt_alert_and_one_fix_repairs_all() {
    for topo in Topo::both() {
        let store = topo.store().await;
        for db in TestDb::all().await {
            let c = Console::new(&topo, &db);
            let lib = db.open().await;
            let a = format!("bad{}", db.name());
            let products = [
                ("neg", 10, 1),
                ("gone", 10, 1),
                ("junk", 10, 1),
                ("fine", 10, 1),
            ];
            c.import_preheat(&lib, &a, &products).await;
            buy(&store, &lib, &a, "neg", "n1", "u1", 1).await;
            redis_cmd(&store, &["SET", &product_keys(&a, "neg").stock, "-3"]).await;
            redis_cmd(&store, &["DEL", &product_keys(&a, "gone").stock]).await;
            redis_cmd(&store, &["SET", &product_keys(&a, "junk").stock, "abc"]).await;

            let doc = c.status(&a);
            assert_eq!(product(&doc, "neg")["state"], "negative", "{}", c.label());
            assert_eq!(product(&doc, "gone")["state"], "missing");
            assert_eq!(product(&doc, "gone")["redis_remaining"], Json::Null);
            assert_eq!(product(&doc, "junk")["state"], "corrupt");
            assert_eq!(product(&doc, "junk")["redis_remaining"], Json::Null);
            assert_eq!(product(&doc, "fine")["state"], "ok");
            let alerts = doc["alerts"].as_array().expect("alerts");
            for (kind, p) in [
                ("negative", "neg"),
                ("missing", "gone"),
                ("corrupt", "junk"),
            ] {
                assert!(
                    alerts
                        .iter()
                        .any(|x| x["kind"] == kind && x["product"] == p),
                    "{}: no {kind} alert for {p}: {alerts:?}",
                    c.label()
                );
            }
            let f = c.json(&["fix", &a, "--yes"]);
            assert_eq!(f["products"].as_array().map(Vec::len), Some(3));
            let doc = c.reconcile(&a);
            assert_books(&doc, c.label());
            assert_eq!(product(&doc, "neg")["redis_remaining"], 9);
            lib.close().await;
        }
    }
}

#[tokio::test]
async fn orphaned_deductions_are_counted_and_returned_once() {
    for topo in Topo::both() {
        let store = topo.store().await;
        for db in TestDb::all().await {
            let c = Console::new(&topo, &db);
            let now = c.clone().with("--grace-secs 0");
            let lib = db.open().await;
            let a = format!("orph{}", db.name());
            c.import_preheat(&lib, &a, &[("p1", 10, 3)]).await;
            buy(&store, &lib, &a, "p1", "ok1", "u1", 1).await;
            // A deduction whose order never landed (the app server crashed after Redis).
            let k = product_keys(&a, "p1");
            deduct(&store, &k, "lost1", "u2", "2")
                .await
                .expect("deduct");

            // Inside the grace window it is in flight ...
            let doc = c.json(&["reconcile", &a]);
            let p = product(&doc, "p1");
            assert_eq!(
                (p["in_flight"].as_i64(), p["orphaned"].as_i64()),
                (Some(2), Some(0)),
                "{}",
                c.label()
            );
            assert_eq!(p["state"], "ok");
            // ... past it, orphaned: Redis shows less than the truth.
            let doc = now.json(&["reconcile", &a]);
            let p = product(&doc, "p1");
            assert_eq!(
                (p["in_flight"].as_i64(), p["orphaned"].as_i64()),
                (Some(0), Some(2)),
                "{}",
                c.label()
            );
            assert_eq!(p["drift"], -2);
            assert!(doc["alerts"].to_string().contains("orphaned"));

            let f = now.json(&["fix", &a, "--yes"]);
            assert_eq!(
                product(&f, "p1")["orphans_returned"],
                2,
                "{}: {f}",
                c.label()
            );
            let after = dump_activity(&store, &a).await;
            let again = now.json(&["fix", &a, "--yes"]);
            assert_eq!(
                again["products"].as_array().map(Vec::len),
                Some(0),
                "{again}"
            );
            assert_eq!(
                dump_activity(&store, &a).await,
                after,
                "{}: a second fix changed Redis",
                c.label()
            );
            let doc = now.reconcile(&a);
            assert_books(&doc, c.label());
            assert_eq!(product(&doc, "p1")["redis_remaining"], 9);
            let rows = audit::recent(&lib, None, 20).await.expect("audit");
            assert!(
                rows.iter()
                    .any(|e| e.action == "fix.return_orphans" && e.detail.contains("lost1"))
            );
            lib.close().await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fix_during_buyers_never_overwrites_a_deduction() {
    for topo in Topo::both() {
        let store = topo.store().await;
        for db in TestDb::all().await {
            let c = Console::new(&topo, &db);
            let lib = db.open().await;
            let a = format!("race{}", db.name());
            let products = ["p1", "p2", "p3", "p4"];
            c.import_preheat(&lib, &a, &products.map(|p| (p, 150, 1000)))
                .await;
            // Lost sales on every product: the fix has something to write while buyers run.
            for p in products {
                redis_cmd(&store, &["DECRBY", &product_keys(&a, p).stock, "5"]).await;
            }
            let mut buyers = Vec::new();
            for t in 0..16 {
                let (store, lib, a) = (store.clone(), lib.clone(), a.clone());
                buyers.push(tokio::spawn(async move {
                    for i in 0..60 {
                        for p in products {
                            let rid = format!("{p}-{t}-{i}");
                            buy(&store, &lib, &a, p, &rid, &format!("u{t}"), 1).await;
                        }
                    }
                }));
            }
            let mut fixes = Vec::new();
            for _ in 0..4 {
                fixes.push(c.run_async(&["--json", "fix", &a, "--yes"]).await);
            }
            for b in buyers {
                b.await.expect("buyers");
            }
            for f in &fixes {
                assert!(
                    f.code == 0 || f.code == 5,
                    "{}: fix exited {}: {}",
                    c.label(),
                    f.code,
                    f.stderr
                );
            }
            // Demand (16 x 60 per product) exceeded the stock: whatever the fixes did, nothing
            // may be oversold, and once quiet a fix balances the books exactly.
            c.ok(&["fix", &a, "--yes"]);
            let doc = c.reconcile(&a);
            assert_books(&doc, c.label());
            for p in products {
                let sold = product(&doc, p)["db_sold"].as_i64().unwrap_or(i64::MAX);
                assert!(sold <= 150, "{}: {p} oversold: {sold}", c.label());
            }
            lib.close().await;
        }
    }
}

#[tokio::test]
async fn compensation_entries_resolve_once_and_the_books_balance() {
    for topo in Topo::both() {
        let store = topo.store().await;
        for db in TestDb::all().await {
            let c = Console::new(&topo, &db);
            let now = c.clone().with("--grace-secs 0");
            let lib = db.open().await;
            let a = format!("comp{}", db.name());
            c.import_preheat(&lib, &a, &[("p1", 20, 5)]).await;
            let k = product_keys(&a, "p1");
            // Applied: deducted and ordered; the caller just never saw the reply.
            buy(&store, &lib, &a, "p1", "applied1", "u1", 2).await;
            // Deducted, no order: the stock must come back.
            deduct(&store, &k, "orphan1", "u2", "3")
                .await
                .expect("deduct");
            // Timed out before Redis ran it: nothing happened.
            for (rid, user, q) in [
                ("applied1", "u1", 2),
                ("orphan1", "u2", 3),
                ("never1", "u3", 1),
            ] {
                let e = entry(&a, rid, user, q);
                assert!(insert(&lib, &e).await.expect("insert"));
                assert!(
                    !insert(&lib, &e).await.expect("insert twice"),
                    "a duplicate entry was recorded"
                );
            }
            let l = c.json(&["compensation", "list", &a]);
            let entries = l["entries"].as_array().expect("entries");
            assert_eq!(entries.len(), 3);
            assert!(entries.iter().all(|e| e["status"] == "pending"));

            let doc = now.json(&["compensation", "resolve", &a, "--all"]);
            assert_eq!(doc["resolved"], 3, "{}: {doc}", c.label());
            let status_of = |rid: &str| {
                doc["resolutions"]
                    .as_array()
                    .and_then(|v| v.iter().find(|x| x["request_id"] == rid))
                    .map(|x| x["status"].clone())
            };
            assert_eq!(
                status_of("applied1"),
                Some(Json::from("applied")),
                "{}",
                c.label()
            );
            assert_eq!(status_of("orphan1"), Some(Json::from("returned")));
            assert_eq!(status_of("never1"), Some(Json::from("not_applied")));

            let before = dump_activity(&store, &a).await;
            let again = now.json(&["compensation", "resolve", &a, "--all"]);
            assert_eq!(again["resolved"], 0);
            let one = now.json(&["compensation", "resolve", &a, "--request", "orphan1"]);
            assert_eq!(one["resolved"], 0);
            assert_eq!(
                dump_activity(&store, &a).await,
                before,
                "{}: resolving again changed Redis",
                c.label()
            );

            let doc = now.reconcile(&a);
            assert_books(&doc, c.label());
            assert_eq!(product(&doc, "p1")["redis_remaining"], 18);
            let rows = audit::recent(&lib, None, 20).await.expect("audit");
            assert_eq!(
                rows.iter()
                    .filter(|e| e.action == "compensation.resolve")
                    .count(),
                3
            );
            c.run(&["compensation", "resolve", &a]).expect_code(2);
            c.run(&["compensation", "resolve", &a, "--request", "nope"])
                .expect_code(2);
            lib.close().await;
        }
    }
}

#[tokio::test]
async fn queue_and_script_alerts() {
    let topo = Topo::standalone();
    let store = topo.store().await;
    let db = TestDb::sqlite();
    let c = Console::new(&topo, &db);
    let lib = db.open().await;
    c.import_preheat(&lib, "q", &[("p1", 20, 5)]).await;
    buy(&store, &lib, "q", "p1", "r1", "u1", 1).await;
    insert(&lib, &entry("q", "x1", "u", 1))
        .await
        .expect("insert");
    let quiet = c.status("q");
    assert_eq!(quiet["alerts"].as_array().map(Vec::len), Some(0), "{quiet}");
    assert_eq!(quiet["compensation"]["pending"], 1);
    assert_eq!(quiet["outbox"]["pending"], 1);
    topo.cli_all(&["SCRIPT", "FLUSH"]);
    let r = c.run_env(
        &["--json", "status", "q"],
        &[
            ("SECKILL_COMPENSATION_ALERT_SECS", "0"),
            ("SECKILL_OUTBOX_ALERT_SECS", "0"),
        ],
    );
    r.expect_code(0);
    let kinds = alert_kinds(&r.json());
    for k in ["compensation_pending", "outbox_stale", "script_missing"] {
        assert!(kinds.iter().any(|x| x == k), "no {k} alert in {kinds:?}");
    }
    lib.close().await;
}

/// MONITOR sessions on every node, capturing what the server receives.
fn monitors(topo: &Topo, dir: &std::path::Path) -> Vec<(Child, std::path::PathBuf)> {
    topo.servers()
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let path = dir.join(format!("monitor-{i}.log"));
            let out = std::fs::File::create(&path).expect("monitor log");
            let child = Command::new("redis-cli")
                .args(["-p", &s.port.to_string(), "MONITOR"])
                .stdout(Stdio::from(out))
                .stderr(Stdio::null())
                .spawn()
                .expect("redis-cli MONITOR");
            (child, path)
        })
        .collect()
}

fn monitored_commands(sessions: Vec<(Child, std::path::PathBuf)>) -> Vec<String> {
    std::thread::sleep(std::time::Duration::from_millis(300));
    let mut out = Vec::new();
    for (mut child, path) in sessions {
        let _ = child.kill();
        let _ = child.wait();
        let text = std::fs::read_to_string(path).unwrap_or_default();
        for line in text.lines() {
            // `1700000000.123456 [0 127.0.0.1:5555] "GET" "key"`
            let mut quoted = line.split('"').skip(1).step_by(2);
            if let Some(cmd) = quoted.next() {
                let cmd = cmd.to_ascii_uppercase();
                // SCRIPT EXISTS reads; SCRIPT LOAD and FLUSH do not.
                match (cmd.as_str(), quoted.next()) {
                    ("SCRIPT", Some(sub)) | ("CLIENT", Some(sub)) => {
                        out.push(format!("{cmd} {}", sub.to_ascii_uppercase()))
                    }
                    _ => out.push(cmd),
                }
            }
        }
    }
    out
}

#[tokio::test]
async fn read_only_refuses_every_write_before_sending_it() {
    for topo in Topo::both() {
        let store = topo.store().await;
        for db in TestDb::all().await {
            let c = Console::new(&topo, &db);
            let read_only = c.clone().with("--read-only");
            let lib = db.open().await;
            let ro_name = format!("ro{}", db.name());
            let ro = ro_name.as_str();
            c.import_preheat(&lib, ro, &[("p1", 20, 5)]).await;
            deduct(&store, &product_keys(ro, "p1"), "o1", "u", "1")
                .await
                .expect("deduct");
            redis_cmd(&store, &["INCRBY", &product_keys(ro, "p1").stock, "4"]).await;
            insert(&lib, &entry(ro, "o1", "u", 1))
                .await
                .expect("insert");

            let dir = tempfile::tempdir().expect("tmp");
            // The capture works: a status that may write saves its checkpoints, and MONITOR
            // sees those writes.
            let sessions = monitors(&topo, dir.path());
            std::thread::sleep(std::time::Duration::from_millis(300));
            c.status(ro);
            let seen = monitored_commands(sessions);
            assert!(
                seen.iter().any(|c| c == "HSET") && seen.iter().any(|c| c == "RENAME"),
                "{}: MONITOR did not see the checkpoint's writes: {seen:?}",
                c.label()
            );
            let rows_before = audit::recent(&lib, None, 100).await.expect("audit").len();
            let keys_before = dump_activity(&store, ro).await;
            let sessions = monitors(&topo, dir.path());
            std::thread::sleep(std::time::Duration::from_millis(300));
            for args in [
                format!("--json fix {ro} --yes"),
                format!("--json --grace-secs 0 compensation resolve {ro} --all"),
                format!("--json preheat {ro} --force"),
                format!("--json cleanup {ro} --force"),
                format!("--json pause {ro} --yes"),
                format!("--json topup {ro} --product p1 --add 5 --yes"),
            ] {
                let r = read_only.run(&args);
                r.expect_code(5);
                assert_eq!(r.json_error()["kind"], "refused", "{args:?}");
            }
            // Reads still work in read-only mode.
            read_only.status(ro);
            read_only.json(&["reconcile", ro]);
            read_only.json(&["fix", ro, "--preview"]);
            // The live readers too: a counted watch and the exporter over a few polls.
            let w = read_only.run(&["watch", ro, "--interval", "0.2", "--count", "3"]);
            assert!([0, 4].contains(&w.code), "{}", w.stderr);
            let port = crate::harness::redis_server::free_port();
            let listen = format!("127.0.0.1:{port}");
            let exporter =
                read_only.spawn(&["exporter", "--listen", &listen, "--interval", "0.2", ro]);
            let started = std::time::Instant::now();
            while !crate::harness::prometheus::get(port, "/metrics")
                .is_some_and(|(code, body)| code == 200 && body.contains("seckill_drift_units"))
            {
                assert!(started.elapsed() < std::time::Duration::from_secs(30));
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
            std::thread::sleep(std::time::Duration::from_millis(600));
            crate::harness::cli::terminate(&exporter);
            crate::harness::cli::finish(exporter, std::time::Duration::from_secs(30))
                .expect_code(0);
            let seen = monitored_commands(sessions);
            assert!(
                seen.iter().any(|c| c == "GET"),
                "{}: MONITOR saw no reads: {seen:?}",
                topo.name()
            );
            // The live readers learn what moved from Redis's pushes in read-only mode too.
            assert!(
                seen.iter().any(|c| c == "CLIENT TRACKING"),
                "{}: the live readers never asked for Redis's pushes: {seen:?}",
                c.label()
            );
            // An allowlist: the guard's reads, SCRIPT EXISTS, the connection's handshake (no
            // CLIENT SETINFO: the client does not name itself), CLIENT TRACKING, which writes
            // nothing: it asks Redis to say which keys were written (redis::changes), and
            // SUBSCRIBE to the activity's readers' channel (redis::peers): a read-only reader
            // listens to the others, and never publishes.
            let handshake = ["HELLO", "AUTH", "SELECT"];
            assert!(
                !seen.iter().any(|c| c == "PUBLISH"),
                "{}: a read-only reader published: {seen:?}",
                c.label()
            );
            let bad: Vec<&String> = seen
                .iter()
                .filter(|c| {
                    c.as_str() != "SCRIPT EXISTS"
                        && c.as_str() != "CLIENT TRACKING"
                        && c.as_str() != "SUBSCRIBE"
                        && !seckill_console::redis::guard::READ_COMMANDS.contains(&c.as_str())
                        && !handshake.contains(&c.as_str())
                })
                .collect();
            assert!(
                bad.is_empty(),
                "{}: commands beyond the reads reached Redis in read-only mode: {bad:?}",
                c.label()
            );
            assert_eq!(dump_activity(&store, ro).await, keys_before);
            assert_eq!(
                audit::recent(&lib, None, 100).await.expect("audit").len(),
                rows_before
            );
            let pending = seckill_console::db::compensation::pending_page(
                &lib,
                &seckill_console::domain::ActivityId::parse(ro).expect("id"),
                0,
                i64::MAX,
            )
            .await
            .expect("pending");
            assert_eq!(pending.len(), 1, "read-only resolved an entry");
            lib.close().await;
        }
    }
}

/// `compensation resolve --all` walks the queue a page (1,000 entries) at a time: 2,345
/// entries over three pages, half of them real orphans, all close once, the orphans' units
/// come back exactly once and nothing is left pending.
#[tokio::test]
async fn resolve_all_pages_through_a_long_queue() {
    let topo = Topo::standalone();
    let store = topo.store().await;
    let db = TestDb::sqlite();
    let c = Console::new(&topo, &db);
    let now = c.clone().with("--grace-secs 0");
    let lib = db.open().await;
    c.import_preheat(&lib, "pages", &[("p1", 5000, 1)]).await;
    let k = product_keys("pages", "p1");
    let total = 2345;
    let orphans = 1200;
    for i in 0..total {
        let (rid, user) = (format!("r{i}"), format!("u{i}"));
        if i < orphans {
            deduct(&store, &k, &rid, &user, "1").await.expect("deduct");
        }
        assert!(
            insert(&lib, &entry("pages", &rid, &user, 1))
                .await
                .expect("insert")
        );
    }
    let remaining = |doc: &Json| product(doc, "p1")["redis_remaining"].as_i64();
    assert_eq!(
        remaining(&c.json(&["reconcile", "pages"])),
        Some(5000 - orphans)
    );

    let doc = now.json(&["compensation", "resolve", "pages", "--all"]);
    assert_eq!(doc["resolved"], total, "{doc:#}");
    let rows = doc["resolutions"].as_array().expect("resolutions");
    assert_eq!(rows.len(), usize::try_from(total).unwrap_or(0));
    let returned = rows.iter().filter(|r| r["status"] == "returned").count();
    let never = rows.iter().filter(|r| r["status"] == "not_applied").count();
    assert_eq!((returned, never), (1200, 1145));
    assert_eq!(remaining(&c.json(&["reconcile", "pages"])), Some(5000));

    let pending = seckill_console::db::compensation::pending_page(
        &lib,
        &seckill_console::domain::ActivityId::parse("pages").expect("id"),
        0,
        i64::MAX,
    )
    .await
    .expect("pending");
    assert!(pending.is_empty(), "{} entries left pending", pending.len());
    let again = now.json(&["compensation", "resolve", "pages", "--all"]);
    assert_eq!(again["resolved"], 0);
    assert_books(&c.reconcile("pages"), c.label());
    lib.close().await;
}

#[test]
fn fix_without_a_terminal_needs_yes() {
    let topo = Topo::standalone();
    let db = TestDb::sqlite();
    let r = Console::new(&topo, &db).run("--json fix nope");
    r.expect_code(5);
    assert!(
        r.json_error()["error"]
            .as_str()
            .unwrap_or("")
            .contains("--yes")
    );
}

/// A re-import that changes the per-user limit during a sale: `status` shows what Redis still
/// enforces beside the database's limit with a warning, and one `fix` writes the new limit
/// (the deduction then enforces it); nothing else moves.
#[tokio::test]
async fn a_changed_limit_is_shown_and_applied_by_fix() {
    let topo = Topo::standalone();
    let db = TestDb::sqlite();
    let c = Console::new(&topo, &db);
    let lib = db.open().await;
    c.import_preheat(&lib, "lim", &[("p1", 100, 2)]).await;
    let store = topo.store().await;
    buy(&store, &lib, "lim", "p1", "r1", "u1", 2).await;
    import(&lib, "lim", &[("p1", 100, 5)], live_window()).await;
    let doc = c.status("lim");
    let p = product(&doc, "p1");
    assert_eq!(p["per_user_limit"], 5, "{doc}");
    assert_eq!(p["redis_limit"], 2, "{doc}");
    let alert = doc["alerts"]
        .as_array()
        .expect("alerts")
        .iter()
        .find(|a| a["kind"] == "limit_mismatch")
        .unwrap_or_else(|| panic!("no limit_mismatch alert: {doc}"));
    assert!(
        alert["message"]
            .as_str()
            .is_some_and(|m| m.contains("limit of 2")),
        "{alert}"
    );
    // The limit of 2 still holds in Redis: u1 cannot buy a third.
    let k = product_keys("lim", "p1");
    assert_eq!(
        deduct(&store, &k, "r2", "u1", "1").await.expect("deduct"),
        Deducted::UserLimit
    );
    c.json(&["fix", "lim", "--yes"]);
    let doc = c.status("lim");
    let p = product(&doc, "p1");
    assert_eq!(p["redis_limit"], 5, "{doc}");
    assert_eq!(p["state"], "ok", "{doc}");
    assert_eq!(p["redis_remaining"], 98, "{doc}");
    assert!(
        !doc["alerts"].to_string().contains("limit_mismatch"),
        "{doc}"
    );
    assert!(matches!(
        deduct(&store, &k, "r3", "u1", "1").await.expect("deduct"),
        Deducted::Remaining(97)
    ));
    lib.close().await;
}

/// A settle from scratch of more sold products than one pipeline of pages holds (99 backward
/// pages of 201 events a pipeline, so that no reply outlives the response timeout): every
/// product's events are read, in order, and the books of each balance.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cold_settle_of_many_sold_products_reads_every_one() {
    let topo = Topo::standalone();
    let db = TestDb::sqlite();
    let lib = db.open().await;
    let c = Console::new(&topo, &db);
    let a = "cold";
    let ps: Vec<(String, i64, i64)> = (0..250).map(|i| (format!("p{i:03}"), 4, 4)).collect();
    let ps: Vec<(&str, i64, i64)> = ps.iter().map(|(p, s, l)| (p.as_str(), *s, *l)).collect();
    c.import_preheat(&lib, a, &ps).await;
    c.ok(&[
        "load",
        a,
        "--buyers",
        "700",
        "--concurrency",
        "16",
        "--yes",
        "--pay-share",
        "1",
    ]);
    // The first read after the sale has no checkpoint: it settles every product from scratch.
    let doc = c.status(a);
    let sold: Vec<&Json> = crate::harness::session::products(&doc)
        .iter()
        .filter(|p| p["db_sold"].as_i64().unwrap_or(0) > 0)
        .collect();
    assert!(sold.len() > 99, "only {} products sold", sold.len());
    assert_books(&doc, "a cold settle of 250 products");
    lib.close().await;
}
