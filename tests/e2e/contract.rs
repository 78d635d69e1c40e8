//! The app servers' contract (docs/app-servers.md, issue 51): the scripts refuse what
//! oversells (a returned request, ids past the columns, a sale outside the window), the console
//! names what an app server did wrong (a request id on two products, an order that does not copy
//! its deduction, an order of a returned request) and repairs what it can, and `conform` checks
//! a sale rule by rule.

use crate::harness::fixtures::{
    activity_toml, buy, future_window, import, live_window, product_keys, redis_cmd, write_file,
};
use crate::harness::session::alert_kinds;
use crate::harness::{Console, TestDb, Topo, product};
use chrono::{Duration, Utc};
use seckill_console::db::compensation::{NewCompensation, insert};
use seckill_console::db::orders::{self, NewOrder, insert_with_outbox};
use seckill_console::domain::order::OrderStatus;
use seckill_console::redis::stock::{Deducted, Restored, deduct, restore};
use serde_json::Value as Json;

fn order(activity: &str, product: &str, request: &str, user: &str, quantity: i64) -> NewOrder {
    NewOrder {
        order_id: format!("o-{request}"),
        request_id: request.into(),
        activity_id: activity.into(),
        product_id: product.into(),
        user_id: user.into(),
        quantity,
        status: OrderStatus::PendingPayment,
    }
}

/// The alert of `kind` on `product`, if raised.
fn alert<'a>(doc: &'a Json, kind: &str, product: &str) -> Option<&'a Json> {
    doc["alerts"]
        .as_array()?
        .iter()
        .find(|a| a["kind"] == kind && a["product"] == product)
}

fn stock(doc: &Json, p: &str) -> Json {
    product(doc, p)["redis_remaining"].clone()
}

/// Defect 1: a retry after its units went back replayed "sold", and the shop wrote an order
/// for units already on sale again. It answers -7 now, whichever way the units went back.
#[tokio::test]
async fn a_retry_after_a_return_is_refused_not_replayed() {
    let topo = Topo::standalone();
    let store = topo.store().await;
    let db = TestDb::sqlite();
    let lib = db.open().await;
    let c = Console::new(&topo, &db).with("--grace-secs 1");
    c.import_preheat(&lib, "ret", &[("p1", 2, 2)]).await;
    let k = product_keys("ret", "p1");

    // An order that expired, then its return: the retry of its request sells nothing.
    assert_eq!(
        buy(&store, &lib, "ret", "p1", "r1", "u1", 1).await,
        Deducted::Remaining(1)
    );
    assert!(orders::expire(&lib, "r1").await.expect("expire"));
    assert_eq!(
        restore(&store, &k, "r1").await.expect("restore"),
        Restored::Returned(1)
    );
    let retry = deduct(&store, &k, "r1", "u1", "1").await.expect("retry");
    assert_eq!(retry, Deducted::Returned);

    // A deduction whose reply was lost: the app server writes its compensation entry, the
    // console returns it once past the grace window, and the buyer's retry is refused.
    assert_eq!(
        deduct(&store, &k, "r2", "u2", "1").await.expect("lost"),
        Deducted::Remaining(1)
    );
    let entry = NewCompensation {
        request_id: "r2".into(),
        activity_id: "ret".into(),
        product_id: "p1".into(),
        user_id: "u2".into(),
        quantity: 1,
        reason: "timeout".into(),
    };
    insert(&lib, &entry).await.expect("entry");
    tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
    let r = c.json(&["compensation", "resolve", "ret", "--all"]);
    assert_eq!(r["resolutions"][0]["status"], "returned", "{r}");
    assert_eq!(
        deduct(&store, &k, "r2", "u2", "1").await.expect("retry"),
        Deducted::Returned
    );
    // Both units are on sale, once each; nothing was taken by the refused retries.
    let doc = c.status("ret");
    assert_eq!(stock(&doc, "p1"), 2, "{doc}");
    assert_eq!(product(&doc, "p1")["state"], "ok");
    let buyers = redis_cmd(&store, &["HGET", &k.buyers, "u1"]).await;
    assert_eq!(buyers, redis::Value::Nil, "u1 holds nothing");
    lib.close().await;
}

