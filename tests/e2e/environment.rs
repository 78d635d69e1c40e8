//! Settings from SECKILL_* variables, read by clap: a bad value is named by its variable, an
//! empty variable is unset, flags win over variables, and help never shows a variable's value.

use crate::harness::cli::binary;
use crate::harness::{RedisServer, TestDb, console, console_env};
use std::os::unix::ffi::OsStrExt;
use std::process::{Command, Stdio};

#[test]
fn a_bad_value_from_the_environment_is_named_by_its_variable() {
    let r = console_env(&["status", "a1"], &[("SECKILL_GRACE_SECS", "soon")]);
    r.expect_code(2);
    assert!(
        r.stderr.contains("'soon'") && r.stderr.contains("SECKILL_GRACE_SECS"),
        "{}",
        r.stderr
    );
    let r = console_env(
        &["status", "a1"],
        &[("SECKILL_READ_ONLY", "maybe"), ("SECKILL_JSON", "1")],
    );
    r.expect_code(2);
    let e = r.json_error();
    assert_eq!(e["kind"], "bad_input");
    let msg = e["error"].as_str().unwrap_or_default();
    assert!(
        msg.contains("'maybe'") && msg.contains("SECKILL_READ_ONLY"),
        "{msg}"
    );
    // The same bad value typed as a flag is named as the flag only.
    let r = console_env(&["--grace-secs", "soon", "status", "a1"], &[]);
    r.expect_code(2);
    assert!(!r.stderr.contains("environment variable"), "{}", r.stderr);
}

/// A missing argument's usage line shows what the operator must still give, not the URLs the
/// environment filled in (clap listed `--redis <URL> --db <URL>` as if they were missing).
#[test]
fn the_usage_line_shows_only_what_is_still_missing() {
    let r = console_env(
        &["topup", "a1"],
        &[
            ("SECKILL_REDIS_URL", "redis://ops:hunter2@127.0.0.1:1"),
            ("SECKILL_DATABASE_URL", "sqlite:/nonexistent/x.db"),
        ],
    );
    r.expect_code(2);
    let usage = r
        .stderr
        .lines()
        .find(|l| l.starts_with("Usage: "))
        .unwrap_or_else(|| panic!("no usage line: {}", r.stderr));
    assert_eq!(
        usage,
        "Usage: seckill-console topup --product <P> --add <N> <ACTIVITY>"
    );
    assert!(!r.all_output().contains("hunter2"));
}

#[test]
fn help_shows_the_variables_but_never_their_values() {
    let r = console_env(
        &["load", "--help"],
        &[("SECKILL_REDIS_URL", "redis://ops:hunter2@10.0.0.9:6379")],
    );
    r.expect_code(0);
    assert!(r.stdout.contains("Global options:"), "{}", r.stdout);
    assert!(
        r.stdout.contains("[env: SECKILL_REDIS_URL]"),
        "{}",
        r.stdout
    );
    assert!(!r.all_output().contains("hunter2"));
    // The command's own options come before the global ones.
    let own = r.stdout.find("--buyers").expect("load's own option");
    let global = r.stdout.find("Global options:").expect("heading");
    assert!(own < global, "{}", r.stdout);
}

#[test]
fn an_empty_variable_is_unset_and_numbers_may_carry_spaces() {
    let redis = RedisServer::start();
    let db = TestDb::sqlite();
    console(&["--db", &db.url, "migrate"]).expect_code(0);
    // Every variable empty (as `VAR: ${X:-}` in a compose file gives): the flags decide, and
    // nothing is refused for an empty value.
    let empty = [
        ("SECKILL_READ_ONLY", ""),
        ("SECKILL_JSON", ""),
        ("SECKILL_GRACE_SECS", ""),
        ("SECKILL_REFRESH_SECS", " "),
        ("SECKILL_CONFIG", ""),
        ("SECKILL_REDIS_CLUSTER", ""),
        ("SECKILL_ACTOR", ""),
        ("SECKILL_PREFIX", ""),
        ("SECKILL_TZ", ""),
        ("SECKILL_REDIS_CA", ""),
        ("SECKILL_CONNECT_TIMEOUT_MS", " 2000 "),
    ];
    let url = redis.url();
    let r = console_env(
        &["--redis", &url, "--db", &db.url, "--json", "ping"],
        &empty,
    );
    r.expect_code(0);
    let doc = r.json();
    assert_eq!(doc["redis"]["cluster"], false, "{}", r.stdout);
    assert_eq!(doc["redis"]["nodes"][0]["ok"], true, "{}", r.stdout);
}

