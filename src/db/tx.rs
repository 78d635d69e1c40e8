//! Backend-neutral writes: statements with `?` placeholders and a list of [`Arg`]s, run on the
//! pool or inside a transaction. Reads stay typed per query (see `on_pool!`).

use super::{Backend, Db, Pool};
use chrono::{DateTime, Utc};
use sqlx::mysql::MySqlRow;
use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;
use sqlx::{FromRow, MySql, Postgres, Sqlite, Transaction};

/// A row type every backend can decode (tuples of i64, String, `DateTime<Utc>`, Options).
pub trait AnyRow:
    Send
    + Unpin
    + for<'r> FromRow<'r, SqliteRow>
    + for<'r> FromRow<'r, PgRow>
    + for<'r> FromRow<'r, MySqlRow>
{
}
impl<T> AnyRow for T where
    T: Send
        + Unpin
        + for<'r> FromRow<'r, SqliteRow>
        + for<'r> FromRow<'r, PgRow>
        + for<'r> FromRow<'r, MySqlRow>
{
}

/// A bind value that all three backends encode.
#[derive(Clone, Debug, PartialEq)]
pub enum Arg {
    Int(i64),
    Text(String),
    OptText(Option<String>),
    Time(DateTime<Utc>),
    OptTime(Option<DateTime<Utc>>),
}

impl From<i64> for Arg {
    fn from(v: i64) -> Self {
        Arg::Int(v)
    }
}
impl From<&str> for Arg {
    fn from(v: &str) -> Self {
        Arg::Text(v.to_string())
    }
}
impl From<String> for Arg {
    fn from(v: String) -> Self {
        Arg::Text(v)
    }
}
impl From<Option<String>> for Arg {
    fn from(v: Option<String>) -> Self {
        Arg::OptText(v)
    }
}
impl From<DateTime<Utc>> for Arg {
    fn from(v: DateTime<Utc>) -> Self {
        Arg::Time(v)
    }
}

/// Binds every arg to a query of any backend.
macro_rules! bind_args {
    ($query:expr, $args:expr) => {{
        let mut q = $query;
        for a in $args {
            q = match a {
                $crate::db::tx::Arg::Int(v) => q.bind(*v),
                $crate::db::tx::Arg::Text(s) => q.bind(s.as_str()),
                $crate::db::tx::Arg::OptText(s) => q.bind(s.as_deref()),
                $crate::db::tx::Arg::Time(t) => q.bind($crate::db::stamp::DbTime(*t)),
                $crate::db::tx::Arg::OptTime(t) => q.bind(t.map($crate::db::stamp::DbTime)),
            };
        }
        q
    }};
}

