//! The TUI as an operator runs it: the real binary in a tmux pane against a real redis-server
//! and a SQLite file. It shows the stock table, fixes a drifted product after a preview and a
//! yes, answers keys while Redis is stopped with SIGSTOP (and says "stale"), recovers after
//! SIGCONT, and restores the terminal on quit. Without a terminal it refuses with exit 2.

use crate::harness::tmux::Tmux;
use crate::harness::{Console, RedisServer, TestDb, console};
use std::time::{Duration, Instant};

#[test]
fn without_a_terminal_the_tui_refuses_with_exit_2() {
    let db = TestDb::sqlite();
    let r = console(&["--redis", "redis://127.0.0.1:1", "--db", &db.url]);
    r.expect_code(2);
    assert!(r.stderr.contains("needs a terminal"), "{}", r.stderr);
    let r = console(&["--json", "--db", &db.url]);
    r.expect_code(2);
    assert_eq!(r.json_error()["kind"], "bad_input");
}

#[test]
fn the_refresh_flag_is_validated() {
    let db = TestDb::sqlite();
    let r = console(&["--refresh", "0", "--db", &db.url, "activity", "list"]);
    r.expect_code(2);
    assert!(r.stderr.contains("refresh 0"), "{}", r.stderr);
    let r = console(&["--refresh", "soon", "--db", &db.url, "activity", "list"]);
    r.expect_code(2);
}

#[test]
fn the_tui_fixes_drift_and_answers_keys_while_redis_is_stopped() {
    let redis = RedisServer::start();
    let db = TestDb::sqlite();
    let dir = tempfile::tempdir().expect("temp dir");
    Console::redis(&redis.url(), &db.url).import_file_preheat(
        dir.path(),
        "tui-sale",
        &[("phone", 100, 2), ("case", 50, 1)],
    );
    redis.cli(&["SET", "seckill:{tui-sale:phone}:stock", "97"]);

    let command = format!(
        "{} --redis {} --db {}; echo EXITED=$?; stty -a | tr ' ' '\\n' | grep -x -- '-*icanon'; sleep 60",
        crate::harness::cli::binary(),
        redis.url(),
        db.url
    );
    let tmux = Tmux::start("seckill-tui", 110, 30, &command);

    // The live activity is picked and its stock shows within seconds of the start.
    tmux.wait("the stock table", Duration::from_secs(10), |s| {
        s.contains("activity tui-sale") && s.contains("phone") && s.contains("drift")
    });

    // Reconcile, fix the product: the preview, then y.
    tmux.keys("5");
    tmux.wait("the reconcile view", Duration::from_secs(2), |s| {
        s.contains("Reconcile 1 to fix")
    });
    tmux.keys("f");
    tmux.wait("the fix preview", Duration::from_secs(5), |s| {
        s.contains("Fix phone in tui-sale?") && s.contains("97 -> 100")
    });
    confirm(&tmux);
    tmux.wait("the fix result", Duration::from_secs(5), |s| {
        s.contains("Fix applied to 1 product(s)")
    });
    assert_eq!(
        redis.cli(&["GET", "seckill:{tui-sale:phone}:stock"]).trim(),
        "100"
    );
    tmux.keys("Escape");
    tmux.wait("drift 0", Duration::from_secs(5), |s| {
        s.contains("No drift: nothing to fix.")
    });

    // Redis stopped: keys still answer at once, and the header says the data is stale.
    redis.signal("STOP");
    std::thread::sleep(Duration::from_secs(5));
    for (key, title) in [("1", "Activities"), ("8", "Audit"), ("2", "Stock")] {
        tmux.keys(key);
        let took = tmux.wait(title, Duration::from_secs(2), |s| {
            s.contains(&format!("┌ {title} "))
        });
        assert!(
            took < Duration::from_millis(500),
            "{title} took {took:?} with Redis stopped"
        );
    }
    tmux.wait("stale", Duration::from_secs(3), |s| s.contains("stale "));
    redis.signal("CONT");
    tmux.wait("fresh data", Duration::from_secs(10), |s| {
        s.contains("s old") && !s.contains("stale ")
    });

    // q quits, the terminal is back: main screen, canonical mode.
    tmux.keys("q");
    let s = tmux.screen();
    tmux.wait("the exit", Duration::from_secs(5), |s| {
        s.contains("EXITED=0")
    });
    // The shell prints stty's answer a moment after EXITED: wait for it, whichever it is.
    tmux.wait("stty's answer", Duration::from_secs(5), |s| {
        s.lines().any(|l| l == "icanon" || l == "-icanon")
    });
    let after = tmux.screen();
    assert!(
        after.lines().any(|l| l == "icanon"),
        "raw mode left on:\n{after}\nbefore:\n{s}"
    );
    let alt = tmux.run(&["display-message", "-p", "-t", "tui", "#{alternate_on}"]);
    assert_eq!(
        String::from_utf8_lossy(&alt.stdout).trim(),
        "0",
        "still on the alternate screen"
    );
}

/// Confirms the dialog on screen as an operator does: it has been shown a moment (keys typed
/// ahead do not confirm), then Enter.
fn confirm(tmux: &Tmux) {
    std::thread::sleep(Duration::from_millis(600));
    tmux.keys("Enter");
}

/// Shows activity `id` as an operator picks it: the Activities view filtered to it once it is
/// listed, an arrow onto its row (the activity shown left the filtered table), Enter.
fn pick_activity(tmux: &Tmux, id: &str) {
    tmux.keys("1");
    tmux.keys("/");
    tmux.keys(id);
    tmux.keys("Enter");
    tmux.wait("the activity listed", Duration::from_secs(10), |s| {
        s.contains(&format!("Test {id}"))
    });
    tmux.keys("Up");
    tmux.keys("Enter");
}

/// The TUI in a 110x30 tmux pane on `activity`, imported with `products` (id, stock, limit)
/// and preheated, once its Stock table has read every product. It runs in `dir` (the report
/// key writes its file there) with the extra `args`.
fn stock_tui(
    session: &str,
    at: (&RedisServer, &TestDb, &std::path::Path),
    sale: (&str, &[(&str, i64, i64)]),
    args: &str,
) -> Tmux {
    stock_tui_sized(session, at, sale, args, (110, 30))
}

/// [`stock_tui`] in a pane of `(columns, rows)`.
fn stock_tui_sized(
    session: &str,
    (redis, db, dir): (&RedisServer, &TestDb, &std::path::Path),
    (activity, products): (&str, &[(&str, i64, i64)]),
    args: &str,
    (cols, rows): (u16, u16),
) -> Tmux {
    Console::redis(&redis.url(), &db.url).import_file_preheat(dir, activity, products);
    let command = format!(
        "cd {} && {} --redis {} --db {} {args}; sleep 60",
        dir.display(),
        crate::harness::cli::binary(),
        redis.url(),
        db.url
    );
    let tmux = Tmux::start(session, cols, rows, &command);
    // Every product read: the Stock table's title counts them all.
    let all = format!("{n}/{n} products", n = products.len());
    tmux.wait("the stock table", Duration::from_secs(10), |s| {
        s.contains(&format!("activity {activity}")) && s.contains(&all)
    });
    tmux
}