/// Defect 2: a request id used on two products has one order; `fix` looked orders up by
/// request id alone, could never return the other product's deduction and exited 5 every
/// time blaming other writers. `compensation resolve` would have called its entry applied.
#[tokio::test]
async fn a_request_id_on_two_products_is_named_and_its_orphan_returned() {
    let topo = Topo::standalone();
    let store = topo.store().await;
    for db in TestDb::sqlite_and_postgres().await {
        let lib = db.open().await;
        let c = Console::new(&topo, &db).with("--grace-secs 1");
        let a = format!("two{}", db.name());
        c.import_preheat(&lib, &a, &[("p1", 5, 2), ("p2", 5, 2)])
            .await;
        // The order of `twice` is p1's; p2 deducted the same id and has none.
        buy(&store, &lib, &a, "p1", "twice", "u1", 1).await;
        let k2 = product_keys(&a, "p2");
        deduct(&store, &k2, "twice", "u1", "1").await.expect("p2");
        let entry = NewCompensation {
            request_id: "twice".into(),
            activity_id: a.clone(),
            product_id: "p2".into(),
            user_id: "u1".into(),
            quantity: 1,
            reason: "timeout".into(),
        };
        insert(&lib, &entry).await.expect("entry");
        tokio::time::sleep(std::time::Duration::from_millis(1200)).await;

        let doc = c.status(&a);
        let reused = alert(&doc, "request_reused", "p2").unwrap_or_else(|| panic!("{doc}"));
        assert!(
            reused["message"].as_str().unwrap_or("").contains("twice"),
            "{reused}"
        );
        assert_eq!(product(&doc, "p2")["orphaned"], 1);
        assert_eq!(
            product(&doc, "p2")["faults"]["request_reused"]["examples"][0]["request_id"],
            "twice"
        );
        assert_eq!(product(&doc, "p1")["state"], "ok", "{doc}");

        // The queue's entry is p2's: the order of p1 does not make it applied.
        let r = c.json(&["compensation", "resolve", &a, "--all"]);
        assert_eq!(
            r["resolutions"][0]["status"],
            "returned",
            "{}: {r}",
            c.label()
        );
        // Another entry, returned by fix this time.
        deduct(&store, &k2, "again", "u2", "1").await.expect("p2");
        buy(&store, &lib, &a, "p1", "again", "u2", 1).await;
        tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
        let f = c.run(&["--json", "fix", &a, "--yes"]);
        f.expect_code(0);
        let fixed = f.json();
        assert_eq!(product(&fixed, "p2")["orphans_returned"], 1, "{fixed}");
        let doc = c.reconcile(&a);
        assert_eq!(stock(&doc, "p2"), 5, "{doc}");
        assert!(!alert_kinds(&doc).contains(&"request_reused".to_string()));
        lib.close().await;
    }
}

/// Defect 3: an order whose quantity or product is not its deduction's showed as `corrupt`
/// with a false `stream_gap`, and every `fix --yes` rebuilt, bumped `rev` and exited 5.
#[tokio::test]
async fn an_order_that_does_not_copy_its_deduction_is_a_mismatch_fix_leaves_and_names() {
    let topo = Topo::standalone();
    let store = topo.store().await;
    let db = TestDb::sqlite();
    let lib = db.open().await;
    let c = Console::new(&topo, &db).with("--grace-secs 1");
    c.import_preheat(&lib, "mis", &[("p1", 10, 5), ("p2", 10, 5)])
        .await;
    let k1 = product_keys("mis", "p1");
    // Deducted 1, ordered 2.
    deduct(&store, &k1, "more", "u1", "1")
        .await
        .expect("deduct");
    insert_with_outbox(&lib, &[order("mis", "p1", "more", "u1", 2)])
        .await
        .expect("order");
    let doc = c.status("mis");
    let p1 = product(&doc, "p1");
    assert_eq!(p1["state"], "drift", "{doc}");
    assert_eq!(
        p1["drift"], 1,
        "one unit sold that Redis did not take: {doc}"
    );
    assert_eq!(p1["stream_gap"], false);
    assert!(p1.get("corrupt_value").is_none(), "{p1}");
    let m = alert(&doc, "order_mismatch", "p1").unwrap_or_else(|| panic!("{doc}"));
    assert_eq!(m["severity"], "critical");
    assert!(m["message"].as_str().unwrap_or("").contains("more"), "{m}");
    assert!(!alert_kinds(&doc).contains(&"corrupt".to_string()), "{doc}");
    assert!(
        !alert_kinds(&doc).contains(&"stream_gap".to_string()),
        "{doc}"
    );

    let rev_before = redis_cmd(&store, &["HGET", &k1.meta, "rev"]).await;
    let f = c.run(&["--json", "fix", "mis", "--yes"]);
    f.expect_code(0);
    let fixed = f.json();
    let left = fixed["left"].to_string();
    assert!(
        left.contains("more") && left.contains("do not copy"),
        "{fixed}"
    );
    assert_eq!(
        redis_cmd(&store, &["HGET", &k1.meta, "rev"]).await,
        rev_before,
        "nothing rebuilt"
    );

    // An order for another product than its deduction: p1's deduction goes back, p2 records
    // the sale its order says.
    deduct(&store, &k1, "moved", "u2", "1")
        .await
        .expect("deduct");
    insert_with_outbox(&lib, &[order("mis", "p2", "moved", "u2", 1)])
        .await
        .expect("order");
    tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
    let doc = c.status("mis");
    let m = alert(&doc, "order_mismatch", "p1").unwrap_or_else(|| panic!("{doc}"));
    assert!(
        m["message"].as_str().unwrap_or("").contains("p2"),
        "names the order's product: {m}"
    );
    c.ok(&["fix", "mis", "--yes"]);
    let doc = c.status("mis");
    assert_eq!(product(&doc, "p2")["state"], "ok", "{doc}");
    assert_eq!(stock(&doc, "p2"), 9);
    // p1 keeps only the quantity mismatch of `more`.
    assert_eq!(product(&doc, "p1")["drift"], 1, "{doc}");

    // The shop corrects the order: the product is whole again, with no write.
    lib.execute(
        "UPDATE seckill_order SET quantity = 1, updated_at = ? WHERE request_id = 'more'",
        &[seckill_console::db::Arg::Time(Utc::now())],
    )
    .await
    .expect("correct the order");
    let doc = c.reconcile("mis");
    assert_eq!(product(&doc, "p1")["state"], "ok", "{doc}");
    lib.close().await;
}

