//! Worker throughput benchmark, on a private redis-server, all in one run:
//!
//! 1. `redis-benchmark` running EVALSHA of the project's own `lua/deduct.lua` at -P 16 against
//!    a hot product (10,000 units, then sold out), 1,000,000 requests with random request and
//!    user ids;
//! 2. the worker (`seckill-console load`, the real binary) running the same script at 256 in
//!    flight on the same product and server, 1,000,000 requests, writing each sale's order and
//!    outbox row to SQLite; its peak memory is sampled from /proc;
//! 3. `redis-benchmark` running a bare 8-line deduct script the same way (the cost of safety);
//! 4. all sales (issue 22), three rounds, each on an activity of its own whose one product has
//!    a unit for every request: `redis-benchmark` of `deduct.lua`, the same script without its
//!    event (the deduction as it was before the stream: what the stream costs a sale), and the
//!    worker, every request a sale with its order written to SQLite. Medians of the three and
//!    the median of the per-round ratios.
//!
//! redis-server runs on a core of its own (the last CPU, real-time priority) and everything else
//! on the others, `redis-benchmark` and the worker alike: on this 2-core machine the worker's
//! threads (the buyers' dispatcher, SQLite's writers of every order and payment) otherwise
//! preempt Redis and move it between cores, and the all-sales ratio measured the scheduler
//! (0.74 to 0.96 from run to run with the same code) more than the worker. Each all-sales round
//! also gives Redis's own CPU per request (`INFO cpu`) for both, so a gap that Redis's work
//! explains shows as such.
//!
//! Run with `scripts/bench worker`. Set BENCH_REQUESTS to change the hot product's request
//! count, BENCH_SALES the all-sales rounds' (300,000 by default).

#[path = "../e2e/harness/mod.rs"]
#[allow(unused_imports)]
mod harness;

use harness::fixtures::{activity_toml, live_window, product_keys, write_file};
use harness::{RedisServer, TestDb};
use seckill_console::redis::scripts::DEDUCT;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The minimal deduction: no ledger, no limit, no idempotency, no argument checks.
const BARE: &str = "local stock = tonumber(redis.call('GET', KEYS[1]))
if stock == nil then return -1 end
local n = tonumber(ARGV[3])
if stock < n then return -2 end
redis.call('DECRBY', KEYS[1], n)
return stock - n
-- bare: the 8-line deduct of seed doc 003 section 3.1
";

fn redis_benchmark(server: &RedisServer, requests: usize, sha: &str, keys: &[String]) -> f64 {
    let mut cmd = Command::new("redis-benchmark");
    cmd.args([
        "-h",
        "127.0.0.1",
        "-p",
        &server.port.to_string(),
        "-n",
        &requests.to_string(),
    ]);
    cmd.args([
        "-P",
        "16",
        "-r",
        "100000000",
        "-q",
        "EVALSHA",
        sha,
        &keys.len().to_string(),
    ]);
    cmd.args(keys);
    cmd.args(["req:__rand_int__", "user:__rand_int__", "1"]);
    let out = cmd.stderr(Stdio::null()).output().expect("redis-benchmark");
    let text = String::from_utf8_lossy(&out.stdout);
    harness::redis_benchmark::rate(&text)
        .unwrap_or_else(|| panic!("cannot read redis-benchmark output: {text}"))
}

