//! The preheat gate and activity-scoped cleanup, on standalone and cluster, SQLite and
//! PostgreSQL.

use crate::harness::fixtures::{dump_activity, future_window, import, live_window};
use crate::harness::{Console, TestDb, Topo};
use redis::Value;
use seckill_console::db::Db;
use seckill_console::db::orders::{NewOrder, insert_with_outbox};
use seckill_console::domain::{ActivityId, ProductId};
use seckill_console::ops::preheat::{PreheatOptions, preheat};
use seckill_console::ops::progress::Silent;
use seckill_console::ops::snapshot::{Interleave, Stage};
use seckill_console::redis::{KeySpace, Keyed, RedisStore};

/// GET of every product's stock key, as text (None when missing).
pub async fn stocks(
    store: &RedisStore,
    activity: &str,
    products: &[String],
) -> Vec<Option<String>> {
    let a = ActivityId::parse(activity).expect("valid");
    let items: Vec<Keyed> = products
        .iter()
        .map(|p| {
            let k = KeySpace::default()
                .product(&a, &ProductId::parse(p).expect("valid"))
                .stock
                .clone();
            Keyed::new(k.clone(), redis::cmd("GET").arg(k).clone())
        })
        .collect();
    store
        .pipeline(items)
        .await
        .into_iter()
        .map(|r| match r.expect("GET") {
            Value::BulkString(b) => Some(String::from_utf8(b).expect("utf8")),
            _ => None,
        })
        .collect()
}

pub async fn orders(db: &Db, activity: &str, product: &str, list: &[(&str, i64, &str)]) {
    let batch: Vec<NewOrder> = list
        .iter()
        .map(|(rid, q, status)| NewOrder {
            order_id: format!("o-{rid}"),
            request_id: rid.to_string(),
            activity_id: activity.to_string(),
            product_id: product.to_string(),
            user_id: format!("u-{rid}"),
            quantity: *q,
            status: seckill_console::domain::order::OrderStatus::parse(status)
                .expect("a status of the contract"),
        })
        .collect();
    insert_with_outbox(db, &batch).await.expect("insert orders");
}

#[tokio::test]
async fn a_thousand_products_go_verified_and_equal_to_the_database() {
    for topo in Topo::both() {
        let store = topo.store().await;
        for db in TestDb::sqlite_and_postgres().await {
            let c = Console::new(&topo, &db);
            let lib = db.open().await;
            let activity = format!("k{}", db.name());
            let products: Vec<(String, i64, i64)> = (0..1000i64)
                .map(|i| (format!("p{i:04}"), i * 7 % 500, 1 + i % 3))
                .collect();
            let refs: Vec<(&str, i64, i64)> = products
                .iter()
                .map(|(p, s, l)| (p.as_str(), *s, *l))
                .collect();
            import(&lib, &activity, &refs, future_window()).await;

            let r = c.run(&["--json", "preheat", &activity]);
            r.expect_code(0);
            let doc = r.json();
            let label = format!("{} {}", topo.name(), db.name());
            assert_eq!(doc["decision"], "go", "{label}: {doc}");
            let listed = doc["products"].as_array().expect("products");
            assert_eq!(listed.len(), 1000, "{label}");
            assert!(
                listed
                    .iter()
                    .all(|p| p["verified"] == true && p["written"] == true),
                "{label}"
            );
            let total: i64 = products.iter().map(|p| p.1).sum();
            assert_eq!(doc["total_stock"], total, "{label}");
            assert_eq!(listed[1]["token_bucket"]["capacity"], 14, "{label}");

            let ids: Vec<String> = products.iter().map(|p| p.0.clone()).collect();
            let got = stocks(&store, &activity, &ids).await;
            for ((p, s, _), g) in products.iter().zip(got) {
                assert_eq!(g, Some(s.to_string()), "{label}: {p}");
            }
            let audit = seckill_console::db::audit::recent(&lib, None, 5)
                .await
                .expect("audit");
            assert!(
                audit
                    .iter()
                    .any(|a| a.action == "preheat" && a.activity_id == activity),
                "{label}"
            );
            lib.close().await;
        }
    }
}

