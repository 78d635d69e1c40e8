//! Status, reconciliation drift, one-key fixes, the compensation queue, audit and read-only,
//! on standalone and cluster, SQLite, PostgreSQL and MariaDB.

use crate::harness::fixtures::{buy, import, live_window, product_keys, redis_cmd};
use crate::harness::{Run, TestDb, Topo, console};
use crate::preheat::dump_activity;
use seckill_console::db::Db;
use seckill_console::db::audit;
use seckill_console::db::compensation::{NewCompensation, insert};
use serde_json::Value as Json;
use std::process::{Child, Command, Stdio};

struct Env<'a> {
    topo: &'a Topo,
    db: &'a TestDb,
}

impl Env<'_> {
    fn run(&self, rest: &[&str]) -> Run {
        self.run_env(rest, &[])
    }

    fn run_env(&self, rest: &[&str], env: &[(&str, &str)]) -> Run {
        let flags = self.topo.flags();
        let mut v: Vec<&str> = flags.iter().map(String::as_str).collect();
        v.extend(["--db", self.db.url.as_str()]);
        v.extend_from_slice(rest);
        crate::harness::cli::console_env(&v, env)
    }

    fn label(&self) -> String {
        format!("{} {}", self.topo.name(), self.db.name())
    }
}

fn product<'a>(doc: &'a Json, p: &str) -> &'a Json {
    doc["products"]
        .as_array()
        .and_then(|ps| ps.iter().find(|x| x["product"] == p))
        .unwrap_or_else(|| panic!("product {p} not in {doc}"))
}

async fn setup(env: &Env<'_>, lib: &Db, activity: &str, products: &[(&str, i64, i64)]) {
    import(lib, activity, products, live_window()).await;
    env.run(&["preheat", activity]).expect_code(0);
}

/// Every product ok, drift 0, and sold + remaining + in-flight = initial.
fn assert_balanced(doc: &Json, label: &str) {
    for p in doc["products"].as_array().expect("products") {
        assert_eq!(p["state"], "ok", "{label}: {p}");
        assert_eq!(p["drift"], 0, "{label}: {p}");
        let sum = p["db_sold"].as_i64().unwrap_or(-1)
            + p["redis_remaining"].as_i64().unwrap_or(-1)
            + p["in_flight"].as_i64().unwrap_or(-1);
        assert_eq!(
            sum,
            p["initial"].as_i64().unwrap_or(-2),
            "{label}: books do not balance: {p}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clean_buyers_then_drift_from_lost_writes_fixed_with_one_key() {
    for topo in Topo::both() {
        let store = topo.store().await;
        for db in TestDb::all().await {
            let env = Env {
                topo: &topo,
                db: &db,
            };
            let lib = db.open().await;
            let a = format!("rc{}", db.name());
            setup(
                &env,
                &lib,
                &a,
                &[("p1", 50, 2), ("p2", 30, 1), ("p3", 5, 5)],
            )
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
            let r = env.run(&["--json", "reconcile", &a, "--fail-on-drift"]);
            r.expect_code(0);
            let doc = r.json();
            assert_balanced(&doc, &env.label());
            assert_eq!(product(&doc, "p3")["db_sold"], 5, "{}", env.label());
            assert_eq!(product(&doc, "p3")["redis_remaining"], 0);
            assert_eq!(doc["alerts"].as_array().map(Vec::len), Some(0), "{doc}");

            // Lost writes: Redis shows 7 more than there is.
            let k = product_keys(&a, "p1");
            redis_cmd(&store, &["INCRBY", &k.stock, "7"]).await;
            let r = env.run(&["--json", "reconcile", &a]);
            r.expect_code(0);
            let p1 = product(&r.json(), "p1").clone();
            assert_eq!(p1["state"], "drift");
            assert_eq!(p1["drift"], 7);
            assert!(
                r.json()["alerts"].to_string().contains("drift"),
                "{}",
                env.label()
            );
            env.run(&["reconcile", &a, "--fail-on-drift"])
                .expect_code(4);

            let f = env.run(&["--json", "--actor", "oncall", "fix", &a, "--yes"]);
            f.expect_code(0);
            let fixed = product(&f.json(), "p1").clone();
            assert_eq!(fixed["before"], "17");
            assert_eq!(fixed["after"], 10);
            assert_eq!(fixed["applied"], true);
            let r = env.run(&["--json", "reconcile", &a, "--fail-on-drift"]);
            r.expect_code(0);
            assert_balanced(&r.json(), &env.label());

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
            let env = Env {
                topo: &topo,
                db: &db,
            };
            let lib = db.open().await;
            let a = format!("bad{}", db.name());
            setup(
                &env,
                &lib,
                &a,
                &[
                    ("neg", 10, 1),
                    ("gone", 10, 1),
                    ("junk", 10, 1),
                    ("fine", 10, 1),
                ],
            )
            .await;
            buy(&store, &lib, &a, "neg", "n1", "u1", 1).await;
            redis_cmd(&store, &["SET", &product_keys(&a, "neg").stock, "-3"]).await;
            redis_cmd(&store, &["DEL", &product_keys(&a, "gone").stock]).await;
            redis_cmd(&store, &["SET", &product_keys(&a, "junk").stock, "abc"]).await;

            let r = env.run(&["--json", "status", &a]);
            r.expect_code(0);
            let doc = r.json();
            assert_eq!(product(&doc, "neg")["state"], "negative", "{}", env.label());
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
                    env.label()
                );
            }
            let f = env.run(&["--json", "fix", &a, "--yes"]);
            f.expect_code(0);
            assert_eq!(f.json()["products"].as_array().map(Vec::len), Some(3));
            let r = env.run(&["--json", "reconcile", &a, "--fail-on-drift"]);
            r.expect_code(0);
            assert_balanced(&r.json(), &env.label());
            assert_eq!(product(&r.json(), "neg")["redis_remaining"], 9);
            lib.close().await;
        }
    }
}

