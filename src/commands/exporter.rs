//! `exporter`: polls its activities the way `watch` does (books kept between polls, reading
//! what changed) on its own interval, and serves the last round as Prometheus metrics.

use super::watch::{Conns, connected, poll, stop_signal};
use super::{Ctx, Outcome};
use crate::cli::ExporterArgs;
use chrono::Utc;
use seckill_console::db::activity as store;
use seckill_console::domain::ActivityId;
use seckill_console::domain::activity::Phase;
use seckill_console::error::echoed;
use seckill_console::error::{Error, Result};
use seckill_console::ops::exporter::http::{Board, Published, serve};
use seckill_console::ops::exporter::metrics::Metrics;
use seckill_console::ops::tracker::{Tracker, TrackerOptions};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Activities exported at most when none is named (as many as the overview reads).
const DISCOVER_MAX: usize = 20;

/// Rounds between two listings of the activities when none is named.
const DISCOVER_EVERY: u64 = 12;

fn check_args(args: &ExporterArgs) -> Result<(SocketAddr, Duration, Vec<ActivityId>)> {
    let addr: SocketAddr = args.listen.parse().map_err(|_| {
        Error::bad_input(format!(
            "--listen '{}' is not an address: give HOST:PORT, e.g. 127.0.0.1:9464",
            seckill_console::redact::redact_text(&args.listen)
        ))
    })?;
    if !(args.interval.is_finite() && (0.2..=3600.0).contains(&args.interval)) {
        return Err(Error::bad_input(format!(
            "--interval {} is not between 0.2 and 3600 seconds",
            echoed(args.interval)
        )));
    }
    let named = args
        .activities
        .iter()
        .map(|a| ActivityId::parse(a))
        .collect::<Result<Vec<_>>>()?;
    Ok((addr, Duration::from_secs_f64(args.interval), named))
}

/// The activities to export: the named ones, or every live or upcoming one.
async fn discover(conns: &Conns) -> Result<Vec<ActivityId>> {
    let now = Utc::now();
    Ok(store::list(&conns.0)
        .await?
        .into_iter()
        .filter(|a| matches!(a.activity.phase(now), Phase::Live | Phase::Upcoming))
        .take(DISCOVER_MAX)
        .map(|a| a.activity.activity_id)
        .collect())
}

pub async fn run_exporter(ctx: &Ctx, args: ExporterArgs) -> Result<Outcome> {
    let (addr, interval, named) = check_args(&args)?;
    let std_listener = std::net::TcpListener::bind(addr).map_err(|e| {
        Error::bad_input(format!(
            "cannot listen on {addr}: {e}; choose a free address with --listen"
        ))
    })?;
    std_listener
        .set_nonblocking(true)
        .map_err(|e| Error::internal(format!("cannot listen on {addr}: {e}")))?;
    // Three rounds missed and the exporter reports itself unhealthy.
    let board = Arc::new(Board::new(interval * 3 + Duration::from_secs(10)));
    spawn_server(std_listener, Arc::clone(&board))?;
    eprintln!("exporter: serving http://{addr}/metrics and /healthz");

    let metrics = Metrics::new();
    metrics.set_interval(interval.as_secs_f64());
    let opts = super::status::options(ctx);
    let live = TrackerOptions::live(opts.grace, ctx.config.read_only)
        .warm_share(ctx.config.warm_share_pct);
    let mut trackers: HashMap<ActivityId, Tracker> = HashMap::new();
    let mut conns: Option<Conns> = None;
    let mut activities = named.clone();
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut stop = std::pin::pin!(stop_signal()?);
    let mut round: u64 = 0;
    // Until a listing succeeds, every round tries again (a database down at the start).
    let mut listed = false;
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = &mut stop => break,
        }
        let work = async {
            let mut problems: Vec<String> = Vec::new();
            if named.is_empty() && (!listed || round.is_multiple_of(DISCOVER_EVERY)) {
                match discover_with(ctx, &mut conns).await {
                    Ok(found) => {
                        listed = true;
                        trackers.retain(|id, _| found.contains(id));
                        let names: Vec<String> = found.iter().map(ToString::to_string).collect();
                        metrics.retain_activities(&names);
                        activities = found;
                    }
                    Err(e) => {
                        if let Some((db, _)) = conns.take() {
                            db.close().await;
                        }
                        metrics.listing_failed(&e);
                        problems.push(format!("listing the activities: {}", e.message));
                    }
                }
            }
            metrics.begin_round();
            // A server found unreachable fails the round's other activities too, without
            // waiting out a connect timeout for each of them.
            let mut down: Option<Error> = None;
            for id in &activities {
                let started = Instant::now();
                let tracker = trackers
                    .entry(id.clone())
                    .or_insert_with(|| Tracker::new(id.clone(), live.clone()));
                if let Some(e) = &down {
                    // Not polled: not a failed poll of its own either.
                    problems.push(format!("{id}: not read ({})", e.message));
                    continue;
                }
                match poll(ctx, &mut conns, tracker, &opts).await {
                    Ok(report) => {
                        metrics.report(&report, Utc::now(), started.elapsed().as_secs_f64());
                    }
                    Err(e) => {
                        metrics.failed(id.as_str(), &e, started.elapsed().as_secs_f64());
                        problems.push(format!("{id}: {}", e.message));
                        if e.kind == seckill_console::ErrorKind::Unavailable {
                            down = Some(e);
                        }
                    }
                }
            }
            for p in &problems {
                eprintln!("exporter: {p}");
            }
            board.publish(Published {
                metrics: Arc::from(metrics.encode().into_bytes()),
                problem: (!problems.is_empty()).then(|| problems.join("; ")),
                at: Instant::now(),
            });
        };
        tokio::select! {
            () = work => {}
            _ = &mut stop => break,
        }
        round += 1;
    }
    if let Some((db, _)) = conns.take() {
        let _ = tokio::time::timeout(Duration::from_millis(500), db.close()).await;
    }
    Ok(Outcome::silent())
}

/// Lists the activities over the kept connections (opening them if need be).
async fn discover_with(ctx: &Ctx, conns: &mut Option<Conns>) -> Result<Vec<ActivityId>> {
    let c = connected(ctx, conns).await?;
    discover(c)
        .await
        .map_err(|e| e.from_service(seckill_console::error::Service::Database))
}

/// The HTTP server on a thread and a runtime of its own: a poll's CPU never delays a scrape.
fn spawn_server(listener: std::net::TcpListener, board: Arc<Board>) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::internal(format!("cannot start the exporter's server: {e}")))?;
    std::thread::Builder::new()
        .name("exporter-http".into())
        .spawn(move || {
            runtime.block_on(async move {
                match tokio::net::TcpListener::from_std(listener) {
                    Ok(l) => serve(l, board).await,
                    Err(e) => eprintln!("exporter: cannot serve: {e}"),
                }
            });
        })
        .map_err(|e| Error::internal(format!("cannot start the exporter's server: {e}")))?;
    Ok(())
}