/// Defect 4: the sale window was enforced nowhere: a preheated activity sold before it opened
/// and after it ended, every product `ok`.
#[tokio::test]
async fn the_sale_window_is_enforced_moved_by_import_and_kept_by_fix() {
    let topo = Topo::standalone();
    let store = topo.store().await;
    let db = TestDb::sqlite();
    let lib = db.open().await;
    let dir = tempfile::tempdir().expect("dir");
    let c = Console::new(&topo, &db);
    let file = |(s, e)| {
        write_file(
            dir.path(),
            "win.toml",
            &activity_toml("win", &[("p1", 10, 2)], s, e),
        )
    };
    let path = file(future_window());
    c.ok(&["activity", "import", path.to_str().expect("path")]);
    c.preheat("win");
    let k = product_keys("win", "p1");
    assert_eq!(
        deduct(&store, &k, "early", "u1", "1")
            .await
            .expect("deduct"),
        Deducted::OutsideWindow
    );
    // Opened early by a re-import: every preheated product takes the new window.
    let path = file(live_window());
    let r = c.json(&["activity", "import", path.to_str().expect("path")]);
    assert_eq!(r["window"]["written"], 1, "{r}");
    assert_eq!(
        deduct(&store, &k, "now", "u1", "1").await.expect("deduct"),
        Deducted::Remaining(9)
    );
    // Ended.
    let now = Utc::now();
    let path = file((now - Duration::hours(2), now - Duration::minutes(1)));
    c.ok(&["activity", "import", path.to_str().expect("path")]);
    assert_eq!(
        deduct(&store, &k, "late", "u2", "1").await.expect("deduct"),
        Deducted::OutsideWindow
    );
    // A retry of the sale made in the window still answers its result.
    assert_eq!(
        deduct(&store, &k, "now", "u1", "1").await.expect("retry"),
        Deducted::Remaining(9)
    );

    // A meta hash without the window (a product preheated by an older console) is named and
    // fix writes it; a sale it let through is named too.
    let path = file(live_window());
    c.ok(&["activity", "import", path.to_str().expect("path")]);
    redis_cmd(&store, &["HDEL", &k.meta, "opens", "closes"]).await;
    let doc = c.run(&["--json", "status", "win"]).json();
    // One alert per window Redis holds, naming the product (many products with the same
    // window, as after an upgrade mid-sale, share one alert).
    let none = alert(&doc, "window_mismatch", "p1").unwrap_or_else(|| panic!("{doc}"));
    assert!(
        none["message"]
            .as_str()
            .unwrap_or("")
            .contains("no sale window"),
        "{none}"
    );
    buy(&store, &lib, "win", "p1", "unchecked", "u3", 1).await;
    // The window moves to tomorrow: that sale was outside it.
    let path = file(future_window());
    let r = c.json(&["activity", "import", path.to_str().expect("path")]);
    assert_eq!(r["window"]["written"], 1, "{r}");
    let doc = c.run(&["--json", "status", "win"]).json();
    let o = alert(&doc, "outside_window", "p1").unwrap_or_else(|| panic!("{doc}"));
    assert!(
        o["message"].as_str().unwrap_or("").contains("unchecked"),
        "{o}"
    );
    redis_cmd(&store, &["HDEL", &k.meta, "closes"]).await;
    let doc = c.run(&["--json", "status", "win"]).json();
    assert!(alert(&doc, "window_mismatch", "p1").is_some(), "{doc}");
    c.ok(&["fix", "win", "--yes", "--product", "p1"]);
    let closes = redis_cmd(&store, &["HGET", &k.meta, "closes"]).await;
    assert_ne!(closes, redis::Value::Nil, "fix wrote the window back");
    lib.close().await;
}

