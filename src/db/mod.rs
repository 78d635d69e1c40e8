//! The database layer: one handle over SQLite (the embedded default), PostgreSQL and
//! MySQL/MariaDB. Queries are written once with `?` placeholders; PostgreSQL gets `$n`.

pub mod activity;
pub mod audit;
pub mod compensation;
pub mod conform;
pub mod cut;
pub mod guard;
pub mod migrate;
pub mod orders;
pub mod outbox;
pub mod stamp;
pub mod tx;

pub use tx::{Arg, IN_CHUNK, IN_LIST, Tx};

use crate::error::{Error, Result, Service};
use crate::redact::SecretUrl;
use sqlx::AssertSqlSafe;
use sqlx::mysql::{MySqlConnectOptions, MySqlPool, MySqlPoolOptions};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use std::str::FromStr;
use std::time::Duration;

/// Which SQL dialect a handle speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Backend {
    Sqlite,
    Postgres,
    MySql,
}

impl Backend {
    /// The directory under `migrations/`.
    pub fn dir(self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
            Backend::MySql => "mysql",
        }
    }
}

#[derive(Clone)]
pub(crate) enum Pool {
    Sqlite(SqlitePool),
    Postgres(PgPool),
    MySql(MySqlPool),
}

/// Runs the same code against whichever pool the handle holds. The body is compiled once per
/// backend, so it may only use what all three sqlx drivers offer.
macro_rules! on_pool {
    ($db:expr, $pool:ident => $body:expr) => {
        match &$db.pool {
            $crate::db::Pool::Sqlite($pool) => $body,
            $crate::db::Pool::Postgres($pool) => $body,
            $crate::db::Pool::MySql($pool) => $body,
        }
    };
}
pub(crate) use on_pool;

/// Options for opening the database.
#[derive(Clone, Debug)]
pub struct DbOptions {
    pub connect_timeout: Duration,
    /// Longest wait for one statement (or transaction step).
    pub query_timeout: Duration,
    pub max_connections: u32,
    /// When set, every write is refused before it is sent.
    pub read_only: bool,
}

impl Default for DbOptions {
    fn default() -> Self {
        DbOptions {
            connect_timeout: Duration::from_secs(3),
            query_timeout: Duration::from_secs(15),
            max_connections: 8,
            read_only: false,
        }
    }
}

/// The database handle, cheap to clone.
#[derive(Clone)]
pub struct Db {
    pub(crate) pool: Pool,
    backend: Backend,
    label: String,
    read_only: bool,
    pub(crate) query_timeout: Duration,
    /// SQLite only: one writer at a time within this process. SQLite has one write lock per
    /// file, and writers that meet on it wait in its busy handler, which sleeps up to 100 ms
    /// between tries: `load`'s order writer and payment step lost most of their time there.
    /// Queued here they take turns at once; other processes still meet on the busy handler.
    pub(crate) write_gate: Option<std::sync::Arc<tokio::sync::Mutex<()>>>,
}

/// The file a `sqlite:` URL names (None for another backend).
pub fn sqlite_path(url: &SecretUrl) -> Option<std::path::PathBuf> {
    let raw = url.expose();
    raw.starts_with("sqlite:")
        .then(|| std::path::PathBuf::from(sqlite_path_of(raw)))
}

/// The path part of a `sqlite:` URL: after the scheme and its slashes, before the options.
fn sqlite_path_of(raw: &str) -> &str {
    raw.trim_start_matches("sqlite:")
        .trim_start_matches("//")
        .split('?')
        .next()
        .unwrap_or("")
}

