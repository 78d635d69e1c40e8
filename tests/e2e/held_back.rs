//! Units held back by a repair (issue 52, items 4 to 6): after a restart from an older snapshot
//! a fix holds back what the stock would gain while orders of forgotten deductions may still
//! land; units a rebuild held back are claimed by their own orders; a product whose buyers and
//! ledger were lost with deductions in flight sells nothing until their orders had their window.

use crate::harness::fixtures::{buy, product_keys, redis_cmd};
use crate::harness::session::{alert_kinds, product};
use crate::harness::{Console, RedisServer, TestDb};
use redis::Value;
use seckill_console::db::Db;
use seckill_console::db::orders::{NewOrder, insert_with_outbox};
use seckill_console::domain::order::OrderStatus;
use seckill_console::redis::RedisStore;
use seckill_console::redis::stock::{Deducted, deduct};
use std::time::Duration;

async fn text(store: &RedisStore, args: &[&str]) -> Option<String> {
    match redis_cmd(store, args).await {
        Value::BulkString(b) => Some(String::from_utf8_lossy(&b).into_owned()),
        _ => None,
    }
}

/// The order of a deduction made earlier, landing now (its app server was slow).
async fn land(lib: &Db, a: &str, p: &str, request: &str, user: &str) {
    let order = NewOrder {
        order_id: format!("o-{request}"),
        request_id: request.into(),
        activity_id: a.into(),
        product_id: p.into(),
        user_id: user.into(),
        quantity: 1,
        status: OrderStatus::PendingPayment,
    };
    insert_with_outbox(lib, &[order]).await.expect("order");
}

/// A deduction whose order has not landed yet.
async fn in_flight(store: &RedisStore, a: &str, p: &str, request: &str, user: &str) {
    let r = deduct(store, &product_keys(a, p), request, user, "1")
        .await
        .expect("deduct");
    assert!(matches!(r, Deducted::Remaining(_)), "{r:?}");
}

/// Live units per buyer in the database.
async fn live_units(lib: &Db, a: &str) -> i64 {
    let rows: Vec<(i64,)> = lib
        .fetch_all_as(
            "SELECT quantity FROM seckill_order WHERE activity_id = ? \
             AND status IN ('pending_payment', 'paid')",
            &[a.into()],
        )
        .await
        .expect("orders");
    rows.iter().map(|(q,)| q).sum()
}

/// Item 5: a rebuild held back the unit of a deduction in flight (its ledger entry lost with
/// the ledger). Its order landed: the books counted it twice (a false critical `oversold`) and
/// `fix` took a second unit and raised the buyer's holding to 2 of a limit of 1, for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_unit_held_back_by_a_rebuild_is_claimed_by_its_own_order() {
    let server = RedisServer::start();
    let db = TestDb::sqlite();
    let c = Console::redis(&server.url(), &db.url).with("--grace-secs 600");
    c.ok(&["migrate"]);
    let store = crate::harness::fixtures::standalone(&server.url()).await;
    let lib = db.open().await;
    let a = "claim";
    c.import_preheat(&lib, a, &[("p1", 2, 1)]).await;
    let k = product_keys(a, "p1");
    buy(&store, &lib, a, "p1", "r2", "u2", 1).await;
    in_flight(&store, a, "p1", "r1", "u1").await;
    redis_cmd(&store, &["DEL", &k.ledger, &k.books]).await;
    let fixed = c.json(&["fix", a, "--yes"]);
    assert_eq!(product(&fixed, "p1")["plan"], "rebuild", "{fixed}");
    assert_eq!(
        text(&store, &["HGET", &k.meta, "unexplained"])
            .await
            .as_deref(),
        Some("1"),
        "the rebuild held back r1's unit"
    );
    land(&lib, a, "p1", "r1", "u1").await;
    let s = c.status(a);
    assert_ne!(product(&s, "p1")["state"], "oversold", "{s}");
    assert!(!alert_kinds(&s).contains(&"oversold".to_string()), "{s}");
    assert_eq!(product(&s, "p1")["unledgered"], 1, "{s}");
    c.ok(&["fix", a, "--yes"]);
    assert_eq!(text(&store, &["GET", &k.stock]).await.as_deref(), Some("0"));
    assert_eq!(
        text(&store, &["HGET", &k.buyers, "u1"]).await.as_deref(),
        Some("1"),
        "r1's order claimed its held unit, not a second one"
    );
    assert_eq!(
        text(&store, &["HGET", &k.meta, "unexplained"])
            .await
            .as_deref(),
        Some("0")
    );
    let r = c.reconcile(a);
    assert_eq!(r["totals"]["not_ok"], 0, "{r}");
    c.run(&["reconcile", a, "--fail-on-drift"]).expect_code(0);
    lib.close().await;
}

