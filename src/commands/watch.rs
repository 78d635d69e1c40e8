//! `watch`: the headless live view a systemd unit or a pager hook runs. It polls with the
//! live view's bounded cost (a tracker that reads what changed) and prints one line per event;
//! `--exec` runs a command for each newly raised critical alert (or warning), beside the
//! polling loop: a slow hook never makes a poll late, and the alerts raised meanwhile are paged
//! after it, in order.

use super::status::options;
use super::{Ctx, Outcome};
use crate::cli::{PageSeverity, WatchArgs};
use chrono::Utc;
use seckill_console::domain::ActivityId;
use seckill_console::domain::alerts::Severity;
use seckill_console::error::echoed;
use seckill_console::error::{Error, ErrorKind, Result, Service};
use seckill_console::ops::status::{StatusOptions, StatusReport, status_tracked};
use seckill_console::ops::tracker::{Tracker, TrackerOptions};
use seckill_console::ops::watch::{EventKind, Outages, WatchEvent, Watcher};
use std::io::Write;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};

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
    if args.count == Some(0) {
        return Err(Error::bad_input(
            "--count 0 would poll nothing: give 1 or more, or leave it out to watch until Ctrl-C",
        ));
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

/// Pages waiting at most: an alert that flaps faster than the hook runs must not queue hooks
/// for hours (the lines are printed all the same).
const QUEUE_MAX: usize = 100;

/// The variables that hold the servers' URLs, passwords included: a hook does not need them.
const SECRET_VARS: [&str; 4] = [
    "SECKILL_REDIS_URL",
    "SECKILL_REDIS_CLUSTER",
    "SECKILL_REDIS_SENTINEL",
    "SECKILL_DATABASE_URL",
];

/// The hooks' queue and the task that runs them one after the other, in the order the alerts
/// were raised.
struct Pager {
    queue: mpsc::Sender<WatchEvent>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<usize>,
    least: Severity,
    dropped: std::cell::Cell<u64>,
}

impl Pager {
    fn start(cmd: String, activity: ActivityId, least: PageSeverity) -> Pager {
        let (queue, rx) = mpsc::channel(QUEUE_MAX);
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(run_pages(cmd, activity, rx, stopped));
        let least = match least {
            PageSeverity::Warning => Severity::Warning,
            PageSeverity::Critical => Severity::Critical,
        };
        Pager {
            queue,
            stop,
            task,
            least,
            dropped: std::cell::Cell::new(0),
        }
    }

    /// Queues a page for each alert raised at the pager's severity or above.
    fn page(&self, events: &[WatchEvent]) {
        for e in events
            .iter()
            .filter(|e| e.event == EventKind::Raised && e.severity >= Some(self.least))
        {
            if self.queue.try_send(e.clone()).is_err() {
                self.dropped.set(self.dropped.get() + 1);
                eprintln!(
                    "watch: {} page(s) dropped in all: {QUEUE_MAX} wait for the hook already (it runs slower than alerts are raised)",
                    self.dropped.get()
                );
            }
        }
    }

    /// Waits for every queued page (a counted watch, a watch giving up: what it raised is paged
    /// before it exits), unless `stop` comes first: then as [`Pager::abort`].
    async fn finish<F: std::future::Future>(self, stop: std::pin::Pin<&mut F>) {
        let Pager {
            queue,
            stop: stopper,
            mut task,
            ..
        } = self;
        drop(queue);
        tokio::select! {
            _ = &mut task => {}
            _ = stop => {
                let _ = stopper.send(true);
                said_left(task.await);
            }
        }
    }

    /// Stops now (a signal): the hook running is killed with its process group, the pages
    /// still queued are not sent and said so.
    async fn abort(self) {
        let _ = self.stop.send(true);
        drop(self.queue);
        said_left(self.task.await);
    }
}

fn said_left(left: Result<usize, tokio::task::JoinError>) {
    if let Ok(left) = left
        && left > 0
    {
        eprintln!("watch: stopped with {left} page(s) not sent");
    }
}

/// Runs the queued pages one by one until the queue closes or `stop` is set; the pages left.
/// Each hook's process group is killed [`HOOK_TIMEOUT`] after it started, whatever `sh` did
/// meanwhile: a child it left in the background goes too, then or when the watch stops.
async fn run_pages(
    cmd: String,
    activity: ActivityId,
    mut queue: mpsc::Receiver<WatchEvent>,
    mut stop: watch::Receiver<bool>,
) -> usize {
    let mut groups: Vec<(i32, tokio::time::Instant)> = Vec::new();
    loop {
        let next = tokio::select! {
            biased;
            _ = stop.wait_for(|s| *s) => break,
            e = queue.recv() => e,
        };
        let Some(e) = next else { break };
        if let Some(group) = run_hook(&cmd, &activity, &e, &mut stop).await {
            groups.push(group);
        }
        let now = tokio::time::Instant::now();
        groups.retain(|(g, due)| {
            let keep = *due > now;
            if !keep {
                kill_group(*g);
            }
            keep
        });
    }
    queue.close();
    let mut left = 0;
    while queue.try_recv().is_ok() {
        left += 1;
    }
    // What the last hooks left behind has the rest of its 10 s, unless the watch was stopped.
    if let Some(last) = groups.iter().map(|(_, due)| *due).max()
        && !*stop.borrow()
    {
        tokio::select! {
            _ = tokio::time::sleep_until(last) => {}
            _ = stop.wait_for(|s| *s) => {}
        }
    }
    for (g, _) in groups {
        kill_group(g);
    }
    left
}

/// Kills a hook's process group (nothing when it is gone already).
fn kill_group(group: i32) {
    #[cfg(unix)]
    if let Some(pid) = rustix::process::Pid::from_raw(group) {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
    #[cfg(not(unix))]
    let _ = group;
}

/// Runs the hook for one alert: the alert's JSON on stdin, its kind, severity, product and
/// activity in the environment (the servers' URLs left out), its output on stderr (stdout is
/// the watch's own), killed with its process group after [`HOOK_TIMEOUT`] or when the watch
/// stops. A hook that fails is reported, never fatal. Returns the group of a hook that ended by
/// itself, with when it is due to go.
async fn run_hook(
    cmd: &str,
    activity: &ActivityId,
    e: &WatchEvent,
    stop: &mut watch::Receiver<bool>,
) -> Option<(i32, tokio::time::Instant)> {
    use tokio::io::AsyncWriteExt;
    let body = serde_json::to_string(e).unwrap_or_default();
    let started = tokio::time::Instant::now();
    let mut command = tokio::process::Command::new("sh");
    command
        .arg("-c")
        .arg(cmd)
        .env("SECKILL_ALERT_KIND", e.kind.map_or("", |k| k.as_str()))
        .env(
            "SECKILL_ALERT_SEVERITY",
            e.severity.map_or("", Severity::as_str),
        )
        .env("SECKILL_ALERT_PRODUCT", e.product.as_deref().unwrap_or(""))
        .env("SECKILL_ACTIVITY", activity.as_str())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::from(std::io::stderr()))
        .kill_on_drop(true);
    for var in SECRET_VARS {
        command.env_remove(var);
    }
    // A group of its own, so that a hook that ran too long goes with everything it started
    // (killing `sh` alone left its children running, reparented, writing 20 s later).
    #[cfg(unix)]
    command.process_group(0);
    let mut child = match command.spawn() {
        Ok(c) => c,
        Err(err) => {
            eprintln!("watch: --exec could not start: {err}");
            return None;
        }
    };
    let group = child.id().and_then(|id| i32::try_from(id).ok());
    let stdin = child.stdin.take();
    let ran = async {
        // A hook that never reads its stdin must not hold the page up past its timeout.
        if let Some(mut stdin) = stdin {
            let _ = stdin.write_all(body.as_bytes()).await;
            let _ = stdin.write_all(b"\n").await;
        }
        child.wait().await
    };
    let due = group.map(|g| (g, started + HOOK_TIMEOUT));
    let why = tokio::select! {
        r = tokio::time::timeout(HOOK_TIMEOUT, ran) => match r {
            Ok(Ok(status)) if status.success() => return due,
            Ok(Ok(status)) => {
                eprintln!("watch: --exec exited with {status}");
                return due;
            }
            Ok(Err(err)) => {
                eprintln!("watch: --exec failed: {err}");
                return due;
            }
            Err(_) => format!("ran longer than {HOOK_TIMEOUT:?}"),
        },
        _ = stop.wait_for(|s| *s) => "was running when the watch stopped".to_string(),
    };
    if let Some(g) = group {
        kill_group(g);
    }
    let _ = child.kill().await;
    eprintln!("watch: --exec {why} and was killed with every process it started");
    None
}

/// Ctrl-C or SIGTERM.
pub(super) fn stop_signal() -> Result<impl std::future::Future<Output = ()>> {
    #[cfg(unix)]
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| Error::internal(format!("cannot watch for SIGTERM: {e}")))?;
    Ok(async move {
        #[cfg(unix)]
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
    })
}

