//! Scale benchmark (issue 22): one activity of 100,000 products through import, preheat,
//! status, reconcile and fix, on SQLite and (when SECKILL_TEST_PG_URL is set) PostgreSQL,
//! against a private redis-server. Run with `scripts/bench scale`; BENCH_PRODUCTS changes the
//! size.
//!
//! Import and the fix are one run each, through the library; preheat three runs, each of an
//! empty Redis, with redis-server's CPU and the memory the products take. `status` and
//! `reconcile` are the real binary at its default settings (timeouts included), under
//! /usr/bin/time: the first `status` after preheat (no checkpoint yet), then three of each,
//! median. For each run: wall time, exit code, peak memory, redis-server's CPU (`/proc`) and
//! the write commands it ran (`INFO commandstats`: a read where nothing changed writes
//! nothing). Targets: status and reconcile <= 2 s, exit 0, Redis CPU <= 0.5 s, no write,
//! under 300 MB; preheat <= 2 s. BENCH_BASELINE names another build's binary (an earlier
//! commit's `target/release/seckill-console`, copied aside): each `status` and `reconcile` run
//! is then followed by one of that binary on the same data, and the ratios are printed.

#[path = "scale_floor.rs"]
mod floor;
#[path = "../e2e/harness/mod.rs"]
#[allow(unused_imports)]
mod harness;

use harness::fixtures::{commandstats, future_window, preheat_options, standalone};
use harness::procstat::cpu_seconds;
use harness::{RedisServer, TestDb};
use seckill_console::db::activity::import;
use seckill_console::domain::activity::{Activity, ActivityDef, Product};
use seckill_console::domain::{ActivityId, ProductId};
use seckill_console::ops::fix::{FixOptions, fix};
use seckill_console::ops::preheat::preheat;
use seckill_console::ops::progress::Silent;
use seckill_console::ops::status::{StatusOptions, status};
use seckill_console::redis::{KeySpace, Keyed, ProductKeys};
use std::time::{Duration, Instant};

fn verdict(ok: bool) -> &'static str {
    if ok { "met" } else { "MISSED" }
}

/// Commands that write (what a checkpoint save sends, and anything else).
const WRITES: [&str; 9] = [
    "hset",
    "rename",
    "pexpire",
    "pexpireat",
    "persist",
    "del",
    "set",
    "evalsha",
    "eval",
];

/// One run of the real binary.
#[derive(Clone, Copy, Debug)]
struct Run {
    code: i32,
    wall: f64,
    peak_mb: f64,
    redis_cpu: f64,
    writes: u64,
}

impl Run {
    fn line(&self) -> String {
        format!(
            "exit {}, {:.2} s, {:.0} MB, Redis CPU {:.2} s, {} writes",
            self.code, self.wall, self.peak_mb, self.redis_cpu, self.writes
        )
    }

    fn met(&self) -> bool {
        self.code == 0
            && self.wall <= 2.0
            && self.redis_cpu <= 0.5
            && self.writes == 0
            && self.peak_mb < 300.0
    }

    /// Each figure's median (the worst exit code).
    fn median(runs: &[Run; 3]) -> Run {
        let mid = |f: fn(&Run) -> f64| {
            let mut v: Vec<f64> = runs.iter().map(f).collect();
            v.sort_by(f64::total_cmp);
            v[1]
        };
        let mut writes: Vec<u64> = runs.iter().map(|r| r.writes).collect();
        writes.sort_unstable();
        Run {
            code: runs.iter().map(|r| r.code).max().unwrap_or(0),
            wall: mid(|r| r.wall),
            peak_mb: mid(|r| r.peak_mb),
            redis_cpu: mid(|r| r.redis_cpu),
            writes: writes[1],
        }
    }
}

