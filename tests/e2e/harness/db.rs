//! A database per test: a SQLite file always; PostgreSQL and MariaDB when SECKILL_TEST_PG_URL /
//! SECKILL_TEST_MYSQL_URL are set (admin URLs). When a variable is set and the server does not
//! answer, the test fails: it never skips silently. A test about one server backend asks for it
//! with `require_postgres` / `require_mysql`, which fail naming the variable when it is unset.

use seckill_console::db::{Db, DbOptions, migrate};
use seckill_console::redact::SecretUrl;
use std::sync::atomic::{AtomicU32, Ordering};
use tempfile::TempDir;

static COUNTER: AtomicU32 = AtomicU32::new(0);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Sqlite,
    Postgres,
    MySql,
}

/// One test's own database, dropped with the value.
pub struct TestDb {
    pub url: String,
    pub kind: Kind,
    _dir: Option<TempDir>,
    admin: Option<(String, String)>,
}

fn unique_name() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "seckill_t_{}_{}_{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed),
        nanos % 100_000
    )
}

fn with_database(admin: &str, name: &str) -> String {
    let mut u = url::Url::parse(admin).expect("admin URL parses");
    u.set_path(&format!("/{name}"));
    u.to_string()
}

impl TestDb {
    /// A fresh SQLite file in a temporary directory.
    pub fn sqlite() -> Self {
        let dir = tempfile::Builder::new()
            .prefix("seckill-db-")
            .tempdir()
            .expect("temp dir");
        let url = format!("sqlite://{}", dir.path().join("test.db").display());
        TestDb {
            url,
            kind: Kind::Sqlite,
            _dir: Some(dir),
            admin: None,
        }
    }

    /// A fresh PostgreSQL database, or None when SECKILL_TEST_PG_URL is unset.
    pub async fn postgres() -> Option<Self> {
        Self::on_server(Kind::Postgres, "SECKILL_TEST_PG_URL").await
    }

    /// A fresh MySQL/MariaDB database, or None when SECKILL_TEST_MYSQL_URL is unset.
    pub async fn mysql() -> Option<Self> {
        Self::on_server(Kind::MySql, "SECKILL_TEST_MYSQL_URL").await
    }

    /// A fresh PostgreSQL database for a test that is about PostgreSQL: fails, naming the
    /// variable, when SECKILL_TEST_PG_URL is unset (CI always sets it), instead of passing having
    /// checked nothing.
    pub async fn require_postgres() -> Self {
        Self::postgres()
            .await
            .unwrap_or_else(|| panic!("{}", missing("SECKILL_TEST_PG_URL")))
    }

    /// A fresh MySQL/MariaDB database for a test that is about MySQL: fails, naming the
    /// variable, when SECKILL_TEST_MYSQL_URL is unset.
    pub async fn require_mysql() -> Self {
        Self::mysql()
            .await
            .unwrap_or_else(|| panic!("{}", missing("SECKILL_TEST_MYSQL_URL")))
    }

    /// Creates a database of its own on the server the admin URL in `var` names.
    async fn on_server(kind: Kind, var: &str) -> Option<Self> {
        let admin = std::env::var(var).ok().filter(|s| !s.is_empty());
        // CI runs every backend: there a missing one fails the suite rather than dropping its
        // cases quietly.
        if admin.is_none() && std::env::var("SECKILL_TEST_REQUIRE_BACKENDS").as_deref() == Ok("1") {
            panic!(
                "{var} is empty or unset, but SECKILL_TEST_REQUIRE_BACKENDS=1 asks for every backend"
            );
        }
        let admin = admin?;
        let name = unique_name();
        admin_execute(&admin, &format!("CREATE DATABASE {name}"))
            .await
            .unwrap_or_else(|e| panic!("{var} is set but its server does not answer: {e}"));
        Some(TestDb {
            url: with_database(&admin, &name),
            kind,
            _dir: None,
            admin: Some((admin, name)),
        })
    }

    /// SQLite plus every configured server backend.
    pub async fn all() -> Vec<Self> {
        let mut v = vec![Self::sqlite()];
        v.extend(Self::postgres().await);
        v.extend(Self::mysql().await);
        v
    }

    /// SQLite plus PostgreSQL when configured.
    pub async fn sqlite_and_postgres() -> Vec<Self> {
        let mut v = vec![Self::sqlite()];
        v.extend(Self::postgres().await);
        v
    }

    /// The database's host:port (server backends only).
    pub fn server_addr(&self) -> Option<String> {
        let u = url::Url::parse(&self.url).ok()?;
        Some(format!("{}:{}", u.host_str()?, u.port()?))
    }

    /// The same database reached through `host:port` (a proxy in front of the server).
    pub fn url_via(&self, addr: &str) -> String {
        let mut u = url::Url::parse(&self.url).expect("test URL parses");
        let (host, port) = addr.rsplit_once(':').expect("host:port");
        u.set_host(Some(host)).expect("host");
        u.set_port(Some(port.parse().expect("port"))).expect("port");
        u.to_string()
    }

    pub fn name(&self) -> &'static str {
        match self.kind {
            Kind::Sqlite => "sqlite",
            Kind::Postgres => "postgres",
            Kind::MySql => "mysql",
        }
    }

    /// Opens the database through the library, migrated.
    pub async fn open(&self) -> Db {
        // A loaded 2-core machine (the chaos cases side by side with the rest of the suite)
        // once took more than the default 3 s to hand out a fresh SQLite file's connection.
        let opts = DbOptions {
            connect_timeout: std::time::Duration::from_secs(15),
            ..DbOptions::default()
        };
        let db = Db::connect(&SecretUrl::new(self.url.clone()), &opts)
            .await
            .unwrap_or_else(|e| panic!("open {}: {e}", self.name()));
        migrate::migrate(&db).await.expect("migrate");
        db
    }
}

/// Why a test that needs a database server cannot run.
fn missing(var: &str) -> String {
    format!(
        "{var} is not set: this test needs that database server. Set it to an admin URL (as \
         scripts/test and CI do, e.g. {}) and run the test again",
        match var {
            "SECKILL_TEST_PG_URL" => "postgres://postgres@127.0.0.1:5432/postgres",
            _ => "mysql://root@127.0.0.1:3306/mysql",
        }
    )
}

/// Runs one statement with the library's own database layer on an admin URL.
async fn admin_execute(admin: &str, sql: &str) -> Result<(), String> {
    let db = Db::connect(&SecretUrl::new(admin), &DbOptions::default())
        .await
        .map_err(|e| e.message)?;
    let r = db
        .execute(sql, &[])
        .await
        .map(|_| ())
        .map_err(|e| e.to_string());
    db.close().await;
    r
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let Some((admin, name)) = self.admin.take() else {
            return;
        };
        let sql = match self.kind {
            Kind::Postgres => format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
            _ => format!("DROP DATABASE IF EXISTS {name}"),
        };
        // Drop runs outside any runtime guarantee: use a thread with its own small runtime.
        let _ = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            let _ = rt.block_on(admin_execute(&admin, &sql));
        })
        .join();
    }
}
