//! An activity's keys through their life: lost and preheated again (the holdings come back with
//! the stock), and cancelled (nothing sells, cleanup may delete the keys). On standalone and
//! cluster, SQLite and PostgreSQL.

use crate::harness::fixtures::{buy, import, live_window, product_keys, redis_cmd};
use crate::harness::{Console, TestDb, Topo};
use redis::Value;
use seckill_console::redis::stock::{Deducted, deduct};

async fn text(store: &seckill_console::redis::RedisStore, args: &[&str]) -> Option<String> {
    match redis_cmd(store, args).await {
        Value::BulkString(b) => Some(String::from_utf8_lossy(&b).into_owned()),
        Value::SimpleString(s) => Some(s),
        Value::Int(n) => Some(n.to_string()),
        _ => None,
    }
}

/// Keys lost (cleanup --force, or a Redis restarted empty) and preheated again: a buyer who
/// already holds the limit cannot buy more, and the books balance.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_preheat_after_key_loss_brings_back_what_each_buyer_holds() {
    for topo in Topo::both() {
        let store = topo.store().await;
        for db in TestDb::sqlite_and_postgres().await {
            let c = Console::new(&topo, &db);
            let label = c.label();
            let lib = db.open().await;
            let a = format!("loss{}", db.name());
            c.import_preheat(&lib, &a, &[("p1", 10, 2)]).await;
            let r = buy(&store, &lib, &a, "p1", "r1", "u1", 2).await;
            assert_eq!(r, Deducted::Remaining(8), "{label}");
            buy(&store, &lib, &a, "p1", "r2", "u2", 1).await;

            c.ok(&["cleanup", &a, "--force"]);
            let k = product_keys(&a, "p1");
            assert_eq!(text(&store, &["GET", &k.stock]).await, None, "{label}");

            let p = c.ok(&["--json", "preheat", &a]);
            assert_eq!(p.json()["decision"], "go", "{label}: {}", p.all_output());
            assert_eq!(
                text(&store, &["GET", &k.stock]).await.as_deref(),
                Some("7"),
                "{label}"
            );
            assert_eq!(
                text(&store, &["HGET", &k.buyers, "u1"]).await.as_deref(),
                Some("2"),
                "{label}: the holding of u1 was not brought back"
            );
            let again = buy(&store, &lib, &a, "p1", "r3", "u1", 1).await;
            assert_eq!(again, Deducted::UserLimit, "{label}");
            // A retry of a request made before the loss is answered as a success (the rebuilt
            // entry cannot know the first reply's remaining stock), and sells nothing again.
            let retry = deduct(&store, &k, "r2", "u2", "1").await.expect("retry");
            assert!(
                matches!(retry, Deducted::Remaining(_)),
                "{label}: {retry:?}"
            );
            assert_eq!(
                text(&store, &["GET", &k.stock]).await.as_deref(),
                Some("7"),
                "{label}"
            );
            let doc = c.reconcile(&a);
            let p1 = &doc["products"][0];
            assert_eq!(p1["state"], "ok", "{label}: {p1}");
            assert_eq!(p1["drift"], 0, "{label}: {p1}");
        }
    }
}

