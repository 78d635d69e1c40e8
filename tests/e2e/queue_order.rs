//! The compensation list (the TUI's Compensation view, `compensation list`, the incident
//! report): pending entries first, oldest first, then the others, newest first, at most the
//! limit asked; read along indexes that stop at the limit, never by sorting the activity's
//! whole queue on every refresh (a million entries after an incident). Every backend.

use crate::harness::TestDb;
use crate::harness::plan::plan;
use seckill_console::db::compensation::{self, LIST_PENDING, LIST_RESOLVED, NewCompensation};
use seckill_console::db::{Arg, Db};
use seckill_console::domain::ActivityId;
use sqlx::Connection;

/// Six entries of requests `<activity>-r1` to `-r6` in that order, r2 and r4 resolved.
async fn queue(db: &Db, activity: &str) {
    for i in 1..=6 {
        let added = compensation::insert(
            db,
            &NewCompensation {
                request_id: format!("{activity}-r{i}"),
                activity_id: activity.into(),
                product_id: "p1".into(),
                user_id: format!("u{i}"),
                quantity: 1,
                reason: "test".into(),
            },
        )
        .await
        .expect("insert");
        assert!(added);
    }
    for rid in ["r2", "r4"] {
        db.execute(
            "UPDATE seckill_compensation SET status = 'returned' WHERE request_id = ?",
            &[Arg::Text(format!("{activity}-{rid}"))],
        )
        .await
        .expect("resolve");
    }
}

async fn listed(db: &Db, activity: &ActivityId, limit: i64) -> Vec<String> {
    compensation::list(db, activity, limit)
        .await
        .expect("list")
        .into_iter()
        .map(|c| format!("{}:{}", c.request_id, c.status))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_compensation_list_shows_pending_oldest_first_then_the_rest_newest_first() {
    for tdb in TestDb::all().await {
        let db = tdb.open().await;
        queue(&db, "qo").await;
        // Another activity's entries are not listed.
        queue(&db, "other").await;
        let id = ActivityId::parse("qo").expect("id");
        let all = [
            "qo-r1:pending",
            "qo-r3:pending",
            "qo-r5:pending",
            "qo-r6:pending",
            "qo-r4:returned",
            "qo-r2:returned",
        ];
        assert_eq!(listed(&db, &id, 10).await, all, "{}", tdb.name());
        assert_eq!(listed(&db, &id, 3).await, all[..3], "{}", tdb.name());
        assert_eq!(listed(&db, &id, 5).await, all[..5], "{}", tdb.name());
        db.close().await;
    }
}

/// The list's two reads with literal values, as the backend's EXPLAIN takes them.
fn explained(select: &str, activity: &str, limit: i64) -> String {
    let sql = format!("SELECT id, request_id, status FROM seckill_compensation {select}");
    sql.replacen('?', &format!("'{activity}'"), 1)
        .replacen('?', &limit.to_string(), 1)
}

/// What the backend's planner says of each of the list's reads: one line per plan step.
async fn plans(tdb: &TestDb) -> Vec<(String, String)> {
    if tdb.name() == "mysql" {
        // MariaDB's planner has no switch to turn sorting off and scans a table this small:
        // it is given a queue of an incident's shape, 20,000 entries, half of them resolved,
        // and statistics.
        let mut c = sqlx::MySqlConnection::connect(&tdb.url)
            .await
            .expect("mysql");
        sqlx::query(
            "SET STATEMENT max_recursive_iterations = 100000 FOR \
             INSERT INTO seckill_compensation \
             (request_id, activity_id, product_id, user_id, quantity, status, reason, created_at) \
             WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000) \
             SELECT CONCAT('bulk-', i), 'qo', 'p1', 'u', 1, \
                    IF(i % 2 = 0, 'returned', 'pending'), 'bulk', NOW() FROM n",
        )
        .execute(&mut c)
        .await
        .expect("bulk queue");
        sqlx::query("ANALYZE TABLE seckill_compensation")
            .execute(&mut c)
            .await
            .expect("analyze");
    }
    // A table this small is cheaper to scan and sort: the question is whether an index gives
    // the order at all, so PostgreSQL's planner is told to avoid both.
    let off = ["SET enable_seqscan = off", "SET enable_sort = off"];
    let mut out = Vec::new();
    for select in [LIST_PENDING, LIST_RESOLVED] {
        let sql = explained(select, "qo", 1000);
        let lines = plan(tdb, &sql, &off).await;
        out.extend(lines.into_iter().map(|l| (select.to_string(), l)));
    }
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn the_compensation_list_walks_indexes_and_sorts_nothing() {
    for tdb in TestDb::all().await {
        let db = tdb.open().await;
        queue(&db, "qo").await;
        db.close().await;
        let plans = plans(&tdb).await;
        assert!(!plans.is_empty(), "{}: no plan", tdb.name());
        for (select, line) in &plans {
            let sorts = match tdb.name() {
                "sqlite" => line.contains("TEMP B-TREE") || line.starts_with("SCAN"),
                "postgres" => line.contains("Sort") || line.contains("Seq Scan"),
                // The primary key walked in order is the whole table read, filtered.
                _ => {
                    line.contains("filesort")
                        || line.contains("key None")
                        || line.contains("PRIMARY")
                }
            };
            assert!(
                !sorts,
                "{}: `{select}` sorts or scans the table: {plans:#?}",
                tdb.name()
            );
        }
        // Each read seeks the activity's entries in an index, not the whole table's.
        for select in [LIST_PENDING, LIST_RESOLVED] {
            let seeks = plans.iter().any(|(s, line)| {
                s == select
                    && match tdb.name() {
                        "sqlite" => line.starts_with("SEARCH") && line.contains("(activity_id=?"),
                        "postgres" => line.contains("Index Cond") && line.contains("activity_id"),
                        _ => line.contains("key Some"),
                    }
            });
            assert!(
                seeks,
                "{}: `{select}` does not seek the activity: {plans:#?}",
                tdb.name()
            );
        }
    }
}
