//! `load` and `dry-run`.

use super::{Ctx, Outcome, table};
use crate::cli::{DryRunArgs, LoadArgs, LoadStrategyArg, StrategyArg};
use seckill_console::domain::ActivityId;
use seckill_console::domain::stock::printable;
use seckill_console::error::echoed;
use seckill_console::error::{Error, ErrorKind, Result};
use seckill_console::worker::demand::Demand;
use seckill_console::worker::dry_run::{DryRunSpec, dry_run};
use seckill_console::worker::payment::PaymentSpec;
use seckill_console::worker::{Faults, Live, LoadSpec, RunStats, Strategy, run_load};
use std::io::{BufRead, IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The run the progress line shows (a dry run moves from strategy to strategy).
type Shown = Arc<Mutex<Option<(Strategy, Arc<Live>)>>>;

fn check_common(buyers: usize, concurrency: usize, repeat_share: f64) -> Result<()> {
    if buyers == 0 || buyers > 100_000_000 {
        return Err(Error::bad_input(format!(
            "--buyers {buyers} is out of range: use 1 to 100000000"
        )));
    }
    if concurrency == 0 || concurrency > 10_000 {
        return Err(Error::bad_input(format!(
            "--concurrency {concurrency} is out of range: use 1 to 10000"
        )));
    }
    if !(0.0..=1.0).contains(&repeat_share) {
        return Err(Error::bad_input(format!(
            "--repeat-share {repeat_share} is not a share between 0 and 1"
        )));
    }
    Ok(())
}

/// `--rate`: requests per second, a finite number from 0.01 to 10,000,000 (a rate below that
/// would space two requests days apart; NaN or infinity mean nothing).
fn check_rate(rate: Option<f64>) -> Result<()> {
    match rate {
        Some(r) if !(r.is_finite() && (0.01..=10_000_000.0).contains(&r)) => {
            Err(Error::bad_input(format!(
                "--rate {} is out of range: use 0.01 to 10000000 requests per second, or leave it out for full speed",
                echoed(r)
            )))
        }
        _ => Ok(()),
    }
}

/// `--payment-window-secs`: a finite number of seconds from 0 to 86,400 (a day).
fn check_window(secs: f64) -> Result<Duration> {
    if secs.is_finite() && (0.0..=86_400.0).contains(&secs) {
        Ok(Duration::from_secs_f64(secs))
    } else {
        Err(Error::bad_input(format!(
            "--payment-window-secs {} is out of range: use 0 to 86400 seconds",
            echoed(secs)
        )))
    }
}

/// Prints a progress line on stderr once a second while a run goes on (terminals only), and
/// stops on Ctrl-C by setting `stop`.
fn spawn_progress(live: Shown, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let tty = std::io::stderr().is_terminal();
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = tokio::signal::ctrl_c() => {
                    stop.store(true, Ordering::Relaxed);
                }
            }
            let current = live.lock().ok().and_then(|g| g.clone());
            if let Some((strategy, l)) = current
                && tty
            {
                let s = l.snapshot();
                let _ = write!(
                    std::io::stderr(),
                    "\r\x1b[2K{}: {}/{} requests, {} sold, {:.0} ops/s, p99 {:.2} ms",
                    strategy.as_str(),
                    s.done,
                    s.total,
                    s.succeeded,
                    s.ops_per_sec,
                    s.p99_ms
                );
                let _ = std::io::stderr().flush();
            }
            if stop.load(Ordering::Relaxed) {
                break;
            }
        }
    })
}

fn end_progress() {
    if std::io::stderr().is_terminal() {
        let _ = write!(std::io::stderr(), "\r\x1b[2K");
    }
}

