//! An unreachable or hung Redis or database: exit 3 with one line naming the redacted URL,
//! within the configured timeout, no panic, no password.

use crate::harness::TestDb;
use crate::harness::redis_server::free_port;
use crate::harness::{RedisServer, console};
use std::net::TcpListener;
use std::time::Duration;

const PASSWORD: &str = "s3cret-Pa55";

fn assert_one_clean_line(r: &crate::harness::Run, url_fragment: &str) {
    r.expect_code(3);
    assert_eq!(
        r.stderr.trim().lines().count(),
        1,
        "one line, got: {}",
        r.stderr
    );
    assert!(
        r.stderr.contains(url_fragment),
        "stderr does not name {url_fragment}: {}",
        r.stderr
    );
    assert!(
        !r.all_output().contains(PASSWORD),
        "the password leaked: {}",
        r.all_output()
    );
}

/// A TCP listener that accepts connections and never answers: a hung server.
fn black_hole() -> (TcpListener, u16) {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().expect("addr").port();
    (l, port)
}

#[test]
fn unreachable_redis_exits_3_naming_the_redacted_url() {
    let db = TestDb::sqlite();
    let port = free_port();
    let url = format!("redis://ops:{PASSWORD}@127.0.0.1:{port}");
    let r = console(&["--redis", &url, "--db", &db.url, "ping"]);
    assert_one_clean_line(&r, &format!("redis://ops:***@127.0.0.1:{port}"));

    let r = console(&["--json", "--redis", &url, "--db", &db.url, "ping"]);
    r.expect_code(3);
    let err = r.json_error();
    assert_eq!(err["kind"], "unavailable");
    assert!(!r.all_output().contains(PASSWORD));

    let seeds = format!(
        "redis://ops:{PASSWORD}@127.0.0.1:{port},redis://127.0.0.1:{}",
        free_port()
    );
    let r = console(&["--redis-cluster", &seeds, "--db", &db.url, "ping"]);
    assert_one_clean_line(&r, "redis://ops:***@");
}

/// A Redis that wants a password the URL lacks, and a port where another server answers, are
/// services the console cannot use (exit 3, naming what to do), not internal errors; `report`
/// still gives the database's side, and `watch` raises its alert before it gives up. A `--db`
/// file that is not a SQLite database is a bad setting (exit 2).
#[test]
fn a_redis_wanting_a_password_or_another_protocol_exits_3_and_a_file_not_a_database_2() {
    use crate::harness::fixtures::{activity_toml, live_window, write_file};
    use std::io::{Read, Write};
    let db = TestDb::sqlite();
    let dir = tempfile::tempdir().expect("tmp");
    let (s, e) = live_window();
    let file = write_file(
        dir.path(),
        "a1.toml",
        &activity_toml("a1", &[("p1", 10, 1)], s, e),
    );
    let file = file.to_str().expect("utf8");
    console(&["--db", &db.url, "migrate"]).expect_code(0);
    console(&["--db", &db.url, "activity", "import", file]).expect_code(0);
    let locked = RedisServer::start_with(&["--requirepass", PASSWORD]);
    let url = format!("redis://127.0.0.1:{}", locked.port);
    for cmd in [&["ping"][..], &["status", "a1"], &["fix", "a1", "--yes"]] {
        let mut args = vec!["--redis", url.as_str(), "--db", db.url.as_str()];
        args.extend_from_slice(cmd);
        let r = console(&args);
        assert_one_clean_line(&r, &url);
        assert!(
            r.stderr.contains("wants a password"),
            "{cmd:?}: {}",
            r.stderr
        );
    }
    let r = console(&[
        "--redis",
        &url,
        "--db",
        &db.url,
        "watch",
        "a1",
        "--count",
        "2",
        "--interval",
        "0.1",
    ]);
    r.expect_code(3);
    assert!(
        r.stdout.contains("raised") && r.stdout.contains("redis_unreachable"),
        "{}",
        r.stdout
    );

    // An HTTP server on the port.
    let (http, port) = black_hole();
    std::thread::spawn(move || {
        for conn in http.incoming().take(4) {
            let Ok(mut c) = conn else { continue };
            let mut buf = [0u8; 512];
            let _ = c.read(&mut buf);
            let _ = c.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
        }
    });
    let url = format!("redis://127.0.0.1:{port}");
    let r = console(&["--redis", &url, "--db", &db.url, "status", "a1"]);
    assert_one_clean_line(&r, &url);
    assert!(r.stderr.contains("another protocol"), "{}", r.stderr);

    let junk = dir.path().join("junk.db");
    std::fs::write(&junk, [0x5a_u8; 4096]).expect("write");
    let junk_url = format!("sqlite:{}", junk.display());
    let r = console(&["--redis", &locked.url(), "--db", &junk_url, "status", "a1"]);
    r.expect_code(2);
    assert!(r.stderr.contains("not a SQLite database"), "{}", r.stderr);
}