/// The cursor stays on the product the operator highlighted when a refresh re-sorts the
/// table under it (issue 20: `z` once named the product that slid into the row), and the
/// pause dialog names that product.
#[test]
fn the_cursor_follows_its_product_across_a_re_sort() {
    let redis = RedisServer::start();
    let db = TestDb::sqlite();
    let dir = tempfile::tempdir().expect("temp dir");
    let products = [("alpha", 10, 1), ("bravo", 20, 1), ("charlie", 30, 1)];
    let at = (&redis, &db, dir.path());
    let tmux = stock_tui(
        "seckill-follow",
        at,
        ("tui-follow", &products),
        "--refresh 1",
    );
    // Sorted by Redis stock, least first: alpha (10) is the first row, the cursor on it.
    tmux.keys("2");
    tmux.keys("s");
    tmux.wait(
        "the sort by redis, alpha highlighted",
        Duration::from_secs(3),
        |s| s.contains("sorted by redis") && s.contains(">alpha"),
    );
    // A write outside the scripts makes alpha the largest: the next refresh puts it last.
    redis.cli(&["SET", "seckill:{tui-follow:alpha}:stock", "90"]);
    // The table's rows, in order: "│ name" or "│>name" (the highlighted one).
    let rows = |s: &str| -> Vec<String> {
        s.lines()
            .filter_map(|l| {
                let rest = l.trim_start().strip_prefix('│')?;
                let name = rest.trim_start_matches('>').split_whitespace().next()?;
                ["alpha", "bravo", "charlie"]
                    .contains(&name)
                    .then(|| rest.chars().take(1).collect::<String>() + name)
            })
            .collect()
    };
    tmux.wait("alpha re-sorted", Duration::from_secs(10), |s| {
        rows(s).last().is_some_and(|r| r.ends_with("alpha"))
    });
    let s = tmux.screen();
    assert_eq!(
        rows(&s),
        [" bravo", " charlie", ">alpha"],
        "the cursor left alpha:\n{s}"
    );
    tmux.keys("z");
    tmux.wait("the pause dialog", Duration::from_secs(3), |s| {
        s.contains("Pause ")
    });
    let s = tmux.screen();
    assert!(s.contains("Pause alpha of tui-follow?"), "{s}");
    tmux.keys("n");
}

/// Enter on a Stock row opens the product's detail (its keys with types and sizes, its orders
/// by status, its events), and R asks to resolve the queue's real count, not the feed's 1,000
/// (issue 20: `R` asked for "all 1000" of 2,193 and resolved 2,170).
#[test]
fn enter_shows_a_products_detail_and_r_counts_the_whole_queue() {
    let redis = RedisServer::start();
    let db = TestDb::sqlite();
    let dir = tempfile::tempdir().expect("temp dir");
    let products = [("alpha", 5000, 5), ("bravo", 5000, 5)];
    let at = (&redis, &db, dir.path());
    let tmux = stock_tui("seckill-detail", at, ("tui-detail", &products), "");
    // Half the deductions "time out" at the app server: each leaves a compensation entry.
    let doc = Console::redis(&redis.url(), &db.url)
        .json("load tui-detail --buyers 2600 --concurrency 32 --yes --faults timeout=0.5 --seed 5");
    let entries = doc["compensation_entries"].as_i64().unwrap_or(0);
    assert!(entries > 1000, "the queue must outgrow the feed: {doc}");

    tmux.keys("2");
    tmux.keys("Enter");
    tmux.wait("the detail", Duration::from_secs(10), |s| {
        s.contains("Keys (type, size, expiry, memory)")
    });
    let s = tmux.screen();
    for want in ["alpha of tui-detail", "stock   string", "events  stream"] {
        assert!(s.contains(want), "{want} not on\n{s}");
    }
    // The rest of it scrolls into view.
    tmux.keys("End");
    tmux.wait("the detail's end", Duration::from_secs(3), |s| {
        s.contains("The console's last writes on it")
    });
    // Back to the top, then down a page at a time to the orders.
    tmux.keys("Home");
    let mut seen = false;
    for _ in 0..10 {
        let s = tmux.screen();
        if s.contains("Orders by status") && s.contains("order(s)") {
            seen = true;
            break;
        }
        tmux.keys("PageDown");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        seen,
        "no orders by status in the detail:\n{}",
        tmux.screen()
    );
    tmux.keys("Escape");

    tmux.keys("4");
    tmux.keys("R");
    let want = format!(
        "Resolve all {} pending entries of tui-detail?",
        seckill_console::tui::widgets::columns::grouped(entries)
    );
    tmux.wait("the resolve dialog", Duration::from_secs(10), |s| {
        s.contains("Resolve compensation?")
    });
    let s = tmux.screen();
    assert!(s.contains(&want), "{want} not on\n{s}");
    tmux.keys("Escape");
    tmux.keys("q");

    // Read-only, the detail reads with read commands only (its meta hash by HSCAN).
    let command = format!(
        "{} --redis {} --db {} --read-only; sleep 60",
        crate::harness::cli::binary(),
        redis.url(),
        db.url
    );
    let ro = Tmux::start("seckill-detail-ro", 110, 30, &command);
    ro.wait("the stock table", Duration::from_secs(10), |s| {
        s.contains("2/2 products")
    });
    ro.keys("Enter");
    ro.wait("the read-only detail", Duration::from_secs(10), |s| {
        s.contains("Keys (type, size, expiry, memory)")
    });
    ro.keys("PageDown");
    ro.wait("the meta hash", Duration::from_secs(3), |s| {
        s.contains("initial = 5000")
    });
}

