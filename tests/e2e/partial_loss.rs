//! Partial loss (issue 19): any one key of a product can go (every key carries a TTL, so a
//! `volatile-*` eviction policy may evict any of them; a restart from an older snapshot rolls
//! some back). Each case: the loss is seen and named (never `ok`), the scripts refuse to sell
//! what they cannot check, and one `fix` (or one `preheat` when the stock key itself is gone)
//! ends with the product balanced and nobody above their limit. On standalone and cluster.

use crate::harness::fixtures::{buy, product_keys, redis_cmd};
use crate::harness::session::{alert_kinds, product};
use crate::harness::{Console, TestDb, Topo};
use redis::Value;
use seckill_console::db::Db;
use seckill_console::redis::stock::{Deducted, deduct};
use seckill_console::redis::{ProductKeys, RedisStore};

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

/// `n` sales of one unit each, each with its order (request `<tag>-<i>`, user `<tag>u<i>`).
async fn sell(store: &RedisStore, lib: &Db, a: &str, p: &str, tag: &str, n: usize) {
    for i in 0..n {
        let r = buy(
            store,
            lib,
            a,
            p,
            &format!("{tag}-{i}"),
            &format!("{tag}u{i}"),
            1,
        )
        .await;
        assert!(matches!(r, Deducted::Remaining(_)), "sale {tag}-{i}: {r:?}");
    }
}

async fn del(store: &RedisStore, keys: &[&str]) {
    for k in keys {
        redis_cmd(store, &["DEL", k]).await;
    }
}

/// The product's row of a status, which must not read `ok`, and whose `lost` names `pieces`.
fn assert_lost(doc: &serde_json::Value, p: &str, state: &str, pieces: &[&str], label: &str) {
    let row = product(doc, p);
    assert_eq!(row["state"], state, "{label}: {row}");
    let lost: Vec<&str> = row["lost"]
        .as_array()
        .map(|l| l.iter().filter_map(|x| x.as_str()).collect())
        .unwrap_or_default();
    for piece in pieces {
        assert!(lost.contains(piece), "{label}: {piece} not in lost: {row}");
    }
}

/// Balanced, as `reconcile --fail-on-drift` and the stock itself say.
async fn assert_balanced(c: &Console, store: &RedisStore, k: &ProductKeys, a: &str, want: i64) {
    let doc = c.reconcile(a);
    let row = product(&doc, &k.product);
    assert_eq!(row["drift"], 0, "{}: {row}", c.label());
    assert_eq!(
        get(store, &k.stock).await.as_deref(),
        Some(want.to_string().as_str()),
        "{}: {row}",
        c.label()
    );
}

/// Case 2: the ledger and events go (with the console's checkpoint), then the stock and the
/// buyers. Sales in between are refused (nothing can be checked); one preheat writes the truth
/// from the orders (not what the counters or a lost checkpoint said), and nothing is left to
/// repair: a second preheat changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_ledger_then_a_lost_stock_is_rebuilt_by_one_preheat() {
    for topo in Topo::both() {
        let store = topo.store().await;
        let db = TestDb::sqlite();
        let lib = db.open().await;
        let c = Console::new(&topo, &db);
        let a = "pl2";
        c.import_preheat(&lib, a, &[("p1", 100, 2)]).await;
        let k = product_keys(a, "p1");
        sell(&store, &lib, a, "p1", "first", 10).await;
        del(&store, &[&k.ledger, &k.events, &k.books]).await;
        // Nothing sells that cannot be checked: a retry of an old request would deduct twice.
        for i in 0..5 {
            let r = deduct(&store, &k, &format!("later-{i}"), "lu", "1")
                .await
                .expect("deduct");
            assert_eq!(
                r,
                Deducted::Missing,
                "{}: sale after the ledger went",
                c.label()
            );
        }
        let s = c.status(a);
        assert_lost(&s, "p1", "missing", &["ledger", "events"], c.label());
        del(&store, &[&k.stock, &k.buyers]).await;
        let pre = c.json(&["preheat", a]);
        assert_eq!(pre["decision"], "go", "{}: {pre}", c.label());
        let row = product(&pre, "p1");
        assert_eq!(row["written"], true, "{}: {pre}", c.label());
        assert_eq!(row["verified"], true, "{}: {pre}", c.label());
        assert_balanced(&c, &store, &k, a, 90).await;
        // Every buyer holds what their orders hold again.
        assert_eq!(
            hget(&store, &k.buyers, "firstu3").await.as_deref(),
            Some("1")
        );
        let again = c.json(&["preheat", a]);
        assert_eq!(product(&again, "p1")["written"], false, "{again}");
        assert_eq!(product(&again, "p1")["action"], "unchanged", "{again}");
        lib.close().await;
    }
}