/// Runs the worker (`load`, the real binary) on `activity` with `requests` buyers at 256 in
/// flight; its JSON summary and its peak resident memory (kB, sampled from /proc).
fn run_worker(
    bin: &str,
    server: &RedisServer,
    db_url: &str,
    activity: &str,
    requests: usize,
) -> (serde_json::Value, u64) {
    let mut child = Command::new(bin)
        .args([
            "--redis",
            &server.url(),
            "--db",
            db_url,
            "--json",
            "load",
            activity,
        ])
        .args([
            "--buyers",
            &requests.to_string(),
            "--concurrency",
            "256",
            "--repeat-share",
            "0",
            "--pay-share",
            "1",
            "--yes",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("load");
    let pid = child.id();
    let mut peak_kb = 0u64;
    while child.try_wait().ok().flatten().is_none() {
        if let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status"))
            && let Some(kb) = status
                .lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
        {
            peak_kb = peak_kb.max(kb);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("load output");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("load JSON");
    (doc, peak_kb)
}

/// `deduct.lua` as it was before the event stream: the same checks and writes, no XADD (the
/// ledger entry takes the time instead of the event id).
fn without_event(script: &str) -> String {
    let line = "local at = call('XADD', KEYS[5], '*', 'd', qty .. '|' .. rid)";
    assert!(
        script.contains(line),
        "deduct.lua no longer has its XADD line"
    );
    script.replace(line, "local at = call('TIME')[1]")
}

/// redis-server's CPU so far (`INFO cpu`: user and system, seconds).
fn redis_cpu_secs(server: &RedisServer) -> f64 {
    server
        .cli(&["INFO", "cpu"])
        .lines()
        .filter_map(|l| l.trim().split_once(':'))
        .filter(|(k, _)| *k == "used_cpu_user" || *k == "used_cpu_sys")
        .filter_map(|(_, v)| v.parse::<f64>().ok())
        .sum()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let requests: usize = std::env::var("BENCH_REQUESTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000);
    let server = RedisServer::start();
    let pinned = harness::pin::redis_apart(&server);
    let db = TestDb::sqlite();
    let dir = tempfile::tempdir().expect("tmp");
    let (s, e) = live_window();
    let file = write_file(
        dir.path(),
        "hot.toml",
        &activity_toml("hot", &[("item", 10_000, 1)], s, e),
    );
    let bin = env!("CARGO_BIN_EXE_seckill-console");
    let console = |args: &[&str]| {
        let out = Command::new(bin)
            .args(["--redis", &server.url(), "--db", &db.url])
            .args(args)
            .output()
            .expect("seckill-console");
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    console(&["activity", "import", file.to_str().expect("utf8")]);
    let keys = product_keys("hot", "item");
    let script_keys: Vec<String> = keys.script_keys().iter().map(|k| k.to_string()).collect();
    let reset = || {
        server.cli(&["FLUSHALL"]);
        console(&["preheat", "hot"]);
    };
    println!(
        "worker benchmark: redis-server {} (private), {requests} requests per run, one hot product of 10,000 units; redis-server on a core of its own: {}",
        server.addr(),
        if pinned { "yes" } else { "no (not permitted)" }
    );

    reset();
    let bench_rate = redis_benchmark(&server, requests, DEDUCT.sha(), &script_keys);

    reset();
    let started = Instant::now();
    let (doc, peak_kb) = run_worker(bin, &server, &db.url, "hot", requests);
    let worker_rate = doc["ops_per_sec"].as_f64().unwrap_or(0.0);
    let p99 = doc["p99_ms"].as_f64().unwrap_or(f64::MAX);
    let took = started.elapsed();

    server.cli(&["FLUSHALL"]);
    console(&["preheat", "hot"]);
    let bare_sha = server.cli(&["SCRIPT", "LOAD", BARE]).trim().to_string();
    let bare_rate = redis_benchmark(&server, requests, &bare_sha, &script_keys);

    println!("{:<44} {:>12}", "run", "requests/s");
    println!(
        "{:<44} {:>12.0}",
        "redis-benchmark EVALSHA deduct.lua -P 16", bench_rate
    );
    println!(
        "{:<44} {:>12.0}  (p50 {} ms, p99 {p99} ms, sold {}, {:.1} s)",
        "worker lua, 256 in flight",
        worker_rate,
        doc["p50_ms"],
        doc["sold"],
        took.as_secs_f64()
    );
    println!(
        "{:<44} {:>12.0}",
        "redis-benchmark EVALSHA bare 8-line script", bare_rate
    );
    let ratio = worker_rate / bench_rate;
    let safety = bench_rate / bare_rate;
    let mb = peak_kb as f64 / 1024.0;
    println!(
        "worker / redis-benchmark: {ratio:.3} (target >= 0.95: {})",
        if ratio >= 0.95 { "met" } else { "MISSED" }
    );
    println!(
        "worker p99: {p99} ms (target < 3 ms: {})",
        if p99 < 3.0 { "met" } else { "MISSED" }
    );
    println!(
        "deduct.lua / bare script: {safety:.3} (target >= 0.7: {})",
        if safety >= 0.7 { "met" } else { "MISSED" }
    );
    println!(
        "worker peak memory: {mb:.1} MB over {requests} requests (target < 100 MB: {})",
        if mb < 100.0 { "met" } else { "MISSED" }
    );
    all_sales(bin, &server, &db.url, dir.path(), &console);
}

/// Issue 22's all-sales rounds: every request a sale (a product with a unit for each), the
/// worker against `redis-benchmark` of the same script, and the script against itself without
/// its event.
fn all_sales(
    bin: &str,
    server: &RedisServer,
    db_url: &str,
    dir: &std::path::Path,
    console: &dyn Fn(&[&str]) -> String,
) {
    let sales: usize = std::env::var("BENCH_SALES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300_000);
    let no_event_sha = server
        .cli(&["SCRIPT", "LOAD", &without_event(DEDUCT.body)])
        .trim()
        .to_string();
    println!();
    println!(
        "all sales: {sales} requests per run, one product of {sales} units (a unit for every request), three rounds"
    );
    println!(
        "{:<6} {:>16} {:>16} {:>12} {:>8} {:>10} {:>10} {:>22}",
        "round",
        "redis-benchmark",
        "without event",
        "worker",
        "ratio",
        "p99 ms",
        "sold",
        "Redis CPU us/request"
    );
    let (mut bench, mut bare, mut worker, mut ratios) = (vec![], vec![], vec![], vec![]);
    for round in 1..=3 {
        // An activity of its own each round: the orders of the round before stay in the
        // database, and a preheat of the same activity would count them as sold.
        let id = format!("sales{round}");
        let (s, e) = live_window();
        let file = write_file(
            dir,
            &format!("{id}.toml"),
            &activity_toml(&id, &[("item", sales as i64, 1)], s, e),
        );
        console(&["activity", "import", file.to_str().expect("utf8")]);
        let keys = product_keys(&id, "item");
        let script_keys: Vec<String> = keys.script_keys().iter().map(|k| k.to_string()).collect();
        let reset = || {
            server.cli(&["FLUSHALL"]);
            console(&["preheat", &id]);
        };
        reset();
        let cpu = redis_cpu_secs(server);
        let b = redis_benchmark(server, sales, DEDUCT.sha(), &script_keys);
        let b_us = (redis_cpu_secs(server) - cpu) * 1e6 / sales as f64;
        reset();
        let n = redis_benchmark(server, sales, &no_event_sha, &script_keys);
        reset();
        let cpu = redis_cpu_secs(server);
        let (doc, _) = run_worker(bin, server, db_url, &id, sales);
        let w_us = (redis_cpu_secs(server) - cpu) * 1e6 / sales as f64;
        let w = doc["ops_per_sec"].as_f64().unwrap_or(0.0);
        let sold = doc["sold"].as_i64().unwrap_or(0);
        println!(
            "{round:<6} {b:>16.0} {n:>16.0} {w:>12.0} {:>8.3} {:>10} {sold:>10} {:>22}",
            w / b,
            doc["p99_ms"],
            format!("{b_us:.1} / worker {w_us:.1}")
        );
        // Every request a sale: a run that sold out early or refused buyers measures another
        // path.
        assert!(
            sold as f64 >= sales as f64 * 0.99,
            "round {round}: the worker sold {sold} of {sales}: not the all-sales path"
        );
        ratios.push(w / b);
        bench.push(b);
        bare.push(n);
        worker.push(w);
    }
    let (b, n, w, r) = (median(bench), median(bare), median(worker), median(ratios));
    println!("median: redis-benchmark {b:.0}/s, without the event {n:.0}/s, the worker {w:.0}/s");
    println!(
        "worker / redis-benchmark, all sales: {r:.3} (median of the rounds' ratios; target >= 0.9: {})",
        if r >= 0.9 { "met" } else { "MISSED" }
    );
    println!(
        "deduct.lua / the same without its event: {:.3} (what the stream costs a sale)",
        b / n
    );
}