impl Db {
    /// Opens a pool and checks that the server answers, within the connect timeout.
    pub async fn connect(url: &SecretUrl, opts: &DbOptions) -> Result<Db> {
        let raw = url.expose();
        let label = url.redacted().to_string();
        let bad = |e: sqlx::Error| {
            Error::bad_input(format!(
                "database URL '{label}' is not usable: {}; use sqlite:PATH, postgres://... or mysql://...",
                describe(&e)
            ))
        };
        let timeout = opts.connect_timeout;
        let (pool, backend) = if raw.starts_with("sqlite:") {
            // An in-memory database lives per connection: the schema and the data would vanish
            // between two statements of one command.
            let path = sqlite_path_of(raw);
            if path.is_empty() || path == ":memory:" || raw.contains("mode=memory") {
                return Err(Error::bad_input(format!(
                    "database URL '{label}' names no file: use sqlite:PATH (an in-memory database cannot be shared by the console's connections)"
                )));
            }
            // A file in a directory that does not exist is a wrong path, not a database that
            // is down: exit 2 naming the directory (SQLite creates the file, not its folder).
            let dir = std::path::Path::new(path)
                .parent()
                .filter(|d| !d.as_os_str().is_empty());
            if let Some(dir) = dir
                && !dir.is_dir()
            {
                return Err(Error::bad_input(format!(
                    "database URL '{label}': the directory {} does not exist; create it or give another path",
                    dir.display()
                )));
            }
            // Read-only creates no file and leaves a file's journal mode as it is (switching to
            // WAL is written into the file's header).
            if opts.read_only && !std::path::Path::new(path).exists() {
                return Err(Error::bad_input(format!(
                    "database URL '{label}': there is no database file at {path}, and read-only never creates one; give the file the console uses, or run once without --read-only"
                )));
            }
            let mut options = SqliteConnectOptions::from_str(raw)
                .map_err(bad)?
                .create_if_missing(!opts.read_only)
                .synchronous(SqliteSynchronous::Normal)
                .busy_timeout(Duration::from_secs(10))
                .foreign_keys(true)
                // SQLite runs on a worker thread that hands rows over through a channel;
                // room for a whole page means one hand-over per page rather than one per
                // fifty rows (the live view reads thousands of changed orders a second).
                .row_buffer_size(1024)
                // Read-only is the server's rule too, not only the console's word check.
                .pragma("query_only", if opts.read_only { "ON" } else { "OFF" });
            if !opts.read_only {
                options = options.journal_mode(SqliteJournalMode::Wal);
            }
            let pool = SqlitePoolOptions::new()
                .max_connections(opts.max_connections)
                .acquire_timeout(timeout)
                .connect_lazy_with(options);
            (Pool::Sqlite(pool), Backend::Sqlite)
        } else if raw.starts_with("postgres://") || raw.starts_with("postgresql://") {
            let mut options = PgConnectOptions::from_str(raw).map_err(bad)?;
            if opts.read_only {
                // Every transaction of the session read-only: the server refuses a write the
                // console's word check would let through (SELECT ... FOR UPDATE, a function).
                options = options.options([("default_transaction_read_only", "on")]);
            }
            probe_connect::<sqlx::PgConnection>(&options, &label, timeout).await?;
            let pool = PgPoolOptions::new()
                .max_connections(opts.max_connections)
                .acquire_timeout(timeout)
                .connect_lazy_with(options);
            (Pool::Postgres(pool), Backend::Postgres)
        } else if raw.starts_with("mysql://") || raw.starts_with("mariadb://") {
            let fixed = raw.replacen("mariadb://", "mysql://", 1);
            let options = MySqlConnectOptions::from_str(&fixed).map_err(bad)?;
            probe_connect::<sqlx::MySqlConnection>(&options, &label, timeout).await?;
            let read_only = opts.read_only;
            let pool = MySqlPoolOptions::new()
                .max_connections(opts.max_connections)
                .acquire_timeout(timeout)
                .after_connect(move |conn, _| {
                    Box::pin(async move {
                        if read_only {
                            // The server's own read-only mode, beside the console's check.
                            sqlx::Executor::execute(
                                &mut *conn,
                                "SET SESSION TRANSACTION READ ONLY",
                            )
                            .await?;
                        }
                        Ok(())
                    })
                })
                .connect_lazy_with(options);
            (Pool::MySql(pool), Backend::MySql)
        } else {
            return Err(Error::bad_input(format!(
                "database URL '{label}' has an unknown scheme: use sqlite:PATH, postgres://... or mysql://..."
            )));
        };
        let write_gate = (backend == Backend::Sqlite).then(Default::default);
        let db = Db {
            pool,
            backend,
            label,
            read_only: opts.read_only,
            query_timeout: opts.query_timeout,
            write_gate,
        };
        db.ping(timeout).await?;
        Ok(db)
    }

