//! Security: `rediss://` with a private CA, an ACL user allowed only reads, and passwords that
//! never appear in any output, log line or JSON document.

use crate::harness::cli::console_env;
use crate::harness::fixtures::{
    activity_toml, import, live_window, product_keys, redis_cmd, write_file,
};
use crate::harness::redis_server::free_port;
use crate::harness::{RedisServer, Run, TestDb, console};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn openssl(dir: &Path, args: &[&str]) {
    let ok = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "openssl {args:?} failed (is openssl installed?)");
}

/// A CA and a server certificate for 127.0.0.1, made for this test.
fn make_certs(dir: &Path) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-days",
            "2",
            "-subj",
            "/CN=seckill test CA",
        ],
    );
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=127.0.0.1",
        ],
    );
    std::fs::write(
        dir.join("ext.cnf"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n",
    )
    .expect("ext.cnf");
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.crt",
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
        ],
    );
}

/// A TLS-only redis-server child, killed on drop.
struct TlsServer(Child, u16);

impl Drop for TlsServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_tls(dir: &Path, password: &str) -> TlsServer {
    let port = free_port();
    let child = Command::new("redis-server")
        .args([
            "--port",
            "0",
            "--tls-port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .args([
            "--tls-cert-file",
            "server.crt",
            "--tls-key-file",
            "server.key",
            "--tls-ca-cert-file",
            "ca.crt",
        ])
        .args([
            "--tls-auth-clients",
            "no",
            "--requirepass",
            password,
            "--dir",
            &dir.display().to_string(),
        ])
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-server with TLS");
    // Owned by the guard at once, so a failed start below still kills and reaps it.
    let server = TlsServer(child, port);
    let started = Instant::now();
    loop {
        let ok = Command::new("redis-cli")
            .args([
                "--tls",
                "--cacert",
                "ca.crt",
                "-p",
                &port.to_string(),
                "-a",
                password,
                "--no-auth-warning",
                "PING",
            ])
            .current_dir(dir)
            .output()
            .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("PONG"));
        if ok {
            return server;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "TLS redis-server did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[tokio::test]
async fn rediss_with_a_private_ca() {
    let dir = tempfile::tempdir().expect("tmp");
    make_certs(dir.path());
    let server = start_tls(dir.path(), "tls-pass-81");
    let db = TestDb::sqlite();
    let lib = db.open().await;
    import(&lib, "tls", &[("p1", 10, 1)], live_window()).await;
    let url = format!("rediss://:tls-pass-81@127.0.0.1:{}", server.1);
    let ca = dir.path().join("ca.crt");
    let ca = ca.to_str().expect("utf8");
    let with_ca = |rest: &[&str]| {
        let mut v = vec![
            "--redis",
            url.as_str(),
            "--redis-ca",
            ca,
            "--db",
            db.url.as_str(),
        ];
        v.extend_from_slice(rest);
        console(&v)
    };
    with_ca(&["ping"]).expect_code(0);
    with_ca(&["preheat", "tls"]).expect_code(0);
    let s = with_ca(&["--json", "status", "tls"]);
    s.expect_code(0);
    assert_eq!(s.json()["products"][0]["redis_remaining"], 10);
    // Without the CA the certificate is refused, and the message says why.
    let r = console(&["--redis", &url, "--db", &db.url, "ping"]);
    r.expect_code(3);
    assert!(r.stderr.contains("certificate"), "{}", r.stderr);
    assert!(!r.all_output().contains("tls-pass-81"));
    lib.close().await;
}

#[tokio::test]
async fn an_acl_user_allowed_only_reads_can_watch_but_not_fix() {
    let server = RedisServer::start();
    server.cli(&[
        "ACL",
        "SETUSER",
        "watcher",
        "on",
        ">watch-pass-22",
        "~*",
        "&*",
        "-@all",
        "+@read",
        "+@connection",
        "+ping",
        "+script|exists",
        "+info",
        "+cluster|slots",
    ]);
    let store = crate::harness::fixtures::standalone(&server.url()).await;
    let db = TestDb::sqlite();
    let lib = db.open().await;
    import(&lib, "acl", &[("p1", 10, 1)], live_window()).await;
    console(&["--redis", &server.url(), "--db", &db.url, "preheat", "acl"]).expect_code(0);
    redis_cmd(&store, &["INCRBY", &product_keys("acl", "p1").stock, "2"]).await;
    let url = format!("redis://watcher:watch-pass-22@127.0.0.1:{}", server.port);
    let run = |rest: &[&str]| -> Run {
        let mut v = vec!["--redis", url.as_str(), "--db", db.url.as_str()];
        v.extend_from_slice(rest);
        console(&v)
    };
    let s = run(&["--json", "status", "acl"]);
    s.expect_code(0);
    assert_eq!(s.json()["products"][0]["drift"], 2);
    run(&["--json", "reconcile", "acl"]).expect_code(0);
    let f = run(&["--json", "fix", "acl", "--yes"]);
    f.expect_code(5);
    let err = f.json_error();
    assert_eq!(err["kind"], "refused");
    let msg = err["error"].as_str().unwrap_or("");
    // Refused by the check before the write, naming the command it may not run.
    assert!(
        msg.contains("may not run EVALSHA") && msg.contains("before any write"),
        "{msg}"
    );
    assert!(!f.all_output().contains("watch-pass-22"));
    // Nothing changed.
    let s = run(&["--json", "status", "acl"]);
    assert_eq!(s.json()["products"][0]["drift"], 2);
    lib.close().await;
}

#[tokio::test]
async fn passwords_never_appear_in_any_output() {
    const REDIS_PW: &str = "Rds-S3cret-pw-4711";
    const DB_PW: &str = "Db-S3cret-pw-0815";
    let server = RedisServer::start_with(&["--requirepass", REDIS_PW]);
    // PostgreSQL with trust auth accepts (and ignores) a password, so the URL can carry one.
    let pg = TestDb::postgres().await;
    let sqlite = TestDb::sqlite();
    let db_url = match &pg {
        Some(db) => {
            let mut u = url::Url::parse(&db.url).expect("url");
            u.set_password(Some(DB_PW)).expect("password");
            u.to_string()
        }
        None => sqlite.url.clone(),
    };
    let redis_url = format!("redis://default:{REDIS_PW}@127.0.0.1:{}", server.port);
    let dir = tempfile::tempdir().expect("tmp");
    let (s, e) = live_window();
    let file = write_file(
        dir.path(),
        "a.toml",
        &activity_toml("pw", &[("p1", 40, 2), ("p2", 40, 2)], s, e),
    );
    let file = file.to_str().expect("utf8");
    let config = write_file(
        dir.path(),
        "c.toml",
        &format!("redis = \"{redis_url}\"\ndb = \"{db_url}\"\n"),
    );
    let config = config.to_str().expect("utf8");
    let bad_config = write_file(
        dir.path(),
        "bad.toml",
        &format!("redis = \"{redis_url}\"\nbogus = \"{DB_PW}\"\n"),
    );
    let bad_config = bad_config.to_str().expect("utf8");

    let env = [("SECKILL_LOG", "debug")];
    let mut outputs = Vec::new();
    let mut go = |args: &[&str]| {
        let mut v = vec!["--redis", redis_url.as_str(), "--db", db_url.as_str()];
        v.extend_from_slice(args);
        let r = console_env(&v, &env);
        outputs.push((args.join(" "), r.all_output()));
        r
    };
    go(&["migrate"]).expect_code(0);
    go(&["--json", "migrate"]).expect_code(0);
    go(&["activity", "import", file]).expect_code(0);
    go(&["--json", "activity", "list"]).expect_code(0);
    go(&["activity", "show", "pw"]).expect_code(0);
    go(&["ping"]).expect_code(0);
    go(&["--json", "ping"]).expect_code(0);
    go(&["--json", "preheat", "pw"]).expect_code(0);
    go(&["status", "pw"]).expect_code(0);
    go(&[
        "--json",
        "load",
        "pw",
        "--buyers",
        "200",
        "--concurrency",
        "8",
        "--yes",
        "--faults",
        "timeout=0.1",
        "--payment-window-secs",
        "0.1",
    ])
    .expect_code(0);
    go(&["--json", "reconcile", "pw"]).expect_code(0);
    go(&["--json", "compensation", "list", "pw"]).expect_code(0);
    go(&[
        "--grace-secs",
        "0",
        "compensation",
        "resolve",
        "pw",
        "--all",
    ])
    .expect_code(0);
    go(&["--json", "fix", "pw", "--preview"]).expect_code(0);
    go(&["--json", "fix", "pw", "--yes"]).expect_code(0);
    go(&[
        "--json",
        "dry-run",
        "pw",
        "--buyers",
        "300",
        "--concurrency",
        "8",
        "--strategy",
        "all",
    ]);
    go(&["--json", "cleanup", "pw", "--force"]).expect_code(0);
    go(&["--read-only", "fix", "pw", "--yes"]).expect_code(5);
    go(&["activity", "show", "nope{"]).expect_code(2);

    let mut extra = Vec::new();
    let wrong = format!("redis://default:{REDIS_PW}x@127.0.0.1:{}", server.port);
    extra.push(console_env(
        &["--redis", &wrong, "--db", &db_url, "status", "pw"],
        &env,
    ));
    let dead = format!("redis://default:{REDIS_PW}@127.0.0.1:{}", free_port());
    extra.push(console_env(
        &["--json", "--redis", &dead, "--db", &db_url, "ping"],
        &env,
    ));
    let dead_db = format!("postgres://postgres:{DB_PW}@127.0.0.1:{}/x", free_port());
    extra.push(console_env(
        &["--redis", &redis_url, "--db", &dead_db, "status", "pw"],
        &env,
    ));
    extra.push(console_env(
        &["--config", config, "--json", "status", "pw"],
        &env,
    ));
    extra.push(console_env(&["--config", bad_config, "status", "pw"], &env));
    extra.push(console_env(
        &["--redis", &format!("redis://u:{REDIS_PW}@[::1"), "ping"],
        &env,
    ));
    extra.push(console_env(
        &["--redis", &redis_url, "no-such-command"],
        &env,
    ));
    extra.push(console_env(
        &["status", "pw"],
        &[
            ("SECKILL_REDIS_URL", &redis_url),
            ("SECKILL_DATABASE_URL", &db_url),
            ("SECKILL_LOG", "debug"),
        ],
    ));
    for r in &extra {
        outputs.push(("error case".into(), r.all_output()));
    }
    let codes: Vec<i32> = extra.iter().map(|r| r.code).collect();
    assert_eq!(codes, vec![3, 3, 3, 0, 2, 2, 2, 0], "{extra:?}");
    for (what, out) in &outputs {
        for pw in [REDIS_PW, DB_PW] {
            assert!(!out.contains(pw), "`{what}` printed a password:\n{out}");
        }
    }
    // The debug logs did run (so the grep looked at log lines too).
    assert!(
        outputs.iter().any(|(_, o)| o.contains("DEBUG")),
        "no debug log line was produced"
    );
}

/// A PostgreSQL password given in the URL's query (`?password=`, libpq's `sslpassword=`)
/// appears nowhere: not in `ping`'s report of the database, not in an error, not in the debug
/// logs (sqlx's URL parser logs an unknown parameter with its value).
#[tokio::test]
async fn a_password_in_the_query_of_a_database_url_appears_nowhere() {
    let redis = RedisServer::start();
    let db = TestDb::require_postgres().await;
    let url = format!("{}?password=S3cretQx&sslpassword=K3yQzz", db.url);
    crate::harness::console(&["--db", &url, "migrate"]).expect_code(0);
    let r = console_env(
        &["--redis", &redis.url(), "--db", &url, "ping"],
        &[("SECKILL_LOG", "debug")],
    );
    r.expect_code(0);
    let all = r.all_output();
    assert!(all.contains("password=***"), "{all}");
    assert!(
        !all.contains("S3cretQx") && !all.contains("K3yQzz"),
        "{all}"
    );
    // A database that does not answer names the URL in its error: redacted too.
    let down = format!(
        "postgres://postgres@127.0.0.1:{}/x?password=S3cretQx",
        free_port()
    );
    let r = console(&["--db", &down, "activity", "list"]);
    r.expect_code(3);
    assert!(!r.all_output().contains("S3cretQx"), "{}", r.all_output());
}