#[test]
fn a_redis_target_typed_on_the_command_line_wins_over_the_other_kind_from_the_environment() {
    let redis = RedisServer::start();
    let db = TestDb::sqlite();
    console(&["--db", &db.url, "migrate"]).expect_code(0);
    let url = redis.url();
    // A cluster in the environment, one server typed: the typed one is used.
    let r = console_env(
        &["--redis", &url, "--db", &db.url, "--json", "ping"],
        &[("SECKILL_REDIS_CLUSTER", "redis://127.0.0.1:1")],
    );
    r.expect_code(0);
    assert_eq!(r.json()["redis"]["cluster"], false, "{}", r.stdout);
    // One server in the environment, a cluster typed: the cluster is used (and its seed here
    // answers nothing, so the run says so about the cluster, not about the variable).
    let r = console_env(
        &[
            "--redis-cluster",
            "redis://127.0.0.1:1",
            "--db",
            &db.url,
            "ping",
        ],
        &[("SECKILL_REDIS_URL", url.as_str())],
    );
    r.expect_code(3);
    assert!(r.stderr.contains("127.0.0.1:1"), "{}", r.stderr);
    // Both typed: refused, naming the choice.
    let r = console_env(
        &[
            "--redis",
            &url,
            "--redis-cluster",
            "redis://127.0.0.1:1",
            "ping",
        ],
        &[],
    );
    r.expect_code(2);
    assert!(
        r.stderr.contains("--redis or --redis-cluster"),
        "{}",
        r.stderr
    );
}

/// The binary with a clean environment (no SECKILL_* of the caller) and `env` added.
fn bare(env: &[(&str, &std::ffi::OsStr)]) -> Command {
    let mut cmd = Command::new(binary());
    cmd.stdin(Stdio::null());
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("SECKILL_") {
            cmd.env_remove(&k);
        }
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

#[test]
fn arguments_and_variables_that_are_not_utf8_are_named_and_refused() {
    let bad = std::ffi::OsStr::from_bytes(b"caf\xe9");
    let out = bare(&[])
        .args([std::ffi::OsStr::new("status"), bad])
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        err.contains("argument 2") && err.contains("not valid UTF-8"),
        "{err}"
    );

    let out = bare(&[("SECKILL_ACTOR", bad)])
        .args(["status", "a1"])
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("SECKILL_ACTOR") && err.contains("not valid UTF-8"),
        "{err}"
    );

    // Another program's variable is none of the console's business.
    let db = TestDb::sqlite();
    let out = bare(&[("OTHER_TOOL_SETTING", bad)])
        .args(["--db", &db.url, "migrate"])
        .output()
        .expect("run");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn logs_written_to_a_pipe_carry_no_colour() {
    let db = TestDb::sqlite();
    console(&["--db", &db.url, "migrate"]).expect_code(0);
    // At debug the database driver logs every statement: lines to a pipe, as journald or a
    // file would take them.
    let r = console_env(
        &["--db", &db.url, "activity", "list"],
        &[("SECKILL_LOG", "debug")],
    );
    r.expect_code(0);
    // Log lines were written (else this test could not fail) and none carries an escape.
    assert!(r.stderr.contains("DEBUG"), "{}", r.stderr);
    assert!(!r.stderr.contains('\u{1b}'), "{:?}", r.stderr);
}

