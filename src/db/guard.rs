//! The read-only gate of the database handle: in `--read-only` mode [`Db`](super::Db) sends
//! reads only. Every statement passes [`check`] in the one place that sends it (`tx.rs`), and a
//! write transaction is refused at `BEGIN`, so no caller has to remember a guard of its own.

/// Why a statement was not sent. Carried inside the driver's error as a type, so the error
/// mapping recognises it by downcasting, not by its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadOnlyRefusal {
    /// The statement's first words (never its bound values).
    pub statement: String,
}

impl std::fmt::Display for ReadOnlyRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "read-only mode: refused to send a write to the database ({} ...); run without --read-only to change anything",
            self.statement
        )
    }
}

impl std::error::Error for ReadOnlyRefusal {}

/// Statements that cannot change data. A `WITH` is a read only when none of its parts writes
/// (PostgreSQL allows `WITH d AS (DELETE ...) SELECT ...`).
pub fn is_read_statement(sql: &str) -> bool {
    let upper = sql.trim_start().to_ascii_uppercase();
    let first = upper
        .split(|c: char| !c.is_ascii_alphabetic())
        .next()
        .unwrap_or("");
    match first {
        "SELECT" | "SHOW" | "EXPLAIN" | "VALUES" => !has_write_word(&upper),
        "WITH" => !has_write_word(&upper),
        _ => false,
    }
}

fn has_write_word(upper: &str) -> bool {
    upper
        .split(|c: char| !c.is_ascii_alphanumeric() && c != '_')
        .any(|w| {
            matches!(
                w,
                "INSERT" | "UPDATE" | "DELETE" | "MERGE" | "REPLACE" | "UPSERT" | "TRUNCATE"
            )
        })
}

/// The error returned in place of sending `sql`.
pub fn refusal(sql: &str) -> sqlx::Error {
    let statement: Vec<&str> = sql.split_whitespace().take(3).collect();
    sqlx::Error::AnyDriverError(Box::new(ReadOnlyRefusal {
        statement: statement.join(" "),
    }))
}

/// Refuses `sql` when the handle is read-only and the statement may write.
pub fn check(read_only: bool, sql: &str) -> Result<(), sqlx::Error> {
    if read_only && !is_read_statement(sql) {
        return Err(refusal(sql));
    }
    Ok(())
}

/// The read-only refusal inside `err`, if that is what it is.
pub fn as_refusal(err: &sqlx::Error) -> Option<&ReadOnlyRefusal> {
    match err {
        sqlx::Error::AnyDriverError(inner) => inner.downcast_ref::<ReadOnlyRefusal>(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_statements_that_cannot_write_pass() {
        for read in [
            "SELECT 1",
            "  select count(*) from orders where activity_id = ?",
            "WITH t AS (SELECT 1) SELECT * FROM t",
            "SHOW server_version",
        ] {
            assert!(check(true, read).is_ok(), "{read}");
        }
        for write in [
            "INSERT INTO audit_log (a) VALUES (?)",
            "update orders set status = 'paid'",
            "DELETE FROM compensation",
            "WITH d AS (DELETE FROM orders RETURNING id) SELECT * FROM d",
            "CREATE TABLE x (a int)",
            "PRAGMA journal_mode = DELETE",
            "BEGIN",
            "SELECT 1; DELETE FROM orders",
        ] {
            let err = check(true, write).expect_err(write);
            assert!(as_refusal(&err).is_some(), "{write}");
            assert!(check(false, write).is_ok());
        }
    }
}
