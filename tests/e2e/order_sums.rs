//! The sums of live orders per product (every `status` and `reconcile`, the live view's check
//! once a minute) come from an index alone on every backend: the index of migration 0005 holds
//! the quantity, so no order's row is fetched (a million orders: 8.9 s on MariaDB before it).
//! Checked with each backend's plan, and with the sums themselves.

use crate::harness::TestDb;
use crate::harness::plan::plan;
use seckill_console::db::orders::{self, NewOrder, live_sums_sql, sums_by_status_sql};
use seckill_console::db::{Backend, Db};
use seckill_console::domain::ActivityId;
use seckill_console::domain::order::OrderStatus;

/// The sums' SQL with literal values, as the backend's EXPLAIN takes them.
fn explained(db: &Db, some: bool) -> String {
    live_sums_sql(db, some)
        .replacen('?', "'os'", 1)
        .replacen("(...)", "('p1', 'p2')", 1)
}

/// What the backend's planner says of the sums, of the activity and of an IN list of products,
/// and of the report's sums per product and status: one line per plan step.
async fn plans(tdb: &TestDb, db: &Db) -> Vec<String> {
    // Every PostgreSQL plan that reads the table is turned off: what is left is an index-only
    // scan if one can answer, else a disabled plan shows.
    let off = [
        "SET enable_seqscan = off",
        "SET enable_bitmapscan = off",
        "SET enable_indexscan = off",
    ];
    let mut out = Vec::new();
    for some in [false, true] {
        out.extend(plan(tdb, &explained(db, some), &off).await);
    }
    let report = sums_by_status_sql(db).replacen('?', "'os'", 1);
    out.extend(plan(tdb, &report, &off).await);
    out
}

/// Orders of activity `os`: `n` of p1 and p2 each, every third pending, one cancelled; and
/// orders of another activity, which are not summed.
async fn orders_of(db: &Db, n: usize) {
    let order = |a: &str, p: &str, i: usize, status| NewOrder {
        order_id: format!("o-{a}-{p}-{i}"),
        request_id: format!("r-{a}-{p}-{i}"),
        activity_id: a.into(),
        product_id: p.into(),
        user_id: format!("u{i}"),
        quantity: 2,
        status,
    };
    let mut batch = Vec::new();
    for i in 0..n {
        for p in ["p1", "p2"] {
            let status = if i % 3 == 0 {
                OrderStatus::PendingPayment
            } else {
                OrderStatus::Paid
            };
            batch.push(order("os", p, i, status));
        }
        batch.push(order("other", "p1", i, OrderStatus::Paid));
    }
    batch.push(order("os", "p1", n, OrderStatus::Cancelled));
    for chunk in batch.chunks(500) {
        orders::insert_with_outbox(db, chunk).await.expect("orders");
    }
}

/// The database of `tdb` holding [`orders_of`] 1,000 (and that `n`): MariaDB's planner weighs
/// the table's size, so a sale's shape, 3,000 orders, with statistics.
async fn with_sale_orders(tdb: &TestDb) -> (Db, usize) {
    let db = tdb.open().await;
    let n = 1000;
    orders_of(&db, n).await;
    if db.backend() == Backend::MySql {
        db.execute("ANALYZE TABLE seckill_order", &[])
            .await
            .expect("analyze");
    }
    (db, n)
}

#[tokio::test(flavor = "multi_thread")]
async fn live_order_sums_read_an_index_and_no_order_row() {
    for tdb in TestDb::all().await {
        let (db, n) = with_sale_orders(&tdb).await;
        let id = ActivityId::parse("os").expect("id");
        let sums = orders::sold(&db, &id, None).await.expect("sums");
        let want = 2 * n as i64;
        assert_eq!(
            (sums.get("p1"), sums.get("p2"), sums.len()),
            (Some(&want), Some(&want), 2),
            "{}",
            tdb.name()
        );
        let some = orders::sold(&db, &id, Some(&["p2"])).await.expect("sums");
        assert_eq!(
            some.into_iter().collect::<Vec<_>>(),
            [("p2".to_string(), want)]
        );

        let plans = plans(&tdb, &db).await;
        assert!(plans.len() >= 3, "{}: {plans:#?}", tdb.name());
        let index_only = |line: &String| match db.backend() {
            Backend::Sqlite => line.contains("USING COVERING INDEX seckill_order_sums"),
            Backend::Postgres => line.contains("Index Only Scan using seckill_order_sums"),
            Backend::MySql => {
                line.contains("key Some(\"seckill_order_sums\")") && line.contains("Using index")
            }
        };
        let reads_table = |line: &String| match db.backend() {
            Backend::Sqlite => line.starts_with("SCAN") || line.contains("USING INDEX"),
            Backend::Postgres => line.contains("Seq Scan") || line.contains("Index Scan using"),
            Backend::MySql => !index_only(line),
        };
        assert!(
            plans.iter().filter(|l| index_only(l)).count() >= 3,
            "{}: the sums do not read the index alone: {plans:#?}",
            tdb.name()
        );
        assert!(
            !plans.iter().any(reads_table),
            "{}: the sums read the orders table: {plans:#?}",
            tdb.name()
        );
        db.close().await;
    }
}