#[test]
fn a_reader_that_went_away_ends_the_output_quietly() {
    let db = TestDb::sqlite();
    console(&["--db", &db.url, "migrate"]).expect_code(0);
    for json in [false, true] {
        let mut args = vec!["--db", db.url.as_str()];
        if json {
            args.push("--json");
        }
        args.extend(["activity", "list"]);
        let mut child = bare(&[])
            .args(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        // The reader closes its end before the command writes (`| head -c 0`).
        drop(child.stdout.take());
        let out = child.wait_with_output().expect("wait");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "json {json}: {err}");
        assert_eq!(out.status.code(), Some(0), "json {json}: {err}");
    }
}

#[test]
fn numbers_echoed_back_in_errors_are_short() {
    let db = TestDb::sqlite();
    let huge = "1e308";
    for args in [
        vec!["watch", "a1", "--interval", huge],
        vec!["--refresh", huge, "status", "a1"],
        vec![
            "load",
            "a1",
            "--buyers",
            "10",
            "--concurrency",
            "1",
            "--yes",
            "--rate",
            huge,
        ],
        vec![
            "load",
            "a1",
            "--buyers",
            "10",
            "--concurrency",
            "1",
            "--yes",
            "--payment-window-secs",
            huge,
        ],
    ] {
        let mut all = vec!["--db", db.url.as_str()];
        all.extend(args);
        let r = console(&all);
        r.expect_code(2);
        // The value as typed, not Rust's 309-digit rendering of it.
        assert!(r.stderr.contains("1e308"), "{all:?}: {}", r.stderr);
        assert!(r.stderr.len() < 200, "{all:?}: {}", r.stderr);
    }
}

/// A slip in a variable's name (`SECKILL_REDIS` for `SECKILL_REDIS_URL`) would leave the console
/// on its default Redis, where a write would land: it is named on stderr with what was meant,
/// and its value (a URL with a password) is not shown.
#[test]
fn a_misspelt_variable_is_named_with_what_was_meant() {
    let r = console_env(
        &["completions", "bash"],
        &[("SECKILL_REDIS", "redis://ops:hunter2@10.0.0.5:6379")],
    );
    r.expect_code(0);
    assert!(
        r.stderr
            .contains("SECKILL_REDIS is set but is not a setting")
            && r.stderr.contains("SECKILL_REDIS_URL"),
        "{}",
        r.stderr
    );
    assert!(!r.all_output().contains("hunter2"));
    let quiet = console_env(&["completions", "bash"], &[("SECKILL_CHAOS_SEED", "7")]);
    quiet.expect_code(0);
    assert!(!quiet.stderr.contains("not a setting"), "{}", quiet.stderr);
}

/// An empty variable counts as unset (compose files write `VAR: ${X:-}`), but where nothing else
/// names the setting the console would then run on the default database (or Redis, where a
/// write would land): it is named on stderr with the default it falls to. A command that never
/// opens Redis says nothing of its settings.
#[test]
fn an_empty_variable_that_leaves_a_default_is_named() {
    let home = tempfile::tempdir().expect("tmp");
    let home = home.path().to_str().expect("utf8");
    let env = [
        ("HOME", home),
        ("XDG_DATA_HOME", home),
        ("SECKILL_DATABASE_URL", ""),
        ("SECKILL_REDIS_URL", ""),
        ("SECKILL_PREFIX", ""),
    ];
    let r = console_env(&["activity", "list"], &env);
    r.expect_code(0);
    assert!(
        r.stderr.contains(
            "SECKILL_DATABASE_URL is set but empty, which counts as unset: the console uses the embedded SQLite file"
        ) && r.stderr.contains(home),
        "{}",
        r.stderr
    );
    // `activity list` never opens Redis: nothing said of it.
    assert!(
        !r.stderr.contains("SECKILL_REDIS_URL") && !r.stderr.contains("SECKILL_PREFIX"),
        "{}",
        r.stderr
    );
    // Named by a flag: not the default, nothing to say.
    let db = TestDb::sqlite();
    let given = console_env(&["--db", db.url.as_str(), "activity", "list"], &env);
    given.expect_code(0);
    assert!(
        !given.stderr.contains("is set but empty"),
        "{}",
        given.stderr
    );
}
