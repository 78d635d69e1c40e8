//! Concurrent writers and timing (issue 19): two consoles writing one product never oversell
//! and never lose a unit (the loser reports a conflict and audits nothing it did not do); a
//! top-up between its two writes is seen by every other console; the phase gates every write;
//! a re-import never rewrites a live sale's status or cuts a stock Redis sells; orders that
//! land late are never a lost deduction to return.

use crate::harness::cli::finish;
use crate::harness::fixtures::{buy, import, live_window, product_keys, redis_cmd};
use crate::harness::session::product;
use crate::harness::{Console, TestDb, Topo};
use chrono::{Duration as Ch, Utc};
use redis::Value;
use seckill_console::db::audit;
use seckill_console::domain::ActivityId;
use seckill_console::ops::fix::{FixOptions, fix};
use seckill_console::ops::snapshot::{Interleave, Stage};
use seckill_console::redis::stock::{Deducted, deduct};
use seckill_console::redis::{KeySpace, RedisStore};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

async fn get(store: &RedisStore, key: &str) -> Option<String> {
    match redis_cmd(store, &["GET", key]).await {
        Value::BulkString(b) => Some(String::from_utf8_lossy(&b).into_owned()),
        _ => None,
    }
}

async fn hget(store: &RedisStore, key: &str, field: &str) -> Option<String> {
    match redis_cmd(store, &["HGET", key, field]).await {
        Value::BulkString(b) => Some(String::from_utf8_lossy(&b).into_owned()),
        _ => None,
    }
}

/// Case 10: a top-up whose database write waits on a lock while a `fix --yes` runs. The fix
/// sees the top-up between its writes and writes nothing (exit 5); once the top-up lands,
/// Redis holds exactly the truth, for a cut and for a raise.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fix_never_corrects_across_a_top_up_between_its_writes() {
    let topo = Topo::standalone();
    let store = topo.store().await;
    let db = TestDb::sqlite();
    let lib = db.open().await;
    let c = Console::new(&topo, &db);
    let a = "op10";
    c.import_preheat(&lib, a, &[("p1", 100, 5)]).await;
    let k = product_keys(a, "p1");
    for i in 0..3 {
        buy(&store, &lib, a, "p1", &format!("r{i}"), &format!("u{i}"), 1).await;
    }
    for (add, redis_after, initial_after) in [("-20", "77", 80), ("30", "107", 110)] {
        // Another writer holds the database: the top-up's write waits on it.
        let mut blocker = lib.begin().await.expect("a write transaction");
        blocker
            .execute(
                "UPDATE seckill_activity SET name = name WHERE activity_id = ?",
                &[a.into()],
            )
            .await
            .expect("hold the lock");
        let top = c.spawn(&[
            "--json",
            "topup",
            a,
            "--product",
            "p1",
            "--add",
            add,
            "--yes",
        ]);
        // Wait for its first step in Redis: the marker.
        let mut marked = false;
        for _ in 0..100 {
            if hget(&store, &k.meta, "topup").await.is_some() {
                marked = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert!(marked, "the top-up never began");
        let before = get(&store, &k.stock).await;
        let f = c.run(&["--json", "fix", a, "--yes"]);
        f.expect_code(5);
        assert!(f.stdout.contains("top-up"), "{}", f.stdout);
        assert_eq!(
            get(&store, &k.stock).await,
            before,
            "the fix wrote across the top-up"
        );
        drop(blocker);
        let t = finish(top, Duration::from_secs(30));
        t.expect_code(0);
        assert_eq!(
            t.json()["redis_after"],
            redis_after.parse::<i64>().expect("n")
        );
        assert_eq!(get(&store, &k.stock).await.as_deref(), Some(redis_after));
        let r = c.reconcile(a);
        assert_eq!(product(&r, "p1")["initial"], initial_after, "{r}");
        assert_eq!(product(&r, "p1")["drift"], 0, "{r}");
    }
    lib.close().await;
}

/// Case 11: two `fix --yes` at once (the second runs between the first's reads and its
/// writes). One repairs; the other meets the first's write, reports a conflict and audits
/// nothing: the report lists the fix once, and the stock is right.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_fixes_at_once_repair_once_and_the_loser_audits_nothing() {
    for topo in Topo::both() {
        let store = topo.store().await;
        let db = TestDb::sqlite();
        let lib = db.open().await;
        let c = Console::new(&topo, &db);
        let a = "op11";
        c.import_preheat(&lib, a, &[("p1", 100, 5)]).await;
        let k = product_keys(a, "p1");
        buy(&store, &lib, a, "p1", "r1", "u1", 1).await;
        redis_cmd(&store, &["INCRBY", &k.stock, "7"]).await;
        let id = ActivityId::parse(a).expect("id");
        let opts = |interleave| FixOptions {
            product: None,
            preview: false,
            actor: "second".into(),
            grace: Duration::from_secs(60),
            confirmed: None,
            key_ttl_days: 7,
            interleave,
        };
        let ran = Arc::new(AtomicBool::new(false));
        let hook = {
            let (store, lib, id, ran) = (store.clone(), lib.clone(), id.clone(), ran.clone());
            let other = opts(Interleave::default());
            Interleave::new(move |stage| {
                let (store, lib, id, ran, other) = (
                    store.clone(),
                    lib.clone(),
                    id.clone(),
                    ran.clone(),
                    other.clone(),
                );
                Box::pin(async move {
                    if stage == Stage::BeforeWrite && !ran.swap(true, Ordering::SeqCst) {
                        let r = fix(&store, &lib, &KeySpace::default(), &id, &other)
                            .await
                            .expect("the other console's fix");
                        assert_eq!(r.failure, None, "{r:?}");
                    }
                })
            })
        };
        let mut first = opts(hook);
        first.actor = "first".into();
        let r = fix(&store, &lib, &KeySpace::default(), &id, &first)
            .await
            .expect("fix");
        assert!(ran.load(Ordering::SeqCst), "the other fix ran");
        assert_eq!(
            r.failure,
            Some(seckill_console::ErrorKind::Refused),
            "{}: the loser reports a conflict: {r:?}",
            c.label()
        );
        assert!(r.products.iter().all(|p| !p.applied), "{r:?}");
        assert_eq!(get(&store, &k.stock).await.as_deref(), Some("99"));
        let rows = audit::recent(&lib, None, 50).await.expect("audit");
        let fixes: Vec<_> = rows.iter().filter(|e| e.action == "fix").collect();
        assert_eq!(fixes.len(), 1, "{}: {rows:?}", c.label());
        assert_eq!(fixes[0].actor, "second");
        c.reconcile(a);
        lib.close().await;
    }
}

