//! What the live view costs the Redis that serves the sale (issue 57). Run with
//! `scripts/bench live`; BENCH_SIZES (default "10000,100000") picks the activities' sizes,
//! BENCH_RUNS (default 3) the runs of each figure (the median is reported).
//!
//! Per size, on a private redis-server and a SQLite file: one live activity of N products,
//! preheated, nothing sold, plus a product of 10^9 units per run of the sale path. The
//! readers are the real binary: `watch --interval 1` (the live view's poller, the same tracker
//! the TUI's Stock view refreshes) and `exporter --interval 1 --read-only`. Measured, each
//! against one `status` of the same activity in the same run (the baseline: one whole read):
//!
//! - Redis's cost: the time it spent in commands (`INFO commandstats`, every command's usec
//!   summed) and its CPU (`INFO cpu`, less its idle housekeeping measured just before the
//!   run: with every key under a TTL its expiry cycle costs about 2 ms a second here);
//! - a fresh reader's first 10 s and first 60 s; then, once its first read is done (its
//!   commands a second below 2% of a `status`'s), its cost per poll over 20 s, with its own CPU
//!   share and resident memory;
//! - three `watch` and an exporter started at once: their first 60 s and their settled polls,
//!   against one reader's;
//! - 100 products selling 1,000 units a second in all (a seller in a child process, as the TUI
//!   benchmark's): the reader's Redis time per poll, as the sale with the reader less the sale
//!   alone (10 s before the reader starts), the scripts' own writes (commands no reader sends,
//!   slower as the sale's hashes grow) left out of both; and how far behind Redis the
//!   exporter's `seckill_stock_remaining` is, in polls, from scrapes each second;
//! - the sale path: `redis-benchmark` of `deduct.lua` with no reader and with four
//!   connections tracking the activity's keys (what the readers ask of Redis), each run on a
//!   fresh product of 10^9 units, alternating which goes first, as a ratio of the rates and of
//!   Redis's CPU per call.
//!
//! Targets (issue 57): first 10 s <= 1 status (at 100,000 products); settled poll <= 2% of a status, the console
//! <= 10% of a core and 300 MB; four readers settled <= 1.5x one; selling, <= 5% of a status a
//! poll and figures at most two polls old; the sale path >= 0.97x.

#[path = "../e2e/harness/mod.rs"]
#[allow(unused_imports)]
mod harness;

use harness::fixtures::{import, live_window, preheat_go, product_keys, standalone};
use harness::procstat::cpu_seconds;
use harness::{RedisServer, TestDb};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const ACTIVITY: &str = "live";
const SELLING: u64 = 100;
const SELL_RATE: u64 = 1_000;

/// The commands the sale's scripts send that no reader sends (`lua/*.lua`; a read-only reader
/// may send nothing but reads).
const SCRIPTS_ONLY: &[&str] = &[
    "decrby",
    "del",
    "hdel",
    "hincrby",
    "hset",
    "hsetnx",
    "incrby",
    "pexpireat",
    "set",
    "xadd",
];

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn verdict(ok: bool) -> &'static str {
    if ok { "met" } else { "MISSED" }
}

/// Redis's counters at one instant.
#[derive(Clone, Copy, Debug, Default)]
struct Meter {
    /// CPU seconds (user + system).
    cpu: f64,
    /// Microseconds spent in commands, every command.
    usec: f64,
    /// Microseconds spent in the sale's scripts (EVALSHA, EVAL).
    scripts: f64,
    /// Microseconds spent in the commands only the scripts send (their writes, counted apart
    /// in `INFO commandstats` too; a reader never sends one).
    inner: f64,
    calls: f64,
    at: Option<Instant>,
}