/// Case 3: the ledger and events go alone. The counters still count every sale, so the live
/// orders are the ledger's missing entries, not sales Redis forgot: one fix writes them back
/// without counting them again (90 stays 90; today's console wrote 80 and then drifted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_ledger_is_rebuilt_without_counting_the_sales_twice() {
    for topo in Topo::both() {
        let store = topo.store().await;
        let db = TestDb::sqlite();
        let lib = db.open().await;
        let c = Console::new(&topo, &db);
        let a = "pl3";
        c.import_preheat(&lib, a, &[("p1", 100, 2)]).await;
        let k = product_keys(a, "p1");
        sell(&store, &lib, a, "p1", "s", 10).await;
        del(&store, &[&k.ledger, &k.events, &k.books]).await;
        let s = c.status(a);
        assert_lost(&s, "p1", "missing", &["ledger", "events"], c.label());
        assert!(alert_kinds(&s).contains(&"missing".to_string()), "{s}");
        // The preview and the write are one computation.
        let preview = c.json(&["fix", a, "--preview"]);
        assert_eq!(product(&preview, "p1")["after"], 90, "{preview}");
        assert_eq!(product(&preview, "p1")["plan"], "rebuild", "{preview}");
        let fixed = c.json(&["fix", a, "--yes"]);
        let row = product(&fixed, "p1");
        assert_eq!(
            (row["applied"].clone(), row["after"].clone()),
            (true.into(), 90.into()),
            "{fixed}"
        );
        assert_balanced(&c, &store, &k, a, 90).await;
        // Every sale is in the ledger once: a retry answers its first result.
        assert_eq!(
            deduct(&store, &k, "s-4", "su4", "1").await.expect("retry"),
            Deducted::Remaining(
                hget(&store, &k.ledger, "s-4")
                    .await
                    .and_then(|e| e.split('|').nth(3).and_then(|r| r.parse().ok()))
                    .expect("the entry's first result")
            )
        );
        let again = c.json(&["fix", a, "--yes"]);
        assert_eq!(again["products"], serde_json::json!([]), "{again}");
        lib.close().await;
    }
}