#[test]
fn hung_redis_exits_3_within_the_timeout() {
    let db = TestDb::sqlite();
    // A stopped redis-server: the kernel accepts the connection, nothing answers.
    let server = RedisServer::start();
    server.signal("STOP");
    let url = format!("redis://default:{PASSWORD}@127.0.0.1:{}", server.port);
    let r = console(&[
        "--redis",
        &url,
        "--db",
        &db.url,
        "--connect-timeout-ms",
        "300",
        "--response-timeout-ms",
        "300",
        "ping",
    ]);
    server.signal("CONT");
    assert_one_clean_line(&r, &format!("127.0.0.1:{}", server.port));
    // Generous bound: this guards against hanging, not against a slow machine.
    assert!(r.elapsed < Duration::from_secs(10), "took {:?}", r.elapsed);

    let (_hole, port) = black_hole();
    let r = console(&[
        "--redis",
        &format!("redis://127.0.0.1:{port}"),
        "--db",
        &db.url,
        "--connect-timeout-ms",
        "300",
        "--response-timeout-ms",
        "300",
        "ping",
    ]);
    assert_one_clean_line(&r, &format!("127.0.0.1:{port}"));
    assert!(r.elapsed < Duration::from_secs(10), "took {:?}", r.elapsed);
}

#[test]
fn unreachable_databases_exit_3_naming_the_redacted_url() {
    let port = free_port();
    for url in [
        format!("postgres://ops:{PASSWORD}@127.0.0.1:{port}/shop"),
        format!("mysql://ops:{PASSWORD}@127.0.0.1:{port}/shop"),
    ] {
        let r = console(&["--db", &url, "activity", "list"]);
        assert_one_clean_line(&r, &format!("ops:***@127.0.0.1:{port}"));
        let r = console(&["--json", "--db", &url, "migrate"]);
        r.expect_code(3);
        assert_eq!(r.json_error()["kind"], "unavailable");
        assert!(!r.all_output().contains(PASSWORD));
    }
    // A server that accepts and never answers: the connect timeout ends the wait.
    let (_hole, port) = black_hole();
    for scheme in ["postgres", "mysql"] {
        let url = format!("{scheme}://ops:{PASSWORD}@127.0.0.1:{port}/shop");
        let r = console(&[
            "--db",
            &url,
            "--connect-timeout-ms",
            "400",
            "activity",
            "list",
        ]);
        assert_one_clean_line(&r, &format!("ops:***@127.0.0.1:{port}"));
        assert!(r.elapsed < Duration::from_secs(10), "took {:?}", r.elapsed);
    }
    // A SQLite path in a directory that does not exist is a wrong path (2), not a database
    // that is down.
    let r = console(&[
        "--db",
        "sqlite:///proc/no/such/dir/x.db",
        "activity",
        "list",
    ]);
    r.expect_code(2);
    assert!(r.stderr.contains("/proc/no/such/dir"), "{}", r.stderr);
}

/// `report` during a Redis outage: the database's side in full (sales, the queue, every console
/// write), the Redis sections marked unavailable, exit 0 with a note and no password; with the
/// database down too, exit 3.
#[tokio::test]
async fn report_without_redis_gives_the_databases_side_in_full() {
    use crate::harness::fixtures::{import, live_window};
    let db = TestDb::sqlite();
    {
        let lib = db.open().await;
        import(&lib, "dark", &[("p1", 10, 1), ("p2", 5, 1)], live_window()).await;
        lib.close().await;
    }
    let url = format!("redis://ops:{PASSWORD}@127.0.0.1:{}", free_port());
    let r = console(&["--redis", &url, "--db", &db.url, "--json", "report", "dark"]);
    r.expect_code(0);
    assert!(
        r.stderr.contains("Redis unavailable"),
        "a note on stderr: {}",
        r.stderr
    );
    assert!(!r.all_output().contains(PASSWORD), "{}", r.all_output());
    let rep = r.json();
    assert!(rep["verdict"].is_null(), "{rep}");
    assert!(rep["balanced"].is_null(), "{rep}");
    assert!(
        rep["redis_unavailable"]
            .as_str()
            .is_some_and(|w| w.contains("ops:***@")),
        "{rep}"
    );
    let sales = rep["sales"].as_array().cloned().unwrap_or_default();
    assert_eq!(sales.len(), 2, "{rep}");
    assert_eq!(sales[0]["product"], "p1");
    assert_eq!(sales[0]["initial"], 10);
    assert!(sales[0]["remaining"].is_null(), "{rep}");
    assert_eq!(sales[0]["state"], "unknown");
    assert!(
        rep["writes"]
            .as_array()
            .is_some_and(|w| w.iter().any(|e| e["action"] == "activity.import")),
        "{rep}"
    );
    let md = console(&["--redis", &url, "--db", &db.url, "report", "dark"]);
    md.expect_code(0);
    assert!(
        md.stdout.contains("books now: unknown: Redis unavailable"),
        "{}",
        md.stdout
    );
    assert!(md.stdout.contains("## Console writes"), "{}", md.stdout);
    // The database down as well: nothing to report from, exit 3.
    let dead_db = format!("postgres://ops:{PASSWORD}@127.0.0.1:{}/shop", free_port());
    let r = console(&["--redis", &url, "--db", &dead_db, "report", "dark"]);
    r.expect_code(3);
    assert!(!r.all_output().contains(PASSWORD));
}
