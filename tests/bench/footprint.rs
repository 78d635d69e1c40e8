//! The console's footprint on what it watches (issue 10, acceptance 2). Run with
//! `scripts/bench footprint`; BENCH_UNITS (default 1,000,000) sizes the sale, BENCH_SECS
//! (default 30) the TUI window, BENCH_LOAD (default 200,000) each buyers' run.
//!
//! One product of a private redis-server (SLOWLOG at 1 ms) and a SQLite file (BENCH_DB=postgres
//! or mysql for a fresh database on SECKILL_TEST_PG_URL / SECKILL_TEST_MYSQL_URL) is sold
//! BENCH_UNITS times by `deduct.lua`, one unit to each of as many buyers; the orders of all but
//! the newest 0.1% are written (those are "on their way"). Then:
//!
//! (a) `status`, the real binary, timed with /usr/bin/time, each run a feed margin after the one
//!     before: once cold (no checkpoint yet: both sides read whole, in pages), then three times
//!     lagging (0.1% of the orders missing), the held orders land, three times balanced. Median
//!     wall time and peak memory.
//! (b) The TUI, headless (the binary's loop, pollers and views on a `TestBackend`), at 1 Hz
//!     for BENCH_SECS once warm: this process's CPU; Redis's time per refresh from
//!     `INFO commandstats` (every command the console sent, all pollers).
//! (c) The live view's truth alone (the tracker the Stock view's poller runs), ten refreshes
//!     once warm: rows the database returned, request ids looked up, events read, and
//!     Redis's time per refresh.
//! (d) Every command the console sent in (a) to (c) slower than 1 ms (SLOWLOG), each replayed
//!     on the idle server (best of five), and what the paged reads of (a) cost per call
//!     (`INFO commandstats`). SLOWLOG times by the wall clock: from (a) on, redis-server has a
//!     core of its own at real-time priority (see (f)), so no process here preempts it (the
//!     count is shown), but the hypervisor still takes the CPU for milliseconds (its steal is
//!     shown), and a probe, the console's costliest page sent by the benchmark every 5 ms
//!     through (a), shows how often that stalls a command of that cost past 1 ms. Target: no
//!     command costs Redis 1 ms: every slow entry replays under 1 ms.
//! (e) Memory one unit sold costs Redis (used_memory before and after the sale).
//! (f) Buyers at full speed (`load`, the real binary, 256 in flight) with the TUI closed and
//!     open on the sale, three runs each, alternating: median p99. redis-server is pinned to
//!     a core of its own and the buyers and the TUI to the rest, as in production where Redis
//!     has its own host and the console runs beside the app servers; the TUI runs at the
//!     niceness the binary's live view takes. Redis's busy share (INFO commandstats) is shown
//!     for both.
//!
//! Targets: no command costs Redis 1 ms (d); <= 5 ms of Redis per refresh; TUI <= 10% of a
//! core; lagging status <= 1.5x balanced; < 200 MB; buyers' p99 with the TUI open within 10%
//! of it closed.

#[path = "../e2e/harness/mod.rs"]
#[allow(unused_imports)]
mod harness;

use harness::fixtures::{import, live_window, preheat_go, product_keys, sell_one_each, standalone};
use harness::procstat::{clock_ticks, cpu_seconds};
use harness::{RedisServer, TestDb};
use ratatui::Terminal;
use ratatui::backend::TestBackend;
use seckill_console::config::{Layer, resolve};
use seckill_console::ctx::Ctx;
use seckill_console::db::orders::insert_with_outbox;
use seckill_console::domain::ActivityId;
use seckill_console::ops::tracker::{MARGIN, Tracker, TrackerOptions};
use seckill_console::redis::KeySpace;
use seckill_console::tui::{Action, Headless, TuiOptions, priority};
use std::cell::RefCell;
use std::process::{Command, Stdio};
use std::rc::Rc;
use std::time::{Duration, Instant};

const GRACE_SECS: &str = "3600";

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|v| *v > 0)
        .unwrap_or(default)
}

fn verdict(ok: bool) -> &'static str {
    if ok { "met" } else { "MISSED" }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// The sum of one numeric field (`usec`, `calls`) over every command of `INFO commandstats`,