/// Case 3b: the events go first and one fix rebuilds them (the new stream starts at the
/// rebuild's marker, without the sales before it); then the ledger goes. The stream no longer
/// says which live orders the counters hold, so the surviving holdings say it: one fix writes
/// the ledger back without counting the ten sales twice (90 stays 90: the console wrote 80 and
/// doubled every buyer's holding, refusing their second unit, while `status` read `ok`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ledger_lost_after_a_rebuilt_stream_is_rebuilt_without_counting_the_sales_twice() {
    for topo in Topo::both() {
        let store = topo.store().await;
        let db = TestDb::sqlite();
        let lib = db.open().await;
        let c = Console::new(&topo, &db);
        let a = "pl3b";
        c.import_preheat(&lib, a, &[("p1", 100, 2)]).await;
        let k = product_keys(a, "p1");
        sell(&store, &lib, a, "p1", "s", 10).await;
        del(&store, &[&k.events, &k.books]).await;
        let first = c.json(&["fix", a, "--yes"]);
        assert_eq!(product(&first, "p1")["after"], 90, "{first}");
        assert_balanced(&c, &store, &k, a, 90).await;
        del(&store, &[&k.ledger, &k.books]).await;
        assert_lost(&c.status(a), "p1", "missing", &["ledger"], c.label());
        let preview = c.json(&["fix", a, "--preview"]);
        assert_eq!(product(&preview, "p1")["after"], 90, "{preview}");
        let fixed = c.json(&["fix", a, "--yes"]);
        let row = product(&fixed, "p1");
        assert_eq!(
            (row["applied"].clone(), row["after"].clone()),
            (true.into(), 90.into()),
            "{}: {fixed}",
            c.label()
        );
        assert_balanced(&c, &store, &k, a, 90).await;
        assert_eq!(
            hget(&store, &k.meta, "deducted").await.as_deref(),
            Some("10")
        );
        assert_eq!(
            hget(&store, &k.meta, "unexplained").await.as_deref(),
            Some("0")
        );
        // Every buyer holds their one unit, once: a second one is theirs to buy.
        assert_eq!(hget(&store, &k.buyers, "su3").await.as_deref(), Some("1"));
        let second = buy(&store, &lib, a, "p1", "s-3b", "su3", 1).await;
        assert_eq!(second, Deducted::Remaining(89), "{}", c.label());
        let doc = c.status(a);
        assert_eq!(product(&doc, "p1")["state"], "ok", "{}: {doc}", c.label());
        let again = c.json(&["fix", a, "--yes"]);
        assert_eq!(again["products"], serde_json::json!([]), "{again}");
        lib.close().await;
    }
}

/// Case 3c: a failover lost one buyer's deduction of 2 units (its order then landed), and the
/// same buyer's later deduction of 1, still without its order, lost its ledger entry and event
/// with the rest. The buyer's holding of 1 is that later deduction's, not part of the lost
/// one's: the fix records the landed order on top of what the counters hold (20 - 2 - 3 = 15
/// for sale), where the console took the holding for half of the order and sold a unit twice
/// (16; chaos hunt, cluster seed 831663262).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holding_short_of_a_recorded_order_never_counts_part_of_it() {
    use seckill_console::db::orders::{self, NewOrder};
    use seckill_console::domain::order::OrderStatus;
    for topo in Topo::both() {
        let store = topo.store().await;
        let db = TestDb::sqlite();
        let lib = db.open().await;
        let c = Console::new(&topo, &db);
        let a = "pl3c";
        c.import_preheat(&lib, a, &[("p1", 20, 2)]).await;
        let k = product_keys(a, "p1");
        // Two deductions whose orders are still on their way.
        for (rid, user, q) in [("r3", "u3", "2"), ("r4", "u0", "1")] {
            let r = deduct(&store, &k, rid, user, q).await.expect("deduct");
            assert!(matches!(r, Deducted::Remaining(_)), "{rid}: {r:?}");
        }
        // The order of a deduction the failover lost.
        let lost = NewOrder {
            order_id: "o-r1".into(),
            request_id: "r1".into(),
            activity_id: a.into(),
            product_id: "p1".into(),
            user_id: "u0".into(),
            quantity: 2,
            status: OrderStatus::PendingPayment,
        };
        orders::insert_with_outbox(&lib, &[lost])
            .await
            .expect("order");
        del(&store, &[&k.ledger, &k.events, &k.books]).await;
        let fixed = c.json(&["fix", a, "--yes"]);
        let row = product(&fixed, "p1");
        assert_eq!(
            (row["applied"].clone(), row["after"].clone()),
            (true.into(), 15.into()),
            "{}: {fixed}",
            c.label()
        );
        assert_eq!(
            get(&store, &k.stock).await.as_deref(),
            Some("15"),
            "{}",
            c.label()
        );
        lib.close().await;
    }
}

