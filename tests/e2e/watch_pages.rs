//! `watch`: one page per critical alert and its exit codes, giving up on a Redis that stays
//! away, and (issue 23, item 3) hooks beside the polling loop, SIGTERM at once, and an
//! unreachable Redis or database raised, escalated, paged and cleared like any alert.

use crate::harness::cli::{finish, terminate};
use crate::harness::fixtures::{product_keys, redis_cmd};
use crate::harness::{Console, TestDb, Topo, console};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Child;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a step may take before the test says what it was waiting for (a hang, not a
/// speed limit).
const PATIENCE: Duration = Duration::from_secs(60);

/// The lines a running watch printed so far, read by a thread of their own.
struct Lines(Arc<Mutex<Vec<String>>>);

impl Lines {
    fn follow(child: &mut Child) -> Lines {
        let out = child.stdout.take().expect("piped stdout");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&lines);
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                sink.lock().expect("lines").push(l);
            }
        });
        Lines(lines)
    }

    fn events(&self) -> Vec<serde_json::Value> {
        self.0
            .lock()
            .expect("lines")
            .iter()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
            .collect()
    }

    /// Waits until an event matches `event`, `kind` and (when given) `product` / `severity`.
    fn wait_for(&self, event: &str, kind: &str, product: Option<&str>, severity: Option<&str>) {
        let started = Instant::now();
        loop {
            let found = self.events().iter().any(|e| {
                e["event"] == event
                    && e["kind"] == kind
                    && product.is_none_or(|p| e["product"] == p)
                    && severity.is_none_or(|s| e["severity"] == s)
            });
            if found {
                return;
            }
            assert!(
                started.elapsed() < PATIENCE,
                "no {event} {kind} {product:?} {severity:?} line: {:?}",
                self.0.lock().expect("lines")
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// The alerts a hook was called with, in order (each call appends its stdin).
fn pages(log: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("the alert's JSON"))
        .collect()
}

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < PATIENCE, "waited too long for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A preheated sale of `products` on a private standalone Redis and a SQLite file.
/// A live activity preheated on a private server and database. Bind it whole (`let sale =`):
/// a pattern that leaves a field out drops it, and with it the server or the database file.
struct Sale {
    topo: Topo,
    store: seckill_console::redis::RedisStore,
    db: TestDb,
    c: Console,
    lib: seckill_console::db::Db,
}

impl Sale {
    async fn start(activity: &str, products: &[(&str, i64, i64)]) -> Sale {
        let topo = Topo::standalone();
        let store = topo.store().await;
        let db = TestDb::sqlite();
        let c = Console::new(&topo, &db);
        let lib = db.open().await;
        c.import_preheat(&lib, activity, products).await;
        Sale {
            topo,
            store,
            db,
            c,
            lib,
        }
    }
}

/// `watch --json --exec` with an injected drift: one `raised` line and exactly one hook call
/// with the alert's JSON and its environment; after `fix`, a `cleared` line; no second call
/// while the drift lasts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_pages_once_per_critical_alert_and_says_when_it_clears() {
    let sale = Sale::start("pager", &[("p1", 100, 5), ("p2", 50, 5)]).await;
    let Sale { store, c, lib, .. } = &sale;
    let dir = tempfile::tempdir().expect("tmp");
    let hook = dir.path().join("hook.log");
    let env_log = dir.path().join("env.log");
    let cmd = format!(
        "cat >> {}; echo \"$SECKILL_ALERT_KIND $SECKILL_ALERT_PRODUCT $SECKILL_ACTIVITY\" >> {}",
        hook.display(),
        env_log.display()
    );
    let child = c.spawn(&[
        "--json",
        "watch",
        "pager",
        "--interval",
        "0.3",
        "--count",
        "30",
        "--exec",
        &cmd,
    ]);
    std::thread::sleep(Duration::from_millis(1500));
    let k = product_keys("pager", "p1");
    redis_cmd(store, &["INCRBY", &k.stock, "7"]).await;
    // The drift lasts several polls.
    std::thread::sleep(Duration::from_millis(2500));
    // A counted watch (a cron job) ends 4 while a critical alert is still raised...
    let counted = c.run("watch pager --interval 0.2 --count 2");
    counted.expect_code(4);
    assert!(
        counted.stderr.contains("critical alert(s) still raised"),
        "{}",
        counted.stderr
    );
    c.ok("fix pager --yes");
    // ... and 0 once it cleared.
    c.run("watch pager --interval 0.2 --count 2").expect_code(0);
    let w = finish(child, PATIENCE);
    w.expect_code(0);
    let events: Vec<serde_json::Value> = w
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let drift = |event: &str| {
        events
            .iter()
            .filter(|e| e["event"] == event && e["kind"] == "drift" && e["product"] == "p1")
            .count()
    };
    assert_eq!(drift("raised"), 1, "{}", w.stdout);
    // One shape for every line: each key is there, null when it does not apply.
    for e in &events {
        for k in [
            "at", "event", "kind", "severity", "product", "node", "message", "state", "previous",
        ] {
            assert!(e.get(k).is_some(), "{k} missing: {e}");
        }
    }
    assert_eq!(drift("cleared"), 1, "{}", w.stdout);
    let raised = events
        .iter()
        .find(|e| e["event"] == "raised")
        .expect("a raised line");
    assert_eq!(raised["severity"], "critical");
    assert!(
        raised["at"].as_str().is_some_and(|t| t.contains('T')),
        "{raised}"
    );
    let states: Vec<&serde_json::Value> = events.iter().filter(|e| e["event"] == "state").collect();
    assert!(
        states
            .iter()
            .any(|e| e["product"] == "p1" && e["state"] == "drift" && e["previous"] == "ok"),
        "{}",
        w.stdout
    );
    let calls = std::fs::read_to_string(&hook).expect("the hook ran");
    let calls: Vec<&str> = calls.lines().collect();
    assert_eq!(calls.len(), 1, "{calls:?}");
    let body: serde_json::Value = serde_json::from_str(calls[0]).expect("the alert's JSON");
    assert_eq!(body["kind"], "drift");
    assert_eq!(body["product"], "p1");
    assert_eq!(
        std::fs::read_to_string(&env_log).expect("env").trim(),
        "drift p1 pager"
    );
    lib.close().await;
}

/// `watch` gives up with exit 3 when Redis stays unreachable past `--give-up-secs`.
#[test]
fn watch_gives_up_when_redis_stays_away() {
    let db = TestDb::sqlite();
    let port = crate::harness::redis_server::free_port();
    let url = format!("redis://127.0.0.1:{port}");
    // A watch of an activity on a Redis that never answers, ended by `until`.
    let watch = |until: [&str; 2]| {
        let mut args = vec![
            "--redis",
            url.as_str(),
            "--db",
            db.url.as_str(),
            "--connect-timeout-ms",
            "200",
            "watch",
            "nowhere",
            "--interval",
            "0.2",
        ];
        args.extend(until);
        console(&args)
    };
    let w = watch(["--give-up-secs", "1"]);
    w.expect_code(3);
    assert!(w.stderr.contains("gave up"), "{}", w.stderr);
    // Counted polls that all failed, well before giving up: exit 3 too, never success.
    let w = watch(["--count", "3"]);
    w.expect_code(3);
    assert!(
        w.stderr.contains("no poll of 3 read the books"),
        "{}",
        w.stderr
    );
}

/// A hook that holds its page (until the test lets it go) does not hold the polls: a second
/// critical alert raised and cleared meanwhile is printed at once, both ways, and paged after
/// the first, in order. Before, the loop waited for the hook and never saw that alert.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_hook_never_holds_a_poll_and_every_alert_is_paged_in_order() {
    // Bound whole: the servers and files live to the end of the test.
    let sale = Sale::start("slowpage", &[("p1", 100, 5), ("p2", 100, 5)]).await;
    let Sale { store, c, lib, .. } = &sale;
    let dir = tempfile::tempdir().expect("tmp");
    let log = dir.path().join("pages.log");
    let release = dir.path().join("release");
    let cmd = format!(
        "cat >> {}; while [ ! -e {} ]; do sleep 0.05; done",
        log.display(),
        release.display()
    );
    let mut child = c.spawn(&[
        "--json",
        "watch",
        "slowpage",
        "--interval",
        "0.2",
        "--exec",
        &cmd,
    ]);
    let lines = Lines::follow(&mut child);
    let (k1, k2) = (
        product_keys("slowpage", "p1"),
        product_keys("slowpage", "p2"),
    );
    redis_cmd(store, &["INCRBY", &k1.stock, "7"]).await;
    lines.wait_for("raised", "drift", Some("p1"), Some("critical"));
    wait_until("the first page", || pages(&log).len() == 1);
    // The first hook holds on; another product drifts and is put right meanwhile.
    redis_cmd(store, &["INCRBY", &k2.stock, "7"]).await;
    lines.wait_for("raised", "drift", Some("p2"), Some("critical"));
    redis_cmd(store, &["INCRBY", &k2.stock, "-7"]).await;
    lines.wait_for("cleared", "drift", Some("p2"), None);
    assert_eq!(pages(&log).len(), 1, "the first hook is still running");
    std::fs::write(&release, "").expect("release");
    wait_until("the second page", || pages(&log).len() == 2);
    let got: Vec<(String, String)> = pages(&log)
        .iter()
        .map(|p| (p["kind"].to_string(), p["product"].to_string()))
        .collect();
    assert_eq!(
        got,
        vec![
            ("\"drift\"".to_string(), "\"p1\"".to_string()),
            ("\"drift\"".to_string(), "\"p2\"".to_string())
        ]
    );
    terminate(&child);
    let w = finish(child, PATIENCE);
    w.expect_code(0);
    lib.close().await;
}

