//! `migrate`, `activity import | list | show` through the binary on every backend, and malformed
//! import files that exit 2 and write nothing.

use crate::harness::TestDb;
use crate::harness::fixtures::{activity_toml, future_window, write_file};
use crate::harness::{Run, console};
use seckill_console::db::Db;

const TABLES: [&str; 7] = [
    "seckill_activity",
    "seckill_product",
    "seckill_order",
    "seckill_compensation",
    "seckill_outbox",
    "seckill_audit",
    "seckill_schema_migrations",
];

async fn row_counts(db: &Db) -> Vec<i64> {
    let mut out = Vec::new();
    for t in TABLES {
        let (n,): (i64,) = db
            .fetch_optional_as(&format!("SELECT COUNT(*) FROM {t}"), &[])
            .await
            .expect("count")
            .expect("one row");
        out.push(n);
    }
    out
}

fn run(db: &TestDb, args: &[&str]) -> Run {
    let mut all = vec!["--db", &db.url];
    all.extend_from_slice(args);
    console(&all)
}

#[tokio::test]
async fn migrate_import_list_show_on_every_backend() {
    let dir = tempfile::tempdir().expect("tmp");
    let (s, e) = future_window();
    let good = write_file(
        dir.path(),
        "a1.toml",
        &activity_toml("a1", &[("p1", 10, 2), ("p2", 5, 1)], s, e),
    );
    let good = good.to_str().expect("utf8 path");
    for db in TestDb::all().await {
        let name = db.name();
        let m = run(&db, &["--json", "migrate"]);
        m.expect_code(0);
        assert_eq!(
            m.json()["applied"],
            serde_json::json!([1, 2, 3, 4, 5, 6]),
            "{name}"
        );
        let again = run(&db, &["--json", "migrate"]);
        again.expect_code(0);
        assert_eq!(again.json()["applied"], serde_json::json!([]), "{name}");
        assert_eq!(
            again.json()["already_applied"],
            serde_json::json!([1, 2, 3, 4, 5, 6]),
            "{name}"
        );

        let imp = run(
            &db,
            &["--json", "--actor", "alice", "activity", "import", good],
        );
        imp.expect_code(0);
        assert_eq!(imp.json()["products_created"], 2, "{name}");
        assert_eq!(imp.json()["activity_created"], true, "{name}");
        let again = run(&db, &["--json", "activity", "import", good]);
        again.expect_code(0);
        assert_eq!(
            again.json()["products_unchanged"],
            2,
            "{name}: re-import is idempotent"
        );

        let list = run(&db, &["--json", "activity", "list"]);
        list.expect_code(0);
        let acts = list.json()["activities"].clone();
        assert_eq!(acts.as_array().map(Vec::len), Some(1), "{name}");
        assert_eq!(acts[0]["activity_id"], "a1");
        assert_eq!(acts[0]["products"], 2);
        assert_eq!(acts[0]["total_stock"], 15);
        assert_eq!(acts[0]["phase"], "upcoming");

        let show = run(&db, &["--json", "activity", "show", "a1"]);
        show.expect_code(0);
        let doc = show.json();
        assert_eq!(doc["total_stock"], 15, "{name}");
        assert_eq!(doc["products"][0]["product_id"], "p1");
        assert_eq!(doc["products"][0]["initial_stock"], 10);
        assert_eq!(doc["products"][0]["per_user_limit"], 2);
        assert_eq!(doc["products"][1]["product_id"], "p2");

        let text = run(&db, &["activity", "show", "a1"]);
        text.expect_code(0);
        assert!(
            text.stdout.contains("products 2, total stock 15"),
            "{}",
            text.stdout
        );

        let missing = run(&db, &["--json", "activity", "show", "nope"]);
        missing.expect_code(2);
        assert!(
            missing.json_error()["error"]
                .as_str()
                .unwrap_or("")
                .contains("'nope'")
        );

        // The audit trail of an activity that does not exist is a mistyped id, as for every
        // other command (an empty trail would read as "nobody touched it").
        let audit_missing = run(&db, &["--json", "audit", "nope"]);
        audit_missing.expect_code(2);
        assert!(
            audit_missing.json_error()["error"]
                .as_str()
                .unwrap_or("")
                .contains("'nope'"),
            "{name}: {}",
            audit_missing.stderr
        );
        let audit_known = run(&db, &["--json", "audit", "a1"]);
        audit_known.expect_code(0);
        assert_eq!(
            audit_known.json()["entries"][0]["action"],
            "activity.import",
            "{name}"
        );

        // The import was audited with the actor.
        let lib = db.open().await;
        let audit = seckill_console::db::audit::recent(&lib, None, 10)
            .await
            .expect("audit");
        assert!(
            audit
                .iter()
                .any(|a| a.actor == "alice" && a.action == "activity.import"),
            "{name}"
        );
        lib.close().await;
    }
}