/// `seckill-console --json <command> A` at its default settings, under /usr/bin/time: this
/// build's binary, or with `bin` another (BENCH_BASELINE: an earlier build, for a ratio
/// measured in the same run).
async fn run(
    server: &RedisServer,
    store: &seckill_console::redis::RedisStore,
    db: &TestDb,
    id: &ActivityId,
    (command, bin): (&str, Option<&str>),
) -> Run {
    let pid = server.pid().expect("redis-server pid");
    let before = commandstats(store).await;
    let cpu0 = cpu_seconds(pid);
    let out = std::process::Command::new("/usr/bin/time")
        .args([
            "-f",
            "%e %M",
            bin.unwrap_or(env!("CARGO_BIN_EXE_seckill-console")),
        ])
        .args(["--redis", &server.url(), "--db", &db.url, "--json", command])
        .arg(id.as_str())
        .output()
        .expect("/usr/bin/time seckill-console");
    let redis_cpu = cpu_seconds(pid) - cpu0;
    let after = commandstats(store).await;
    print_top(command, &before, &after);
    let writes = WRITES
        .iter()
        .map(|w| {
            let calls = |s: &std::collections::HashMap<String, (u64, u64)>| {
                s.get(*w).map_or(0, |(c, _)| *c)
            };
            calls(&after).saturating_sub(calls(&before))
        })
        .sum();
    let err = String::from_utf8_lossy(&out.stderr);
    let last = err.lines().last().unwrap_or_default();
    let mut f = last.split_whitespace();
    let wall = f.next().and_then(|v| v.parse().ok()).unwrap_or(f64::NAN);
    let kb: f64 = f.next().and_then(|v| v.parse().ok()).unwrap_or(f64::NAN);
    let code = out.status.code().unwrap_or(-1);
    // /usr/bin/time's own exit code is the command's.
    if code != 0 {
        println!(
            "    {command} exited {code}: {}",
            err.lines().next().unwrap_or_default()
        );
    }
    Run {
        code,
        wall,
        peak_mb: kb / 1024.0,
        redis_cpu,
        writes,
    }
}

type Stats = std::collections::HashMap<String, (u64, u64)>;

/// With BENCH_TOP set, the eight commands that took Redis longest between two readings of
/// `INFO commandstats`.
fn print_top(label: &str, before: &Stats, after: &Stats) {
    if std::env::var("BENCH_TOP").is_err() {
        return;
    }
    let mut top: Vec<(&String, u64, u64)> = after
        .iter()
        .map(|(name, (calls, usec))| {
            let (c0, u0) = before.get(name).copied().unwrap_or((0, 0));
            (name, calls - c0, usec - u0)
        })
        .filter(|(_, calls, _)| *calls > 0)
        .collect();
    top.sort_by_key(|(_, _, usec)| std::cmp::Reverse(*usec));
    for (name, calls, usec) in top.iter().take(8) {
        println!(
            "    {label}: {name} {calls} calls, {:.0} ms",
            *usec as f64 / 1000.0
        );
    }
}