#[tokio::test]
async fn orphaned_deductions_are_counted_and_returned_once() {
    for topo in Topo::both() {
        let store = topo.store().await;
        for db in TestDb::all().await {
            let env = Env {
                topo: &topo,
                db: &db,
            };
            let lib = db.open().await;
            let a = format!("orph{}", db.name());
            setup(&env, &lib, &a, &[("p1", 10, 3)]).await;
            buy(&store, &lib, &a, "p1", "ok1", "u1", 1).await;
            // A deduction whose order never landed (the app server crashed after Redis).
            let k = product_keys(&a, "p1");
            seckill_console::redis::stock::deduct(&store, &k, "lost1", "u2", "2")
                .await
                .expect("deduct");

            // Inside the grace window it is in flight ...
            let r = env.run(&["--json", "reconcile", &a]);
            let p = product(&r.json(), "p1").clone();
            assert_eq!(
                (p["in_flight"].as_i64(), p["orphaned"].as_i64()),
                (Some(2), Some(0)),
                "{}",
                env.label()
            );
            assert_eq!(p["state"], "ok");
            // ... past it, orphaned: Redis shows less than the truth.
            let r = env.run(&["--json", "--grace-secs", "0", "reconcile", &a]);
            let p = product(&r.json(), "p1").clone();
            assert_eq!(
                (p["in_flight"].as_i64(), p["orphaned"].as_i64()),
                (Some(0), Some(2)),
                "{}",
                env.label()
            );
            assert_eq!(p["drift"], -2);
            assert!(r.json()["alerts"].to_string().contains("orphaned"));

            let f = env.run(&["--json", "--grace-secs", "0", "fix", &a, "--yes"]);
            f.expect_code(0);
            let fp = product(&f.json(), "p1").clone();
            assert_eq!(fp["orphans_returned"], 2, "{}: {}", env.label(), f.stdout);
            let after = dump_activity(&store, &a).await;
            let again = env.run(&["--json", "--grace-secs", "0", "fix", &a, "--yes"]);
            again.expect_code(0);
            assert_eq!(
                again.json()["products"].as_array().map(Vec::len),
                Some(0),
                "{}",
                again.stdout
            );
            assert_eq!(
                dump_activity(&store, &a).await,
                after,
                "{}: a second fix changed Redis",
                env.label()
            );
            let r = env.run(&[
                "--json",
                "--grace-secs",
                "0",
                "reconcile",
                &a,
                "--fail-on-drift",
            ]);
            r.expect_code(0);
            assert_balanced(&r.json(), &env.label());
            assert_eq!(product(&r.json(), "p1")["redis_remaining"], 9);
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
            let env = Env {
                topo: &topo,
                db: &db,
            };
            let lib = db.open().await;
            let a = format!("race{}", db.name());
            let products = ["p1", "p2", "p3", "p4"];
            setup(&env, &lib, &a, &products.map(|p| (p, 150, 1000))).await;
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
                            buy(
                                &store,
                                &lib,
                                &a,
                                p,
                                &format!("{p}-{t}-{i}"),
                                &format!("u{t}"),
                                1,
                            )
                            .await;
                        }
                    }
                }));
            }
            let mut fixes = Vec::new();
            for _ in 0..4 {
                let args: Vec<String> = env
                    .topo
                    .flags()
                    .into_iter()
                    .chain([
                        "--db".into(),
                        db.url.clone(),
                        "--json".into(),
                        "fix".into(),
                        a.clone(),
                        "--yes".into(),
                    ])
                    .collect();
                fixes.push(crate::harness::cli::console_async(args).await);
            }
            for b in buyers {
                b.await.expect("buyers");
            }
            for f in &fixes {
                assert!(
                    f.code == 0 || f.code == 5,
                    "{}: fix exited {}: {}",
                    env.label(),
                    f.code,
                    f.stderr
                );
            }
            // Demand (16 x 60 per product) exceeded the stock: whatever the fixes did, nothing
            // may be oversold, and once quiet a fix balances the books exactly.
            env.run(&["fix", &a, "--yes"]).expect_code(0);
            let r = env.run(&["--json", "reconcile", &a, "--fail-on-drift"]);
            r.expect_code(0);
            let doc = r.json();
            assert_balanced(&doc, &env.label());
            for p in products {
                let sold = product(&doc, p)["db_sold"].as_i64().unwrap_or(i64::MAX);
                assert!(sold <= 150, "{}: {p} oversold: {sold}", env.label());
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
            let env = Env {
                topo: &topo,
                db: &db,
            };
            let lib = db.open().await;
            let a = format!("comp{}", db.name());
            setup(&env, &lib, &a, &[("p1", 20, 5)]).await;
            let k = product_keys(&a, "p1");
            // Applied: deducted and ordered; the caller just never saw the reply.
            buy(&store, &lib, &a, "p1", "applied1", "u1", 2).await;
            // Deducted, no order: the stock must come back.
            seckill_console::redis::stock::deduct(&store, &k, "orphan1", "u2", "3")
                .await
                .expect("deduct");
            // Timed out before Redis ran it: nothing happened.
            for (rid, user, q) in [
                ("applied1", "u1", 2),
                ("orphan1", "u2", 3),
                ("never1", "u3", 1),
            ] {
                let c = NewCompensation {
                    request_id: rid.into(),
                    activity_id: a.clone(),
                    product_id: "p1".into(),
                    user_id: user.into(),
                    quantity: q,
                    reason: "timeout".into(),
                };
                assert!(insert(&lib, &c).await.expect("insert"));
                assert!(
                    !insert(&lib, &c).await.expect("insert twice"),
                    "a duplicate entry was recorded"
                );
            }
            let l = env.run(&["--json", "compensation", "list", &a]);
            l.expect_code(0);
            assert_eq!(l.json()["entries"].as_array().map(Vec::len), Some(3));
            assert!(
                l.json()["entries"]
                    .as_array()
                    .expect("entries")
                    .iter()
                    .all(|e| e["status"] == "pending")
            );

            let r = env.run(&[
                "--json",
                "--grace-secs",
                "0",
                "compensation",
                "resolve",
                &a,
                "--all",
            ]);
            r.expect_code(0);
            let doc = r.json();
            assert_eq!(doc["resolved"], 3, "{}: {doc}", env.label());
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
                env.label()
            );
            assert_eq!(status_of("orphan1"), Some(Json::from("returned")));
            assert_eq!(status_of("never1"), Some(Json::from("not_applied")));

            let before = dump_activity(&store, &a).await;
            let again = env.run(&[
                "--json",
                "--grace-secs",
                "0",
                "compensation",
                "resolve",
                &a,
                "--all",
            ]);
            again.expect_code(0);
            assert_eq!(again.json()["resolved"], 0);
            let one = env.run(&[
                "--json",
                "--grace-secs",
                "0",
                "compensation",
                "resolve",
                &a,
                "--request",
                "orphan1",
            ]);
            one.expect_code(0);
            assert_eq!(one.json()["resolved"], 0);
            assert_eq!(
                dump_activity(&store, &a).await,
                before,
                "{}: resolving again changed Redis",
                env.label()
            );

            let r = env.run(&[
                "--json",
                "--grace-secs",
                "0",
                "reconcile",
                &a,
                "--fail-on-drift",
            ]);
            r.expect_code(0);
            assert_balanced(&r.json(), &env.label());
            assert_eq!(product(&r.json(), "p1")["redis_remaining"], 18);
            let rows = audit::recent(&lib, None, 20).await.expect("audit");
            assert_eq!(
                rows.iter()
                    .filter(|e| e.action == "compensation.resolve")
                    .count(),
                3
            );
            env.run(&["compensation", "resolve", &a]).expect_code(2);
            env.run(&["compensation", "resolve", &a, "--request", "nope"])
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
    let env = Env {
        topo: &topo,
        db: &db,
    };
    let lib = db.open().await;
    setup(&env, &lib, "q", &[("p1", 20, 5)]).await;
    buy(&store, &lib, "q", "p1", "r1", "u1", 1).await;
    insert(
        &lib,
        &NewCompensation {
            request_id: "x1".into(),
            activity_id: "q".into(),
            product_id: "p1".into(),
            user_id: "u".into(),
            quantity: 1,
            reason: "timeout".into(),
        },
    )
    .await
    .expect("insert");
    let quiet = env.run(&["--json", "status", "q"]);
    assert_eq!(
        quiet.json()["alerts"].as_array().map(Vec::len),
        Some(0),
        "{}",
        quiet.stdout
    );
    assert_eq!(quiet.json()["compensation"]["pending"], 1);
    assert_eq!(quiet.json()["outbox"]["pending"], 1);
    topo.cli_all(&["SCRIPT", "FLUSH"]);
    let r = env.run_env(
        &["--json", "status", "q"],
        &[
            ("SECKILL_COMPENSATION_ALERT_SECS", "0"),
            ("SECKILL_OUTBOX_ALERT_SECS", "0"),
        ],
    );
    r.expect_code(0);
    let kinds: Vec<String> = r.json()["alerts"]
        .as_array()
        .expect("alerts")
        .iter()
        .map(|a| a["kind"].as_str().unwrap_or("").to_string())
        .collect();
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
                    ("SCRIPT", Some(sub)) => {
                        out.push(format!("SCRIPT {}", sub.to_ascii_uppercase()))
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
            let env = Env {
                topo: &topo,
                db: &db,
            };
            let lib = db.open().await;
            let ro_name = format!("ro{}", db.name());
            let ro = ro_name.as_str();
            setup(&env, &lib, ro, &[("p1", 20, 5)]).await;
            seckill_console::redis::stock::deduct(&store, &product_keys(ro, "p1"), "o1", "u", "1")
                .await
                .expect("deduct");
            redis_cmd(&store, &["INCRBY", &product_keys(ro, "p1").stock, "4"]).await;
            insert(
                &lib,
                &NewCompensation {
                    request_id: "o1".into(),
                    activity_id: ro.into(),
                    product_id: "p1".into(),
                    user_id: "u".into(),
                    quantity: 1,
                    reason: "timeout".into(),
                },
            )
            .await
            .expect("insert");
            let rows_before = audit::recent(&lib, None, 100).await.expect("audit").len();
            let keys_before = dump_activity(&store, ro).await;

            let dir = tempfile::tempdir().expect("tmp");
            let sessions = monitors(&topo, dir.path());
            std::thread::sleep(std::time::Duration::from_millis(300));
            for args in [
                vec!["--read-only", "--json", "fix", ro, "--yes"],
                vec![
                    "--read-only",
                    "--json",
                    "--grace-secs",
                    "0",
                    "compensation",
                    "resolve",
                    ro,
                    "--all",
                ],
                vec!["--read-only", "--json", "preheat", ro, "--force"],
                vec!["--read-only", "--json", "cleanup", ro, "--force"],
            ] {
                let r = env.run(&args);
                r.expect_code(5);
                assert_eq!(r.json_error()["kind"], "refused", "{args:?}");
            }
            // Reads still work in read-only mode.
            env.run(&["--read-only", "--json", "status", ro])
                .expect_code(0);
            env.run(&["--read-only", "--json", "reconcile", ro])
                .expect_code(0);
            env.run(&["--read-only", "--json", "fix", ro, "--preview"])
                .expect_code(0);
            let seen = monitored_commands(sessions);
            assert!(
                seen.iter().any(|c| c == "GET"),
                "{}: MONITOR saw no reads: {seen:?}",
                topo.name()
            );
            let writes = [
                "SET",
                "DEL",
                "UNLINK",
                "INCRBY",
                "DECRBY",
                "HSET",
                "HSETNX",
                "HDEL",
                "EVAL",
                "EVALSHA",
                "SCRIPT LOAD",
                "SCRIPT FLUSH",
                "FLUSHALL",
                "EXPIRE",
                "HINCRBY",
            ];
            let bad: Vec<&String> = seen
                .iter()
                .filter(|c| writes.contains(&c.as_str()))
                .collect();
            assert!(
                bad.is_empty(),
                "{}: write commands reached Redis in read-only mode: {bad:?}",
                env.label()
            );
            assert_eq!(dump_activity(&store, ro).await, keys_before);
            assert_eq!(
                audit::recent(&lib, None, 100).await.expect("audit").len(),
                rows_before
            );
            let pending = seckill_console::db::compensation::pending(
                &lib,
                &seckill_console::domain::ActivityId::parse(ro).expect("id"),
                None,
            )
            .await
            .expect("pending");
            assert_eq!(pending.len(), 1, "read-only resolved an entry");
            lib.close().await;
        }
    }
}