#[tokio::test]
async fn malformed_import_files_exit_2_and_write_nothing() {
    let dir = tempfile::tempdir().expect("tmp");
    let (s, e) = future_window();
    let base = activity_toml("a2", &[("p1", 10, 2), ("p2", 5, 1)], s, e);
    let cases: Vec<(&str, String, Vec<&str>)> = vec![
        (
            "braces.toml",
            base.replace("id = \"p1\"", "id = \"p{1}\""),
            vec!["products[0].id", "'p{1}'"],
        ),
        (
            "colon.toml",
            base.replace("id = \"a2\"", "id = \"a:2\""),
            vec!["activity.id", "'a:2'"],
        ),
        (
            "negative.toml",
            base.replace("stock = 5", "stock = -5"),
            vec!["products[1].stock", "-5"],
        ),
        (
            "duplicate.toml",
            base.replace("id = \"p2\"", "id = \"p1\""),
            vec!["products[1].id", "'p1'", "duplicate"],
        ),
        (
            "missing.toml",
            base.replace("per_user_limit = 1\n", ""),
            vec!["per_user_limit"],
        ),
        (
            // A limit no Lua number holds exactly would import and then fail every deduction.
            "huge-limit.toml",
            base.replace(
                "per_user_limit = 1\n",
                "per_user_limit = 9223372036854775807\n",
            ),
            vec![
                "products[1].per_user_limit",
                "9223372036854775807",
                "maximum",
            ],
        ),
        (
            "big-limit.toml",
            base.replace(
                "per_user_limit = 1\n",
                "per_user_limit = 10000000000000000\n",
            ),
            vec!["products[1].per_user_limit", "10000000000000000"],
        ),
        (
            "not-toml.toml",
            "[activity\nid = a2 {".to_string(),
            vec!["not a valid activity file"],
        ),
        (
            "binary.toml",
            "\u{0}\u{1}\u{2}".to_string(),
            vec!["not a valid activity file"],
        ),
    ];
    for db in TestDb::all().await {
        let name = db.name();
        run(&db, &["migrate"]).expect_code(0);
        let lib = db.open().await;
        let before = row_counts(&lib).await;
        for (file, text, needles) in &cases {
            let path = write_file(dir.path(), file, text);
            let path = path.to_str().expect("utf8");
            let r = run(&db, &["activity", "import", path]);
            r.expect_code(2);
            assert!(
                r.stderr.contains(file),
                "{name} {file}: stderr does not name the file: {}",
                r.stderr
            );
            for n in needles {
                assert!(
                    r.stderr.contains(n),
                    "{name} {file}: stderr lacks {n:?}: {}",
                    r.stderr
                );
            }
            let j = run(&db, &["--json", "activity", "import", path]);
            j.expect_code(2);
            assert_eq!(j.json_error()["kind"], "bad_input", "{name} {file}");
            assert!(
                j.stdout.is_empty(),
                "{name} {file}: stdout must stay empty on error"
            );
        }
        let missing = run(&db, &["activity", "import", "/nonexistent/file.toml"]);
        missing.expect_code(2);
        assert!(missing.stderr.contains("/nonexistent/file.toml"));
        assert_eq!(
            row_counts(&lib).await,
            before,
            "{name}: a bad file wrote something"
        );
        lib.close().await;
    }
}