pub(super) type Conns = (seckill_console::db::Db, seckill_console::redis::RedisStore);

/// One poll. The connections are opened once and kept; a failed poll drops them so that the
/// next one reconnects (a new pool per poll would cost the servers a connection every tick).
pub(super) async fn poll(
    ctx: &Ctx,
    conns: &mut Option<Conns>,
    tracker: &mut Tracker,
    opts: &StatusOptions,
) -> Result<StatusReport> {
    let (db, redis) = connected(ctx, conns).await?;
    let polled = status_tracked(tracker, redis, db, &ctx.config.keys, opts).await;
    // Only a server that did not answer costs the connections; another error (an activity the
    // exporter was told of that does not exist) leaves them for the next poll.
    if polled
        .as_ref()
        .is_err_and(|e| e.kind == ErrorKind::Unavailable)
        && let Some((db, _)) = conns.take()
    {
        db.close().await;
    }
    polled
}

/// The kept connections, opened when there are none; an unreachable server is named in the
/// error (`redis_unreachable` or `db_unreachable`).
pub(super) async fn connected<'a>(ctx: &Ctx, conns: &'a mut Option<Conns>) -> Result<&'a Conns> {
    if conns.is_none() {
        let db = ctx
            .db()
            .await
            .map_err(|e| e.from_service(Service::Database))?;
        match ctx.redis().await {
            Ok(redis) => *conns = Some((db, redis)),
            Err(e) => {
                db.close().await;
                return Err(e.from_service(Service::Redis));
            }
        }
    }
    conns
        .as_ref()
        .ok_or_else(|| Error::internal("no connection after opening one"))
}