impl Meter {
    fn read(server: &RedisServer) -> Self {
        let cpu_info = server.cli(&["INFO", "cpu"]);
        let field = |name: &str| -> f64 {
            cpu_info
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0.0)
        };
        let cpu = field("used_cpu_sys:") + field("used_cpu_user:");
        let stats = server.cli(&["INFO", "commandstats"]);
        let (mut usec, mut scripts, mut calls, mut inner) = (0.0, 0.0, 0.0, 0.0);
        for l in stats.lines().filter(|l| l.starts_with("cmdstat_")) {
            let num = |k: &str| -> f64 {
                l.split(k)
                    .nth(1)
                    .and_then(|v| v.split(',').next())
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0.0)
            };
            // The benchmark's own INFO calls are not the readers'.
            if l.starts_with("cmdstat_info:") {
                continue;
            }
            usec += num("usec=");
            calls += num("calls=");
            if l.starts_with("cmdstat_evalsha:") || l.starts_with("cmdstat_eval:") {
                scripts += num("usec=");
            }
            if SCRIPTS_ONLY
                .iter()
                .any(|c| l.starts_with(&format!("cmdstat_{c}:")))
            {
                inner += num("usec=");
            }
        }
        Meter {
            cpu,
            usec,
            scripts,
            inner,
            calls,
            at: Some(Instant::now()),
        }
    }

    /// What Redis did since `before`: (command ms less the scripts, CPU ms less `idle_ms_s`
    /// of housekeeping a second, calls, seconds).
    fn since(&self, before: &Meter, idle_ms_s: f64) -> Spent {
        let secs = match (self.at, before.at) {
            (Some(a), Some(b)) => a.duration_since(b).as_secs_f64(),
            _ => 0.0,
        };
        Spent {
            command_ms: ((self.usec - before.usec) - (self.scripts - before.scripts)) / 1000.0,
            inner_ms: (self.inner - before.inner) / 1000.0,
            cpu_ms: ((self.cpu - before.cpu) * 1000.0 - idle_ms_s * secs).max(0.0),
            calls: self.calls - before.calls,
            secs,
        }
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct Spent {
    command_ms: f64,
    /// Of `command_ms`, the commands only the scripts send.
    inner_ms: f64,
    cpu_ms: f64,
    calls: f64,
    secs: f64,
}

impl Spent {
    fn per_sec(self) -> Spent {
        let s = self.secs.max(1e-9);
        Spent {
            command_ms: self.command_ms / s,
            inner_ms: self.inner_ms / s,
            cpu_ms: self.cpu_ms / s,
            calls: self.calls / s,
            secs: 1.0,
        }
    }
}

fn rss_mb(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

fn binary() -> Command {
    Command::new(env!("CARGO_BIN_EXE_seckill-console"))
}

fn reader(server: &RedisServer, db: &TestDb, args: &[&str]) -> Child {
    binary()
        .args(["--redis", &server.url(), "--db", &db.url])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the console")
}

/// `--read-only exporter --interval 1` of the activity, serving on `port`.
fn exporter(server: &RedisServer, db: &TestDb, port: u16) -> Child {
    let listen = format!("127.0.0.1:{port}");
    let args = [
        "--read-only",
        "exporter",
        "--listen",
        &listen,
        "--interval",
        "1",
    ];
    let mut all: Vec<&str> = args.to_vec();
    all.push(ACTIVITY);
    reader(server, db, &all)
}

fn stop(mut c: Child) {
    let _ = c.kill();
    let _ = c.wait();
}

/// Redis's housekeeping, in CPU ms a second, with nobody asking anything.
fn idle(server: &RedisServer) -> f64 {
    let a = Meter::read(server);
    std::thread::sleep(Duration::from_secs(5));
    let b = Meter::read(server);
    b.since(&a, 0.0).per_sec().cpu_ms
}

/// One `status` of the activity: what Redis spent.
fn status(server: &RedisServer, db: &TestDb, idle_ms_s: f64) -> Spent {
    let a = Meter::read(server);
    let out = binary()
        .args(["--redis", &server.url(), "--db", &db.url])
        .args(["status", ACTIVITY, "--json"])
        .output()
        .expect("status");
    assert!(
        out.status.code().is_some_and(|c| c <= 4),
        "status failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Meter::read(server).since(&a, idle_ms_s)
}

/// Waits until the readers' commands a second fall below `floor`, for three seconds in a row
/// (their first read is done); at most `limit`.
fn settle(server: &RedisServer, floor: f64, limit: Duration) -> Duration {
    let t = Instant::now();
    let mut quiet = 0;
    let mut last = Meter::read(server);
    while quiet < 3 && t.elapsed() < limit {
        std::thread::sleep(Duration::from_secs(1));
        let now = Meter::read(server);
        quiet = if now.since(&last, 0.0).calls < floor {
            quiet + 1
        } else {
            0
        };
        last = now;
    }
    t.elapsed()
}

/// What readers started at once cost, from their start.
#[derive(Clone, Copy, Debug, Default)]
struct Run {
    first10: Spent,
    first60: Spent,
    settled_after: f64,
    /// A second of settled polls.
    settled: Spent,
    /// The readers' CPU share of one core, settled, summed.
    console_cpu: f64,
    /// The largest resident memory of one reader, settled.
    rss_mb: f64,
}

fn run_readers(
    server: &RedisServer,
    db: &TestDb,
    exporters: usize,
    watchers: usize,
    st: &Spent,
    idle_ms_s: f64,
) -> Run {
    let a = Meter::read(server);
    let mut kids = Vec::new();
    for _ in 0..watchers {
        kids.push(reader(server, db, &["watch", ACTIVITY, "--interval", "1"]));
    }
    for _ in 0..exporters {
        kids.push(exporter(server, db, harness::redis_server::free_port()));
    }
    std::thread::sleep(Duration::from_secs(10));
    let first10 = Meter::read(server).since(&a, idle_ms_s);
    std::thread::sleep(Duration::from_secs(50));
    let first60 = Meter::read(server).since(&a, idle_ms_s);
    let settled_after =
        60.0 + settle(server, st.calls * 0.02, Duration::from_secs(240)).as_secs_f64();
    let b = Meter::read(server);
    let cpu0: Vec<f64> = kids.iter().map(|k| cpu_seconds(k.id())).collect();
    std::thread::sleep(Duration::from_secs(20));
    let settled = Meter::read(server).since(&b, idle_ms_s).per_sec();
    let console_cpu = kids
        .iter()
        .zip(&cpu0)
        .map(|(k, c0)| cpu_seconds(k.id()) - c0)
        .sum::<f64>()
        / 20.0;
    let rss_mb = kids.iter().map(|k| rss_mb(k.id())).fold(0.0, f64::max);
    for k in kids {
        stop(k);
    }
    Run {
        first10,
        first60,
        settled_after,
        settled,
        console_cpu,
        rss_mb,
    }
}

/// One reader, settled, while 100 products sell: its Redis time a poll (the scripts left out)
/// and how many polls behind Redis the exporter's stock figures are.
fn run_selling(
    server: &RedisServer,
    db: &TestDb,
    st: &Spent,
    idle_ms_s: f64,
    run: usize,
) -> (Spent, f64) {
    let sale = harness::seller::Sale {
        activity: ACTIVITY.into(),
        product_prefix: "p".into(),
        width: 6,
        products: SELLING,
        rate: SELL_RATE,
        request_prefix: format!("r{run}"),
    };
    // The reader's first read at its paced share: about 50 s at 100,000 products.
    let warm = 15 + 60 * st.calls as u64 / 500_000;
    let mut seller = harness::seller::spawn(server, db, 5 + 10 + warm + 25, &sale);
    std::thread::sleep(Duration::from_secs(5));
    // The sale alone, no reader at all: what its requests cost (the commands a script runs
    // are counted apart in `INFO commandstats` too). A reader stopped instead would still be
    // sent Redis's pushes, which are part of what a reader costs.
    let a = Meter::read(server);
    std::thread::sleep(Duration::from_secs(10));
    let alone = Meter::read(server).since(&a, idle_ms_s).per_sec();
    let port = harness::redis_server::free_port();
    let exporter = exporter(server, db, port);
    std::thread::sleep(Duration::from_secs(warm));
    let a = Meter::read(server);
    // How far behind: the exporter's stock of a selling product against Redis's now, in
    // units, over the product's rate (units a second) at one poll a second.
    let per_product = SELL_RATE as f64 / SELLING as f64;
    let mut lags = Vec::new();
    let until = Instant::now() + Duration::from_secs(20);
    while Instant::now() < until {
        std::thread::sleep(Duration::from_millis(1000));
        let product = format!("p{:06}", lags.len() as u64 % SELLING);
        let Some(shown) = harness::prometheus::get(port, "/metrics").and_then(|(_, text)| {
            text.lines()
                .find(|l| {
                    l.starts_with("seckill_stock_remaining{")
                        && l.contains(&format!("product=\"{product}\""))
                })
                .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        }) else {
            continue;
        };
        let key = product_keys(ACTIVITY, &product).stock.clone();
        let now: f64 = server
            .cli(&["GET", &key])
            .trim()
            .parse()
            .unwrap_or(f64::NAN);
        lags.push((shown - now) / per_product);
    }
    let both = Meter::read(server).since(&a, idle_ms_s).per_sec();
    // The scripts' own writes are left out of both windows: they take longer as the sale's
    // hashes and streams grow (about 20 ms a second more in the second window at 10,000
    // products, with or without a reader), and no reader sends one. What both send (GET,
    // EXISTS, TYPE, TIME, HGET, HMGET) is the sale's rate alone subtracted.
    let spent = Spent {
        command_ms: ((both.command_ms - both.inner_ms) - (alone.command_ms - alone.inner_ms))
            .max(0.0),
        inner_ms: 0.0,
        cpu_ms: (both.cpu_ms - alone.cpu_ms).max(0.0),
        calls: (both.calls - alone.calls).max(0.0),
        secs: 1.0,
    };
    let _ = seller.wait();
    stop(exporter);
    let worst = lags.iter().copied().fold(0.0, f64::max);
    (spent, worst)
}

/// `redis-benchmark` of `deduct.lua` on `product`: requests a second, and Redis's CPU per call
/// in microseconds (`INFO cpu`: the pushes are sent outside the script's own time).
fn deduct_rate(server: &RedisServer, sha: &str, requests: u64, product: &str) -> (f64, f64) {
    let k = product_keys(ACTIVITY, product);
    let before = Meter::read(server);
    let keys = k.script_keys();
    let out = Command::new("redis-benchmark")
        .args(["-h", "127.0.0.1", "-p", &server.port.to_string()])
        .args([
            "-n",
            &requests.to_string(),
            "-P",
            "16",
            "-r",
            "100000000",
            "-q",
        ])
        .args(["EVALSHA", sha, &keys.len().to_string()])
        .args(keys.iter().map(|s| s.to_string()))
        .args(["req:__rand_int__", "user:__rand_int__", "1"])
        .stderr(Stdio::null())
        .output()
        .expect("redis-benchmark");
    let cpu_us = (Meter::read(server).cpu - before.cpu) * 1e6 / requests as f64;
    let text = String::from_utf8_lossy(&out.stdout);
    let rate = harness::redis_benchmark::rate(&text)
        .unwrap_or_else(|| panic!("cannot read redis-benchmark output: {text}"));
    (rate, cpu_us)
}

/// Readers tracking the activity's keys as the live view does at this size: by key (each
/// registers the hot product's five keys once a second, as a reader registers a product that
/// moved before reading it again) up to the default budget, else by prefix.
struct Trackers {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Trackers {
    fn start(server: &RedisServer, readers: usize, products: usize, hot: &str) -> Self {
        let by_key =
            products * 5 <= seckill_console::ops::quiet::QuietOptions::default().track_keys_max;
        let url = format!("{}?protocol=resp3", server.url());
        let keys = product_keys(ACTIVITY, hot);
        let five: Vec<String> = keys.script_keys().iter().map(|k| k.to_string()).collect();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let stopping = stop.clone();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let client = redis::Client::open(url).expect("client");
                let mut conns = Vec::new();
                for _ in 0..readers {
                    let config = redis::AsyncConnectionConfig::new()
                        .set_push_sender(|_info: redis::PushInfo| Ok::<(), ()>(()));
                    let mut c = client
                        .get_multiplexed_async_connection_with_config(&config)
                        .await
                        .expect("tracking connection");
                    let mut on = redis::cmd("CLIENT");
                    on.arg("TRACKING").arg("ON");
                    if !by_key {
                        on.arg("BCAST")
                            .arg("PREFIX")
                            .arg(format!("seckill:{{{ACTIVITY}:"));
                    }
                    on.query_async::<()>(&mut c).await.expect("client tracking");
                    conns.push(c);
                }
                let _ = ready_tx.send(());
                while !stopping.load(std::sync::atomic::Ordering::Relaxed) {
                    if by_key {
                        for c in &mut conns {
                            redis::cmd("EXISTS")
                                .arg(&five)
                                .query_async::<i64>(c)
                                .await
                                .expect("register");
                        }
                    }
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            });
        });
        ready_rx.recv().expect("trackers ready");
        Trackers {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Trackers {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn setup(server: &RedisServer, db: &TestDb, n: usize, runs: usize) {
    let lib = db.open().await;
    let store = standalone(&server.url()).await;
    let mut products: Vec<(String, i64, i64)> =
        (0..n).map(|i| (format!("p{i:06}"), 1_000_000, 1)).collect();
    // The sale path's products: a fresh one for each run (a run leaves its product's hashes
    // and stream a run's sales bigger: the next run on it would be slower for that alone).
    for i in 0..2 * runs {
        products.push((format!("hot{i}"), 1_000_000_000, 1));
    }
    let refs: Vec<(&str, i64, i64)> = products
        .iter()
        .map(|(p, s, l)| (p.as_str(), *s, *l))
        .collect();
    import(&lib, ACTIVITY, &refs, live_window()).await;
    preheat_go(&store, &lib, ACTIVITY, Duration::from_secs(60)).await;
    lib.close().await;
}

fn bench_size(rt: &tokio::runtime::Runtime, n: usize, runs: usize) -> bool {
    let server = RedisServer::start();
    let db = TestDb::sqlite();
    let t = Instant::now();
    rt.block_on(setup(&server, &db, n, runs));
    println!(
        "\n== {n} products (set up in {:.0} s)",
        t.elapsed().as_secs_f64()
    );
    let idle_ms_s = idle(&server);
    println!("redis-server idle: {idle_ms_s:.1} ms of CPU a second (left out below)");
    let statuses: Vec<Spent> = (0..runs).map(|_| status(&server, &db, idle_ms_s)).collect();
    let st = Spent {
        command_ms: median(statuses.iter().map(|s| s.command_ms).collect()),
        inner_ms: 0.0,
        cpu_ms: median(statuses.iter().map(|s| s.cpu_ms).collect()),
        calls: median(statuses.iter().map(|s| s.calls).collect()),
        secs: median(statuses.iter().map(|s| s.secs).collect()),
    };
    println!(
        "status (the baseline): {:.0} ms in commands, {:.0} ms of CPU, {:.0} commands, {:.1} s",
        st.command_ms, st.cpu_ms, st.calls, st.secs
    );
    let ratio = |s: &Spent| (s.command_ms / st.command_ms, s.cpu_ms / st.cpu_ms);
    let mut ok = true;
    // (1) One reader, three runs.
    let ones: Vec<Run> = (0..runs)
        .map(|_| run_readers(&server, &db, 0, 1, &st, idle_ms_s))
        .collect();
    let pick = |f: &dyn Fn(&Run) -> f64, rs: &[Run]| median(rs.iter().map(f).collect());
    let first10 = (
        pick(&|r| ratio(&r.first10).0, &ones),
        pick(&|r| ratio(&r.first10).1, &ones),
    );
    let first60 = (
        pick(&|r| ratio(&r.first60).0, &ones),
        pick(&|r| ratio(&r.first60).1, &ones),
    );
    let settled = (
        pick(&|r| ratio(&r.settled).0, &ones),
        pick(&|r| ratio(&r.settled).1, &ones),
    );
    let cpu = pick(&|r| r.console_cpu, &ones);
    let rss = pick(&|r| r.rss_mb, &ones);
    let after = pick(&|r| r.settled_after, &ones);
    // The issue sets this target at 100,000 products, where a whole read is seconds of Redis;
    // a smaller activity's first read ends inside the 10 s whatever its pace.
    let warm_target = n >= 100_000;
    println!(
        "one reader, first 10 s: {:.3} of a status in commands, {:.3} in CPU  [target <= 1 at 100,000 products: {}]",
        first10.0,
        first10.1,
        if warm_target {
            verdict(first10.0 <= 1.0)
        } else {
            "not set at this size"
        }
    );
    println!(
        "one reader, first 60 s: {:.3} of a status in commands, {:.3} in CPU; first read done after {after:.0} s",
        first60.0, first60.1
    );
    println!(
        "one reader, a settled poll: {:.4} of a status in commands, {:.4} in CPU, {:.0} commands  [target <= 0.02: {}]",
        settled.0,
        settled.1,
        pick(&|r| r.settled.calls, &ones),
        verdict(settled.0 <= 0.02)
    );
    println!(
        "the reader itself, settled: {:.1}% of a core, {rss:.0} MB  [targets <= 10%, <= 300 MB: {}]",
        cpu * 100.0,
        verdict(cpu <= 0.10 && rss <= 300.0)
    );
    ok &= (!warm_target || first10.0 <= 1.0) && settled.0 <= 0.02 && cpu <= 0.10 && rss <= 300.0;
    // (2) Three consoles and an exporter at once.
    let fours: Vec<Run> = (0..runs)
        .map(|_| run_readers(&server, &db, 1, 3, &st, idle_ms_s))
        .collect();
    let four_settled =
        pick(&|r| r.settled.command_ms, &fours) / pick(&|r| r.settled.command_ms, &ones).max(1e-9);
    let four_60 =
        pick(&|r| r.first60.command_ms, &fours) / pick(&|r| r.first60.command_ms, &ones).max(1e-9);
    println!(
        "three watch + an exporter: settled polls {four_settled:.2}x one reader's in commands  [target <= 1.5: {}]; first 60 s {four_60:.2}x",
        verdict(four_settled <= 1.5)
    );
    ok &= four_settled <= 1.5;
    // (3) Selling.
    let sells: Vec<(Spent, f64)> = (0..runs)
        .map(|r| run_selling(&server, &db, &st, idle_ms_s, r))
        .collect();
    let sell_ratio = median(sells.iter().map(|(s, _)| ratio(s).0).collect());
    let lag = median(sells.iter().map(|(_, l)| *l).collect());
    println!(
        "100 products selling {SELL_RATE}/s: a poll {sell_ratio:.4} of a status in commands  [target <= 0.05: {}]; exporter's stock at most {lag:.1} polls behind Redis  [target <= 2: {}]",
        verdict(sell_ratio <= 0.05),
        verdict(lag <= 2.0)
    );
    ok &= sell_ratio <= 0.05 && lag <= 2.0;
    // (4) The sale path, with and without the readers' tracking.
    let requests = env_num("BENCH_REQUESTS", 300_000);
    let sha = server
        .cli(&["SCRIPT", "LOAD", include_str!("../../lua/deduct.lua")])
        .trim()
        .to_string();
    let (mut bare, mut tracked) = (Vec::new(), Vec::new());
    for r in 0..runs {
        // ABAB, then BABA: neither side always goes first.
        for side in [r % 2, 1 - r % 2] {
            let product = format!("hot{}", 2 * r + side);
            if side == 0 {
                bare.push(deduct_rate(&server, &sha, requests, &product));
            } else {
                let readers = Trackers::start(&server, 4, n, &product);
                tracked.push(deduct_rate(&server, &sha, requests, &product));
                drop(readers);
            }
        }
    }
    let rate = |v: &[(f64, f64)]| median(v.iter().map(|x| x.0).collect());
    let cpu = |v: &[(f64, f64)]| median(v.iter().map(|x| x.1).collect());
    let (b, t) = (rate(&bare), rate(&tracked));
    let (bc, tc) = (cpu(&bare), cpu(&tracked));
    println!(
        "deduct.lua on the sale path: {b:.0}/s and {bc:.1} us of Redis CPU a call alone, {t:.0}/s and {tc:.1} us with four readers tracking: {:.3}x the rate, {:.3}x the cost  [target >= 0.97x the rate: {}]",
        t / b,
        tc / bc,
        verdict(t / b >= 0.97)
    );
    ok &= t / b >= 0.97;
    ok
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    if harness::seller::run_if_asked(&rt) {
        return;
    }
    let sizes: Vec<usize> = std::env::var("BENCH_SIZES")
        .unwrap_or_else(|_| "10000,100000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let runs = usize::try_from(env_num("BENCH_RUNS", 3))
        .unwrap_or(3)
        .max(1);
    println!(
        "live view benchmark ({} build), {runs} run(s) of each figure, medians",
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
    );
    let mut all = true;
    for n in sizes {
        all &= bench_size(&rt, n, runs);
    }
    println!(
        "summary: {}",
        if all {
            "every target met"
        } else {
            "a target was MISSED"
        }
    );
}
