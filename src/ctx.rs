//! The opened world of one console run: the resolved configuration and how to connect to the
//! database and Redis it names. It sits below both front ends (the headless commands in the
//! binary and the TUI in the library), so neither has to reach into the other for it.

use crate::config::{self, Config};
use crate::db::{Backend, Db, DbOptions, migrate};
use crate::error::{Error, Result};
use crate::redis::{RedisSettings, RedisStore};

/// The settings of one run and the way to open its connections. Built once by the front end (the
/// headless command or the TUI) from the resolved configuration; everything below takes the
/// handles it opens, never the configuration file or the command line.
pub struct Ctx {
    pub config: Config,
}

impl Ctx {
    /// Opens the database. A SQLite file of the console's own (new, empty, or holding the seckill
    /// schema) is migrated on first use (unless read-only); a SQLite file of another program and
    /// a shared PostgreSQL or MySQL database must be migrated explicitly.
    pub async fn db(&self) -> Result<Db> {
        let c = &self.config;
        // Read-only creates nothing, not even the data directory of the default file.
        if c.db_is_default
            && !c.read_only
            && let Some(dir) = config::default_db_path().parent()
        {
            std::fs::create_dir_all(dir).map_err(|e| {
                Error::unavailable(format!(
                    "cannot create the data directory '{}': {e}",
                    dir.display()
                ))
            })?;
        }
        // A SQLite file that is there already is looked at read-only first: the writable pool's
        // first connection switches a file to WAL, and another program's file is left exactly
        // as it was.
        if !c.read_only
            && let Some(path) = crate::db::sqlite_path(&c.db)
            && std::fs::metadata(&path).is_ok_and(|m| m.len() > 0)
        {
            let probe = Db::connect(
                &c.db,
                &DbOptions {
                    connect_timeout: c.connect_timeout,
                    read_only: true,
                    ..DbOptions::default()
                },
            )
            .await?;
            let verdict = migrate::refuse_foreign_sqlite(&probe).await;
            probe.close().await;
            verdict?;
        }
        let db = self.db_unchecked().await?;
        if db.backend() == Backend::Sqlite && !c.read_only {
            migrate::migrate(&db).await?;
        } else {
            migrate::ensure_schema(&db).await?;
        }
        Ok(db)
    }

    /// Opens the database without touching the schema (for `migrate`).
    pub async fn db_unchecked(&self) -> Result<Db> {
        let c = &self.config;
        Db::connect(
            &c.db,
            &DbOptions {
                connect_timeout: c.connect_timeout,
                read_only: c.read_only,
                ..DbOptions::default()
            },
        )
        .await
    }

    /// Connects to Redis (a single server or a cluster).
    pub async fn redis(&self) -> Result<RedisStore> {
        let c = &self.config;
        let tls_ca = match &c.redis_ca {
            Some(path) => Some(std::fs::read(path).map_err(|e| {
                Error::bad_input(format!(
                    "Redis CA file '{}' cannot be read: {e}",
                    path.display()
                ))
            })?),
            None => None,
        };
        RedisStore::connect(RedisSettings {
            target: c.redis.clone(),
            connect_timeout: c.connect_timeout,
            response_timeout: c.response_timeout,
            tls_ca,
            read_only: c.read_only,
        })
        .await
    }
}