fn stats_table(runs: &[RunStats]) -> String {
    table::render(
        &[
            "strategy",
            "requests",
            "sold",
            "sold_out",
            "limited",
            "paused",
            "errors",
            "unknown",
            "ops/s",
            "p50_ms",
            "p99_ms",
            "rt/req",
            "oversold",
            "neg_seen",
            "lock_fail",
            "invariants",
        ],
        &runs
            .iter()
            .map(|r| {
                vec![
                    r.strategy.clone(),
                    r.requests.to_string(),
                    r.succeeded.to_string(),
                    r.sold_out.to_string(),
                    r.user_limited.to_string(),
                    r.paused.to_string(),
                    r.errors.to_string(),
                    r.unknown.to_string(),
                    format!("{:.0}", r.ops_per_sec),
                    format!("{:.3}", r.p50_ms),
                    format!("{:.3}", r.p99_ms),
                    format!("{:.2}", r.round_trips_per_request),
                    r.oversold.to_string(),
                    r.negative_seen.to_string(),
                    r.lock_failures.to_string(),
                    if r.invariants.is_empty() {
                        "-".into()
                    } else if r.ok {
                        "ok".into()
                    } else {
                        "FAILED".into()
                    },
                ]
            })
            .collect::<Vec<_>>(),
    )
}

fn seed_or_now(seed: Option<u64>) -> u64 {
    seed.unwrap_or_else(|| chrono::Utc::now().timestamp_micros() as u64)
}

/// The drill clock of `load`: a skew of at most a day either way, a commit delay of at most a
/// minute.
fn check_clock(skew_ms: i64, delay_ms: u64) -> Result<seckill_console::worker::run::OrderClock> {
    const DAY_MS: i64 = 86_400_000;
    if !(-DAY_MS..=DAY_MS).contains(&skew_ms) {
        return Err(Error::bad_input(format!(
            "--clock-skew-ms {skew_ms} is out of range: use -{DAY_MS} to {DAY_MS}"
        )));
    }
    if delay_ms > 60_000 {
        return Err(Error::bad_input(format!(
            "--commit-delay-ms {delay_ms} is out of range: use 0 to 60000"
        )));
    }
    Ok(seckill_console::worker::run::OrderClock {
        skew_ms,
        commit_delay_ms: delay_ms,
    })
}

pub async fn run_load_command(ctx: &Ctx, args: LoadArgs) -> Result<Outcome> {
    let activity = ActivityId::parse(&args.activity)?;
    check_common(args.buyers, args.concurrency, args.repeat_share)?;
    let faults = Faults::parse(args.faults.as_deref().unwrap_or(""))?;
    check_rate(args.rate)?;
    let window = check_window(args.payment_window_secs)?;
    let strategy = match args.strategy {
        LoadStrategyArg::Lua => Strategy::Lua,
        LoadStrategyArg::Hincrby => Strategy::Hincrby,
        LoadStrategyArg::Lock => Strategy::Lock,
    };
    // Only the HINCRBY strategy has a moment between two writes for a client to die in; the
    // Lua deduction is one atomic step, so the fault would silently do nothing.
    if faults.crash_between > 0.0 && strategy != Strategy::Hincrby {
        return Err(Error::bad_input(format!(
            "--faults crash-between applies to --strategy hincrby only (the {} deduction has no step between two writes); use timeout=P to drill unknown outcomes",
            strategy.as_str()
        )));
    }
    if !(0.0..=1.0).contains(&args.pay_share) {
        return Err(Error::bad_input(format!(
            "--pay-share {} is not a share between 0 and 1",
            args.pay_share
        )));
    }
    if ctx.config.read_only {
        return Err(Error::refused(
            "read-only mode: refused to run buyers; run without --read-only",
        ));
    }
    let db = ctx.db().await?;
    let a = seckill_console::db::activity::require(&db, &activity).await?;
    if a.phase(chrono::Utc::now()) == seckill_console::domain::Phase::Cancelled {
        return Err(Error::refused(format!(
            "activity '{activity}' is cancelled: load would sell what nobody may buy; run `seckill-console cleanup {activity}` to delete its keys"
        )));
    }
    let interactive = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    if !args.yes {
        if !interactive {
            return Err(Error::refused(
                "load deducts live stock and writes orders: pass --yes (there is no terminal to confirm on)",
            ));
        }
        let _ = write!(
            std::io::stderr(),
            "load deducts stock of '{activity}' under prefix '{}' and writes real orders. Type the activity id to confirm: ",
            ctx.config.keys.prefix()
        );
        let _ = std::io::stderr().flush();
        let mut line = String::new();
        let _ = std::io::stdin().lock().read_line(&mut line);
        if line.trim() != activity.as_str() {
            return Err(Error::refused("not confirmed: nothing was run"));
        }
    }
    let redis = ctx.redis().await?;
    let seed = seed_or_now(args.seed);
    let spec = LoadSpec {
        activity: activity.clone(),
        keys: ctx.config.keys.clone(),
        strategy,
        demand: Demand {
            buyers: args.buyers,
            repeat_share: args.repeat_share,
            products: 0,
            quantity: 1,
            seed,
            // The seed decides who buys what; the run's own nonce keeps its request ids apart
            // from every other run's (two runs of one seed replayed each other's sales, and the
            // second run's order failures gave back units the first run's orders held).
            run_id: format!(
                "load-{:08x}-{:08x}",
                seckill_console::worker::demand::mix(seed) as u32,
                run_nonce()
            ),
        },
        concurrency: args.concurrency,
        rate: args.rate,
        faults,
        payment: Some(PaymentSpec {
            pay_share: args.pay_share,
            window,
            seed,
        }),
        watch_negative: true,
        retries: args.retries,
        clock: check_clock(args.clock_skew_ms, args.commit_delay_ms)?,
    };
    let live = Arc::new(Live::default());
    let stop = Arc::new(AtomicBool::new(false));
    let shown = Arc::new(Mutex::new(Some((strategy, live.clone()))));
    let progress = spawn_progress(shown, stop.clone());
    let result = run_load(&redis, &db, &spec, live, stop.clone()).await;
    stop.store(true, Ordering::Relaxed);
    let _ = progress.await;
    end_progress();
    let over = match &result {
        Ok(_) => seckill_console::db::orders::buyers_over_limit(&db, &activity).await,
        Err(_) => Ok(0),
    };
    db.close().await;
    let mut stats = result?;
    stats.over_limit = over?;
    let (text, failure) = load_summary(&stats, strategy, &activity);
    Outcome::finished(stats, text, failure)
}

