//! One console session: the real binary pointed at a Redis topology and a database, the way an
//! operator's shell alias does it, and the few sequences the tests repeat (import + preheat,
//! `--json` documents, the product row of a status or reconcile, the books check).

use super::cli::{Run, console_env};
use super::fixtures::{P, activity_toml, import, live_window, write_file};
use super::{TestDb, Topo};
use seckill_console::db::Db;
use serde_json::Value as Json;
use std::path::Path;
use std::process::Child;

/// A command line after the global flags. A `&str` or `String` is split at whitespace (for the
/// long fixed flag lists of `load` and `dry-run`); pass a slice when an argument holds a space.
pub trait Args {
    fn into_args(self) -> Vec<String>;
}

impl Args for &str {
    fn into_args(self) -> Vec<String> {
        self.split_whitespace().map(str::to_string).collect()
    }
}

impl Args for String {
    fn into_args(self) -> Vec<String> {
        self.as_str().into_args()
    }
}

impl Args for &String {
    fn into_args(self) -> Vec<String> {
        self.as_str().into_args()
    }
}

impl Args for &[&str] {
    fn into_args(self) -> Vec<String> {
        self.iter().map(|s| s.to_string()).collect()
    }
}

impl<const N: usize> Args for &[&str; N] {
    fn into_args(self) -> Vec<String> {
        self.as_slice().into_args()
    }
}

impl Args for &Vec<&str> {
    fn into_args(self) -> Vec<String> {
        self.as_slice().into_args()
    }
}

/// The binary with its global flags: `--redis`/`--redis-cluster`, `--db` and any extra ones.
#[derive(Clone, Debug)]
pub struct Console {
    base: Vec<String>,
    label: String,
}

impl Console {
    /// `topo` and `db`, labelled "standalone sqlite" and the like for assertion messages.
    pub fn new(topo: &Topo, db: &TestDb) -> Self {
        Self::on(topo.flags(), &db.url).labelled(&format!("{} {}", topo.name(), db.name()))
    }

    /// A standalone server (or a proxy in front of one) by URL, and a database URL.
    pub fn redis(url: &str, db_url: &str) -> Self {
        Self::on(vec!["--redis".into(), url.into()], db_url)
    }

    /// A cluster by its seeds, and a database URL.
    pub fn cluster(seeds: &str, db_url: &str) -> Self {
        Self::on(vec!["--redis-cluster".into(), seeds.into()], db_url)
    }

    /// Any Redis flags and a database URL.
    pub fn on(redis_flags: Vec<String>, db_url: &str) -> Self {
        let mut base = redis_flags;
        base.extend(["--db".to_string(), db_url.to_string()]);
        Console {
            base,
            label: String::new(),
        }
    }

    /// More global flags on every run (e.g. `--grace-secs 600`, `--actor dave`).
    pub fn with(mut self, flags: impl Args) -> Self {
        self.base.extend(flags.into_args());
        self
    }

    pub fn labelled(mut self, label: &str) -> Self {
        self.label = label.to_string();
        self
    }

    /// What the assertion messages name: "cluster postgres" and the like.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The whole command line: the global flags, then `rest`.
    pub fn args(&self, rest: impl Args) -> Vec<String> {
        let mut v = self.base.clone();
        v.extend(rest.into_args());
        v
    }

    pub fn run(&self, rest: impl Args) -> Run {
        self.run_env(rest, &[])
    }

    pub fn run_env(&self, rest: impl Args, env: &[(&str, &str)]) -> Run {
        let v = self.args(rest);
        let refs: Vec<&str> = v.iter().map(String::as_str).collect();
        console_env(&refs, env)
    }

    /// Runs and panics with both streams unless it exits 0.
    pub fn ok(&self, rest: impl Args) -> Run {
        let r = self.run(rest);
        r.expect_code(0);
        r
    }

    /// `--json rest`, which must exit 0: its document.
    pub fn json(&self, rest: impl Args) -> Json {
        let mut v = vec!["--json".to_string()];
        v.extend(rest.into_args());
        let refs: Vec<&str> = v.iter().map(String::as_str).collect();
        self.ok(refs.as_slice()).json()
    }

