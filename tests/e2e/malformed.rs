//! Malformed values in every key the console reads, and malformed input to every command:
//! a clear error or a reported state, nothing written that should not be, never a panic (the
//! harness fails any run whose stderr says "panicked").

use crate::harness::fixtures::{activity_toml, live_window, product_keys, write_file};
use crate::harness::{Console, TestDb, Topo, console, console_env};
use redis::Value;
use seckill_console::redis::RedisStore;

async fn raw(store: &RedisStore, route: &str, args: Vec<Vec<u8>>) -> Value {
    let mut c = redis::cmd(std::str::from_utf8(&args[0]).expect("command name"));
    for a in &args[1..] {
        c.arg(a.as_slice());
    }
    store.query(route, &c).await.expect("redis command")
}

fn b(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

// One test per topology, so that the two (tens of seconds each) run side by side in the suite.
#[tokio::test]
async fn malformed_values_in_every_key_are_reported_and_repaired_never_a_panic_standalone() {
    malformed_values_on(&Topo::standalone()).await;
}

#[tokio::test]
async fn malformed_values_in_every_key_are_reported_and_repaired_never_a_panic_cluster() {
    malformed_values_on(&Topo::cluster()).await;
}

async fn malformed_values_on(topo: &Topo) {
    let store = topo.store().await;
    let db = TestDb::sqlite();
    let lib = db.open().await;
    let c = Console::new(topo, &db);
    // Each case breaks one key of one product; (name, commands that break it). What follows
    // from the name: the state `status` must show (`missing` for a lost meta hash, else
    // `corrupt`), and whether one `fix --yes` repairs it (exit 0: a value the database truth
    // rebuilds) or names it and leaves it (exit 4: a buyers or ledger key of another type, or
    // an entry only Redis knew, which is not the console's to throw away or to guess).
    type Case = (
        &'static str,
        fn(&seckill_console::redis::ProductKeys) -> Vec<Vec<Vec<u8>>>,
    );
    let cases: Vec<Case> = vec![
        ("stock-text", |k| {
            vec![vec![b("SET"), b(&k.stock), b("abc")]]
        }),
        ("stock-decimal", |k| {
            vec![vec![b("SET"), b(&k.stock), b("1.5")]]
        }),
        ("stock-empty", |k| vec![vec![b("SET"), b(&k.stock), b("")]]),
        ("stock-huge", |k| {
            vec![vec![
                b("SET"),
                b(&k.stock),
                b("123456789012345678901234567890"),
            ]]
        }),
        ("stock-binary", |k| {
            vec![vec![b("SET"), b(&k.stock), vec![0xff, 0x00, 0xfe, b'\n']]]
        }),
        ("stock-list", |k| {
            vec![
                vec![b("DEL"), b(&k.stock)],
                vec![b("RPUSH"), b(&k.stock), b("5")],
            ]
        }),
        ("meta-string", |k| {
            vec![
                vec![b("DEL"), b(&k.meta)],
                vec![b("SET"), b(&k.meta), b("x")],
            ]
        }),
        ("meta-limit", |k| {
            vec![vec![b("HSET"), b(&k.meta), b("limit"), b("two")]]
        }),
        ("meta-counters", |k| {
            vec![vec![b("HSET"), b(&k.meta), b("deducted"), vec![0xc3, 0x28]]]
        }),
        ("meta-gone", |k| vec![vec![b("DEL"), b(&k.meta)]]),
        ("buyers-string", |k| {
            vec![vec![b("SET"), b(&k.buyers), b("x")]]
        }),
        ("buyers-field", |k| {
            vec![vec![b("HSET"), b(&k.buyers), b("u1"), b("lots")]]
        }),
        ("ledger-list", |k| {
            vec![
                vec![b("DEL"), b(&k.ledger)],
                vec![b("RPUSH"), b(&k.ledger), b("x")],
            ]
        }),
        ("ledger-garbage", |k| {
            vec![
                vec![b("HSET"), b(&k.ledger), b("junk"), b("d|x|y|z|u")],
                vec![b("HSET"), b(&k.ledger), vec![0xff], vec![0xfe, b'|']],
            ]
        }),
    ];
    for (i, (name, breaker)) in cases.iter().enumerate() {
        let a = format!("m{i}");
        c.import_preheat(&lib, &a, &[("p1", 20, 2), ("p2", 20, 2)])
            .await;
        crate::harness::fixtures::buy(&store, &lib, &a, "p1", &format!("{a}-r1"), "u9", 1).await;
        let k = product_keys(&a, "p1");
        for cmd in breaker(&k) {
            raw(&store, &k.stock, cmd).await;
        }
        let s = c.run(&["--json", "status", &a]);
        s.expect_code(0);
        let p1 = s.json()["products"][0].clone();
        let p2 = s.json()["products"][1].clone();
        assert_eq!(p2["state"], "ok", "{name}: the neighbour is not affected");
        // The total of Redis's stock says which products it leaves out.
        let unread = usize::from(p1["redis_remaining"].is_null());
        assert_eq!(s.json()["totals"]["redis_unreadable"], unread, "{name}");
        let text = c.run(&["status", &a]);
        assert_eq!(
            text.stdout.contains("(without 1 unreadable)"),
            unread == 1,
            "{name}: {}",
            text.stdout
        );
        let repairable = name.starts_with("stock") || name.starts_with("meta");
        let state = if *name == "meta-gone" {
            "missing"
        } else {
            "corrupt"
        };
        assert_eq!(p1["state"], state, "{name}: {p1}");
        assert!(
            s.json()["alerts"].to_string().contains(state),
            "{name}: {}",
            s.stdout
        );
        if *name == "meta-gone" {
            assert_eq!(p1["lost"], serde_json::json!(["meta"]), "{name}: {p1}");
        }
        for args in [
            vec!["--json", "reconcile", a.as_str()],
            vec!["--json", "fix", a.as_str(), "--preview"],
            vec!["--json", "compensation", "resolve", a.as_str(), "--all"],
            vec![
                "--json",
                "dry-run",
                a.as_str(),
                "--buyers",
                "50",
                "--concurrency",
                "4",
            ],
            vec!["--json", "ping"],
            vec!["reconcile", a.as_str()],
        ] {
            let r = c.run(&args);
            assert!(
                matches!(r.code, 0 | 4 | 5),
                "{name} {args:?}: exit {}: {}",
                r.code,
                r.stderr
            );
        }
        // A key fix cannot rebuild (a ledger of another type) is named and left: exit 4.
        let f = c.run(&["--json", "fix", &a, "--yes"]);
        f.expect_code(if repairable { 0 } else { 4 });
        let fixed = f.json();
        let row = &fixed["products"][0];
        assert_eq!(row["product"], "p1", "{name}: {fixed}");
        if repairable {
            assert_eq!(row["applied"], true, "{name}: {fixed}");
        } else {
            assert_eq!(row["applied"], false, "{name}: {fixed}");
            assert!(
                row["error"].as_str().is_some_and(|e| !e.is_empty()),
                "{name}: {fixed}"
            );
            let after = c.run(&["--json", "status", &a]).json();
            assert_eq!(
                after["products"][0]["state"], "corrupt",
                "{name}: left as it was"
            );
        }
        if repairable {
            let r = c.run(&["--json", "reconcile", &a, "--fail-on-drift"]);
            r.expect_code(0);
            assert_eq!(r.json()["products"][0]["redis_remaining"], 19, "{name}");
            // Deductions work again on the repaired product.
            let d =
                crate::harness::fixtures::buy(&store, &lib, &a, "p1", &format!("{a}-r2"), "u8", 1)
                    .await;
            assert_eq!(
                d,
                seckill_console::redis::stock::Deducted::Remaining(18),
                "{name}"
            );
        }
        c.ok(&["--json", "cleanup", &a, "--force"]);
    }
    lib.close().await;
}

/// `load a --buyers 5 --concurrency 1 --yes` and `extra`.
fn load_with(extra: &[&'static str]) -> Vec<&'static str> {
    let mut v = vec!["load", "a", "--buyers", "5", "--concurrency", "1", "--yes"];
    v.extend_from_slice(extra);
    v
}

#[test]
fn malformed_input_to_every_command_is_a_clear_error() {
    let db = TestDb::sqlite();
    let dir = tempfile::tempdir().expect("tmp");
    let (s, e) = live_window();
    let good = write_file(
        dir.path(),
        "ok.toml",
        &activity_toml("ok", &[("p1", 1, 1)], s, e),
    );
    let good = good.to_str().expect("utf8");
    let not_toml = write_file(dir.path(), "junk.toml", "\u{feff}[[[ ===");
    let binary = dir.path().join("binary.toml");
    std::fs::write(&binary, [0xffu8, 0xfe, 0x00, 0x01]).expect("write");
    let cfg_types = write_file(dir.path(), "types.toml", "grace_secs = \"soon\"\n");
    let cfg_unknown = write_file(dir.path(), "unknown.toml", "redis_urll = \"redis://x\"\n");
    let long_id = "x".repeat(65);
    let dir_s = dir.path().to_str().expect("utf8").to_string();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["activity", "import", not_toml.to_str().expect("utf8")],
            "junk.toml",
        ),
        (
            vec!["activity", "import", binary.to_str().expect("utf8")],
            "binary.toml",
        ),
        (vec!["activity", "import", &dir_s], &dir_s),
        (vec!["activity", "show", "a b"], "'a b'"),
        (vec!["activity", "show", &long_id], "is invalid"),
        (vec!["activity", "show", "ä"], "'ä'"),
        (vec!["preheat", "a:b"], "'a:b'"),
        (vec!["status", "{a}"], "'{a}'"),
        (vec!["reconcile", "a*"], "'a*'"),
        (vec!["fix", "a", "--product", "p{1}", "--yes"], "'p{1}'"),
        (vec!["compensation", "list", "a?"], "'a?'"),
        (vec!["compensation", "resolve", "a"], "--request R or --all"),
        (vec!["cleanup", ""], "''"),
        (
            vec!["load", "a", "--buyers", "-1", "--concurrency", "1"],
            "-1",
        ),
        (
            vec![
                "load",
                "a",
                "--buyers",
                "5",
                "--concurrency",
                "1",
                "--rate",
                "abc",
            ],
            "abc",
        ),
        (
            vec![
                "load",
                "a",
                "--buyers",
                "5",
                "--concurrency",
                "1",
                "--pay-share",
                "7",
                "--yes",
            ],
            "--pay-share 7",
        ),
        // Numbers that once panicked (a Duration out of range) or meant something silently.
        (
            load_with(&["--payment-window-secs", "inf"]),
            "--payment-window-secs inf",
        ),
        (
            load_with(&["--payment-window-secs", "1e20"]),
            // Echoed short, not as 21 digits (issue 23).
            "--payment-window-secs 1e20 ",
        ),
        (
            load_with(&["--payment-window-secs", "18446744073709551615"]),
            "--payment-window-secs 1.84467e19 ",
        ),
        (
            load_with(&["--payment-window-secs", "9223372036854775807"]),
            "--payment-window-secs 9.22337e18 ",
        ),
        (
            load_with(&["--payment-window-secs", "NaN"]),
            "--payment-window-secs NaN",
        ),
        (load_with(&["--rate", "1e-300"]), "--rate 1e-300 "),
        (load_with(&["--rate", "NaN"]), "--rate NaN"),
        (load_with(&["--rate", "0"]), "--rate 0 is out of range"),
        (
            load_with(&["--faults", "timeout=0.1,timeout=0.2"]),
            "fault 'timeout' is given twice",
        ),
        (
            load_with(&["--faults", "crash-between=0.5"]),
            "crash-between applies to --strategy hincrby only",
        ),
        (
            vec![
                "dry-run",
                "a",
                "--buyers",
                "5",
                "--concurrency",
                "1",
                "--rate",
                "1e-300",
            ],
            "--rate 1e-300 ",
        ),
        (
            vec![
                "dry-run",
                "a",
                "--buyers",
                "5",
                "--concurrency",
                "1",
                "--faults",
                "crash-between=0.5",
            ],
            "crash-between applies to the hincrby strategy only",
        ),
        (
            vec!["dry-run", "a", "--buyers", "5", "--concurrency", "99999"],
            "--concurrency 99999",
        ),
        (
            vec![
                "dry-run",
                "a",
                "--buyers",
                "5",
                "--concurrency",
                "1",
                "--strategy",
                "magic",
            ],
            "magic",
        ),
        (
            vec![
                "--config",
                cfg_types.to_str().expect("utf8"),
                "activity",
                "list",
            ],
            "grace_secs",
        ),
        (
            vec![
                "--config",
                cfg_unknown.to_str().expect("utf8"),
                "activity",
                "list",
            ],
            "redis_urll",
        ),
        (
            vec!["--config", "/no/such/config.toml", "activity", "list"],
            "/no/such/config.toml",
        ),
        (vec!["--redis", "ftp://x", "ping"], "ftp://x"),
        (vec!["--redis", "redis://", "ping"], "no host"),
        (vec!["--redis-cluster", ",,", "ping"], "seeds"),
        (
            vec![
                "--redis",
                "redis://a:1",
                "--redis-cluster",
                "redis://b:1",
                "ping",
            ],
            "--redis-cluster",
        ),
        (
            vec!["--prefix", "bad prefix", "status", "a"],
            "'bad prefix'",
        ),
        (
            vec!["--response-timeout-ms", "0", "ping"],
            "response timeout 0",
        ),
        (vec!["--actor", "", "activity", "list"], "actor"),
        // A negative number is named with its option, not taken for an unknown flag with a
        // tip (`-- -1`) that passes nothing to the option.
        (
            vec!["watch", "a", "--interval", "-1"],
            "--interval -1: a negative value is not allowed",
        ),
        (
            vec!["audit", "--since", "-2h"],
            "--since -2h: a negative value is not allowed",
        ),
        (
            vec!["pause", "a", "--product", "-1", "--yes"],
            "--product -1: a value that starts with '-' is read as an option; write --product=-1",
        ),
        (
            vec![
                "load",
                "a",
                "--buyers",
                "1",
                "--concurrency",
                "1",
                "--clock-skew-ms",
                "-100",
                "--seed",
                "-1",
            ],
            "--seed -1: a negative value",
        ),
        (
            vec!["watch", "a", "--count", "0"],
            "--count 0 would poll nothing",
        ),
        (
            vec!["audit", "--since", "99999999999d"],
            "more than 100 years",
        ),
    ];
    for (args, needle) in &cases {
        let mut v = vec!["--db", db.url.as_str()];
        v.extend_from_slice(args);
        let r = console(&v);
        r.expect_code(2);
        assert!(
            r.stderr.contains(needle),
            "{args:?}: stderr lacks {needle:?}: {}",
            r.stderr
        );
        assert!(
            r.stderr.trim_start().starts_with("error"),
            "{args:?}: the first line names it an error: {}",
            r.stderr
        );
        let mut j = vec!["--json", "--db", db.url.as_str()];
        j.extend_from_slice(args);
        let jr = console(&j);
        jr.expect_code(2);
        assert_eq!(jr.json_error()["kind"], "bad_input", "{args:?}");
    }
    for url in ["sqlite:", "postgres://", "mysql://h:99999/x"] {
        let r = console(&["--db", url, "activity", "list"]);
        assert!(
            matches!(r.code, 2 | 3),
            "{url}: exit {}: {}",
            r.code,
            r.stderr
        );
        assert!(
            r.stderr.contains(url.trim_end_matches('/')),
            "{url}: {}",
            r.stderr
        );
    }
    // A SQLite file in a directory that does not exist is a wrong path (2), not a database
    // that is down (3).
    let missing = dir.path().join("no-such-dir").join("x.db");
    let url = format!("sqlite:{}", missing.display());
    let r = console(&["--db", &url, "activity", "list"]);
    r.expect_code(2);
    assert!(
        r.stderr.contains("no-such-dir") && r.stderr.contains("does not exist"),
        "{}",
        r.stderr
    );
    // Environment variables.
    for (var, value) in [
        ("SECKILL_GRACE_SECS", "soon"),
        ("SECKILL_READ_ONLY", "maybe"),
        ("SECKILL_REDIS_URL", "not a url"),
        ("SECKILL_DATABASE_URL", "oracle://x"),
        ("SECKILL_REFRESH_SECS", "fast"),
        ("SECKILL_CONFIG", "/no/such/file.toml"),
    ] {
        let r = console_env(&["ping"], &[(var, value)]);
        r.expect_code(2);
        assert!(
            r.stderr.contains(value) || r.stderr.contains(var),
            "{var}: {}",
            r.stderr
        );
    }
    // And a good file still imports after all that.
    console(&["--db", &db.url, "activity", "import", good]).expect_code(0);
}

/// A `--db` SQLite file that holds another program's tables is not the console's to change: a
/// command other than `migrate` refuses (exit 2, naming the file, its tables and `migrate`) and
/// leaves the file as it was, where it used to add the seckill schema to it unasked. A new or
/// empty file is still set up on first use, and `migrate` adds the tables when asked.
#[tokio::test]
async fn a_sqlite_file_of_another_program_is_not_migrated_unasked() {
    use sqlx::Connection;
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("shop.db");
    let url = format!("sqlite://{}", path.display());
    let tables = || async {
        let mut c = sqlx::SqliteConnection::connect(&format!("{url}?mode=ro"))
            .await
            .expect("open");
        let names: Vec<String> =
            sqlx::query_scalar("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
                .fetch_all(&mut c)
                .await
                .expect("tables");
        c.close().await.expect("close");
        names
    };
    sqlite_file_with(
        &url,
        "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)",
    )
    .await;
    for cmd in [&["activity", "list"][..], &["compensation", "list", "a1"]] {
        let mut args = vec!["--db", url.as_str()];
        args.extend_from_slice(cmd);
        let r = console(&args);
        r.expect_code(2);
        assert!(
            r.stderr.contains("shop.db")
                && r.stderr.contains("customers")
                && r.stderr.contains("migrate"),
            "{cmd:?}: {}",
            r.stderr
        );
        assert_eq!(
            tables().await,
            vec!["customers"],
            "{cmd:?} changed the file"
        );
        // Not even its journal mode (a writable connection switches a file to WAL, in its
        // header) nor a file beside it.
        let mut c = sqlx::SqliteConnection::connect(&format!("{url}?mode=ro"))
            .await
            .expect("open");
        let mode: String = sqlx::query_scalar("PRAGMA journal_mode")
            .fetch_one(&mut c)
            .await
            .expect("journal mode");
        c.close().await.expect("close");
        assert_eq!(mode, "delete", "{cmd:?} switched the file to {mode}");
        assert!(
            !dir.path().join("shop.db-wal").exists(),
            "{cmd:?} left a WAL file"
        );
    }
    console(&["--db", &url, "migrate"]).expect_code(0);
    let after = tables().await;
    assert!(
        after.contains(&"customers".to_string()) && after.contains(&"seckill_activity".to_string()),
        "{after:?}"
    );
    console(&["--db", &url, "activity", "list"]).expect_code(0);

    // Seckill tables without the record of the console's migrations (made by the shop, or a
    // dump restored without it): named as such, and left alone too.
    let theirs = dir.path().join("theirs.db");
    let theirs_url = format!("sqlite://{}", theirs.display());
    sqlite_file_with(
        &theirs_url,
        "CREATE TABLE seckill_activity (activity_id TEXT)",
    )
    .await;
    let r = console(&["--db", &theirs_url, "activity", "list"]);
    r.expect_code(2);
    assert!(
        r.stderr.contains("no record of the console's migrations"),
        "{}",
        r.stderr
    );

    // An empty file (made by `touch`, say) is the console's to set up.
    let empty = dir.path().join("empty.db");
    std::fs::write(&empty, b"").expect("touch");
    console(&[
        "--db",
        &format!("sqlite://{}", empty.display()),
        "activity",
        "list",
    ])
    .expect_code(0);
}

/// A SQLite file at `url` made by another program: `sql` run on a new file.
async fn sqlite_file_with(url: &str, sql: &'static str) {
    use sqlx::Connection;
    let mut c = sqlx::SqliteConnection::connect(&format!("{url}?mode=rwc"))
        .await
        .expect("create");
    sqlx::query(sql)
        .execute(&mut c)
        .await
        .expect("create table");
    c.close().await.expect("close");
}

/// A meta field the counters do not need (`limit` = `1.5`) makes the product corrupt, but its
/// counters still say exactly what is held (`deducted - returned`). The fix took `deducted`
/// alone: every unit returned went off sale as "unexplained" (the preview said the stock
/// stayed), and on a sold-out product the stock went below zero, a false `oversold`.
#[tokio::test]
async fn a_fix_of_a_corrupt_meta_field_keeps_what_was_returned() {
    use crate::harness::fixtures::buy;
    use seckill_console::redis::stock::restore;
    let topo = Topo::standalone();
    let store = topo.store().await;
    let db = TestDb::sqlite();
    let lib = db.open().await;
    let c = Console::new(&topo, &db);
    c.import_preheat(&lib, "rt", &[("p1", 20, 2), ("p2", 3, 2)])
        .await;
    let cancel = |rid: &'static str| {
        let lib = &lib;
        async move {
            lib.execute(
                "UPDATE seckill_order SET status = 'cancelled', updated_at = ? WHERE request_id = ?",
                &[chrono::Utc::now().into(), rid.into()],
            )
            .await
            .expect("cancel");
        }
    };
    // p1: three sold, one of them cancelled and returned: 18 left.
    for (rid, user) in [("r1", "u1"), ("r2", "u2"), ("r3", "u3")] {
        buy(&store, &lib, "rt", "p1", rid, user, 1).await;
    }
    cancel("r2").await;
    restore(&store, &product_keys("rt", "p1"), "r2")
        .await
        .expect("restore");
    // p2: sold out, one returned and sold again: 0 left, 3 held.
    for (rid, user) in [("s1", "u1"), ("s2", "u2"), ("s3", "u3")] {
        buy(&store, &lib, "rt", "p2", rid, user, 1).await;
    }
    cancel("s2").await;
    restore(&store, &product_keys("rt", "p2"), "s2")
        .await
        .expect("restore");
    buy(&store, &lib, "rt", "p2", "s4", "u4", 1).await;
    for p in ["p1", "p2"] {
        let k = product_keys("rt", p);
        raw(
            &store,
            &k.stock,
            vec![b("HSET"), b(&k.meta), b("limit"), b("1.5")],
        )
        .await;
    }
    let s = c.run(&["--json", "status", "rt"]);
    assert_eq!(s.json()["products"][0]["state"], "corrupt", "{}", s.stdout);
    let preview = c.run(&["--json", "fix", "rt", "--preview"]);
    preview.expect_code(0);
    let f = c.run(&["--json", "fix", "rt", "--yes"]);
    f.expect_code(0);
    let r = c.run(&["--json", "reconcile", "rt", "--fail-on-drift"]);
    r.expect_code(0);
    let doc = r.json();
    for (i, left) in [(0, 18), (1, 0)] {
        let row = &doc["products"][i];
        assert_eq!(row["state"], "ok", "{row}");
        assert_eq!(row["redis_remaining"], left, "{row}");
        assert_eq!(
            preview.json()["products"][i]["after"],
            left,
            "the preview said what the fix wrote: {}",
            preview.stdout
        );
    }
    assert!(
        !doc["alerts"].to_string().contains("oversold"),
        "{}",
        r.stdout
    );
    lib.close().await;
}
