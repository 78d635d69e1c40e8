//! The exporter's footprint (issue 23, acceptance 2). Run with `scripts/bench exporter`;
//! BENCH_SECS (default 30) sizes each window, BENCH_WARM (default 45) the warm-up,
//! BENCH_UNITS (default 1,000,000) the footprint sale, BENCH_ONLY=quiet|footprint one set-up.
//!
//! Two set-ups on a private redis-server (SLOWLOG at 1 ms) and a SQLite file:
//! - quiet: one live activity of 10,000 products, preheated, 2,000 orders, nothing selling;
//! - footprint: one product sold BENCH_UNITS times by `deduct.lua`, the orders of all but the
//!   newest 0.1% written (the footprint benchmark's set-up: orders lagging), grace 3,600 s.
//!
//! redis-server then runs on a core of its own at real-time priority, the console on the other
//! (as in production, where Redis has a host of its own). On each, the real binary runs `--read-only exporter --interval 1` and, as the baseline,
//! `--read-only watch --interval 1` (the live view's poller on its own), both warm. Then three
//! windows of each, alternating, the other one stopped (SIGSTOP) meanwhile: during the
//! exporter's windows 10 clients scrape `/metrics` once a second each, and a third window
//! each run has the exporter unscraped (the control: what its polls alone cost Redis).
//! Measured per window:
//! redis-server's CPU (`/proc`, its idle housekeeping included, in ticks of 10 ms) per poll,
//! the time Redis spent in the commands and their number per poll (`INFO commandstats`: the
//! ratio against `watch` is taken on this time, which the tick does not blur), every
//! command slower than 1 ms (SLOWLOG), the console's own CPU, and each scrape's time from
//! connect to the last byte. Reported: medians of the three windows, the exporter against
//! `watch`, and the scrapes' p50 / p99 over all three windows.
//!
//! Targets: no command over 1 ms; Redis's command time per poll within the live view's
//! (ratio to `watch` <= 1.1);
//! scrape p99 < 10 ms.

#[path = "../e2e/harness/mod.rs"]
#[allow(unused_imports)]
mod harness;

use harness::fixtures::{buy, import, live_window, preheat_go, sell_one_each, standalone};
use harness::procstat::cpu_seconds;
use harness::{RedisServer, TestDb};
use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const CLIENTS: usize = 10;
const SCRAPE_TARGET_MS: f64 = 10.0;
const RATIO_TARGET: f64 = 1.1;

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn verdict(ok: bool) -> &'static str {
    if ok { "met" } else { "MISSED" }
}

fn signal(child: &Child, sig: &str) {
    let _ = Command::new("kill")
        .args([&format!("-{sig}"), &child.id().to_string()])
        .status();
}

/// Commands served so far (`INFO commandstats`).
fn calls(server: &RedisServer) -> u64 {
    server
        .cli(&["INFO", "commandstats"])
        .lines()
        .filter_map(|l| l.split("calls=").nth(1))
        .filter_map(|r| r.split(',').next()?.parse::<u64>().ok())
        .sum()
}

/// Microseconds Redis spent executing commands so far (`INFO commandstats`).
fn usec(server: &RedisServer) -> u64 {
    server
        .cli(&["INFO", "commandstats"])
        .lines()
        .filter_map(|l| l.split("usec=").nth(1))
        .filter_map(|r| r.split(',').next()?.parse::<u64>().ok())
        .sum()
}

/// SLOWLOG entries since the last reset: (microseconds, command).
fn slowlog(server: &RedisServer) -> Vec<(u64, String)> {
    let raw = server.cli(&["SLOWLOG", "GET", "1000"]);
    // redis-cli prints each entry's fields on lines of their own: id, time, duration, the
    // command's arguments, client address, client name. The duration follows the time.
    let lines: Vec<&str> = raw.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i + 3 < lines.len() {
        if let (Ok(_), Ok(_), Ok(us)) = (
            lines[i].trim().parse::<u64>(),
            lines[i + 1].trim().parse::<u64>(),
            lines[i + 2].trim().parse::<u64>(),
        ) && us >= 1000
        {
            out.push((us, lines[i + 3].trim().to_string()));
            i += 4;
            continue;
        }
        i += 1;
    }
    out
}

