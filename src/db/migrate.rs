//! Schema migrations, embedded from `migrations/<backend>/` at build time and applied in order.
//! Each applied version is recorded with the checksum of its file, so an edited migration is
//! caught instead of silently skipped.

use super::{Arg, Backend, Db, on_pool};
use crate::error::{Error, Result};
use serde::Serialize;

/// One migration file.
pub struct Migration {
    pub version: i64,
    pub name: &'static str,
    pub sql: &'static str,
}

const SQLITE: &[Migration] = &[
    Migration {
        version: 1,
        name: "init",
        sql: include_str!("../../migrations/sqlite/0001_init.sql"),
    },
    Migration {
        version: 2,
        name: "cut_indexes",
        sql: include_str!("../../migrations/sqlite/0002_cut_indexes.sql"),
    },
    Migration {
        version: 3,
        name: "operator_intent",
        sql: include_str!("../../migrations/sqlite/0003_operator_intent.sql"),
    },
    Migration {
        version: 4,
        name: "queue_order",
        sql: include_str!("../../migrations/sqlite/0004_queue_order.sql"),
    },
    Migration {
        version: 5,
        name: "order_sums",
        sql: include_str!("../../migrations/sqlite/0005_order_sums.sql"),
    },
    Migration {
        version: 6,
        name: "change_status",
        sql: include_str!("../../migrations/sqlite/0006_change_status.sql"),
    },
];
const POSTGRES: &[Migration] = &[
    Migration {
        version: 1,
        name: "init",
        sql: include_str!("../../migrations/postgres/0001_init.sql"),
    },
    Migration {
        version: 2,
        name: "cut_indexes",
        sql: include_str!("../../migrations/postgres/0002_cut_indexes.sql"),
    },
    Migration {
        version: 3,
        name: "operator_intent",
        sql: include_str!("../../migrations/postgres/0003_operator_intent.sql"),
    },
    Migration {
        version: 4,
        name: "queue_order",
        sql: include_str!("../../migrations/postgres/0004_queue_order.sql"),
    },
    Migration {
        version: 5,
        name: "order_sums",
        sql: include_str!("../../migrations/postgres/0005_order_sums.sql"),
    },
    Migration {
        version: 6,
        name: "change_status",
        sql: include_str!("../../migrations/postgres/0006_change_status.sql"),
    },
];
const MYSQL: &[Migration] = &[
    Migration {
        version: 1,
        name: "init",
        sql: include_str!("../../migrations/mysql/0001_init.sql"),
    },
    Migration {
        version: 2,
        name: "cut_indexes",
        sql: include_str!("../../migrations/mysql/0002_cut_indexes.sql"),
    },
    Migration {
        version: 3,
        name: "operator_intent",
        sql: include_str!("../../migrations/mysql/0003_operator_intent.sql"),
    },
    Migration {
        version: 4,
        name: "queue_order",
        sql: include_str!("../../migrations/mysql/0004_queue_order.sql"),
    },
    Migration {
        version: 5,
        name: "order_sums",
        sql: include_str!("../../migrations/mysql/0005_order_sums.sql"),
    },
    Migration {
        version: 6,
        name: "change_status",
        sql: include_str!("../../migrations/mysql/0006_change_status.sql"),
    },
];

/// The migrations of one backend, in order.
pub fn migrations(backend: Backend) -> &'static [Migration] {
    match backend {
        Backend::Sqlite => SQLITE,
        Backend::Postgres => POSTGRES,
        Backend::MySql => MYSQL,
    }
}

/// The newest schema version this build knows.
pub fn latest_version() -> i64 {
    SQLITE.iter().map(|m| m.version).max().unwrap_or(0)
}

/// What `migrate` did.
#[derive(Debug, Serialize, PartialEq, Eq)]
pub struct MigrateReport {
    pub backend: Backend,
    pub database: String,
    pub applied: Vec<i64>,
    pub already_applied: Vec<i64>,
    pub version: i64,
}