#[tokio::test]
async fn orders_in_the_database_and_an_empty_redis_preheat_the_remaining_truth() {
    for topo in Topo::both() {
        let store = topo.store().await;
        for db in TestDb::sqlite_and_postgres().await {
            let c = Console::new(&topo, &db);
            let lib = db.open().await;
            let a = format!("lost{}", db.name());
            import(
                &lib,
                &a,
                &[("p1", 10, 5), ("p2", 20, 5), ("p3", 5, 5)],
                live_window(),
            )
            .await;
            orders(
                &lib,
                &a,
                "p1",
                &[
                    ("r1", 2, "paid"),
                    ("r2", 1, "pending_payment"),
                    ("r3", 4, "cancelled"),
                ],
            )
            .await;
            orders(&lib, &a, "p2", &[("r4", 3, "expired"), ("r5", 5, "paid")]).await;
            let r = c.run(&["--json", "preheat", &a]);
            r.expect_code(0);
            assert_eq!(r.json()["decision"], "go");
            let got = stocks(&store, &a, &["p1".into(), "p2".into(), "p3".into()]).await;
            // initial - sold, where sold counts pending_payment and paid only.
            assert_eq!(
                got,
                vec![Some("7".into()), Some("15".into()), Some("5".into())],
                "{} {}",
                topo.name(),
                db.name()
            );
            let rec = c.run(&["--json", "reconcile", &a, "--fail-on-drift"]);
            rec.expect_code(0);
            for p in rec.json()["products"].as_array().expect("products") {
                assert_eq!(
                    (p["state"].as_str(), p["drift"].as_i64()),
                    (Some("ok"), Some(0)),
                    "{p}"
                );
            }
            // The holdings and the ledger were rebuilt from the live orders before the stock
            // appeared: the per-user limit (5) still counts what u-r1 bought, and the order
            // that is still unpaid can give its unit back.
            let k = crate::harness::fixtures::product_keys(&a, "p1");
            let held = |user: &'static str| {
                let (store, k) = (store.clone(), k.clone());
                async move {
                    crate::harness::fixtures::redis_cmd(&store, &["HGET", &k.buyers, user]).await
                }
            };
            assert_eq!(held("u-r1").await, Value::BulkString(b"2".to_vec()));
            assert_eq!(
                held("u-r3").await,
                Value::Nil,
                "a cancelled order holds nothing"
            );
            use seckill_console::redis::stock::{Deducted, Restored, deduct, restore};
            let over = deduct(&store, &k, "late-1", "u-r1", "4")
                .await
                .expect("deduct");
            assert_eq!(over, Deducted::UserLimit, "{} {}", topo.name(), db.name());
            let back = restore(&store, &k, "r2").await.expect("restore");
            assert_eq!(back, Restored::Returned(1));
            lib.close().await;
        }
    }
}