/// A file of thousands of products is parsed a thousand at a time: it imports whole, in its
/// order, and an error in a later part is reported as the whole file has it (its line, its
/// product's index), with nothing written.
#[test]
fn a_large_import_file_reads_as_a_whole() {
    let dir = tempfile::tempdir().expect("tmp");
    let (s, e) = future_window();
    let ids: Vec<String> = (0..2_500).map(|i| format!("p{i:04}")).collect();
    let products: Vec<(&str, i64, i64)> = ids
        .iter()
        .enumerate()
        .map(|(i, p)| (p.as_str(), i as i64, 1))
        .collect();
    let good = activity_toml("big", &products, s, e);
    let db = TestDb::sqlite();
    run(&db, &["migrate"]).expect_code(0);

    // A syntax error in the third part: the whole file's line.
    let broken = good.replace("stock = 2300\n", "stock = 2300 2\n");
    let line = broken[..broken.find("stock = 2300 2").expect("the edit")]
        .matches('\n')
        .count()
        + 1;
    let path = write_file(dir.path(), "broken.toml", &broken);
    let r = run(&db, &["activity", "import", path.to_str().expect("utf8")]);
    r.expect_code(2);
    assert!(
        r.stderr.contains(&format!("(line {line}, key 'stock')")),
        "{}",
        r.stderr
    );
    // A bad value in the third part: the product's index in the whole file.
    let negative = good.replace("stock = 2300\n", "stock = -2300\n");
    let path = write_file(dir.path(), "negative.toml", &negative);
    let r = run(&db, &["activity", "import", path.to_str().expect("utf8")]);
    r.expect_code(2);
    assert!(
        r.stderr.contains("products[2300].stock: -2300"),
        "{}",
        r.stderr
    );
    run(&db, &["--json", "activity", "show", "big"]).expect_code(2);

    let path = write_file(dir.path(), "big.toml", &good);
    let r = run(
        &db,
        &["--json", "activity", "import", path.to_str().expect("utf8")],
    );
    r.expect_code(0);
    assert_eq!(r.json()["products_created"], 2_500);
    let show = run(&db, &["--json", "activity", "show", "big"]);
    show.expect_code(0);
    let doc = show.json();
    assert_eq!(doc["total_stock"], 2_500 * 2_499 / 2);
    assert_eq!(doc["products"][2_499]["product_id"], "p2499");
    assert_eq!(doc["products"][2_499]["initial_stock"], 2_499);
    assert_eq!(doc["products"][1_000]["initial_stock"], 1_000);
}

#[test]
fn bad_ids_and_usage_exit_2() {
    let db = TestDb::sqlite();
    for bad in ["a{1}", "a:1", "", "x y", &"z".repeat(65)] {
        let r = run(&db, &["--json", "activity", "show", bad]);
        r.expect_code(2);
        assert_eq!(r.json_error()["kind"], "bad_input");
    }
    console(&["no-such-command"]).expect_code(2);
    console(&["--json", "no-such-command"]).expect_code(2);
    // The JSON error is the whole message: what is missing, not a line that stops before it.
    let r = console(&["--json", "status"]);
    r.expect_code(2);
    assert_eq!(
        r.json_error()["error"],
        "the following required arguments were not provided: <ACTIVITY>"
    );
    let r = console(&["--db", "oracle://x", "activity", "list"]);
    r.expect_code(2);
    assert!(r.stderr.contains("oracle://x"), "{}", r.stderr);
}