/// since the last CONFIG RESETSTAT.
fn commandstats_total(server: &RedisServer, field: &str) -> f64 {
    let key = format!("{field}=");
    server
        .cli(&["INFO", "commandstats"])
        .lines()
        .filter_map(|l| l.split(key.as_str()).nth(1))
        .filter_map(|rest| rest.split(',').next()?.parse::<f64>().ok())
        .sum()
}

/// The commands that took Redis the most time since the last CONFIG RESETSTAT: (name, calls,
/// µs in all), most first.
fn top_commands(server: &RedisServer, n: usize) -> Vec<(String, f64, f64)> {
    let field = |rest: &str, key: &str| {
        rest.split(key)
            .nth(1)
            .and_then(|v| v.split(',').next()?.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    let mut all: Vec<(String, f64, f64)> = server
        .cli(&["INFO", "commandstats"])
        .lines()
        .filter_map(|l| l.strip_prefix("cmdstat_"))
        .filter_map(|l| {
            let (name, rest) = l.split_once(':')?;
            Some((
                name.to_string(),
                field(rest, "calls="),
                field(rest, "usec="),
            ))
        })
        .collect();
    all.sort_by(|a, b| b.2.total_cmp(&a.2));
    all.truncate(n);
    all
}

/// Redis's time executing commands (µs) since the last CONFIG RESETSTAT.
fn redis_usec(server: &RedisServer) -> f64 {
    commandstats_total(server, "usec")
}

/// One SLOWLOG entry: its time and its arguments, whole unless SLOWLOG cut them (more than 32
/// arguments or a string over 128 bytes).
struct Slow {
    micros: i64,
    args: Vec<Vec<u8>>,
    cut: bool,
}

impl Slow {
    fn show(&self) -> String {
        self.args
            .iter()
            .take(5)
            .map(|a| {
                String::from_utf8_lossy(a)
                    .chars()
                    .take(60)
                    .collect::<String>()
            })
            .collect::<Vec<_>>()
            .join(" ")
    }
}

async fn slowlog(server: &RedisServer) -> Vec<Slow> {
    let store = standalone(&server.url()).await;
    let cmd = redis::cmd("SLOWLOG").arg("GET").arg(4096).clone();
    let Ok(redis::Value::Array(entries)) = store.query("", &cmd).await else {
        return Vec::new();
    };
    entries
        .iter()
        .filter_map(|e| {
            let redis::Value::Array(f) = e else {
                return None;
            };
            let redis::Value::Int(micros) = f.get(2)? else {
                return None;
            };
            let redis::Value::Array(a) = f.get(3)? else {
                return None;
            };
            let args: Vec<Vec<u8>> = a
                .iter()
                .filter_map(|x| match x {
                    redis::Value::BulkString(b) => Some(b.clone()),
                    _ => None,
                })
                .collect();
            let cut = args.iter().any(|a| {
                let s = String::from_utf8_lossy(a);
                s.starts_with("... (") && s.ends_with("more arguments)")
                    || s.ends_with("more bytes)")
            });
            Some(Slow {
                micros: *micros,
                args,
                cut,
            })
        })
        .collect()
}

/// The best of five runs of a logged command, by SLOWLOG at 0 (every command timed), or None
/// where SLOWLOG cut its arguments or it is not a read the console sends.
fn replay(server: &RedisServer, entry: &Slow) -> Option<i64> {
    const READS: [&[u8]; 6] = [
        b"XRANGE",
        b"XREVRANGE",
        b"HMGET",
        b"HSCAN",
        b"HGETALL",
        b"INFO",
    ];
    let name = entry.args.first()?;
    if entry.cut || !READS.iter().any(|r| r.eq_ignore_ascii_case(name)) {
        return None;
    }
    server.cli(&["CONFIG", "SET", "slowlog-log-slower-than", "0"]);
    server.cli(&["SLOWLOG", "RESET"]);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()?;
    let best = rt.block_on(async {
        let store = standalone(&server.url()).await;
        let mut cmd = redis::cmd(&String::from_utf8_lossy(name));
        for a in &entry.args[1..] {
            cmd.arg(a.as_slice());
        }
        let key = entry
            .args
            .get(1)
            .map(|k| String::from_utf8_lossy(k).into_owned())
            .unwrap_or_default();
        for _ in 0..5 {
            let _ = store.query(&key, &cmd).await;
        }
        slowlog(server)
            .await
            .iter()
            .filter(|e| e.args.first() == Some(name))
            .map(|e| e.micros)
            .min()
    });
    server.cli(&["CONFIG", "SET", "slowlog-log-slower-than", "1000"]);
    best
}

/// Every call Redis served since its counters were last reset.
fn all_calls(server: &RedisServer) -> u64 {
    commandstats_total(server, "calls") as u64
}

/// CONFIG RESETSTAT, adding the calls it clears to `sent`.
fn reset_counting(server: &RedisServer, sent: &std::cell::Cell<u64>) {
    sent.set(sent.get() + all_calls(server));
    server.cli(&["CONFIG", "RESETSTAT"]);
}

/// Calls and mean microseconds per call of the commands that read big structures in pages.
fn page_costs(server: &RedisServer) -> Vec<(String, u64, f64)> {
    const PAGED: [&str; 5] = ["xrange", "xrevrange", "hmget", "hscan", "evalsha"];
    server
        .cli(&["INFO", "commandstats"])
        .lines()
        .filter_map(|l| {
            let (name, stats) = l.strip_prefix("cmdstat_")?.split_once(':')?;
            if !PAGED.contains(&name) {
                return None;
            }
            let field = |key: &str| {
                stats
                    .split(',')
                    .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
                    .map(str::to_string)
            };
            Some((
                name.to_uppercase(),
                field("calls")?.parse().ok()?,
                field("usec_per_call")?.parse().ok()?,
            ))
        })
        .collect()
}

fn used_memory(server: &RedisServer) -> f64 {
    server
        .cli(&["INFO", "memory"])
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

/// One `status --json` of the real binary under /usr/bin/time: wall seconds, peak KB.
fn status(server: &RedisServer, db: &TestDb) -> (f64, f64) {
    let out = Command::new("/usr/bin/time")
        .args(["-f", "%e %M", env!("CARGO_BIN_EXE_seckill-console")])
        .args([
            "--redis",
            &server.url(),
            "--db",
            &db.url,
            "--json",
            "status",
            "fp",
        ])
        .env("SECKILL_GRACE_SECS", GRACE_SECS)
        .env(
            "SECKILL_LOG",
            std::env::var("BENCH_LOG").unwrap_or_else(|_| "off".into()),
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .expect("/usr/bin/time seckill-console status");
    let err = String::from_utf8_lossy(&out.stderr);
    let doc: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("status: {e}: {err}"));
    let p = &doc["products"][0];
    assert!(p["drift"].as_i64().is_some(), "status: {doc}");
    if std::env::var("BENCH_LOG").is_ok() {
        eprintln!("{err}");
    }
    let last = err.lines().last().unwrap_or_default();
    let mut f = last.split_whitespace();
    let secs = f.next().and_then(|v| v.parse().ok()).unwrap_or(f64::NAN);
    let kb = f.next().and_then(|v| v.parse().ok()).unwrap_or(f64::NAN);
    (secs, kb)
}

fn config(server: &RedisServer, db: &TestDb) -> Ctx {
    Ctx {
        config: resolve(&[Layer {
            redis: Some(server.url()),
            db: Some(db.url.clone()),
            actor: Some("bench".into()),
            refresh_secs: Some(1.0),
            grace_secs: Some(3600),
            ..Layer::default()
        }])
        .expect("config"),
    }
}

/// The headless TUI on `activity` for `secs` once its first stock snapshot is on screen (and
/// `warm` more seconds): this process's CPU share and the refreshes seen.
async fn tui_window(ctx: &Ctx, activity: &str, warm: u64, secs: u64) -> (f64, u64) {
    let headless = Headless::new(
        ctx,
        TuiOptions {
            activity: Some(ActivityId::parse(activity).expect("id")),
        },
    );
    let tx = headless.sender();
    let mut term = Terminal::new(TestBackend::new(160, 48)).expect("terminal");
    let snaps = Rc::new(RefCell::new((0u64, None::<Instant>)));
    let ui = {
        let snaps = snaps.clone();
        headless.run(&mut term, move |app, _| {
            let mut s = snaps.borrow_mut();
            if app.stock.feed.received != s.1 && app.stock.report().is_some() {
                s.1 = app.stock.feed.received;
                s.0 += 1;
            }
        })
    };
    let control = async {
        let started = Instant::now();
        while snaps.borrow().0 == 0 && started.elapsed() < Duration::from_secs(600) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_secs(warm)).await;
        let me = std::process::id();
        let (cpu0, n0, t0) = (cpu_seconds(me), snaps.borrow().0, Instant::now());
        tokio::time::sleep(Duration::from_secs(secs)).await;
        let share = (cpu_seconds(me) - cpu0) / t0.elapsed().as_secs_f64();
        let n = snaps.borrow().0 - n0;
        let _ = tx.send(Action::ForceQuit);
        (share, n)
    };
    let (ran, out) = tokio::join!(ui, control);
    ran.expect("the TUI loop");
    out
}

/// `load` at full speed on a fresh activity: the buyers' p99 (ms) and rate.
fn load(server: &RedisServer, db: &TestDb, activity: &str, buyers: u64) -> (f64, f64) {
    let out = Command::new(env!("CARGO_BIN_EXE_seckill-console"))
        .args([
            "--redis",
            &server.url(),
            "--db",
            &db.url,
            "--json",
            "load",
            activity,
        ])
        .args(["--buyers", &buyers.to_string(), "--concurrency", "256"])
        .args(["--repeat-share", "0", "--pay-share", "1", "--yes"])
        .output()
        .expect("load");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("load: {e}: {}", String::from_utf8_lossy(&out.stderr)));
    (
        doc["p99_ms"].as_f64().unwrap_or(f64::NAN),
        doc["ops_per_sec"].as_f64().unwrap_or(f64::NAN),
    )
}

/// A baseline for (d), in the same run: the benchmark itself sends the console's costliest
/// page (XREVRANGE of `events::PAGE` entries, spelled `count` so SLOWLOG tells it apart) every
/// 5 ms on a connection of its own until stopped. A command of fixed cost is logged over 1 ms
/// only when the machine stalls Redis mid-command; how often that happens to the probe is how
/// often it happens to any command of that cost. It runs through (a) only: in (b) and (c) its
/// load would hide the console's in `INFO commandstats`.
struct Probe {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<u64>,
}

impl Probe {
    fn start(url: String, events_key: String) -> Self {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async {
                let store = standalone(&url).await;
                let cmd = redis::cmd("XREVRANGE")
                    .arg(&events_key)
                    .arg("+")
                    .arg("-")
                    .arg("count")
                    .arg(seckill_console::redis::events::PAGE)
                    .clone();
                let mut calls = 0;
                while !flag.load(std::sync::atomic::Ordering::Relaxed) {
                    if store.query(&events_key, &cmd).await.is_ok() {
                        calls += 1;
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                calls
            })
        });
        Probe { stop, thread }
    }

    /// Stops the probe; the calls it made.
    fn finish(self) -> u64 {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.join().unwrap_or(0)
    }
}

