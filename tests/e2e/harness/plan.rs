//! What a backend's planner says of a query: one line per plan step, for tests that check a
//! read walks an index rather than the table or a sort.

use super::TestDb;
use sqlx::{Connection, Row};

/// The plan of `sql` (literal values, no placeholders) on the test database: SQLite's `EXPLAIN
/// QUERY PLAN` details; PostgreSQL's `EXPLAIN` lines after `pg_settings` (planner switches
/// turned off, so that a small table's scan does not hide whether an index could answer);
/// MariaDB's `key` and `Extra` of each table read (`key Some("name"); Using index`).
pub async fn plan(tdb: &TestDb, sql: &str, pg_settings: &[&str]) -> Vec<String> {
    let explain = |prefix: &str| sqlx::AssertSqlSafe(format!("{prefix} {sql}"));
    match tdb.name() {
        "sqlite" => {
            let mut c = sqlx::SqliteConnection::connect(&tdb.url)
                .await
                .expect("sqlite");
            sqlx::query(explain("EXPLAIN QUERY PLAN"))
                .fetch_all(&mut c)
                .await
                .expect("explain")
                .iter()
                .map(|r| r.get::<String, _>("detail"))
                .collect()
        }
        "postgres" => {
            let mut c = sqlx::PgConnection::connect(&tdb.url)
                .await
                .expect("postgres");
            for set in pg_settings {
                sqlx::query(sqlx::AssertSqlSafe(set.to_string()))
                    .execute(&mut c)
                    .await
                    .expect("set");
            }
            sqlx::query(explain("EXPLAIN"))
                .fetch_all(&mut c)
                .await
                .expect("explain")
                .iter()
                .map(|r| r.get::<String, _>(0))
                .collect()
        }
        _ => {
            let mut c = sqlx::MySqlConnection::connect(&tdb.url)
                .await
                .expect("mysql");
            sqlx::query(explain("EXPLAIN"))
                .fetch_all(&mut c)
                .await
                .expect("explain")
                .iter()
                .map(|r| {
                    let key: Option<String> = r.try_get("key").ok().flatten();
                    let extra: Option<String> = r.try_get("Extra").ok().flatten();
                    format!("key {key:?}; {}", extra.unwrap_or_default())
                })
                .collect()
        }
    }
}