/// Consoles importing the same new activity at the same moment (two operators, or a deploy
/// script on several hosts) all succeed: the one that loses the race updates what the winner
/// created, as a re-import does, instead of failing with the database's unique-key error.
#[tokio::test]
async fn simultaneous_imports_of_a_new_activity_all_succeed() {
    let servers = [
        TestDb::require_postgres().await,
        TestDb::require_mysql().await,
    ];
    let dir = tempfile::tempdir().expect("tmp");
    let (s, e) = future_window();
    for db in &servers {
        console(&["--db", &db.url, "migrate"]).expect_code(0);
        for round in 0..3 {
            let id = format!("race{round}");
            let file = write_file(
                dir.path(),
                &format!("{id}.toml"),
                &activity_toml(&id, &[("p1", 10, 1), ("p2", 20, 2)], s, e),
            );
            let file = file.to_str().expect("utf8").to_string();
            let children: Vec<_> = (0..6)
                .map(|_| {
                    std::process::Command::new(env!("CARGO_BIN_EXE_seckill-console"))
                        .args(["--db", &db.url, "activity", "import", &file])
                        .stdout(std::process::Stdio::piped())
                        .stderr(std::process::Stdio::piped())
                        .spawn()
                        .expect("spawn")
                })
                .collect();
            for c in children {
                let out = c.wait_with_output().expect("wait");
                assert!(
                    out.status.success(),
                    "{} {id}: {}",
                    db.name(),
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            let shown = console(&["--json", "--db", &db.url, "activity", "show", &id]);
            shown.expect_code(0);
            assert_eq!(
                shown.json()["products"].as_array().map(Vec::len),
                Some(2),
                "{}",
                shown.stdout
            );
        }
    }
}

/// Chinese product names (the shop's own) keep the columns of `activity show` straight: every
/// row of the table has the same display width, so the figures after the name line up.
#[tokio::test]
async fn wide_product_names_keep_the_columns_aligned() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = TestDb::sqlite();
    run(&db, &["migrate"]).expect_code(0);
    let (s, e) = future_window();
    let toml = activity_toml("cjk", &[("p1", 100, 2), ("p2", 5, 1), ("p3", 7, 1)], s, e)
        .replacen("id = \"p1\"\n", "id = \"p1\"\nname = \"手机壳\"\n", 1)
        .replacen("id = \"p2\"\n", "id = \"p2\"\nname = \"phone case\"\n", 1)
        .replacen("id = \"p3\"\n", "id = \"p3\"\nname = \"🎧 蓝牙耳机\"\n", 1);
    let path = write_file(dir.path(), "cjk.toml", &toml);
    run(&db, &["activity", "import", path.to_str().expect("utf8")]).expect_code(0);
    let show = run(&db, &["activity", "show", "cjk"]);
    show.expect_code(0);
    let rows: Vec<&str> = show
        .stdout
        .lines()
        .filter(|l| l.starts_with("p1") || l.starts_with("p2") || l.starts_with("p3"))
        .collect();
    assert_eq!(rows.len(), 3, "{}", show.stdout);
    let widths: Vec<usize> = rows
        .iter()
        .map(|l| seckill_console::render::table::display_width(l))
        .collect();
    assert!(
        widths.iter().all(|w| *w == widths[0]),
        "{widths:?}\n{}",
        show.stdout
    );
    // Where the column after the name starts, in terminal columns, is the same on every row.
    let start_of = |l: &str, what: &str| {
        let at = l.find(what).expect("figure in the row");
        seckill_console::render::table::display_width(&l[..at])
    };
    assert_eq!(
        start_of(rows[0], "手机壳"),
        start_of(rows[2], "🎧"),
        "{}",
        show.stdout
    );
}

/// Times in the operator's zone: `--tz Asia/Shanghai` (or SECKILL_TZ) shows `+08:00` in the
/// text tables while JSON stays RFC 3339 in UTC; an unknown zone exits 2 naming it.
#[tokio::test]
async fn times_show_in_the_zone_asked_for() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = TestDb::sqlite();
    run(&db, &["migrate"]).expect_code(0);
    let toml = "[activity]\nid = \"tz\"\nname = \"tz\"\nstarts_at = \"2030-01-01T00:00:00Z\"\nends_at = \"2030-01-01T02:00:00Z\"\n\n[[products]]\nid = \"p1\"\nstock = 5\nper_user_limit = 1\n";
    let path = write_file(dir.path(), "tz.toml", toml);
    run(&db, &["activity", "import", path.to_str().expect("utf8")]).expect_code(0);
    let show = run(&db, &["--tz", "Asia/Shanghai", "activity", "show", "tz"]);
    show.expect_code(0);
    assert!(
        show.stdout.contains("2030-01-01 08:00:00 +08:00"),
        "{}",
        show.stdout
    );
    let env = crate::harness::cli::console_env(
        &["--db", &db.url, "activity", "list"],
        &[("SECKILL_TZ", "America/New_York")],
    );
    assert!(
        env.stdout.contains("2029-12-31 19:00:00 -05:00"),
        "{}",
        env.stdout
    );
    let json = run(
        &db,
        &["--tz", "Asia/Shanghai", "--json", "activity", "show", "tz"],
    );
    assert!(
        json.stdout.contains("2030-01-01T00:00:00Z"),
        "{}",
        json.stdout
    );
    let bad = run(&db, &["--tz", "Mars/Olympus", "activity", "list"]);
    bad.expect_code(2);
    assert!(bad.stderr.contains("'Mars/Olympus'"), "{}", bad.stderr);
}

