//! `watch`: the headless live view a systemd unit or a pager hook runs. It polls with the
//! live view's bounded cost (a tracker that reads what changed) and prints one line per event;
//! `--exec` runs a command for each newly raised critical alert.

use super::status::options;
use super::{Ctx, Outcome};
use crate::cli::WatchArgs;
use chrono::Utc;
use seckill_console::domain::ActivityId;
use seckill_console::domain::alerts::Severity;
use seckill_console::error::echoed;
use seckill_console::error::{Error, ErrorKind, Result};
use seckill_console::ops::status::status_tracked;
use seckill_console::ops::tracker::{Tracker, TrackerOptions};
use seckill_console::ops::watch::{EventKind, WatchEvent, Watcher};
use std::io::Write;
use std::time::{Duration, Instant};

/// How long a hook may run before it is killed.
const HOOK_TIMEOUT: Duration = Duration::from_secs(10);

fn check_args(args: &WatchArgs) -> Result<Duration> {
    if !(args.interval.is_finite() && (0.1..=3600.0).contains(&args.interval)) {
        return Err(Error::bad_input(format!(
            "--interval {} is not between 0.1 and 3600 seconds",
            echoed(args.interval)
        )));
    }
    if !(1..=86_400).contains(&args.give_up_secs) {
        return Err(Error::bad_input(format!(
            "--give-up-secs {} is not between 1 and 86400",
            args.give_up_secs
        )));
    }
    if args.exec.as_deref().is_some_and(|c| c.trim().is_empty()) {
        return Err(Error::bad_input("--exec is empty: give the command to run"));
    }
    Ok(Duration::from_secs_f64(args.interval))
}

fn line(e: &WatchEvent, json: bool, tz: seckill_console::domain::zone::Zone) -> String {
    if json {
        return serde_json::to_string(e).unwrap_or_default();
    }
    e.text(tz)
}

/// Runs the hook for one alert: the alert's JSON on stdin, its kind, product and activity in
/// the environment, killed after [`HOOK_TIMEOUT`]. A hook that fails is reported, never fatal.
async fn run_hook(cmd: &str, activity: &ActivityId, e: &WatchEvent) {
    use tokio::io::AsyncWriteExt;
    let body = serde_json::to_string(e).unwrap_or_default();
    let mut command = tokio::process::Command::new("sh");
    command
        .arg("-c")
        .arg(cmd)
        .env("SECKILL_ALERT_KIND", e.kind.map_or("", |k| k.as_str()))
        .env("SECKILL_ALERT_PRODUCT", e.product.as_deref().unwrap_or(""))
        .env("SECKILL_ACTIVITY", activity.as_str())
        .stdin(std::process::Stdio::piped())
        .kill_on_drop(true);
    // A group of its own, so that a hook that ran too long goes with everything it started
    // (killing `sh` alone left its children running, reparented, writing 20 s later).
    #[cfg(unix)]
    command.process_group(0);
    let mut child = match command.spawn() {
        Ok(c) => c,
        Err(err) => {
            eprintln!("watch: --exec could not start: {err}");
            return;
        }
    };
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(body.as_bytes()).await;
        let _ = stdin.write_all(b"\n").await;
    }
    match tokio::time::timeout(HOOK_TIMEOUT, child.wait()).await {
        Ok(Ok(status)) if status.success() => {}
        Ok(Ok(status)) => eprintln!("watch: --exec exited with {status}"),
        Ok(Err(err)) => eprintln!("watch: --exec failed: {err}"),
        Err(_) => {
            #[cfg(unix)]
            if let Some(group) = child
                .id()
                .and_then(|id| rustix::process::Pid::from_raw(i32::try_from(id).ok()?))
            {
                let _ = rustix::process::kill_process_group(group, rustix::process::Signal::KILL);
            }
            let _ = child.kill().await;
            eprintln!(
                "watch: --exec ran longer than {HOOK_TIMEOUT:?} and was killed with every process it started"
            );
        }
    }
}