/// Case 12: a meta `rev` the scripts cannot read is no reason to write half: the fix checks
/// it before its first write and repairs the product whole (stock, rev, audit row).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_rev_never_makes_a_fix_write_half() {
    let topo = Topo::standalone();
    let store = topo.store().await;
    let db = TestDb::sqlite();
    let lib = db.open().await;
    let c = Console::new(&topo, &db);
    let a = "op12";
    c.import_preheat(&lib, a, &[("p1", 1000, 5)]).await;
    let k = product_keys(a, "p1");
    redis_cmd(&store, &["INCRBY", &k.stock, "7"]).await;
    redis_cmd(&store, &["HSET", &k.meta, "rev", "abc"]).await;
    let f = c.json(&["fix", a, "--yes"]);
    assert_eq!(product(&f, "p1")["applied"], true, "{f}");
    assert_eq!(get(&store, &k.stock).await.as_deref(), Some("1000"));
    let rev = hget(&store, &k.meta, "rev").await.unwrap_or_default();
    assert!(rev.parse::<i64>().is_ok(), "rev is an integer again: {rev}");
    let rows = audit::recent(&lib, None, 10).await.expect("audit");
    assert!(rows.iter().any(|e| e.action == "fix"), "{rows:?}");
    c.reconcile(a);
    lib.close().await;
}