const CREATE_TABLE: &str = "CREATE TABLE IF NOT EXISTS seckill_schema_migrations (
    version BIGINT NOT NULL PRIMARY KEY,
    name VARCHAR(128) NOT NULL,
    checksum VARCHAR(64) NOT NULL,
    applied_at VARCHAR(40) NOT NULL
)";

/// Splits a migration file into statements: a statement ends with `;` at the end of a line.
fn statements(sql: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in sql.lines() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with("--") {
            continue;
        }
        current.push_str(line);
        current.push('\n');
        if trimmed.ends_with(';') {
            let stmt = current.trim().trim_end_matches(';').trim().to_string();
            if !stmt.is_empty() {
                out.push(stmt);
            }
            current.clear();
        }
    }
    if !current.trim().is_empty() {
        out.push(current.trim().to_string());
    }
    out
}

fn checksum(sql: &str) -> String {
    crate::domain::digest::sha1_hex(sql)
}

async fn applied_versions(db: &Db) -> Result<Vec<(i64, String)>> {
    let sql = db.sql("SELECT version, checksum FROM seckill_schema_migrations ORDER BY version");
    let rows: Vec<(i64, String)> = on_pool!(db, pool => {
        sqlx::query_as::<_, (i64, String)>(sql).fetch_all(pool).await
    })
    .map_err(|e| db.error(&e))?;
    Ok(rows)
}

/// Applies every migration not yet applied.
pub async fn migrate(db: &Db) -> Result<MigrateReport> {
    db.execute(CREATE_TABLE, &[])
        .await
        .map_err(|e| db.error(&e))?;
    let done = applied_versions(db).await?;
    let mut report = MigrateReport {
        backend: db.backend(),
        database: db.label().to_string(),
        applied: Vec::new(),
        already_applied: Vec::new(),
        version: 0,
    };
    for m in migrations(db.backend()) {
        let sum = checksum(m.sql);
        if let Some((_, seen)) = done.iter().find(|(v, _)| *v == m.version) {
            if *seen != sum {
                return Err(Error::check_failed(format!(
                    "migration {} ({}) was applied with a different file (checksum {seen}, now {sum}): \
                     restore the original file or migrate a fresh database",
                    m.version, m.name
                )));
            }
            report.already_applied.push(m.version);
            continue;
        }
        // MySQL commits DDL implicitly, so statements run one by one; every statement of a
        // migration is idempotent (IF NOT EXISTS) and a crash half way is repaired by a rerun.
        for stmt in statements(m.sql) {
            match db.execute(&stmt, &[]).await {
                Ok(_) => {}
                // MySQL's CREATE INDEX has no IF NOT EXISTS: an index a crashed run made is
                // already there (ER_DUP_KEYNAME).
                Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("1061") => {}
                // Nor its DROP INDEX an IF EXISTS: an index a crashed run dropped is gone
                // (ER_CANT_DROP_FIELD_OR_KEY).
                Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("1091") => {}
                // Nor has its (or SQLite's) ADD COLUMN: a column a crashed run added is there
                // (ER_DUP_FIELDNAME; SQLite says "duplicate column name").
                Err(sqlx::Error::Database(e))
                    if e.code().as_deref() == Some("1060")
                        || e.message().contains("duplicate column name") => {}
                Err(e) => {
                    return Err(db
                        .error(&e)
                        .context(format!("migration {} ({})", m.version, m.name)));
                }
            }
        }
        db.execute(
            "INSERT INTO seckill_schema_migrations (version, name, checksum, applied_at) VALUES (?, ?, ?, ?)",
            &[
                Arg::Int(m.version),
                m.name.into(),
                sum.into(),
                chrono::Utc::now().to_rfc3339().into(),
            ],
        )
        .await
        .map_err(|e| db.error(&e))?;
        report.applied.push(m.version);
    }
    report.version = migrations(db.backend())
        .iter()
        .map(|m| m.version)
        .max()
        .unwrap_or(0);
    Ok(report)
}

