//! `demo` as a new operator runs it: the real binary in tmux, live numbers within seconds, every
//! view, a fix of the demo's drift through the dialog, quit, and nothing left behind: the
//! terminal restored, the demo's redis-server gone, its files removed.

use crate::harness::tmux::Tmux;
use std::process::Command;
use std::time::Duration;

fn redis_running_on(port: &str) -> bool {
    Command::new("pgrep")
        .args(["-f", &format!("redis-server 127.0.0.1:{port}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn the_demo_shows_live_numbers_fixes_drift_and_leaves_nothing_behind() {
    let command = format!(
        "{} demo --chaos-after-secs 2; echo EXITED=$?; stty -a | tr ' ' '\\n' | grep -x -- '-*icanon'; sleep 60",
        crate::harness::cli::binary(),
    );
    let tmux = Tmux::start("seckill-demo", 120, 32, &command);

    // Live numbers: the demo activity's stock table with sales in it.
    let took = tmux.wait("live numbers", Duration::from_secs(20), |s| {
        s.contains("activity demo (live)")
            && s.contains("phone")
            && s.contains(" sold (")
            && !s.contains(" 0 of ")
    });
    println!("live numbers after {took:?}");
    let screen = tmux.screen();
    let port = screen
        .split("redis://127.0.0.1:")
        .nth(1)
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .expect("the header names the demo's redis")
        .to_string();
    let db_dir = screen
        .split("sqlite://")
        .nth(1)
        .and_then(|rest| rest.split("/demo.db").next())
        .expect("the header names the demo's database")
        .to_string();
    assert!(
        redis_running_on(&port),
        "the demo's redis-server is not running"
    );

    // Every view answers its key.
    for (key, title) in [
        ("1", "Activities"),
        ("3", "Alerts"),
        ("4", "Compensation"),
        ("6", "Preheat"),
        ("7", "Redis"),
        ("8", "Audit"),
        ("?", "Help"),
        ("2", "Stock"),
    ] {
        tmux.keys(key);
        tmux.wait(title, Duration::from_secs(5), |s| s.contains(title));
    }

    // The demo's faults: lost writes (+5) and a crashed rollback (-3), shown as drift.
    tmux.keys("5");
    tmux.wait("the demo's drift", Duration::from_secs(30), |s| {
        s.contains("Reconcile 2 to fix")
    });
    tmux.keys("F");
    tmux.wait("the fix dialog", Duration::from_secs(10), |s| {
        s.contains("Type the activity id")
    });
    tmux.run(&["send-keys", "-t", "tui", "demo", "Enter"]);
    tmux.wait("the fix result", Duration::from_secs(15), |s| {
        s.contains("Fix applied to 2 product(s)")
    });
    tmux.keys("Enter");
    tmux.wait("drift gone", Duration::from_secs(15), |s| {
        s.contains("Reconcile 0 to fix") && !s.contains("Fix applied")
    });

    tmux.keys("q");
    let screen_after = {
        tmux.wait("the demo to exit", Duration::from_secs(20), |s| {
            s.contains("EXITED=")
        });
        tmux.wait("the terminal mode", Duration::from_secs(5), |s| {
            s.contains("icanon")
        });
        tmux.screen()
    };
    assert!(screen_after.contains("EXITED=0"), "{screen_after}");
    assert!(screen_after.contains("demo stopped"), "{screen_after}");
    // Canonical mode is back: the terminal was restored (raw mode would print -icanon).
    assert!(
        screen_after.lines().any(|l| l.trim() == "icanon"),
        "{screen_after}"
    );
    assert!(
        !screen_after.contains("seckill-console │"),
        "the TUI is still on screen: {screen_after}"
    );
    assert!(
        !redis_running_on(&port),
        "the demo left its redis-server running"
    );
    assert!(
        !std::path::Path::new(&db_dir).exists(),
        "the demo left {db_dir} behind"
    );
}