/// Case 13: R1's order commits 0.3 s in the past and R2's expires 0.2 s in the past (its
/// stock never returned), while readers come seldom. The two changes cancel out in a sum;
/// they never do in the books: the fix leaves R1's deduction (its order is live) and returns
/// R2's (the real leak).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fix_returns_only_deductions_whose_own_order_is_dead_or_absent() {
    let topo = Topo::standalone();
    let store = topo.store().await;
    let db = TestDb::sqlite();
    let lib = db.open().await;
    let c = Console::new(&topo, &db).with("--grace-secs 1");
    let a = "op13";
    c.import_preheat(&lib, a, &[("p1", 100, 5)]).await;
    let k = product_keys(a, "p1");
    assert!(matches!(
        deduct(&store, &k, "R1", "u1", "1").await.expect("deduct"),
        Deducted::Remaining(_)
    ));
    buy(&store, &lib, a, "p1", "R2", "u2", 1).await;
    c.status(a);
    // Readers six seconds apart.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let now = Utc::now();
    let order = seckill_console::db::orders::NewOrder {
        order_id: "o-R1".into(),
        request_id: "R1".into(),
        activity_id: a.into(),
        product_id: "p1".into(),
        user_id: "u1".into(),
        quantity: 1,
        status: seckill_console::domain::order::OrderStatus::PendingPayment,
    };
    seckill_console::db::orders::insert_with_outbox(&lib, &[order])
        .await
        .expect("R1's order");
    let stamp = |ms| seckill_console::db::Arg::Time(now - Ch::milliseconds(ms));
    lib.execute(
        "UPDATE seckill_order SET created_at = ?, updated_at = ? WHERE request_id = 'R1'",
        &[stamp(300), stamp(300)],
    )
    .await
    .expect("R1 late");
    lib.execute(
        "UPDATE seckill_order SET status = 'expired', updated_at = ? WHERE request_id = 'R2'",
        &[stamp(200)],
    )
    .await
    .expect("R2 expired, its return lost");
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let f = c.json(&["fix", a, "--yes"]);
    let row = product(&f, "p1");
    assert_eq!(row["orphans"], serde_json::json!(["R2"]), "{f}");
    assert!(
        hget(&store, &k.ledger, "R1")
            .await
            .is_some_and(|e| e.starts_with("d|")),
        "R1's deduction stays"
    );
    assert!(
        hget(&store, &k.ledger, "R2")
            .await
            .is_some_and(|e| e.starts_with("r@")),
        "R2's deduction is returned"
    );
    c.reconcile(a);
    lib.close().await;
}

/// Case 15: the phase gates every write: a cancelled activity cannot be resumed, topped up or
/// preheated; an ended one cannot be topped up (neither side changes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_phase_gates_every_write() {
    let topo = Topo::standalone();
    let store = topo.store().await;
    let db = TestDb::sqlite();
    let lib = db.open().await;
    let c = Console::new(&topo, &db);
    let a = "op15";
    c.import_preheat(&lib, a, &[("p1", 100, 5)]).await;
    c.ok(&["pause", a, "--yes"]);
    lib.execute(
        "UPDATE seckill_activity SET status = 'cancelled' WHERE activity_id = ?",
        &[a.into()],
    )
    .await
    .expect("cancel");
    let k = product_keys(a, "p1");
    for args in [
        vec!["resume", a, "--yes"],
        vec!["topup", a, "--product", "p1", "--add", "5", "--yes"],
    ] {
        let r = c.run(&args);
        r.expect_code(5);
        assert!(r.stderr.contains("cancelled"), "{args:?}: {}", r.stderr);
    }
    assert_eq!(hget(&store, &k.meta, "paused").await.as_deref(), Some("1"));
    c.run(&["preheat", a]).expect_code(4);
    // Neither side changed: the refused top-up and preheat wrote nothing.
    let show = c.json(&["activity", "show", a]);
    assert_eq!(show["products"][0]["initial_stock"], 100, "{show}");
    assert_eq!(show["products"][0]["pause"]["paused"], true, "{show}");
    assert_eq!(get(&store, &k.stock).await.as_deref(), Some("100"));
    // An ended activity.
    let b = "op15b";
    let now = Utc::now();
    import(&lib, b, &[("p1", 100, 5)], live_window()).await;
    c.preheat(b);
    lib.execute(
        "UPDATE seckill_activity SET ends_at = ? WHERE activity_id = ?",
        &[
            seckill_console::db::Arg::Time(now - Ch::minutes(1)),
            b.into(),
        ],
    )
    .await
    .expect("end it");
    let r = c.run(&["topup", b, "--product", "p1", "--add", "5", "--yes"]);
    r.expect_code(5);
    assert!(r.stderr.contains("ended"), "{}", r.stderr);
    let show = c.json(&["activity", "show", b]);
    assert_eq!(show["products"][0]["initial_stock"], 100, "{show}");
    assert_eq!(
        get(&store, &product_keys(b, "p1").stock).await.as_deref(),
        Some("100")
    );
    lib.close().await;
}