/// Item 6: the buyers hash and the ledger lost with a deduction in flight: its buyer was
/// rebuilt holding nothing and bought again past the limit. The rebuild holds the whole stock
/// back until that order had its window, says so, and the fix after it puts the stock back
/// with every limit whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_holdings_with_a_deduction_in_flight_hold_every_limit() {
    let server = RedisServer::start();
    let db = TestDb::sqlite();
    let c = Console::redis(&server.url(), &db.url).with("--grace-secs 3");
    c.ok(&["migrate"]);
    let store = crate::harness::fixtures::standalone(&server.url()).await;
    let lib = db.open().await;
    let a = "limits";
    c.import_preheat(&lib, a, &[("p1", 10, 1)]).await;
    let k = product_keys(a, "p1");
    buy(&store, &lib, a, "p1", "r2", "u2", 1).await;
    in_flight(&store, a, "p1", "r1", "u1").await;
    redis_cmd(&store, &["DEL", &k.buyers, &k.ledger, &k.books]).await;
    let fixed = c.json(&["fix", a, "--yes"]);
    let row = product(&fixed, "p1");
    assert_eq!(row["limits_held"], true, "{fixed}");
    assert_eq!(row["held_back"], 9, "{fixed}");
    let said = c.run(&["fix", a, "--preview"]);
    said.expect_code(0);
    // The buyer whose deduction was in flight cannot buy again; nobody can, for now.
    let again = deduct(&store, &k, "n1", "u1", "1").await.expect("deduct");
    assert!(
        !matches!(again, Deducted::Remaining(_)),
        "u1 bought past the limit: {again:?}"
    );
    land(&lib, a, "p1", "r1", "u1").await;
    tokio::time::sleep(Duration::from_millis(3500)).await;
    let fixed = c.json(&["fix", a, "--yes"]);
    assert_eq!(product(&fixed, "p1")["applied"], true, "{fixed}");
    assert_eq!(text(&store, &["GET", &k.stock]).await.as_deref(), Some("8"));
    assert_eq!(
        text(&store, &["HGET", &k.buyers, "u1"]).await.as_deref(),
        Some("1")
    );
    assert_eq!(
        deduct(&store, &k, "n2", "u1", "1").await.expect("deduct"),
        Deducted::UserLimit
    );
    assert_eq!(
        deduct(&store, &k, "n3", "u3", "1").await.expect("deduct"),
        Deducted::Remaining(7)
    );
    land(&lib, a, "p1", "n3", "u3").await;
    let r = c.reconcile(a);
    assert_eq!(r["totals"]["not_ok"], 0, "{r}");
    lib.close().await;
}