    async fn ping(&self, timeout: Duration) -> Result<()> {
        let probe = async {
            on_pool!(self, pool => sqlx::query("SELECT 1").execute(pool).await.map(|_| ()))
        };
        match tokio::time::timeout(timeout + Duration::from_millis(200), probe).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(self.error(&e)),
            Err(_) => Err(Error::unreachable(
                Service::Database,
                format!(
                    "database at {} did not answer within {} ms",
                    self.label,
                    timeout.as_millis()
                ),
            )),
        }
    }

    /// One round trip to prove the database answers now (before a write elsewhere that must
    /// be audited here).
    pub async fn check(&self) -> Result<()> {
        self.ping(self.query_timeout).await
    }

    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// The redacted URL.
    pub fn label(&self) -> &str {
        &self.label
    }

    pub fn read_only(&self) -> bool {
        self.read_only
    }

    /// The statement in this backend's placeholder style.
    pub(crate) fn sql(&self, query: &str) -> AssertSqlSafe<String> {
        AssertSqlSafe(match self.backend {
            Backend::Postgres => numbered_placeholders(query),
            _ => query.to_string(),
        })
    }

    /// `CAST(SUM(expr) AS <64-bit integer>)`: SUM is NUMERIC on PostgreSQL and DECIMAL on MySQL.
    pub(crate) fn sum_i64(&self, expr: &str) -> String {
        match self.backend {
            Backend::MySql => format!("CAST(COALESCE(SUM({expr}), 0) AS SIGNED)"),
            _ => format!("CAST(COALESCE(SUM({expr}), 0) AS BIGINT)"),
        }
    }

    /// `INSERT ... ` that skips rows whose unique key exists, in this backend's words.
    pub(crate) fn insert_ignore(&self, into: &str) -> String {
        match self.backend {
            Backend::Sqlite => format!("INSERT OR IGNORE INTO {into}"),
            Backend::MySql => format!("INSERT IGNORE INTO {into}"),
            Backend::Postgres => format!("INSERT INTO {into} ON CONFLICT DO NOTHING"),
        }
    }

    /// Maps a driver error to the console's kinds, naming the redacted URL.
    pub fn error(&self, err: &sqlx::Error) -> Error {
        if self.read_only
            && let sqlx::Error::Database(e) = err
            && is_read_only_code(e.code().as_deref())
        {
            // The server's own read-only mode caught a write the word check let through
            // (a sequence's nextval, a locking read): the same refusal, exit 5.
            return Error::refused(format!(
                "read-only mode: the database at {} refused a write ({}); run without --read-only to change anything",
                self.label,
                describe(err)
            ));
        }
        db_error(&self.label, err)
    }

    /// Closes the pool (SQLite checkpoints its WAL).
    pub async fn close(&self) {
        on_pool!(self, pool => pool.close().await)
    }
}

/// Count and age of the `pending` rows of an activity in a queue table (compensation,
/// outbox): the count stops at [`QUEUE_COUNT_CAP`](crate::domain::alerts::QUEUE_COUNT_CAP), the age is one seek along the index on
/// `(activity_id, status, created_at)`, so a backed-up queue costs no more than a short one.
pub(crate) async fn pending_summary(
    db: &Db,
    table: &'static str,
    activity: &crate::domain::ActivityId,
) -> Result<crate::domain::alerts::QueueSummary> {
    use crate::domain::alerts::{QUEUE_COUNT_CAP, QueueSummary};
    let args = [Arg::from(activity.as_str())];
    let counted: Option<(i64,)> = db
        .fetch_optional_as(
            &format!(
                "SELECT COUNT(*) FROM (SELECT 1 AS one FROM {table} WHERE activity_id = ? \
                 AND status = 'pending' LIMIT {}) capped",
                QUEUE_COUNT_CAP + 1
            ),
            &args,
        )
        .await
        .map_err(|e| db.error(&e))?;
    // Read loosely: a time another service wrote in a form no decoder reads is the oldest (as
    // the list shows it), never a failure of every status, reconcile and live view.
    let oldest: Option<(stamp::LooseTime,)> = db
        .fetch_optional_as(
            &format!(
                "SELECT created_at FROM {table} WHERE activity_id = ? AND status = 'pending' \
                 ORDER BY created_at LIMIT 1"
            ),
            &args,
        )
        .await
        .map_err(|e| db.error(&e))?;
    let counted = counted.map_or(0, |(n,)| n);
    Ok(QueueSummary {
        pending: counted.min(QUEUE_COUNT_CAP),
        more: counted > QUEUE_COUNT_CAP,
        oldest_secs: oldest.map(|(t,)| {
            let at = t.0.unwrap_or(chrono::DateTime::<chrono::Utc>::MIN_UTC);
            (chrono::Utc::now() - at).num_seconds().max(0)
        }),
    })
}