/// Case 16 (the confirmation a TUI fix carries): a confirmed fix applies exactly the
/// products of the preview, each only while it still shows what the preview showed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirmed_fix_applies_only_what_the_preview_showed() {
    let topo = Topo::standalone();
    let store = topo.store().await;
    let db = TestDb::sqlite();
    let lib = db.open().await;
    let c = Console::new(&topo, &db);
    let a = "op16";
    let ps: Vec<(String, i64, i64)> = (0..5).map(|i| (format!("p{i}"), 100, 5)).collect();
    let ps: Vec<(&str, i64, i64)> = ps.iter().map(|(p, s, l)| (p.as_str(), *s, *l)).collect();
    c.import_preheat(&lib, a, &ps).await;
    for p in ["p0", "p1", "p2"] {
        redis_cmd(&store, &["INCRBY", &product_keys(a, p).stock, "3"]).await;
    }
    let id = ActivityId::parse(a).expect("id");
    let mut opts = FixOptions {
        product: None,
        preview: true,
        actor: "tui".into(),
        grace: Duration::from_secs(60),
        confirmed: None,
        key_ttl_days: 7,
        interleave: Interleave::default(),
    };
    let preview = fix(&store, &lib, &KeySpace::default(), &id, &opts)
        .await
        .expect("preview");
    assert_eq!(preview.products.len(), 3);
    // After the preview: two more products drift, and p2 changes.
    for (p, by) in [("p3", "4"), ("p4", "4"), ("p2", "1")] {
        redis_cmd(&store, &["INCRBY", &product_keys(a, p).stock, by]).await;
    }
    opts.preview = false;
    opts.confirmed = Some(preview.confirmation());
    let r = fix(&store, &lib, &KeySpace::default(), &id, &opts)
        .await
        .expect("fix");
    let applied: Vec<&str> = r
        .products
        .iter()
        .filter(|p| p.applied)
        .map(|p| p.product.as_str())
        .collect();
    assert_eq!(applied, vec!["p0", "p1"], "{r:?}");
    assert!(
        r.products.iter().any(|p| p.product == "p2" && p.conflict),
        "{r:?}"
    );
    assert_eq!(r.failure, Some(seckill_console::ErrorKind::Refused));
    for (p, want) in [
        ("p0", "100"),
        ("p1", "100"),
        ("p2", "104"),
        ("p3", "104"),
        ("p4", "104"),
    ] {
        assert_eq!(
            get(&store, &product_keys(a, p).stock).await.as_deref(),
            Some(want),
            "{p}"
        );
    }
    lib.close().await;
}

/// Case 17: re-importing the original file of a cancelled activity (no status in it) keeps it
/// cancelled; a file that says a status sets it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_re_import_keeps_the_status_the_file_does_not_give() {
    let topo = Topo::standalone();
    let db = TestDb::sqlite();
    let lib = db.open().await;
    let c = Console::new(&topo, &db);
    let dir = tempfile::tempdir().expect("tmp");
    let a = "op17";
    c.import_file_preheat(dir.path(), a, &[("p1", 100, 5)]);
    lib.execute(
        "UPDATE seckill_activity SET status = 'cancelled' WHERE activity_id = ?",
        &[a.into()],
    )
    .await
    .expect("cancel");
    let file = dir.path().join(format!("{a}.toml"));
    c.ok(&["activity", "import", file.to_str().expect("path")]);
    let show = c.json(&["activity", "show", a]);
    assert_eq!(show["status"], "cancelled", "{show}");
    let text = std::fs::read_to_string(&file).expect("file");
    let scheduled = text.replacen("[activity]\n", "[activity]\nstatus = \"scheduled\"\n", 1);
    std::fs::write(&file, scheduled).expect("write");
    c.ok(&["activity", "import", file.to_str().expect("path")]);
    let show = c.json(&["activity", "show", a]);
    assert_eq!(show["status"], "scheduled", "{show}");
    lib.close().await;
}