/// The live view's feed counts the part of its margin it read before each second, and of it
/// the orders that ended (an expiry committed late moves an order inside it without changing
/// how many it holds): from the index of migration 0006 alone on every backend, no order's
/// row fetched. Checked with each backend's plan, and with the counts themselves.
#[tokio::test(flavor = "multi_thread")]
async fn the_feeds_counts_read_an_index_and_no_order_row() {
    use seckill_console::db::cut::{self as db_cut, ChangeCount, Span, count_changes_sql};
    use std::ops::Bound::{Included, Unbounded};
    for tdb in TestDb::all().await {
        let (db, n) = with_sale_orders(&tdb).await;
        let id = ActivityId::parse("os").expect("id");
        let from = chrono::Utc::now() - chrono::Duration::hours(1);
        let mut tx = db_cut::begin(&db, &id).await.expect("snapshot");
        let counted =
            db_cut::count_changes(&mut tx, &id, &Span::between(Included(from), Unbounded))
                .await
                .expect("count");
        drop(tx);
        let want = ChangeCount {
            orders: 2 * n as i64 + 1,
            dead: 1,
        };
        assert_eq!(counted, want, "{}", tdb.name());

        let sql = count_changes_sql(&db, " AND updated_at >= ? AND updated_at < ?")
            .replacen('?', "'os'", 1)
            .replacen('?', "'2026-01-01 00:00:00'", 1)
            .replacen('?', "'2126-01-01 00:00:00'", 1);
        let off = [
            "SET enable_seqscan = off",
            "SET enable_bitmapscan = off",
            "SET enable_indexscan = off",
        ];
        let plans = plan(&tdb, &sql, &off).await;
        let index_only = |line: &String| match db.backend() {
            Backend::Sqlite => line.contains("USING COVERING INDEX seckill_order_changes"),
            Backend::Postgres => line.contains("Index Only Scan using seckill_order_changes"),
            Backend::MySql => {
                line.contains("key Some(\"seckill_order_changes\")") && line.contains("Using index")
            }
        };
        assert!(
            plans.iter().any(index_only),
            "{}: the feed's counts do not read the index alone: {plans:#?}",
            tdb.name()
        );
        db.close().await;
    }
}

/// A re-import never cuts a product's stock below the units its live orders hold, summed by the
/// same query along the same index: refused with exit 5, the message naming both figures, and
/// nothing written; a cut to exactly what is sold goes through. Every backend.
#[tokio::test(flavor = "multi_thread")]
async fn an_import_never_cuts_a_stock_below_its_live_orders() {
    use crate::harness::fixtures::{activity_toml, future_window, import, write_file};
    use crate::harness::{Console, RedisServer};
    let server = RedisServer::start();
    let dir = tempfile::tempdir().expect("tmp");
    let (s, e) = future_window();
    for tdb in TestDb::all().await {
        let name = tdb.name();
        let db = tdb.open().await;
        import(&db, "os", &[("p1", 10, 5), ("p2", 10, 5)], (s, e)).await;
        // p1: 2 live orders of 2 units each, one more cancelled (4 units live).
        orders_of(&db, 2).await;
        let c = Console::redis(&server.url(), &tdb.url);
        let file = |stock: i64| {
            let f = write_file(
                dir.path(),
                &format!("{name}-{stock}.toml"),
                &activity_toml("os", &[("p1", stock, 5), ("p2", 10, 5)], s, e),
            );
            f.to_str().expect("utf8 path").to_string()
        };
        let below = c.run(format!("--json activity import {}", file(3)));
        assert_eq!(below.code, 5, "{name}: {}", below.all_output());
        let msg = below.json_error()["error"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(
            msg.contains("products[p1].stock: 3 is below the 4 unit(s)"),
            "{name}: {msg}"
        );
        let stock = |db: &Db| {
            let db = db.clone();
            async move {
                seckill_console::db::activity::products(&db, &ActivityId::parse("os").expect("id"))
                    .await
                    .expect("products")
                    .into_iter()
                    .find(|p| p.product_id.as_str() == "p1")
                    .map(|p| p.initial_stock)
            }
        };
        assert_eq!(
            stock(&db).await,
            Some(10),
            "{name}: the refused import wrote"
        );
        c.run(format!("activity import {}", file(4))).expect_code(0);
        assert_eq!(stock(&db).await, Some(4), "{name}");
        db.close().await;
    }
}