#[test]
fn fix_without_a_terminal_needs_yes() {
    let topo = Topo::standalone();
    let db = TestDb::sqlite();
    let r = console(&[
        "--redis",
        &topo.flags()[1],
        "--db",
        &db.url,
        "--json",
        "fix",
        "nope",
    ]);
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
    let env = Env {
        topo: &topo,
        db: &db,
    };
    let lib = db.open().await;
    setup(&env, &lib, "lim", &[("p1", 100, 2)]).await;
    let store = topo.store().await;
    buy(&store, &lib, "lim", "p1", "r1", "u1", 2).await;
    import(&lib, "lim", &[("p1", 100, 5)], live_window()).await;
    let s = env.run(&["--json", "status", "lim"]);
    let doc = s.json();
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
        seckill_console::redis::stock::deduct(&store, &k, "r2", "u1", "1")
            .await
            .expect("deduct"),
        seckill_console::redis::stock::Deducted::UserLimit
    );
    env.run(&["--json", "fix", "lim", "--yes"]).expect_code(0);
    let doc = env.run(&["--json", "status", "lim"]).json();
    let p = product(&doc, "p1");
    assert_eq!(p["redis_limit"], 5, "{doc}");
    assert_eq!(p["state"], "ok", "{doc}");
    assert_eq!(p["redis_remaining"], 98, "{doc}");
    assert!(
        !doc["alerts"].to_string().contains("limit_mismatch"),
        "{doc}"
    );
    assert!(matches!(
        seckill_console::redis::stock::deduct(&store, &k, "r3", "u1", "1")
            .await
            .expect("deduct"),
        seckill_console::redis::stock::Deducted::Remaining(97)
    ));
    lib.close().await;
}