/// A cancelled activity: status says so and alerts while its stock is still in Redis (where
/// the script would sell it), load and fix refuse it, cleanup deletes its keys without --force
/// inside the window, and then status has nothing to alert about.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_activity_sells_nothing_and_can_be_cleaned_up() {
    for topo in Topo::both() {
        let store = topo.store().await;
        for db in TestDb::sqlite_and_postgres().await {
            let c = Console::new(&topo, &db);
            let label = c.label();
            let lib = db.open().await;
            let a = format!("cxl{}", db.name());
            c.import_preheat(&lib, &a, &[("p1", 10, 2), ("p2", 5, 1)])
                .await;
            buy(&store, &lib, &a, "p1", "r1", "u1", 1).await;
            lib.execute(
                "UPDATE seckill_activity SET status = 'cancelled' WHERE activity_id = ?",
                &[a.as_str().into()],
            )
            .await
            .expect("cancel");

            let doc = c.status(&a);
            assert_eq!(doc["phase"], "cancelled", "{label}: {doc}");
            // Its stock on sale is what is wrong with it: not ok, and --fail-on-drift fails.
            assert_eq!(doc["totals"]["not_ok"], 2, "{label}: {doc}");
            c.run(&["reconcile", &a, "--fail-on-drift"]).expect_code(4);
            // A fix's preview has nothing to write and says what is wrong, never "every
            // product is ok".
            let preview = c.json(&["fix", &a, "--preview"]);
            let left = preview["left"].as_array().cloned().unwrap_or_default();
            assert_eq!(left.len(), 2, "{label}: {preview}");
            assert!(
                left.iter()
                    .all(|l| l["why"].as_str().is_some_and(|w| w.contains("cleanup"))),
                "{label}: {preview}"
            );
            let alerts = doc["alerts"].as_array().cloned().unwrap_or_default();
            assert!(
                alerts
                    .iter()
                    .any(|x| x["kind"] == "cancelled_on_sale" && x["severity"] == "critical"),
                "{label}: {doc}"
            );
            let listed = c.run(&["--json", "activity", "show", &a]).json();
            assert_eq!(listed["phase"], "cancelled", "{label}");

            let k = product_keys(&a, "p1");
            let l = c.run(format!("--json load {a} --yes --buyers 5 --concurrency 2"));
            l.expect_code(5);
            assert!(
                l.json_error()["error"]
                    .as_str()
                    .is_some_and(|e| e.contains("cancelled")),
                "{label}: {}",
                l.all_output()
            );
            assert_eq!(
                text(&store, &["GET", &k.stock]).await.as_deref(),
                Some("9"),
                "{label}: load sold a cancelled activity"
            );
            redis_cmd(&store, &["SET", &k.stock, "3"]).await;
            c.run(&["fix", &a, "--yes"]).expect_code(5);
            assert_eq!(
                text(&store, &["GET", &k.stock]).await.as_deref(),
                Some("3"),
                "{label}: fix wrote the stock of a cancelled activity"
            );

            // Inside its window, and still no --force needed.
            c.ok(&["cleanup", &a]);
            assert_eq!(text(&store, &["GET", &k.stock]).await, None, "{label}");
            let doc = c.status(&a);
            assert_eq!(doc["alerts"], serde_json::json!([]), "{label}");
            // Its keys gone is what a cancelled activity wants: nothing is not ok.
            assert_eq!(doc["totals"]["not_ok"], 0, "{label}: {doc}");
            c.run(&["reconcile", &a, "--fail-on-drift"]).expect_code(0);
        }
    }
}

/// A compensation entry whose `created_at` another service wrote in a form no decoder reads
/// (SQLite's TEXT column takes any text): the queue still lists and resolves, the entry shown
/// as the oldest with an unknown age (one such row made `compensation list` and `resolve --all`
/// exit 1 for the whole queue).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_entry_time_never_hides_the_queue() {
    let topo = Topo::standalone();
    let db = TestDb::sqlite();
    let lib = db.open().await;
    let c = Console::new(&topo, &db);
    c.import_preheat(&lib, "odd", &[("p1", 10, 2)]).await;
    lib.execute(
        "INSERT INTO seckill_compensation (request_id, activity_id, product_id, user_id, \
         quantity, status, reason, created_at) VALUES \
         ('r-odd', 'odd', 'p1', 'u1', 1, 'pending', '', 'yesterday-ish')",
        &[],
    )
    .await
    .expect("insert");
    let list = c.run(&["compensation", "list", "odd"]);
    list.expect_code(0);
    assert!(
        list.stdout.contains("r-odd") && list.stdout.contains("unknown (oldest)"),
        "{}",
        list.stdout
    );
    c.run(&["--json", "compensation", "list", "odd"])
        .expect_code(0);
    // The views that summarise the queue read it too: the entry is the oldest there is.
    let st = c.status("odd");
    assert_eq!(st["compensation"]["pending"], 1, "{st}");
    assert!(
        st["compensation"]["oldest_secs"]
            .as_i64()
            .is_some_and(|s| s > 1_000_000_000),
        "{st}"
    );
    let resolved = c.run(&["--json", "compensation", "resolve", "odd", "--all"]);
    resolved.expect_code(0);
    assert_eq!(resolved.json()["resolved"], 1, "{}", resolved.stdout);
    lib.close().await;
}

/// A small stock over a long window: the gateway's token-bucket rate is stored as it is (five
/// units over thirty days, with the 20% headroom, is about 2.3e-6 a second), never rounded to
/// 0, which would let no request through.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_stock_over_a_long_window_keeps_its_bucket_rate() {
    let topo = Topo::standalone();
    let store = topo.store().await;
    let db = TestDb::sqlite();
    let lib = db.open().await;
    let start = chrono::Utc::now() + chrono::Duration::days(1);
    let end = start + chrono::Duration::days(30);
    import(&lib, "slow", &[("p1", 5, 1)], (start, end)).await;
    Console::new(&topo, &db).preheat("slow");
    let k = product_keys("slow", "p1");
    let stored = text(&store, &["HGET", &k.meta, "bucket_rate"])
        .await
        .expect("bucket_rate");
    let rate: f64 = stored.parse().expect("a number");
    let wanted = 5.0 / (30.0 * 86_400.0) * 1.2;
    // Five significant digits (a gateway needs no more; see `domain::preheat`).
    assert!(
        rate > 0.0 && (rate - wanted).abs() < wanted * 1e-4,
        "bucket_rate {stored}, wanted about {wanted}"
    );
}

