//! The reference clients of docs/app-servers.md, real programs in other languages driven
//! against the real binary: the Python one (redis-py, SQLite) and the Go one (redigo,
//! PostgreSQL) sell with buyers in parallel, lost replies, crashes between a deduction and its
//! order, payments, expiries and cancellations; then `compensation resolve --all` and `fix` must
//! leave every product `ok`, nothing oversold and every buyer within the limit, and `conform`
//! must find every rule held. A deliberately wrong client per rule is caught by `conform` with
//! that rule named.

use crate::harness::fixtures::{import, live_window};
use crate::harness::{Console, TestDb, Topo, product};
use seckill_console::db::Db;
use std::path::{Path, PathBuf};
use std::process::Command;

const PRODUCTS: [(&str, i64, i64); 3] = [("p1", 40, 2), ("p2", 60, 2), ("p3", 500, 3)];

fn clients_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/clients")
}

/// Runs a client to its end; panics with its output unless it exits 0. Returns its summary
/// (the last line of stdout, JSON).
fn run_client(mut cmd: Command, what: &str) -> serde_json::Value {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what} did not start ({e})"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{what} failed ({})\nstdout:\n{stdout}\nstderr:\n{stderr}",
        out.status
    );
    let last = stdout.lines().last().unwrap_or("");
    serde_json::from_str(last)
        .unwrap_or_else(|e| panic!("{what}: its summary is not JSON ({e}): {last}\n{stderr}"))
}

fn python(redis_url: &str, db_url: &str, activity: &str, extra: &[&str]) -> Command {
    let mut cmd = Command::new("python3");
    cmd.arg(clients_dir().join("python/order_service.py"))
        .args(["--redis", redis_url, "--db", db_url, "--activity", activity])
        .args(["--products", "p1,p2,p3"])
        .args(extra);
    cmd
}

/// The live units each user holds per product, at most (the per-user limit is checked on
/// this).
async fn most_held(db: &Db, activity: &str) -> Vec<(String, i64)> {
    let rows: Vec<(String, String, i64)> = db
        .fetch_all_as(
            "SELECT product_id, user_id, quantity FROM seckill_order WHERE activity_id = ? \
             AND status IN ('pending_payment', 'paid')",
            &[activity.into()],
        )
        .await
        .expect("holdings");
    let mut held: std::collections::HashMap<(String, String), i64> = Default::default();
    for (p, u, q) in rows {
        *held.entry((p, u)).or_default() += q;
    }
    let mut most: Vec<(String, i64)> = Vec::new();
    for ((p, _), q) in held {
        match most.iter_mut().find(|(x, _)| *x == p) {
            Some((_, m)) => *m = (*m).max(q),
            None => most.push((p, q)),
        }
    }
    most
}

/// After a client's sale: it conforms as it left it (before a fix books what Redis lacked, which
/// would hide an order written without a sale), then the console repairs what the faults left,
/// and everything balances and still conforms.
async fn repaired_and_conforming(c: &Console, lib: &Db, activity: &str) {
    let r = c.run(&["--json", "conform", activity]);
    r.expect_code(0);
    assert_eq!(r.json()["ok"], true, "{}", r.stdout);
    // Past the grace window (1 s): every deduction without an order is an orphan now.
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    c.ok(&["compensation", "resolve", activity, "--all"]);
    c.ok(&["fix", activity, "--yes"]);
    let doc = c.reconcile(activity);
    assert_eq!(doc["totals"]["not_ok"], 0, "{}: {doc}", c.label());
    let alerts = doc["alerts"].as_array().cloned().unwrap_or_default();
    assert!(
        alerts.iter().all(|a| a["severity"] != "critical"),
        "{}: {alerts:?}",
        c.label()
    );
    for (p, stock, limit) in PRODUCTS {
        let row = product(&doc, p);
        let sold = row["db_sold"].as_i64().unwrap_or(-1);
        assert!(
            (0..=stock).contains(&sold),
            "{}: {p} sold {sold} of {stock}",
            c.label()
        );
        assert_eq!(row["redis_remaining"], stock - sold, "{}: {row}", c.label());
        for (q, held) in most_held(lib, activity).await {
            if q == p {
                assert!(held <= limit, "{}: a buyer holds {held} of {p}", c.label());
            }
        }
    }
    let r = c.run(&["--json", "conform", activity]);
    r.expect_code(0);
    assert_eq!(r.json()["ok"], true, "{}", r.stdout);
}

