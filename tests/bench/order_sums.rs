//! Order sums benchmark: the units of live orders per product (`status`, `reconcile`, the live
//! view's check once a minute) of one activity of a million orders, on every database this
//! machine has: the console's query (`db::orders::live_sums_sql`) along the index migration
//! 0005 makes (`seckill_order_sums`, the quantity in it) and, in the same run on the same rows,
//! the build before's query (no index hint) along the index 0005 replaced
//! (`seckill_order_by_product`, each order's row fetched by its key). Three timed reads each
//! after one to warm the cache; the median, and the ratio new / old. Run with
//! `scripts/bench order_sums` (`BENCH_ORDERS` sets the number of orders).

#[path = "../e2e/harness/mod.rs"]
#[allow(unused_imports)]
mod harness;

use harness::TestDb;
use seckill_console::db::orders::live_sums_sql;
use seckill_console::db::{Arg, Backend, Db};
use std::time::Instant;

/// Orders `from..=to` of activity `sums`: half of them of one product, the rest over 99 others;
/// a third pending, the rest paid, one unit each. Written by the database itself.
fn fill_sql(backend: Backend, (from, to): (usize, usize)) -> Vec<String> {
    let cols = "order_id, request_id, activity_id, product_id, user_id, quantity, status, \
                created_at, updated_at";
    match backend {
        Backend::Postgres => vec![format!(
            "INSERT INTO seckill_order ({cols}) SELECT 'o' || i, 'r' || i || '-0123456789abcdef', \
             'sums', CASE WHEN i % 2 = 1 THEN 'p1' ELSE 'p' || (i % 100) END, 'u' || i, 1, \
             CASE WHEN i % 3 = 0 THEN 'pending_payment' ELSE 'paid' END, now(), now() \
             FROM generate_series({from}, {to}) i"
        )],
        Backend::MySql => vec![
            // One statement: the pool may run each on another connection.
            format!(
                "SET STATEMENT max_recursive_iterations = {} FOR INSERT INTO seckill_order ({cols}) WITH RECURSIVE n(i) AS (SELECT {from} UNION ALL \
                 SELECT i + 1 FROM n WHERE i < {to}) SELECT CONCAT('o', i), \
                 CONCAT('r', i, '-0123456789abcdef'), 'sums', IF(i % 2 = 1, 'p1', \
                 CONCAT('p', i % 100)), CONCAT('u', i), 1, IF(i % 3 = 0, 'pending_payment', \
                 'paid'), NOW(), NOW() FROM n",
                to - from + 1
            ),
        ],
        Backend::Sqlite => vec![format!(
            "INSERT INTO seckill_order ({cols}) WITH RECURSIVE n(i) AS (SELECT {from} UNION ALL \
             SELECT i + 1 FROM n WHERE i < {to}) SELECT 'o' || i, 'r' || i || '-0123456789abcdef', \
             'sums', CASE WHEN i % 2 = 1 THEN 'p1' ELSE 'p' || (i % 100) END, 'u' || i, 1, \
             CASE WHEN i % 3 = 0 THEN 'pending_payment' ELSE 'paid' END, \
             '2026-12-05T10:00:00.000000Z', '2026-12-05T10:00:00.000000Z' FROM n"
        )],
    }
}

/// Fresh statistics, and on PostgreSQL the visibility map an index-only scan relies on.
fn analyze_sql(backend: Backend) -> &'static str {
    match backend {
        Backend::Postgres => "VACUUM ANALYZE seckill_order",
        Backend::MySql => "ANALYZE TABLE seckill_order",
        Backend::Sqlite => "ANALYZE",
    }
}

async fn run(db: &Db, sql: &str) {
    db.execute(sql, &[])
        .await
        .unwrap_or_else(|e| panic!("`{sql}`: {e}"));
}

/// Milliseconds of three reads of the sums by `sql` after one untimed, and what they summed.
async fn time_sums(db: &Db, sql: &str) -> (Vec<f64>, i64) {
    let sum = || async {
        let rows: Vec<(String, i64)> = db
            .fetch_all_as(sql, &[Arg::from("sums")])
            .await
            .unwrap_or_else(|e| panic!("`{sql}`: {e}"));
        rows.iter().map(|(_, n)| n).sum::<i64>()
    };
    let units = sum().await;
    let mut ms = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        let got = sum().await;
        ms.push(t.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(got, units, "the sums changed between reads");
    }
    (ms, units)
}

const STEP: usize = 100_000;

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s[s.len() / 2]
}

fn main() {
    let n: usize = std::env::var("BENCH_ORDERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        println!("order sums benchmark: {n} orders of one activity, 100 products (half on one)");
        println!(
            "{:>9}  {:>10}  {:>26}  {:>26}  {:>9}",
            "database", "live units", "sums index ms (3 runs)", "old index ms (3 runs)", "new / old"
        );
        for tdb in TestDb::all().await {
            let db = tdb.open().await;
            let backend = db.backend();
            let t = Instant::now();
            // In steps of 100,000: each statement well inside the database layer's timeout.
            for from in (1..=n).step_by(STEP) {
                for sql in fill_sql(backend, (from, (from + STEP - 1).min(n))) {
                    run(&db, &sql).await;
                }
            }
            run(&db, analyze_sql(backend)).await;
            let filled = t.elapsed();
            // What the console sends, and what the build before sent (no index hint).
            let sql = live_sums_sql(&db, false);
            let (new, units) = time_sums(&db, &sql).await;
            let before = sql.replace(" FORCE INDEX (seckill_order_sums)", "");
            // The index migration 0005 replaced, on the same rows.
            let (drop_new, create_old) = match backend {
                Backend::MySql => (
                    "DROP INDEX seckill_order_sums ON seckill_order",
                    "CREATE INDEX seckill_order_by_product ON seckill_order (activity_id, product_id, status)",
                ),
                _ => (
                    "DROP INDEX seckill_order_sums",
                    "CREATE INDEX seckill_order_by_product ON seckill_order (activity_id, product_id, status)",
                ),
            };
            run(&db, create_old).await;
            run(&db, drop_new).await;
            run(&db, analyze_sql(backend)).await;
            let (old, units_old) = time_sums(&db, &before).await;
            assert_eq!(units, units_old, "the two indexes summed different units");
            let show = |v: &[f64]| {
                format!(
                    "{:.1} ({})",
                    median(v),
                    v.iter().map(|x| format!("{x:.0}")).collect::<Vec<_>>().join(", ")
                )
            };
            println!(
                "{:>9}  {:>10}  {:>26}  {:>26}  {:>9.3}",
                tdb.name(),
                units,
                show(&new),
                show(&old),
                median(&new) / median(&old)
            );
            eprintln!("  ({} filled in {:.1} s)", tdb.name(), filled.as_secs_f64());
            db.close().await;
        }
    });
}