/// Defect 5: `restore.lua` answered -6 ("not in the ledger") when the ledger itself was gone,
/// where `deduct.lua` answers -1 for the same loss.
#[tokio::test]
async fn a_lost_ledger_is_minus_one_in_every_script() {
    let topo = Topo::standalone();
    let store = topo.store().await;
    let db = TestDb::sqlite();
    let lib = db.open().await;
    let c = Console::new(&topo, &db);
    c.import_preheat(&lib, "led", &[("p1", 10, 2)]).await;
    let k = product_keys("led", "p1");
    buy(&store, &lib, "led", "p1", "r1", "u1", 1).await;
    assert_eq!(
        restore(&store, &k, "nobody").await.expect("restore"),
        Restored::Unknown,
        "a whole ledger without the request: -6"
    );
    redis_cmd(&store, &["DEL", &k.ledger]).await;
    assert_eq!(
        restore(&store, &k, "r1").await.expect("restore"),
        Restored::Missing
    );
    assert_eq!(
        deduct(&store, &k, "r2", "u2", "1").await.expect("deduct"),
        Deducted::Missing
    );
    lib.close().await;
}

/// Defect 6: ids longer than the order table's columns (128) were deducted, then the order
/// insert failed on PostgreSQL and MySQL: an orphan made by the contract itself.
#[tokio::test]
async fn ids_longer_than_the_columns_are_refused_before_any_write() {
    let topo = Topo::standalone();
    let store = topo.store().await;
    for db in TestDb::all().await {
        let lib = db.open().await;
        let c = Console::new(&topo, &db);
        let a = format!("ids{}", db.name());
        c.import_preheat(&lib, &a, &[("p1", 10, 2)]).await;
        let k = product_keys(&a, "p1");
        let long = "r".repeat(129);
        assert_eq!(
            deduct(&store, &k, &long, "u1", "1").await.expect("deduct"),
            Deducted::BadArgs
        );
        assert_eq!(
            deduct(&store, &k, "r1", &"u".repeat(129), "1")
                .await
                .expect("deduct"),
            Deducted::BadArgs
        );
        // A return looks any id up: a deduction made before the scripts refused long ids
        // must still go back.
        assert_eq!(
            restore(&store, &k, &long).await.expect("restore"),
            Restored::Unknown
        );
        // 128 bytes fit: the sale and its order both land on every backend.
        let (fits, user) = ("r".repeat(128), "u".repeat(128));
        assert_eq!(
            deduct(&store, &k, &fits, &user, "1").await.expect("deduct"),
            Deducted::Remaining(9),
            "{}",
            c.label()
        );
        let mut o = order(&a, "p1", &fits, &user, 1);
        o.order_id = "o-long".into();
        insert_with_outbox(&lib, &[o])
            .await
            .expect("an order of the longest ids");
        let doc = c.reconcile(&a);
        assert_eq!(stock(&doc, "p1"), 9, "{}: {doc}", c.label());
        lib.close().await;
    }
}

