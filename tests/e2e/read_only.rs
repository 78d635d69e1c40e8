//! Read-only as a property of the layers: the database handle itself refuses a write sent to it
//! directly, on every backend, before anything reaches the server; and the command line names a
//! bad value that came from an environment variable by that variable.

use crate::harness::{TestDb, console_env};
use seckill_console::ErrorKind;
use seckill_console::db::guard::as_refusal;
use seckill_console::db::tx::Arg;
use seckill_console::db::{Db, DbOptions, migrate};
use seckill_console::redact::SecretUrl;

async fn audit_rows(db: &Db) -> i64 {
    let rows: Vec<(i64,)> = db
        .fetch_all_as("SELECT COUNT(*) FROM seckill_audit", &[])
        .await
        .expect("count");
    rows[0].0
}

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

#[test]
fn a_bad_value_from_the_environment_is_named_by_its_variable() {
    let r = console_env(&["status", "a1"], &[("SECKILL_GRACE_SECS", "soon")]);
    r.expect_code(2);
    assert!(
        r.stderr.contains("'soon'") && r.stderr.contains("SECKILL_GRACE_SECS"),
        "{}",
        r.stderr
    );
    let r = console_env(
        &["status", "a1"],
        &[("SECKILL_READ_ONLY", "maybe"), ("SECKILL_JSON", "1")],
    );
    r.expect_code(2);
    let e = r.json_error();
    assert_eq!(e["kind"], "bad_input");
    let msg = e["error"].as_str().unwrap_or_default();
    assert!(
        msg.contains("'maybe'") && msg.contains("SECKILL_READ_ONLY"),
        "{msg}"
    );
    // The same bad value typed as a flag is named as the flag only.
    let r = console_env(&["--grace-secs", "soon", "status", "a1"], &[]);
    r.expect_code(2);
    assert!(!r.stderr.contains("environment variable"), "{}", r.stderr);
}

#[test]
fn help_shows_the_variables_but_never_their_values() {
    let r = console_env(
        &["load", "--help"],
        &[("SECKILL_REDIS_URL", "redis://ops:hunter2@10.0.0.9:6379")],
    );
    r.expect_code(0);
    assert!(r.stdout.contains("Global options:"), "{}", r.stdout);
    assert!(
        r.stdout.contains("[env: SECKILL_REDIS_URL]"),
        "{}",
        r.stdout
    );
    assert!(!r.all_output().contains("hunter2"));
    // The command's own options come before the global ones.
    let own = r.stdout.find("--buyers").expect("load's own option");
    let global = r.stdout.find("Global options:").expect("heading");
    assert!(own < global, "{}", r.stdout);
}