/// Case 4: the meta hash goes and a stray write recreates it with a counter alone. The
/// deduction refuses to sell without the limit (no sale recreates it); the status names the
/// lost limit; one fix rebuilds the counters from the ledger and never puts the sold units
/// back on sale (89 stays 89, where today's console wrote 99).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recreated_meta_hash_never_puts_sold_units_back_on_sale() {
    for topo in Topo::both() {
        let store = topo.store().await;
        let db = TestDb::sqlite();
        let lib = db.open().await;
        let c = Console::new(&topo, &db);
        let a = "pl4";
        c.import_preheat(&lib, a, &[("p1", 100, 2)]).await;
        let k = product_keys(a, "p1");
        sell(&store, &lib, a, "p1", "s", 11).await;
        del(&store, &[&k.meta]).await;
        assert_eq!(
            deduct(&store, &k, "x1", "xu", "1").await.expect("deduct"),
            Deducted::Missing,
            "{}: a sale without the meta hash",
            c.label()
        );
        assert!(!matches!(
            redis_cmd(&store, &["EXISTS", &k.meta]).await,
            Value::Int(1)
        ));
        redis_cmd(&store, &["HINCRBY", &k.meta, "deducted", "1"]).await;
        let s = c.status(a);
        assert_lost(&s, "p1", "missing", &["limit"], c.label());
        let fixed = c.json(&["fix", a, "--yes"]);
        assert_eq!(product(&fixed, "p1")["after"], 89, "{fixed}");
        assert_balanced(&c, &store, &k, a, 89).await;
        assert_eq!(hget(&store, &k.meta, "limit").await.as_deref(), Some("2"));
        lib.close().await;
    }
}

/// Case 5: the buyers hash goes. Per-user limits cannot be checked, so nothing sells; the
/// status names it; one fix writes every holding back from the ledger, and a buyer at the
/// limit stays there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_buyers_hash_is_seen_and_every_limit_holds_after_one_fix() {
    for topo in Topo::both() {
        let store = topo.store().await;
        let db = TestDb::sqlite();
        let lib = db.open().await;
        let c = Console::new(&topo, &db);
        let a = "pl5";
        c.import_preheat(&lib, a, &[("p1", 100, 2)]).await;
        let k = product_keys(a, "p1");
        sell(&store, &lib, a, "p1", "s", 10).await;
        // One buyer at the limit.
        let r = buy(&store, &lib, a, "p1", "s-0b", "su0", 1).await;
        assert!(matches!(r, Deducted::Remaining(_)), "{r:?}");
        del(&store, &[&k.buyers]).await;
        assert_eq!(
            deduct(&store, &k, "n1", "su0", "1").await.expect("deduct"),
            Deducted::Missing,
            "{}: the buyer at the limit bought again",
            c.label()
        );
        assert_lost(&c.status(a), "p1", "missing", &["buyers"], c.label());
        c.ok(&["fix", a, "--yes"]);
        assert_balanced(&c, &store, &k, a, 89).await;
        assert_eq!(hget(&store, &k.buyers, "su0").await.as_deref(), Some("2"));
        assert_eq!(hget(&store, &k.buyers, "su5").await.as_deref(), Some("1"));
        assert_eq!(
            deduct(&store, &k, "n2", "su0", "1").await.expect("deduct"),
            Deducted::UserLimit,
            "{}",
            c.label()
        );
        assert!(matches!(
            deduct(&store, &k, "n3", "su5", "1").await.expect("deduct"),
            Deducted::Remaining(_)
        ));
        lib.close().await;
    }
}