/// Every key of a product expires `key_ttl_days` after the activity ends; a fix keeps it.
#[tokio::test]
async fn keys_expire_days_after_the_activity_and_a_fix_keeps_it() {
    let topo = Topo::standalone();
    let store = topo.store().await;
    let db = TestDb::sqlite();
    let c = Console::new(&topo, &db);
    let lib = db.open().await;
    let window = live_window();
    import(&lib, "ttl", &[("p1", 10, 5)], window).await;
    import(&lib, "forever", &[("p1", 10, 5)], window).await;
    c.preheat("ttl");
    crate::harness::fixtures::buy(&store, &lib, "ttl", "p1", "t-r1", "u1", 1).await;
    let k = crate::harness::fixtures::product_keys("ttl", "p1");
    let expiry = |k: seckill_console::redis::ProductKeys| {
        let store = store.clone();
        async move {
            let mut out = Vec::new();
            for key in k.script_keys() {
                let v = crate::harness::fixtures::redis_cmd(&store, &["PEXPIRETIME", key]).await;
                out.push(match v {
                    Value::Int(n) => n,
                    other => panic!("PEXPIRETIME {key}: {other:?}"),
                });
            }
            out
        }
    };
    let want = (window.1 + chrono::Duration::days(7)).timestamp_millis();
    assert_eq!(
        expiry(k.clone()).await,
        vec![want; 5],
        "every key, to the ms"
    );
    crate::harness::fixtures::redis_cmd(&store, &["INCRBY", &k.stock, "3"]).await;
    let f = c.run(&["--json", "fix", "ttl", "--yes"]);
    f.expect_code(0);
    assert_eq!(f.json()["products"][0]["applied"], true);
    assert_eq!(expiry(k).await, vec![want; 5], "kept by the fix");
    // 0: never.
    let dir = tempfile::tempdir().expect("tmp");
    let cfg = crate::harness::fixtures::write_file(dir.path(), "c.toml", "key_ttl_days = 0\n");
    let cfg = cfg.to_str().expect("utf8").to_string();
    Console::on(
        [vec!["--config".into(), cfg], topo.flags()].concat(),
        &db.url,
    )
    .preheat("forever");
    let k = crate::harness::fixtures::product_keys("forever", "p1");
    for key in [&k.stock, &k.meta] {
        let v = crate::harness::fixtures::redis_cmd(&store, &["PTTL", key]).await;
        assert_eq!(v, Value::Int(-1), "{key}");
    }
    lib.close().await;
}

#[tokio::test]
async fn a_changed_key_is_a_no_go_until_forced_and_a_rerun_changes_nothing() {
    for topo in Topo::both() {
        let store = topo.store().await;
        for db in TestDb::sqlite_and_postgres().await {
            let c = Console::new(&topo, &db);
            // Each backend starts from an empty Redis: the activity names are the same.
            topo.cli_all(&["FLUSHALL"]);
            let lib = db.open().await;
            import(
                &lib,
                "hand",
                &[("p1", 10, 1), ("p2", 20, 1)],
                future_window(),
            )
            .await;
            c.preheat("hand");

            let key = "seckill:{hand:p2}:stock";
            store
                .query(key, redis::cmd("INCRBY").arg(key).arg(7))
                .await
                .expect("incrby");
            let before = dump_activity(&store, "hand").await;
            let r = c.run(&["--json", "preheat", "hand"]);
            r.expect_code(5);
            let doc = r.json();
            assert_eq!(doc["decision"], "no-go");
            let conflicts = doc["conflicts"].as_array().expect("conflicts");
            assert_eq!(conflicts.len(), 1, "{doc}");
            assert_eq!(conflicts[0]["product"], "p2");
            assert_eq!(conflicts[0]["redis_stock"], "27");
            assert_eq!(conflicts[0]["wanted_stock"], 20);
            assert_eq!(
                dump_activity(&store, "hand").await,
                before,
                "{}: a no-go wrote something",
                topo.name()
            );
            let text = c.run(&["preheat", "hand"]);
            text.expect_code(5);
            assert!(
                text.stdout.contains("p2")
                    && text.stdout.contains("27")
                    && text.stdout.contains("20"),
                "{}",
                text.stdout
            );

            let forced = c.run(&["--json", "preheat", "hand", "--force"]);
            forced.expect_code(0);
            assert_eq!(forced.json()["written"], 1);
            assert_eq!(
                stocks(&store, "hand", &["p2".into()]).await,
                vec![Some("20".into())]
            );

            let settled = dump_activity(&store, "hand").await;
            let again = c.run(&["--json", "preheat", "hand"]);
            again.expect_code(0);
            let doc = again.json();
            assert_eq!(doc["decision"], "go");
            assert_eq!(doc["written"], 0);
            assert_eq!(doc["unchanged"], 2);
            assert_eq!(
                dump_activity(&store, "hand").await,
                settled,
                "{}: an unchanged rerun rewrote keys",
                topo.name()
            );

            let audit = seckill_console::db::audit::recent(&lib, None, 10)
                .await
                .expect("audit");
            let over = audit
                .iter()
                .find(|a| a.action == "preheat.overwrite")
                .expect("overwrite audited");
            assert_eq!(
                (over.before_value.as_deref(), over.after_value.as_deref()),
                (Some("27"), Some("20"))
            );
            lib.close().await;
        }
    }
}