enum Inner {
    Sqlite(Transaction<'static, Sqlite>),
    Postgres(Transaction<'static, Postgres>),
    MySql(Transaction<'static, MySql>),
}

/// An open transaction. Dropped without `commit`, it rolls back: nothing half-written.
pub struct Tx {
    inner: Inner,
    db: Db,
    /// This process's SQLite write turn, held until commit or rollback (see `Db::write_gate`).
    _turn: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl Db {
    /// Begins a write transaction (`BEGIN IMMEDIATE` on SQLite, so two writers queue on the busy
    /// timeout instead of failing when a read lock cannot be upgraded).
    pub async fn begin(&self) -> Result<Tx, sqlx::Error> {
        if self.read_only {
            return Err(super::guard::refusal("BEGIN a write transaction"));
        }
        let (inner, turn) = timed(self.query_timeout, async {
            let turn = self.write_turn().await;
            let inner = match &self.pool {
                Pool::Sqlite(p) => Inner::Sqlite(p.begin_with("BEGIN IMMEDIATE").await?),
                Pool::Postgres(p) => Inner::Postgres(p.begin().await?),
                Pool::MySql(p) => Inner::MySql(p.begin().await?),
            };
            Ok((inner, turn))
        })
        .await?;
        Ok(Tx {
            inner,
            db: self.clone(),
            _turn: turn,
        })
    }

    /// Waits for this process's SQLite write turn (none on the other backends).
    async fn write_turn(&self) -> Option<tokio::sync::OwnedMutexGuard<()>> {
        match &self.write_gate {
            Some(gate) => Some(gate.clone().lock_owned().await),
            None => None,
        }
    }

    /// Begins a read-only transaction that sees one snapshot of the database for all its
    /// statements: REPEATABLE READ on PostgreSQL, a consistent snapshot on MySQL/MariaDB (the
    /// InnoDB default isolation), and on SQLite (WAL) a read transaction, whose snapshot is
    /// taken by its first read. Nothing is ever written through it; dropped, it ends.
    pub async fn begin_read(&self) -> Result<Tx, sqlx::Error> {
        let inner = timed(self.query_timeout, async {
            Ok(match &self.pool {
                Pool::Sqlite(p) => Inner::Sqlite(p.begin_with("BEGIN DEFERRED").await?),
                Pool::Postgres(p) => Inner::Postgres(
                    p.begin_with("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                        .await?,
                ),
                Pool::MySql(p) => Inner::MySql(
                    p.begin_with("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
                        .await?,
                ),
            })
        })
        .await?;
        Ok(Tx {
            inner,
            db: self.clone(),
            _turn: None,
        })
    }

    /// Runs one write statement outside a transaction; returns the rows affected.
    pub async fn execute(&self, query: &str, args: &[Arg]) -> Result<u64, sqlx::Error> {
        super::guard::check(self.read_only, query)?;
        let sql = self.sql(query);
        timed(self.query_timeout, async {
            let _turn = self.write_turn().await;
            super::on_pool!(self, pool => {
                bind_args!(sqlx::query(sql), args)
                    .execute(pool)
                    .await
                    .map(|r| r.rows_affected())
            })
        })
        .await
    }
}

/// Values per IN list: far below every backend's limit on bound parameters.
pub const IN_CHUNK: usize = 500;

/// The marker an IN-list query holds where [`Db::fetch_all_in`] puts the placeholders.
pub const IN_LIST: &str = "(...)";

/// `query` with its [`IN_LIST`] marker replaced by `n` placeholders.
fn with_in_list(query: &str, n: usize) -> String {
    query.replacen(IN_LIST, &format!("({})", vec!["?"; n].join(", ")), 1)
}

/// `args`, then the values of one chunk.
fn chunk_args(args: &[Arg], chunk: &[&str]) -> Vec<Arg> {
    let mut all = args.to_vec();
    all.extend(chunk.iter().map(|v| Arg::from(*v)));
    all
}

/// The statements `query` becomes over `values`: one per [`IN_CHUNK`], each with its SQL and
/// its arguments (`args`, then the chunk's values).
fn in_chunks<'a>(
    query: &'a str,
    args: &'a [Arg],
    values: &'a [&'a str],
) -> impl Iterator<Item = (String, Vec<Arg>)> + 'a {
    values
        .chunks(IN_CHUNK)
        .map(move |chunk| (with_in_list(query, chunk.len()), chunk_args(args, chunk)))
}

impl Db {
    /// Runs `query` once per [`IN_CHUNK`] of `values`, each chunk bound after `args` in place
    /// of the query's [`IN_LIST`] marker; the rows of every chunk.
    pub async fn fetch_all_in<T: AnyRow>(
        &self,
        query: &str,
        args: &[Arg],
        values: &[&str],
    ) -> Result<Vec<T>, sqlx::Error> {
        let mut rows = Vec::new();
        for (sql, args) in in_chunks(query, args, values) {
            rows.extend(self.fetch_all_as(&sql, &args).await?);
        }
        Ok(rows)
    }

    /// Like [`Db::fetch_all_in`] for a write statement; the rows affected in total.
    pub async fn execute_in(
        &self,
        query: &str,
        args: &[Arg],
        values: &[&str],
    ) -> Result<u64, sqlx::Error> {
        let mut changed = 0;
        for (sql, args) in in_chunks(query, args, values) {
            changed += self.execute(&sql, &args).await?;
        }
        Ok(changed)
    }

    /// Runs a query and decodes every row as `T`.
    pub async fn fetch_all_as<T: AnyRow>(
        &self,
        query: &str,
        args: &[Arg],
    ) -> Result<Vec<T>, sqlx::Error> {
        super::guard::check(self.read_only, query)?;
        let sql = self.sql(query);
        timed(self.query_timeout, async {
            super::on_pool!(self, pool => {
                bind_args!(sqlx::query_as::<_, T>(sql), args).fetch_all(pool).await
            })
        })
        .await
    }

    /// Runs a query and decodes the first row, if any, as `T`.
    pub async fn fetch_optional_as<T: AnyRow>(
        &self,
        query: &str,
        args: &[Arg],
    ) -> Result<Option<T>, sqlx::Error> {
        super::guard::check(self.read_only, query)?;
        let sql = self.sql(query);
        timed(self.query_timeout, async {
            super::on_pool!(self, pool => {
                bind_args!(sqlx::query_as::<_, T>(sql), args).fetch_optional(pool).await
            })
        })
        .await
    }
}

impl Tx {
    /// Runs a query in the transaction and decodes every row as `T`.
    pub async fn fetch_all_as<T: AnyRow>(
        &mut self,
        query: &str,
        args: &[Arg],
    ) -> Result<Vec<T>, sqlx::Error> {
        super::guard::check(self.db.read_only, query)?;
        let sql = self.db.sql(query);
        let limit = self.db.query_timeout;
        timed(limit, async {
            match &mut self.inner {
                Inner::Sqlite(tx) => {
                    bind_args!(sqlx::query_as::<_, T>(sql), args)
                        .fetch_all(&mut **tx)
                        .await
                }
                Inner::Postgres(tx) => {
                    bind_args!(sqlx::query_as::<_, T>(sql), args)
                        .fetch_all(&mut **tx)
                        .await
                }
                Inner::MySql(tx) => {
                    bind_args!(sqlx::query_as::<_, T>(sql), args)
                        .fetch_all(&mut **tx)
                        .await
                }
            }
        })
        .await
    }

    pub fn backend(&self) -> Backend {
        self.db.backend()
    }

    /// The handle the transaction runs on (for its SQL dialect helpers).
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// Like [`Db::fetch_all_in`], inside the transaction.
    pub async fn fetch_all_in<T: AnyRow>(
        &mut self,
        query: &str,
        args: &[Arg],
        values: &[&str],
    ) -> Result<Vec<T>, sqlx::Error> {
        let mut rows = Vec::new();
        for (sql, args) in in_chunks(query, args, values) {
            rows.extend(self.fetch_all_as(&sql, &args).await?);
        }
        Ok(rows)
    }

    /// Like [`Db::execute_in`], inside the transaction.
    pub async fn execute_in(
        &mut self,
        query: &str,
        args: &[Arg],
        values: &[&str],
    ) -> Result<u64, sqlx::Error> {
        let mut changed = 0;
        for (sql, args) in in_chunks(query, args, values) {
            changed += self.execute(&sql, &args).await?;
        }
        Ok(changed)
    }

    /// Runs one statement in the transaction; returns the rows affected.
    pub async fn execute(&mut self, query: &str, args: &[Arg]) -> Result<u64, sqlx::Error> {
        super::guard::check(self.db.read_only, query)?;
        let sql = self.db.sql(query);
        let limit = self.db.query_timeout;
        timed(limit, async {
            match &mut self.inner {
                Inner::Sqlite(tx) => bind_args!(sqlx::query(sql), args)
                    .execute(&mut **tx)
                    .await
                    .map(|r| r.rows_affected()),
                Inner::Postgres(tx) => bind_args!(sqlx::query(sql), args)
                    .execute(&mut **tx)
                    .await
                    .map(|r| r.rows_affected()),
                Inner::MySql(tx) => bind_args!(sqlx::query(sql), args)
                    .execute(&mut **tx)
                    .await
                    .map(|r| r.rows_affected()),
            }
        })
        .await
    }

    /// Reads one 64-bit integer (e.g. a count) inside the transaction.
    pub async fn scalar_i64(
        &mut self,
        query: &str,
        args: &[Arg],
    ) -> Result<Option<i64>, sqlx::Error> {
        super::guard::check(self.db.read_only, query)?;
        let sql = self.db.sql(query);
        let limit = self.db.query_timeout;
        timed(limit, async {
            match &mut self.inner {
                Inner::Sqlite(tx) => {
                    bind_args!(sqlx::query_scalar(sql), args)
                        .fetch_optional(&mut **tx)
                        .await
                }
                Inner::Postgres(tx) => {
                    bind_args!(sqlx::query_scalar(sql), args)
                        .fetch_optional(&mut **tx)
                        .await
                }
                Inner::MySql(tx) => {
                    bind_args!(sqlx::query_scalar(sql), args)
                        .fetch_optional(&mut **tx)
                        .await
                }
            }
        })
        .await
    }

    pub async fn commit(self) -> Result<(), sqlx::Error> {
        let limit = self.db.query_timeout;
        timed(limit, async {
            match self.inner {
                Inner::Sqlite(tx) => tx.commit().await,
                Inner::Postgres(tx) => tx.commit().await,
                Inner::MySql(tx) => tx.commit().await,
            }
        })
        .await
    }
}

/// Bounds a database call: a server that stopped answering (not just refusing) must not hang
/// a command or the TUI's poller.
async fn timed<T>(
    limit: std::time::Duration,
    fut: impl std::future::Future<Output = Result<T, sqlx::Error>>,
) -> Result<T, sqlx::Error> {
    match tokio::time::timeout(limit, fut).await {
        Ok(r) => r,
        Err(_) => Err(sqlx::Error::Io(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("no answer within {} ms", limit.as_millis()),
        ))),
    }
}