/// Defect 1 seen by the console: an order written for a request whose units went back is
/// named, and fix books its units again.
#[tokio::test]
async fn an_order_of_a_returned_request_is_named_and_booked_again() {
    let topo = Topo::standalone();
    let store = topo.store().await;
    let db = TestDb::sqlite();
    let lib = db.open().await;
    let c = Console::new(&topo, &db);
    import(&lib, "aft", &[("p1", 5, 2)], live_window()).await;
    c.preheat("aft");
    let k = product_keys("aft", "p1");
    deduct(&store, &k, "back", "u1", "1").await.expect("deduct");
    restore(&store, &k, "back").await.expect("restore");
    // Against the rule: the order lands after the units went back.
    insert_with_outbox(&lib, &[order("aft", "p1", "back", "u1", 1)])
        .await
        .expect("order");
    let doc = c.run(&["--json", "status", "aft"]).json();
    let a = alert(&doc, "order_after_return", "p1").unwrap_or_else(|| panic!("{doc}"));
    assert_eq!(a["severity"], "critical");
    assert!(a["message"].as_str().unwrap_or("").contains("back"), "{a}");
    c.ok(&["fix", "aft", "--yes"]);
    let doc = c.reconcile("aft");
    assert_eq!(stock(&doc, "p1"), 4, "{doc}");
    lib.close().await;
}

/// Item 7: the rules were scattered and several unwritten. The guide states each rule the
/// console checks, every reply code, and what the rows hold; the README links it.
#[test]
fn the_guide_states_every_rule_and_reply_and_the_readme_links_it() {
    let root = env!("CARGO_MANIFEST_DIR");
    let guide = std::fs::read_to_string(format!("{root}/docs/app-servers.md")).expect("guide");
    for (rule, _) in seckill_console::ops::conform::RULES {
        assert!(guide.contains(rule), "the guide names the rule {rule}");
    }
    for code in ["-1", "-2", "-3", "-4", "-5", "-6", "-7", "-8"] {
        assert!(guide.contains(&format!("`{code}`")), "reply {code}");
    }
    for fact in [
        "ARGV[1]",
        "updated_at",
        "seckill.order.created",
        "+00:00",
        "128",
        "opens",
        "INSERT OR IGNORE",
        "ON CONFLICT",
        "INSERT IGNORE",
    ] {
        assert!(guide.contains(fact), "the guide says {fact}");
    }
    let readme = std::fs::read_to_string(format!("{root}/README.md")).expect("readme");
    assert!(readme.contains("docs/app-servers.md"));
}

/// `conform` names a broken rule with its requests, and exits 4; a clean sale passes.
#[tokio::test]
async fn conform_names_each_broken_rule_and_passes_a_clean_sale() {
    let topo = Topo::standalone();
    let store = topo.store().await;
    let db = TestDb::sqlite();
    let lib = db.open().await;
    let c = Console::new(&topo, &db);
    c.import_preheat(&lib, "cf", &[("p1", 10, 3), ("p2", 10, 3)])
        .await;
    for i in 0..5 {
        buy(
            &store,
            &lib,
            "cf",
            "p1",
            &format!("ok{i}"),
            &format!("u{i}"),
            1,
        )
        .await;
    }
    let r = c.json(&["conform", "cf"]);
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["read"]["orders"], 5);

    // Another user on the order than on its deduction.
    deduct(&store, &product_keys("cf", "p2"), "who", "u7", "1")
        .await
        .expect("deduct");
    insert_with_outbox(&lib, &[order("cf", "p2", "who", "u8", 1)])
        .await
        .expect("order");
    let run = c.run(&["--json", "conform", "cf"]);
    run.expect_code(4);
    let r = run.json();
    assert_eq!(
        r["broken"],
        serde_json::json!(["order-copies-deduction"]),
        "{r}"
    );
    let rule = r["rules"]
        .as_array()
        .and_then(|rs| rs.iter().find(|x| x["rule"] == "order-copies-deduction"))
        .expect("rule");
    assert_eq!(rule["examples"][0]["request_id"], "who");
    assert!(
        rule["examples"][0]["detail"]
            .as_str()
            .unwrap_or("")
            .contains("u8"),
        "{rule}"
    );
    let text = c.run(&["conform", "cf"]);
    text.expect_code(4);
    assert!(
        text.stdout.contains("order-copies-deduction  BROKEN"),
        "{}",
        text.stdout
    );

    // A ledger gone (expired after the sale) proves nothing against the app servers: its
    // orders are named as not checked, not as orders written without a sale.
    redis_cmd(&store, &["DEL", &product_keys("cf", "p1").ledger]).await;
    let run = c.run(&["--json", "conform", "cf"]);
    let r = run.json();
    assert_eq!(
        r["broken"],
        serde_json::json!(["order-copies-deduction"]),
        "{r}"
    );
    assert!(
        r["unchecked"][0].as_str().unwrap_or("").contains("p1"),
        "{r}"
    );
    lib.close().await;
}