/// A hook that runs past its 10 s is killed with every process it started: a child it left in
/// the background never writes afterwards (killing `sh` alone left it running, reparented).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_that_runs_too_long_is_killed_with_its_children() {
    let sale = Sale::start("slow", &[("p1", 100, 5)]).await;
    let Sale { store, c, lib, .. } = &sale;
    let k = product_keys("slow", "p1");
    redis_cmd(store, &["INCRBY", &k.stock, "7"]).await;
    let dir = tempfile::tempdir().expect("tmp");
    let late = dir.path().join("late.log");
    let started = dir.path().join("started.log");
    // The hook starts a child that writes at 13 s, then waits on its own for 30 s.
    let cmd = format!(
        "(sleep 13; echo late >> {}) & echo started >> {}; sleep 30",
        late.display(),
        started.display()
    );
    let w = c.run(&[
        "watch",
        "slow",
        "--interval",
        "0.2",
        "--count",
        "1",
        "--exec",
        &cmd,
    ]);
    // The drift is still raised at the last poll: 4; the hook was killed at 10 s.
    w.expect_code(4);
    assert!(
        w.stderr
            .contains("was killed with every process it started"),
        "{}",
        w.stderr
    );
    assert!(started.exists(), "the hook never ran: {}", w.stderr);
    // Past the moment the child would have written.
    std::thread::sleep(Duration::from_secs(5));
    assert!(
        !late.exists(),
        "a child of the killed hook wrote afterwards: {:?}",
        std::fs::read_to_string(&late)
    );
    lib.close().await;
}