/// Item 4: Redis restarted from a snapshot older than a top-up and five sales, two of whose
/// orders were still on their way. The fix rebased the stock upward at once (the top-up) and
/// the late orders then found their units sold again: 16 live units of a 15-unit product. It
/// holds that back until their window has passed; the late orders claim it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fix_after_a_restart_from_an_older_snapshot_never_oversells() {
    let mut server = RedisServer::start();
    let db = TestDb::sqlite();
    let c = Console::redis(&server.url(), &db.url).with("--grace-secs 3");
    c.ok(&["migrate"]);
    let lib = db.open().await;
    let a = "older";
    c.import_preheat(&lib, a, &[("p1", 10, 5)]).await;
    let k = product_keys(a, "p1");
    // A rebuild before the snapshot (its ledger lost, its buyers hash there) leaves the meta
    // field `unexplained_held` at 1.
    {
        let store = crate::harness::fixtures::standalone(&server.url()).await;
        redis_cmd(&store, &["DEL", &k.ledger]).await;
        c.ok(&["fix", a, "--yes"]);
        assert_eq!(
            text(&store, &["HGET", &k.meta, "unexplained_held"])
                .await
                .as_deref(),
            Some("1")
        );
    }
    server.cli(&["SAVE"]);
    c.ok(&["topup", a, "--product", "p1", "--add", "5", "--yes"]);
    {
        let store = crate::harness::fixtures::standalone(&server.url()).await;
        for i in 0..3 {
            buy(&store, &lib, a, "p1", &format!("s{i}"), &format!("u{i}"), 1).await;
        }
        in_flight(&store, a, "p1", "late1", "v1").await;
        in_flight(&store, a, "p1", "late2", "v2").await;
    }
    // The restart loads the snapshot: stock 10, no sale.
    server.kill9();
    server.restart();
    let store = crate::harness::fixtures::standalone(&server.url()).await;
    assert_eq!(
        text(&store, &["GET", &k.stock]).await.as_deref(),
        Some("10")
    );
    let fixed = c.json(&["fix", a, "--yes"]);
    let row = product(&fixed, "p1");
    assert_eq!(row["sales_recorded"], 3, "{fixed}");
    assert_eq!(row["held_back"], 5, "{fixed}");
    assert_eq!(text(&store, &["GET", &k.stock]).await.as_deref(), Some("7"));
    // Buyers take every unit on sale.
    let mut sold = 0;
    for i in 0..20 {
        let r = buy(&store, &lib, a, "p1", &format!("b{i}"), &format!("w{i}"), 1).await;
        if matches!(r, Deducted::Remaining(_)) {
            sold += 1;
        }
    }
    assert_eq!(sold, 7, "only what the truth leaves sells");
    // The late orders land, and a fix records them against what was held for them.
    land(&lib, a, "p1", "late1", "v1").await;
    land(&lib, a, "p1", "late2", "v2").await;
    assert!(live_units(&lib, a).await <= 15, "oversold");
    c.ok(&["fix", a, "--yes"]);
    assert_eq!(text(&store, &["GET", &k.stock]).await.as_deref(), Some("0"));
    // Their buyers' holdings went with the snapshot: recorded now, each counts again (a
    // product once rebuilt carries `unexplained_held`, which took the held units for holdings
    // too and left them at 0: a buyer at the limit could buy again; 5,000-case hunt,
    // invariant 5).
    for user in ["v1", "v2"] {
        assert_eq!(
            text(&store, &["HGET", &k.buyers, user]).await.as_deref(),
            Some("1"),
            "{user}'s holding"
        );
    }
    let s = c.status(a);
    assert!(!alert_kinds(&s).contains(&"oversold".to_string()), "{s}");
    assert!(!alert_kinds(&s).contains(&"negative".to_string()), "{s}");
    // Once the window has passed, what no order claimed goes back on sale.
    tokio::time::sleep(Duration::from_millis(3500)).await;
    c.ok(&["fix", a, "--yes"]);
    assert_eq!(live_units(&lib, a).await, 12);
    assert_eq!(text(&store, &["GET", &k.stock]).await.as_deref(), Some("3"));
    let r = c.reconcile(a);
    assert_eq!(r["totals"]["not_ok"], 0, "{r}");
    lib.close().await;
}