/// The Python reference client, with lost replies and crashes, on SQLite.
#[tokio::test]
async fn the_python_reference_client_balances_and_conforms() {
    let topo = Topo::standalone();
    let Topo::Standalone(server) = &topo else {
        unreachable!()
    };
    let db = TestDb::sqlite();
    let lib = db.open().await;
    let c = Console::new(&topo, &db).with("--grace-secs 1");
    import(&lib, "py", &PRODUCTS, live_window()).await;
    c.preheat("py");
    let summary = run_client(
        python(
            &server.url(),
            &db.url.replacen("sqlite://", "sqlite:", 1),
            "py",
            &[
                "--buyers",
                "600",
                "--concurrency",
                "16",
                "--seed",
                "11",
                "--fault-timeout",
                "0.1",
                "--fault-crash",
                "0.03",
            ],
        ),
        "the Python client",
    );
    // It sold, and the scripts refused nothing as a bad argument nor answered an error.
    let replies = &summary["replies"];
    assert!(replies["sold"].as_i64().unwrap_or(0) > 0, "{summary}");
    assert!(replies.get("-4").is_none(), "{summary}");
    assert_eq!(summary["errors"], 0, "{summary}");
    repaired_and_conforming(&c, &lib, "py").await;
    lib.close().await;
}

/// The Go reference client, built from its source with the distribution's packages, on
/// PostgreSQL.
#[tokio::test]
async fn the_go_reference_client_balances_and_conforms() {
    let topo = Topo::standalone();
    let Topo::Standalone(server) = &topo else {
        unreachable!()
    };
    let db = TestDb::require_postgres().await;
    let lib = db.open().await;
    let c = Console::new(&topo, &db).with("--grace-secs 1");
    import(&lib, "go", &PRODUCTS, live_window()).await;
    c.preheat("go");
    let dir = tempfile::tempdir().expect("dir");
    let bin = dir.path().join("order_service");
    let build = Command::new("go")
        .current_dir(clients_dir().join("go"))
        .args(["build", "-o"])
        .arg(&bin)
        .arg(".")
        .env("GO111MODULE", "off")
        .env("GOPATH", "/usr/share/gocode")
        .env("GOCACHE", dir.path().join("cache"))
        .env("GOFLAGS", "")
        .output()
        .expect("go (apt-get install golang-go golang-github-gomodule-redigo-dev golang-github-lib-pq-dev)");
    assert!(
        build.status.success(),
        "go build: {}",
        String::from_utf8_lossy(&build.stderr)
    );
    let url = format!(
        "{}{}sslmode=disable",
        db.url,
        if db.url.contains('?') { "&" } else { "?" }
    );
    let mut cmd = Command::new(&bin);
    cmd.current_dir(clients_dir().join("go"))
        .args(["--redis", &server.addr(), "--db", &url, "--activity", "go"])
        .args([
            "--products",
            "p1,p2,p3",
            "--buyers",
            "600",
            "--concurrency",
            "16",
        ])
        .args([
            "--seed",
            "7",
            "--fault-timeout",
            "0.1",
            "--fault-crash",
            "0.03",
        ]);
    let summary = run_client(cmd, "the Go client");
    assert_eq!(summary["bugs"], 0, "{summary}");
    repaired_and_conforming(&c, &lib, "go").await;
    lib.close().await;
}

/// One wrong client per rule of the guide: `conform` names exactly that rule, with exit 4.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_wrong_client_is_caught_by_conform_with_its_rule() {
    let topo = Topo::standalone();
    let Topo::Standalone(server) = &topo else {
        unreachable!()
    };
    let db = TestDb::sqlite();
    let lib = db.open().await;
    let c = Console::new(&topo, &db).with("--grace-secs 1");
    let url = db.url.replacen("sqlite://", "sqlite:", 1);
    let mut runs = Vec::new();
    for (i, (rule, _)) in seckill_console::ops::conform::RULES.iter().enumerate() {
        let a = format!("w{i}");
        import(&lib, &a, &PRODUCTS, live_window()).await;
        c.preheat(&a);
        let cmd = python(
            &server.url(),
            &url,
            &a,
            &[
                "--buyers",
                "80",
                "--concurrency",
                "4",
                "--seed",
                "5",
                "--break",
                rule,
            ],
        );
        runs.push((
            *rule,
            a,
            tokio::task::spawn_blocking(move || run_client(cmd, "a wrong client")),
        ));
    }
    for (rule, a, run) in runs {
        run.await.expect("client task");
        let r = c.run(&["--json", "conform", &a]);
        r.expect_code(4);
        let doc = r.json();
        assert_eq!(
            doc["broken"],
            serde_json::json!([rule]),
            "the client that breaks {rule}: {}",
            r.stdout
        );
    }
    lib.close().await;
}