/// One calendar on every backend: an activity of 2098-2099 is imported and read back as given
/// (MariaDB stored such a time as NULL and the import failed with exit 1), and a time out of
/// every backend's range is exit 2 naming the field.
#[tokio::test]
async fn dates_to_2099_on_every_backend_and_out_of_range_named() {
    let dir = tempfile::tempdir().expect("tmp");
    let file = |name: &str, ends: &str| {
        write_file(
            dir.path(),
            name,
            &format!(
                "[activity]\nid = \"far\"\nname = \"Far\"\nstarts_at = \"2098-01-01T00:00:00Z\"\nends_at = \"{ends}\"\n\n[[products]]\nid = \"p1\"\nstock = 1\nper_user_limit = 1\n"
            ),
        )
    };
    let far = file("far.toml", "2099-12-31T23:59:59Z");
    let far = far.to_str().expect("utf8");
    let beyond = file("beyond.toml", "9999-12-31T23:00:00-05:00");
    let beyond = beyond.to_str().expect("utf8");
    for db in TestDb::all().await {
        let name = db.name();
        run(&db, &["migrate"]).expect_code(0);
        run(&db, &["activity", "import", far]).expect_code(0);
        let show = run(&db, &["--json", "activity", "show", "far"]);
        show.expect_code(0);
        let doc = show.json();
        assert_eq!(doc["starts_at"], "2098-01-01T00:00:00Z", "{name}: {doc}");
        assert_eq!(doc["ends_at"], "2099-12-31T23:59:59Z", "{name}: {doc}");
        // A re-import of the same file changes nothing, on every backend.
        let again = run(&db, &["--json", "activity", "import", far]);
        again.expect_code(0);
        let doc = again.json();
        assert_eq!(
            (
                &doc["activity_created"],
                &doc["products_updated"],
                &doc["products_created"],
                &doc["products_unchanged"]
            ),
            (
                &serde_json::json!(false),
                &serde_json::json!(0),
                &serde_json::json!(0),
                &serde_json::json!(1)
            ),
            "{name}: {doc}"
        );
        let out = run(&db, &["activity", "import", beyond]);
        out.expect_code(2);
        assert!(
            out.stderr.contains("activity.ends_at") && out.stderr.contains("out of range"),
            "{name}: {}",
            out.stderr
        );
    }
}

/// The TUI's activity list keeps its products' figures between refreshes (summing every product
/// of every activity at each refresh grew with products that stood still): an activity just
/// imported shows with its figures at once, a listed one's are summed again once a period.
#[tokio::test(flavor = "multi_thread")]
async fn a_kept_listing_sums_products_once_a_period_and_new_activities_at_once() {
    use crate::harness::fixtures::import;
    use seckill_console::db::activity::{self, ActivitySummary};
    use seckill_console::ops::listing::Listing;
    use std::time::Duration;
    fn figures(list: &[ActivitySummary], id: &str) -> Option<(i64, i64)> {
        list.iter()
            .find(|a| a.activity.activity_id.as_str() == id)
            .map(|a| (a.products, a.total_stock))
    }
    for tdb in TestDb::all().await {
        let name = tdb.name();
        let db = tdb.open().await;
        import(&db, "la", &[("p1", 10, 2), ("p2", 5, 1)], future_window()).await;
        let mut kept = Listing::new(Duration::from_secs(3600));
        let mut fresh = Listing::new(Duration::ZERO);
        let l = kept.read(&db).await.expect("list");
        assert_eq!(figures(&l, "la"), Some((2, 15)), "{name}");

        import(&db, "lb", &[("q1", 7, 1)], future_window()).await;
        let l = kept.read(&db).await.expect("list");
        assert_eq!(figures(&l, "lb"), Some((1, 7)), "{name}: a new activity");
        assert_eq!(figures(&l, "la"), Some((2, 15)), "{name}");

        // A product added to a listed activity: the kept figures stand until the period ends;
        // a period of zero sums again at once, as the `activity list` command does.
        let three = [("p1", 10, 2), ("p2", 5, 1), ("p3", 20, 1)];
        import(&db, "la", &three, future_window()).await;
        let l = kept.read(&db).await.expect("list");
        assert_eq!(
            figures(&l, "la"),
            Some((2, 15)),
            "{name}: within the period"
        );
        let l = fresh.read(&db).await.expect("list");
        assert_eq!(figures(&l, "la"), Some((3, 35)), "{name}: the next period");
        let l = activity::list(&db).await.expect("list");
        assert_eq!(figures(&l, "la"), Some((3, 35)), "{name}");
        assert_eq!(figures(&l, "lb"), Some((1, 7)), "{name}");
        db.close().await;
    }
}