/// `used_memory` of the server (INFO memory), bytes.
fn used_memory(server: &RedisServer) -> i64 {
    server
        .cli(&["INFO", "memory"])
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// Empties the server (synchronously: the next figure of its memory starts from nothing).
fn flush(server: &RedisServer) {
    server.cli(&["FLUSHALL", "SYNC"]);
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let n: usize = std::env::var("BENCH_PRODUCTS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(100_000);
        let server = RedisServer::start();
        let store = standalone(&server.url()).await;
        println!(
            "scale benchmark: {n} products in one activity, redis-server {} (private)",
            server.addr()
        );
        println!(
            "{:<10} {:>10} {:>10} {:>10} {:>12} {:>14}",
            "database", "import", "preheat", "status", "reconcile", "fix 1% drift"
        );
        let mut backends = vec![TestDb::sqlite()];
        backends.extend(TestDb::postgres().await);
        for db in backends {
            let lib = db.open().await;
            let id = ActivityId::parse(&format!("scale{}", db.name())).expect("id");
            let (s, e) = future_window();
            let def = ActivityDef {
                activity: Activity {
                    activity_id: id.clone(),
                    name: "Scale".into(),
                    starts_at: s,
                    ends_at: e,
                    status: seckill_console::domain::activity::ActivityStatus::Scheduled,
                },
                products: (0..n)
                    .map(|i| {
                        let id = ProductId::parse(&format!("p{i:06}")).expect("id");
                        Product::new(id, "", 100, 2)
                    })
                    .collect(),
                status_given: true,
            };
            let keys = KeySpace::default();
            let grace = Duration::from_secs(60);
            let t = Instant::now();
            import(&lib, &def, ("bench", "scale"), &Default::default())
                .await
                .expect("import");
            let t_import = t.elapsed();

            // Three preheats, each of an empty Redis: wall time, redis-server's CPU, and what
            // the products take (`used_memory` after less before, per product).
            let mut preheats: Vec<(Duration, f64, i64)> = Vec::new();
            // The floor beside each round: the same keys written by redis-cli --pipe, one
            // command each with no script, and `first.lua` alone, each on an empty Redis.
            let product_keys: Vec<ProductKeys> = def
                .products
                .iter()
                .map(|p| keys.product(&id, &p.product_id))
                .collect();
            let expire_at = (chrono::Utc::now() + chrono::Duration::days(30)).timestamp_millis();
            let raw_writes = floor::writes(&product_keys, 100, 2, expire_at);
            let sha = floor::load_first(&server);
            let first_calls = floor::first_calls(&sha, &product_keys, 100, 2, expire_at);
            let mut floors: Vec<(f64, f64)> = Vec::new();
            for round in 1..=3 {
                flush(&server);
                let writes_cpu = floor::piped_cpu(&server, &raw_writes);
                flush(&server);
                let first_cpu = floor::piped_cpu(&server, &first_calls);
                println!(
                    "  {}: floor run {round}: writes alone (redis-cli --pipe, no script) Redis CPU {writes_cpu:.2} s; first.lua alone {first_cpu:.2} s",
                    db.name()
                );
                floors.push((writes_cpu, first_cpu));
                flush(&server);
                let pid = server.pid().expect("redis-server pid");
                let mem0 = used_memory(&server);
                let cpu0 = cpu_seconds(pid);
                let stats0 = commandstats(&store).await;
                let t = Instant::now();
                let r = preheat(
                    &store,
                    &lib,
                    &keys,
                    &id,
                    &preheat_options("bench", grace),
                    &Silent,
                )
                .await
                .expect("preheat");
                let took = t.elapsed();
                let cpu = cpu_seconds(pid) - cpu0;
                print_top("preheat", &stats0, &commandstats(&store).await);
                let per_product = (used_memory(&server) - mem0) / n as i64;
                assert_eq!(r.decision, "go", "{:?}", r.reasons);
                println!(
                    "  {}: preheat run {round}: {:.2} s, Redis CPU {cpu:.2} s, {per_product} B of Redis memory per product",
                    db.name(),
                    took.as_secs_f64()
                );
                preheats.push((took, cpu, per_product));
            }
            let mid = |mut v: Vec<f64>| {
                v.sort_by(f64::total_cmp);
                v[1]
            };
            let t_preheat =
                Duration::from_secs_f64(mid(preheats.iter().map(|p| p.0.as_secs_f64()).collect()));
            let preheat_cpu = mid(preheats.iter().map(|p| p.1).collect());
            let (writes_cpu, first_cpu) = (
                mid(floors.iter().map(|f| f.0).collect()),
                mid(floors.iter().map(|f| f.1).collect()),
            );
            println!(
                "  {}: floor, median of 3: writes alone {writes_cpu:.2} s, first.lua alone {first_cpu:.2} s of Redis CPU; the gate's Redis CPU / writes alone {:.2}",
                db.name(),
                preheat_cpu / writes_cpu
            );
            println!(
                "  {}: preheat, median of 3: {:.2} s, Redis CPU {:.2} s, {:.0} B per product (targets: <= 2 s: {}; <= 1 KB a product: {})",
                db.name(),
                t_preheat.as_secs_f64(),
                preheat_cpu,
                mid(preheats.iter().map(|p| p.2 as f64).collect()),
                verdict(t_preheat <= Duration::from_secs(2)),
                verdict(mid(preheats.iter().map(|p| p.2 as f64).collect()) <= 1024.0)
            );

            let opts = StatusOptions {
                grace,
                compensation_alert: Duration::from_secs(30),
                outbox_alert: Duration::from_secs(60),
                gauge: Default::default(),
            };
            let cold = run(&server, &store, &db, &id, ("status", None)).await;
            println!("  {}: first status (no checkpoint yet): {}", db.name(), cold.line());
            let baseline = std::env::var("BENCH_BASELINE").ok();
            let floor_reads = floor::reads(&product_keys);
            let mut reads = Vec::new();
            for command in ["status", "reconcile"] {
                // Each run of this build followed by one of the baseline's, when there is one:
                // the machine's speed drifts by a third over an hour here.
                let mut runs = Vec::new();
                let mut base = Vec::new();
                let mut piped = Vec::new();
                for _ in 0..3 {
                    runs.push(run(&server, &store, &db, &id, (command, None)).await);
                    piped.push(floor::piped_cpu(&server, &floor_reads));
                    if let Some(bin) = &baseline {
                        base.push(run(&server, &store, &db, &id, (command, Some(bin))).await);
                    }
                }
                for (i, (r, p)) in runs.iter().zip(&piped).enumerate() {
                    println!(
                        "  {}: {command} run {}: {}; the cut's reads alone (redis-cli --pipe) Redis CPU {p:.2} s",
                        db.name(),
                        i + 1,
                        r.line()
                    );
                }
                let runs: [Run; 3] = runs.try_into().expect("three runs");
                let m = Run::median(&runs);
                let p = mid(piped);
                println!(
                    "  {}: {command}, median of 3: {} (targets: exit 0, <= 2 s, Redis CPU <= 0.5 s, no write, < 300 MB: {}); the cut's reads alone {p:.2} s of Redis CPU, {command} / reads alone {:.2}",
                    db.name(),
                    m.line(),
                    verdict(m.met()),
                    m.redis_cpu / p
                );
                if let Ok(base) = <[Run; 3]>::try_from(base) {
                    for (i, r) in base.iter().enumerate() {
                        println!("  {}: {command} baseline run {}: {}", db.name(), i + 1, r.line());
                    }
                    let b = Run::median(&base);
                    println!(
                        "  {}: {command} baseline, median of 3: {}; this build / baseline: wall {:.3}, Redis CPU {:.3}",
                        db.name(),
                        b.line(),
                        m.wall / b.wall,
                        m.redis_cpu / b.redis_cpu
                    );
                }
                reads.push(m);
            }

            // Lost writes on 1% of the products, then one fix of the whole activity.
            let drifted: Vec<Keyed> = (0..n)
                .step_by(100)
                .map(|i| {
                    let k = keys.product(&id, &ProductId::parse(&format!("p{i:06}")).expect("id"));
                    Keyed::new(&k.stock, redis::cmd("INCRBY").arg(&k.stock).arg(3).clone())
                })
                .collect();
            let count = drifted.len();
            for r in store.pipeline(drifted).await {
                r.expect("INCRBY");
            }
            let t = Instant::now();
            let f = fix(
                &store,
                &lib,
                &keys,
                &id,
                &FixOptions {
                    product: None,
                    preview: false,
                    actor: "bench".into(),
                    grace,
                    confirmed: None,
                    key_ttl_days: 7,
                    interleave: Default::default(),
                },
            )
            .await
            .expect("fix");
            let t_fix = t.elapsed();
            assert_eq!(f.products.iter().filter(|p| p.applied).count(), count);
            let t_status = reads[0].wall;
            let t_reconcile = reads[1].wall;
            let after = status(&store, &lib, &keys, &id, &opts)
                .await
                .expect("status");
            assert!(after.all_ok());

            let ms = |d: Duration| format!("{:.0} ms", d.as_secs_f64() * 1000.0);
            println!(
                "{:<10} {:>10} {:>10} {:>10} {:>12} {:>14}",
                db.name(),
                ms(t_import),
                ms(t_preheat),
                format!("{:.0} ms", t_status * 1000.0),
                format!("{:.0} ms", t_reconcile * 1000.0),
                ms(t_fix)
            );
            lib.close().await;
            let mut c = redis::Client::open(server.url())
                .expect("client")
                .get_multiplexed_async_connection()
                .await
                .expect("conn");
            let _: () = redis::cmd("FLUSHALL")
                .arg("ASYNC")
                .query_async(&mut c)
                .await
                .expect("flush");
        }
    });
}
