//! The TUI as an operator runs it: the real binary in a tmux pane against a real redis-server
//! and a SQLite file. It shows the stock table, fixes a drifted product after a preview and a
//! yes, answers keys while Redis is stopped with SIGSTOP (and says "stale"), recovers after
//! SIGCONT, and restores the terminal on quit. Without a terminal it refuses with exit 2.

use crate::harness::fixtures::{activity_toml, live_window, write_file};
use crate::harness::tmux::Tmux;
use crate::harness::{RedisServer, TestDb, console};
use std::time::Duration;

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
    let (starts, ends) = live_window();
    let file = write_file(
        dir.path(),
        "sale.toml",
        &activity_toml(
            "tui-sale",
            &[("phone", 100, 2), ("case", 50, 1)],
            starts,
            ends,
        ),
    );
    let base = ["--redis", &redis.url(), "--db", &db.url];
    let with = |rest: &[&str]| {
        let mut v = base.to_vec();
        v.extend_from_slice(rest);
        console(&v)
    };
    with(&["activity", "import", &file.display().to_string()]).expect_code(0);
    with(&["preheat", "tui-sale"]).expect_code(0);
    redis.cli(&["SET", "seckill:{tui-sale:phone}:stock", "97"]);

    let tmux = Tmux {
        socket: format!("seckill-tui-{}", std::process::id()),
    };
    let command = format!(
        "{} --redis {} --db {}; echo EXITED=$?; stty -a | tr ' ' '\\n' | grep -x -- '-*icanon'; sleep 60",
        crate::harness::cli::binary(),
        redis.url(),
        db.url
    );
    let out = tmux.run(&[
        "new-session",
        "-d",
        "-s",
        "tui",
        "-x",
        "110",
        "-y",
        "30",
        &command,
    ]);
    assert!(
        out.status.success(),
        "tmux: {}",
        String::from_utf8_lossy(&out.stderr)
    );

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
    tmux.keys("y");
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