/// Case 6: a pause lives in the database. Lost with the keys (a restart from a snapshot taken
/// before it; the keys lost and preheated; the meta hash lost and fixed), it is a critical
/// `pause_lost` until the next preheat or fix writes it back: the product never sells again
/// before that is seen.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pause_lost_with_the_keys_is_an_alert_and_comes_back_with_every_repair() {
    for topo in Topo::both() {
        let store = topo.store().await;
        let db = TestDb::sqlite();
        let lib = db.open().await;
        let c = Console::new(&topo, &db);
        let a = "pl6";
        c.import_preheat(&lib, a, &[("p1", 100, 2), ("p2", 100, 2)])
            .await;
        let k = product_keys(a, "p1");
        // A snapshot of the meta hash from before the pause.
        let before = match redis_cmd(&store, &["DUMP", &k.meta]).await {
            Value::BulkString(b) => b,
            other => panic!("DUMP: {other:?}"),
        };
        c.ok(&[
            "pause",
            a,
            "--product",
            "p1",
            "--yes",
            "--reason",
            "wrong price",
        ]);
        let paused = || async {
            deduct(&store, &k, "probe", "pu", "1")
                .await
                .expect("deduct")
        };
        assert_eq!(paused().await, Deducted::Paused);

        // (a) A restart from the snapshot: the meta hash as it was.
        let mut restore = redis::cmd("RESTORE");
        restore.arg(&k.meta).arg(0).arg(before).arg("REPLACE");
        store.query(&k.meta, &restore).await.expect("RESTORE");
        let s = c.status(a);
        assert_lost(&s, "p1", "missing", &["pause"], c.label());
        assert!(alert_kinds(&s).contains(&"pause_lost".to_string()), "{s}");
        let alert = s["alerts"]
            .as_array()
            .and_then(|v| v.iter().find(|x| x["kind"] == "pause_lost").cloned())
            .expect("pause_lost");
        assert_eq!(alert["severity"], "critical");
        assert!(
            alert["message"]
                .as_str()
                .is_some_and(|m| m.contains("wrong price")),
            "{alert}"
        );
        c.ok(&["fix", a, "--yes"]);
        assert_eq!(paused().await, Deducted::Paused, "{}: after fix", c.label());
        assert_eq!(product(&c.status(a), "p1")["state"], "paused");

        // (a2) The same restart, then preheat: the pause is the database's to write back, not
        // a conflict to force (it was a no-go whose table showed no difference).
        redis_cmd(&store, &["HSET", &k.meta, "paused", "0"]).await;
        assert_lost(&c.status(a), "p1", "missing", &["pause"], c.label());
        let pre = c.json(&["preheat", a]);
        assert_eq!(pre["decision"], "go", "{}: {pre}", c.label());
        assert_eq!(product(&pre, "p1")["written"], true, "{pre}");
        assert_eq!(product(&pre, "p1")["verified"], true, "{pre}");
        assert_eq!(
            paused().await,
            Deducted::Paused,
            "{}: after preheat",
            c.label()
        );

        // (b) Every key lost, then preheat.
        let mut keys: Vec<&str> = k.script_keys().to_vec();
        keys.push(&k.books);
        del(&store, &keys).await;
        c.ok(&["preheat", a]);
        assert_eq!(
            paused().await,
            Deducted::Paused,
            "{}: after preheat",
            c.label()
        );

        // (c) The meta hash lost, then fix.
        del(&store, &[&k.meta]).await;
        c.ok(&["fix", a, "--yes"]);
        assert_eq!(paused().await, Deducted::Paused, "{}: after fix", c.label());
        // The other product sells on.
        let k2 = product_keys(a, "p2");
        assert!(matches!(
            deduct(&store, &k2, "p2-1", "pu", "1")
                .await
                .expect("deduct"),
            Deducted::Remaining(_)
        ));
        lib.close().await;
    }
}