/// Prints `events`, one line each, and pages those the pager takes.
fn emit(events: &[WatchEvent], json: bool, ctx: &Ctx, pager: Option<&Pager>) {
    if events.is_empty() {
        return;
    }
    let mut out = std::io::stdout().lock();
    for e in events {
        let _ = writeln!(out, "{}", line(e, json, ctx.config.tz));
    }
    let _ = out.flush();
    drop(out);
    if let Some(p) = pager {
        p.page(events);
    }
}

pub async fn run_watch(ctx: &Ctx, args: WatchArgs, json: bool) -> Result<Outcome> {
    let activity = ActivityId::parse(&args.activity)?;
    let interval = check_args(&args)?;
    let give_up = Duration::from_secs(args.give_up_secs);
    // An outage is critical (paged) halfway to giving up.
    let critical_after =
        chrono::Duration::milliseconds(i64::try_from(give_up.as_millis() / 2).unwrap_or(i64::MAX));
    let opts = options(ctx);
    let read_only = ctx.config.read_only;
    let mut tracker = Tracker::new(
        activity.clone(),
        TrackerOptions::live(opts.grace, read_only).warm_share(ctx.config.warm_share_pct),
    );
    let mut watcher = Watcher::default();
    let mut outages = Outages::default();
    let pager = args
        .exec
        .clone()
        .map(|cmd| Pager::start(cmd, activity.clone(), args.exec_severity));
    let mut failing_since: Option<Instant> = None;
    let mut polls: u64 = 0;
    // Polls that read the books, and why the last one that did not failed: `--count` ends
    // with exit 3 when none did (a cron job must not read success from a dead Redis).
    let mut succeeded: u64 = 0;
    let mut last_failure = String::new();
    let mut conns: Option<Conns> = None;
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut stop = std::pin::pin!(stop_signal()?);
    let mut stopped = false;
    let mut fatal: Option<Error> = None;
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = &mut stop => { stopped = true; break; }
        }
        // A poll is cut short by a signal too: SIGTERM never waits for a slow server.
        let polled = tokio::select! {
            r = poll(ctx, &mut conns, &mut tracker, &opts) => r,
            _ = &mut stop => { stopped = true; break; }
        };
        polls += 1;
        match polled {
            Ok(report) => {
                succeeded += 1;
                if failing_since.take().is_some() {
                    eprintln!("watch: reading again");
                }
                let now = Utc::now();
                let mut events = outages.recovered(now);
                events.extend(watcher.step(&report, now));
                emit(&events, json, ctx, pager.as_ref());
            }
            Err(e) if e.kind == ErrorKind::Unavailable => {
                last_failure.clone_from(&e.message);
                let since = *failing_since.get_or_insert_with(Instant::now);
                eprintln!(
                    "watch: {} (unreachable for {} s)",
                    e.message,
                    since.elapsed().as_secs()
                );
                // Every unavailable error of a poll names its server; one that does not is
                // taken for Redis, the server a poll reads first and most.
                let service = e.service.unwrap_or(Service::Redis);
                let events = outages.failed(service, &e.message, Utc::now(), critical_after);
                emit(&events, json, ctx, pager.as_ref());
                if since.elapsed() >= give_up {
                    fatal = Some(Error::unavailable(format!(
                        "gave up after {} s without an answer: {}",
                        since.elapsed().as_secs(),
                        e.message
                    )));
                    break;
                }
            }
            Err(e) => {
                fatal = Some(e);
                break;
            }
        }
        if args.count.is_some_and(|n| polls >= n) {
            break;
        }
    }
    if let Some(p) = pager {
        if stopped {
            p.abort().await;
        } else {
            // A signal while the last pages go out stops them too.
            p.finish(stop.as_mut()).await;
        }
    }
    if let Some((db, _)) = conns.take() {
        // A pool whose poll was cut short by a signal is not waited on for long.
        let _ = tokio::time::timeout(Duration::from_millis(500), db.close()).await;
    }
    if let Some(e) = fatal {
        return Err(e);
    }
    // A counted watch (cron, a health check) says how it ended in its exit code: 3 when no
    // poll read the books, 4 when a critical alert was still raised at the last poll. One
    // stopped by a signal ends 0, as a service should.
    let Some(count) = args.count.filter(|_| !stopped) else {
        return Ok(Outcome::silent());
    };
    if succeeded == 0 {
        return Err(Error::unavailable(format!(
            "no poll of {count} read the books: {last_failure}"
        )));
    }
    let critical = watcher.critical_raised() + outages.critical();
    let mut out = Outcome::silent();
    if critical > 0 {
        eprintln!("watch: {critical} critical alert(s) still raised at the last poll");
        out.failure = Some(ErrorKind::CheckFailed);
    }
    Ok(out)
}