#[tokio::test]
async fn a_failed_write_is_a_no_go_naming_the_products() {
    for topo in Topo::both() {
        for db in TestDb::sqlite_and_postgres().await {
            let c = Console::new(&topo, &db);
            // Each backend starts from an empty Redis: the activity names are the same.
            topo.cli_all(&["FLUSHALL"]);
            let lib = db.open().await;
            import(
                &lib,
                "oom",
                &[("p1", 10, 1), ("p2", 20, 1)],
                future_window(),
            )
            .await;
            topo.cli_all(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]);
            // A server without the room: the gate says so before it writes anything.
            topo.cli_all(&["CONFIG", "SET", "maxmemory", "1"]);
            let r = c.run(&["--json", "preheat", "oom"]);
            topo.cli_all(&["CONFIG", "SET", "maxmemory", "0"]);
            r.expect_code(4);
            let doc = r.json();
            assert_eq!(doc["decision"], "no-go");
            let reasons = doc["reasons"].to_string();
            assert!(reasons.contains("free under its maxmemory"), "{reasons}");
            assert!(
                topo.cli_all(&["DBSIZE"]).iter().all(|n| n.trim() == "0"),
                "{}: the gate wrote keys",
                topo.name()
            );
            // The room goes after the gate looked (another tenant filled it): the write fails,
            // and the no-go names the products.
            let store = topo.store().await;
            let ports = topo.ports();
            let opts = PreheatOptions {
                force: false,
                accept_eviction: false,
                actor: "test".into(),
                grace: std::time::Duration::from_secs(60),
                key_ttl_days: 7,
                interleave: Interleave::new(move |stage| {
                    let ports = ports.clone();
                    Box::pin(async move {
                        if stage == Stage::BeforeWrite {
                            for p in ports {
                                let _ = std::process::Command::new("redis-cli")
                                    .args(["-p", &p.to_string(), "CONFIG", "SET", "maxmemory", "1"])
                                    .output();
                            }
                        }
                    })
                }),
            };
            let id = ActivityId::parse("oom").expect("id");
            let report = preheat(&store, &lib, &KeySpace::default(), &id, &opts, &Silent)
                .await
                .expect("a report");
            topo.cli_all(&["CONFIG", "SET", "maxmemory", "0"]);
            assert_eq!(report.decision, "no-go");
            let reasons = report.reasons.join(" ");
            assert!(
                reasons.contains("p1") && reasons.contains("p2"),
                "{}: {reasons}",
                topo.name()
            );
            assert!(
                report.products[0]
                    .error
                    .as_deref()
                    .unwrap_or("")
                    .contains("OOM"),
                "{report:?}"
            );
            lib.close().await;
        }
    }
}

async fn key_count(store: &RedisStore, activity: &str) -> usize {
    let a = ActivityId::parse(activity).expect("valid");
    store
        .scan(&KeySpace::default().activity_pattern(&a))
        .await
        .expect("scan")
        .len()
}