/// Opens and closes one connection so an unreachable server is reported with its real cause
/// (a pool only says that it timed out).
async fn probe_connect<C: sqlx::Connection>(
    options: &<C as sqlx::Connection>::Options,
    label: &str,
    timeout: Duration,
) -> Result<()> {
    match tokio::time::timeout(timeout, C::connect_with(options)).await {
        Ok(Ok(conn)) => {
            let _ = conn.close().await;
            Ok(())
        }
        Ok(Err(e)) => Err(db_error(label, &e)),
        Err(_) => Err(Error::unreachable(
            Service::Database,
            format!(
                "database at {label} did not answer within {} ms",
                timeout.as_millis()
            ),
        )),
    }
}

/// Rewrites `?` placeholders as `$1, $2, ...`, leaving quoted text alone.
pub fn numbered_placeholders(query: &str) -> String {
    let mut out = String::with_capacity(query.len() + 16);
    let mut n = 0;
    let mut quote: Option<char> = None;
    for c in query.chars() {
        match quote {
            Some(q) => {
                if c == q {
                    quote = None;
                }
                out.push(c);
            }
            None if c == '\'' || c == '"' => {
                quote = Some(c);
                out.push(c);
            }
            None if c == '?' => {
                n += 1;
                out.push('$');
                out.push_str(&n.to_string());
            }
            None => out.push(c),
        }
    }
    out
}

/// One line about a driver error, never with a password.
pub fn describe(err: &sqlx::Error) -> String {
    let text = err.to_string();
    let line = text.lines().next().unwrap_or("").trim();
    crate::redact::redact_text(without_source_line(line))
}

