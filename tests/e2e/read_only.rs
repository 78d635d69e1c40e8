//! Read-only as a property of the layers: the database handle itself refuses a write sent to it
//! directly, on every backend, before anything reaches the server.

use crate::harness::TestDb;
use crate::harness::fixtures::audit_rows;
use seckill_console::ErrorKind;
use seckill_console::db::guard::as_refusal;
use seckill_console::db::tx::Arg;
use seckill_console::db::{Backend, Db, DbOptions, migrate};
use seckill_console::redact::SecretUrl;

#[tokio::test]
async fn a_read_only_database_handle_refuses_writes_sent_to_it_directly() {
    for t in TestDb::all().await {
        let url = SecretUrl::new(t.url.clone());
        let rw = Db::connect(&url, &DbOptions::default())
            .await
            .expect("open");
        migrate::migrate(&rw).await.expect("migrate");
        let before = audit_rows(&rw).await;
        rw.close().await;

        let opts = DbOptions {
            read_only: true,
            ..DbOptions::default()
        };
        let ro = Db::connect(&url, &opts).await.expect("open read-only");
        let refused = |what: &str, e: sqlx::Error| {
            assert!(
                as_refusal(&e).is_some(),
                "{}: {what} reached the server instead of being refused: {e}",
                t.name()
            );
            let mapped = ro.error(&e);
            assert_eq!(mapped.kind, ErrorKind::Refused, "{}: {what}", t.name());
            assert_eq!(mapped.kind.exit_code(), 5);
        };
        // A table that does not exist: had the statement been sent, the server would have
        // answered with its own error, not the console's refusal.
        let e = ro
            .execute("INSERT INTO no_such_table (a) VALUES (?)", &[Arg::Int(1)])
            .await
            .expect_err("an INSERT must be refused");
        refused("INSERT", e);
        let e = ro
            .execute(
                "UPDATE seckill_audit SET reason = ? WHERE id > ?",
                &[Arg::from("x"), Arg::Int(0)],
            )
            .await
            .expect_err("an UPDATE must be refused");
        refused("UPDATE", e);
        match ro.begin().await {
            Ok(_) => panic!("{}: a write transaction must be refused", t.name()),
            Err(e) => refused("BEGIN", e),
        }
        let mut tx = ro
            .begin_read()
            .await
            .expect("a read transaction is allowed");
        let e = tx
            .execute("DELETE FROM seckill_audit", &[])
            .await
            .expect_err("a DELETE in a read transaction must be refused");
        refused("DELETE in a read transaction", e);
        drop(tx);
        assert_eq!(
            audit_rows(&ro).await,
            before,
            "{}: nothing written",
            t.name()
        );
        ro.close().await;
    }
}

/// Build 18 of issue 19: the word check is not the only gate. The server's own read-only mode
/// refuses what reads like a SELECT and still writes (a sequence's `nextval`), and the handle
/// reports it as the same refusal (exit 5); the sequence did not move.
#[tokio::test]
async fn the_servers_read_only_mode_refuses_a_write_that_reads_like_a_select() {
    for t in TestDb::all().await {
        let url = SecretUrl::new(t.url.clone());
        let rw = Db::connect(&url, &DbOptions::default())
            .await
            .expect("open");
        let ro = Db::connect(
            &url,
            &DbOptions {
                read_only: true,
                ..DbOptions::default()
            },
        )
        .await
        .expect("open read-only");
        match rw.backend() {
            Backend::Sqlite => {
                // SQLite has no sequence: the connection's own switch is on, and only there.
                let on: Vec<(i64,)> = ro
                    .fetch_all_as("SELECT query_only FROM pragma_query_only", &[])
                    .await
                    .expect("pragma");
                assert_eq!(
                    on,
                    vec![(1,)],
                    "sqlite: query_only is off in read-only mode"
                );
                let off: Vec<(i64,)> = rw
                    .fetch_all_as("SELECT query_only FROM pragma_query_only", &[])
                    .await
                    .expect("pragma");
                assert_eq!(off, vec![(0,)]);
            }
            backend => {
                rw.execute("CREATE SEQUENCE ro_probe", &[])
                    .await
                    .expect("create sequence");
                let next = if backend == Backend::Postgres {
                    "SELECT nextval('ro_probe')"
                } else {
                    "SELECT NEXTVAL(ro_probe)"
                };
                let e = ro
                    .fetch_all_as::<(i64,)>(next, &[])
                    .await
                    .expect_err("nextval must be refused by the server");
                assert!(
                    as_refusal(&e).is_none(),
                    "{}: the word check caught it; this test is about the server",
                    t.name()
                );
                let mapped = ro.error(&e);
                assert_eq!(mapped.kind, ErrorKind::Refused, "{}: {e}", t.name());
                assert!(
                    mapped.message.contains("read-only mode"),
                    "{}",
                    mapped.message
                );
                let first: Vec<(i64,)> = rw.fetch_all_as(next, &[]).await.expect("nextval");
                assert_eq!(first, vec![(1,)], "{}: the sequence moved", t.name());
            }
        }
        ro.close().await;
        rw.close().await;
    }
}

/// Read-only creates no SQLite file and changes none: a missing file is exit 2 naming it, and
/// it is not created; a file in rollback-journal mode keeps that mode (switching it to WAL, as
/// a writable open does, is written into the file's header).
#[tokio::test]
async fn read_only_creates_no_sqlite_file_and_keeps_its_journal_mode() {
    use sqlx::Connection;
    let dir = tempfile::tempdir().expect("tmp");
    let missing = dir.path().join("absent.db");
    let url = format!("sqlite:{}", missing.display());
    let r = crate::harness::console(&["--read-only", "--db", &url, "activity", "list"]);
    r.expect_code(2);
    assert!(
        r.stderr.contains("read-only never creates one"),
        "{}",
        r.stderr
    );
    assert!(!missing.exists(), "read-only created {}", missing.display());

    let t = TestDb::sqlite();
    let rw = Db::connect(&SecretUrl::new(t.url.clone()), &DbOptions::default())
        .await
        .expect("open");
    migrate::migrate(&rw).await.expect("migrate");
    rw.close().await;
    let mode = |url: String| async move {
        let mut conn = sqlx::sqlite::SqliteConnection::connect(&url)
            .await
            .expect("connect");
        let (mode,): (String,) = sqlx::query_as("PRAGMA journal_mode")
            .fetch_one(&mut conn)
            .await
            .expect("journal mode");
        conn.close().await.expect("close");
        mode
    };
    {
        let mut conn = sqlx::sqlite::SqliteConnection::connect(&t.url)
            .await
            .expect("connect");
        sqlx::query("PRAGMA journal_mode=DELETE")
            .execute(&mut conn)
            .await
            .expect("rollback journal");
        conn.close().await.expect("close");
    }
    assert_eq!(mode(t.url.clone()).await, "delete");
    let r = crate::harness::console(&["--read-only", "--db", &t.url, "activity", "list"]);
    r.expect_code(0);
    assert_eq!(
        mode(t.url.clone()).await,
        "delete",
        "read-only switched the journal"
    );
}