#[tokio::test]
async fn cleanup_removes_this_activity_and_no_neighbour() {
    for topo in Topo::both() {
        let store = topo.store().await;
        for db in TestDb::sqlite_and_postgres().await {
            let c = Console::new(&topo, &db);
            // Each backend starts from an empty Redis: the activity names are the same.
            topo.cli_all(&["FLUSHALL"]);
            let lib = db.open().await;
            let names = ["a1", "a10", "a1-b", "b1"];
            for a in names {
                let products: Vec<(String, i64, i64)> =
                    (0..30).map(|i| (format!("p{i}"), 5, 1)).collect();
                let refs: Vec<(&str, i64, i64)> = products
                    .iter()
                    .map(|(p, s, l)| (p.as_str(), *s, *l))
                    .collect();
                import(&lib, a, &refs, future_window()).await;
                c.preheat(a);
            }
            // Preheat writes five keys per product (stock, meta, and the buyers, ledger and
            // events keys with their placeholders, so every key carries the expiry).
            let k = KeySpace::default().product(
                &ActivityId::parse("a1").expect("valid"),
                &ProductId::parse("p1").expect("valid"),
            );
            seckill_console::redis::stock::deduct(&store, &k, "r1", "u1", "1")
                .await
                .expect("deduct");
            let before: Vec<usize> = {
                let mut v = Vec::new();
                for a in names {
                    v.push(key_count(&store, a).await);
                }
                v
            };
            assert_eq!(before[0], 30 * 5, "{}", topo.name());
            // Keys the pattern matches that the console never makes: somebody else's.
            let foreign = [
                "seckill:{a1:p 1}:stock",
                "seckill:{a1:}:stock",
                "seckill:{a1:p1:q}:stock",
                "seckill:{a1:p1}:foreign",
            ];
            for k in foreign {
                store
                    .query(k, redis::cmd("SET").arg(k).arg(1))
                    .await
                    .expect("set a foreign key");
            }
            let r = c.run(&["--json", "cleanup", "a1"]);
            r.expect_code(0);
            assert_eq!(r.json()["keys_deleted"], 150);
            assert_eq!(r.json()["keys_left"], 4);
            assert_eq!(key_count(&store, "a1").await, 4);
            for k in foreign {
                let v = store.query(k, redis::cmd("GET").arg(k)).await.expect("get");
                assert_eq!(
                    v,
                    redis::Value::BulkString(b"1".to_vec()),
                    "{}: cleanup deleted {k}",
                    topo.name()
                );
            }
            let text = c.run(&["cleanup", "a1"]);
            text.expect_code(0);
            assert!(
                text.stdout
                    .contains("left 4 key(s) that match but are not the console's")
                    && text.stdout.contains("seckill:{a1:p1}:foreign"),
                "{}",
                text.stdout
            );
            for k in foreign {
                store.query(k, redis::cmd("DEL").arg(k)).await.expect("del");
            }
            for (i, a) in names.iter().enumerate().skip(1) {
                assert_eq!(
                    key_count(&store, a).await,
                    before[i],
                    "{}: cleanup of a1 touched {a}",
                    topo.name()
                );
            }

            // Inside its window an activity's keys stay unless forced.
            import(&lib, "live1", &[("p1", 5, 1)], live_window()).await;
            c.preheat("live1");
            let r = c.run(&["--json", "cleanup", "live1"]);
            r.expect_code(5);
            assert_eq!(r.json_error()["kind"], "refused");
            assert_eq!(key_count(&store, "live1").await, 5);
            // The refusal names the window's end in the operator's zone, as tables do.
            let r = c.run(&["--tz", "Asia/Shanghai", "cleanup", "live1"]);
            r.expect_code(5);
            assert!(
                r.stderr.contains("live until") && r.stderr.contains("+08:00"),
                "{}",
                r.stderr
            );
            c.run(&["cleanup", "live1", "--force"]).expect_code(0);
            assert_eq!(key_count(&store, "live1").await, 0);
            let audit = seckill_console::db::audit::recent(&lib, None, 5)
                .await
                .expect("audit");
            assert!(
                audit
                    .iter()
                    .any(|a| a.action == "cleanup" && a.activity_id == "live1")
            );
            lib.close().await;
        }
    }
}

#[tokio::test]
async fn preheat_refuses_an_ended_activity_and_unknown_ids() {
    let topo = Topo::standalone();
    let db = TestDb::sqlite();
    let c = Console::new(&topo, &db);
    let lib = db.open().await;
    let now = chrono::Utc::now();
    import(
        &lib,
        "old",
        &[("p1", 5, 1)],
        (
            now - chrono::Duration::hours(3),
            now - chrono::Duration::hours(1),
        ),
    )
    .await;
    let r = c.run(&["--json", "preheat", "old"]);
    r.expect_code(4);
    assert!(r.json()["reasons"].to_string().contains("ended"));
    assert_eq!(key_count(&topo.store().await, "old").await, 0);
    c.run(&["preheat", "nope"]).expect_code(2);
    c.run(&["preheat", "no{pe"]).expect_code(2);
    lib.close().await;
}