/// Refuses a SQLite file the console may not call its own: one holding other tables and no
/// record of the console's migrations (a `--db` typo, the shop's own file, seckill tables
/// another program made or a dump restored without that record). A new or empty file, or one
/// with the record, passes. `db` should be a read-only handle: a writable one would already
/// have switched the file to WAL, which is written into its header.
pub async fn refuse_foreign_sqlite(db: &Db) -> Result<()> {
    // Tables and views; `substr`, not LIKE, whose `_` matches any character.
    let sql = "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') \
               AND substr(name, 1, 7) <> 'sqlite_' ORDER BY name";
    let tables: Vec<String> = on_pool!(db, pool => {
        sqlx::query_scalar::<_, String>(sql).fetch_all(pool).await
    })
    .map_err(|e| db.error(&e))?;
    if tables.is_empty() || tables.iter().any(|t| t == "seckill_schema_migrations") {
        return Ok(());
    }
    const SHOWN: usize = 3;
    let mut named = tables
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if tables.len() > SHOWN {
        named.push_str(&format!(" and {} more", tables.len() - SHOWN));
    }
    let what = if tables.iter().any(|t| t.starts_with("seckill_")) {
        format!(
            "seckill tables ({named}) but no record of the console's migrations (made by another program, or restored without it)"
        )
    } else {
        format!("tables of another program ({named}) and no seckill schema")
    };
    Err(Error::bad_input(format!(
        "database at {} holds {what}; nothing was changed: run `seckill-console migrate` to \
         add the console's tables and indexes to it, or give --db a file of its own",
        db.label()
    )))
}

/// Checks that the schema is in place; the error says to run `migrate`.
pub async fn ensure_schema(db: &Db) -> Result<()> {
    let sql = db.sql("SELECT COALESCE(MAX(version), 0) FROM seckill_schema_migrations");
    let version: std::result::Result<i64, sqlx::Error> = on_pool!(db, pool => {
        sqlx::query_scalar::<_, i64>(sql).fetch_one(pool).await
    });
    match version {
        Ok(v) if v >= latest_version() => Ok(()),
        Ok(v) => Err(Error::bad_input(format!(
            "database at {} has schema version {v}, this build needs {}: run `seckill-console migrate`",
            db.label(),
            latest_version()
        ))),
        Err(sqlx::Error::Database(_)) => Err(Error::bad_input(format!(
            "database at {} has no seckill schema: run `seckill-console migrate` first",
            db.label()
        ))),
        Err(e) => Err(db.error(&e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_statements() {
        let s = statements("-- c\nCREATE TABLE a (x INT);\n\nCREATE INDEX i\n ON a (x);\n");
        assert_eq!(
            s,
            vec!["CREATE TABLE a (x INT)", "CREATE INDEX i\n ON a (x)"]
        );
    }

    #[test]
    fn every_backend_has_the_same_versions() {
        let v = |b| migrations(b).iter().map(|m| m.version).collect::<Vec<_>>();
        assert_eq!(v(Backend::Sqlite), v(Backend::Postgres));
        assert_eq!(v(Backend::Sqlite), v(Backend::MySql));
    }

    #[test]
    fn every_backend_creates_the_contract_tables() {
        for b in [Backend::Sqlite, Backend::Postgres, Backend::MySql] {
            let sql: String = migrations(b).iter().map(|m| m.sql).collect();
            for t in [
                "seckill_activity",
                "seckill_product",
                "seckill_order",
                "seckill_compensation",
                "seckill_outbox",
                "seckill_audit",
            ] {
                assert!(
                    sql.contains(&format!("CREATE TABLE IF NOT EXISTS {t} (")),
                    "{b:?} {t}"
                );
            }
        }
    }
}