/// An activity-wide fix of 40 drifted products at 80x24: the list scrolls, the typed id is
/// refused until the list has been read to its end, then the fix applies to all 40 (issue 20:
/// the dialog showed "... and 37 more line(s)" and asked for the id anyway).
#[test]
fn a_fix_of_40_products_is_read_to_its_end_before_it_applies() {
    let redis = RedisServer::start();
    let db = TestDb::sqlite();
    let dir = tempfile::tempdir().expect("temp dir");
    let names: Vec<String> = (0..40).map(|i| format!("p{i:02}")).collect();
    let products: Vec<(&str, i64, i64)> = names.iter().map(|n| (n.as_str(), 10, 1)).collect();
    let at = (&redis, &db, dir.path());
    let tmux = stock_tui_sized(
        "seckill-fix40",
        at,
        ("tui-fix40", &products),
        "--refresh 1",
        (80, 24),
    );
    for n in &names {
        redis.cli(&["INCRBY", &format!("seckill:{{tui-fix40:{n}}}:stock"), "3"]);
    }
    tmux.keys("5");
    tmux.wait("40 drifted products", Duration::from_secs(10), |s| {
        s.contains("p39") || s.contains("40 to fix") || s.contains("drift")
    });
    tmux.keys("F");
    tmux.wait("the fix dialog", Duration::from_secs(10), |s| {
        s.contains("Fix 40 product(s)")
    });
    let s = tmux.screen();
    assert!(s.contains("below: Down / PgDn / End"), "{s}");
    tmux.keys("tui-fix40");
    confirm(&tmux);
    tmux.wait("the refusal", Duration::from_secs(3), |s| {
        s.contains("read it all first")
    });
    assert_eq!(
        redis.cli(&["GET", "seckill:{tui-fix40:p39}:stock"]).trim(),
        "13",
        "applied before the list was read"
    );
    tmux.keys("End");
    tmux.wait("the list's end", Duration::from_secs(3), |s| {
        s.contains("p39") && s.contains("(end;")
    });
    tmux.keys("Enter");
    tmux.wait("the fix result", Duration::from_secs(15), |s| {
        s.contains("Fix applied to 40 product(s)")
    });
    for n in ["p00", "p39"] {
        assert_eq!(
            redis
                .cli(&["GET", &format!("seckill:{{tui-fix40:{n}}}:stock")])
                .trim(),
            "10",
            "{n} not fixed"
        );
    }
}

/// The Activities view counts other activities' alerts as their own status would, and the
/// header names trouble elsewhere (issue 20: a cancelled activity with its stock still in Redis
/// showed `-`, one a day away that nobody had preheated showed `critical missing`).
#[test]
fn other_activities_count_their_alerts_right_and_the_header_says_so() {
    use crate::harness::fixtures::{activity_toml, future_window, live_window, write_file};
    let redis = RedisServer::start();
    let db = TestDb::sqlite();
    let dir = tempfile::tempdir().expect("temp dir");
    let at = (&redis, &db, dir.path());
    let tmux = stock_tui(
        "seckill-others",
        at,
        ("tui-main", &[("alpha", 10, 1)]),
        "--refresh 1",
    );
    let c = Console::redis(&redis.url(), &db.url);
    let (starts, ends) = future_window();
    let later = write_file(
        dir.path(),
        "later.toml",
        &activity_toml("later", &[("p1", 5, 1), ("p2", 5, 1)], starts, ends),
    );
    c.ok(&["activity", "import", later.to_str().expect("path")]);
    let (starts, ends) = live_window();
    let gone = activity_toml("gone", &[("g1", 5, 1)], starts, ends);
    let file = write_file(dir.path(), "gone.toml", &gone);
    c.ok(&["activity", "import", file.to_str().expect("path")]);
    c.preheat("gone");
    let cancelled = gone.replace("[activity]\n", "[activity]\nstatus = \"cancelled\"\n");
    let file = write_file(dir.path(), "gone.toml", &cancelled);
    c.ok(&["activity", "import", file.to_str().expect("path")]);

    tmux.keys("1");
    // The alerts column is a row's last figure.
    let alerts_of = |s: &str, id: &str| -> Option<String> {
        s.lines()
            .find(|l| l.contains(&format!(" {id} ")))
            .and_then(|l| l.trim_end().trim_end_matches('│').split_whitespace().last())
            .map(str::to_string)
    };
    tmux.wait("both counted", Duration::from_secs(15), |s| {
        alerts_of(s, "gone").as_deref() == Some("1")
            && alerts_of(s, "later").as_deref() == Some("0")
    });
    let s = tmux.screen();
    assert!(s.contains("! gone: 1 alert(s)"), "no badge for gone:\n{s}");
    // Selected, the activity a day away says it is not preheated, as information.
    pick_activity(&tmux, "later");
    tmux.keys("3");
    tmux.wait("the not-preheated note", Duration::from_secs(10), |s| {
        s.contains("not_preheated")
    });
    let s = tmux.screen();
    assert!(!s.contains("missing"), "{s}");
    assert!(s.contains("info"), "{s}");
}

/// The console opens on the live sale that is selling (not a quiet one listed first), shows
/// the products' names beside their ids, and `/` finds a product by its Chinese name (issue
/// 20: the first screen was a quiet activity, and `/手机` found nothing).
#[test]
fn the_first_screen_is_the_busy_sale_and_names_are_found() {
    use crate::harness::fixtures::{activity_toml, live_window, write_file};
    let redis = RedisServer::start();
    let db = TestDb::sqlite();
    let dir = tempfile::tempdir().expect("temp dir");
    let c = Console::redis(&redis.url(), &db.url);
    let (starts, ends) = live_window();
    // Imported last, the quiet sale is listed first (newest window first).
    let busy = activity_toml("tui-busy", &[("p1", 500, 5), ("p2", 500, 5)], starts, ends)
        .replace("id = \"p1\"\n", "id = \"p1\"\nname = \"手机 42\"\n")
        .replace("id = \"p2\"\n", "id = \"p2\"\nname = \"Laptop\"\n");
    let file = write_file(dir.path(), "busy.toml", &busy);
    c.ok(&["activity", "import", file.to_str().expect("path")]);
    c.preheat("tui-busy");
    let quiet = activity_toml(
        "tui-quiet",
        &[("q1", 5, 1)],
        starts + chrono::Duration::seconds(1),
        ends,
    );
    let file = write_file(dir.path(), "quiet.toml", &quiet);
    c.ok(&["activity", "import", file.to_str().expect("path")]);
    c.preheat("tui-quiet");
    c.ok(&[
        "load",
        "tui-busy",
        "--buyers",
        "200",
        "--concurrency",
        "8",
        "--yes",
    ]);
    let command = format!(
        "cd {} && {} --redis {} --db {}; sleep 60",
        dir.path().display(),
        crate::harness::cli::binary(),
        redis.url(),
        db.url
    );
    let tmux = Tmux::start("seckill-names", 110, 30, &command);
    tmux.wait("the busy sale", Duration::from_secs(10), |s| {
        s.contains("activity tui-busy") && s.contains("Laptop")
    });
    let s = tmux.screen();
    assert!(s.contains("手机 42"), "the name column:\n{s}");
    tmux.keys("/");
    tmux.keys("手机");
    tmux.wait("the filter by name", Duration::from_secs(3), |s| {
        s.contains("1/2 products")
    });
    let s = tmux.screen();
    assert!(s.contains("p1") && !s.contains("Laptop"), "{s}");
}