/// Case 7: an event of an unbacked deduction deleted from the stream. The ledger names it: the
/// figures stay exact (it is in flight, then orphaned), and the fix returns it. Then a ledger
/// entry deleted under an orphan: the counters hold units nothing names; the fix holds them
/// back until their window has passed, then puts them back on sale: never skipped silently.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_event_or_ledger_entry_is_repaired_not_left_as_drift() {
    for topo in Topo::both() {
        let store = topo.store().await;
        let db = TestDb::sqlite();
        let lib = db.open().await;
        let c = Console::new(&topo, &db).with("--grace-secs 1");
        let a = "pl7";
        c.import_preheat(&lib, a, &[("p1", 100, 2)]).await;
        let k = product_keys(a, "p1");
        sell(&store, &lib, a, "p1", "s", 3).await;
        // A deduction whose order never comes, and its event deleted.
        assert!(matches!(
            deduct(&store, &k, "lone", "lu", "1").await.expect("deduct"),
            Deducted::Remaining(96)
        ));
        let last = match redis_cmd(&store, &["XREVRANGE", &k.events, "+", "-", "COUNT", "1"]).await
        {
            Value::Array(items) => match items.first() {
                Some(Value::Array(entry)) => match entry.first() {
                    Some(Value::BulkString(id)) => String::from_utf8_lossy(id).into_owned(),
                    other => panic!("{other:?}"),
                },
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        };
        redis_cmd(&store, &["XDEL", &k.events, &last]).await;
        del(&store, &[&k.books]).await;
        std::thread::sleep(std::time::Duration::from_millis(1200));
        let s = c.status(a);
        let row = product(&s, "p1");
        assert_eq!(
            (row["orphaned"].clone(), row["drift"].clone()),
            (1.into(), (-1).into()),
            "{}: {row}",
            c.label()
        );
        c.ok(&["fix", a, "--yes"]);
        assert_balanced(&c, &store, &k, a, 97).await;

        // An orphan whose ledger entry is gone.
        assert!(matches!(
            deduct(&store, &k, "lone2", "lu", "1")
                .await
                .expect("deduct"),
            Deducted::Remaining(96)
        ));
        redis_cmd(&store, &["HDEL", &k.ledger, "lone2"]).await;
        std::thread::sleep(std::time::Duration::from_millis(1200));
        let fixed = c.json(&["fix", a, "--yes"]);
        let row = product(&fixed, "p1");
        assert_eq!(row["applied"], true, "{fixed}");
        assert_eq!(row["held_back"], 1, "{}: {fixed}", c.label());
        // Held back while its order could still land: the books balance, in flight.
        let s = c.reconcile(a);
        assert_eq!(product(&s, "p1")["unexplained"], 1, "{s}");
        std::thread::sleep(std::time::Duration::from_millis(1200));
        let released = c.json(&["fix", a, "--yes"]);
        assert_eq!(product(&released, "p1")["released"], 1, "{released}");
        assert_balanced(&c, &store, &k, a, 97).await;
        lib.close().await;
    }
}

/// Case 8: live orders above the initial stock read `oversold` (critical), whatever Redis
/// shows; `--fail-on-drift` fails on it and the report does not call the books balanced. A
/// re-import that cuts a stock below what is sold is refused like the same top-up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversold_product_never_reads_ok() {
    for topo in Topo::both() {
        let store = topo.store().await;
        let db = TestDb::sqlite();
        let lib = db.open().await;
        let c = Console::new(&topo, &db);
        let a = "pl8";
        c.import_preheat(&lib, a, &[("p1", 10, 2)]).await;
        sell(&store, &lib, a, "p1", "s", 10).await;
        // The same file with a stock of 8: refused, nothing written.
        let dir = tempfile::tempdir().expect("tmp");
        let (s, e) = crate::harness::fixtures::live_window();
        let file = crate::harness::fixtures::write_file(
            dir.path(),
            "cut.toml",
            &crate::harness::fixtures::activity_toml(a, &[("p1", 8, 2)], s, e),
        );
        let r = c.run(&["activity", "import", file.to_str().expect("path")]);
        r.expect_code(5);
        assert!(r.stderr.contains("topup"), "{}", r.stderr);
        let shown = c.json(format!("activity show {a}"));
        assert_eq!(
            shown["products"][0]["initial_stock"], 10,
            "the refused import wrote: {shown}"
        );
        // Another tool cuts it anyway.
        lib.execute(
            "UPDATE seckill_product SET initial_stock = 8 WHERE activity_id = ?",
            &[a.into()],
        )
        .await
        .expect("cut");
        let st = c.status(a);
        let row = product(&st, "p1");
        assert_eq!(row["state"], "oversold", "{}: {row}", c.label());
        let alert = st["alerts"]
            .as_array()
            .and_then(|v| v.iter().find(|x| x["kind"] == "oversold").cloned())
            .expect("an oversold alert");
        assert_eq!(alert["severity"], "critical");
        c.run(&["reconcile", a, "--fail-on-drift"]).expect_code(4);
        let rep = c.json(&["report", a, "--format", "json"]);
        assert_eq!(rep["balanced"], false, "{rep}");
        lib.close().await;
    }
}