/// Redis's `used_memory` (INFO memory), bytes.
fn used_memory(server: &crate::harness::RedisServer) -> i64 {
    let info = server.cli(&["INFO", "memory"]);
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("used_memory in INFO memory")
}

/// Issue 22, item 4: what a preheated product costs Redis before its first sale, measured as
/// the growth of `used_memory` over 3,000 products (15,000 keys): within the figure the
/// preheat gate's memory check uses (1,200 B; 5.4 KB before, when preheat wrote the stream's
/// first entry). The stream exists (the witness the scripts check) but
/// holds nothing until the first sale, which then appends its event as before.
#[tokio::test]
async fn a_preheated_product_takes_about_a_kilobyte_before_its_first_sale() {
    use seckill_console::ops::memory_gate::BYTES_PER_PRODUCT;
    let topo = Topo::standalone();
    let Topo::Standalone(server) = &topo else {
        unreachable!()
    };
    let store = topo.store().await;
    let db = TestDb::sqlite();
    let c = Console::new(&topo, &db);
    let lib = db.open().await;
    let n = 3000i64;
    let products: Vec<(String, i64, i64)> =
        (0..n).map(|i| (format!("p{i:05}"), 1000 + i, 2)).collect();
    let refs: Vec<(&str, i64, i64)> = products
        .iter()
        .map(|(p, s, l)| (p.as_str(), *s, *l))
        .collect();
    import(&lib, "mem", &refs, live_window()).await;
    // No script cached before the first figure: the cache preheat fills is measured apart.
    server.cli(&["SCRIPT", "FLUSH"]);
    let before = used_memory(server);
    c.run(&["--json", "preheat", "mem"]).expect_code(0);
    // The key tables grow by rehashing in steps; the old table is freed when it is done.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let after = used_memory(server);
    // The script cache preheat filled, measured on its own and left out.
    let scripts = {
        let with = used_memory(server);
        server.cli(&["SCRIPT", "FLUSH"]);
        with - used_memory(server)
    };
    let per_product = (after - before - scripts) / n;
    println!("per product before its first sale: {per_product} bytes (scripts {scripts} B)");
    // Issue 22's target (<= 1 KB) is measured at scale by the scale benchmark; here, on
    // fewer keys, the key tables weigh more, and the check is the gate's own figure.
    assert!(
        per_product <= 1200,
        "a preheated product takes {per_product} bytes of Redis before its first sale (5.4 KB while preheat wrote the stream's first entry)"
    );
    assert!(
        per_product as u64 <= BYTES_PER_PRODUCT,
        "the gate's memory rule ({BYTES_PER_PRODUCT} B a product) is below the measured {per_product} B"
    );

    // The stream is there and empty; the first sale appends the first event and the product
    // reads as sold.
    let k = crate::harness::fixtures::product_keys("mem", "p00007");
    let t = crate::harness::fixtures::redis_cmd(&store, &["TYPE", &k.events]).await;
    assert_eq!(t, Value::SimpleString("stream".into()));
    let len = crate::harness::fixtures::redis_cmd(&store, &["XLEN", &k.events]).await;
    assert_eq!(len, Value::Int(0));
    crate::harness::fixtures::buy(&store, &lib, "mem", "p00007", "r1", "u1", 2).await;
    let len = crate::harness::fixtures::redis_cmd(&store, &["XLEN", &k.events]).await;
    assert_eq!(len, Value::Int(1));
    let r = c.run(&["--json", "status", "mem"]);
    r.expect_code(0);
    let doc = r.json();
    let p = doc["products"]
        .as_array()
        .expect("products")
        .iter()
        .find(|p| p["product"] == "p00007")
        .expect("p00007 listed")
        .clone();
    assert_eq!(p["redis_remaining"], 1005, "{p}");
    assert_eq!(p["db_sold"], 2, "{p}");
    assert_eq!(p["state"], "ok", "{p}");
    lib.close().await;
}