/// With Redis hung (SIGSTOP), a write fails within the response timeout and says why, and a
/// view of another activity says what it waits on (issue 20: `f` showed "working for 14s"
/// and failed after 15 to 37 s; "Waiting for the first snapshot" for 20 s, no reason).
#[test]
fn a_write_against_a_hung_redis_fails_within_the_timeout_with_the_reason() {
    let redis = RedisServer::start();
    let db = TestDb::sqlite();
    let dir = tempfile::tempdir().expect("temp dir");
    let at = (&redis, &db, dir.path());
    let products = [("alpha", 10, 1), ("bravo", 10, 1)];
    let tmux = stock_tui(
        "seckill-hung",
        at,
        ("tui-hung", &products),
        "--response-timeout-ms 1000",
    );
    tmux.keys("2");
    redis.signal("STOP");
    tmux.keys("z");
    tmux.wait("the pause dialog", Duration::from_secs(3), |s| {
        s.contains("Pause alpha of tui-hung?")
    });
    confirm(&tmux);
    let started = Instant::now();
    let took = tmux.wait("the failure", Duration::from_secs(30), |s| {
        s.contains("Pause failed") || s.contains("could not be changed")
    });
    let s = tmux.screen();
    redis.signal("CONT");
    println!(
        "the pause failed after {took:?} ({:?} since Enter)",
        started.elapsed()
    );
    assert!(s.contains("timed out"), "the reason:\n{s}");
    // The response timeout is 1 s; a few round trips at most, never the 15-37 s it took.
    assert!(took < Duration::from_secs(8), "failed after {took:?}");
    tmux.keys("Escape");

    // A fix's preview the same way, on a product that drifted.
    redis.cli(&["INCRBY", "seckill:{tui-hung:bravo}:stock", "3"]);
    tmux.keys("5");
    tmux.wait("the drift", Duration::from_secs(10), |s| {
        s.contains("Reconcile 1 to fix")
    });
    redis.signal("STOP");
    tmux.keys("f");
    let took = tmux.wait("the preview's failure", Duration::from_secs(60), |s| {
        s.contains("Fix preview failed")
    });
    let s = tmux.screen();
    redis.signal("CONT");
    println!("the fix preview failed after {took:?}");
    assert!(s.contains("timed out"), "the reason:\n{s}");
    assert!(took < Duration::from_secs(8), "failed after {took:?}");
    tmux.keys("Escape");

    // Another activity chosen while Redis hangs: its empty views say what they wait on.
    Console::redis(&redis.url(), &db.url).import_file_preheat(
        dir.path(),
        "tui-other",
        &[("gamma", 5, 1)],
    );
    redis.signal("STOP");
    pick_activity(&tmux, "tui-other");
    tmux.wait("the reason it waits", Duration::from_secs(10), |s| {
        s.contains("activity tui-other")
            && (s.contains("Redis does not answer") || s.contains("No data: Redis"))
    });
    redis.signal("CONT");
}

/// `TERM=dumb` gets ASCII glyphs, and under `NO_COLOR` the current view stays marked (issue
/// 20: braille and blocks on a dumb terminal; no mark of the current tab without colour).
#[test]
fn a_dumb_terminal_gets_ascii_and_no_color_keeps_the_tab_marked() {
    let redis = RedisServer::start();
    let db = TestDb::sqlite();
    let dir = tempfile::tempdir().expect("temp dir");
    let at = (&redis, &db, dir.path());
    let tmux = stock_tui("seckill-dumb", at, ("tui-dumb", &[("alpha", 10, 1)]), "");
    tmux.keys("q");
    let command = format!(
        "TERM=dumb NO_COLOR=1 {} --redis {} --db {}; sleep 60",
        crate::harness::cli::binary(),
        redis.url(),
        db.url
    );
    let dumb = Tmux::start("seckill-dumb2", 100, 30, &command);
    dumb.wait("the stock table", Duration::from_secs(10), |s| {
        s.contains("1/1 products")
    });
    let s = dumb.screen();
    assert!(s.is_ascii(), "not ASCII:\n{s}");
    assert!(s.contains("+-") && s.contains("2[Stock]"), "{s}");
    drop(tmux);
}

/// At 60x20, a product topped up by 1,234,567 and raised by a stray INCRBY shows its figures
/// whole and its drift signed; the top-up form refuses `10.5` at the `.` and says why; the event
/// log has the drift's alert; five products whose stock vanished fold into one alert line
/// (issue 20, items 1, 5, 7 and 9: `35567` for 1,235,567, a drift without its sign, `10.5`
/// taken as `+105`).
#[test]
fn figures_whole_form_checked_events_logged_and_alerts_folded_at_60x20() {
    let redis = RedisServer::start();
    let db = TestDb::sqlite();
    let dir = tempfile::tempdir().expect("temp dir");
    let at = (&redis, &db, dir.path());
    let products = [
        ("p0003", 100, 1),
        ("q1", 5, 1),
        ("q2", 5, 1),
        ("q3", 5, 1),
        ("q4", 5, 1),
        ("q5", 5, 1),
    ];
    let tmux = stock_tui_sized(
        "seckill-figures",
        at,
        ("tui-fig", &products),
        "--refresh 1",
        (60, 20),
    );
    let c = Console::redis(&redis.url(), &db.url);
    c.ok(&[
        "topup",
        "tui-fig",
        "--product",
        "p0003",
        "--add",
        "1234567",
        "--yes",
    ]);
    redis.cli(&["INCRBY", "seckill:{tui-fig:p0003}:stock", "123456"]);
    tmux.keys("2");
    tmux.wait(
        "the drift, signed and whole",
        Duration::from_secs(10),
        |s| s.contains("+123,456"),
    );
    let s = tmux.screen();
    // Whatever columns fit, no figure of p0003 is a cut one.
    let row = s
        .lines()
        .find(|l| l.contains("p0003"))
        .unwrap_or_else(|| panic!("no row of p0003: {s}"));
    for cut in ["35567", "234667", "358123", "23456 "] {
        assert!(!row.contains(cut), "a cut figure {cut} in {row}");
    }
    assert!(
        ["1,358,123", "1,234,667", "+123,456"]
            .iter()
            .any(|whole| row.contains(whole)),
        "no whole figure on the row: {row}"
    );
    // The form refuses what is not a whole unit, at the keystroke.
    tmux.keys("g");
    tmux.keys("t");
    tmux.wait("the form", Duration::from_secs(3), |s| {
        s.contains("Top up p0003")
    });
    tmux.keys("10.");
    tmux.wait("the refusal", Duration::from_secs(3), |s| {
        s.contains("'.' refused") && s.contains("whole units only") && s.contains("units: 10._")
    });
    // Nothing more is typed until Backspace takes the refused key back: "10.5" never reads 105.
    tmux.keys("5");
    tmux.keys("BSpace");
    tmux.keys("5");
    tmux.wait("the units kept whole", Duration::from_secs(3), |s| {
        s.contains("units: 105_") && !s.contains("refused")
    });
    let s = tmux.screen();
    // Every line of the form whole at 60 columns: the text wraps, nothing is cut.
    assert!(s.contains("away).") && s.contains("meanwhile)"), "{s}");
    tmux.keys("Escape");
    // The event log has the drift raised.
    tmux.keys("0");
    tmux.wait("the drift in the log", Duration::from_secs(5), |s| {
        s.contains("raised") && s.contains("drift")
    });
    // Five stocks gone: one folded line.
    for q in ["q1", "q2", "q3", "q4", "q5"] {
        redis.cli(&["DEL", &format!("seckill:{{tui-fig:{q}}}:stock")]);
    }
    tmux.keys("3");
    tmux.wait("the folded alerts", Duration::from_secs(10), |s| {
        s.contains("missing x5")
    });
}