/// Case 8b: a stock raised outside the scripts (lost writes) sold two units too many. The fix
/// takes the offset away (the stock reads -2: nothing more sells); after that its books are on
/// their counters and a sale cannot be undone in Redis, so the next fix has nothing to write
/// and says which product is still not ok and why, never "every product is ok".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fix_names_the_oversold_product_it_cannot_change() {
    for topo in Topo::both() {
        let store = topo.store().await;
        let db = TestDb::sqlite();
        let lib = db.open().await;
        let c = Console::new(&topo, &db);
        let a = "pl8b";
        c.import_preheat(&lib, a, &[("p1", 10, 1)]).await;
        let k = product_keys(a, "p1");
        redis_cmd(&store, &["INCRBY", &k.stock, "2"]).await;
        sell(&store, &lib, a, "p1", "s", 12).await;
        let oversold_alert = |doc: &serde_json::Value| {
            doc["alerts"]
                .as_array()
                .and_then(|v| v.iter().find(|x| x["kind"] == "oversold"))
                .and_then(|x| x["message"].as_str())
                .unwrap_or_default()
                .to_string()
        };
        // The stock reads 0, above the -2 the books owe: the fix has something to write.
        let before = oversold_alert(&c.status(a));
        assert!(
            before.ends_with("fix rewrites it from the database, which leaves its stock at -2 so nothing more sells"),
            "{before}"
        );
        let fixed = c.json(&["fix", a, "--yes"]);
        assert_eq!(product(&fixed, "p1")["after"], -2, "{}: {fixed}", c.label());
        let st = c.status(a);
        assert_eq!(product(&st, "p1")["state"], "oversold", "{}", c.label());
        // At -2 nothing is left for a fix: the alert says what is.
        let after = oversold_alert(&st);
        assert!(
            after.contains("nothing more sells while its stock is at or below 0")
                && !after.contains("fix rewrites"),
            "{after}"
        );
        let again = c.json(&["fix", a, "--yes"]);
        assert_eq!(again["products"], serde_json::json!([]), "{again}");
        let left = &again["left"][0];
        assert_eq!(
            (left["product"].as_str(), left["state"].as_str()),
            (Some("p1"), Some("oversold")),
            "{again}"
        );
        assert!(
            left["why"]
                .as_str()
                .is_some_and(|w| w.starts_with("2 unit(s) held above its initial stock of 10")),
            "{again}"
        );
        let text = c.run(&["fix", a, "--yes"]);
        text.expect_code(0);
        assert!(
            text.stdout.contains("nothing to write") && text.stdout.contains("p1 (oversold)"),
            "{}",
            text.stdout
        );
        assert!(
            !text.stdout.contains("every product is ok"),
            "{}",
            text.stdout
        );
        // The gate finds the stock the books owe (-2, below zero) as it would write it: GO,
        // unchanged, and a warning that names the oversold product; never a conflict with
        // itself at every rerun.
        let pre = c.json(&["preheat", a]);
        assert_eq!(pre["decision"], "go", "{pre}");
        assert_eq!(product(&pre, "p1")["action"], "unchanged", "{pre}");
        assert_eq!(product(&pre, "p1")["stock"], -2, "{pre}");
        assert!(
            pre["warnings"][0]
                .as_str()
                .is_some_and(|w| w.contains("oversold") && w.contains("p1 (12 held of 10)")),
            "{pre}"
        );
        // Redis restarted from nothing: the gate writes -2 and says so.
        del(
            &store,
            &[&k.stock, &k.meta, &k.buyers, &k.ledger, &k.events, &k.books],
        )
        .await;
        let pre = c.json(&["preheat", a]);
        assert_eq!(pre["decision"], "go", "{pre}");
        assert_eq!(product(&pre, "p1")["action"], "write", "{pre}");
        assert_eq!(product(&pre, "p1")["stock"], -2, "{pre}");
        assert_eq!(
            redis_cmd(&store, &["GET", &k.stock]).await,
            redis::Value::BulkString(b"-2".to_vec())
        );
        let text = c.run(&["preheat", a]);
        text.expect_code(0);
        assert!(
            text.stdout.contains("GO") && text.stdout.contains("! 1 product(s) oversold"),
            "{}",
            text.stdout
        );
        lib.close().await;
    }
}