/// PostgreSQL's errors carry the line of the server's C source that raised them ("... at line
/// 768"): noise to an operator, so it is left out.
fn without_source_line(line: &str) -> &str {
    match line.rsplit_once(" at line ") {
        Some((head, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => head,
        _ => line,
    }
}

/// Maps a driver error: I/O, TLS and pool timeouts are `unavailable` (exit 3).
pub fn db_error(label: &str, err: &sqlx::Error) -> Error {
    if let Some(refusal) = guard::as_refusal(err) {
        return Error::refused(refusal.to_string());
    }
    let detail = describe(err);
    match err {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed
        | sqlx::Error::Protocol(_) => Error::unreachable(
            Service::Database,
            format!("database at {label} is unreachable: {detail}"),
        ),
        sqlx::Error::Configuration(_) => {
            Error::bad_input(format!("database URL '{label}' is not usable: {detail}"))
        }
        // SQLITE_NOTADB: the URL names a file that is not a SQLite database.
        sqlx::Error::Database(db) if db.code().as_deref() == Some("26") => Error::bad_input(
            format!("database at {label} is not a SQLite database: {detail}; check --db"),
        ),
        sqlx::Error::Database(db) if is_unavailable_code(db.code().as_deref()) => {
            Error::unreachable(
                Service::Database,
                format!("database at {label} is not available: {detail}"),
            )
        }
        _ => Error::internal(format!("database at {label} failed: {detail}")),
    }
}

/// Server error codes of a write refused by a read-only transaction or connection
/// (PostgreSQL and MariaDB's SQLSTATE, MariaDB's number, SQLite's `SQLITE_READONLY`).
fn is_read_only_code(code: Option<&str>) -> bool {
    matches!(code, Some("25006" | "1792" | "8"))
}

/// Server error codes that mean "cannot use the database now" rather than "bad statement":
/// missing database, authentication, shutting down, too many connections, read-only.
fn is_unavailable_code(code: Option<&str>) -> bool {
    matches!(
        code,
        Some(
            "3D000"
                | "28000"
                | "28P01"
                | "57P01"
                | "57P02"
                | "57P03"
                | "53300"
                | "25006"
                | "1049"
                | "1045"
                | "1040"
                | "1053"
                | "1290"
                | "5"
                | "6"
                | "8"
                | "14"
                | "261"
                | "517"
        )
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A SQLite file in a directory of its own (kept while the directory lives).
    fn temp_sqlite() -> (tempfile::TempDir, SecretUrl) {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = SecretUrl::new(format!("sqlite:{}", dir.path().join("t.db").display()));
        (dir, url)
    }

    #[test]
    fn the_server_source_line_is_left_out_of_errors() {
        assert_eq!(
            without_source_line("duplicate key value violates unique constraint \"k\" at line 664"),
            "duplicate key value violates unique constraint \"k\""
        );
        assert_eq!(
            without_source_line("syntax error at line x"),
            "syntax error at line x"
        );
        assert_eq!(without_source_line("no line here"), "no line here");
    }

    #[test]
    fn numbers_placeholders_outside_quotes() {
        assert_eq!(
            numbered_placeholders("SELECT ? , '?' FROM t WHERE a = ? AND b = \"?\""),
            "SELECT $1 , '?' FROM t WHERE a = $2 AND b = \"?\""
        );
    }

    /// SQLite is built without its allocation statistics (`.cargo/config.toml`): with them, a
    /// read of many rows has sqlx's worker thread and the console's fight over one mutex for
    /// every value.
    #[tokio::test]
    async fn sqlite_is_built_without_allocation_statistics() {
        let (_dir, url) = temp_sqlite();
        let db = Db::connect(&url, &DbOptions::default())
            .await
            .expect("open");
        let options: Vec<(String,)> = db
            .fetch_all_as("PRAGMA compile_options", &[])
            .await
            .expect("compile options");
        assert!(
            options.iter().any(|(o,)| o == "DEFAULT_MEMSTATUS=0"),
            "built with {options:?}: LIBSQLITE3_FLAGS from .cargo/config.toml did not reach libsqlite3-sys"
        );
        db.close().await;
    }

    /// Build 4 of issue 13: the handle itself refuses writes in read-only mode, whoever calls it.
    #[tokio::test]
    async fn a_read_only_handle_refuses_every_write_sent_to_it_directly() {
        let (_dir, url) = temp_sqlite();
        let rw = Db::connect(&url, &DbOptions::default())
            .await
            .expect("open");
        rw.execute("CREATE TABLE t (a BIGINT NOT NULL)", &[])
            .await
            .expect("create");
        rw.execute("INSERT INTO t (a) VALUES (?)", &[tx::Arg::Int(1)])
            .await
            .expect("insert");
        rw.close().await;

        let opts = DbOptions {
            read_only: true,
            ..DbOptions::default()
        };
        let ro = Db::connect(&url, &opts).await.expect("open read-only");
        let refused = |e: sqlx::Error| {
            assert!(
                guard::as_refusal(&e).is_some(),
                "not the console's refusal: {e}"
            );
            let mapped = ro.error(&e);
            assert_eq!(mapped.kind, crate::error::ErrorKind::Refused);
            assert!(
                mapped.message.contains("read-only mode"),
                "{}",
                mapped.message
            );
        };
        let insert = ro
            .execute("INSERT INTO t (a) VALUES (?)", &[tx::Arg::Int(2)])
            .await
            .expect_err("an INSERT must be refused");
        refused(insert);
        let delete = ro
            .fetch_all_as::<(i64,)>("DELETE FROM t RETURNING a", &[])
            .await
            .expect_err("a DELETE sent as a query must be refused");
        refused(delete);
        match ro.begin().await {
            Ok(_) => panic!("a write transaction must be refused"),
            Err(e) => refused(e),
        }
        let mut read = ro
            .begin_read()
            .await
            .expect("a read transaction is allowed");
        let in_tx = read
            .execute("UPDATE t SET a = 3", &[])
            .await
            .expect_err("a write inside a read transaction must be refused");
        refused(in_tx);
        drop(read);
        let rows: Vec<(i64,)> = ro
            .fetch_all_as("SELECT a FROM t", &[])
            .await
            .expect("reads pass");
        assert_eq!(rows, vec![(1,)], "nothing was written");
        ro.close().await;
    }
}