/// At 80x24, read-only: the footer keeps every view's key and `? help`, the help scrolls to its
/// last binding, and `f` previews a fix and applies nothing (issue 20, items 6, 11 and 12: the
/// help stopped at `t, z / Z`, the footer at `8 Au`, read-only refused the preview).
#[test]
fn at_80x24_read_only_the_footer_and_help_fit_and_f_previews() {
    let redis = RedisServer::start();
    let db = TestDb::sqlite();
    let dir = tempfile::tempdir().expect("temp dir");
    let at = (&redis, &db, dir.path());
    let tmux = stock_tui_sized(
        "seckill-80x24",
        at,
        ("tui-small", &[("alpha", 10, 1)]),
        "--read-only",
        (80, 24),
    );
    redis.cli(&["INCRBY", "seckill:{tui-small:alpha}:stock", "2"]);
    let s = tmux.screen();
    let footer: Vec<&str> = s.lines().rev().take(3).collect();
    assert!(
        footer.iter().any(|l| l.contains("? help")),
        "no ? help in the footer:\n{s}"
    );
    assert!(
        footer.iter().any(|l| l.contains("9") && l.contains("0")),
        "not every view's key:\n{s}"
    );
    tmux.keys("?");
    tmux.wait("the help", Duration::from_secs(3), |s| {
        s.contains("Help: keys")
    });
    tmux.keys("End");
    tmux.wait("the help's end", Duration::from_secs(3), |s| {
        s.contains("scroll a dialog") && s.contains("(end;")
    });
    tmux.keys("Escape");
    tmux.keys("5");
    tmux.wait("the drift", Duration::from_secs(10), |s| {
        s.contains("Reconcile 1 to fix")
    });
    tmux.keys("f");
    tmux.wait("the read-only preview", Duration::from_secs(10), |s| {
        s.contains("(read-only)") && s.contains("12 -> 10")
    });
    tmux.keys("Enter");
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(
        redis
            .cli(&["GET", "seckill:{tui-small:alpha}:stock"])
            .trim(),
        "12",
        "a read-only console applied a fix"
    );
}

/// Smaller items of issue 20, on the real binary: `Z` pauses every product and `U` resumes
/// them (no "pause all first"), the Activities view opens on the activity shown (not its top
/// row), and the preheat table shows a small token rate as a plain decimal (not `1.667e-4`).
#[test]
fn z_u_the_activities_cursor_and_plain_rates() {
    use crate::harness::fixtures::{activity_toml, future_window, write_file};
    let redis = RedisServer::start();
    let db = TestDb::sqlite();
    let dir = tempfile::tempdir().expect("temp dir");
    let c = Console::redis(&redis.url(), &db.url);
    // Listed first (the newest window): an upcoming activity, so the live one is not the top row.
    let (starts, ends) = future_window();
    let later = write_file(
        dir.path(),
        "later.toml",
        &activity_toml("tui-later", &[("x1", 5, 1)], starts, ends),
    );
    c.ok(&["activity", "import", later.to_str().expect("path")]);
    let at = (&redis, &db, dir.path());
    let tmux = stock_tui(
        "seckill-zu",
        at,
        ("tui-zu", &[("alpha", 1, 1), ("bravo", 10, 1)]),
        "",
    );
    let paused = |p: &str| {
        redis
            .cli(&["HGET", &format!("seckill:{{tui-zu:{p}}}:meta"), "paused"])
            .trim()
            .to_string()
    };
    tmux.keys("2");
    tmux.keys("Z");
    tmux.wait("the pause-all dialog", Duration::from_secs(3), |s| {
        s.contains("Pause every product of tui-zu?")
    });
    tmux.keys("tui-zu");
    confirm(&tmux);
    tmux.wait("the result", Duration::from_secs(5), |s| {
        s.contains("pause: 2 paused, 0 already so")
    });
    assert_eq!((paused("alpha"), paused("bravo")), ("1".into(), "1".into()));
    tmux.keys("Escape");
    tmux.keys("U");
    tmux.wait("the resume-all dialog", Duration::from_secs(5), |s| {
        s.contains("Resume every product of tui-zu?")
    });
    tmux.keys("tui-zu");
    confirm(&tmux);
    tmux.wait("the result", Duration::from_secs(5), |s| {
        s.contains("resume: 2 resumed, 0 already so")
    });
    assert_eq!((paused("alpha"), paused("bravo")), ("0".into(), "0".into()));
    tmux.keys("Escape");
    // The Activities view: the cursor on tui-zu, though tui-later is the top row.
    tmux.keys("1");
    tmux.wait("the list", Duration::from_secs(3), |s| {
        s.contains("tui-later")
    });
    let s = tmux.screen();
    let highlighted = s.lines().find(|l| l.contains("│>")).unwrap_or_default();
    assert!(highlighted.contains("tui-zu"), "{s}");
    // The gate's report: alpha's one unit over the 2 h window is 0.000167 tokens a second.
    tmux.keys("6");
    tmux.keys("p");
    tmux.wait("the preheat dialog", Duration::from_secs(3), |s| {
        s.contains("Preheat")
    });
    confirm(&tmux);
    tmux.wait("the report", Duration::from_secs(10), |s| s.contains("GO"));
    let s = tmux.screen();
    assert!(s.contains("0.000167"), "{s}");
    assert!(!s.contains("e-4"), "{s}");
}