/// What one window measured.
struct Window {
    /// redis-server's CPU (`/proc`: its idle housekeeping included) per poll.
    redis_ms_per_poll: f64,
    /// The time Redis spent in the commands themselves per poll (`INFO commandstats`).
    exec_ms_per_poll: f64,
    calls_per_poll: f64,
    console_cpu: f64,
    slow: Vec<(u64, String)>,
    scrapes: Vec<f64>,
    bytes: usize,
}

/// One `GET /metrics`: milliseconds from connect to the last byte, and the body's size.
fn scrape(port: u16) -> Option<(f64, usize)> {
    let t = Instant::now();
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .ok()?;
    let mut raw = Vec::with_capacity(1 << 20);
    s.read_to_end(&mut raw).ok()?;
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    raw.starts_with(b"HTTP/1.1 200").then_some((ms, raw.len()))
}

/// A window of `secs` on `who` (its pid), with `CLIENTS` scrapers on `scrape_port` if given.
fn window(server: &RedisServer, who: &Child, secs: u64, scrape_port: Option<u16>) -> Window {
    let redis_pid = server.pid().expect("redis pid");
    server.cli(&["SLOWLOG", "RESET"]);
    let (r0, c0, k0, u0) = (
        cpu_seconds(redis_pid),
        cpu_seconds(who.id()),
        calls(server),
        usec(server),
    );
    let started = Instant::now();
    let samples: Arc<Mutex<Vec<(f64, usize)>>> = Arc::default();
    let mut scrapers = Vec::new();
    for k in 0..scrape_port.map_or(0, |_| CLIENTS) {
        let Some(port) = scrape_port else { break };
        let samples = Arc::clone(&samples);
        scrapers.push(std::thread::spawn(move || {
            // Spread over the second, as ten Prometheus servers' schedules are.
            std::thread::sleep(Duration::from_millis(k as u64 * 97));
            let until = Instant::now() + Duration::from_secs(secs);
            while Instant::now() < until {
                let tick = Instant::now();
                if let Some(s) = scrape(port) {
                    samples.lock().expect("samples").push(s);
                }
                std::thread::sleep(Duration::from_secs(1).saturating_sub(tick.elapsed()));
            }
        }));
    }
    std::thread::sleep(Duration::from_secs(secs));
    for s in scrapers {
        let _ = s.join();
    }
    let wall = started.elapsed().as_secs_f64();
    let redis = cpu_seconds(redis_pid) - r0;
    let console = cpu_seconds(who.id()) - c0;
    let sent = calls(server) - k0;
    let executed = usec(server) - u0;
    let got = samples.lock().expect("samples").clone();
    // One poll a second.
    Window {
        redis_ms_per_poll: redis / wall * 1000.0,
        exec_ms_per_poll: executed as f64 / 1000.0 / wall,
        calls_per_poll: sent as f64 / wall,
        console_cpu: console / wall,
        slow: slowlog(server),
        scrapes: got.iter().map(|s| s.0).collect(),
        bytes: got.last().map_or(0, |s| s.1),
    }
}

fn console(server: &RedisServer, db: &TestDb, grace: &str, rest: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_seckill-console"))
        .args(["--redis", &server.url(), "--db", &db.url, "--read-only"])
        .args(["--grace-secs", grace])
        .args(rest)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the console")
}

fn healthy(port: u16) -> bool {
    let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = s.write_all(b"GET /healthz HTTP/1.1\r\n\r\n");
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.starts_with("HTTP/1.1 200")
}