pub async fn run_dry_run(ctx: &Ctx, args: DryRunArgs) -> Result<Outcome> {
    let activity = ActivityId::parse(&args.activity)?;
    check_common(args.buyers, args.concurrency, args.repeat_share)?;
    let faults = Faults::parse(args.faults.as_deref().unwrap_or(""))?;
    check_rate(args.rate)?;
    if ctx.config.read_only {
        return Err(Error::refused(
            "read-only mode: a dry run writes shadow keys; run without --read-only",
        ));
    }
    if let Some(p) = &args.shadow_prefix
        && p == ctx.config.keys.prefix()
    {
        return Err(Error::refused(format!(
            "--shadow-prefix '{p}' is the live prefix: a dry run never touches live keys"
        )));
    }
    let strategies = match args.strategy {
        StrategyArg::All => Strategy::ALL.to_vec(),
        StrategyArg::Lua => vec![Strategy::Lua],
        StrategyArg::Hincrby => vec![Strategy::Hincrby],
        StrategyArg::Lock => vec![Strategy::Lock],
        StrategyArg::Sql => vec![Strategy::Sql],
    };
    if faults.crash_between > 0.0 && !strategies.contains(&Strategy::Hincrby) {
        return Err(Error::bad_input(
            "--faults crash-between applies to the hincrby strategy only (add --strategy hincrby or all); use timeout=P to drill unknown outcomes",
        ));
    }
    let db = ctx.db().await?;
    let redis = ctx.redis().await?;
    let spec = DryRunSpec {
        activity,
        buyers: args.buyers,
        concurrency: args.concurrency,
        repeat_share: args.repeat_share,
        strategies,
        faults,
        rate: args.rate,
        seed: seed_or_now(args.seed),
        shadow_prefix: args.shadow_prefix,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let shown: Shown = Arc::new(Mutex::new(None));
    let progress = spawn_progress(shown.clone(), stop.clone());
    let observer = |s: Strategy, l: Arc<Live>| {
        if let Ok(mut g) = shown.lock() {
            *g = Some((s, l));
        }
    };
    let result = dry_run(
        &redis,
        &db,
        &ctx.config.keys,
        &spec,
        &observer,
        stop.clone(),
    )
    .await;
    stop.store(true, Ordering::Relaxed);
    let _ = progress.await;
    end_progress();
    db.close().await;
    let mut runs = result?;
    let mut text = stats_table(&runs);
    if let Some(r) = runs.iter().find(|r| !r.paused_products.is_empty()) {
        text.push_str(&format!(
            "paused in Redis: {}; their copies are paused too, so the lua strategy sells nothing of them (the others do not read the flag)\n",
            r.paused_products.join(", ")
        ));
    }
    for r in &runs {
        for i in r.invariants.iter().filter(|i| !i.ok) {
            text.push_str(&format!(
                "{}: invariant failed: {}: {}\n",
                r.strategy, i.name, i.detail
            ));
        }
    }
    let failure = (!runs.iter().all(|r| r.ok)).then_some(ErrorKind::CheckFailed);
    if runs.len() == 1
        && let Some(one) = runs.pop()
    {
        Outcome::finished(one, text, failure)
    } else {
        Outcome::finished(runs, text, failure)
    }
}

/// A number of this run's own (the clock and the process): two runs of one seed never share a
/// request id.
fn run_nonce() -> u32 {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    seckill_console::worker::demand::mix(now ^ (u64::from(std::process::id()) << 32)) as u32
}

/// What `load` prints after its table, and whether the run failed what it drills (exit 4): it
/// oversold or left a buyer past the limit, or no request got an answer.
fn load_summary(
    stats: &RunStats,
    strategy: Strategy,
    activity: &ActivityId,
) -> (String, Option<ErrorKind>) {
    let mut text = stats_table(std::slice::from_ref(stats));
    // Only the Lua path keeps a ledger that restore.lua can give an expired order's units
    // back by; the other strategies leave them taken. A return that did not happen is said.
    let expired_note = if strategy != Strategy::Lua {
        "stock not returned: this strategy keeps no ledger to return it by".to_string()
    } else if stats.restore_failures > 0 {
        format!(
            "stock returned for {}; {} could not be returned now: `fix` returns them once past the grace window",
            stats.expired.saturating_sub(stats.restore_failures),
            stats.restore_failures
        )
    } else {
        "stock returned".to_string()
    };
    // The run's figures and the activity's are said apart: after an earlier run, "sold 100 of
    // 100 units; 0 paid" read as if this run had sold them.
    text.push_str(&format!(
        "this run: {} sales, {} paid, {} expired ({expired_note}), {} compensation entries\n\
         the activity: {} of {} units sold in all (every run and every other buyer)\n",
        stats.succeeded,
        stats.paid,
        stats.expired,
        stats.compensation_entries,
        stats.sold,
        stats.stock
    ));
    if stats.paused > 0 {
        text.push_str(&format!(
            "{} request(s) answered paused: nothing of a paused product sells (`seckill-console resume {}`)\n",
            stats.paused, activity
        ));
    }
    if !stats.error_reasons.is_empty() {
        let reasons: Vec<String> = stats
            .error_reasons
            .iter()
            .take(6)
            .map(|(why, n)| format!("{} x{n}", printable(why)))
            .collect();
        text.push_str(&format!("why requests failed: {}\n", reasons.join(", ")));
    }
    // Sold beyond the stock, or a buyer past the limit: the run broke what it drills (exit 4).
    if stats.oversold > 0 || stats.over_limit > 0 {
        text.push_str(&format!(
            "OVERSOLD: {} unit(s) sold beyond the stock, {} buyer(s) past the per-user limit (see `seckill-console status {activity}`)\n",
            stats.oversold, stats.over_limit
        ));
        return (text, Some(ErrorKind::CheckFailed));
    }
    // A run in which no request got an answer from the deduction tested nothing: exit 4.
    let answered = stats.succeeded + stats.sold_out + stats.user_limited + stats.paused;
    if stats.requests > 0 && answered == 0 {
        text.push_str(&format!(
            "no request was answered: {} errors, {} unknown outcomes; check Redis and the keys (status)\n",
            stats.errors, stats.unknown
        ));
        return (text, Some(ErrorKind::CheckFailed));
    }
    (text, None)
}
