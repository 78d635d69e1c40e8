//! The ACL files of the README (`scripts/acl/`), each loaded into a real server: each mode's
//! user runs its commands end to end and is refused (exit 5, nothing written) outside them.
//! And a managed Redis that renamed INFO and CONFIG away: the console says what it could not
//! check and every view still answers.

use crate::harness::fixtures::{audit_rows, import, live_window};
use crate::harness::{Console, RedisServer, TestDb};

fn acl_file(dir: &std::path::Path) -> String {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/acl");
    let mut text = String::new();
    for f in ["watch.acl", "fix.acl", "preheat.acl"] {
        text.push_str(&std::fs::read_to_string(root.join(f)).expect("ACL file"));
    }
    let path = dir.join("users.acl");
    std::fs::write(&path, text).expect("write users.acl");
    path.display().to_string()
}

fn refused(c: &Console, cmd: &str, label: &str) {
    let r = c.run(format!("--json {cmd}"));
    assert_eq!(
        r.code,
        5,
        "{label}: `{cmd}` exit {}: {}",
        r.code,
        r.all_output()
    );
    let msg = r.json_error()["error"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(msg.contains("may not run"), "{label}: `{cmd}`: {msg}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_acl_file_runs_its_mode_and_is_refused_outside_it() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = acl_file(dir.path());
    let server = RedisServer::start_with(&["--aclfile", &path]);
    let db = TestDb::sqlite();
    let lib = db.open().await;
    import(
        &lib,
        "acl",
        &[("p0", 100, 2), ("p1", 100, 2)],
        live_window(),
    )
    .await;
    let as_user = |user: &str, pw: &str| {
        Console::redis(
            &format!("redis://{user}:{pw}@127.0.0.1:{}", server.port),
            &db.url,
        )
    };
    let preheat = as_user("seckill-preheat", "change-me-preheat");
    let fix = as_user("seckill-fix", "change-me-fix");
    let watch = as_user("seckill-watch", "change-me-watch").with("--read-only");

    // The launch.
    let go = preheat.json("preheat acl");
    assert_eq!(go["decision"], "go", "{go}");

    // Read-only: every read works.
    assert_eq!(watch.json("status acl")["products"][0]["state"], "ok");
    watch.ok("reconcile acl");
    watch.ok("fix acl --preview");
    let ping = watch.json("ping");
    assert_eq!(ping["ok"], true, "{ping}");
    watch.ok("watch acl --interval 0.2 --count 2");
    // ... and nothing else, even without --read-only.
    let watch_rw = as_user("seckill-watch", "change-me-watch");
    let before = audit_rows(&lib).await;
    for cmd in [
        "fix acl --yes",
        "pause acl --yes",
        "topup acl --product p0 --add 1 --yes",
    ] {
        refused(&watch_rw, cmd, "watch.acl");
    }
    assert_eq!(
        audit_rows(&lib).await,
        before,
        "a refused write was audited"
    );

    // The repairs.
    fix.ok("pause acl --yes");
    fix.ok("resume acl --yes");
    fix.ok("topup acl --product p0 --add 5 --yes");
    fix.ok("fix acl --yes");
    fix.ok("compensation resolve acl --all");
    let s = fix.json("status acl");
    assert_eq!(s["products"][0]["initial"], 105, "{s}");
    // ... but not the launch.
    let before = audit_rows(&lib).await;
    refused(&fix, "preheat acl", "fix.acl");
    refused(&fix, "cleanup acl --force", "fix.acl");
    assert_eq!(audit_rows(&lib).await, before);

    // The preheat user also cleans up.
    let gone = preheat.json("cleanup acl --force");
    assert!(gone["keys_deleted"].as_i64().unwrap_or(0) > 0, "{gone}");
    lib.close().await;
}

/// A managed Redis that refuses INFO, CONFIG and the admin commands (ACL DRYRUN, SLOWLOG) to
/// the console's user: `ping` lists what it could not use and still answers; status and the
/// writes work (the role comes from ROLE, the permissions from the probe script; the memory is
/// unchecked).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_without_info_degrades_and_says_so() {
    let server = RedisServer::start();
    server.cli(&[
        "ACL", "SETUSER", "managed", "on", ">m-pw", "~*", "&*", "+@all", "-@admin", "-info",
    ]);
    let db = TestDb::sqlite();
    let lib = db.open().await;
    import(&lib, "mg", &[("p0", 100, 2)], live_window()).await;
    Console::redis(&server.url(), &db.url).preheat("mg");
    let c = Console::redis(
        &format!("redis://managed:m-pw@127.0.0.1:{}", server.port),
        &db.url,
    );
    let ping = c.json("ping");
    let unchecked = ping["redis"]["nodes"][0]["unchecked"].to_string();
    assert!(unchecked.contains("INFO"), "{ping}");
    let text = c.run("ping");
    assert!(text.stdout.contains("could not use"), "{}", text.stdout);
    assert_eq!(c.json("status mg")["products"][0]["state"], "ok");
    c.ok("pause mg --yes");
    assert_eq!(c.json("status mg")["products"][0]["state"], "paused");
    lib.close().await;
}