/// The two processes warm, then three windows of each, alternating; prints the figures and
/// returns whether the targets hold.
fn measure(label: &str, server: &RedisServer, db: &TestDb, activity: &str, grace: &str) -> bool {
    let secs = env_num("BENCH_SECS", 30);
    let warm = env_num("BENCH_WARM", 45);
    println!(
        "[{label}] redis-server on a core of its own: {}",
        if harness::pin::redis_apart(server) {
            "yes"
        } else {
            "no (not permitted)"
        }
    );
    let port = harness::redis_server::free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut exporter = console(
        server,
        db,
        grace,
        &["exporter", "--listen", &listen, "--interval", "1", activity],
    );
    let mut watch = console(server, db, grace, &["watch", activity, "--interval", "1"]);
    let t = Instant::now();
    while !healthy(port) {
        assert!(
            t.elapsed() < Duration::from_secs(600),
            "the exporter never became healthy"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    println!(
        "[{label}] exporter healthy after {:.1} s; warming {warm} s more",
        t.elapsed().as_secs_f64()
    );
    std::thread::sleep(Duration::from_secs(warm));
    let (mut ex, mut base, mut quiet) = (Vec::new(), Vec::new(), Vec::new());
    for run in 1..=3 {
        signal(&watch, "STOP");
        std::thread::sleep(Duration::from_secs(2));
        let e = window(server, &exporter, secs, Some(port));
        // The control: the same exporter's polls with nobody scraping.
        let alone = window(server, &exporter, secs, None);
        signal(&watch, "CONT");
        signal(&exporter, "STOP");
        std::thread::sleep(Duration::from_secs(2));
        let w = window(server, &watch, secs, None);
        signal(&exporter, "CONT");
        let mut sorted = e.scrapes.clone();
        sorted.sort_by(f64::total_cmp);
        println!(
            "[{label}] run {run}: exporter Redis {:.2} ms/poll (commands {:.2} ms, {:.0} of them), console {:.1}% of a core, {} slow, scrapes {} p99 {:.2} ms ({} KB); watch Redis {:.2} ms/poll (commands {:.2} ms, {:.0}), {} slow",
            e.redis_ms_per_poll,
            e.exec_ms_per_poll,
            e.calls_per_poll,
            e.console_cpu * 100.0,
            e.slow.len(),
            sorted.len(),
            percentile(&sorted, 0.99),
            e.bytes / 1024,
            w.redis_ms_per_poll,
            w.exec_ms_per_poll,
            w.calls_per_poll,
            w.slow.len()
        );
        println!(
            "[{label}] run {run}: the exporter unscraped: Redis {:.2} ms/poll (commands {:.2} ms), {} slow",
            alone.redis_ms_per_poll,
            alone.exec_ms_per_poll,
            alone.slow.len()
        );
        for (us, cmd) in e.slow.iter().chain(&w.slow).chain(&alone.slow).take(5) {
            println!("    slow: {us} us {cmd}");
        }
        ex.push(e);
        base.push(w);
        quiet.push(alone);
    }
    let _ = exporter.kill();
    let _ = watch.kill();
    let _ = exporter.wait();
    let _ = watch.wait();
    let e_ms = median(ex.iter().map(|w| w.redis_ms_per_poll).collect());
    let e_exec = median(ex.iter().map(|w| w.exec_ms_per_poll).collect());
    let w_exec = median(base.iter().map(|w| w.exec_ms_per_poll).collect());
    let w_ms = median(base.iter().map(|w| w.redis_ms_per_poll).collect());
    let ratio = median(
        ex.iter()
            .zip(&base)
            .map(|(e, w)| e.exec_ms_per_poll / w.exec_ms_per_poll)
            .collect(),
    );
    let unscraped = median(
        quiet
            .iter()
            .zip(&base)
            .map(|(q, w)| q.exec_ms_per_poll / w.exec_ms_per_poll)
            .collect(),
    );
    let q_exec = median(quiet.iter().map(|w| w.exec_ms_per_poll).collect());
    println!(
        "[{label}] the exporter unscraped: commands {q_exec:.2} ms/poll, ratio to watch {unscraped:.2}; scraped by {CLIENTS} clients: ratio {ratio:.2} (the scrapes' copying shares the machine's cache and memory with Redis)"
    );
    let mut all: Vec<f64> = ex.iter().flat_map(|w| w.scrapes.clone()).collect();
    all.sort_by(f64::total_cmp);
    let p99 = percentile(&all, 0.99);
    let slow = ex.iter().chain(&quiet).map(|w| w.slow.len()).sum::<usize>();
    let slow_base = base.iter().map(|w| w.slow.len()).sum::<usize>();
    let cpu = median(ex.iter().map(|w| w.console_cpu).collect());
    println!(
        "[{label}] medians of 3: exporter Redis {e_ms:.2} ms/poll (commands {e_exec:.2} ms), watch {w_ms:.2} ms/poll (commands {w_exec:.2} ms), ratio {ratio:.2} (target <= {RATIO_TARGET}: {}); exporter {:.1}% of a core; scrapes: {} by {CLIENTS} clients, p50 {:.2} ms, p99 {p99:.2} ms (target < {SCRAPE_TARGET_MS}: {}), {} KB each; commands over 1 ms: {slow} (watch {slow_base}) ({})",
        verdict(ratio <= RATIO_TARGET),
        cpu * 100.0,
        all.len(),
        percentile(&all, 0.5),
        verdict(p99 < SCRAPE_TARGET_MS),
        ex.last().map_or(0, |w| w.bytes / 1024),
        verdict(slow == 0),
    );
    ratio <= RATIO_TARGET && p99 < SCRAPE_TARGET_MS && slow == 0
}

async fn quiet_setup(server: &RedisServer, db: &TestDb) {
    let lib = db.open().await;
    let store = standalone(&server.url()).await;
    let products: Vec<(String, i64, i64)> = (0..10_000)
        .map(|i| (format!("sku-{i:05}"), 100, 2))
        .collect();
    let refs: Vec<(&str, i64, i64)> = products
        .iter()
        .map(|(p, s, l)| (p.as_str(), *s, *l))
        .collect();
    import(&lib, "quiet", &refs, live_window()).await;
    preheat_go(&store, &lib, "quiet", Duration::from_secs(60)).await;
    for i in 0..2_000 {
        let p = format!("sku-{:05}", (i * 7) % 10_000);
        buy(
            &store,
            &lib,
            "quiet",
            &p,
            &format!("req-{i}"),
            &format!("u{i}"),
            1,
        )
        .await;
    }
    lib.close().await;
}

/// The footprint benchmark's sale: `units` deductions, one per buyer; the orders of all but the
/// newest 0.1%.
async fn footprint_setup(server: &RedisServer, db: &TestDb, units: usize) {
    let lib = db.open().await;
    let store = standalone(&server.url()).await;
    import(&lib, "fp", &[("item", units as i64, 1)], live_window()).await;
    preheat_go(&store, &lib, "fp", Duration::from_secs(3600)).await;
    // The held orders stay unwritten: their deductions read as in flight, then orphaned.
    sell_one_each(&store, &lib, ("fp", "item"), units, (units / 1000).max(1)).await;
    lib.close().await;
}

fn main() {
    let only = std::env::var("BENCH_ONLY").unwrap_or_default();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let slow_args = [
        "--slowlog-log-slower-than",
        "1000",
        "--slowlog-max-len",
        "1000",
    ];
    let mut ok = true;
    println!(
        "exporter benchmark ({}): the exporter against watch, both --interval 1, {CLIENTS} clients scraping once a second",
        chrono::Utc::now().format("%Y-%m-%d")
    );
    if only.is_empty() || only == "quiet" {
        let server = RedisServer::start_with(&slow_args);
        let db = TestDb::sqlite();
        rt.block_on(quiet_setup(&server, &db));
        ok &= measure("10,000 quiet products", &server, &db, "quiet", "60");
    }
    if only.is_empty() || only == "footprint" {
        let units = usize::try_from(env_num("BENCH_UNITS", 1_000_000)).unwrap_or(1_000_000);
        let server = RedisServer::start_with(&slow_args);
        let db = TestDb::sqlite();
        let t = Instant::now();
        rt.block_on(footprint_setup(&server, &db, units));
        println!(
            "[footprint] {units} units sold, orders lagging by 0.1%, in {:.0} s",
            t.elapsed().as_secs_f64()
        );
        ok &= measure(
            &format!("one product, {units} units sold"),
            &server,
            &db,
            "fp",
            "3600",
        );
    }
    println!(
        "exporter: {}",
        if ok {
            "all targets met"
        } else {
            "a target MISSED"
        }
    );
}