/// The Preheat view says what a no-go had planned, how old its report is and what moved since,
/// and `P` names the keys it would rewrite (issue 20, case 9: "0 written, 0 unchanged, 1
/// conflict(s)" over 1,999 unchanged rows, a GO with no time after a product lost its keys).
#[test]
fn the_preheat_view_says_what_it_planned_and_what_moved_since() {
    let redis = RedisServer::start();
    let db = TestDb::sqlite();
    let dir = tempfile::tempdir().expect("temp dir");
    let at = (&redis, &db, dir.path());
    let tmux = stock_tui(
        "seckill-preheat",
        at,
        ("tui-pre", &[("alpha", 10, 1), ("bravo", 10, 1)]),
        "",
    );
    redis.cli(&["INCRBY", "seckill:{tui-pre:alpha}:stock", "3"]);
    tmux.keys("6");
    tmux.keys("p");
    tmux.wait("the gate's dialog", Duration::from_secs(3), |s| {
        s.contains("Preheat tui-pre?")
    });
    confirm(&tmux);
    tmux.wait("the no-go", Duration::from_secs(10), |s| {
        s.contains("NO-GO")
    });
    let s = tmux.screen();
    assert!(
        s.contains("nothing was written; the plan was:") && s.contains("made "),
        "{s}"
    );
    tmux.keys("P");
    tmux.wait("the force dialog", Duration::from_secs(3), |s| {
        s.contains("--force?")
    });
    let s = tmux.screen();
    assert!(s.contains("alpha: stock 13 -> 10"), "{s}");
    tmux.keys("Escape");
    redis.cli(&["DEL", "seckill:{tui-pre:bravo}:stock"]);
    tmux.wait("what moved since", Duration::from_secs(10), |s| {
        s.contains("since then: 1 product(s) have lost keys")
    });
}

/// Letters typed ahead never answer a write (issue 20: `lazy` typed in the Stock view paused a
/// product, `z` opening the dialog and `y` confirming it): nothing is paused in Redis.
#[test]
fn letters_typed_ahead_pause_nothing() {
    let redis = RedisServer::start();
    let db = TestDb::sqlite();
    let dir = tempfile::tempdir().expect("temp dir");
    let products = [("alpha", 10, 1), ("bravo", 20, 1)];
    let at = (&redis, &db, dir.path());
    let tmux = stock_tui("seckill-lazy", at, ("tui-lazy", &products), "");
    tmux.keys("2");
    tmux.keys("lazy");
    // The letters after z type the dialog's reason; only Enter confirms.
    tmux.wait("the reason typed", Duration::from_secs(3), |s| {
        s.contains("reason: y")
    });
    let s = tmux.screen();
    assert!(s.contains("Pause alpha of tui-lazy?"), "{s}");
    tmux.keys("Escape");
    std::thread::sleep(Duration::from_millis(300));
    // A first preheat leaves `paused` out: absent reads as 0, not paused.
    let paused = redis.cli(&["HGET", "seckill:{tui-lazy:alpha}:meta", "paused"]);
    assert!(
        ["", "0"].contains(&paused.trim()),
        "alpha was paused by letters typed ahead: paused is {paused:?}"
    );
}