/// SIGTERM while a hook runs: the watch exits at once with 0, and the hook goes with every
/// process it started (its child never writes). Before, SIGTERM waited for the hook's 10 s and
/// the child wrote afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_the_watch_and_its_hook_at_once() {
    let sale = Sale::start("termed", &[("p1", 100, 5)]).await;
    let Sale { store, c, lib, .. } = &sale;
    let dir = tempfile::tempdir().expect("tmp");
    let started = dir.path().join("started");
    let late = dir.path().join("late");
    let cmd = format!(
        "(sleep 4; echo late >> {}) & echo started >> {}; sleep 60",
        late.display(),
        started.display()
    );
    let child = c.spawn(&["watch", "termed", "--interval", "0.2", "--exec", &cmd]);
    redis_cmd(store, &["INCRBY", &product_keys("termed", "p1").stock, "7"]).await;
    wait_until("the hook to start", || started.exists());
    terminate(&child);
    let w = finish(child, PATIENCE);
    w.expect_code(0);
    assert!(
        w.stderr.contains(
            "was running when the watch stopped and was killed with every process it started"
        ),
        "{}",
        w.stderr
    );
    std::thread::sleep(Duration::from_secs(5));
    assert!(
        !late.exists(),
        "a child of the hook wrote after the watch stopped"
    );
    lib.close().await;
}

/// Redis hangs (SIGSTOP) under a watch: `redis_unreachable` is raised as a warning at the
/// first failed poll and again as critical halfway to giving up, each a JSON line and, with
/// `--exec-severity warning`, a page; it clears when Redis answers again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_redis_is_an_alert_that_escalates_pages_and_clears() {
    let sale = Sale::start("outage", &[("p1", 100, 5)]).await;
    let Sale { topo, c, lib, .. } = &sale;
    let dir = tempfile::tempdir().expect("tmp");
    let log = dir.path().join("pages.log");
    let env_log = dir.path().join("env.log");
    let cmd = format!(
        "cat >> {}; echo \"$SECKILL_ALERT_KIND $SECKILL_ALERT_SEVERITY\" >> {}",
        log.display(),
        env_log.display()
    );
    let mut child = c.spawn(&[
        "--json",
        "--response-timeout-ms",
        "300",
        "--connect-timeout-ms",
        "300",
        "watch",
        "outage",
        "--interval",
        "0.2",
        "--give-up-secs",
        "12",
        "--exec",
        &cmd,
        "--exec-severity",
        "warning",
    ]);
    let lines = Lines::follow(&mut child);
    std::thread::sleep(Duration::from_millis(800));
    let server = topo.servers()[0];
    server.signal("STOP");
    lines.wait_for("raised", "redis_unreachable", None, Some("warning"));
    lines.wait_for("raised", "redis_unreachable", None, Some("critical"));
    server.signal("CONT");
    lines.wait_for("cleared", "redis_unreachable", None, None);
    // The hooks run beside the loop: the second page may still be on its way.
    wait_until("both pages", || pages(&log).len() == 2);
    let got: Vec<String> = pages(&log)
        .iter()
        .map(|p| format!("{} {}", p["kind"], p["severity"]))
        .collect();
    assert_eq!(
        got,
        vec![
            "\"redis_unreachable\" \"warning\"",
            "\"redis_unreachable\" \"critical\""
        ]
    );
    assert_eq!(
        std::fs::read_to_string(&env_log).expect("env"),
        "redis_unreachable warning\nredis_unreachable critical\n"
    );
    let raised = lines
        .events()
        .into_iter()
        .find(|e| e["kind"] == "redis_unreachable")
        .expect("raised");
    assert!(raised["product"].is_null() && raised["node"].is_null());
    assert!(
        raised["message"]
            .as_str()
            .is_some_and(|m| m.contains("Redis at")),
        "{raised}"
    );
    terminate(&child);
    finish(child, PATIENCE).expect_code(0);
    lib.close().await;
}