/// Time the hypervisor took from a CPU (`steal` of /proc/stat), milliseconds.
fn steal_ms(cpu: usize) -> f64 {
    let ticks = clock_ticks();
    let name = format!("cpu{cpu}");
    std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|stat| {
            stat.lines()
                .find(|l| l.split_whitespace().next() == Some(name.as_str()))
                .and_then(|l| l.split_whitespace().nth(8)?.parse::<f64>().ok())
        })
        .map_or(0.0, |t| t * 1000.0 / ticks)
}

/// Times redis-server's threads were preempted (involuntary context switches), which SLOWLOG
/// counts as the command's own time.
fn preemptions(server: &RedisServer) -> u64 {
    let Some(pid) = server.pid() else { return 0 };
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("status")).ok())
        .filter_map(|st| {
            st.lines()
                .find_map(|l| l.strip_prefix("nonvoluntary_ctxt_switches:"))
                .and_then(|v| v.trim().parse::<u64>().ok())
        })
        .sum()
}

fn main() {
    let units = usize::try_from(env_num("BENCH_UNITS", 1_000_000)).unwrap_or(1_000_000);
    let held = (units / 1000).max(1);
    let secs = env_num("BENCH_SECS", 30);
    let buyers = env_num("BENCH_LOAD", 200_000);
    let server = RedisServer::start_with(&[
        "--slowlog-log-slower-than",
        "1000",
        "--slowlog-max-len",
        "4096",
    ]);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let backend = std::env::var("BENCH_DB").unwrap_or_else(|_| "sqlite".into());
    let db = match backend.as_str() {
        "sqlite" => TestDb::sqlite(),
        "postgres" => rt
            .block_on(TestDb::postgres())
            .expect("BENCH_DB=postgres needs SECKILL_TEST_PG_URL"),
        "mysql" => rt
            .block_on(TestDb::mysql())
            .expect("BENCH_DB=mysql needs SECKILL_TEST_MYSQL_URL"),
        other => panic!("BENCH_DB={other:?}: use sqlite, postgres or mysql"),
    };
    println!(
        "footprint benchmark: one product sold {units} times on redis-server {} (private), {backend}",
        server.addr()
    );

    // The sale.
    let (held_orders, mem_before) = rt.block_on(async {
        let lib = db.open().await;
        let store = standalone(&server.url()).await;
        import(&lib, "fp", &[("item", units as i64, 1)], live_window()).await;
        preheat_go(&store, &lib, "fp", Duration::from_secs(3600)).await;
        let before = used_memory(&server);
        let held = sell_one_each(&store, &lib, ("fp", "item"), units, held).await;
        lib.close().await;
        (held, before)
    });
    let per_unit = (used_memory(&server) - mem_before) / units as f64;

    // (a) status: cold, lagging, then balanced, each run a margin after the one before, as an
    // operator's or a cron's reads come. A reader reads the feed's margin (the last two seconds
    // of order changes before the latest) again until one of its reads began a whole margin
    // after that change was first seen, for commits that land late: right after a burst of
    // orders that is the whole burst's tail, once (the first lagging run shows it).
    std::thread::sleep(Duration::from_secs(6));
    // From here on Redis has a core of its own, as in production (see (f)). SLOWLOG times a
    // command by the wall clock: sharing two cores with the console it watches, Redis was
    // preempted mid-command, and 100-field HMGETs that average 0.1 ms were logged at 1.5 and
    // 6 ms. Pinned, the log shows what the commands cost Redis.
    let pinned = harness::pin::redis_apart(&server);
    server.cli(&["SLOWLOG", "RESET"]);
    server.cli(&["CONFIG", "RESETSTAT"]);
    let preempted_before = preemptions(&server);
    let steal_before = steal_ms(harness::pin::redis_cpu());
    let probe = Probe::start(server.url(), product_keys("fp", "item").events.clone());
    let spaced = || {
        std::thread::sleep(MARGIN + Duration::from_millis(100));
        status(&server, &db)
    };
    let (cold_secs, cold_kb) = spaced();
    let lagging: Vec<(f64, f64)> = (0..3).map(|_| spaced()).collect();
    rt.block_on(async {
        let lib = db.open().await;
        insert_with_outbox(&lib, &held_orders)
            .await
            .expect("the held orders");
        lib.close().await;
    });
    let balanced: Vec<(f64, f64)> = (0..3).map(|_| spaced()).collect();
    let lag = median(lagging.iter().map(|r| r.0).collect());
    let bal = median(balanced.iter().map(|r| r.0).collect());
    let probe_calls = probe.finish();
    let status_costs = page_costs(&server);
    // Every call Redis served from here to (d), summed across the resets of (b) and (c).
    let sent = std::cell::Cell::new(0u64);
    let peak_mb = lagging
        .iter()
        .chain(&balanced)
        .map(|r| r.1)
        .fold(cold_kb, f64::max)
        / 1024.0;

    // (b) the TUI at 1 Hz, once warm.
    let ctx = config(&server, &db);
    let tui_rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    reset_counting(&server, &sent);
    let (share, refreshes) = tui_rt.block_on(async {
        // Warm-up: reset Redis's counters once the loop has its books.
        tui_window(&ctx, "fp", 0, 3).await;
        reset_counting(&server, &sent);
        tui_window(&ctx, "fp", 3, secs).await
    });
    let tui_usec = redis_usec(&server) / refreshes.max(1) as f64;
    let tui_top = top_commands(&server, 5);

    // (c) the tracker alone.
    reset_counting(&server, &sent);
    let (rows, lookups, events, settled) = rt.block_on(async {
        let lib = db.open().await;
        let store = standalone(&server.url()).await;
        let id = ActivityId::parse("fp").expect("id");
        let mut t = Tracker::new(id, TrackerOptions::live(Duration::from_secs(3600), false));
        t.refresh(&store, &lib, &KeySpace::default())
            .await
            .expect("warm-up refresh");
        reset_counting(&server, &sent);
        let (mut rows, mut lookups, mut events, mut settled) = (0, 0, 0, 0);
        for _ in 0..10 {
            t.refresh(&store, &lib, &KeySpace::default())
                .await
                .expect("refresh");
            rows += t.cost.changes + t.cost.looked_up;
            lookups += t.cost.looked_up;
            events += t.cost.events;
            settled += t.cost.settled;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        lib.close().await;
        (rows, lookups, events, settled)
    });
    let tracker_usec = redis_usec(&server) / 10.0;

    // (d) the slowlog of everything the console sent, beside the probe's.
    let console_calls = (sent.get() + all_calls(&server)).saturating_sub(probe_calls);
    let stolen_ms = steal_ms(harness::pin::redis_cpu()) - steal_before;
    // The benchmark's own resets (SLOWLOG RESET, CONFIG ...) are not the console's.
    let logged: Vec<Slow> = rt
        .block_on(slowlog(&server))
        .into_iter()
        .filter(|e| {
            let word = |i: usize| e.args.get(i).map(|a| a.to_ascii_uppercase());
            !(word(0).as_deref() == Some(b"CONFIG".as_slice())
                || (word(0).as_deref() == Some(b"SLOWLOG".as_slice())
                    && word(1).as_deref() == Some(b"RESET".as_slice())))
        })
        .collect();
    let (probe_slow, slow): (Vec<_>, Vec<_>) = logged.into_iter().partition(|e| {
        e.args.first().is_some_and(|a| a == b"XREVRANGE")
            && e.args.get(4).is_some_and(|a| a == b"count")
    });
    // Each slow entry of the console's, replayed now on the idle server: what the command
    // itself costs Redis, whatever stalled it then.
    let replays: Vec<Option<i64>> = slow.iter().map(|e| replay(&server, e)).collect();
    let slowest_us = slow.iter().map(|e| e.micros).max();
    let preempted = preemptions(&server).saturating_sub(preempted_before);

    // (f) buyers at full speed, the TUI closed and open. In production Redis has a host (or at
    // least a core) of its own and the console runs beside the app servers; on a small box
    // the three would otherwise fight over the same cores, and what is measured would be the
    // scheduler, not the console's load on Redis. So Redis gets the last core, this process
    // (the TUI) and the buyers' process the others.
    let mut closed = Vec::new();
    let mut open = Vec::new();
    let mut tui_cpu = Vec::new();
    // Redis's busy share (time in commands / wall, from INFO commandstats: this VM's CPU
    // accounting for other processes is unreliable), closed and open.
    let mut redis_busy = (Vec::new(), Vec::new());
    for run in 0..3 {
        for with_tui in [false, true] {
            let activity = format!("hot{run}{}", u8::from(with_tui));
            rt.block_on(async {
                let lib = db.open().await;
                let store = standalone(&server.url()).await;
                import(&lib, &activity, &[("item", 10_000_000, 1)], live_window()).await;
                preheat_go(&store, &lib, &activity, Duration::from_secs(60)).await;
                lib.close().await;
            });
            let p99 = if with_tui {
                let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
                let ctx = config(&server, &db);
                let watcher = {
                    let stop = stop.clone();
                    let activity = activity.clone();
                    std::thread::spawn(move || {
                        // As the binary's live view does before its runtime starts.
                        priority::lower(priority::DEFAULT_NICE);
                        let rt = tokio::runtime::Builder::new_current_thread()
                            .enable_all()
                            .build()
                            .expect("runtime");
                        rt.block_on(async {
                            let headless = Headless::new(
                                &ctx,
                                TuiOptions {
                                    activity: Some(ActivityId::parse(&activity).expect("id")),
                                },
                            );
                            let tx = headless.sender();
                            let mut term =
                                Terminal::new(TestBackend::new(160, 48)).expect("terminal");
                            let ui = headless.run(&mut term, |_, _| {});
                            let control = async {
                                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                                    tokio::time::sleep(Duration::from_millis(50)).await;
                                }
                                let _ = tx.send(Action::ForceQuit);
                            };
                            let (ran, ()) = tokio::join!(ui, control);
                            ran.expect("the TUI loop");
                        });
                    })
                };
                std::thread::sleep(Duration::from_secs(2));
                let (cpu0, t0) = (cpu_seconds(std::process::id()), Instant::now());
                server.cli(&["CONFIG", "RESETSTAT"]);
                let r = load(&server, &db, &activity, buyers);
                let wall = t0.elapsed().as_secs_f64();
                redis_busy.1.push(redis_usec(&server) / 1e6 / wall);
                tui_cpu.push((cpu_seconds(std::process::id()) - cpu0) / wall);
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
                watcher.join().expect("the TUI thread");
                r
            } else {
                let t0 = Instant::now();
                server.cli(&["CONFIG", "RESETSTAT"]);
                let r = load(&server, &db, &activity, buyers);
                redis_busy
                    .0
                    .push(redis_usec(&server) / 1e6 / t0.elapsed().as_secs_f64());
                r
            };
            if with_tui {
                open.push(p99);
            } else {
                closed.push(p99);
            }
        }
    }
    let p99_closed = median(closed.iter().map(|r| r.0).collect());
    let p99_open = median(open.iter().map(|r| r.0).collect());

    println!(
        "(a) status, the real binary (median of 3; lagging = 0.1% of the orders on their way)"
    );
    println!(
        "    cold, no checkpoint yet (both sides read whole, in pages): {cold_secs:.2} s, {:.0} MB",
        cold_kb / 1024.0
    );
    println!(
        "    lagging {lag:.3} s  balanced {bal:.3} s  ratio {:.2} (target <= 1.5: {})",
        lag / bal,
        verdict(lag / bal <= 1.5)
    );
    println!(
        "    each run (s): lagging {:?}, balanced {:?}",
        lagging.iter().map(|r| r.0).collect::<Vec<_>>(),
        balanced.iter().map(|r| r.0).collect::<Vec<_>>()
    );
    let mb = |runs: &[(f64, f64)]| {
        runs.iter()
            .map(|r| format!("{:.0}", r.1 / 1024.0))
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!(
        "    peak memory {peak_mb:.0} MB (target < 200 MB: {}); each run (MB): lagging [{}], balanced [{}]",
        verdict(peak_mb < 200.0),
        mb(&lagging),
        mb(&balanced)
    );
    println!("(b) the TUI, headless, 1 Hz, {refreshes} refreshes once warm");
    println!(
        "    this process: {:.1}% of one core (target <= 10%: {})",
        share * 100.0,
        verdict(share <= 0.10)
    );
    println!(
        "    Redis per refresh, every poller: {:.2} ms (INFO commandstats; target <= 5 ms: {})",
        tui_usec / 1000.0,
        verdict(tui_usec <= 5000.0)
    );
    for (name, calls, usec) in &tui_top {
        println!(
            "      {name}: {:.1} calls, {:.3} ms per refresh ({:.1} us a call)",
            calls / refreshes.max(1) as f64,
            usec / 1000.0 / refreshes.max(1) as f64,
            usec / calls.max(1.0)
        );
    }
    println!("(c) the live view's truth alone, 10 refreshes once warm");
    println!(
        "    per refresh: {:.1} rows from the database ({:.1} request ids looked up), {:.1} events read, {settled} settles; Redis {:.2} ms",
        rows as f64 / 10.0,
        lookups as f64 / 10.0,
        events as f64 / 10.0,
        tracker_usec / 1000.0
    );
    // The target is about what a command costs Redis. SLOWLOG times by the wall clock, so a
    // stall of the machine (this VM's hypervisor takes its CPUs for milliseconds at a time)
    // logs whatever command it lands in; the probe shows how often that happens to a page sent
    // by the benchmark itself. So each slow entry of the console's is replayed on the idle
    // server: the target holds when every one of them costs under 1 ms there (best of five)
    // and none was cut by SLOWLOG (unreplayable entries count against it).
    let per_k = |n: usize, calls: u64| n as f64 * 1000.0 / calls.max(1) as f64;
    let over = replays
        .iter()
        .filter(|r| r.is_none_or(|us| us >= 1000))
        .count();
    println!(
        "(d) slowest command the console sent: {} (SLOWLOG at 1 ms): {} of about {console_calls} commands over 1 ms ({:.2} per 1,000), {over} of them over 1 ms when replayed (target: none over 1 ms of Redis's work: {})",
        slowest_us.map_or_else(|| "none logged".to_string(), |u| format!("{u} us")),
        slow.len(),
        per_k(slow.len(), console_calls),
        verdict(over == 0)
    );
    println!(
        "    the machine's stalls: the probe (the same page, sent by the benchmark) logged {} of {probe_calls} over 1 ms ({:.2} per 1,000, slowest {}); the hypervisor took {stolen_ms:.0} ms of Redis's CPU",
        probe_slow.len(),
        per_k(probe_slow.len(), probe_calls),
        probe_slow
            .iter()
            .map(|e| e.micros)
            .max()
            .map_or_else(|| "none".to_string(), |u| format!("{u} us")),
    );
    // Those that count against the target first, then the slowest.
    let mut listed: Vec<(&Slow, &Option<i64>)> = slow.iter().zip(&replays).collect();
    listed.sort_by_key(|(e, best)| {
        (
            best.is_some_and(|us| us < 1000),
            std::cmp::Reverse(e.micros),
        )
    });
    for (e, best) in listed.into_iter().take(12) {
        let replayed = best.map_or_else(
            || "not replayable".to_string(),
            |us| format!("{us} us replayed"),
        );
        println!("    {} us: {} ({replayed})", e.micros, e.show());
    }
    println!(
        "    {}, preempted {preempted} time(s) in (a) to (c); the paged reads of (a), per call (INFO commandstats):",
        if pinned {
            "redis-server on a core of its own"
        } else {
            "redis-server shares every core (no taskset)"
        }
    );
    for (name, calls, usec) in &status_costs {
        let probe_note = if name == "XREVRANGE" {
            format!(" (the probe's {probe_calls} among them)")
        } else {
            String::new()
        };
        println!("    {name}: {calls} calls, {usec:.1} us each{probe_note}");
    }
    println!(
        "(e) Redis memory per unit sold: {per_unit:.0} bytes ({:.0} MB for the sale)",
        per_unit * units as f64 / 1e6
    );
    println!(
        "(f) buyers at full speed ({buyers} each run, 256 in flight{}): p99 closed {p99_closed:.2} ms, with the TUI open {p99_open:.2} ms, ratio {:.2} (target <= 1.10: {})",
        if pinned {
            "; redis-server on a core of its own"
        } else {
            ""
        },
        p99_open / p99_closed,
        verdict(p99_open / p99_closed <= 1.10)
    );
    println!(
        "    while the TUI was open: it used {:.0}% of one core; Redis busy {:.0}% closed, {:.0}% open",
        median(tui_cpu.clone()) * 100.0,
        median(redis_busy.0.clone()) * 100.0,
        median(redis_busy.1.clone()) * 100.0
    );
    println!(
        "    runs closed {:?}, open {:?}",
        closed
            .iter()
            .map(|r| (r.0, r.1.round()))
            .collect::<Vec<_>>(),
        open.iter().map(|r| (r.0, r.1.round())).collect::<Vec<_>>()
    );
}