/// Pause and resume the highlighted product from the Stock view: a dialog, y, the result;
/// Redis holds the flag and the table shows the state.
#[test]
fn the_tui_pauses_and_resumes_a_product_from_the_stock_view() {
    let redis = RedisServer::start();
    let db = TestDb::sqlite();
    let dir = tempfile::tempdir().expect("temp dir");
    let products = [("case", 50, 1), ("phone", 100, 2)];
    let at = (&redis, &db, dir.path());
    let tmux = stock_tui("seckill-pause", at, ("tui-hold", &products), "--actor dave");
    let c = Console::redis(&redis.url(), &db.url);
    tmux.keys("2");
    tmux.keys("z");
    tmux.wait("the pause dialog", Duration::from_secs(3), |s| {
        s.contains("Pause case of tui-hold?") && s.contains("reason:")
    });
    tmux.keys("陈列 restock");
    tmux.wait("the reason typed", Duration::from_secs(3), |s| {
        s.contains("reason: 陈列 restock")
    });
    confirm(&tmux);
    tmux.wait("the pause result", Duration::from_secs(5), |s| {
        s.contains("pause: 1 paused, 0 already so")
    });
    assert_eq!(
        redis
            .cli(&["HGET", "seckill:{tui-hold:case}:meta", "paused"])
            .trim(),
        "1"
    );
    assert_ne!(
        redis
            .cli(&["HGET", "seckill:{tui-hold:phone}:meta", "paused"])
            .trim(),
        "1"
    );
    tmux.keys("Escape");
    tmux.wait("the paused state", Duration::from_secs(5), |s| {
        s.lines()
            .any(|l| l.contains("case") && l.contains("paused"))
    });
    tmux.keys("z");
    tmux.wait("the resume dialog", Duration::from_secs(3), |s| {
        s.contains("Resume case of tui-hold?")
    });
    confirm(&tmux);
    tmux.wait("the resume result", Duration::from_secs(5), |s| {
        s.contains("resume: 1 resumed, 0 already so")
    });
    assert_eq!(
        redis
            .cli(&["HGET", "seckill:{tui-hold:case}:meta", "paused"])
            .trim(),
        "0"
    );
    // A top-up from the same view: the form, the confirmation, the result.
    tmux.keys("Escape");
    tmux.keys("t");
    tmux.wait("the top-up form", Duration::from_secs(3), |s| {
        s.contains("Top up case of tui-hold")
    });
    tmux.keys("25");
    tmux.keys("Enter");
    tmux.wait("the top-up confirmation", Duration::from_secs(3), |s| {
        s.contains("Top up case of tui-hold by +25?")
    });
    confirm(&tmux);
    tmux.wait("the top-up result", Duration::from_secs(5), |s| {
        s.contains("Top-up of case by +25 done")
    });
    assert_eq!(
        redis.cli(&["GET", "seckill:{tui-hold:case}:stock"]).trim(),
        "75"
    );
    let show = c.run("--json activity show tui-hold");
    assert_eq!(
        show.json()["products"][0]["initial_stock"],
        75,
        "{}",
        show.stdout
    );
    // w writes the incident report and says where.
    tmux.keys("Escape");
    tmux.keys("w");
    tmux.wait("the report's path", Duration::from_secs(10), |s| {
        s.contains("report written to")
    });
    let written: Vec<std::path::PathBuf> = std::fs::read_dir(dir.path())
        .expect("dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    assert_eq!(written.len(), 1, "{written:?}");
    let md = std::fs::read_to_string(&written[0]).expect("the report");
    assert!(
        md.contains("# Incident report: tui-hold") && md.contains("| case | 75 |"),
        "{md}"
    );
    let audit = c.run("--json audit tui-hold");
    let entries = audit.json()["entries"].clone();
    let actions: Vec<&str> = entries
        .as_array()
        .map(|v| v.iter().filter_map(|e| e["action"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(actions.first().copied(), Some("topup"), "{entries}");
    assert_eq!(actions.get(1).copied(), Some("resume"), "{entries}");
    assert_eq!(actions.get(2).copied(), Some("pause"), "{entries}");
    assert_eq!(entries[0]["actor"], "dave");
    // The reason typed in the pause dialog; the others left empty say where they came from.
    assert_eq!(entries[2]["reason"], "陈列 restock", "{entries}");
    assert_eq!(entries[1]["reason"], "from the TUI", "{entries}");
    tmux.keys("q");
}

/// Keys for the headless loop.
fn key_action(code: crossterm::event::KeyCode) -> seckill_console::tui::Action {
    seckill_console::tui::Action::Key(crossterm::event::KeyEvent::new(
        code,
        crossterm::event::KeyModifiers::NONE,
    ))
}

/// Every key of the live activity and their values (stock, meta, buyers, ledger).
/// The live activity's keys and their values. The console's checkpoints (`:books`, its own
/// bookkeeping, saved by the live view as it watches) are left out: the sale's keys are what
/// a dry run must not touch.
fn live_keys(redis: &RedisServer) -> Vec<(String, String)> {
    let mut keys: Vec<String> = redis
        .cli(&["--scan", "--pattern", "seckill:*"])
        .lines()
        .filter(|k| !k.ends_with(":books"))
        .map(str::to_string)
        .collect();
    keys.sort();
    keys.into_iter()
        .map(|k| {
            let v = redis.cli(&["DUMP", &k]);
            (k, v)
        })
        .collect()
}

/// What the headless frames showed: the screen's text and the dry run's state.
#[derive(Default)]
struct Seen {
    text: String,
    progress: bool,
    finished: bool,
    verdicts: Vec<String>,
    results: Vec<seckill_console::worker::RunStats>,
}

/// Waits until the last frame satisfies `ok`.
async fn wait_for(
    seen: std::sync::Arc<std::sync::Mutex<Seen>>,
    what: &str,
    timeout: Duration,
    ok: fn(&Seen) -> bool,
) {
    let started = Instant::now();
    loop {
        {
            let s = seen.lock().expect("lock");
            if ok(&s) {
                return;
            }
            assert!(
                started.elapsed() < timeout,
                "waited {timeout:?} for {what}; the screen:\n{}",
                s.text
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The dry run from the TUI, through the real executor (its own thread and runtime): the
/// form, the confirmation, every strategy on shadow keys with their invariants, the stop key,
/// and a quit during a run. No shadow key is left behind and no live key changes.
#[tokio::test]
async fn the_dry_run_view_runs_strategies_on_shadow_keys_only() {
    use crossterm::event::KeyCode;
    use ratatui::Terminal;
    use ratatui::backend::TestBackend;
    use seckill_console::config::{Layer, resolve};
    use seckill_console::ctx::Ctx;
    use seckill_console::tui::{Action, Headless, TuiOptions};
    use std::sync::{Arc, Mutex};

    let redis = RedisServer::start();
    let db = TestDb::sqlite();
    let dir = tempfile::tempdir().expect("temp dir");
    Console::redis(&redis.url(), &db.url).import_file_preheat(
        dir.path(),
        "dry-sale",
        &[("phone", 40, 2), ("case", 25, 1), ("cable", 60, 3)],
    );
    let before = live_keys(&redis);
    assert!(!before.is_empty());
    let shadow = || redis.cli(&["--scan", "--pattern", "*-dry-*"]);

    let ctx = Ctx {
        config: resolve(&[Layer {
            redis: Some(redis.url()),
            db: Some(db.url.clone()),
            actor: Some("e2e".into()),
            ..Layer::default()
        }])
        .expect("config"),
    };
    let opts = TuiOptions {
        activity: Some(seckill_console::domain::ActivityId::parse("dry-sale").expect("id")),
    };
    let seen = Arc::new(Mutex::new(Seen::default()));
    let record = {
        let seen = seen.clone();
        move |app: &seckill_console::tui::App, term: &Terminal<TestBackend>| {
            let buf = term.backend().buffer();
            let mut text = String::new();
            for y in 0..buf.area.height {
                for x in 0..buf.area.width {
                    text.push_str(buf.cell((x, y)).map_or(" ", |c| c.symbol()));
                }
                text.push('\n');
            }
            let mut s = seen.lock().expect("lock");
            s.text = text;
            if let Some(r) = &app.views.dry_run.run {
                s.progress |= r.current.is_some();
                s.finished = !r.running();
                s.results = r.results.clone();
                s.verdicts = (0..r.results.len())
                    .map(|i| r.verdict(i).to_string())
                    .collect();
            }
        }
    };
    let wait = |what: &'static str, timeout: Duration, ok: fn(&Seen) -> bool| {
        wait_for(seen.clone(), what, timeout, ok)
    };
    // The form: buyers, concurrency, strategy (typed over the defaults), Enter, Enter.
    let start = |tx: &tokio::sync::mpsc::UnboundedSender<Action>, buyers: &str, strategy: char| {
        let mut keys = vec![
            KeyCode::Char('9'),
            KeyCode::Char('d'),
            KeyCode::Backspace,
            KeyCode::Backspace,
            KeyCode::Backspace,
            KeyCode::Backspace,
            KeyCode::Backspace,
            KeyCode::Backspace,
        ];
        keys.extend(buyers.chars().map(KeyCode::Char));
        keys.extend([
            KeyCode::Tab,
            KeyCode::Backspace,
            KeyCode::Backspace,
            KeyCode::Char('8'),
            KeyCode::Tab,
            KeyCode::Char(strategy),
            KeyCode::Enter,
        ]);
        for k in keys {
            let _ = tx.send(key_action(k));
        }
        // Enter confirms once the dialog has been shown a moment (keys typed ahead do not).
        let (tx, seen) = (tx.clone(), seen.clone());
        async move {
            wait_for(seen, "the dry run dialog", Duration::from_secs(5), |s| {
                s.text.contains("Dry run of")
            })
            .await;
            tokio::time::sleep(Duration::from_millis(600)).await;
            let _ = tx.send(key_action(KeyCode::Enter));
        }
    };

    // 1. All four strategies, 150 buyers: every invariant holds, side by side.
    {
        let headless = Headless::new(&ctx, opts.clone());
        let tx = headless.sender();
        let mut term = Terminal::new(TestBackend::new(100, 30)).expect("terminal");
        let ui = headless.run(&mut term, record.clone());
        let drive = async {
            wait("the stock", Duration::from_secs(10), |s| {
                s.text.contains("phone")
            })
            .await;
            start(&tx, "150", 'a').await;
            wait("the results", Duration::from_secs(120), |s| s.finished).await;
            let _ = tx.send(Action::ForceQuit);
        };
        let (ran, ()) = tokio::join!(ui, drive);
        ran.expect("the loop");
        let s = seen.lock().expect("lock");
        let names: Vec<&str> = s.results.iter().map(|r| r.strategy.as_str()).collect();
        assert_eq!(names, ["lua", "hincrby", "lock", "sql"], "{}", s.text);
        assert_eq!(s.verdicts, ["ok", "ok", "ok", "ok"], "{}", s.text);
        assert!(s.results.iter().all(|r| r.oversold == 0 && r.sold > 0));
        assert!(
            s.text.contains("every invariant held") && s.text.contains("Results, side by side"),
            "{}",
            s.text
        );
        // Every strategy in the chart's legend, even those that ended within a second (issue
        // 20: the legend showed two of four).
        for name in ["│lua    │", "│hincrby│", "│lock   │", "│sql    │"] {
            assert!(
                s.text.contains(name),
                "{name} not in the legend:\n{}",
                s.text
            );
        }
    }
    assert_eq!(shadow().trim(), "", "shadow keys left behind");
    assert_eq!(live_keys(&redis), before, "a live key changed");

    // 2. x stops a long run: the cut strategy is not a failure; its keys are removed.
    *seen.lock().expect("lock") = Seen::default();
    {
        let headless = Headless::new(&ctx, opts.clone());
        let tx = headless.sender();
        let mut term = Terminal::new(TestBackend::new(100, 30)).expect("terminal");
        let ui = headless.run(&mut term, record.clone());
        let drive = async {
            wait("the stock", Duration::from_secs(10), |s| {
                s.text.contains("phone")
            })
            .await;
            start(&tx, "300000", 'l').await;
            wait("live figures", Duration::from_secs(30), |s| {
                s.progress && s.text.contains("Throughput")
            })
            .await;
            let _ = tx.send(key_action(KeyCode::Char('x')));
            wait("the stop", Duration::from_secs(30), |s| s.finished).await;
            let _ = tx.send(Action::ForceQuit);
        };
        let (ran, ()) = tokio::join!(ui, drive);
        ran.expect("the loop");
        let s = seen.lock().expect("lock");
        // Cut short: fewer requests than the demand. Sold out before the stop, every invariant
        // holds ("ok"); stopped before, the only failure is the demand not met ("stopped").
        assert!(
            matches!(s.verdicts.as_slice(), [v] if v == "ok" || v == "stopped"),
            "{:?}\n{}",
            s.verdicts,
            s.text
        );
        assert!(s.results[0].requests < 330_000, "{}", s.text);
        assert!(s.text.contains("stopped after"), "{}", s.text);
    }
    assert_eq!(shadow().trim(), "", "shadow keys left behind after a stop");
    assert_eq!(live_keys(&redis), before);

    // 3. Quitting during a run: the loop's exit stops it and waits for its cleanup.
    *seen.lock().expect("lock") = Seen::default();
    {
        let headless = Headless::new(&ctx, opts.clone());
        let tx = headless.sender();
        let mut term = Terminal::new(TestBackend::new(100, 30)).expect("terminal");
        let ui = headless.run(&mut term, record.clone());
        let drive = async {
            wait("the stock", Duration::from_secs(10), |s| {
                s.text.contains("phone")
            })
            .await;
            start(&tx, "300000", 'l').await;
            wait("live figures", Duration::from_secs(30), |s| s.progress).await;
            let _ = tx.send(key_action(KeyCode::Char('q')));
            wait("the quit dialog", Duration::from_secs(5), |s| {
                s.text.contains("Quit while a dry run runs?")
            })
            .await;
            tokio::time::sleep(Duration::from_millis(600)).await;
            let _ = tx.send(key_action(KeyCode::Enter));
        };
        let (ran, ()) = tokio::join!(ui, drive);
        let app = ran.expect("the loop");
        assert!(app.should_quit);
    }
    assert_eq!(shadow().trim(), "", "shadow keys left behind after a quit");
    assert_eq!(live_keys(&redis), before);
}

/// Redis starts evicting under the sale (issue 21): the TUI's Alerts raise `evicting` for the
/// node within a few refreshes, and the Redis view shows its policy and evicted keys.
#[test]
fn an_evicting_redis_raises_evicting_in_the_tui() {
    let redis = RedisServer::start();
    let db = TestDb::sqlite();
    let dir = tempfile::tempdir().expect("temp dir");
    let at = (&redis, &db, dir.path());
    let tmux = stock_tui(
        "seckill-evict",
        at,
        ("tui-evict", &[("alpha", 10, 1)]),
        "--refresh 1",
    );
    // The server becomes a cache's: a small limit and a policy that evicts.
    let used: u64 = redis
        .cli(&["INFO", "memory"])
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("used_memory");
    redis.cli(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]);
    redis.cli(&[
        "CONFIG",
        "SET",
        "maxmemory",
        &(used + 1_000_000).to_string(),
    ]);
    tmux.keys("3");
    let blob = "x".repeat(16 * 1024);
    let started = Instant::now();
    let mut i = 0;
    loop {
        // Keep evicting: 32 more cache entries per round.
        for _ in 0..32 {
            let _ = redis.try_cli(&["SET", &format!("cache:{i}"), &blob]);
            i += 1;
        }
        let s = tmux.screen();
        if s.contains("evicting") && s.contains("127.0.0.1:") {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no evicting alert:\n{s}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    tmux.keys("7");
    tmux.wait("the policy", Duration::from_secs(5), |s| {
        s.contains("allkeys-lru")
    });
}

/// A cold start on a sale whose settle from scratch outlives a poll's 10 s deadline (30,000
/// orders; Redis 40 ms away through the proxy, so each of the settle's 150-odd rounds waits on
/// Redis): the header says how far the settle read while it runs, and the Stock view fills once
/// it ends. Before, the poll was cut at 10 s and its books thrown away, and the view never
/// warmed up (issue 22, item 5).
#[test]
fn a_cold_settle_longer_than_a_poll_finishes_and_says_how_far_it_read() {
    use crate::harness::proxy::{Mode, Proxy};
    let redis = RedisServer::start();
    let db = TestDb::sqlite();
    let dir = tempfile::tempdir().expect("temp dir");
    let c = Console::redis(&redis.url(), &db.url);
    c.import_file_preheat(dir.path(), "tui-cold", &[("big", 100_000, 1)]);
    let units = 30_000;
    c.ok(&[
        "load",
        "tui-cold",
        "--buyers",
        &units.to_string(),
        "--concurrency",
        "32",
        "--repeat-share",
        "0",
        "--pay-share",
        "1",
        "--yes",
    ]);
    let proxy = Proxy::start(&redis.addr());
    proxy.set(Mode::Delay(Duration::from_millis(40)));
    let command = format!(
        "cd {} && {} --redis redis://{} --db {} --refresh 1; sleep 60",
        dir.path().display(),
        crate::harness::cli::binary(),
        proxy.addr(),
        db.url
    );
    let tmux = Tmux::start("seckill-cold", 120, 30, &command);
    tmux.keys("2");
    let started = Instant::now();
    tmux.wait("the settle's progress", Duration::from_secs(30), |s| {
        s.contains("settling ") && s.contains("% read")
    });
    tmux.wait("the settled stock", Duration::from_secs(120), |s| {
        s.contains("1/1 products") && s.contains("of 100,000 sold") && !s.contains("settling")
    });
    let s = tmux.screen();
    assert!(
        started.elapsed() > Duration::from_secs(10),
        "the settle ended within one poll's deadline: the drill shows nothing\n{s}"
    );
    assert!(!s.contains("no answer within"), "{s}");
}