    /// Runs off the async runtime's worker threads.
    pub async fn run_async(&self, rest: impl Args) -> Run {
        let v = self.args(rest);
        tokio::task::spawn_blocking(move || {
            let refs: Vec<&str> = v.iter().map(String::as_str).collect();
            console_env(&refs, &[])
        })
        .await
        .expect("console task")
    }

    /// Starts the binary in the background (a load that a test samples, or a drill interrupts);
    /// collect it with [`super::cli::finish`].
    pub fn spawn(&self, rest: impl Args) -> Child {
        let v = self.args(rest);
        let refs: Vec<&str> = v.iter().map(String::as_str).collect();
        super::cli::spawn(&refs)
    }

    /// A read-only `exporter` of `activity` polling every `interval` seconds, on a free port;
    /// with the port.
    pub fn spawn_exporter(&self, activity: &str, interval: &str) -> (Child, u16) {
        let port = super::redis_server::free_port();
        let listen = format!("127.0.0.1:{port}");
        let child = self.spawn(&[
            "--read-only",
            "exporter",
            activity,
            "--listen",
            &listen,
            "--interval",
            interval,
        ]);
        (child, port)
    }

    /// `preheat activity`, which must exit 0.
    pub fn preheat(&self, activity: &str) {
        self.ok(&["preheat", activity]);
    }

    /// Imports a live activity through the library, then preheats it with the binary.
    pub async fn import_preheat(&self, lib: &Db, activity: &str, products: &[P<'_>]) {
        import(lib, activity, products, live_window()).await;
        self.preheat(activity);
    }

    /// The operator's way in: writes a live activity's TOML into `dir`, then `activity import`
    /// and `preheat` with the binary (both must exit 0).
    pub fn import_file_preheat(&self, dir: &Path, activity: &str, products: &[P<'_>]) {
        let (starts, ends) = live_window();
        let file = write_file(
            dir,
            &format!("{activity}.toml"),
            &activity_toml(activity, products, starts, ends),
        );
        self.ok(&["activity", "import", file.to_str().expect("a UTF-8 path")]);
        self.preheat(activity);
    }

    /// `--json status activity` (exit 0).
    pub fn status(&self, activity: &str) -> Json {
        self.json(&["status", activity])
    }

    /// `--json reconcile activity --fail-on-drift` (exit 0: no drift).
    pub fn reconcile(&self, activity: &str) -> Json {
        self.json(&["reconcile", activity, "--fail-on-drift"])
    }
}

/// The row of `product` in a status, reconcile or fix document.
pub fn product<'a>(doc: &'a Json, product: &str) -> &'a Json {
    doc["products"]
        .as_array()
        .and_then(|ps| ps.iter().find(|x| x["product"] == product))
        .unwrap_or_else(|| panic!("product {product} not in {doc}"))
}

/// The rows of a document's `products`.
pub fn products(doc: &Json) -> &Vec<Json> {
    doc["products"]
        .as_array()
        .unwrap_or_else(|| panic!("no products in {doc}"))
}

/// The `kind` of every alert of a status or reconcile document.
pub fn alert_kinds(doc: &Json) -> Vec<String> {
    doc["alerts"]
        .as_array()
        .unwrap_or_else(|| panic!("no alerts in {doc}"))
        .iter()
        .map(|a| a["kind"].as_str().unwrap_or("").to_string())
        .collect()
}

/// Every product of a reconcile document is ok without drift, its books balance (sold in the
/// database + remaining in Redis + in flight = initial) and nothing is oversold.
pub fn assert_books(doc: &Json, label: &str) {
    for p in products(doc) {
        assert_eq!(p["state"], "ok", "{label}: {p}");
        assert_eq!(p["drift"], 0, "{label}: {p}");
        let n = |field: &str| {
            p[field]
                .as_i64()
                .unwrap_or_else(|| panic!("{label}: no {field} in {p}"))
        };
        let (initial, sold) = (n("initial"), n("db_sold"));
        let sum = sold + n("redis_remaining") + n("in_flight");
        assert_eq!(sum, initial, "{label}: books do not balance: {p}");
        assert!(sold <= initial, "{label}: oversold: {p}");
    }
}