/// With no `$USER`, `$LOGNAME` or `$USERNAME` (a cron job, a systemd unit) the audit trail
/// still names who wrote: the name of the process's uid, not "unknown".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_audit_names_the_uid_when_no_user_variable_is_set() {
    let topo = Topo::standalone();
    let db = TestDb::sqlite();
    let lib = db.open().await;
    import(&lib, "who", &[("p1", 5, 1)], live_window()).await;
    let who = std::process::Command::new("id")
        .arg("-un")
        .output()
        .expect("id -un");
    let who = String::from_utf8_lossy(&who.stdout).trim().to_string();
    let mut cmd = std::process::Command::new(crate::harness::cli::binary());
    cmd.args(Console::new(&topo, &db).args("preheat who"))
        .stdin(std::process::Stdio::null());
    for (k, _) in std::env::vars() {
        if k.starts_with("SECKILL_") || ["USER", "LOGNAME", "USERNAME"].contains(&k.as_str()) {
            cmd.env_remove(&k);
        }
    }
    let out = cmd.output().expect("run");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let a = seckill_console::domain::ActivityId::parse("who").expect("id");
    let audit = seckill_console::db::audit::recent(&lib, Some(&a), 5)
        .await
        .expect("audit");
    let preheat: Vec<_> = audit
        .iter()
        .filter(|e| e.action.starts_with("preheat"))
        .collect();
    assert!(!preheat.is_empty(), "{audit:?}");
    for e in preheat {
        assert_eq!(e.actor, who, "{e:?}");
    }
}

/// PostgreSQL holds times chrono cannot: `infinity` (an activity that never ends),
/// `-infinity`, years past 262,143. sqlx's decoder panicked on them; the console reads them as
/// the last or first instant it knows: an activity from `-infinity` to `infinity` is live, its
/// stock reads `ok`, a preheat of it is a go, and a compensation entry stamped `-infinity` is
/// the oldest there is.
#[tokio::test]
async fn postgres_times_at_infinity_are_read_as_the_edges_of_time() {
    let topo = Topo::standalone();
    let db = TestDb::require_postgres().await;
    let c = Console::new(&topo, &db);
    let lib = db.open().await;
    c.import_preheat(&lib, "forever", &[("p1", 10, 2)]).await;
    lib.execute(
        "UPDATE seckill_activity SET starts_at = '-infinity', ends_at = 'infinity' \
         WHERE activity_id = ?",
        &["forever".into()],
    )
    .await
    .expect("update the window");
    lib.execute(
        "INSERT INTO seckill_compensation (request_id, activity_id, product_id, user_id, \
         quantity, status, created_at) VALUES ('r-edge', 'forever', 'p1', 'u1', 1, 'pending', \
         '-infinity')",
        &[],
    )
    .await
    .expect("insert a compensation entry");

    let listed = c.run(&["--json", "activity", "list"]);
    listed.expect_code(0);
    assert!(
        listed.stdout.contains("\"forever\""),
        "activity list: {}",
        listed.all_output()
    );
    let shown = c.run(&["--json", "activity", "show", "forever"]);
    shown.expect_code(0);
    assert_eq!(shown.json()["phase"], "live", "{}", shown.stdout);
    let status = c.run(&["--json", "status", "forever"]);
    status.expect_code(0);
    let doc = status.json();
    assert_eq!(doc["products"][0]["state"], "ok", "{doc}");
    // The entry stamped `-infinity` is the oldest there is: hundreds of thousands of years.
    let oldest = doc["alerts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|a| a["age_secs"].as_i64())
        .max();
    assert!(
        oldest.is_some_and(|age| age > 1_000_000_000_000),
        "{}",
        doc["alerts"]
    );
    c.run(&["--json", "reconcile", "forever"]).expect_code(0);
    let queue = c.run(&["--json", "compensation", "list", "forever"]);
    queue.expect_code(0);
    assert!(queue.stdout.contains("r-edge"), "{}", queue.all_output());
    let again = c.run(&["--json", "preheat", "forever"]);
    again.expect_code(0);
    assert_eq!(again.json()["decision"], "go", "{}", again.all_output());
    lib.close().await;
}