/// A moved window the import cannot write everywhere is said, never hidden behind an error
/// after the database took it: a product a rebuild holds is named (exit 4), and an unreachable
/// Redis leaves the database written and says what to run (exit 3).
#[tokio::test]
async fn a_window_the_import_cannot_push_is_named_with_what_to_run() {
    let topo = Topo::standalone();
    let store = topo.store().await;
    let db = TestDb::sqlite();
    let lib = db.open().await;
    let dir = tempfile::tempdir().expect("dir");
    let c = Console::new(&topo, &db);
    let file = |(s, e)| {
        write_file(
            dir.path(),
            "held.toml",
            &activity_toml("held", &[("p1", 10, 2), ("p2", 10, 2)], s, e),
        )
    };
    let path = file(live_window());
    c.ok(&["activity", "import", path.to_str().expect("path")]);
    c.preheat("held");
    let k1 = product_keys("held", "p1");
    let rev = redis_cmd(&store, &["HGET", &k1.meta, "rev"]).await;
    // A rebuild holds p1 (its console is between freeze.lua and its last write).
    let marker = format!("tok|10|{}", Utc::now().timestamp_millis());
    redis_cmd(&store, &["HSET", &k1.meta, "frozen", &marker]).await;
    let later = (
        Utc::now() - Duration::hours(1),
        Utc::now() + Duration::hours(3),
    );
    let path = file(later);
    let run = c.run(&["--json", "activity", "import", path.to_str().expect("path")]);
    run.expect_code(4);
    let r = run.json();
    assert_eq!(r["window"]["written"], 1, "{r}");
    assert_eq!(r["window"]["failed"][0][0], "p1", "{r}");
    assert!(
        r["window"]["failed"][0][1]
            .as_str()
            .unwrap_or("")
            .contains("rebuild"),
        "{r}"
    );
    assert_eq!(
        redis_cmd(&store, &["HGET", &k1.meta, "rev"]).await,
        rev,
        "nothing written to the held product"
    );

    // Redis down: the database holds the new window, the report says so and what to run.
    let down = Console::redis("redis://127.0.0.1:1", &db.url).with("--connect-timeout-ms 300");
    let path = file((
        Utc::now() - Duration::hours(1),
        Utc::now() + Duration::hours(4),
    ));
    let run = down.run(&["--json", "activity", "import", path.to_str().expect("path")]);
    run.expect_code(3);
    let r = run.json();
    let why = r["window"]["unpushed"].as_str().unwrap_or("");
    assert!(why.contains("fix held"), "{r}");
    let shown = c.json(&["activity", "show", "held"]);
    assert!(
        shown.to_string().contains(
            &(later.1 + Duration::hours(1))
                .format("%Y-%m-%dT%H")
                .to_string()
        ),
        "the database took it: {shown}"
    );
    lib.close().await;
}

/// `conform` reads the times of every backend (SQLite's text as written, PostgreSQL's and
/// MySQL's typed columns cast): a clean sale passes, a payment that left `updated_at` alone is
/// named.
#[tokio::test]
async fn conform_reads_the_times_of_every_backend() {
    let topo = Topo::standalone();
    let store = topo.store().await;
    for db in TestDb::all().await {
        let lib = db.open().await;
        let c = Console::new(&topo, &db);
        let a = format!("ct{}", db.name());
        c.import_preheat(&lib, &a, &[("p1", 10, 3)]).await;
        for i in 0..3 {
            buy(
                &store,
                &lib,
                &a,
                "p1",
                &format!("{a}-{i}"),
                &format!("u{i}"),
                1,
            )
            .await;
        }
        let r = c.json(&["conform", &a]);
        assert_eq!(r["ok"], true, "{}: {r}", c.label());
        assert_eq!(r["read"]["orders"], 3, "{}", c.label());
        let paid = format!("{a}-0");
        lib.execute(
            "UPDATE seckill_order SET status = 'paid' WHERE request_id = ?",
            &[paid.as_str().into()],
        )
        .await
        .expect("pay without moving updated_at");
        let run = c.run(&["--json", "conform", &a]);
        run.expect_code(4);
        let r = run.json();
        assert_eq!(
            r["broken"],
            serde_json::json!(["updated-at-moves"]),
            "{}: {r}",
            c.label()
        );
        lib.close().await;
    }
}