/// Case 9: the stock and meta keys of a product deleted, every unit paid. `db_sold` is the
/// orders' sum whatever keys are gone, and the fix's preview shows what the fix writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_keys_never_change_the_database_figures_and_the_preview_is_the_write() {
    for topo in Topo::both() {
        let store = topo.store().await;
        let db = TestDb::sqlite();
        let lib = db.open().await;
        let c = Console::new(&topo, &db);
        let a = "pl9";
        c.import_preheat(&lib, a, &[("p1", 20, 1)]).await;
        let k = product_keys(a, "p1");
        sell(&store, &lib, a, "p1", "s", 20).await;
        let rids: Vec<String> = (0..20).map(|i| format!("s-{i}")).collect();
        seckill_console::db::orders::pay(&lib, &rids)
            .await
            .expect("pay");
        del(&store, &[&k.stock, &k.meta]).await;
        let row = product(&c.status(a), "p1").clone();
        assert_eq!(row["db_sold"], 20, "{}: {row}", c.label());
        assert_eq!(row["expected_remaining"], 0, "{row}");
        let preview = c.json(&["fix", a, "--preview"]);
        let shown = product(&preview, "p1")["after"].clone();
        // Everything is sold: the preview writes a stock of nothing.
        assert_eq!(shown, 0, "{preview}");
        let fixed = c.json(&["fix", a, "--yes"]);
        assert_eq!(
            product(&fixed, "p1")["after"],
            shown,
            "{preview} vs {fixed}"
        );
        assert_balanced(&c, &store, &k, a, 0).await;
        lib.close().await;
    }
}

/// Case 18a: a user id that is not UTF-8 is the last field of a ledger record and reads as
/// any other: the product is not corrupt, and a fix has nothing to say about it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_id_that_is_not_utf8_is_an_ordinary_buyer() {
    let topo = Topo::standalone();
    let store = topo.store().await;
    let db = TestDb::sqlite();
    let lib = db.open().await;
    let c = Console::new(&topo, &db);
    let a = "pl18";
    c.import_preheat(&lib, a, &[("p1", 10, 2)]).await;
    let k = product_keys(a, "p1");
    let mut cmd = redis::cmd("EVALSHA");
    cmd.arg(seckill_console::redis::scripts::DEDUCT.sha())
        .arg(5)
        .arg(k.script_keys().to_vec())
        .arg("bin-1")
        .arg(&[0xffu8, 0xfe, b'u'][..])
        .arg("1");
    let r = store.query(&k.stock, &cmd).await;
    let r = match r {
        Err(e) if e.code() == Some("NOSCRIPT") => {
            c.ok(&["preheat", a]);
            store.query(&k.stock, &cmd).await.expect("deduct")
        }
        other => other.expect("deduct"),
    };
    assert_eq!(r, Value::Int(9));
    std::thread::sleep(std::time::Duration::from_millis(50));
    let row = product(&c.status(a), "p1").clone();
    assert_ne!(row["state"], "corrupt", "{row}");
    let fixed = c.json(&["fix", a, "--yes"]);
    assert!(
        fixed["products"]
            .as_array()
            .is_some_and(|ps| ps.iter().all(|p| p["applied"] == false)),
        "a fix wrote: {fixed}"
    );
    lib.close().await;
}