pub async fn run_watch(ctx: &Ctx, args: WatchArgs, json: bool) -> Result<Outcome> {
    let activity = ActivityId::parse(&args.activity)?;
    let interval = check_args(&args)?;
    let give_up = Duration::from_secs(args.give_up_secs);
    let opts = options(ctx);
    let read_only = ctx.config.read_only;
    let mut tracker = Tracker::new(
        activity.clone(),
        TrackerOptions::live(opts.grace, read_only),
    );
    let mut watcher = Watcher::default();
    let mut failing_since: Option<Instant> = None;
    let mut polls: u64 = 0;
    // Polls that read the books, and why the last one that did not failed: `--count` ends
    // with exit 3 when none did (a cron job must not read success from a dead Redis).
    let mut succeeded: u64 = 0;
    let mut last_failure = String::new();
    let mut conns: Option<(seckill_console::db::Db, seckill_console::redis::RedisStore)> = None;
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    #[cfg(unix)]
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| Error::internal(format!("cannot watch for SIGTERM: {e}")))?;
    loop {
        #[cfg(unix)]
        let stop = async { term.recv().await };
        #[cfg(not(unix))]
        let stop = std::future::pending::<Option<()>>();
        tokio::select! {
            _ = ticker.tick() => {}
            _ = tokio::signal::ctrl_c() => break,
            _ = stop => break,
        }
        // The connections are opened once and kept; a failed poll drops them so that the next
        // one reconnects (a new pool per poll would cost the servers a connection every tick).
        if conns.is_none() {
            match async { Ok::<_, Error>((ctx.db().await?, ctx.redis().await?)) }.await {
                Ok(c) => conns = Some(c),
                Err(e) => {
                    polls += 1;
                    last_failure.clone_from(&e.message);
                    if let Some(err) = give_up_on(e, &mut failing_since, give_up)? {
                        return Err(err);
                    }
                    if args.count.is_some_and(|n| polls >= n) {
                        break;
                    }
                    continue;
                }
            }
        }
        let Some((db, redis)) = &conns else {
            continue;
        };
        let polled = status_tracked(&mut tracker, redis, db, &ctx.config.keys, &opts).await;
        polls += 1;
        match polled {
            Ok(report) => {
                succeeded += 1;
                if failing_since.take().is_some() {
                    eprintln!("watch: reading again");
                }
                let events = watcher.step(&report, Utc::now());
                let mut out = std::io::stdout().lock();
                for e in &events {
                    let _ = writeln!(out, "{}", line(e, json, ctx.config.tz));
                }
                let _ = out.flush();
                drop(out);
                if let Some(cmd) = &args.exec {
                    for e in events.iter().filter(|e| {
                        e.event == EventKind::Raised && e.severity == Some(Severity::Critical)
                    }) {
                        run_hook(cmd, &activity, e).await;
                    }
                }
            }
            Err(e) => {
                if let Some((db, _)) = conns.take() {
                    db.close().await;
                }
                last_failure.clone_from(&e.message);
                if let Some(err) = give_up_on(e, &mut failing_since, give_up)? {
                    return Err(err);
                }
            }
        }
        if args.count.is_some_and(|n| polls >= n) {
            break;
        }
    }
    if let Some((db, _)) = conns.take() {
        db.close().await;
    }
    // A counted watch (cron, a health check) says how it ended in its exit code: 3 when no
    // poll read the books, 4 when a critical alert was still raised at the last poll. One
    // stopped by a signal ends 0, as a service should.
    let Some(count) = args.count else {
        return Ok(Outcome::silent());
    };
    if succeeded == 0 {
        return Err(Error::unavailable(format!(
            "no poll of {count} read the books: {last_failure}"
        )));
    }
    let critical = watcher.critical_raised();
    let mut out = Outcome::silent();
    if critical > 0 {
        eprintln!("watch: {critical} critical alert(s) still raised at the last poll");
        out.failure = Some(ErrorKind::CheckFailed);
    }
    Ok(out)
}

/// A failed poll: an unreachable service is reported and waited for until `give_up` (then the
/// error to exit with); anything else ends the watch at once.
fn give_up_on(
    e: Error,
    failing_since: &mut Option<Instant>,
    give_up: Duration,
) -> Result<Option<Error>> {
    if !matches!(e.kind, ErrorKind::Unavailable) {
        return Err(e);
    }
    let since = *failing_since.get_or_insert_with(Instant::now);
    eprintln!(
        "watch: {} (unreachable for {} s)",
        e.message,
        since.elapsed().as_secs()
    );
    Ok((since.elapsed() >= give_up).then(|| {
        Error::unavailable(format!(
            "gave up after {} s without an answer: {}",
            since.elapsed().as_secs(),
            e.message
        ))
    }))
}