/// A database that refuses connections is `db_unreachable`, a JSON line like any alert; the
/// counted watch still ends 3 (no poll read the books).
#[test]
fn an_unreachable_database_is_an_alert_too() {
    let redis = crate::harness::redis_server::RedisServer::start();
    let dead = format!(
        "postgres://postgres:s3cret@127.0.0.1:{}/nowhere",
        crate::harness::redis_server::free_port()
    );
    let w = console(&[
        "--json",
        "--redis",
        &redis.url(),
        "--db",
        &dead,
        "--connect-timeout-ms",
        "300",
        "watch",
        "nowhere",
        "--interval",
        "0.2",
        "--count",
        "3",
    ]);
    w.expect_code(3);
    let events: Vec<serde_json::Value> = w
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .collect();
    assert_eq!(events.len(), 1, "raised once: {}", w.stdout);
    assert_eq!(events[0]["event"], "raised");
    assert_eq!(events[0]["kind"], "db_unreachable");
    assert_eq!(events[0]["severity"], "warning");
    assert!(
        !w.stdout.contains("s3cret") && !w.stderr.contains("s3cret"),
        "the password is redacted: {} {}",
        w.stdout,
        w.stderr
    );
}

/// A hook that ends at once but leaves a child in the background: the child goes with the
/// hook's process group 10 s after the hook started (it would have written at 12 s), also when
/// the watch ends first. The hook never sees the servers' URLs (passwords) and its output goes
/// to stderr, not into the watch's JSON lines.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hooks_background_child_goes_at_10_s_and_the_hook_sees_no_url() {
    let sale = Sale::start("bg", &[("p1", 100, 5)]).await;
    let Sale {
        topo,
        store,
        db,
        lib,
        ..
    } = &sale;
    redis_cmd(store, &["INCRBY", &product_keys("bg", "p1").stock, "7"]).await;
    let dir = tempfile::tempdir().expect("tmp");
    let late = dir.path().join("late");
    let env_dump = dir.path().join("env");
    let cmd = format!(
        "(sleep 12; echo late >> {}) & env > {}; echo hook-says-hello; exit 0",
        late.display(),
        env_dump.display()
    );
    let redis_url = topo.servers()[0].url();
    let w = crate::harness::console_env(
        &[
            "--json",
            "watch",
            "bg",
            "--interval",
            "0.2",
            "--count",
            "1",
            "--exec",
            &cmd,
        ],
        &[
            ("SECKILL_REDIS_URL", redis_url.as_str()),
            ("SECKILL_DATABASE_URL", db.url.as_str()),
        ],
    );
    w.expect_code(4);
    for l in w.stdout.lines() {
        serde_json::from_str::<serde_json::Value>(l)
            .unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}"));
    }
    assert!(w.stderr.contains("hook-says-hello"), "{}", w.stderr);
    let env = std::fs::read_to_string(&env_dump).expect("the hook ran");
    assert!(env.contains("SECKILL_ALERT_KIND=drift"), "{env}");
    assert!(
        !env.contains("SECKILL_REDIS_URL") && !env.contains("SECKILL_DATABASE_URL"),
        "{env}"
    );
    // Nor under any other name: the URLs themselves are nowhere in its environment.
    assert!(
        !env.contains(redis_url.as_str()) && !env.contains(db.url.as_str()),
        "{env}"
    );
    std::thread::sleep(Duration::from_secs(4));
    assert!(
        !late.exists(),
        "the hook's background child outlived its 10 s"
    );
    lib.close().await;
}
